/* JSON text: bytes and strings escaped as json.encoder.encode_basestring (ensure_ascii=False) kfs_escapes
 * them, and the UTF-8 checks that decide between a JSON string and {"base64": ...}. json_text.c has
 * the tables and the writers; the per-byte helpers are here, inline, for the renderers that call them
 * in their loops. */

#ifndef KFS_JSON_TEXT_H
#define KFS_JSON_TEXT_H

#include "speedups.h"

/* What json.encoder.encode_basestring (ensure_ascii=False) does with each byte below 0x80: 0 copy,
 * 1 escape; non-ASCII bytes are 2 (a UTF-8 sequence to validate, copied as is when valid). Set by
 * kfs_init_json_tables, at import. */
KFS_HIDDEN extern uint8_t kfs_byte_class[256];
KFS_HIDDEN extern char kfs_escapes[0x20][7]; /* the escape of each control character, NUL-terminated */

KFS_HIDDEN void kfs_init_json_tables(void);

/* Writes the escape of ASCII byte c (class 1); room reserved by the caller. */
static inline char *
put_escape(char *d, uint8_t c)
{
    if (c == '"' || c == '\\') {
        d[0] = '\\';
        d[1] = (char)c;
        return d + 2;
    }
    const char *e = kfs_escapes[c];
    size_t n = strlen(e);
    memcpy(d, e, n);
    return d + n;
}

/* The length of the valid UTF-8 sequence at s[0] (a byte >= 0x80) within n bytes, or 0 if it is not
 * one to Python's strict decoder: no continuation byte first, no overlong forms, no surrogates
 * (U+D800-DFFF), nothing above U+10FFFF. */
static inline Py_ssize_t
utf8_sequence(const uint8_t *s, Py_ssize_t n)
{
    uint8_t c = s[0];
#define CONT(i) (n > (i) && (s[i] & 0xC0) == 0x80)
    if (c < 0xC2) /* a continuation byte, or the lead of an overlong 2-byte form */
        return 0;
    if (c < 0xE0)
        return CONT(1) ? 2 : 0;
    if (c < 0xF0) {
        if (!CONT(1) || !CONT(2))
            return 0;
        if (c == 0xE0 && s[1] < 0xA0) /* overlong */
            return 0;
        if (c == 0xED && s[1] >= 0xA0) /* surrogate */
            return 0;
        return 3;
    }
    if (c < 0xF5) {
        if (!CONT(1) || !CONT(2) || !CONT(3))
            return 0;
        if (c == 0xF0 && s[1] < 0x90) /* overlong */
            return 0;
        if (c == 0xF4 && s[1] >= 0x90) /* above U+10FFFF */
            return 0;
        return 4;
    }
    return 0;
#undef CONT
}

/* Whether n bytes are valid UTF-8 (a header key the decoder turns into str without replacement). */
static inline int
valid_utf8(const uint8_t *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t k = utf8_sequence(s + i, n - i);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
}

/* The JSON of n bytes (not null) at s, written at start, which has room for 6 * n + 32: a JSON string
 * when valid UTF-8, {"base64": "..."} when not. Returns the end of what it wrote. `readable` (>= n):
 * how many bytes at s may be read (a value inside a records section is followed by more of it, so
 * its last few bytes are read a word at a time too). No Python object is touched: the fused
 * renderer calls it without the GIL. */
KFS_HIDDEN char *kfs_write_bytes(char *const start, const uint8_t *s, const Py_ssize_t n, const Py_ssize_t readable);

/* The length kfs_write_bytes gives n bytes (not null): a JSON string when valid UTF-8, else base64.
 * `readable` (>= n): how many bytes at s may be read (as kfs_write_bytes'). */
KFS_HIDDEN int64_t kfs_bytes_len(const uint8_t *s, Py_ssize_t n, Py_ssize_t readable);

#endif /* KFS_JSON_TEXT_H */
