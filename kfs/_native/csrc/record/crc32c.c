/* CRC-32C of a batch, without the GIL, for walk_v2_run (crc32c.h declares it). */

#include "crc32c.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

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

/* Folding with carry-less multiplication (PCLMULQDQ), for batches of FOLD_FROM bytes or more. On some
 * CPUs the crc32 instruction can start only every third cycle, so three lanes of it go no faster than
 * one (AMD's first EPYCs: 5.7 GB/s either way), while a carry-less multiply runs on another unit.
 *
 * The message is read as 128-bit blocks in four running accumulators, each block 512 bits before the
 * next of its accumulator. In the reflected representation a block's low 64 bits A are its first
 * (highest) coefficients and its high 64 bits B the rest, the block being A x^64 + B; carried 512 bits
 * on it becomes A x^(64+512) + B x^512, which modulo the polynomial is A (x^575 mod P) x + B (x^511 mod
 * P) x: the product of two reflected 64-bit values comes out one place short of a reflected 128-bit
 * one, so each constant is x^(n-1) mod P. That sum has fewer than 96 bits and is XORed into the block
 * 512 bits on. The four accumulators are then folded into one, 128 bits at a time (x^191, x^127), and
 * the last 128-bit value is reduced by the crc32 instruction itself: its CRC register from 0 over those
 * 16 bytes is the value times x^32 modulo the polynomial, the CRC register after every block. The
 * initial register (all ones) is XORed into the first block's first 32 bits, as the CRC's definition
 * has it. The tail (under 64 bytes) goes on from that register with the crc32 instruction.
 * tests/test_speedups.py holds this to crc32c.crc32c over lengths and alignments around every edge. */
#define FOLD_FROM 256
static uint64_t fold_512[2], fold_128[2]; /* {for A (the low half), for B}: x^(n-1) mod P, in bits 32-63 */
static int fold_ready;

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

static uint32_t
x_to_the(unsigned n) /* x^n modulo the polynomial, reflected (bit 31 is x^0), by squaring */
{
    uint32_t result = 0x80000000u, power = 0x40000000u; /* 1, x */
    for (; n; n >>= 1) {
        if (n & 1)
            result = gf2_multiply(result, power);
        power = gf2_multiply(power, power);
    }
    return result;
}

/* A folding constant as a reflected 64-bit operand: x^d at bit 63 - d. */
static uint64_t
fold_constant(unsigned n)
{
    return (uint64_t)x_to_the(n - 1) << 32;
}

void
kfs_init_crc32c(void)
{
    if (!kfs_have_hw_crc32c() || lane_tables_ready)
        return;
    fill_shift_table(shift_one_lane, x_to_the_8n(CRC_LANE));
    fill_shift_table(shift_two_lanes, x_to_the_8n(2 * CRC_LANE));
    lane_tables_ready = 1;
    if (__builtin_cpu_supports("pclmul")) {
        fold_512[0] = fold_constant(512 + 64);
        fold_512[1] = fold_constant(512);
        fold_128[0] = fold_constant(128 + 64);
        fold_128[1] = fold_constant(128);
        fold_ready = 1;
    }
}

__attribute__((target("sse4.2,pclmul"))) static inline __m128i
fold_into(__m128i acc, __m128i k, __m128i next)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)),
                         next);
}

/* The CRC register (all ones at the start, not yet inverted) after n bytes, n a multiple of 64. */
__attribute__((target("sse4.2,pclmul"))) static uint64_t
crc32c_folded(const uint8_t *p, size_t n)
{
    __m128i a0 = _mm_loadu_si128((const __m128i *)p), a1 = _mm_loadu_si128((const __m128i *)(p + 16)),
            a2 = _mm_loadu_si128((const __m128i *)(p + 32)), a3 = _mm_loadu_si128((const __m128i *)(p + 48));
    a0 = _mm_xor_si128(a0, _mm_cvtsi32_si128((int)0xFFFFFFFF));
    const __m128i k512 = _mm_set_epi64x((long long)fold_512[1], (long long)fold_512[0]);
    for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
        a0 = fold_into(a0, k512, _mm_loadu_si128((const __m128i *)p));
        a1 = fold_into(a1, k512, _mm_loadu_si128((const __m128i *)(p + 16)));
        a2 = fold_into(a2, k512, _mm_loadu_si128((const __m128i *)(p + 32)));
        a3 = fold_into(a3, k512, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    const __m128i k128 = _mm_set_epi64x((long long)fold_128[1], (long long)fold_128[0]);
    __m128i x = fold_into(fold_into(fold_into(a0, k128, a1), k128, a2), k128, a3);
    const uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(x));
    return __builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(x, 1));
}

static inline uint32_t
shifted(const uint32_t table[4][256], uint32_t r)
{
    return table[0][r & 0xFF] ^ table[1][(r >> 8) & 0xFF] ^ table[2][(r >> 16) & 0xFF] ^ table[3][r >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_by(const uint8_t *p, size_t n, int may_fold)
{
    uint64_t c = 0xFFFFFFFFu;
    if (may_fold && fold_ready && n >= FOLD_FROM) {
        const size_t whole = n & ~(size_t)63;
        c = crc32c_folded(p, whole);
        p += whole;
        n -= whole;
    }
    else if (lane_tables_ready) {
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

uint32_t
kfs_crc32c_hw(const uint8_t *p, size_t n)
{
    return crc32c_by(p, n, 1);
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
static uint32_t crc32c_by(const uint8_t *p, size_t n, int may_fold) { (void)may_fold; return kfs_crc32c_hw(p, n); }
int kfs_have_hw_crc32c(void) { return 0; }
void kfs_init_crc32c(void) {}
#endif

KFS_DOC(kfs_crc32c_doc,
"crc32c(data, fold=True) -> int | None\n"
"\n"
"The CRC-32C of data as walk_v2_run checks a batch's (crc32c.crc32c's value), computed without the\n"
"GIL; None on a machine without SSE 4.2's crc32 instruction, where the walker is not used. fold False:\n"
"the crc32 instruction alone (three lanes), as on a machine without PCLMULQDQ (for the tests).");

PyObject *
kfs_crc32c(PyObject *module, PyObject *args)
{
    Py_buffer buf;
    int fold = 1;
    if (!PyArg_ParseTuple(args, "y*|p:crc32c", &buf, &fold))
        return NULL;
    if (!kfs_have_hw_crc32c()) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = crc32c_by((const uint8_t *)buf.buf, (size_t)buf.len, fold);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(crc);
}
