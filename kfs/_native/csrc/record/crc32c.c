/* CRC-32C of a batch, without the GIL, for walk_v2_run (crc32c.h declares it). */

#include "crc32c.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KFS_HW_CRC32C 1

/* CRC-32C (Castagnoli) with SSE 4.2's crc32 instruction: the check crc32c.crc32c makes in Python,
 * which cannot be called without the GIL. tests/test_plain_runs.py and tests/test_speedups.py hold
 * the two to the same value.
 *
 * One crc32 instruction takes 3 cycles before the next can use its result and the CPU can start one
 * every cycle, so one running CRC goes at a third of the speed the instruction allows (a tenth of a
 * first stat's CPU went to it). Batches of CRC_LANES * CRC_LANE bytes or more are taken three lanes at
 * a time: three CRCs run side by side over three consecutive lanes, then are joined. The CRC register
 * is linear: the register after lanes A B C from state s is shift(shift(crc(A, s), |B|) ^ crc(B, 0),
 * |C|) ^ crc(C, 0), where shift(r, n) multiplies r by x^(8n) modulo the polynomial. A shift by one or
 * two lanes is a product by a constant, done with four table lookups (the product is linear in r:
 * the XOR of the products of its four bytes, tabulated once at import: kfs_init_crc32c). */

#define CRC_LANE 256                  /* bytes per lane: a multiple of 8 */
#define CRC_LANES 3
#define CRC_POLY_REFLECTED 0x82F63B78u /* Castagnoli's polynomial, bit-reversed as the instruction uses it */

static uint32_t shift_one_lane[4][256], shift_two_lanes[4][256];
static int lane_tables_ready;

/* a * b modulo the polynomial, in the reflected representation (bit 31 is x^0). */
static uint32_t
gf2_multiply(uint32_t a, uint32_t b)
{
    uint32_t product = 0;
    for (uint32_t bit = 0x80000000u; bit; bit >>= 1) {
        if (a & bit)
            product ^= b;
        b = (b & 1) ? (b >> 1) ^ CRC_POLY_REFLECTED : b >> 1; /* b * x */
    }
    return product;
}

__attribute__((target("sse4.2"))) static uint32_t
x_to_the_8n(size_t n) /* x^(8n) modulo the polynomial: 1 (bit 31) run through n zero bytes */
{
    uint64_t c = 0x80000000u;
    for (; n >= 8; n -= 8)
        c = __builtin_ia32_crc32di(c, 0);
    uint32_t c32 = (uint32_t)c;
    for (; n; n--)
        c32 = __builtin_ia32_crc32qi(c32, 0);
    return c32;
}

static void
fill_shift_table(uint32_t table[4][256], uint32_t factor)
{
    for (int byte = 0; byte < 4; byte++)
        for (uint32_t v = 0; v < 256; v++)
            table[byte][v] = gf2_multiply(v << (8 * byte), factor);
}

void
kfs_init_crc32c(void)
{
    if (!kfs_have_hw_crc32c() || lane_tables_ready)
        return;
    fill_shift_table(shift_one_lane, x_to_the_8n(CRC_LANE));
    fill_shift_table(shift_two_lanes, x_to_the_8n(2 * CRC_LANE));
    lane_tables_ready = 1;
}

static inline uint32_t
shifted(const uint32_t table[4][256], uint32_t r)
{
    return table[0][r & 0xFF] ^ table[1][(r >> 8) & 0xFF] ^ table[2][(r >> 16) & 0xFF] ^ table[3][r >> 24];
}

__attribute__((target("sse4.2"))) uint32_t
kfs_crc32c_hw(const uint8_t *p, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    if (lane_tables_ready) {
        for (; n >= CRC_LANES * CRC_LANE; p += CRC_LANES * CRC_LANE, n -= CRC_LANES * CRC_LANE) {
            uint64_t b = 0, d = 0;
            for (size_t i = 0; i < CRC_LANE; i += 8) {
                uint64_t wa, wb, wd;
                memcpy(&wa, p + i, 8);
                memcpy(&wb, p + CRC_LANE + i, 8);
                memcpy(&wd, p + 2 * CRC_LANE + i, 8);
                c = __builtin_ia32_crc32di(c, wa);
                b = __builtin_ia32_crc32di(b, wb);
                d = __builtin_ia32_crc32di(d, wd);
            }
            c = shifted(shift_two_lanes, (uint32_t)c) ^ shifted(shift_one_lane, (uint32_t)b) ^ (uint32_t)d;
        }
    }
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
void kfs_init_crc32c(void) {}
#endif

KFS_DOC(kfs_crc32c_doc,
"crc32c(data) -> int | None\n"
"\n"
"The CRC-32C of data as walk_v2_run checks a batch's (crc32c.crc32c's value), computed without the\n"
"GIL; None on a machine without SSE 4.2's crc32 instruction, where the walker is not used.");

PyObject *
kfs_crc32c(PyObject *module, PyObject *arg)
{
    if (!kfs_have_hw_crc32c())
        Py_RETURN_NONE;
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = kfs_crc32c_hw((const uint8_t *)buf.buf, (size_t)buf.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(crc);
}
