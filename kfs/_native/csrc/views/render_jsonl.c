/* render_jsonl: Record objects -> JSON lines; the twin of kfs/views/jsonl.py:render_line, for many
 * records at once. Records the fast path does not know (control records, anything unusual) are left
 * to the Python renderer, called back as `fallback`. */

#include "json_text.h"
#include "offsets_json.h"
#include "../registry/avro_json.h"

/* A growing output buffer. */
typedef struct {
    char *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
} outbuf;

static int
ob_grow(outbuf *o, Py_ssize_t need)
{
    if (need > PY_SSIZE_T_MAX - o->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cap = o->cap ? o->cap : 1 << 14;
    while (cap - o->len < need) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            cap = o->len + need;
            break;
        }
        cap *= 2;
    }
    char *b = PyMem_Realloc(o->buf, (size_t)cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = b;
    o->cap = cap;
    return 0;
}

/* Room for `need` more bytes; everything written after it up to `need` bytes goes unchecked. */
static inline int
ob_reserve(outbuf *o, Py_ssize_t need)
{
    if (o->cap - o->len >= need)
        return 0;
    return ob_grow(o, need);
}

static inline void
ob_put(outbuf *o, const char *s, Py_ssize_t n)
{
    memcpy(o->buf + o->len, s, (size_t)n);
    o->len += n;
}

#define OB_PUT_LITERAL(o, s) ob_put((o), (s), (Py_ssize_t)(sizeof(s) - 1))

/* str(int) of an int64 (write_int64); needs 20 bytes reserved. */
static void
ob_put_int64(outbuf *o, int64_t v)
{
    char *start = o->buf + o->len;
    o->len += write_int64(start, v) - start;
}
/* render_bytes(): a JSON string when valid UTF-8, {"base64": "..."} when not, null for None. */
static int
put_bytes(outbuf *o, PyObject *obj)
{
    if (obj == Py_None) {
        if (ob_reserve(o, 4) < 0)
            return -1;
        OB_PUT_LITERAL(o, "null");
        return 0;
    }
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(obj);
    const Py_ssize_t n = PyBytes_GET_SIZE(obj);
    /* the worst of: every byte a 6-byte escape, plus quotes; base64 plus its wrapper */
    if (n > (PY_SSIZE_T_MAX - 32) / 6) {
        PyErr_NoMemory();
        return -1;
    }
    if (ob_reserve(o, 6 * n + 32) < 0)
        return -1;
    char *const start = o->buf + o->len;
    o->len += kfs_write_bytes(start, s, n, n) - start;
    return 0;
}

/* A str as UTF-8, escaped as encode_basestring does (escape != 0) or raw. Returns 1, having written
 * nothing, for a str that UTF-8 cannot encode (a lone surrogate): Python's .encode("utf-8") raises
 * for it, and the caller lets the Python renderer do so. */
static int
put_str(outbuf *o, PyObject *str, int escape)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(str) < 0)
        return -1;
#endif
    const Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    if (n > (PY_SSIZE_T_MAX - 8) / 6) {
        PyErr_NoMemory();
        return -1;
    }
    if (ob_reserve(o, 6 * n + 8) < 0) /* 6: an escape; a code point takes at most 4 in UTF-8 */
        return -1;
    char *const start = o->buf + o->len;
    char *d = start;
    const int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    if (escape)
        *d++ = '"';
    if (PyUnicode_IS_ASCII(str)) { /* header keys, timestamp types, prefixes: nearly always */
        const uint8_t *s = (const uint8_t *)data;
        if (!escape) {
            memcpy(d, s, (size_t)n);
            d += n;
        }
        else {
            for (Py_ssize_t i = 0; i < n; i++) {
                if (kfs_byte_class[s[i]])
                    d = put_escape(d, s[i]);
                else
                    *d++ = (char)s[i];
            }
        }
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c < 0x80) {
                if (escape && kfs_byte_class[c])
                    d = put_escape(d, (uint8_t)c);
                else
                    *d++ = (char)c;
            }
            else if (c < 0x800) {
                *d++ = (char)(0xC0 | (c >> 6));
                *d++ = (char)(0x80 | (c & 0x3F));
            }
            else if (c < 0x10000) {
                if (c >= 0xD800 && c <= 0xDFFF)
                    return 1;
                *d++ = (char)(0xE0 | (c >> 12));
                *d++ = (char)(0x80 | ((c >> 6) & 0x3F));
                *d++ = (char)(0x80 | (c & 0x3F));
            }
            else {
                *d++ = (char)(0xF0 | (c >> 18));
                *d++ = (char)(0x80 | ((c >> 12) & 0x3F));
                *d++ = (char)(0x80 | ((c >> 6) & 0x3F));
                *d++ = (char)(0x80 | (c & 0x3F));
            }
        }
    }
    if (escape)
        *d++ = '"';
    o->len += d - start;
    return 0;
}

/* An exact int that fits an int64 (what str() of it gives, unless a subclass overrides it). */
static inline int
as_int64(PyObject *obj, int64_t *v)
{
    int overflow;
    if (!PyLong_CheckExact(obj))
        return 0;
    long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *v = (int64_t)x;
    return 1;
}

/* A key, value or header value the fast path renders itself: bytes or None. */
#define BYTES_OR_NONE(obj) ((obj) == Py_None || PyBytes_Check(obj))

/* kfs.registry.lines.framed: byte 0 and a 4-byte id other than 0, or byte 1 and a 16-byte GUID. */
static inline int
framed_payload(PyObject *b)
{
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(b);
    const Py_ssize_t n = PyBytes_GET_SIZE(b);
    return (n >= 5 && s[0] == 0 && (s[1] | s[2] | s[3] | s[4]) != 0) || (n >= 17 && s[0] == 1);
}

/* The schema-registry step (kfs.registry.lines.FramedLines, render_jsonl's `avro`): its table maps a
 * value's 4 id bytes to (a compiled Avro program, the line's tail: `, "value_schema": {...}`), or to
 * False; the entry of the last id looked up is kept, with a reference (a fallback may change the table). */
typedef struct {
    PyObject *table;  /* dict, or NULL: no step */
    uint8_t id[4];
    PyObject *entry;  /* (program, tail) for id, or NULL */
} avro_step;

/* The decoded value of r for the step: 1 with its JSON text (*text, *len), 0 when the Python decoder
 * must render r (no table, a value not framed by an id the table holds, a header, a framed key, a
 * datum the compiled renderer declines), -1 on error. *tail: the entry's tail (borrowed). */
static int
avro_value(avro_step *step, PyObject *key, PyObject *value, Py_ssize_t n_headers, const char **text, size_t *len,
           PyObject **tail)
{
    if (step->table == NULL || value == Py_None || n_headers != 0 || (key != Py_None && framed_payload(key)))
        return 0;
    const uint8_t *v = (const uint8_t *)PyBytes_AS_STRING(value);
    const Py_ssize_t n = PyBytes_GET_SIZE(value);
    if (n < 5 || v[0] != 0)
        return 0;
    if (step->entry == NULL || memcmp(step->id, v + 1, 4) != 0) {
        PyObject *id = PyBytes_FromStringAndSize((const char *)v + 1, 4);
        if (id == NULL)
            return -1;
        PyObject *entry = PyDict_GetItemWithError(step->table, id);
        Py_DECREF(id);
        if (entry == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 1)))
            return 0;
        Py_XSETREF(step->entry, Py_NewRef(entry));
        memcpy(step->id, v + 1, 4);
    }
    int nonascii;
    const int rc = kfs_avro_render(PyTuple_GET_ITEM(step->entry, 0), v + 5, n - 5, text, len, &nonascii);
    *tail = PyTuple_GET_ITEM(step->entry, 1);
    return rc;
}

/* render_line(prefix, record) for a plain Record whose fields have the types the decoder gives them.
 * Returns 0 when written, -1 on error, 1 (nothing written) when the Python renderer must do it:
 * a subclass (ControlRecord adds fields), an unset slot, an int beyond int64, a str that is not
 * UTF-8-encodable, anything unusual; with the schema-registry step, a record it does not render. */
/* The `"key": ..., "value": ...` of an offset commit of `__consumer_offsets` (render_jsonl's `commits`),
 * as the line decoder shows them: 0 written, 1 (nothing written) when the decoder must. */
static int
put_commit(outbuf *o, PyObject *key, PyObject *value)
{
    if (key == Py_None)
        return 1;
    const Py_ssize_t kn = PyBytes_GET_SIZE(key), vn = value == Py_None ? 0 : PyBytes_GET_SIZE(value);
    if (ob_reserve(o, (Py_ssize_t)(COMMIT_JSON_ROOM(kn) + COMMIT_JSON_ROOM(vn)) + 40) < 0)
        return -1;
    char *d = o->buf + o->len;
    COMMIT_PUT_LITERAL(d, "\"key\": ");
    d = commit_key_json(d, (const uint8_t *)PyBytes_AS_STRING(key), kn);
    if (d == NULL)
        return 1;
    COMMIT_PUT_LITERAL(d, ", \"value\": ");
    if (value == Py_None)
        COMMIT_PUT_LITERAL(d, "null");
    else if ((d = commit_value_json(d, (const uint8_t *)PyBytes_AS_STRING(value), vn)) == NULL)
        return 1;
    COMMIT_PUT_LITERAL(d, ", \"headers\": []}\n");
    o->len = d - o->buf;
    return 0;
}

static int
put_record(const kfs_state *st, outbuf *o, const char *prefix, Py_ssize_t prefix_len, PyObject *r, avro_step *step,
           int commits)
{
    int64_t offset, timestamp;
    if (!Py_IS_TYPE(r, st->record_type))
        return 1;
    PyObject *o_offset = SLOT(st, r, SLOT_OFFSET), *o_timestamp = SLOT(st, r, SLOT_TIMESTAMP);
    PyObject *tt = SLOT(st, r, SLOT_TIMESTAMP_TYPE), *key = SLOT(st, r, SLOT_KEY), *value = SLOT(st, r, SLOT_VALUE);
    PyObject *headers = SLOT(st, r, SLOT_HEADERS);
    if (o_offset == NULL || o_timestamp == NULL || tt == NULL || key == NULL || value == NULL || headers == NULL)
        return 1;
    if (!as_int64(o_offset, &offset) || !as_int64(o_timestamp, &timestamp) || !PyUnicode_Check(tt) ||
        !BYTES_OR_NONE(key) || !BYTES_OR_NONE(value) || !PyList_CheckExact(headers))
        return 1;
    const Py_ssize_t n_headers = PyList_GET_SIZE(headers);
    for (Py_ssize_t i = 0; i < n_headers; i++) {
        PyObject *pair = PyList_GET_ITEM(headers, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !BYTES_OR_NONE(PyTuple_GET_ITEM(pair, 1)))
            return 1;
    }

    const char *avro_text = NULL;
    size_t avro_len = 0;
    PyObject *avro_tail = NULL;
    if (commits && n_headers != 0)
        return 1; /* (the line decoder's, as every record commits does not take) */
    if (step->table != NULL) {
        const int rendered = avro_value(step, key, value, n_headers, &avro_text, &avro_len, &avro_tail);
        if (rendered <= 0)
            return rendered < 0 ? -1 : 1;
    }

    const Py_ssize_t mark = o->len;
    int rc;
    if (ob_reserve(o, prefix_len + 20 + 15 + 20 + 22) < 0)
        return -1;
    ob_put(o, prefix, prefix_len);
    ob_put_int64(o, offset);
    OB_PUT_LITERAL(o, ", \"timestamp\": ");
    ob_put_int64(o, timestamp);
    OB_PUT_LITERAL(o, ", \"timestamp_type\": \"");
    if ((rc = put_str(o, tt, 0)) != 0)
        goto undo;
    if (commits) {
        if (ob_reserve(o, 3) < 0)
            goto error;
        OB_PUT_LITERAL(o, "\", ");
        if ((rc = put_commit(o, key, value)) != 0)
            goto undo;
        return 0;
    }
    if (ob_reserve(o, 10) < 0)
        goto error;
    OB_PUT_LITERAL(o, "\", \"key\": ");
    if (put_bytes(o, key) < 0)
        goto error;
    if (ob_reserve(o, 11) < 0)
        goto error;
    OB_PUT_LITERAL(o, ", \"value\": ");
    if (avro_text != NULL) { /* (no header then: the tail follows the empty list) */
        if (ob_reserve(o, (Py_ssize_t)avro_len + 16) < 0)
            goto error;
        ob_put(o, avro_text, (Py_ssize_t)avro_len);
        OB_PUT_LITERAL(o, ", \"headers\": []");
        if ((rc = put_str(o, avro_tail, 0)) != 0)
            goto undo;
        if (ob_reserve(o, 2) < 0)
            goto error;
        OB_PUT_LITERAL(o, "}\n");
        return 0;
    }
    if (put_bytes(o, value) < 0)
        goto error;
    if (ob_reserve(o, 14) < 0)
        goto error;
    OB_PUT_LITERAL(o, ", \"headers\": [");
    for (Py_ssize_t i = 0; i < n_headers; i++) {
        PyObject *pair = PyList_GET_ITEM(headers, i);
        if (ob_reserve(o, 3) < 0)
            goto error;
        if (i)
            OB_PUT_LITERAL(o, ", ");
        OB_PUT_LITERAL(o, "[");
        if ((rc = put_str(o, PyTuple_GET_ITEM(pair, 0), 1)) != 0)
            goto undo;
        if (ob_reserve(o, 2) < 0)
            goto error;
        OB_PUT_LITERAL(o, ", ");
        if (put_bytes(o, PyTuple_GET_ITEM(pair, 1)) < 0)
            goto error;
        if (ob_reserve(o, 1) < 0)
            goto error;
        OB_PUT_LITERAL(o, "]");
    }
    if (ob_reserve(o, 3) < 0)
        goto error;
    OB_PUT_LITERAL(o, "]}\n");
    return 0;

undo:
    o->len = mark;
    return rc;
error:
    o->len = mark;
    return -1;
}

/* The Python renderer's line for r: fallback(prefix, r).encode("utf-8"). */
static int
put_fallback(outbuf *o, PyObject *fallback, PyObject *prefix, PyObject *r)
{
    PyObject *line = PyObject_CallFunctionObjArgs(fallback, prefix, r, NULL);
    if (line == NULL)
        return -1;
    if (!PyUnicode_Check(line)) {
        PyErr_Format(PyExc_TypeError, "render_jsonl: the fallback returned %.200s, not str", Py_TYPE(line)->tp_name);
        Py_DECREF(line);
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(line, &n);
    int rc = -1;
    if (s != NULL && ob_reserve(o, n) == 0) {
        ob_put(o, s, n);
        rc = 0;
    }
    Py_DECREF(line);
    return rc;
}

KFS_DOC(kfs_render_jsonl_doc,
"render_jsonl(prefix, records, fallback, lines=False, avro=None, commits=False) -> bytes | list[bytes]\n"
"\n"
"For each record, the UTF-8 of jsonl.render_line(prefix, record); fallback(prefix, record) -> str\n"
"renders the records the fast path leaves to Python (control records and anything unusual).\n"
"Concatenated, or with lines=True one bytes per record. avro: the table of a schema-registry decoder\n"
"(kfs.registry.lines.FramedLines.avro_table): each record is then render_line(prefix, record, that\n"
"decoder), the records whose values the compiled Avro renderer renders in C, the others by fallback.\n"
"commits: the records are __consumer_offsets' and the fallback its line decoder's render_line: the offset\n"
"commits without headers are rendered in C (views/offsets_json.h), the others by fallback.");

PyObject *
kfs_render_jsonl(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"prefix", "records", "fallback", "lines", "avro", "commits", NULL};
    PyObject *prefix, *records, *fallback, *avro = Py_None;
    int lines = 0, commits = 0;

    kfs_state *st = kfs_ready_state(module);
    if (st == NULL)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOO|pOp:render_jsonl", kwlist, &prefix, &records, &fallback,
                                     &lines, &avro, &commits))
        return NULL;
    if (avro != Py_None && !PyDict_CheckExact(avro)) {
        PyErr_SetString(PyExc_TypeError, "render_jsonl: avro must be a dict or None");
        return NULL;
    }
    avro_step step = {avro == Py_None ? NULL : avro, {0}, NULL};

    outbuf o = {NULL, 0, 0}, pre = {NULL, 0, 0};
    PyObject *seq = NULL, *result = NULL, *out_lines = NULL;
    int prefix_ok;

    /* The prefix's UTF-8, once. */
    prefix_ok = put_str(&pre, prefix, 0);
    if (prefix_ok < 0)
        goto done;
    prefix_ok = prefix_ok == 0; /* else every line is the fallback's, which raises as Python does */

    seq = PySequence_Fast(records, "render_jsonl: records must be iterable");
    if (seq == NULL)
        goto done;
    if (lines && (out_lines = PyList_New(0)) == NULL)
        goto done;

    /* The size is read each time round: a fallback could change the list. */
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(r);
        Py_ssize_t line_start = o.len;
        int rc = prefix_ok ? put_record(st, &o, pre.buf, pre.len, r, &step, commits) : 1;
        if (rc == 1)
            rc = put_fallback(&o, fallback, prefix, r);
        Py_DECREF(r);
        if (rc < 0)
            goto done;
        if (lines) {
            PyObject *line = PyBytes_FromStringAndSize(o.buf + line_start, o.len - line_start);
            if (line == NULL)
                goto done;
            rc = PyList_Append(out_lines, line);
            Py_DECREF(line);
            if (rc < 0)
                goto done;
            o.len = line_start;
        }
    }
    if (lines) {
        result = out_lines;
        out_lines = NULL;
    }
    else
        result = PyBytes_FromStringAndSize(o.buf, o.len);

done:
    Py_XDECREF(step.entry);
    Py_XDECREF(out_lines);
    Py_XDECREF(seq);
    PyMem_Free(o.buf);
    PyMem_Free(pre.buf);
    return result;
}
