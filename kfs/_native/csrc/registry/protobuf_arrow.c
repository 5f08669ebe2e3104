/* Registry-framed Protobuf messages into the Arrow buffers of Spark's typed column: one call per batch of
 * values, no parsed message and no Python object per value or field. The program is compiled in Python
 * (kfs/registry/protobuf_arrow_program.py) from the reader's first message and the column's Arrow type
 * as kfs/spark/protobuf_types.py types and converts it (Spark's protobuf connector): the per-row path
 * (the protobuf package's parser, the converter, pa.array) stays the reference, and a message this
 * decoder cannot give value for value as that path does is declined to it.
 *
 * Rows decoded here: a value framed by byte 0 and an id the caller names (the reader's, or a version
 * whose first message is the reader's: records are parsed with the reader's message), then the
 * message-index list [0] (byte 0, or 2 0), then the message, whose fields come at most once each
 * (repeated ones any number of times, packed or not). Declined (the per-row path answers): a singular
 * field or a message given twice (protobuf keeps the last, or merges), two members of a oneof, a map of
 * two or more entries (the parsed map's order is the protobuf runtime's), an entry holding another field
 * (protobuf keeps it among the unknown fields: no entry), a missing required field, a
 * wire type other than the field's, groups, an enum number the enum lacks, a string that is not UTF-8, a
 * Timestamp or Duration whose microseconds overflow 64 bits, a malformed varint, tag or length.
 *
 * Nodes (arrow_build.h for the header and the column table):
 *   PNODE_MESSAGE  (op, column, n fields, n oneofs, then per field 6 words: number, op, column, arg,
 *                  flags, oneof index or -1), fields in increasing number. column -1: a message no
 *                  column shows, read past and checked; else a struct column whose children the shown
 *                  fields write, each once (in any order: the struct's fields are in declaration order).
 *   PNODE_ENTRY    a map entry: (op, -1, 2, 0, the key field, the value field), both F_ALWAYS.
 *   PNODE_ENUM     (op, -1, n, then n times (number, offset, length) of the name in the pool).
 * A field's arg: its message node (PF_MESSAGE, PF_MAP) or enum node (PF_ENUM), else 0. A field of
 * column -1 is read past, checked as it would be decoded. */

#include "arrow_build.h"

#define MAX_DEPTH 100 /* (protobuf's own default recursion limit) */
#define MAX_FIELDS 256

enum { PNODE_MESSAGE = 1, PNODE_ENTRY, PNODE_ENUM };

enum { /* field ops: the wire value and the column it writes */
    PF_INT32 = 1, /* varint, low 32 bits -> int32 */
    PF_INT64,     /* varint -> int64 (uint64: the same bits) */
    PF_UINT32,    /* varint, low 32 bits -> int32 (Java's int: the same bits) */
    PF_SINT32,    /* zigzag varint -> int32 */
    PF_SINT64,
    PF_BOOL,      /* varint, not 0 -> true */
    PF_FIXED32,   /* 4 bytes -> int32 (fixed32 and sfixed32: the same bits) */
    PF_FIXED64,   /* 8 bytes -> int64 */
    PF_FLOAT,     /* 4 bytes -> float32 */
    PF_DOUBLE,    /* 8 bytes -> float64 */
    PF_STRING,    /* length-delimited UTF-8 -> string */
    PF_BYTES,     /* length-delimited -> binary */
    PF_ENUM,      /* varint -> the value's name (a string) */
    PF_MESSAGE,   /* length-delimited message -> struct */
    PF_MICROS,    /* a Timestamp or Duration (seconds 1, nanos 2) -> int64 µs */
    PF_MAP,       /* length-delimited entries -> map */
};

enum {
    F_REPEATED = 1, /* a list column of the values (a map: the map column) */
    F_PRESENCE = 2, /* null unless given (hasField); without it a value at its default is null too */
    F_REQUIRED = 4, /* declined when missing (the parser refuses the message) */
    F_ALWAYS = 8,   /* a map entry's key and value: their default when missing */
    F_OPEN = 16,    /* an open enum: a number it lacks is its decimal text (else declined) */
};

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct {
    const aprogram *P;
    arrow_out *out;
} pstate;

#define OK AB_OK
#define DECLINE AB_DECLINE

/* ---- the wire format -------------------------------------------------------------------------- */

/* A varint of at most 10 bytes, the tenth 0 or 1. */
static inline int
read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t n = 0;
    for (int shift = 0;; shift += 7) {
        if (*p >= end)
            return DECLINE;
        const uint8_t b = *(*p)++;
        if (shift == 63 && b > 1)
            return DECLINE;
        n |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
    }
    *v = n;
    return OK;
}

static inline int
read_length(const uint8_t **p, const uint8_t *end, Py_ssize_t *n)
{
    uint64_t v;
    if (read_varint(p, end, &v) < 0 || v > (uint64_t)(end - *p) || v > INT32_MAX)
        return DECLINE;
    *n = (Py_ssize_t)v;
    return OK;
}

/* The value of an unknown field read past by its wire type (groups and wire types 6, 7 declined). */
static int
skip_unknown(const uint8_t **p, const uint8_t *end, uint32_t wire_type)
{
    uint64_t v;
    Py_ssize_t n;
    switch (wire_type) {
    case WT_VARINT:
        return read_varint(p, end, &v);
    case WT_I64:
        n = 8;
        break;
    case WT_I32:
        n = 4;
        break;
    case WT_LEN:
        if (read_length(p, end, &n) < 0)
            return DECLINE;
        break;
    default:
        return DECLINE;
    }
    if (end - *p < n)
        return DECLINE;
    *p += n;
    return OK;
}

static inline uint32_t
wire_type_of(int32_t op)
{
    switch (op) {
    case PF_FIXED32:
    case PF_FLOAT:
        return WT_I32;
    case PF_FIXED64:
    case PF_DOUBLE:
        return WT_I64;
    case PF_STRING:
    case PF_BYTES:
    case PF_MESSAGE:
    case PF_MICROS:
    case PF_MAP:
        return WT_LEN;
    }
    return WT_VARINT;
}

/* ---- the values ------------------------------------------------------------------------------- */

static int decode_message(pstate *s, int32_t node, int32_t col, const uint8_t *p, const uint8_t *end, int depth);

/* An enum value's name into column c (NULL: read past). */
static int
put_enum(pstate *s, column *c, const int32_t *e, int open, int32_t number)
{
    for (int32_t k = 0; k < e[2]; k++) {
        const int32_t *v = e + 3 + 3 * k;
        if (v[0] == number)
            return c == NULL ? OK : ab_put_binary(s->out, c, (const uint8_t *)s->P->pool + v[1], v[2]);
    }
    if (!open)
        return DECLINE; /* (a closed enum keeps the number among the unknown fields: the field is unset) */
    if (c == NULL)
        return OK;
    char text[16];
    const int n = snprintf(text, sizeof(text), "%d", (int)number);
    return ab_put_binary(s->out, c, (const uint8_t *)text, n);
}

/* A Timestamp or Duration message's microseconds, as Spark's connector computes them: seconds * 10^6
 * plus nanos / 1000 truncated. Each field at most once; others read past. */
static int
micros_of(const uint8_t *p, const uint8_t *end, int64_t *out)
{
    int64_t seconds = 0, nanos = 0;
    int seen = 0;
    while (p < end) {
        uint64_t tag, v;
        if (read_varint(&p, end, &tag) < 0 || tag > UINT32_MAX || (tag >> 3) == 0)
            return DECLINE;
        const uint32_t number = (uint32_t)(tag >> 3), wt = (uint32_t)(tag & 7);
        if ((number == 1 || number == 2) && wt == WT_VARINT) {
            if (seen & (int)number || read_varint(&p, end, &v) < 0)
                return DECLINE;
            seen |= (int)number;
            if (number == 1)
                seconds = (int64_t)v;
            else
                nanos = (int32_t)(uint32_t)v;
        }
        else if (number == 1 || number == 2 || skip_unknown(&p, end, wt) < 0)
            return DECLINE;
    }
    int64_t us;
    if (__builtin_mul_overflow(seconds, (int64_t)1000000, &us) || __builtin_add_overflow(us, nanos / 1000, &us))
        return DECLINE;
    *out = us;
    return OK;
}

/* Whether a scalar's wire bytes are its type's default (a proto3 field without presence: then null). */
static inline int
is_default(int32_t op, uint64_t bits, Py_ssize_t len)
{
    switch (op) {
    case PF_STRING:
    case PF_BYTES:
        return len == 0;
    case PF_FLOAT: {
        float f;
        uint32_t b = (uint32_t)bits;
        memcpy(&f, &b, 4);
        return f == 0.0f;
    }
    case PF_DOUBLE: {
        double d;
        memcpy(&d, &bits, 8);
        return d == 0.0;
    }
    case PF_INT32:
    case PF_UINT32:
    case PF_FIXED32:
        return (uint32_t)bits == 0;
    case PF_SINT32:
        return (uint32_t)bits == 0; /* (zigzag 0 is 0) */
    case PF_BOOL:
    case PF_ENUM:
    case PF_INT64:
    case PF_SINT64:
    case PF_FIXED64:
        return op == PF_ENUM ? (int32_t)(uint32_t)bits == 0 : bits == 0;
    }
    return 0;
}

/* One scalar value read from the wire (`bits` a varint or fixed value, or [t, t + len) a length-
 * delimited one) into column c (NULL: checked only). */
static int
put_scalar(pstate *s, column *c, const int32_t *f, uint64_t bits, const uint8_t *t, Py_ssize_t len)
{
    const int32_t op = f[1];
    switch (op) {
    case PF_INT32:
    case PF_UINT32:
    case PF_FIXED32: {
        const int32_t v = (int32_t)(uint32_t)bits;
        return c == NULL ? OK : ab_put_value(s->out, c, &v, 4);
    }
    case PF_SINT32: {
        const uint32_t u = (uint32_t)bits;
        const int32_t v = (int32_t)((u >> 1) ^ (0U - (u & 1)));
        return c == NULL ? OK : ab_put_value(s->out, c, &v, 4);
    }
    case PF_INT64:
    case PF_FIXED64: {
        const int64_t v = (int64_t)bits;
        return c == NULL ? OK : ab_put_value(s->out, c, &v, 8);
    }
    case PF_SINT64: {
        const int64_t v = (int64_t)((bits >> 1) ^ (0 - (bits & 1)));
        return c == NULL ? OK : ab_put_value(s->out, c, &v, 8);
    }
    case PF_BOOL:
        if (c == NULL)
            return OK;
        if (ab_put_bit(s->out, &c->vals, c->n, bits != 0) < 0)
            return DECLINE;
        return ab_begin(s->out, c);
    case PF_FLOAT: {
        const uint32_t b = (uint32_t)bits;
        return c == NULL ? OK : ab_put_value(s->out, c, &b, 4);
    }
    case PF_DOUBLE:
        return c == NULL ? OK : ab_put_value(s->out, c, &bits, 8);
    case PF_STRING:
        if (!ab_utf8_ok(t, len))
            return DECLINE;
        return c == NULL ? OK : ab_put_binary(s->out, c, t, len);
    case PF_BYTES:
        return c == NULL ? OK : ab_put_binary(s->out, c, t, len);
    case PF_ENUM:
        return put_enum(s, c, s->P->w + f[3], f[4] & F_OPEN, (int32_t)(uint32_t)bits);
    }
    return DECLINE;
}

/* A scalar's default value into column c (a map entry's missing key or value). */
static int
put_default(pstate *s, const int32_t *f, int depth)
{
    column *c = s->out->cols + f[2];
    switch (f[1]) {
    case PF_MESSAGE:
        return decode_message(s, f[3], f[2], NULL, NULL, depth);
    case PF_MICROS: {
        const int64_t zero = 0;
        return ab_put_value(s->out, c, &zero, 8);
    }
    case PF_MAP:
        return DECLINE;
    case PF_ENUM: /* (a closed enum's default is its first value, which need not be 0) */
        if (!(f[4] & F_OPEN))
            return DECLINE;
    }
    return put_scalar(s, c, f, 0, (const uint8_t *)"", 0);
}

/* One value of field f (wire type checked by the caller) at *p into column `col` (-1: checked only): a
 * scalar, a message, a Timestamp or a map entry. `implicit`: a proto3 scalar without presence, null at
 * its default. */
static int
read_value(pstate *s, const int32_t *f, int32_t col, const uint8_t **p, const uint8_t *end, uint32_t wt, int implicit,
           int depth)
{
    column *c = col < 0 ? NULL : s->out->cols + col;
    uint64_t bits = 0;
    const uint8_t *t = NULL;
    Py_ssize_t len = 0;
    switch (wt) {
    case WT_VARINT:
        if (read_varint(p, end, &bits) < 0)
            return DECLINE;
        break;
    case WT_I32:
        if (end - *p < 4)
            return DECLINE;
        bits = kfs_load_le32(*p);
        *p += 4;
        break;
    case WT_I64:
        if (end - *p < 8)
            return DECLINE;
        bits = (uint64_t)kfs_load_le32(*p) | (uint64_t)kfs_load_le32(*p + 4) << 32;
        *p += 8;
        break;
    default:
        if (read_length(p, end, &len) < 0)
            return DECLINE;
        t = *p;
        *p += len;
    }
    switch (f[1]) {
    case PF_MESSAGE:
    case PF_MAP: /* (an entry: its key and value into the map's columns, or read past) */
        return decode_message(s, f[3], f[1] == PF_MAP ? -1 : col, t, t + len, depth);
    case PF_MICROS: {
        int64_t us;
        if (micros_of(t, t + len, &us) < 0)
            return DECLINE;
        return c == NULL ? OK : ab_put_value(s->out, c, &us, 8);
    }
    }
    if (implicit && is_default(f[1], bits, len)) /* (a string at its default is empty: valid UTF-8) */
        return c == NULL ? OK : ab_append_null(s->out, col);
    return put_scalar(s, c, f, bits, t, len);
}

/* Whether op is a scalar a packed run may hold. */
static inline int
packable(int32_t op)
{
    return op != PF_STRING && op != PF_BYTES && op != PF_MESSAGE && op != PF_MICROS && op != PF_MAP;
}

/* The message [p, end) of node `node` into struct column `col` (-1: no row of its own: read past, or a
 * map entry writing its key and value columns); p NULL: an absent message (a map entry's default
 * value), every field at its empty value. */
static int
decode_message(pstate *s, int32_t node, int32_t col, const uint8_t *p, const uint8_t *end, int depth)
{
    if (++depth > MAX_DEPTH)
        return DECLINE;
    const int32_t *w = s->P->w + node;
    const int32_t nf = w[2], noneof = w[3];
    const int32_t *fields = w + 4;
    uint8_t seen[MAX_FIELDS], oneof_seen[MAX_FIELDS];
    memset(seen, 0, (size_t)nf);
    memset(oneof_seen, 0, (size_t)noneof);
    if (col >= 0 && ab_begin(s->out, s->out->cols + col) < 0)
        return DECLINE;
    int32_t next = 0; /* (fields most often come in order: where to look first) */
    while (p != NULL && p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag) < 0 || tag > UINT32_MAX || (tag >> 3) == 0)
            return DECLINE;
        const int32_t number = (int32_t)(tag >> 3);
        const uint32_t wt = (uint32_t)(tag & 7);
        int32_t k = -1;
        if (next < nf && fields[6 * next] == number)
            k = next;
        else
            for (int32_t j = 0; j < nf; j++)
                if (fields[6 * j] == number) {
                    k = j;
                    break;
                }
        if (k < 0) {
            if (w[0] == PNODE_ENTRY) /* (protobuf keeps such an entry among the unknown fields: no entry) */
                return DECLINE;
            if (skip_unknown(&p, end, wt) < 0)
                return DECLINE;
            continue;
        }
        next = k + 1;
        const int32_t *f = fields + 6 * k;
        const int32_t op = f[1], fcol = f[2], flags = f[4], oneof = f[5];
        const int repeated = (flags & F_REPEATED) && op != PF_MAP;
        if (oneof >= 0) {
            if (oneof_seen[oneof] && !seen[k])
                return DECLINE; /* (a second member: the parser clears the first) */
            oneof_seen[oneof] = 1;
        }
        if (op == PF_MAP) {
            if (wt != WT_LEN || seen[k]) /* (a second entry: the map's order is the runtime's) */
                return DECLINE;
            seen[k] = 1;
            if (read_value(s, f, -1, &p, end, wt, 0, depth) < 0)
                return DECLINE;
            continue;
        }
        if (!repeated) {
            if (seen[k] || wt != wire_type_of(op))
                return DECLINE;
            seen[k] = 1;
            const int implicit = !(flags & (F_PRESENCE | F_ALWAYS));
            if (read_value(s, f, fcol, &p, end, wt, implicit, depth) < 0)
                return DECLINE;
            continue;
        }
        /* a repeated field: its values into the list's item column */
        seen[k] = 1;
        const int32_t item = fcol < 0 ? -1 : s->out->cols[fcol].first;
        if (wt == wire_type_of(op)) {
            if (read_value(s, f, item, &p, end, wt, 0, depth) < 0)
                return DECLINE;
        }
        else if (wt == WT_LEN && packable(op)) {
            Py_ssize_t n;
            if (read_length(&p, end, &n) < 0)
                return DECLINE;
            const uint8_t *run_end = p + n;
            const uint32_t item_wt = wire_type_of(op);
            while (p < run_end)
                if (read_value(s, f, item, &p, run_end, item_wt, 0, depth) < 0)
                    return DECLINE;
        }
        else
            return DECLINE;
    }
    if (p != end)
        return DECLINE;
    /* the fields not given, and the rows of the lists and maps */
    for (int32_t k = 0; k < nf; k++) {
        const int32_t *f = fields + 6 * k;
        const int32_t op = f[1], fcol = f[2], flags = f[4];
        if (!seen[k] && (flags & F_REQUIRED))
            return DECLINE;
        if (fcol < 0)
            continue;
        column *c = s->out->cols + fcol;
        if (op == PF_MAP) {
            if (ab_begin(s->out, c) < 0 || ab_put_offset(s->out, c, s->out->cols[c->first].n) < 0)
                return DECLINE;
        }
        else if (flags & F_REPEATED) {
            if (ab_begin(s->out, c) < 0 || ab_put_offset(s->out, c, s->out->cols[c->first].n) < 0)
                return DECLINE;
        }
        else if (!seen[k]) {
            if (flags & F_ALWAYS) {
                if (put_default(s, f, depth) < 0)
                    return DECLINE;
            }
            else if (ab_append_null(s->out, fcol) < 0)
                return DECLINE;
        }
    }
    return OK;
}

/* One value after its prefix: the message-index list [0], then the reader's message, to its last byte. */
static int
decode_row(const aprogram *P, arrow_out *o, const uint8_t *p, const uint8_t *end)
{
    if (p < end && p[0] == 0)
        p += 1;
    else if (end - p >= 2 && p[0] == 2 && p[1] == 0)
        p += 2;
    else
        return DECLINE;
    pstate s = {.P = P, .out = o};
    return decode_message(&s, P->root, 0, p, end, 0);
}

/* ---- the program ------------------------------------------------------------------------------ */

/* The column kind op writes. */
static int32_t
kind_of(int32_t op)
{
    switch (op) {
    case PF_INT32:
    case PF_UINT32:
    case PF_SINT32:
    case PF_FIXED32:
        return ACOL_I32;
    case PF_INT64:
    case PF_SINT64:
    case PF_FIXED64:
    case PF_MICROS:
        return ACOL_I64;
    case PF_BOOL:
        return ACOL_BOOL;
    case PF_FLOAT:
        return ACOL_F32;
    case PF_DOUBLE:
        return ACOL_F64;
    case PF_STRING:
    case PF_BYTES:
    case PF_ENUM:
        return ACOL_BIN;
    case PF_MESSAGE:
        return ACOL_STRUCT;
    case PF_MAP:
        return ACOL_MAP;
    }
    return -1;
}

static int check_message(const aprogram *P, int32_t node, int32_t col, int32_t key_col, int depth);

/* Whether field f (of a message writing `col`, or of an entry writing key_col and key_col + 1) is
 * sound: its op, its node, and the column it writes of the kind its op writes. */
static int
check_field(const aprogram *P, const int32_t *f, int32_t expected_col, int depth)
{
    const int32_t op = f[1], fcol = f[2], flags = f[4];
    if (op < PF_INT32 || op > PF_MAP || flags < 0 || flags > 31 || f[0] < 1 || f[0] > (1 << 29) - 1)
        return 0;
    if (fcol != -1 && fcol != expected_col)
        return 0;
    if (op == PF_ENUM) {
        const int32_t e = f[3];
        if (e < 4 || e > P->w[3] - 3 || P->w[e] != PNODE_ENUM || P->w[e + 2] < 0 ||
            P->w[e + 2] > (P->w[3] - e - 3) / 3)
            return 0;
        for (int32_t k = 0; k < P->w[e + 2]; k++) {
            const int32_t off = P->w[e + 4 + 3 * k], len = P->w[e + 5 + 3 * k];
            if (off < 0 || len < 0 || (Py_ssize_t)off + len > P->pool_len)
                return 0;
        }
    }
    int32_t item = fcol;
    if (fcol >= 0 && op != PF_MAP && (flags & F_REPEATED)) {
        const int32_t *list = ab_col_entry(P, fcol);
        if (list[0] != ACOL_LIST)
            return 0;
        item = list[1];
    }
    if (op == PF_MAP) {
        const int32_t *map = fcol >= 0 ? ab_col_entry(P, fcol) : NULL;
        if (map != NULL && map[0] != ACOL_MAP)
            return 0;
        return check_message(P, f[3], -1, map != NULL ? map[1] : -1, depth + 1) && P->w[f[3]] == PNODE_ENTRY;
    }
    if (item >= 0 && ab_col_entry(P, item)[0] != kind_of(op))
        return 0;
    if (op == PF_MESSAGE)
        return check_message(P, f[3], item, -1, depth + 1) && P->w[f[3]] == PNODE_MESSAGE;
    return 1;
}

/* Whether the message node at `node` lies within the program and its fields write `col`'s children
 * each once, in increasing field number (an entry: its key and value, key_col and key_col + 1). */
static int
check_message(const aprogram *P, int32_t node, int32_t col, int32_t key_col, int depth)
{
    if (node < 4 || node > P->w[3] - 4 || depth > MAX_DEPTH)
        return 0;
    const int32_t *w = P->w + node;
    const int32_t nf = w[2], noneof = w[3];
    if ((w[0] != PNODE_MESSAGE && w[0] != PNODE_ENTRY) || w[1] != col || nf < 0 || nf > MAX_FIELDS || noneof < 0 ||
        noneof > MAX_FIELDS || nf > (P->w[3] - node - 4) / 6)
        return 0;
    const int32_t *c = col >= 0 ? ab_col_entry(P, col) : NULL;
    if (c != NULL && c[0] != ACOL_STRUCT)
        return 0;
    if (w[0] == PNODE_ENTRY && (col != -1 || nf != 2 || noneof != 0))
        return 0;
    int32_t shown = 0;
    for (int32_t k = 0; k < nf; k++) {
        const int32_t *f = w + 4 + 6 * k;
        if (k > 0 && f[0] <= f[-6])
            return 0;
        if (f[5] < -1 || f[5] >= noneof)
            return 0;
        int32_t expected = -1;
        if (w[0] == PNODE_ENTRY) {
            if (f[0] != k + 1 || !(f[4] & F_ALWAYS) || (f[4] & F_REPEATED) || f[1] == PF_MAP)
                return 0;
            expected = key_col < 0 ? -1 : key_col + k;
            if (f[2] != expected)
                return 0;
        }
        else if (f[2] >= 0) { /* (a child of the struct, each written once: fields by number, columns as declared) */
            if (c == NULL || f[2] < c[1] || f[2] >= c[1] + c[2])
                return 0;
            for (int32_t j = 0; j < k; j++)
                if (w[4 + 6 * j + 2] == f[2])
                    return 0;
            expected = f[2];
            shown++;
        }
        if (!check_field(P, f, expected, depth))
            return 0;
    }
    return c == NULL || shown == c[2];
}

KFS_DOC(kfs_protobuf_arrow_program_doc,
"protobuf_arrow_program(program) -> object\n"
"\n"
"A program of kfs/registry/protobuf_arrow_program.py, checked (every node, column and name within it,\n"
"each field writing a column of its kind) and kept for protobuf_arrow_decode; ValueError when not one.");

PyObject *
kfs_protobuf_arrow_program(PyObject *module, PyObject *arg)
{
    (void)module;
    aprogram P;
    if (!ab_program_load(arg, &P, "protobuf_arrow_program"))
        return NULL;
    if (!check_message(&P, P.root, 0, -1, 0) || P.w[P.root] != PNODE_MESSAGE) {
        ab_program_free(&P);
        PyErr_SetString(PyExc_ValueError, "protobuf_arrow_program: not a program");
        return NULL;
    }
    return ab_program_capsule(&P, "kfs.protobuf_arrow_program");
}

KFS_DOC(kfs_protobuf_arrow_decode_doc,
"protobuf_arrow_decode(program, prefix, count, validity, offsets, data, offset, skip) -> (status, columns)\n"
"\n"
"The `count` values of an Arrow binary array decoded by a program of protobuf_arrow_program into the\n"
"buffers of the typed column, as avro_arrow_decode does: rows whose value starts with `prefix` (byte 0\n"
"and a schema id whose first message is the reader's) and then the message-index list [0] are decoded\n"
"when the per-row path would give the same value; `status` 0 decoded (or null), 1 declined.");

PyObject *
kfs_protobuf_arrow_decode(PyObject *module, PyObject *args)
{
    (void)module;
    return ab_decode_batch(args, "protobuf_arrow_decode", "kfs.protobuf_arrow_program", decode_row);
}
