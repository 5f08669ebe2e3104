/* Registry-framed Avro values into the Arrow buffers of Spark's typed column (avro_arrow.h): one call
 * per batch of values, no Python object per value or field.
 *
 * Rows decoded here: a null value (a null row, as the per-row path gives it), and a value framed by
 * byte 0 and the reader schema's own id (no header framing) whose datum decodes exactly as the per-row
 * path (fastavro, reading ints and booleans as Java's BinaryDecoder does) reads it. Every other row is
 * declined (a null placeholder here, and its status 1): another writer version to resolve, header
 * framing, a datum that does not decode (the per-row path has the error's sentence), and what that path
 * reads in its own way: a negative union or enum index, a map key given twice (a dict keeps one), a
 * decimal of more digits than its precision (rounded there) or of more than 16 bytes, a millisecond
 * timestamp whose microseconds overflow 64 bits, more than MAX_ITEMS array and map items in one datum,
 * strings and map keys Python's strict UTF-8 decoder refuses, and an Arrow offset past 2^31 - 1.
 * A declined row leaves no trace in the columns: each is cut back to its length before the row. */

#include "arrow_build.h"
#include "avro_binary.h"
#include "avro_json.h"

#define MAX_ITEMS (1 << 20)
#define MAX_DEPTH 200

typedef struct {
    const aprogram *P;
    arrow_out *out;
    const uint8_t *p, *end;
    int64_t items;
    int writer_past; /* within an OP_WRITER_PAST node */
} astate;

enum { OK = AB_OK, DECLINE = AB_DECLINE };

/* ---- the datum -------------------------------------------------------------------------------- */

/* The datum's varints and lengths, read as Java reads them (avro_binary.h, shared with the other reader). */
static inline int
read_long(astate *s, int64_t *v)
{
    return avro_read_long(&s->p, s->end, v);
}

static inline int
read_int(astate *s, int32_t *v)
{
    return avro_read_int(&s->p, s->end, v);
}

static inline int
read_length(astate *s, Py_ssize_t *n)
{
    return avro_read_length(&s->p, s->end, n);
}

/* An int (as Java's readInt reads it) or a long, as an int64: a promoted writer's value. */
static inline int
read_integer(astate *s, int is_int, int64_t *v)
{
    if (!is_int)
        return read_long(s, v);
    int32_t i;
    if (read_int(s, &i) < 0)
        return DECLINE;
    *v = i;
    return OK;
}

/* A big-endian two's-complement decimal's unscaled value (as decimal128's 16 little-endian bytes);
 * declined past 16 bytes or `precision` digits (fastavro rounds it to its context's precision). */
static int
decimal_value(const uint8_t *t, Py_ssize_t n, int32_t precision, unsigned __int128 *out)
{
    if (n > 16)
        return DECLINE;
    unsigned __int128 u = (n > 0 && (t[0] & 0x80)) ? ~(unsigned __int128)0 : 0;
    for (Py_ssize_t i = 0; i < n; i++)
        u = (u << 8) | t[i];
    const __int128 v = (__int128)u;
    unsigned __int128 mag = v < 0 ? (unsigned __int128)0 - u : u;
    unsigned __int128 limit = 1;
    for (int32_t i = 0; i < precision; i++)
        limit *= 10;
    if (precision > 38 || mag >= limit)
        return DECLINE;
    *out = u;
    return OK;
}

static int
put_decimal(astate *s, column *c, const uint8_t *t, Py_ssize_t n, int32_t precision)
{
    unsigned __int128 u;
    if (decimal_value(t, n, precision, &u) < 0)
        return DECLINE;
    uint8_t out[16];
    for (int i = 0; i < 16; i++)
        out[i] = (uint8_t)(u >> (8 * i));
    if (ab_begin(s->out, c) < 0)
        return DECLINE;
    return ab_put_bytes(s->out, &c->vals, out, 16);
}

static int decode(astate *s, int32_t node, int depth);
static inline int decode_field(astate *s, int32_t node, int depth);

/* The blocks of an array or map (a count; a negative count and the block's size in bytes; 0 ends):
 * each item's value by `child`, a map's keys into the map's first child column (`c` NULL: a datum
 * read past, its keys checked as they would be written). */
static int
decode_blocks(astate *s, column *c, int32_t child, int is_map, int depth)
{
    avro_span local[16];
    avro_span *keys = local;
    Py_ssize_t nkeys = 0, keys_cap = 16;
    int rc = DECLINE;
    column *key_col = is_map && c != NULL ? s->out->cols + c->first : NULL; /* (none: a map read past) */
    for (;;) {
        int64_t count;
        if (read_long(s, &count) < 0)
            goto done;
        if (count == 0)
            break;
        if (count < 0) {
            int64_t size;
            if (count == INT64_MIN || s->writer_past || read_long(s, &size) < 0) /* (skipped by its size there) */
                goto done;
            count = -count;
        }
        if (count > MAX_ITEMS - s->items)
            goto done;
        s->items += count;
        for (int64_t i = 0; i < count; i++) {
            if (is_map) {
                Py_ssize_t n;
                if (read_length(s, &n) < 0 || !ab_utf8_ok(s->p, n))
                    goto done;
                if (nkeys == keys_cap) {
                    avro_span *grown = PyMem_Malloc(sizeof(avro_span) * (size_t)keys_cap * 2);
                    if (grown == NULL) {
                        s->out->nomem = 1;
                        goto done;
                    }
                    memcpy(grown, keys, sizeof(avro_span) * (size_t)nkeys);
                    if (keys != local)
                        PyMem_Free(keys);
                    keys = grown;
                    keys_cap *= 2;
                }
                keys[nkeys].p = s->p;
                keys[nkeys].n = n;
                nkeys++;
                if (key_col != NULL && ab_put_binary(s->out, key_col, s->p, n) < 0)
                    goto done;
                s->p += n;
            }
            if (decode(s, child, depth) < 0)
                goto done;
        }
    }
    if (is_map && avro_has_duplicates(keys, nkeys))
        goto done;
    rc = OK;
done:
    if (keys != local)
        PyMem_Free(keys);
    return rc;
}

/* A datum no column shows (its node's column is -1: a field the query prunes) read past: declined
 * exactly where decode declines it, so that a row decodes or is declined as the whole datum is. */
static int
skip(astate *s, const int32_t *w, int depth)
{
    switch (w[0]) {
    case AOP_BOOL:
        if (s->p >= s->end)
            return DECLINE;
        s->p++;
        return OK;
    case AOP_INT:
    case AOP_INT_LONG:
    case AOP_INT_DOUBLE: {
        int32_t v;
        return read_int(s, &v);
    }
    case AOP_LONG_DOUBLE: {
        int64_t v;
        return read_long(s, &v);
    }
    case AOP_LONG:
    case AOP_LONG_MILLIS: {
        int64_t v;
        if (read_long(s, &v) < 0)
            return DECLINE;
        return w[0] == AOP_LONG_MILLIS && __builtin_mul_overflow(v, (int64_t)1000, &v) ? DECLINE : OK;
    }
    case AOP_FLOAT:
    case AOP_FLOAT_DOUBLE:
    case AOP_DOUBLE: {
        const Py_ssize_t n = w[0] == AOP_DOUBLE ? 8 : 4;
        if (s->end - s->p < n)
            return DECLINE;
        s->p += n;
        return OK;
    }
    case AOP_STRING:
    case AOP_BYTES:
    case AOP_DEC_BYTES:
    case AOP_FIXED:
    case AOP_DEC_FIXED: {
        Py_ssize_t n;
        if (w[0] == AOP_FIXED || w[0] == AOP_DEC_FIXED) {
            n = w[2];
            if (s->end - s->p < n)
                return DECLINE;
        }
        else if (read_length(s, &n) < 0)
            return DECLINE;
        const uint8_t *t = s->p;
        s->p += n;
        unsigned __int128 u;
        if (w[0] == AOP_STRING)
            return ab_utf8_ok(t, n) ? OK : DECLINE;
        if (w[0] == AOP_DEC_BYTES || w[0] == AOP_DEC_FIXED)
            return decimal_value(t, n, w[0] == AOP_DEC_BYTES ? w[2] : w[3], &u);
        return OK;
    }
    case AOP_ENUM: {
        int32_t i;
        return read_int(s, &i) < 0 || i < 0 || i >= w[2] || w[4 + 2 * i] < 0 ? DECLINE : OK;
    }
    case AOP_RECORD:
        for (int32_t i = 0; i < w[2]; i++)
            if (decode_field(s, w[3 + i], depth) < 0)
                return DECLINE;
        return OK;
    case AOP_ARRAY:
    case AOP_MAP:
        return decode_blocks(s, NULL, w[2], w[0] == AOP_MAP, depth);
    case AOP_WRITER_PAST: {
        s->writer_past++;
        const int rc = decode(s, w[2], depth);
        s->writer_past--;
        return rc;
    }
    case AOP_UNION_ONE:
    case AOP_UNION_MEMBERS: {
        int32_t i;
        if (read_int(s, &i) < 0 || i < 0 || i >= w[2])
            return DECLINE;
        if ((w[0] == AOP_UNION_ONE ? w[3 + i] : w[3 + 2 * i]) == -1) /* (the null branch) */
            return OK;
        return decode(s, w[0] == AOP_UNION_ONE ? w[3 + i] : w[4 + 2 * i], depth);
    }
    }
    return DECLINE;
}

/* A record's field: the commonest leaves (a long, an int, a string) shown or read past here, as decode
 * and skip take them, without a call and a dispatch each (a record of four such fields spent half its
 * decoding time in them); every other node, and a leaf past MAX_DEPTH, by decode. */
static inline int
decode_field(astate *s, int32_t node, int depth)
{
    const int32_t *w = s->P->w + node;
    if (depth + 1 > MAX_DEPTH)
        return decode(s, node, depth);
    switch (w[0]) {
    case AOP_LONG: {
        int64_t v;
        if (read_long(s, &v) < 0)
            return DECLINE;
        return w[1] < 0 ? OK : ab_put_value(s->out, s->out->cols + w[1], &v, 8);
    }
    case AOP_INT: {
        int32_t v;
        if (read_int(s, &v) < 0)
            return DECLINE;
        return w[1] < 0 ? OK : ab_put_value(s->out, s->out->cols + w[1], &v, 4);
    }
    case AOP_STRING: {
        Py_ssize_t n;
        if (read_length(s, &n) < 0)
            return DECLINE;
        const uint8_t *t = s->p;
        s->p += n;
        if (!ab_utf8_ok(t, n))
            return DECLINE;
        return w[1] < 0 ? OK : ab_put_binary(s->out, s->out->cols + w[1], t, n);
    }
    }
    return decode(s, node, depth);
}

static int
decode(astate *s, int32_t node, int depth)
{
    if (++depth > MAX_DEPTH)
        return DECLINE;
    const int32_t *w = s->P->w + node;
    if (w[1] < 0)
        return skip(s, w, depth);
    column *c = s->out->cols + w[1];
    switch (w[0]) {
    case AOP_BOOL:
        if (s->p >= s->end)
            return DECLINE;
        /* Java's readBoolean: true for 1 only (the per-row path reads a byte over 1 so too) */
        if (ab_put_bit(s->out, &c->vals, c->n, *s->p++ == 1) < 0)
            return DECLINE;
        return ab_begin(s->out, c);
    case AOP_INT: {
        int32_t v;
        if (read_int(s, &v) < 0 || ab_begin(s->out, c) < 0)
            return DECLINE;
        return ab_put_bytes(s->out, &c->vals, &v, 4);
    }
    case AOP_INT_LONG:
    case AOP_LONG:
    case AOP_LONG_MILLIS: {
        int64_t v;
        if (read_integer(s, w[0] == AOP_INT_LONG, &v) < 0)
            return DECLINE;
        if (w[0] == AOP_LONG_MILLIS && __builtin_mul_overflow(v, (int64_t)1000, &v))
            return DECLINE;
        if (ab_begin(s->out, c) < 0)
            return DECLINE;
        return ab_put_bytes(s->out, &c->vals, &v, 8);
    }
    case AOP_INT_DOUBLE:
    case AOP_LONG_DOUBLE: {
        int64_t v;
        if (read_integer(s, w[0] == AOP_INT_DOUBLE, &v) < 0)
            return DECLINE;
        const double x = (double)v; /* (as pyarrow makes a Python int a double: rounded to nearest) */
        if (ab_begin(s->out, c) < 0)
            return DECLINE;
        return ab_put_bytes(s->out, &c->vals, &x, 8);
    }
    case AOP_DEFAULT: {
        const uint8_t *p = s->p, *end = s->end;
        s->p = (const uint8_t *)s->P->pool + w[2];
        s->end = s->p + w[3];
        const int rc = decode(s, w[4], depth);
        const int whole = s->p == s->end;
        s->p = p;
        s->end = end;
        return rc == OK && whole ? OK : DECLINE;
    }
    case AOP_FLOAT:
    case AOP_FLOAT_DOUBLE: {
        if (s->end - s->p < 4)
            return DECLINE;
        float f;
        memcpy(&f, s->p, 4); /* (little-endian, as Avro writes it) */
        s->p += 4;
        if (ab_begin(s->out, c) < 0)
            return DECLINE;
        if (w[0] == AOP_FLOAT)
            return ab_put_bytes(s->out, &c->vals, &f, 4);
        const double x = (double)f;
        return ab_put_bytes(s->out, &c->vals, &x, 8);
    }
    case AOP_DOUBLE:
        if (s->end - s->p < 8 || ab_begin(s->out, c) < 0)
            return DECLINE;
        s->p += 8;
        return ab_put_bytes(s->out, &c->vals, s->p - 8, 8);
    case AOP_STRING:
    case AOP_BYTES:
    case AOP_DEC_BYTES: {
        Py_ssize_t n;
        if (read_length(s, &n) < 0)
            return DECLINE;
        const uint8_t *t = s->p;
        s->p += n;
        if (w[0] == AOP_DEC_BYTES)
            return put_decimal(s, c, t, n, w[2]);
        if (w[0] == AOP_STRING && !ab_utf8_ok(t, n))
            return DECLINE;
        return ab_put_binary(s->out, c, t, n);
    }
    case AOP_FIXED:
    case AOP_DEC_FIXED: {
        const Py_ssize_t n = w[2];
        if (s->end - s->p < n)
            return DECLINE;
        const uint8_t *t = s->p;
        s->p += n;
        return w[0] == AOP_FIXED ? ab_put_binary(s->out, c, t, n) : put_decimal(s, c, t, n, w[3]);
    }
    case AOP_ENUM: {
        int32_t i;
        if (read_int(s, &i) < 0 || i < 0 || i >= w[2] || w[4 + 2 * i] < 0) /* (-1: not a reader's symbol) */
            return DECLINE;
        return ab_put_binary(s->out, c, (const uint8_t *)s->P->pool + w[3 + 2 * i], w[4 + 2 * i]);
    }
    case AOP_RECORD:
        if (ab_begin(s->out, c) < 0)
            return DECLINE;
        for (int32_t i = 0; i < w[2]; i++)
            if (decode_field(s, w[3 + i], depth) < 0)
                return DECLINE;
        return OK;
    case AOP_ARRAY:
    case AOP_MAP: {
        if (ab_begin(s->out, c) < 0 || decode_blocks(s, c, w[2], w[0] == AOP_MAP, depth) < 0)
            return DECLINE;
        return ab_put_offset(s->out, c, s->out->cols[c->first].n);
    }
    case AOP_UNION_ONE: {
        int32_t i;
        if (read_int(s, &i) < 0 || i < 0 || i >= w[2])
            return DECLINE;
        return w[3 + i] < 0 ? ab_append_null(s->out, w[1]) : decode(s, w[3 + i], depth);
    }
    case AOP_UNION_MEMBERS: {
        int32_t i;
        if (read_int(s, &i) < 0 || i < 0 || i >= w[2])
            return DECLINE;
        const int32_t member = w[3 + 2 * i];
        if (member == -1)
            return ab_append_null(s->out, w[1]);
        if (ab_begin(s->out, c) < 0)
            return DECLINE;
        for (int32_t k = 0; k < c->nchild; k++) /* (member -2: a branch whose member is not shown) */
            if (k != member && ab_append_null(s->out, c->first + k) < 0)
                return DECLINE;
        return decode(s, w[4 + 2 * i], depth);
    }
    }
    return DECLINE;
}

/* ---- the program ------------------------------------------------------------------------------ */

/* The column a node writes (-1: none, a datum read past). */
static int32_t
node_column(const aprogram *P, int32_t i)
{
    return P->w[i + 1];
}

/* Whether the node at word i and the nodes it reaches lie within the program, write columns of the
 * kind their op writes, and name texts within the pool. A node of column -1 reads its datum past (a
 * field the query prunes): every node under it is one too. A record's nodes write its struct's
 * children in order, each once, a node of column -1 between them for each field not shown; a union
 * member not shown is member -2, read past. */
static int
check_node(const aprogram *P, int32_t i, int depth)
{
    if (i < 4 || i > P->w[3] - 2 || depth > MAX_DEPTH)
        return 0;
    const int32_t *w = P->w + i;
    const int32_t room = P->w[3] - i; /* the nodes end where the column table starts */
    const int past = w[1] == -1;
    if (!past && (w[1] < 0 || w[1] >= P->ncols))
        return 0;
    const int32_t *col = past ? NULL : ab_col_entry(P, w[1]);
    const int32_t kind = past ? 0 : col[0];
#define WRITES(k) (past || kind == (k))
    switch (w[0]) {
    case AOP_BOOL:
        return WRITES(ACOL_BOOL);
    case AOP_INT:
        return WRITES(ACOL_I32);
    case AOP_INT_LONG:
    case AOP_LONG:
    case AOP_LONG_MILLIS:
        return WRITES(ACOL_I64);
    case AOP_FLOAT:
        return WRITES(ACOL_F32);
    case AOP_FLOAT_DOUBLE:
    case AOP_DOUBLE:
    case AOP_INT_DOUBLE:
    case AOP_LONG_DOUBLE:
        return WRITES(ACOL_F64);
    case AOP_WRITER_PAST:
        return past && room >= 3 && check_node(P, w[2], depth + 1) && node_column(P, w[2]) == -1;
    case AOP_DEFAULT: /* (a column the reader shows: never read past) */
        if (past || room < 5 || w[2] < 0 || w[3] < 0 || (Py_ssize_t)w[2] + w[3] > P->pool_len ||
            !check_node(P, w[4], depth + 1))
            return 0;
        return node_column(P, w[4]) == w[1];
    case AOP_STRING:
    case AOP_BYTES:
        return WRITES(ACOL_BIN);
    case AOP_FIXED:
        return room >= 3 && WRITES(ACOL_BIN) && w[2] >= 0;
    case AOP_DEC_BYTES:
        return room >= 3 && WRITES(ACOL_DEC) && w[2] >= 1 && w[2] <= 38;
    case AOP_DEC_FIXED:
        return room >= 4 && WRITES(ACOL_DEC) && w[2] >= 0 && w[3] >= 1 && w[3] <= 38;
    case AOP_ENUM:
        if (room < 3 || !WRITES(ACOL_BIN) || w[2] < 0 || w[2] > (room - 3) / 2)
            return 0;
        for (int32_t k = 0; k < w[2]; k++) {
            const int32_t off = w[3 + 2 * k], len = w[4 + 2 * k];
            if (len == -1 && off == 0) /* (a writer's symbol the reader lacks: declined) */
                continue;
            if (off < 0 || len < 0 || (Py_ssize_t)off + len > P->pool_len)
                return 0;
        }
        return 1;
    case AOP_RECORD: {
        if (room < 3 || !WRITES(ACOL_STRUCT) || w[2] < 0 || w[2] > room - 3)
            return 0;
        int32_t shown = 0;
        for (int32_t k = 0; k < w[2]; k++) {
            if (!check_node(P, w[3 + k], depth + 1))
                return 0;
            const int32_t child = node_column(P, w[3 + k]);
            if (child == -1)
                continue;
            if (past || child < col[1] || child >= col[1] + col[2])
                return 0;
            for (int32_t j = 0; j < k; j++) /* (each child written once) */
                if (node_column(P, w[3 + j]) == child)
                    return 0;
            shown++;
        }
        return past || shown == col[2];
    }
    case AOP_ARRAY:
    case AOP_MAP:
        if (room < 3 || !WRITES(w[0] == AOP_ARRAY ? ACOL_LIST : ACOL_MAP) || !check_node(P, w[2], depth + 1))
            return 0;
        return node_column(P, w[2]) == (past ? -1 : col[1] + (w[0] == AOP_MAP));
    case AOP_UNION_ONE:
        if (room < 3 || w[2] < 1 || w[2] > room - 3)
            return 0;
        for (int32_t k = 0; k < w[2]; k++)
            if (w[3 + k] != -1 && (!check_node(P, w[3 + k], depth + 1) || node_column(P, w[3 + k]) != w[1]))
                return 0;
        return 1;
    case AOP_UNION_MEMBERS:
        if (room < 3 || !WRITES(ACOL_STRUCT) || w[2] < 1 || w[2] > (room - 3) / 2)
            return 0;
        for (int32_t k = 0; k < w[2]; k++) {
            const int32_t member = w[3 + 2 * k], child = w[4 + 2 * k];
            if (member == -1)
                continue;
            if (member == -2) { /* (read past: the member is not shown, or nothing of the union is) */
                if (!check_node(P, child, depth + 1) || node_column(P, child) != -1)
                    return 0;
                continue;
            }
            if (past || member < 0 || member >= col[2] || !check_node(P, child, depth + 1) ||
                node_column(P, child) != col[1] + member)
                return 0;
        }
        return 1;
    }
#undef WRITES
    return 0;
}

KFS_DOC(kfs_avro_arrow_program_doc,
"avro_arrow_program(program) -> object\n"
"\n"
"A program of kfs/registry/avro_arrow_program.py, checked (every node, column and text within it, each\n"
"node writing a column of its kind) and kept for avro_arrow_decode; ValueError when it is not one.");

PyObject *
kfs_avro_arrow_program(PyObject *module, PyObject *arg)
{
    (void)module;
    aprogram P;
    if (!ab_program_load(arg, &P, "avro_arrow_program"))
        return NULL;
    if (!check_node(&P, P.root, 0) || P.w[P.root + 1] != 0) {
        ab_program_free(&P);
        PyErr_SetString(PyExc_ValueError, "avro_arrow_program: not a program");
        return NULL;
    }
    return ab_program_capsule(&P, "kfs.avro_arrow_program");
}

/* ---- a batch ---------------------------------------------------------------------------------- */

/* One value's datum (after its prefix): decoded whole, to its last byte. */
static int
decode_row(const aprogram *P, arrow_out *o, const uint8_t *p, const uint8_t *end)
{
    astate s = {.P = P, .out = o, .p = p, .end = end};
    return decode(&s, P->root, 0) == OK && s.p == s.end ? OK : DECLINE;
}

KFS_DOC(kfs_avro_arrow_decode_doc,
"avro_arrow_decode(program, prefix, count, validity, offsets, data, offset, skip) -> (status, columns)\n"
"\n"
"The `count` values of an Arrow binary array (its buffers: validity or None, int32 offsets, data; its\n"
"offset) decoded by a program of avro_arrow_program into the buffers of the typed column: `columns`\n"
"is a (length, validity, values, data or None) per column of the program. Rows whose value starts with\n"
"`prefix` (byte 0 and the reader schema's id) and whose byte in `skip` (None, or count bytes) is 0 are\n"
"decoded when the per-row path would give the same value; a null value is a null row. `status` holds a\n"
"byte per row: 0 decoded (or null), 1 declined (a null placeholder: the per-row path answers it).");

PyObject *
kfs_avro_arrow_decode(PyObject *module, PyObject *args)
{
    (void)module;
    return ab_decode_batch(args, "avro_arrow_decode", "kfs.avro_arrow_program", decode_row);
}

/* ---- JSON-text columns ------------------------------------------------------------------------ */

KFS_DOC(kfs_avro_text_column_doc,
"avro_text_column(programs, count, validity, offsets, data, offset, skip) -> (status, offsets, data)\n"
"\n"
"The JSON text of each framed Avro value of an Arrow binary array (its buffers as avro_arrow_decode\n"
"takes them) as an Arrow string column's int32 offsets and UTF-8 data, by the compiled renderer\n"
"(avro_json.c): `programs` is a list of (prefix, program of avro_program), the prefix byte 0 and a\n"
"schema id. `status` holds a byte per row: 0 rendered, 1 declined (an empty placeholder: the per-row\n"
"path answers it: a null value, another id, headers, a datum the renderer declines).");

PyObject *
kfs_avro_text_column(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *programs, *validity_obj, *skip_obj;
    Py_buffer offsets, data;
    Py_ssize_t count, offset;
    if (!PyArg_ParseTuple(args, "O!nOy*y*nO:avro_text_column", &PyList_Type, &programs, &count, &validity_obj,
                          &offsets, &data, &offset, &skip_obj))
        return NULL;
    PyObject *result = NULL, *status = NULL;
    Py_buffer validity = {0}, skip = {0};
    arrow_out o = {0};
    abuf out_offsets = {0}, out_data = {0};
    const Py_ssize_t nprograms = PyList_GET_SIZE(programs);
    if (!ab_array_buffers("avro_text_column", count, offset, &offsets, validity_obj, &validity, skip_obj, &skip))
        goto out;
    if (nprograms > 64) {
        PyErr_SetString(PyExc_ValueError, "avro_text_column: the buffers are shorter than the array");
        goto out;
    }
    for (Py_ssize_t k = 0; k < nprograms; k++) {
        PyObject *item = PyList_GET_ITEM(programs, k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(item, 0)) ||
            PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 0)) != 5) {
            PyErr_SetString(PyExc_TypeError, "avro_text_column: programs is a list of (5-byte prefix, program)");
            goto out;
        }
    }
    status = PyBytes_FromStringAndSize(NULL, count);
    if (status == NULL)
        goto out;
    uint8_t *st = (uint8_t *)PyBytes_AS_STRING(status);
    const uint8_t *vbits = validity.buf, *skips = skip.buf, *bytes = data.buf, *offs = offsets.buf;
    int32_t zero = 0;
    if (ab_put_bytes(&o, &out_offsets, &zero, 4) < 0)
        goto nomem;
    for (Py_ssize_t i = 0; i < count; i++) {
        const Py_ssize_t r = offset + i;
        st[i] = 1;
        if ((vbits == NULL || (vbits[r >> 3] >> (r & 7) & 1)) && (skips == NULL || skips[i] == 0)) {
            const int32_t start = (int32_t)kfs_load_le32(offs + 4 * r), end = (int32_t)kfs_load_le32(offs + 4 * r + 4);
            if (start < 0 || end < start || end > data.len) {
                PyErr_SetString(PyExc_ValueError, "avro_text_column: an offset outside the data");
                goto out;
            }
            PyObject *program = NULL;
            if (end - start >= 5)
                for (Py_ssize_t k = 0; k < nprograms && program == NULL; k++) {
                    PyObject *item = PyList_GET_ITEM(programs, k);
                    if (memcmp(PyBytes_AS_STRING(PyTuple_GET_ITEM(item, 0)), bytes + start, 5) == 0)
                        program = PyTuple_GET_ITEM(item, 1);
                }
            if (program != NULL) {
                const char *text;
                size_t len;
                int nonascii;
                const int rc = kfs_avro_render(program, bytes + start + 5, end - start - 5, &text, &len, &nonascii);
                if (rc < 0)
                    goto out;
                if (rc == 1 && ab_put_bytes(&o, &out_data, text, len) == OK)
                    st[i] = 0;
                else if (o.nomem)
                    goto nomem;
            }
        }
        if (out_data.len > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "avro_text_column: the column exceeds Arrow's 32-bit offsets");
            goto out;
        }
        const int32_t end_offset = (int32_t)out_data.len;
        if (ab_put_bytes(&o, &out_offsets, &end_offset, 4) < 0)
            goto nomem;
    }
    result = Py_BuildValue("(ONN)", status, ab_bytes(&out_offsets, out_offsets.len), ab_bytes(&out_data, out_data.len));
    goto out;
nomem:
    PyErr_NoMemory();
out:
    Py_XDECREF(status);
    PyMem_Free(out_offsets.p);
    PyMem_Free(out_data.p);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    if (validity.buf != NULL)
        PyBuffer_Release(&validity);
    if (skip.buf != NULL)
        PyBuffer_Release(&skip);
    return result;
}
