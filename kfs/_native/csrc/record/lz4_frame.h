/* Kafka's LZ4 frames, decompressed by liblz4 itself (lz4_frame.c). */

#ifndef KFS_LZ4_FRAME_H
#define KFS_LZ4_FRAME_H

#include "../native.h"

/* liblz4's LZ4_decompress_safe (NULL: no liblz4 here), loaded by kfs_load_lz4 (with the GIL), and
 * Kafka's LZ4 frames decompressed with it. */
typedef int (*lz4_decompress_fn)(const char *src, char *dst, int compressed_size, int dst_capacity);
KFS_HIDDEN extern lz4_decompress_fn kfs_lz4_decompress_safe;
KFS_HIDDEN void kfs_load_lz4(void);
KFS_HIDDEN int64_t kfs_lz4_frame_into(const uint8_t *src, Py_ssize_t end, rawbuf *out);

#endif /* KFS_LZ4_FRAME_H */
