/* Kafka's LZ4 frames decompressed with the system's liblz4, for walk_v2_run (lz4_frame.h declares it). */

#include "lz4_frame.h"

#include <dlfcn.h>

/* Kafka's LZ4 frames (KafkaLZ4BlockOutputStream: independent blocks), decompressed here so that a
 * compressed batch does not end the run: with liblz4 itself, the reference implementation (the
 * library the `lz4` package wraps), loaded at run time from the system (liblz4.so.1), so that the
 * build needs no lz4 headers; without it lz4 batches are the Python walk's. The frame is read as
 * kfs/record/compression.py's _lz4 reads it (the header checksum and block checksums not verified,
 * as there); anything else it would reject, or that it handles otherwise (linked blocks), is
 * declined, and the Python walk raises or decodes it. */
lz4_decompress_fn kfs_lz4_decompress_safe = NULL;
static int lz4_tried = 0;

void
kfs_load_lz4(void) /* with the GIL, once */
{
    if (lz4_tried)
        return;
    lz4_tried = 1;
    void *lib = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL)
        kfs_lz4_decompress_safe = (lz4_decompress_fn)dlsym(lib, "LZ4_decompress_safe");
}

static inline uint32_t
load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define RUN_MAX_BATCH_BYTES (INT64_C(64) << 20) /* compression.py MAX_BATCH_BYTES */

/* The frame at src[0:end] decompressed into out (emptied first): its length, -1 to decline, or
 * RENDER_NO_MEMORY. */
int64_t
kfs_lz4_frame_into(const uint8_t *src, Py_ssize_t end, rawbuf *out)
{
    out->len = 0;
    if (end < 7 || load_le32(src) != 0x184D2204u)
        return -1;
    const uint8_t flg = src[4], bd = src[5];
    if ((flg & 0xC0) != 0x40 || !(flg & 0x20))
        return -1; /* another version, or linked blocks: compression.py's */
    static const size_t max_blocks[8] = {0, 0, 0, 0, 64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024};
    const size_t max_block = max_blocks[(bd >> 4) & 7];
    if (max_block == 0)
        return -1;
    Py_ssize_t pos = 6 + ((flg & 0x08) ? 8 : 0) + ((flg & 0x01) ? 4 : 0) + 1;
    const Py_ssize_t checksum = (flg & 0x10) ? 4 : 0;
    for (;;) {
        if (pos + 4 > end)
            return -1;
        uint32_t n = load_le32(src + pos);
        pos += 4;
        if (n == 0)
            return (int64_t)out->len;
        const int stored = (n & 0x80000000u) != 0;
        n &= 0x7FFFFFFFu;
        if ((int64_t)n + checksum > (int64_t)(end - pos))
            return -1;
        if (stored) {
            if ((int64_t)n > RUN_MAX_BATCH_BYTES - (int64_t)out->len)
                return -1;
            if (rb_reserve(out, n) < 0)
                return RENDER_NO_MEMORY;
            memcpy(out->buf + out->len, src + pos, n);
            out->len += n;
        }
        else {
            if (rb_reserve(out, max_block) < 0)
                return RENDER_NO_MEMORY;
            int got = kfs_lz4_decompress_safe((const char *)src + pos, out->buf + out->len, (int)n, (int)max_block);
            if (got < 0)
                return -1;
            out->len += (size_t)got;
        }
        if ((int64_t)out->len > RUN_MAX_BATCH_BYTES)
            return -1; /* compression.py raises BatchTooLargeError */
        pos += (Py_ssize_t)n + checksum;
    }
}
