/* Avro datums to JSON text by a program compiled from the schema (avro_json.h): the twin of
 * kfs.registry.avro.AvroRenderer.render for the datums it can render exactly so, and a decline (None)
 * for every other one, which the Python path then answers (its output or its error sentence).
 *
 * Declined: anything that does not decode (the Python path has the sentence), and what fastavro reads
 * in its own way: a boolean byte other than 0 or 1 (fastavro: true), an int, union index or enum
 * index of more than 5 bytes (Java refuses it: the Python path has the sentence; one of 5 bytes is read
 * here as Java reads it, its low 32 bits), a negative union or enum index (fastavro: Python's negative
 * indexing), a map key given twice (a dict keeps the last value at the first place), a map whose one key is `kfs__float` (the
 * Python path's converter takes it for a float wrapper), a float32 whose shortest digits overflow
 * float32 when packed (struct.pack raises), more than MAX_ITEMS array and map items in one datum or
 * more than MAX_DEPTH levels (the Python path's bounds: kfs.registry.avro.MAX_ZERO_WIDTH_ITEMS,
 * MAX_DEPTH, counted here at least as fast as its _Skipper counts them). */

#include "avro_json.h"
#include "../record/utf8.h"
#include "json_out.h"
#include "avro_binary.h"

#define MAX_ITEMS (1 << 20)
#define MAX_DEPTH 200
/* Each node here is at most two of _Skipper's levels: a union branch wrapped in a one-field record,
 * a float wrapped in one. */
#define DEPTH_STEP 2

typedef struct {
    int32_t *w; /* the words */
    int32_t nw;
    char *pool;
    Py_ssize_t pool_len;
    int pool_nonascii;
    int floats; /* a float or double node: rendering it calls PyOS_double_to_string, which needs the GIL */
} program;

typedef struct {
    const uint8_t *p, *end;
    json_out o;     /* the text written (json_out.h) */
    int64_t items;  /* array and map items so far */
} state;

enum { OK = AVRO_OK, DECLINE = AVRO_DECLINE };

/* ---- the output (json_out.h) ----------------------------------------------------------------- */

static inline int
reserve(state *s, size_t need)
{
    return jo_reserve(&s->o, need);
}

static inline int
put(state *s, const char *t, size_t n)
{
    return jo_put(&s->o, t, n);
}

#define PUT_LIT(s, lit) put((s), (lit), sizeof(lit) - 1)

static inline int
put_string(state *s, const uint8_t *t, Py_ssize_t n)
{
    return jo_put_string(&s->o, t, n);
}





/* ---- the datum ------------------------------------------------------------------------------- */

/* The datum's varints and lengths, read as Java reads them (avro_binary.h, shared with the other reader). */
static inline int
read_long(state *s, int64_t *v)
{
    return avro_read_long(&s->p, s->end, v);
}

static inline int
read_int(state *s, int32_t *v)
{
    return avro_read_int(&s->p, s->end, v);
}

static inline int
read_length(state *s, Py_ssize_t *n)
{
    return avro_read_length(&s->p, s->end, n);
}

/* Bytes and fixed: a string of code points 0-255 (bytes.decode("latin-1")), escaped as put_string. */
static int
put_latin1(state *s, const uint8_t *t, Py_ssize_t n)
{
    if (reserve(s, (size_t)n * 6 + 2) < 0)
        return DECLINE;
    char *d = s->o.buf + s->o.len;
    *d++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t c = t[i];
        if (c >= 0x80) {
            *d++ = (char)(0xC0 | (c >> 6));
            *d++ = (char)(0x80 | (c & 0x3F));
            s->o.nonascii = 1;
        }
        else if (c < 0x20) {
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
    }
    *d++ = '"';
    s->o.len = (size_t)(d - s->o.buf);
    return OK;
}

/* repr(x) of a finite double (what the json module writes for a float). */
static int
put_repr(state *s, double x)
{
    char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (r == NULL) {
        PyErr_Clear();
        s->o.nomem = 1;
        return DECLINE;
    }
    const int rc = put(s, r, strlen(r));
    PyMem_Free(r);
    return rc;
}

/* NaN and the infinities as the strings Jackson writes (the Python path's _quote_non_finite and
 * float32_text). */
static int
put_non_finite(state *s, double x)
{
    if (isnan(x))
        return PUT_LIT(s, "\"NaN\"");
    return x > 0 ? PUT_LIT(s, "\"Infinity\"") : PUT_LIT(s, "\"-Infinity\"");
}

/* kfs.registry.avro.float32_text: the first of 1..9 significant digits (Python's format "g") that
 * packs back to the same float32, then repr of that double. */
static int
put_float32(state *s, float f)
{
    const double x = (double)f;
    if (!isfinite(x))
        return put_non_finite(s, x);
    for (int digits = 1; digits < 10; digits++) {
        char *g = PyOS_double_to_string(x, 'g', digits, 0, NULL);
        if (g == NULL) {
            PyErr_Clear();
            s->o.nomem = 1;
            return DECLINE;
        }
        const double shorter = PyOS_string_to_double(g, NULL, NULL);
        PyMem_Free(g);
        if (shorter == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return DECLINE;
        }
        const float packed = (float)shorter;
        if (isinf(packed) && !isinf(shorter))
            return DECLINE; /* struct.pack("<f") raises OverflowError there */
        if (memcmp(&packed, &f, sizeof(float)) == 0)
            return put_repr(s, shorter);
    }
    return put_repr(s, x);
}

static int render(const program *P, int32_t node, state *s, int depth);

/* The blocks of an array or map: a count, a negative count followed by the block's size in bytes, 0 to end. */
static int
render_blocks(const program *P, int32_t child, int is_map, state *s, int depth)
{
    avro_span local[16];
    avro_span *keys = local;
    Py_ssize_t nkeys = 0, keys_cap = 16;
    int64_t emitted = 0;
    int rc = DECLINE;
    if ((is_map ? PUT_LIT(s, "{") : PUT_LIT(s, "[")) < 0)
        return DECLINE;
    for (;;) {
        int64_t count;
        if (read_long(s, &count) < 0)
            goto done;
        if (count == 0)
            break;
        if (count < 0) {
            int64_t size;
            if (count == INT64_MIN || read_long(s, &size) < 0)
                goto done;
            count = -count;
        }
        if (count > MAX_ITEMS - s->items)
            goto done;
        s->items += count;
        for (int64_t i = 0; i < count; i++) {
            if (emitted++ > 0 && PUT_LIT(s, ", ") < 0)
                goto done;
            if (is_map) {
                Py_ssize_t n;
                if (read_length(s, &n) < 0)
                    goto done;
                if (nkeys == keys_cap) {
                    avro_span *grown = PyMem_RawMalloc(sizeof(avro_span) * (size_t)keys_cap * 2);
                    if (grown == NULL) {
                        s->o.nomem = 1;
                        goto done;
                    }
                    memcpy(grown, keys, sizeof(avro_span) * (size_t)nkeys);
                    if (keys != local)
                        PyMem_RawFree(keys);
                    keys = grown;
                    keys_cap *= 2;
                }
                keys[nkeys].p = s->p;
                keys[nkeys].n = n;
                nkeys++;
                if (put_string(s, s->p, n) < 0 || PUT_LIT(s, ": ") < 0)
                    goto done;
                s->p += n;
            }
            if (render(P, child, s, depth) < 0)
                goto done;
        }
    }
    if (is_map) {
        if (nkeys == 1 && keys[0].n == 10 && memcmp(keys[0].p, "kfs__float", 10) == 0)
            goto done;
        if (avro_has_duplicates(keys, nkeys))
            goto done;
    }
    rc = is_map ? PUT_LIT(s, "}") : PUT_LIT(s, "]");
done:
    if (keys != local)
        PyMem_RawFree(keys);
    return rc;
}

static int
render(const program *P, int32_t node, state *s, int depth)
{
    depth += DEPTH_STEP;
    if (depth > MAX_DEPTH)
        return DECLINE;
    const int32_t *w = P->w + node;
    switch (w[0]) {
    case AVRO_NULL:
        return PUT_LIT(s, "null");
    case AVRO_BOOLEAN:
        if (s->p >= s->end || *s->p > 1)
            return DECLINE;
        return *s->p++ ? PUT_LIT(s, "true") : PUT_LIT(s, "false");
    case AVRO_INT:
    case AVRO_LONG: {
        int64_t v;
        if (w[0] == AVRO_INT) {
            int32_t i;
            if (read_int(s, &i) < 0)
                return DECLINE;
            v = i;
        } else if (read_long(s, &v) < 0)
            return DECLINE;
        if (reserve(s, 20) < 0)
            return DECLINE;
        s->o.len = (size_t)(write_int64(s->o.buf + s->o.len, v) - s->o.buf);
        return OK;
    }
    case AVRO_FLOAT: {
        if (s->end - s->p < 4)
            return DECLINE;
        float f;
        memcpy(&f, s->p, 4); /* (little-endian, as Avro writes it) */
        s->p += 4;
        return put_float32(s, f);
    }
    case AVRO_DOUBLE: {
        if (s->end - s->p < 8)
            return DECLINE;
        double x;
        memcpy(&x, s->p, 8);
        s->p += 8;
        return isfinite(x) ? put_repr(s, x) : put_non_finite(s, x);
    }
    case AVRO_BYTES:
    case AVRO_STRING: {
        Py_ssize_t n;
        if (read_length(s, &n) < 0)
            return DECLINE;
        const uint8_t *t = s->p;
        s->p += n;
        return w[0] == AVRO_STRING ? put_string(s, t, n) : put_latin1(s, t, n);
    }
    case AVRO_FIXED: {
        const Py_ssize_t n = w[1];
        if (s->end - s->p < n)
            return DECLINE;
        const uint8_t *t = s->p;
        s->p += n;
        return put_latin1(s, t, n);
    }
    case AVRO_ENUM: {
        int32_t i;
        if (read_int(s, &i) < 0 || i < 0 || i >= w[1])
            return DECLINE;
        return put(s, P->pool + w[2 + 2 * i], (size_t)w[3 + 2 * i]);
    }
    case AVRO_RECORD: {
        if (PUT_LIT(s, "{") < 0)
            return DECLINE;
        for (int32_t i = 0; i < w[1]; i++) {
            const int32_t *f = w + 2 + 3 * i;
            if (reserve(s, (size_t)f[1] + 2 + 16) < 0) /* ", " and the field's `"name": `; 16: copy_text's */
                return DECLINE;
            if (i > 0) {
                memcpy(s->o.buf + s->o.len, ", ", 2);
                s->o.len += 2;
            }
            jo_copy_text(s->o.buf + s->o.len, P->pool + f[0], (size_t)f[1], P->pool + P->pool_len);
            s->o.len += (size_t)f[1];
            if (render(P, f[2], s, depth) < 0)
                return DECLINE;
        }
        return PUT_LIT(s, "}");
    }
    case AVRO_ARRAY:
    case AVRO_MAP:
        return render_blocks(P, w[1], w[0] == AVRO_MAP, s, depth);
    case AVRO_UNION: {
        int32_t i;
        if (read_int(s, &i) < 0 || i < 0 || i >= w[1])
            return DECLINE;
        const int32_t *b = w + 2 + 3 * i;
        if (b[1] < 0) /* null */
            return render(P, b[2], s, depth);
        if (PUT_LIT(s, "{") < 0 || put(s, P->pool + b[0], (size_t)b[1]) < 0 || render(P, b[2], s, depth) < 0)
            return DECLINE;
        return PUT_LIT(s, "}");
    }
    }
    return DECLINE;
}

/* ---- the program ----------------------------------------------------------------------------- */

static void
program_free(PyObject *capsule)
{
    program *P = PyCapsule_GetPointer(capsule, "kfs.avro_program");
    if (P != NULL) {
        PyMem_Free(P->w);
        PyMem_Free(P);
    }
}

/* Whether the node at word i and every node it reaches lie within the program, their texts within
 * the pool; `seen` marks the nodes checked (a named type recurs). */
static int
check_node(const program *P, int32_t i, uint8_t *seen, int depth)
{
    if (i < 3 || i >= P->nw)
        return 0;
    if (seen[i])
        return 1;
    if (depth > 10000)
        return 0;
    seen[i] = 1;
    const int32_t *w = P->w + i;
    const int32_t room = P->nw - i;
#define TEXT_OK(off, len) ((off) >= 0 && (len) >= 0 && (Py_ssize_t)(off) + (len) <= P->pool_len)
    switch (w[0]) {
    case AVRO_NULL:
    case AVRO_BOOLEAN:
    case AVRO_INT:
    case AVRO_LONG:
    case AVRO_FLOAT:
    case AVRO_DOUBLE:
    case AVRO_BYTES:
    case AVRO_STRING:
        return 1;
    case AVRO_FIXED:
        return room >= 2 && w[1] >= 0;
    case AVRO_ARRAY:
    case AVRO_MAP:
        return room >= 2 && check_node(P, w[1], seen, depth + 1);
    case AVRO_ENUM:
        if (room < 2 || w[1] < 0 || w[1] > (room - 2) / 2)
            return 0;
        for (int32_t k = 0; k < w[1]; k++)
            if (!TEXT_OK(w[2 + 2 * k], w[3 + 2 * k]))
                return 0;
        return 1;
    case AVRO_RECORD:
    case AVRO_UNION:
        if (room < 2 || w[1] < 0 || w[1] > (room - 2) / 3)
            return 0;
        for (int32_t k = 0; k < w[1]; k++) {
            const int32_t *f = w + 2 + 3 * k;
            if (!(w[0] == AVRO_UNION && f[1] == -1) && !TEXT_OK(f[0], f[1]))
                return 0;
            if (!check_node(P, f[2], seen, depth + 1))
                return 0;
        }
        return 1;
    }
    return 0;
#undef TEXT_OK
}

KFS_DOC(kfs_avro_program_doc,
"avro_program(program) -> object\n"
"\n"
"A program of kfs/registry/avro_program.py, checked (every node and text within it) and kept for\n"
"render_avro; ValueError when it is not one.");

PyObject *
kfs_avro_program(PyObject *module, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "avro_program: a bytes object");
        return NULL;
    }
    const Py_ssize_t size = PyBytes_GET_SIZE(arg);
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(arg);
    if (size < 12 || size > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "avro_program: not a program");
        return NULL;
    }
    int32_t nw = (int32_t)kfs_load_le32(b + 4);
    if (nw < 3 || (Py_ssize_t)nw * 4 > size) {
        PyErr_SetString(PyExc_ValueError, "avro_program: not a program");
        return NULL;
    }
    program *P = PyMem_Calloc(1, sizeof(program));
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
    P->pool = mem + 4 * (Py_ssize_t)nw;
    P->pool_len = size - 4 * (Py_ssize_t)nw;
    memcpy(P->pool, b + 4 * (Py_ssize_t)nw, (size_t)P->pool_len);
    P->pool_nonascii = P->w[2] != 0;
    const int ok = check_node(P, P->w[0], seen, 0);
    for (int32_t i = 3; ok && i < nw; i++) /* (seen: the checked nodes, each at its kind's word) */
        if (seen[i] && (P->w[i] == AVRO_FLOAT || P->w[i] == AVRO_DOUBLE))
            P->floats = 1;
    PyMem_Free(seen);
    if (!ok) {
        PyMem_Free(mem);
        PyMem_Free(P);
        PyErr_SetString(PyExc_ValueError, "avro_program: not a program");
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(P, "kfs.avro_program", program_free);
    if (capsule == NULL) {
        PyMem_Free(mem);
        PyMem_Free(P);
    }
    return capsule;
}

/* The output buffer, kept between calls (the GIL is held throughout, and nothing in a rendering runs
 * Python code): most datums fit the first one. One larger than 1 MiB is let go at the next call. */
static char *kept_buf;
static size_t kept_cap;

int
kfs_avro_render(PyObject *capsule, const uint8_t *p, Py_ssize_t n, const char **text, size_t *len, int *nonascii)
{
    const program *P = PyCapsule_GetPointer(capsule, "kfs.avro_program");
    if (P == NULL)
        return -1;
    if (kept_cap > ((size_t)1 << 20)) {
        PyMem_RawFree(kept_buf);
        kept_buf = NULL;
        kept_cap = 0;
    }
    state s = {.p = p, .end = p + n, .o = {.buf = kept_buf, .cap = kept_cap, .nonascii = P->pool_nonascii}};
    const int rc = render(P, P->w[0], &s, 0);
    kept_buf = s.o.buf;
    kept_cap = s.o.cap;
    if (s.o.nomem) {
        PyErr_NoMemory();
        return -1;
    }
    if (rc != OK || s.p != s.end)
        return 0;
    *text = s.o.buf;
    *len = s.o.len;
    *nonascii = s.o.nonascii;
    return 1;
}

const void *
kfs_avro_program_of(PyObject *capsule, int *needs_gil)
{
    const program *P = PyCapsule_GetPointer(capsule, "kfs.avro_program");
    if (P != NULL)
        *needs_gil = P->floats;
    return P;
}

int
kfs_avro_render_into(const void *program_of, const uint8_t *p, Py_ssize_t n, json_out *out)
{
    const program *P = program_of;
    state s = {.p = p, .end = p + n, .o = {.buf = out->buf, .cap = out->cap, .nonascii = P->pool_nonascii}};
    const int rc = render(P, P->w[0], &s, 0);
    *out = s.o;
    if (s.o.nomem)
        return -1;
    return rc == OK && s.p == s.end;
}

KFS_DOC(kfs_render_avro_doc,
"render_avro(program, data, start=0) -> str | None\n"
"\n"
"The JSON text of the Avro datum data[start:] (all of it), exactly as\n"
"kfs.registry.avro.AvroRenderer.render_python gives it, or None where that Python path must answer:\n"
"an error, or a datum fastavro reads in its own way.");

PyObject *
kfs_render_avro(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "render_avro(program, data, start=0) takes 2 or 3 arguments");
        return NULL;
    }
    Py_ssize_t start = 0;
    if (nargs == 3 && (start = PyLong_AsSsize_t(args[2])) == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (start < 0 || start > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "render_avro: start is outside the datum");
        return NULL;
    }
    const char *text;
    size_t len;
    int nonascii;
    const int rc = kfs_avro_render(args[0], (const uint8_t *)view.buf + start, view.len - start, &text, &len, &nonascii);
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        Py_RETURN_NONE;
    if (nonascii)
        return PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "strict");
    PyObject *result = PyUnicode_New((Py_ssize_t)len, 127);
    if (result != NULL)
        memcpy(PyUnicode_DATA(result), text, len);
    return result;
}
