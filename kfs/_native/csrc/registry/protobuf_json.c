/* Protobuf messages to the JSON text of kfs's line: the twin of kfs.registry.protobuf.ProtobufRenderer's
 * Python path (protobuf's parser, json_format.MessageToDict with its defaults, the json module), by a
 * program compiled from the message's descriptor (kfs/registry/protobuf_program.py), with no Python
 * object per field. As avro_json.c does, it answers only messages it renders byte for byte as that path
 * does and declines every other one (None), which the Python path then answers (its text or its error).
 *
 * What it renders: proto3 messages of scalar, string, bytes, open-enum and message fields, repeated
 * (packed or not) or not, with or without presence (`optional`, oneof members, messages): fields in
 * field-number order (ListFields' order), named by their JSON names, a field without presence left out
 * at its default, 64-bit integers as strings, enums by name (a number the enum lacks as the number),
 * bytes in base64, floats as json_format writes them. Declined: anything the parser refuses or reads
 * in its own way (a malformed or overlong varint, a length past the end, a wrong wire type, field
 * number 0, invalid UTF-8 in a string), a field the message does not declare (an unknown field), a
 * message field given twice (the parser merges them), -0.0 in a field without presence, a float whose
 * shortest digits overflow when packed, more than MAX_FIELDS fields or MAX_DEPTH levels. The compiler
 * leaves out (no program) maps, groups, well-known types, closed enums and anything not proto3. */

#include "protobuf_json.h"

#define MAX_FIELDS 64
#define MAX_DEPTH 64

enum { PB_MESSAGE = 1, PB_ENUM = 2 };
enum { OP_INT32 = 1, OP_INT64, OP_UINT32, OP_UINT64, OP_SINT32, OP_SINT64, OP_BOOL, OP_FIXED32, OP_SFIXED32,
       OP_FIXED64, OP_SFIXED64, OP_FLOAT, OP_DOUBLE, OP_STRING, OP_BYTES, OP_ENUM, OP_MESSAGE, OP_LAST = OP_MESSAGE };
enum { F_REPEATED = 1, F_PRESENCE = 2 };
#define FIELD_WORDS 7 /* number, op, flags, name offset, name length, child node, oneof (0: none, else 1..) */

typedef struct {
    int32_t *w;
    int32_t nw;
    const char *pool;
    Py_ssize_t pool_len;
    int floats; /* a float or double field: its text is PyOS_double_to_string's, which needs the GIL */
} pb_program;

typedef struct {
    json_out o;
} pb_state;

/* ---- the wire ------------------------------------------------------------------------------- */

/* A varint of at most 10 bytes whose 10th is 0 or 1 (a longer or larger one is the parser's to judge). */
static inline int
read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (*p >= end)
            return -1;
        const uint8_t b = *(*p)++;
        if (i == 9 && b > 1)
            return -1;
        x |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* The wire type a field's op is written with (packed repeated scalars: 2 as well). */
static inline int
wire_type(int op)
{
    switch (op) {
    case OP_FIXED32:
    case OP_SFIXED32:
    case OP_FLOAT:
        return 5;
    case OP_FIXED64:
    case OP_SFIXED64:
    case OP_DOUBLE:
        return 1;
    case OP_STRING:
    case OP_BYTES:
    case OP_MESSAGE:
        return 2;
    default:
        return 0;
    }
}

/* A length-delimited value's length, within the message. */
static inline int
read_length(const uint8_t **p, const uint8_t *end, Py_ssize_t *n)
{
    uint64_t v;
    if (read_varint(p, end, &v) < 0 || v > (uint64_t)INT32_MAX || (uint64_t)(end - *p) < v)
        return -1;
    *n = (Py_ssize_t)v;
    return 0;
}

/* The field of message node m numbered `number` (fields are in number order), or NULL. */
static inline const int32_t *
field_of(const int32_t *m, uint32_t number)
{
    int32_t lo = 0, hi = m[1] - 1;
    while (lo <= hi) {
        const int32_t mid = (lo + hi) / 2;
        const int32_t *f = m + 2 + FIELD_WORDS * mid;
        if ((uint32_t)f[0] == number)
            return f;
        if ((uint32_t)f[0] < number)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* Past one value (wire type wt) at *p, checked as the parser checks it (`utf8`: a proto3 string's bytes
 * too): 0, or -1 to decline. */
static int
skip_value(int utf8, int wt, const uint8_t **p, const uint8_t *end)
{
    uint64_t v;
    Py_ssize_t n;
    switch (wt) {
    case 0:
        return read_varint(p, end, &v);
    case 1:
        if (end - *p < 8)
            return -1;
        *p += 8;
        return 0;
    case 5:
        if (end - *p < 4)
            return -1;
        *p += 4;
        return 0;
    case 2:
        if (read_length(p, end, &n) < 0)
            return -1;
        if (utf8 && !valid_utf8(*p, n)) /* (proto3: the parser refuses it, shown or not) */
            return -1;
        *p += n;
        return 0;
    }
    return -1;
}

/* ---- the text ------------------------------------------------------------------------------- */

static inline int
put_uint64(json_out *o, uint64_t u, int quoted)
{
    if (jo_reserve(o, 24) < 0)
        return -1;
    char tmp[20];
    int i = 20;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    char *d = o->buf + o->len;
    if (quoted)
        *d++ = '"';
    memcpy(d, tmp + i, (size_t)(20 - i));
    d += 20 - i;
    if (quoted)
        *d++ = '"';
    o->len = (size_t)(d - o->buf);
    return 0;
}

static inline int
put_int64(json_out *o, int64_t v, int quoted)
{
    if (jo_reserve(o, 24) < 0)
        return -1;
    char *d = o->buf + o->len;
    if (quoted)
        *d++ = '"';
    d = write_int64(d, v);
    if (quoted)
        *d++ = '"';
    o->len = (size_t)(d - o->buf);
    return 0;
}

/* repr(x) of a finite double, as the json module writes a float. (The GIL is held: PyOS_*.) */
static int
put_repr(json_out *o, double x)
{
    char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (r == NULL) {
        PyErr_Clear();
        o->nomem = 1;
        return -1;
    }
    const int rc = jo_put(o, r, strlen(r));
    PyMem_Free(r);
    return rc;
}

/* protobuf's type_checkers.ToShortestFloat: the first of 6, 7... significant digits (format "g") that packs
 * back to the same float32, then repr of that double. */
static int
put_float32(json_out *o, float f)
{
    const double x = (double)f;
    for (int digits = 6; digits < 18; digits++) {
        char *g = PyOS_double_to_string(x, 'g', digits, 0, NULL);
        if (g == NULL) {
            PyErr_Clear();
            o->nomem = 1;
            return -1;
        }
        const double rounded = PyOS_string_to_double(g, NULL, NULL);
        PyMem_Free(g);
        if (rounded == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return -1;
        }
        const float packed = (float)rounded;
        if (isinf(packed))
            return -1; /* struct.pack("<f") raises OverflowError there */
        if ((double)packed == x)
            return put_repr(o, rounded);
    }
    return -1;
}

static int
put_non_finite(json_out *o, double x)
{
    if (isnan(x))
        return JO_LIT(o, "\"NaN\"");
    return x > 0 ? JO_LIT(o, "\"Infinity\"") : JO_LIT(o, "\"-Infinity\"");
}

static const char BASE64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64.b64encode(t).decode(), as a JSON string. */
static int
put_base64(json_out *o, const uint8_t *t, Py_ssize_t n)
{
    if (jo_reserve(o, (size_t)(n + 2) / 3 * 4 + 2) < 0)
        return -1;
    char *d = o->buf + o->len;
    *d++ = '"';
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        const uint32_t v = (uint32_t)t[i] << 16 | (uint32_t)t[i + 1] << 8 | t[i + 2];
        *d++ = BASE64[v >> 18];
        *d++ = BASE64[(v >> 12) & 63];
        *d++ = BASE64[(v >> 6) & 63];
        *d++ = BASE64[v & 63];
    }
    if (n - i == 1) {
        const uint32_t v = (uint32_t)t[i] << 16;
        *d++ = BASE64[v >> 18];
        *d++ = BASE64[(v >> 12) & 63];
        *d++ = '=';
        *d++ = '=';
    }
    else if (n - i == 2) {
        const uint32_t v = (uint32_t)t[i] << 16 | (uint32_t)t[i + 1] << 8;
        *d++ = BASE64[v >> 18];
        *d++ = BASE64[(v >> 12) & 63];
        *d++ = BASE64[(v >> 6) & 63];
        *d++ = '=';
    }
    *d++ = '"';
    o->len = (size_t)(d - o->buf);
    return 0;
}

static int render_message(const pb_program *P, int32_t node, const uint8_t *p, const uint8_t *end, json_out *o,
                          int depth);

/* One value of field f at *p (its wire type wt; a packed element: its scalar's), written; *is_default set
 * when it is the field's default (a field without presence then leaves it out). 0, or -1 to decline. */
static int
put_value(const pb_program *P, const int32_t *f, int wt, const uint8_t **p, const uint8_t *end, json_out *o,
          int depth, int *is_default)
{
    const int op = f[1];
    uint64_t v = 0;
    *is_default = 0;
    if (wt == 0 && read_varint(p, end, &v) < 0)
        return -1;
    if (wt == 5) {
        if (end - *p < 4)
            return -1;
        uint32_t u;
        memcpy(&u, *p, 4);
        *p += 4;
        v = u;
    }
    else if (wt == 1) {
        if (end - *p < 8)
            return -1;
        memcpy(&v, *p, 8);
        *p += 8;
    }
    switch (op) {
    case OP_INT32:
    case OP_SFIXED32:
        *is_default = (int32_t)(uint32_t)v == 0;
        return put_int64(o, (int32_t)(uint32_t)v, 0);
    case OP_UINT32:
    case OP_FIXED32:
        *is_default = (uint32_t)v == 0;
        return put_uint64(o, (uint32_t)v, 0);
    case OP_SINT32: {
        const uint32_t u = (uint32_t)v;
        const int32_t s = (int32_t)((u >> 1) ^ (0u - (u & 1)));
        *is_default = s == 0;
        return put_int64(o, s, 0);
    }
    case OP_INT64:
    case OP_SFIXED64:
        *is_default = v == 0;
        return put_int64(o, (int64_t)v, 1);
    case OP_UINT64:
    case OP_FIXED64:
        *is_default = v == 0;
        return put_uint64(o, v, 1);
    case OP_SINT64: {
        const int64_t s = (int64_t)((v >> 1) ^ (0 - (v & 1)));
        *is_default = s == 0;
        return put_int64(o, s, 1);
    }
    case OP_BOOL:
        *is_default = v == 0;
        return v ? JO_LIT(o, "true") : JO_LIT(o, "false");
    case OP_ENUM: {
        const int32_t number = (int32_t)(uint32_t)v;
        *is_default = number == 0;
        const int32_t *e = P->w + f[5];
        for (int32_t k = 0; k < e[1]; k++)
            if (e[2 + 3 * k] == number)
                return jo_put(o, P->pool + e[3 + 3 * k], (size_t)e[4 + 3 * k]);
        return put_int64(o, number, 0); /* (an open enum keeps a number it does not name) */
    }
    case OP_FLOAT: {
        float x;
        const uint32_t bits = (uint32_t)v;
        memcpy(&x, &bits, 4);
        *is_default = bits == 0;
        if (bits == 0x80000000u) /* -0.0: whether the parser's presence sees it is left to it */
            return -1;
        return isfinite(x) ? put_float32(o, x) : put_non_finite(o, x);
    }
    case OP_DOUBLE: {
        double x;
        memcpy(&x, &v, 8);
        *is_default = v == 0;
        if (v == 0x8000000000000000ull)
            return -1;
        return isfinite(x) ? put_repr(o, x) : put_non_finite(o, x);
    }
    case OP_STRING:
    case OP_BYTES:
    case OP_MESSAGE: {
        Py_ssize_t n;
        if (read_length(p, end, &n) < 0)
            return -1;
        const uint8_t *t = *p;
        *p += n;
        *is_default = n == 0 && op != OP_MESSAGE;
        if (op == OP_STRING)
            return jo_put_string(o, t, n);
        if (op == OP_BYTES)
            return put_base64(o, t, n);
        return render_message(P, f[5], t, t + n, o, depth + 1);
    }
    }
    return -1;
}

/* Every element of repeated field f in the message p[0:end], in wire order, written ", "-separated;
 * *count the elements. */
static int
put_elements(const pb_program *P, const int32_t *f, const uint8_t *p, const uint8_t *end, json_out *o, int depth,
             int64_t *count)
{
    const int scalar_wt = wire_type(f[1]);
    while (p < end) {
        uint64_t tag;
        if (read_varint(&p, end, &tag) < 0)
            return -1;
        const int wt = (int)(tag & 7);
        const uint8_t *value = p;
        if (skip_value(0, wt, &p, end) < 0) /* (checked by the first pass: only moves on) */
            return -1;
        if ((uint32_t)(tag >> 3) != (uint32_t)f[0])
            continue;
        int is_default;
        if (wt == 2 && scalar_wt != 2) { /* packed */
            const uint8_t *q = value, *packed_end;
            Py_ssize_t n;
            if (read_length(&q, end, &n) < 0)
                return -1;
            packed_end = q + n;
            while (q < packed_end) {
                if ((*count)++ > 0 && JO_LIT(o, ", ") < 0)
                    return -1;
                if (put_value(P, f, scalar_wt, &q, packed_end, o, depth, &is_default) < 0)
                    return -1;
            }
            continue;
        }
        if ((*count)++ > 0 && JO_LIT(o, ", ") < 0)
            return -1;
        const uint8_t *q = value;
        if (put_value(P, f, wt, &q, end, o, depth, &is_default) < 0)
            return -1;
    }
    return 0;
}

static int
render_message(const pb_program *P, int32_t node, const uint8_t *p, const uint8_t *end, json_out *o, int depth)
{
    if (depth > MAX_DEPTH)
        return -1;
    const int32_t *m = P->w + node;
    const int32_t nf = m[1];
    const uint8_t *last[MAX_FIELDS];
    int last_wt[MAX_FIELDS];
    int32_t seen[MAX_FIELDS];
    for (int32_t k = 0; k < nf; k++)
        seen[k] = 0;
    /* First pass: every field known, of its wire type, its value well formed; the last of each. */
    for (const uint8_t *q = p; q < end;) {
        uint64_t tag;
        if (read_varint(&q, end, &tag) < 0 || tag > UINT32_MAX || (tag >> 3) == 0)
            return -1;
        const int32_t *f = field_of(m, (uint32_t)(tag >> 3));
        const int wt = (int)(tag & 7);
        if (f == NULL)
            return -1; /* an unknown field */
        const int expected = wire_type(f[1]);
        if (wt != expected && !(wt == 2 && (f[2] & F_REPEATED) && expected != 2))
            return -1;
        const int32_t k = (int32_t)((f - (m + 2)) / FIELD_WORDS);
        if (f[1] == OP_MESSAGE && !(f[2] & F_REPEATED) && seen[k])
            return -1; /* given twice: the parser merges them */
        if (f[6] != 0) { /* a oneof's member: another one given too is the parser's to clear */
            for (int32_t j = 0; j < nf; j++)
                if (j != k && seen[j] && m[2 + FIELD_WORDS * j + 6] == f[6])
                    return -1;
        }
        if (wt == 2 && expected != 2) { /* packed: its elements whole */
            const uint8_t *r = q;
            Py_ssize_t n;
            if (read_length(&r, end, &n) < 0)
                return -1;
            const uint8_t *packed_end = r + n;
            while (r < packed_end)
                if (skip_value(0, expected, &r, packed_end) < 0)
                    return -1;
        }
        last[k] = q;
        last_wt[k] = wt;
        seen[k]++;
        if (skip_value(f[1] == OP_STRING, wt, &q, end) < 0)
            return -1;
    }
    if (JO_LIT(o, "{") < 0)
        return -1;
    int written = 0;
    for (int32_t k = 0; k < nf; k++) {
        if (!seen[k])
            continue;
        const int32_t *f = m + 2 + FIELD_WORDS * k;
        const size_t mark = o->len;
        if (jo_reserve(o, (size_t)f[4] + 2 + 16) < 0)
            return -1;
        if (written) {
            memcpy(o->buf + o->len, ", ", 2);
            o->len += 2;
        }
        jo_copy_text(o->buf + o->len, P->pool + f[3], (size_t)f[4], P->pool + P->pool_len);
        o->len += (size_t)f[4];
        if (f[2] & F_REPEATED) {
            int64_t count = 0;
            if (JO_LIT(o, "[") < 0 || put_elements(P, f, p, end, o, depth, &count) < 0 || JO_LIT(o, "]") < 0)
                return -1;
            if (count == 0) { /* (packed, empty: not a field ListFields gives) */
                o->len = mark;
                continue;
            }
        }
        else {
            int is_default;
            const uint8_t *q = last[k];
            if (put_value(P, f, last_wt[k], &q, end, o, depth, &is_default) < 0)
                return -1;
            if (is_default && !(f[2] & F_PRESENCE)) {
                o->len = mark;
                continue;
            }
        }
        written = 1;
    }
    return JO_LIT(o, "}");
}

/* ---- the program ---------------------------------------------------------------------------- */

static void
program_free(PyObject *capsule)
{
    pb_program *P = PyCapsule_GetPointer(capsule, "kfs.protobuf_program");
    if (P != NULL) {
        PyMem_Free(P->w);
        PyMem_Free(P);
    }
}

/* Whether node i and every node it reaches lie within the program, their fields in number order, their
 * texts within the pool. */
static int
check_node(const pb_program *P, int32_t i, uint8_t *seen, int depth)
{
    if (i < 3 || i >= P->nw - 1 || depth > 1000)
        return 0;
    if (seen[i])
        return seen[i] == (uint8_t)P->w[i];
    seen[i] = (uint8_t)P->w[i];
    const int32_t *w = P->w + i;
    const int32_t room = P->nw - i - 2;
#define TEXT_OK(off, len) ((off) >= 0 && (len) >= 0 && (Py_ssize_t)(off) + (len) <= P->pool_len)
    if (w[0] == PB_ENUM) {
        if (w[1] < 0 || w[1] > room / 3)
            return 0;
        for (int32_t k = 0; k < w[1]; k++)
            if (!TEXT_OK(w[3 + 3 * k], w[4 + 3 * k]))
                return 0;
        return 1;
    }
    if (w[0] != PB_MESSAGE || w[1] < 0 || w[1] > MAX_FIELDS || w[1] > room / FIELD_WORDS)
        return 0;
    for (int32_t k = 0; k < w[1]; k++) {
        const int32_t *f = w + 2 + FIELD_WORDS * k;
        if (f[0] < 1 || (k > 0 && f[0] <= f[-FIELD_WORDS]) || f[1] < OP_INT32 || f[1] > OP_LAST ||
            (f[2] & ~(F_REPEATED | F_PRESENCE)) || !TEXT_OK(f[3], f[4]) || f[6] < 0)
            return 0;
        if (f[1] == OP_ENUM && (!check_node(P, f[5], seen, depth + 1) || P->w[f[5]] != PB_ENUM))
            return 0;
        if (f[1] == OP_MESSAGE && (!check_node(P, f[5], seen, depth + 1) || P->w[f[5]] != PB_MESSAGE))
            return 0;
    }
    return 1;
#undef TEXT_OK
}

KFS_DOC(kfs_protobuf_program_doc,
"protobuf_program(program) -> object\n"
"\n"
"A program of kfs/registry/protobuf_program.py, checked (every node and text within it) and kept for\n"
"render_protobuf; ValueError when it is not one.");

PyObject *
kfs_protobuf_program(PyObject *module, PyObject *arg)
{
    (void)module;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "protobuf_program: a bytes object");
        return NULL;
    }
    const Py_ssize_t size = PyBytes_GET_SIZE(arg);
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(arg);
    const int32_t nw = size >= 12 ? (int32_t)kfs_load_le32(b + 4) : 0;
    if (nw < 5 || (Py_ssize_t)nw * 4 > size) {
        PyErr_SetString(PyExc_ValueError, "protobuf_program: not a program");
        return NULL;
    }
    pb_program *P = PyMem_Calloc(1, sizeof(pb_program));
    char *mem = PyMem_Malloc((size_t)size);
    uint8_t *seen = PyMem_Calloc((size_t)nw, 1);
    if (P == NULL || mem == NULL || seen == NULL) {
        PyMem_Free(P);
        PyMem_Free(mem);
        PyMem_Free(seen);
        return PyErr_NoMemory();
    }
    P->w = (int32_t *)mem;
    for (int32_t i = 0; i < nw; i++)
        P->w[i] = (int32_t)kfs_load_le32(b + 4 * (Py_ssize_t)i);
    P->nw = nw;
    memcpy(mem + 4 * (Py_ssize_t)nw, b + 4 * (Py_ssize_t)nw, (size_t)(size - 4 * (Py_ssize_t)nw));
    P->pool = mem + 4 * (Py_ssize_t)nw;
    P->pool_len = size - 4 * (Py_ssize_t)nw;
    const int ok = check_node(P, P->w[0], seen, 0) && P->w[P->w[0]] == PB_MESSAGE;
    for (int32_t i = 3; ok && i < nw; i++) /* (seen: the checked nodes, each at its kind's word) */
        if (seen[i] == PB_MESSAGE)
            for (int32_t k = 0; k < P->w[i + 1]; k++) {
                const int op = P->w[i + 2 + FIELD_WORDS * k + 1];
                P->floats |= op == OP_FLOAT || op == OP_DOUBLE;
            }
    PyMem_Free(seen);
    if (!ok) {
        PyMem_Free(mem);
        PyMem_Free(P);
        PyErr_SetString(PyExc_ValueError, "protobuf_program: not a program");
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(P, "kfs.protobuf_program", program_free);
    if (capsule == NULL) {
        PyMem_Free(mem);
        PyMem_Free(P);
    }
    return capsule;
}

const void *
kfs_protobuf_program_of(PyObject *capsule, int *needs_gil)
{
    const pb_program *P = PyCapsule_GetPointer(capsule, "kfs.protobuf_program");
    if (P != NULL)
        *needs_gil = P->floats;
    return P;
}

int
kfs_protobuf_render_into(const void *program, const uint8_t *p, Py_ssize_t n, json_out *out)
{
    const pb_program *P = program;
    const int rc = render_message(P, P->w[0], p, p + n, out, 0);
    if (out->nomem) {
        out->nomem = 0;
        return P->floats ? 0 : -1; /* (a float's text that failed: the Python path says what) */
    }
    return rc == 0;
}

KFS_DOC(kfs_render_protobuf_doc,
"render_protobuf(program, data, start) -> str | None\n"
"\n"
"The JSON text of the Protobuf message data[start:], exactly as kfs.registry.protobuf.ProtobufRenderer's\n"
"Python path gives it, or None where that path must answer: an error, or a message it reads in its own\n"
"way (see protobuf_json.c).");

PyObject *
kfs_render_protobuf(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "render_protobuf(program, data, start) takes 3 arguments");
        return NULL;
    }
    const pb_program *P = PyCapsule_GetPointer(args[0], "kfs.protobuf_program");
    if (P == NULL)
        return NULL;
    const Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    if (start < 0 || start > view.len) {
        PyErr_SetString(PyExc_ValueError, "render_protobuf: start is outside the data");
        goto done;
    }
    json_out o = {NULL, 0, 0, 0, 0};
    const uint8_t *p = (const uint8_t *)view.buf;
    const int rc = render_message(P, P->w[0], p + start, p + view.len, &o, 0);
    if (o.nomem && rc < 0 && PyErr_Occurred() == NULL)
        result = Py_NewRef(Py_None); /* (a float's text failed: the Python path says) */
    else if (rc < 0)
        result = Py_NewRef(Py_None);
    else
        result = PyUnicode_DecodeUTF8(o.buf, (Py_ssize_t)o.len, "strict");
    PyMem_RawFree(o.buf);
done:
    PyBuffer_Release(&view);
    return result;
}
