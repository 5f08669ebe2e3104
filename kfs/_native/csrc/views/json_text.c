/* JSON text (json_text.h): the escape tables, and the writer and counter of a key's, value's or
 * header's bytes as JSON, 8 or 16 bytes at a time where they need no escape. */

#include "json_text.h"

#if defined(__SSE2__)
#include <emmintrin.h> /* SSE2: every x86-64 has it */
#endif

uint8_t kfs_byte_class[256];
char kfs_escapes[0x20][7];

static void
init_tables(void)
{
    static const char hex[] = "0123456789abcdef"; /* lowercase, as _json.c writes them */
    for (int c = 0; c < 256; c++)
        kfs_byte_class[c] = c < 0x20 || c == '"' || c == '\\' ? 1 : c < 0x80 ? 0 : 2;
    for (int c = 0; c < 0x20; c++) {
        kfs_escapes[c][0] = '\\';
        kfs_escapes[c][1] = 'u';
        kfs_escapes[c][2] = '0';
        kfs_escapes[c][3] = '0';
        kfs_escapes[c][4] = hex[c >> 4];
        kfs_escapes[c][5] = hex[c & 15];
        kfs_escapes[c][6] = 0;
    }
    strcpy(kfs_escapes['\b'], "\\b");
    strcpy(kfs_escapes['\f'], "\\f");
    strcpy(kfs_escapes['\n'], "\\n");
    strcpy(kfs_escapes['\r'], "\\r");
    strcpy(kfs_escapes['\t'], "\\t");
}

/* The bytes each ASCII byte adds to its escaped form beyond itself (0 plain, 1 for \" \\ \n ...,
 * 5 for \u00XX); set by init_count_tables. */
static uint8_t escape_extra[128];

static void
init_count_tables(void)
{
    for (int c = 0; c < 128; c++)
        escape_extra[c] =
            kfs_byte_class[c] == 0 ? 0 : (c == '"' || c == '\\') ? 1 : (uint8_t)(strlen(kfs_escapes[c]) - 1);
}

/* Whether none of the 8 bytes in w needs a look: all ASCII, none below 0x20, no '"', no '\\'.
 * The "has a zero byte" test of Hacker's Delight (6-1), exact for a yes/no answer. */
static inline int
plain_word(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    return ((w | ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash)) &
            highs) == 0;
}

/* Which bytes of w need a look, each flagged by its high bit: control characters and non-ASCII
 * bytes, and '"' and '\\'. As in plain_word; in memory order (little-endian) the lowest flag of
 * either is exact, and either is 0 exactly when no byte is one (the borrows of the subtractions only
 * flag bytes above a true one). */
static inline uint64_t
control_or_high_bytes(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    return (w | ((w - ones * 0x20) & ~w)) & highs;
}

static inline uint64_t
quote_bytes(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    return (((quote - ones) & ~quote) | ((backslash - ones) & ~backslash)) & highs;
}

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64.b64encode: standard alphabet, padded. Room reserved by the caller. */
static char *
put_base64(char *d, const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t t = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *d++ = b64_alphabet[t >> 18];
        *d++ = b64_alphabet[(t >> 12) & 63];
        *d++ = b64_alphabet[(t >> 6) & 63];
        *d++ = b64_alphabet[t & 63];
    }
    if (n - i == 1) {
        uint32_t t = (uint32_t)s[i] << 16;
        *d++ = b64_alphabet[t >> 18];
        *d++ = b64_alphabet[(t >> 12) & 63];
        *d++ = '=';
        *d++ = '=';
    }
    else if (n - i == 2) {
        uint32_t t = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *d++ = b64_alphabet[t >> 18];
        *d++ = b64_alphabet[(t >> 12) & 63];
        *d++ = b64_alphabet[(t >> 6) & 63];
        *d++ = '=';
    }
    return d;
}

/* kfs_write_bytes: see json_text.h. */
char *
kfs_write_bytes(char *const start, const uint8_t *s, const Py_ssize_t n, const Py_ssize_t readable)
{
    char *d = start;
    Py_ssize_t i = 0;
    *d++ = '"';
    while (i < n) {
        /* 8 bytes at a time, stored whole (the room reserved allows it) and kept as far as they go:
         * JSON values put a quote every few bytes, which a branch per quote would pay for */
        uint64_t w;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        while (i < n && i + 8 <= readable) {
#if defined(__SSE2__)
            if (i + 32 <= n) { /* 16 bytes at a time while none is a control or non-ASCII byte */
                const __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
                if (_mm_movemask_epi8(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20))) == 0) {
                    unsigned quotes = (unsigned)_mm_movemask_epi8(
                        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
                    /* The block is stored whole; at each '"' or '\\' (JSON values have one every few
                     * bytes) a backslash goes in and the block's rest is stored again after it, from the
                     * source (which has 16 more bytes to read: i + 32 <= n). */
                    _mm_storeu_si128((__m128i *)d, v);
                    unsigned at = 0; /* the block's byte that d is at */
                    while (quotes) {
                        const unsigned q = (unsigned)__builtin_ctz(quotes);
                        d += q - at;
                        *d++ = '\\';
                        _mm_storeu_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)(s + i + q)));
                        at = q;
                        quotes &= quotes - 1;
                    }
                    d += 16 - at;
                    i += 16;
                    continue;
                }
            }
#endif
            memcpy(&w, s + i, 8);
            const Py_ssize_t left = n - i;
            const int step = left < 8 ? (int)left : 8;
            const uint64_t keep = left < 8 ? ((uint64_t)1 << (8 * left)) - 1 : ~(uint64_t)0; /* the value's */
            const uint64_t other = control_or_high_bytes(w) & keep, quotes = quote_bytes(w) & keep;
            if ((other | quotes) == 0) {
                memcpy(d, &w, 8);
                d += step;
                i += step;
                continue;
            }
            if (other == 0) { /* only '"' and '\\' to escape: each byte written with no branch */
                for (int b = 0; b < step; b++) {
                    const uint8_t c = (uint8_t)(w >> (8 * b));
                    *d = '\\';
                    d += (c == '"') | (c == '\\');
                    *d++ = (char)c;
                }
                i += step;
                continue;
            }
            const int k = __builtin_ctzll(other | quotes) >> 3; /* the first byte that needs a look */
            memcpy(d, &w, 8);
            d += k;
            i += k;
            break; /* the loops below take it */
        }
#else
        while (i + 8 <= n && (memcpy(&w, s + i, 8), (control_or_high_bytes(w) | quote_bytes(w)) == 0)) {
            memcpy(d, &w, 8);
            d += 8;
            i += 8;
        }
#endif
        while (i < n && kfs_byte_class[s[i]] == 0)
            *d++ = (char)s[i++];
        if (i == n)
            break;
        uint8_t c = s[i];
        if (kfs_byte_class[c] == 1) {
            d = put_escape(d, c);
            i++;
        }
        else {
            Py_ssize_t k = utf8_sequence(s + i, n - i);
            if (k == 0) { /* not UTF-8: start over as base64 */
                d = start;
                memcpy(d, "{\"base64\": \"", 12);
                d = put_base64(d + 12, s, n);
                memcpy(d, "\"}", 2);
                return d + 2;
            }
            memcpy(d, s + i, (size_t)k);
            d += k;
            i += k;
        }
    }
    *d++ = '"';
    return d;
}

#if defined(__SSE2__)
/* The sum of the 16 bytes of v (each a count below 256). */
static inline uint64_t
sum_bytes(__m128i v)
{
    const __m128i sums = _mm_sad_epu8(v, _mm_setzero_si128()); /* two 64-bit sums of 8 bytes each */
    return (uint64_t)_mm_cvtsi128_si64(sums) + (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
}

/* 16 bytes of 0xFF, then 16 of 0: loaded at 16 - m, the mask of a block's first m bytes. */
static const uint8_t first_bytes_mask[32] = {
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
};
#endif

/* kfs_bytes_len: see json_text.h. */
int64_t
kfs_bytes_len(const uint8_t *s, Py_ssize_t n, Py_ssize_t readable)
{
    /* Nearly every key and value is ASCII: one pass to count its escapes, then the UTF-8 pass only
     * for the others. */
    uint64_t extra = 0;
    uint8_t high = 0;
    Py_ssize_t k = 0;
#if defined(__SSE2__)
    /* 16 bytes at a time, whatever they hold: JSON values have a '"' every few bytes, and a block
     * with one went byte by byte through the table (a quarter of a first stat's CPU). Each '"' or
     * '\\' adds 1 (counted per byte position in `quotes`, summed every 255 blocks at most); a control
     * character adds its escape's length beyond itself (from the table; rare); a non-ASCII byte
     * sends the bytes to the UTF-8 pass below. The last block is read whole when `readable` allows
     * (keys and header values are a few bytes: the bytes past n are masked off), else byte by byte. */
    const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    __m128i quotes = _mm_setzero_si128();
    int blocks = 0;
    for (; k < n; k += 16) {
        const Py_ssize_t left = n - k;
        if (left < 16 && k + 16 > readable)
            break;
        const __m128i in_value = _mm_loadu_si128((const __m128i *)(first_bytes_mask + 16 - (left < 16 ? left : 16)));
        const __m128i v = _mm_and_si128(_mm_loadu_si128((const __m128i *)(s + k)), in_value);
        const unsigned high_bytes = (unsigned)_mm_movemask_epi8(v);
        if (high_bytes)
            goto not_ascii;
        /* signed: below 0x20 is a control character here (no byte is non-ASCII); the bytes past n
         * were made 0, a control character, so they are masked off */
        unsigned controls = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmplt_epi8(v, space), in_value));
        for (; controls; controls &= controls - 1)
            extra += escape_extra[s[k + __builtin_ctz(controls)]];
        /* each '"' or '\\' is -1 in the compare's mask: subtracting it counts one at its position */
        quotes = _mm_sub_epi8(quotes, _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
        if (++blocks == 255) {
            extra += sum_bytes(quotes);
            quotes = _mm_setzero_si128();
            blocks = 0;
        }
    }
    extra += sum_bytes(quotes);
#endif
    for (; k < n; k++) {
        high |= s[k];
        extra += escape_extra[s[k] & 0x7F];
    }
    if (!(high & 0x80))
        return 2 + n + (int64_t)extra;
#if defined(__SSE2__)
not_ascii:;
#endif
    int64_t len = 2;
    Py_ssize_t i = 0;
    while (i < n) {
        uint64_t w;
        while (i + 8 <= n && (memcpy(&w, s + i, 8), plain_word(w))) {
            i += 8;
            len += 8;
        }
        if (i >= n)
            break;
        uint8_t c = s[i];
        if (kfs_byte_class[c] == 0) {
            len++;
            i++;
        }
        else if (kfs_byte_class[c] == 1) {
            len += (c == '"' || c == '\\') ? 2 : (Py_ssize_t)strlen(kfs_escapes[c]);
            i++;
        }
        else {
            Py_ssize_t k = utf8_sequence(s + i, n - i);
            if (k == 0)
                return 12 + 4 * ((n + 2) / 3) + 2; /* {"base64": "..."} */
            len += k;
            i += k;
        }
    }
    return len;
}

void
kfs_init_json_tables(void)
{
    static int ready; /* once per process (a module object per interpreter runs its exec) */
    if (ready)
        return;
    init_tables();
    init_count_tables();
    ready = 1;
}
