/* JSON text: bytes and strings escaped as json.encoder.encode_basestring (ensure_ascii=False) kfs_escapes
 * them, and (with record/utf8.h's checks) a JSON string or {"base64": ...}. json_text.c has the tables and the
 * writers; the per-byte helpers are here, inline, for the renderers that call them in their loops. */

#ifndef KFS_JSON_TEXT_H
#define KFS_JSON_TEXT_H

#include "../native.h"
#include "../record/utf8.h"

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
