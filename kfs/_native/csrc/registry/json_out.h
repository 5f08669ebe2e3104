/* JSON text written into a growing buffer, as Python's json module writes it (ensure_ascii=False): the
 * output the compiled renderers of schema-registry payloads share (avro_json.c, protobuf_json.c). Memory
 * comes from PyMem_RawRealloc, which needs no GIL (the compiled walker renders without it). */

#ifndef KFS_JSON_OUT_H
#define KFS_JSON_OUT_H

#include "../native.h"
#include "../record/utf8.h"

typedef struct {
    char *buf;
    size_t len, cap;
    int nonascii; /* a byte >= 0x80 was written: the str is made by the UTF-8 decoder */
    int nomem;
} json_out;

enum { JO_OK = 0, JO_DECLINE = -1 };

static const char *const jo_escapes[0x20] = {
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
    "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",     "\\u000e", "\\u000f",
    "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
};

/* (the growing, out of line: the check inlined where a renderer writes) */
static int __attribute__((noinline, unused))
jo_grow(json_out *s, size_t need)
{
    if (need > ((size_t)PY_SSIZE_T_MAX >> 2)) {
        s->nomem = 1;
        return JO_DECLINE;
    }
    size_t cap = s->cap ? s->cap : 4096;
    while (cap - s->len < need)
        cap *= 2;
    char *b = PyMem_RawRealloc(s->buf, cap);
    if (b == NULL) {
        s->nomem = 1;
        return JO_DECLINE;
    }
    s->buf = b;
    s->cap = cap;
    return JO_OK;
}

static inline int
jo_reserve(json_out *s, size_t need)
{
    return s->cap - s->len >= need ? JO_OK : jo_grow(s, need);
}

static inline int
jo_put(json_out *s, const char *t, size_t n)
{
    if (jo_reserve(s, n) < 0)
        return JO_DECLINE;
    memcpy(s->buf + s->len, t, n);
    s->len += n;
    return JO_OK;
}

#define JO_LIT(s, lit) jo_put((s), (lit), sizeof(lit) - 1)

/* A text of the pool (a field's `"name": `, mostly under 16 bytes) into d, which has 16 bytes of room
 * past n: one fixed-size copy rather than a call, where the pool has 16 bytes from t. */
static inline void
jo_copy_text(char *d, const char *t, size_t n, const char *pool_end)
{
    if (n <= 16 && pool_end - t >= 16)
        memcpy(d, t, 16);
    else
        memcpy(d, t, n);
}

/* Whether 8 bytes are ASCII that a JSON string holds as they are: none below 0x20, none >= 0x80, no '"'
 * or '\\' (the zero-byte tests of "Bit Twiddling Hacks", on the word and on it xor each quote). */
static inline int
jo_plain8(const uint8_t *t)
{
    uint64_t x;
    memcpy(&x, t, 8);
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
#define HAS_ZERO(v) (((v) - ones) & ~(v) & highs)
    const uint64_t below = (x - ones * 0x20) & ~x & highs; /* a byte < 0x20 (for bytes < 0x80) */
    return !((x & highs) | below | HAS_ZERO(x ^ (ones * '"')) | HAS_ZERO(x ^ (ones * '\\')));
#undef HAS_ZERO
}

/* A UTF-8 string (checked as Python's strict decoder checks it) as json.encoder.encode_basestring writes
 * it with ensure_ascii=False. */
static inline int
jo_put_string(json_out *s, const uint8_t *t, Py_ssize_t n)
{
    if (jo_reserve(s, (size_t)n * 6 + 2) < 0)
        return JO_DECLINE;
    char *d = s->buf + s->len;
    *d++ = '"';
    for (Py_ssize_t i = 0; i < n;) {
        if (i + 8 <= n && jo_plain8(t + i)) {
            memcpy(d, t + i, 8);
            d += 8;
            i += 8;
            continue;
        }
        if (i + 8 > n && n >= 8 && jo_plain8(t + n - 8)) {
            /* The last 8 bytes are plain, so each was (or is) written as itself: the tail in one word, over
             * the bytes of it already written (a short string's tail was a byte at a time) */
            memcpy(d - (i - (n - 8)), t + n - 8, 8);
            d += n - i;
            break;
        }
        const uint8_t c = t[i];
        if (c >= 0x80) {
            const Py_ssize_t k = utf8_sequence(t + i, n - i);
            if (k == 0)
                return JO_DECLINE;
            memcpy(d, t + i, (size_t)k);
            d += k;
            i += k;
            s->nonascii = 1;
            continue;
        }
        if (c < 0x20) {
            const size_t k = strlen(jo_escapes[c]);
            memcpy(d, jo_escapes[c], k);
            d += k;
        }
        else if (c == '"' || c == '\\') {
            *d++ = '\\';
            *d++ = (char)c;
        }
        else
            *d++ = (char)c;
        i++;
    }
    *d++ = '"';
    s->len = (size_t)(d - s->buf);
    return JO_OK;
}


#endif /* KFS_JSON_OUT_H */
