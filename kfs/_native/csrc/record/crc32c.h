/* A batch's CRC-32C with SSE 4.2's crc32 instruction, and PCLMULQDQ where there is one (crc32c.c): what the compiled walks check each
 * batch with, without the GIL. */

#ifndef KFS_CRC32C_H
#define KFS_CRC32C_H

#include "../native.h"

/* CRC-32C of n bytes, when this machine has the instruction (kfs_have_hw_crc32c). */
KFS_HIDDEN uint32_t kfs_crc32c_hw(const uint8_t *p, size_t n);
KFS_HIDDEN int kfs_have_hw_crc32c(void);
KFS_HIDDEN void kfs_init_crc32c(void); /* the three-lane tables and folding constants, once, at import */

#endif /* KFS_CRC32C_H */
