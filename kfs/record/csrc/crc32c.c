/* CRC-32C of a batch, without the GIL, for walk_v2_run (speedups.h declares it). */

#include "speedups.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KFS_HW_CRC32C 1
/* CRC-32C (Castagnoli) with SSE 4.2's crc32 instruction: the check crc32c.crc32c makes in Python,
 * which cannot be called without the GIL. tests/test_plain_runs.py holds the two to the same value. */
__attribute__((target("sse4.2"))) uint32_t
kfs_crc32c_hw(const uint8_t *p, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n; p++, n--)
        c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32 ^ 0xFFFFFFFFu;
}

int
kfs_have_hw_crc32c(void)
{
    static int known = -1;
    if (known < 0)
        known = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    return known;
}
#else
#define KFS_HW_CRC32C 0
uint32_t kfs_crc32c_hw(const uint8_t *p, size_t n) { (void)p; (void)n; return 0; }
int kfs_have_hw_crc32c(void) { return 0; }
#endif
