/* The Arrow buffers of Spark's typed column, as both compiled payload decoders fill them (avro_arrow.c,
 * protobuf_arrow.c): growable buffers, a column per Arrow array of the column's type (its validity
 * bitmap, its values or offsets, its string bytes), the row marks a declined row is cut back to, the
 * program's column table and the batch loop over an Arrow binary array's values. The hot appends are
 * static inline here; the rest is arrow_build.c.
 *
 * A program (each decoder's compiler in kfs/registry/) is a bytes object of little-endian int32 words
 * then a text pool. Header: word 0 the root node's word index, word 1 the word count, word 2 the
 * number of columns, word 3 the word index of the column table. The column table holds, per column,
 * (kind, first child column, child count, nullable): a column's children are numbered consecutively;
 * a column that is not nullable holds its empty value where its parent is null. Nodes lie between the
 * header and the table; each decoder checks its own. */

#ifndef KFS_ARROW_BUILD_H
#define KFS_ARROW_BUILD_H

#include "../native.h"
#include "../record/utf8.h"
#include "avro_arrow.h" /* (the column kinds, ACOL_*) */

enum { AB_OK = 0, AB_DECLINE = -1 };

typedef struct {
    uint8_t *p;
    size_t len, cap;
} abuf;

typedef struct {
    abuf valid; /* validity bitmap */
    abuf vals;  /* fixed-width values, a bool bitmap, or int32 offsets */
    abuf data;  /* string/binary bytes */
    int64_t n;
    int32_t kind, first, nchild, nullable;
} column;

typedef struct {
    int64_t n;
    size_t vals, data;
} mark;

/* The columns being filled, and whether an allocation failed (then every append declines). */
typedef struct {
    column *cols;
    int32_t ncols;
    int nomem;
} arrow_out;

typedef struct {
    const int32_t *w;
    int32_t nw, ncols, root;
    const char *pool;
    Py_ssize_t pool_len;
} aprogram;

static inline int
ab_grow(arrow_out *o, abuf *b, size_t need)
{
    if (b->cap - b->len >= need)
        return AB_OK;
    if (need > ((size_t)PY_SSIZE_T_MAX >> 2) - b->len) {
        o->nomem = 1;
        return AB_DECLINE;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < need)
        cap *= 2;
    uint8_t *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) {
        o->nomem = 1;
        return AB_DECLINE;
    }
    b->p = p; /* (not zeroed: every byte is written before it is read; ab_put_bit zeroes a bitmap's new bytes) */
    b->cap = cap;
    return AB_OK;
}

static inline int
ab_put_bytes(arrow_out *o, abuf *b, const void *v, size_t n)
{
    if (n == 0) /* (an empty string into a buffer not yet allocated: memcpy takes no NULL) */
        return AB_OK;
    if (ab_grow(o, b, n) < 0)
        return AB_DECLINE;
    memcpy(b->p + b->len, v, n);
    b->len += n;
    return AB_OK;
}

/* Bit i of a bitmap set to `on`, the bitmap grown to hold it. */
static inline int
ab_put_bit(arrow_out *o, abuf *b, int64_t i, int on)
{
    const size_t byte = (size_t)(i >> 3);
    if (byte >= b->len) {
        if (ab_grow(o, b, byte + 1 - b->len) < 0)
            return AB_DECLINE;
        memset(b->p + b->len, 0, byte + 1 - b->len);
        b->len = byte + 1;
    }
    const uint8_t bit = (uint8_t)(1u << (i & 7));
    if (on)
        b->p[byte] |= bit;
    else
        b->p[byte] &= (uint8_t)~bit;
    return AB_OK;
}

/* A row of column c begun: its validity bit set (the value follows). */
static inline int
ab_begin(arrow_out *o, column *c)
{
    if (ab_put_bit(o, &c->valid, c->n, 1) < 0)
        return AB_DECLINE;
    c->n++;
    return AB_OK;
}

static inline int
ab_put_offset(arrow_out *o, column *c, int64_t end)
{
    if (end > INT32_MAX)
        return AB_DECLINE;
    const int32_t v = (int32_t)end;
    return ab_put_bytes(o, &c->vals, &v, 4);
}

static inline int
ab_put_binary(arrow_out *o, column *c, const uint8_t *t, Py_ssize_t n)
{
    if (ab_begin(o, c) < 0 || ab_put_bytes(o, &c->data, t, (size_t)n) < 0)
        return AB_DECLINE;
    return ab_put_offset(o, c, (int64_t)c->data.len);
}

/* A fixed-width value (n bytes) of column c. */
static inline int
ab_put_value(arrow_out *o, column *c, const void *v, size_t n)
{
    if (ab_begin(o, c) < 0)
        return AB_DECLINE;
    return ab_put_bytes(o, &c->vals, v, n);
}

/* valid_utf8 (Python's strict decoder), 32 then 8 ASCII bytes at a time where it can. */
static inline int
ab_utf8_ok(const uint8_t *t, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 32 <= n; i += 32) {
        /* (four scalars, not an array: a 32-byte memcpy into one went through the stack, and reading it
         * back stalled on store forwarding, a sixth of the Avro decoder's time over a 160-byte string) */
        uint64_t a, b, c, d;
        memcpy(&a, t + i, 8);
        memcpy(&b, t + i + 8, 8);
        memcpy(&c, t + i + 16, 8);
        memcpy(&d, t + i + 24, 8);
        if ((a | b | c | d) & 0x8080808080808080ULL)
            break;
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, t + i, 8);
        if (word & 0x8080808080808080ULL)
            break;
    }
    return valid_utf8(t + i, n - i);
}

/* A null in column ci; in a column that is not nullable (a struct field under a null struct: pa.array
 * fills those so), its empty value instead: 0, "", [], {}, a struct of such. */
KFS_HIDDEN int ab_append_null(arrow_out *o, int32_t ci);

/* Column c's entry (kind, first child, child count, nullable) in the program's table. */
static inline const int32_t *
ab_col_entry(const aprogram *P, int32_t c)
{
    return P->w + P->w[3] + 4 * c;
}

/* The program of a bytes object: its words and pool, its header and column table checked (each kind
 * one of avro_arrow.h's, with the children its layout has); 0 and ValueError `what` when it is not. The
 * caller checks its nodes, then keeps it (ab_program_capsule) or frees it (ab_program_free). */
KFS_HIDDEN int ab_program_load(PyObject *arg, aprogram *P, const char *what);
KFS_HIDDEN void ab_program_free(aprogram *P);
KFS_HIDDEN PyObject *ab_program_capsule(aprogram *P, const char *name);

/* An Arrow binary array's validity and skip buffers (each None or a buffer) taken, and `count` rows from
 * `offset` checked to lie within them and the int32 offsets; 0 and ValueError naming `fname` when not
 * (the caller releases what was taken, validity->buf and skip->buf set). */
KFS_HIDDEN int ab_array_buffers(const char *fname, Py_ssize_t count, Py_ssize_t offset, const Py_buffer *offsets,
                                PyObject *validity_obj, Py_buffer *validity, PyObject *skip_obj, Py_buffer *skip);

/* A buffer's first len bytes as a bytes object. */
KFS_HIDDEN PyObject *ab_bytes(const abuf *b, size_t len);

/* Decodes one row's value bytes [p, end) into the columns (each row: one value of column 0, or
 * declined); AB_OK or AB_DECLINE. */
typedef int (*ab_row_decoder)(const aprogram *P, arrow_out *o, const uint8_t *p, const uint8_t *end);

/* The batch loop both decoders' entry points share: (program, prefix, count, validity, offsets, data,
 * offset, skip) parsed from `args`, each value starting with the 5-byte prefix decoded by `row` (the rest
 * of the value after the prefix), a declined row cut back and left a null placeholder; the result is
 * (status, columns) as avro_arrow_decode documents. */
KFS_HIDDEN PyObject *ab_decode_batch(PyObject *args, const char *fname, const char *capsule_name,
                                     ab_row_decoder row);

#endif /* KFS_ARROW_BUILD_H */
