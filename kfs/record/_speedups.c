/* kfs.record._speedups: the hot loops of kfs, compiled.
 *
 *   decode_v2_records  the records section of a magic v2 batch -> Record objects; the twin of the
 *                      loop in kfs/record/default_batch.py:decode_records
 *   render_jsonl       Record objects -> JSON lines; the twin of
 *                      kfs/views/jsonl.py:render_line, for many records at once
 *   count_jsonl        the length of a records section's JSON lines, without rendering them
 *   render_v2_jsonl    a records section -> JSON lines, fused: no Record is created, and the loop
 *                      runs without the GIL (two readers decode on two cores)
 *
 * The Python code stays the reference and the fallback (kfs/record/speedups.py loads this module
 * when it was built): both must give the same records, the same bytes and the same errors, and
 * tests/test_speedups.py holds them to it.
 *
 * The input is hostile: a segment file can be truncated or corrupt anywhere. Every read below is
 * checked against the end of the record it belongs to (itself checked against the end of the
 * payload) before it is made, and every error path releases what it holds.
 *
 * Record, as DefaultRecord.java writes it (varints zigzag-encoded, as in protobuf):
 *
 *     Length          varint   (bytes after this field)
 *     Attributes      int8     (unused)
 *     TimestampDelta  varlong  (from BaseTimestamp)
 *     OffsetDelta     varint   (from BaseOffset)
 *     KeyLength       varint   (-1: null key)
 *     Key             bytes
 *     ValueLength     varint   (-1: null value)
 *     Value           bytes
 *     HeadersCount    varint
 *     Headers         { KeyLength varint | Key utf-8 | ValueLength varint (-1: null) | Value bytes }*
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX; PyMemberDescrObject comes with Python.h */

#include <dlfcn.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h> /* SSE2: every x86-64 has it */
#endif
#include <stdlib.h>
#include <string.h>

/* ---- state set by init() ------------------------------------------------------------------- */

/* kfs.record.types.Record and CorruptBatchError, handed in by kfs/record/speedups.py. */
static PyTypeObject *record_type = NULL;
static PyObject *corrupt_error = NULL;

/* Record's six slots, in the order of Record.__slots__, and where each lives in the object: read
 * from the member descriptors at init, so that the C code fills and reads them as the Python
 * descriptors would. */
enum { SLOT_OFFSET, SLOT_TIMESTAMP, SLOT_TIMESTAMP_TYPE, SLOT_KEY, SLOT_VALUE, SLOT_HEADERS, N_SLOTS };
static const char *const slot_names[N_SLOTS] = {
    "offset", "timestamp", "timestamp_type", "key", "value", "headers",
};
static Py_ssize_t slot_offsets[N_SLOTS];

#define SLOT(obj, i) (*(PyObject **)((char *)(obj) + slot_offsets[i]))

static PyObject *
speedups_init(PyObject *module, PyObject *args)
{
    PyTypeObject *type;
    PyObject *error;
    Py_ssize_t offsets[N_SLOTS];

    if (!PyArg_ParseTuple(args, "O!O:init", &PyType_Type, &type, &error))
        return NULL;
    if (!PyType_Check(error) || !PyType_IsSubtype((PyTypeObject *)error, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "init: the second argument must be an exception class");
        return NULL;
    }
    if (type->tp_itemsize != 0 || type->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "init: the record type must be a fixed-size class");
        return NULL;
    }
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)type, slot_names[i]);
        if (descr == NULL)
            return NULL;
        int is_member = Py_IS_TYPE(descr, &PyMemberDescr_Type);
        PyMemberDef *member = is_member ? ((PyMemberDescrObject *)descr)->d_member : NULL;
        Py_DECREF(descr); /* the class keeps it, and the PyMemberDef with it */
        if (!is_member) {
            PyErr_Format(PyExc_TypeError, "init: %s has no __slots__ member %s", type->tp_name, slot_names[i]);
            return NULL;
        }
        if (member->type != T_OBJECT_EX || member->offset <= 0 ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "init: %s.%s is not an object slot", type->tp_name, slot_names[i]);
            return NULL;
        }
        offsets[i] = member->offset;
    }
    memcpy(slot_offsets, offsets, sizeof(offsets));
    Py_INCREF(type);
    Py_XSETREF(record_type, type);
    Py_INCREF(error);
    Py_XSETREF(corrupt_error, error);
    Py_RETURN_NONE;
}

static int
check_init(void)
{
    if (record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kfs.record._speedups.init() has not been called");
        return -1;
    }
    return 0;
}

/* ---- varints ------------------------------------------------------------------------------- */

/* Python's reader (default_batch._varint) accepts up to 10 bytes whatever the 10th holds, so a
 * varint's value before zigzag decoding can have up to 70 bits: `lo` holds the low 64, `hi` the
 * rest. hi != 0 means the decoded value does not fit in an int64 (Kafka never writes one). */
typedef struct {
    uint64_t lo;
    unsigned hi;
} varint_t;

enum { VARINT_OK = 0, VARINT_TRUNCATED = -1, VARINT_TOO_LONG = -2 };

/* The varint at p[*pos], which must end at or before p[end]; advances *pos past it. */
static inline int
read_varint(const uint8_t *p, Py_ssize_t end, Py_ssize_t *pos, varint_t *v)
{
    Py_ssize_t i = *pos;
    uint64_t r = 0;
    uint8_t b;

    if (i < end && p[i] < 0x80) { /* nearly every length, delta and count fits in one byte */
        v->lo = p[i];
        v->hi = 0;
        *pos = i + 1;
        return VARINT_OK;
    }
    for (int shift = 0; shift < 63; shift += 7) { /* bytes 1 to 9: bits 0-62 */
        if (i >= end)
            return VARINT_TRUNCATED;
        b = p[i++];
        r |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            v->lo = r;
            v->hi = 0;
            *pos = i;
            return VARINT_OK;
        }
    }
    if (i >= end) /* byte 10: bit 63, and bits 64-69 in hi */
        return VARINT_TRUNCATED;
    b = p[i++];
    if (b >= 0x80)
        return VARINT_TOO_LONG;
    v->lo = r | ((uint64_t)(b & 1) << 63);
    v->hi = b >> 1;
    *pos = i;
    return VARINT_OK;
}

static inline int64_t
zigzag(uint64_t v)
{
    return (int64_t)((v >> 1) ^ (~(v & 1) + 1));
}

/* A length or count: negative ones, however long, stay negative (null, or an error where a null is
 * not allowed); positive ones too long for an int64 become INT64_MAX (past any end). */
static inline int64_t
varint_length(const varint_t *v)
{
    if (v->hi)
        return (v->lo & 1) ? -1 : INT64_MAX;
    return zigzag(v->lo);
}

/* op(a, b), releasing both; either may be NULL (an error already set). */
static PyObject *
binop_steal(PyObject *(*op)(PyObject *, PyObject *), PyObject *a, PyObject *b)
{
    PyObject *r = (a != NULL && b != NULL) ? op(a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

/* base + the zigzag value of v, as a Python int: an offset or a timestamp. Only a corrupt batch
 * leaves the int64 fast path, and then the result is what Python's arbitrary-precision ints give. */
static PyObject *
base_plus_delta(int64_t base, const varint_t *v)
{
    int64_t sum;
    if (v->hi == 0) {
        int64_t delta = zigzag(v->lo);
        if (!__builtin_add_overflow(base, delta, &sum))
            return PyLong_FromLongLong(sum);
        return binop_steal(PyNumber_Add, PyLong_FromLongLong(base), PyLong_FromLongLong(delta));
    }
    /* zigzag of the 70-bit raw value: magnitude m = raw >> 1, negative (-m - 1) when raw is odd */
    uint64_t m_lo = (v->lo >> 1) | ((uint64_t)(v->hi & 1) << 63);
    uint64_t m_hi = v->hi >> 1;
    PyObject *m = binop_steal(PyNumber_Lshift, PyLong_FromUnsignedLongLong(m_hi), PyLong_FromLong(64));
    m = binop_steal(PyNumber_Or, m, PyLong_FromUnsignedLongLong(m_lo));
    if (v->lo & 1)
        m = binop_steal(PyNumber_Subtract, PyLong_FromLong(-1), m);
    return binop_steal(PyNumber_Add, PyLong_FromLongLong(base), m);
}

/* ---- decode_v2_records ------------------------------------------------------------------------ */

/* Header keys repeat from record to record ("trace-id", "content-type"): within one batch, decode
 * each once. Keys point into the payload, which outlives the call. */
#define KEY_CACHE_SIZE 8

typedef struct {
    const uint8_t *raw;
    Py_ssize_t len;
    PyObject *str;
} key_entry;

typedef struct {
    key_entry entries[KEY_CACHE_SIZE];
    int used;
    int next; /* round robin once full */
} key_cache;

/* A header key as str (new reference). Java's String decoding replaces malformed UTF-8, so does kfs. */
static PyObject *
header_key(key_cache *cache, const uint8_t *raw, Py_ssize_t len)
{
    for (int i = 0; i < cache->used; i++) {
        key_entry *e = &cache->entries[i];
        if (e->len == len && memcmp(e->raw, raw, (size_t)len) == 0) {
            Py_INCREF(e->str);
            return e->str;
        }
    }
    PyObject *str = PyUnicode_DecodeUTF8((const char *)raw, len, "replace");
    if (str == NULL)
        return NULL;
    key_entry *e;
    if (cache->used < KEY_CACHE_SIZE) {
        e = &cache->entries[cache->used++];
    }
    else {
        e = &cache->entries[cache->next];
        cache->next = (cache->next + 1) % KEY_CACHE_SIZE;
        Py_DECREF(e->str);
    }
    e->raw = raw;
    e->len = len;
    Py_INCREF(str);
    e->str = str;
    return str;
}

static void
key_cache_clear(key_cache *cache)
{
    for (int i = 0; i < cache->used; i++)
        Py_DECREF(cache->entries[i].str);
    cache->used = 0;
}

/* bytes of length n at p[*pos] (n < 0: None), which must end at or before p[end]. */
static PyObject *
read_nullable_bytes(const uint8_t *p, Py_ssize_t end, Py_ssize_t *pos, int64_t n, const char **why)
{
    if (n < 0)
        Py_RETURN_NONE;
    if (n > end - *pos) {
        *why = "length past the end of the record";
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize((const char *)p + *pos, (Py_ssize_t)n);
    *pos += (Py_ssize_t)n;
    return b;
}

#define MIN_RECORD_SIZE 7 /* one byte for each of Length ... HeadersCount */
#define MIN_HEADER_SIZE 2 /* KeyLength, ValueLength */

/* One record at p[*pos]: a new Record, or NULL with either an exception set or *why saying what is
 * malformed (the caller raises CorruptBatchError). */
static PyObject *
decode_record(const uint8_t *p, Py_ssize_t end, Py_ssize_t *pos_io, int64_t base_offset, int64_t base_timestamp,
              PyObject *timestamp_type, PyObject *log_append_time, key_cache *keys, const char **why)
{
    Py_ssize_t pos = *pos_io;
    varint_t v;
    int rc;
    int64_t n;

#define READ_VARINT(limit)                                                                      \
    do {                                                                                        \
        rc = read_varint(p, (limit), &pos, &v);                                                 \
        if (rc != VARINT_OK) {                                                                  \
            *why = rc == VARINT_TRUNCATED ? "varint past the end" : "varint longer than 10 bytes"; \
            goto fail;                                                                          \
        }                                                                                       \
    } while (0)

    /* Filled slot by slot: on any error, releasing the record releases what it holds. */
    PyObject *r = record_type->tp_alloc(record_type, 0);
    if (r == NULL)
        return NULL;

    /* Length: the fields must end exactly there, so they are read against that end. Python's
     * decoder reads them against the payload's end and compares at the record's end: a field past
     * the record's end fails there in either. */
    READ_VARINT(end);
    n = varint_length(&v);
    if (n < 0 || n > end - pos) {
        *why = "record length past the end of the batch";
        goto fail;
    }
    const Py_ssize_t record_end = pos + (Py_ssize_t)n;

    /* Attributes (unused) */
    if (pos >= record_end) {
        *why = "attributes past the end";
        goto fail;
    }
    pos++;

    /* TimestampDelta */
    READ_VARINT(record_end);
    if (log_append_time != NULL) {
        /* The broker's append time is every record's timestamp (DefaultRecord.readFrom). */
        Py_INCREF(log_append_time);
        SLOT(r, SLOT_TIMESTAMP) = log_append_time;
    }
    else if ((SLOT(r, SLOT_TIMESTAMP) = base_plus_delta(base_timestamp, &v)) == NULL)
        goto fail;

    /* OffsetDelta */
    READ_VARINT(record_end);
    if ((SLOT(r, SLOT_OFFSET) = base_plus_delta(base_offset, &v)) == NULL)
        goto fail;

    Py_INCREF(timestamp_type);
    SLOT(r, SLOT_TIMESTAMP_TYPE) = timestamp_type;

    /* KeyLength, Key */
    READ_VARINT(record_end);
    if ((SLOT(r, SLOT_KEY) = read_nullable_bytes(p, record_end, &pos, varint_length(&v), why)) == NULL)
        goto fail;

    /* ValueLength, Value */
    READ_VARINT(record_end);
    if ((SLOT(r, SLOT_VALUE) = read_nullable_bytes(p, record_end, &pos, varint_length(&v), why)) == NULL)
        goto fail;

    /* HeadersCount, Headers */
    READ_VARINT(record_end);
    int64_t n_headers = varint_length(&v);
    if (n_headers < 0) {
        *why = "negative header count";
        goto fail;
    }
    if (n_headers > (record_end - pos) / MIN_HEADER_SIZE) { /* also bounds the list allocated here */
        *why = "headers past the end of the record";
        goto fail;
    }
    PyObject *headers = PyList_New((Py_ssize_t)n_headers);
    if (headers == NULL)
        goto fail;
    SLOT(r, SLOT_HEADERS) = headers;
    for (Py_ssize_t h = 0; h < (Py_ssize_t)n_headers; h++) {
        READ_VARINT(record_end);
        n = varint_length(&v);
        if (n < 0) {
            *why = "negative header key length";
            goto fail;
        }
        if (n > record_end - pos) {
            *why = "header key past the end of the record";
            goto fail;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL)
            goto fail;
        PyList_SET_ITEM(headers, h, pair); /* the list releases a half-filled pair */
        PyObject *key = header_key(keys, p + pos, (Py_ssize_t)n);
        if (key == NULL)
            goto fail;
        PyTuple_SET_ITEM(pair, 0, key);
        pos += (Py_ssize_t)n;
        READ_VARINT(record_end);
        PyObject *value = read_nullable_bytes(p, record_end, &pos, varint_length(&v), why);
        if (value == NULL)
            goto fail;
        PyTuple_SET_ITEM(pair, 1, value);
    }

    if (pos != record_end) {
        *why = "record fields end before its length says";
        goto fail;
    }
    *pos_io = pos;
    return r;

fail:
    Py_DECREF(r);
    return NULL;
#undef READ_VARINT
}

static PyObject *
raise_corrupt(PyObject *position, const char *fmt, ...)
{
    va_list vargs;
    va_start(vargs, fmt);
    PyObject *message = PyUnicode_FromFormatV(fmt, vargs);
    va_end(vargs);
    if (message == NULL)
        return NULL;
    PyObject *exc = PyObject_CallFunctionObjArgs(corrupt_error, message, position, NULL);
    Py_DECREF(message);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyDoc_STRVAR(decode_v2_records_doc,
"decode_v2_records(payload, count, base_offset, base_timestamp, timestamp_type, log_append_time,\n"
"                  position=None) -> list[Record]\n"
"\n"
"The `count` records of an uncompressed v2 records section, as default_batch.decode_records gives\n"
"them. With timestamp_type 'LogAppendTime' every timestamp is log_append_time. Raises\n"
"CorruptBatchError (with `position`) on malformed input.");

static PyObject *
decode_v2_records(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp", "timestamp_type",
                             "log_append_time", "position", NULL};
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp;
    PyObject *timestamp_type, *log_append_time, *position = Py_None;

    if (check_init() < 0)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nLLUO|O:decode_v2_records", kwlist, &buf, &count,
                                     &base_offset, &base_timestamp, &timestamp_type, &log_append_time,
                                     &position))
        return NULL;

    const uint8_t *p = (const uint8_t *)buf.buf;
    const Py_ssize_t end = buf.len;
    Py_ssize_t pos = 0;
    PyObject *records = NULL;
    key_cache keys = {.used = 0, .next = 0};
    const char *why = NULL;
    int append_time = PyUnicode_CompareWithASCIIString(timestamp_type, "LogAppendTime") == 0;

    if (count < 0)
        count = 0;
    /* A record takes at least 7 bytes: a larger count fails before filling the list. */
    Py_ssize_t capacity = count < end / MIN_RECORD_SIZE ? count : end / MIN_RECORD_SIZE;
    records = PyList_New(capacity);
    if (records == NULL)
        goto done;
    Py_ssize_t i;
    for (i = 0; i < count; i++) {
        PyObject *r = NULL;
        if (i < capacity)
            r = decode_record(p, end, &pos, (int64_t)base_offset, (int64_t)base_timestamp, timestamp_type,
                              append_time ? log_append_time : NULL, &keys, &why);
        else
            why = "record past the end of the batch";
        if (r == NULL) {
            if (why != NULL)
                raise_corrupt(position, "record batch at position %S: record %zd of %zd is malformed (%s)",
                              position, i, count, why);
            Py_CLEAR(records);
            goto done;
        }
        PyList_SET_ITEM(records, i, r);
    }
    if (pos != end) {
        raise_corrupt(position, "record batch at position %S: %zd bytes left after its %zd records", position,
                      end - pos, count);
        Py_CLEAR(records);
        goto done;
    }
    /* Offset deltas rise from 0 (Kafka assigns them in order; the cleaner keeps the order): another
     * order would put records where a reader of the log does not look for them. */
    long long previous = 0;
    int previous_fits = 0;
    for (i = 0; i < count; i++) {
        PyObject *o = SLOT(PyList_GET_ITEM(records, i), SLOT_OFFSET);
        int overflow = 0;
        long long offset = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (offset == -1 && PyErr_Occurred()) {
            Py_CLEAR(records);
            goto done;
        }
        int out_of_order;
        if (i == 0)
            out_of_order = overflow < 0 || (!overflow && offset < base_offset);
        else if (!overflow && previous_fits)
            out_of_order = offset <= previous;
        else { /* past int64 (a base offset near 2**63): as Python compares them */
            out_of_order = PyObject_RichCompareBool(o, SLOT(PyList_GET_ITEM(records, i - 1), SLOT_OFFSET), Py_LE);
            if (out_of_order < 0) {
                Py_CLEAR(records);
                goto done;
            }
        }
        if (out_of_order) {
            raise_corrupt(position, "record batch at position %S: record %zd of %zd is malformed (its offset "
                          "delta is not above the one before)", position, i, count);
            Py_CLEAR(records);
            goto done;
        }
        previous = offset;
        previous_fits = !overflow;
    }
    if (capacity != count) { /* unreachable: count records took at least 7 * count bytes */
        PyErr_SetString(PyExc_SystemError, "decode_v2_records: record count mismatch");
        Py_CLEAR(records);
    }

done:
    key_cache_clear(&keys);
    PyBuffer_Release(&buf);
    return records;
}

/* ---- render_jsonl ---------------------------------------------------------------------------- */

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

/* str(int) of an int64; needs 20 bytes reserved. */
static void
ob_put_int64(outbuf *o, int64_t v)
{
    char tmp[20];
    int i = 20;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    ob_put(o, tmp + i, 20 - i);
}

/* What json.encoder.encode_basestring (ensure_ascii=False) does with each byte below 0x80: 0 copy,
 * 1 escape; non-ASCII bytes are 2 (a UTF-8 sequence to validate, copied as is when valid). */
static uint8_t byte_class[256];
static char escapes[0x20][7]; /* the escape of each control character, NUL-terminated */

static void
init_tables(void)
{
    static const char hex[] = "0123456789abcdef"; /* lowercase, as _json.c writes them */
    for (int c = 0; c < 256; c++)
        byte_class[c] = c < 0x20 || c == '"' || c == '\\' ? 1 : c < 0x80 ? 0 : 2;
    for (int c = 0; c < 0x20; c++) {
        escapes[c][0] = '\\';
        escapes[c][1] = 'u';
        escapes[c][2] = '0';
        escapes[c][3] = '0';
        escapes[c][4] = hex[c >> 4];
        escapes[c][5] = hex[c & 15];
        escapes[c][6] = 0;
    }
    strcpy(escapes['\b'], "\\b");
    strcpy(escapes['\f'], "\\f");
    strcpy(escapes['\n'], "\\n");
    strcpy(escapes['\r'], "\\r");
    strcpy(escapes['\t'], "\\t");
}

/* Writes the escape of ASCII byte c (class 1); room reserved by the caller. */
static inline char *
put_escape(char *d, uint8_t c)
{
    if (c == '"' || c == '\\') {
        d[0] = '\\';
        d[1] = (char)c;
        return d + 2;
    }
    const char *e = escapes[c];
    size_t n = strlen(e);
    memcpy(d, e, n);
    return d + n;
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

/* The JSON of n bytes (not null) at s, written at start, which has room for 6 * n + 32: a JSON string
 * when valid UTF-8, {"base64": "..."} when not. Returns the end of what it wrote. `readable` (>= n):
 * how many bytes at s may be read (a value inside a records section is followed by more of it, so
 * its last few bytes are read a word at a time too). No Python object is touched: the fused
 * renderer calls it without the GIL. */
#if defined(__SSE2__)
/* Whether none of the 16 bytes at s needs a look (as plain_word, 16 at a time): a signed compare
 * below 0x20 catches the control characters and the non-ASCII bytes (negative as int8) at once. */
static inline int
plain_block(const uint8_t *s)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)s);
    const __m128i special = _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                         _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                      _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
    return _mm_movemask_epi8(special) == 0;
}
#endif

static char *
write_bytes(char *const start, const uint8_t *s, const Py_ssize_t n, const Py_ssize_t readable)
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
        while (i < n && byte_class[s[i]] == 0)
            *d++ = (char)s[i++];
        if (i == n)
            break;
        uint8_t c = s[i];
        if (byte_class[c] == 1) {
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
    o->len += write_bytes(start, s, n, n) - start;
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
                if (byte_class[s[i]])
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
                if (escape && byte_class[c])
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

/* render_line(prefix, record) for a plain Record whose fields have the types the decoder gives them.
 * Returns 0 when written, -1 on error, 1 (nothing written) when the Python renderer must do it:
 * a subclass (ControlRecord adds fields), an unset slot, an int beyond int64, a str that is not
 * UTF-8-encodable, anything unusual. */
static int
put_record(outbuf *o, const char *prefix, Py_ssize_t prefix_len, PyObject *r)
{
    int64_t offset, timestamp;
    if (!Py_IS_TYPE(r, record_type))
        return 1;
    PyObject *o_offset = SLOT(r, SLOT_OFFSET), *o_timestamp = SLOT(r, SLOT_TIMESTAMP);
    PyObject *tt = SLOT(r, SLOT_TIMESTAMP_TYPE), *key = SLOT(r, SLOT_KEY), *value = SLOT(r, SLOT_VALUE);
    PyObject *headers = SLOT(r, SLOT_HEADERS);
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
    if (ob_reserve(o, 10) < 0)
        goto error;
    OB_PUT_LITERAL(o, "\", \"key\": ");
    if (put_bytes(o, key) < 0)
        goto error;
    if (ob_reserve(o, 11) < 0)
        goto error;
    OB_PUT_LITERAL(o, ", \"value\": ");
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

PyDoc_STRVAR(render_jsonl_doc,
"render_jsonl(prefix, records, fallback, lines=False) -> bytes | list[bytes]\n"
"\n"
"For each record, the UTF-8 of jsonl.render_line(prefix, record); fallback(prefix, record) -> str\n"
"renders the records the fast path leaves to Python (control records and anything unusual).\n"
"Concatenated, or with lines=True one bytes per record.");

static PyObject *
render_jsonl(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"prefix", "records", "fallback", "lines", NULL};
    PyObject *prefix, *records, *fallback;
    int lines = 0;

    if (check_init() < 0)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOO|p:render_jsonl", kwlist, &prefix, &records, &fallback,
                                     &lines))
        return NULL;

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
        int rc = prefix_ok ? put_record(&o, pre.buf, pre.len, r) : 1;
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
    Py_XDECREF(out_lines);
    Py_XDECREF(seq);
    PyMem_Free(o.buf);
    PyMem_Free(pre.buf);
    return result;
}

/* ---- count_jsonl ----------------------------------------------------------------------------- */

/* Lengths of what put_record writes, without writing it: the size of a decoded view is the sum of
 * its lines, and a stat must not cost the rendering. Each function below is the length twin of a
 * writer above (put_bytes, ob_put_int64, put_record); tests/test_sizes.py holds them to the renderer. */

static inline int64_t
int64_len(int64_t v)
{
    static const uint64_t powers[] = {
        10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
        10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
        1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
        10000000000000000000ULL,
    };
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int64_t n = v < 0 ? 2 : 1;
    for (int i = 0; i < 19 && u >= powers[i]; i++) /* no division: timestamps have 13 digits */
        n++;
    return n;
}

/* The bytes each ASCII byte adds to its escaped form beyond itself (0 plain, 1 for \" \\ \n ...,
 * 5 for \u00XX); set by init_count_tables. */
static uint8_t escape_extra[128];

static void
init_count_tables(void)
{
    for (int c = 0; c < 128; c++)
        escape_extra[c] = byte_class[c] == 0 ? 0 : (c == '"' || c == '\\') ? 1 : (uint8_t)(strlen(escapes[c]) - 1);
}

/* put_bytes's length for n bytes (not null): a JSON string when valid UTF-8, else base64. */
static int64_t
bytes_len(const uint8_t *s, Py_ssize_t n)
{
    /* Nearly every key and value is ASCII: one pass with no branch per byte. */
    uint64_t extra = 0;
    uint8_t high = 0;
    Py_ssize_t k = 0;
#if defined(__SSE2__)
    for (; k + 16 <= n; k += 16) {
        if (plain_block(s + k)) /* plain: nothing to add, no high bit */
            continue;
        for (Py_ssize_t j = k; j < k + 16; j++) {
            high |= s[j];
            extra += escape_extra[s[j] & 0x7F];
        }
    }
#endif
    for (; k < n; k++) {
        high |= s[k];
        extra += escape_extra[s[k] & 0x7F];
    }
    if (!(high & 0x80))
        return 2 + n + (int64_t)extra;
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
        if (byte_class[c] == 0) {
            len++;
            i++;
        }
        else if (byte_class[c] == 1) {
            len += (c == '"' || c == '\\') ? 2 : (Py_ssize_t)strlen(escapes[c]);
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

/* Whether n bytes are valid UTF-8 (a header key the decoder turns into str without replacement). */
static int
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

/* ---- the records walk: one record of a section at a time, checked, no object created ------------ */

/* What count_records, render_records and dump_records share: a records section read record by
 * record against its ends, every length and offset checked, pointing into the payload. Anything a
 * walk refuses (malformed, a varint beyond int64, an offset or timestamp past int64, offsets out of
 * order or outside [base_offset, last]) leaves the section to the decoder, which raises or decodes
 * it: the walk accepts a subset of what decode_v2_records accepts, and sees the same fields. */

typedef struct {
    const uint8_t *p;
    Py_ssize_t end;        /* of the section */
    Py_ssize_t pos;        /* of the next record */
    int64_t base_offset, base_timestamp, last;
    int append_time;       /* LogAppendTime: every timestamp is log_append_time */
    int64_t log_append_time;
    int64_t previous;      /* offset of the record before, if any */
    int walked_any;
} records_walk;

typedef struct {
    int64_t offset, timestamp;
    const uint8_t *key, *value; /* into the payload */
    int64_t key_len, value_len; /* -1: null */
    Py_ssize_t headers;         /* position of the first header */
    int64_t n_headers;
    Py_ssize_t end;             /* of the record */
    Py_ssize_t size;            /* bytes from Attributes to the record's end (its Length) */
} record_view;

typedef struct {
    const uint8_t *key, *value;
    int64_t key_len, value_len; /* key_len >= 0; value_len -1: null */
} header_view;

enum { WALK_OK = 0, WALK_REFUSED = -1 };

static inline records_walk
records_walk_start(const uint8_t *p, Py_ssize_t end, int64_t base_offset, int64_t base_timestamp,
                   int append_time, int64_t log_append_time, int64_t last)
{
    records_walk w = {p, end, 0, base_offset, base_timestamp, last, append_time, log_append_time, 0, 0};
    return w;
}

/* A length or count within int64 at p[*pos] (before p[limit]), or WALK_REFUSED. */
static inline int
walk_length(const uint8_t *p, Py_ssize_t limit, Py_ssize_t *pos, int64_t *n)
{
    varint_t v;
    if (read_varint(p, limit, pos, &v) != VARINT_OK || v.hi)
        return WALK_REFUSED;
    *n = zigzag(v.lo);
    return WALK_OK;
}

/* The header at p[*pos] of a record ending at p[record_end]; advances *pos past it. */
static inline int
walk_header(const uint8_t *p, Py_ssize_t record_end, Py_ssize_t *pos, header_view *h)
{
    int64_t n;
    if (walk_length(p, record_end, pos, &n) < 0 || n < 0 || n > record_end - *pos)
        return WALK_REFUSED;
    h->key = p + *pos;
    h->key_len = n;
    *pos += (Py_ssize_t)n;
    if (walk_length(p, record_end, pos, &n) < 0 || n > record_end - *pos)
        return WALK_REFUSED;
    h->value = p + *pos;
    h->value_len = n < 0 ? -1 : n;
    if (n > 0)
        *pos += (Py_ssize_t)n;
    return WALK_OK;
}

/* The next record of the walk into *r (its headers checked: walk_header reads them again). */
static inline int
walk_record(records_walk *w, record_view *r)
{
    const uint8_t *p = w->p;
    Py_ssize_t pos = w->pos;
    int64_t n;

    if (walk_length(p, w->end, &pos, &n) < 0 || n <= 0 || n > w->end - pos)
        return WALK_REFUSED; /* (a record holds at least its attributes) */
    const Py_ssize_t record_end = pos + (Py_ssize_t)n;
    r->size = (Py_ssize_t)n;
    r->end = record_end;
    pos++; /* attributes */
    if (walk_length(p, record_end, &pos, &n) < 0 || __builtin_add_overflow(w->base_timestamp, n, &r->timestamp))
        return WALK_REFUSED;
    if (w->append_time)
        r->timestamp = w->log_append_time;
    if (walk_length(p, record_end, &pos, &n) < 0 || __builtin_add_overflow(w->base_offset, n, &r->offset))
        return WALK_REFUSED;
    if (r->offset < w->base_offset || r->offset > w->last || (w->walked_any && r->offset <= w->previous))
        return WALK_REFUSED; /* outside the batch's offsets or out of order: the decoder says what it is */
    w->previous = r->offset;
    w->walked_any = 1;
    if (walk_length(p, record_end, &pos, &n) < 0 || n > record_end - pos) /* key */
        return WALK_REFUSED;
    r->key = p + pos;
    r->key_len = n < 0 ? -1 : n;
    if (n > 0)
        pos += (Py_ssize_t)n;
    if (walk_length(p, record_end, &pos, &n) < 0 || n > record_end - pos) /* value */
        return WALK_REFUSED;
    r->value = p + pos;
    r->value_len = n < 0 ? -1 : n;
    if (n > 0)
        pos += (Py_ssize_t)n;
    if (walk_length(p, record_end, &pos, &n) < 0 || n < 0 || n > (record_end - pos) / MIN_HEADER_SIZE)
        return WALK_REFUSED;
    r->n_headers = n;
    r->headers = pos;
    header_view h;
    for (int64_t i = 0; i < r->n_headers; i++)
        if (walk_header(p, record_end, &pos, &h) < 0)
            return WALK_REFUSED;
    if (pos != record_end)
        return WALK_REFUSED;
    w->pos = pos;
    return WALK_OK;
}

/* After `count` records: the section must end there. */
static inline int
walk_finished(const records_walk *w)
{
    return w->pos == w->end ? WALK_OK : WALK_REFUSED;
}

typedef struct {
    int64_t bytes;   /* length of the lines of the counted records */
    int64_t records; /* how many were counted */
    int64_t first;   /* offset of the first one counted, or -1 */
} line_count;

/* The lines of the records in payload[0:end] with first <= offset < stop. Returns 0, or -1 when the
 * payload is malformed or holds something the Python renderer would render (an invalid UTF-8
 * header key, a value beyond int64): the caller then decodes and renders, which raises or renders. */
static int
count_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
              int append_time, int64_t log_append_time, int64_t fixed_len, int64_t first, int64_t stop,
              int64_t last, line_count *out)
{
    records_walk w = records_walk_start(p, end, base_offset, base_timestamp, append_time, log_append_time, last);
    record_view r;
    header_view h;

    for (Py_ssize_t i = 0; i < count; i++) {
        if (walk_record(&w, &r) < 0)
            return -1;
        int64_t len = fixed_len + int64_len(r.offset) + int64_len(r.timestamp);
        len += r.key_len < 0 ? 4 : bytes_len(r.key, (Py_ssize_t)r.key_len);
        len += r.value_len < 0 ? 4 : bytes_len(r.value, (Py_ssize_t)r.value_len);
        Py_ssize_t at = r.headers;
        for (int64_t k = 0; k < r.n_headers; k++) {
            walk_header(p, r.end, &at, &h); /* checked by walk_record */
            if (!valid_utf8(h.key, (Py_ssize_t)h.key_len))
                return -1; /* decoded with replacement: the Python renderer renders it */
            len += (k ? 2 : 0) + 1 + bytes_len(h.key, (Py_ssize_t)h.key_len) + 2 + 1; /* [key, value] */
            len += h.value_len < 0 ? 4 : bytes_len(h.value, (Py_ssize_t)h.value_len);
        }
        if (r.offset >= first && r.offset < stop) {
            if (out->records == 0)
                out->first = r.offset;
            out->records++;
            out->bytes += len;
        }
    }
    return walk_finished(&w);
}

PyDoc_STRVAR(count_jsonl_doc,
"count_jsonl(payload, count, base_offset, base_timestamp, timestamp_type, log_append_time, prefix,\n"
"            first_offset, end_offset, last_offset=2**63 - 1) -> (bytes, records, first) | None\n"
"\n"
"The length of render_jsonl(prefix, records) for the records of an uncompressed v2 records section\n"
"(decode_v2_records' arguments) whose offsets are in [first_offset, end_offset), how many they are\n"
"and the offset of the first (-1 if none), without creating them. None when the payload must be\n"
"decoded and rendered instead: malformed (the decoder raises), or unusual (the renderer decides),\n"
"as is a record whose offset is outside [base_offset, last_offset] (the batch's header's).\n"
"Runs without the GIL.");

static PyObject *
count_jsonl(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp", "timestamp_type",
                             "log_append_time", "prefix", "first_offset", "end_offset", "last_offset", NULL};
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp, log_append_time, first, stop, last = INT64_MAX;
    PyObject *timestamp_type, *prefix;

    if (check_init() < 0)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nLLULULL|L:count_jsonl", kwlist, &buf, &count, &base_offset,
                                     &base_timestamp, &timestamp_type, &log_append_time, &prefix, &first, &stop,
                                     &last))
        return NULL;
    Py_ssize_t prefix_len, tt_len;
    const char *prefix_utf8 = PyUnicode_AsUTF8AndSize(prefix, &prefix_len);
    const char *tt_utf8 = prefix_utf8 ? PyUnicode_AsUTF8AndSize(timestamp_type, &tt_len) : NULL;
    if (tt_utf8 == NULL) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int append_time = strcmp(tt_utf8, "LogAppendTime") == 0;
    /* prefix, offset, ', "timestamp": ' ts ', "timestamp_type": "' tt '", "key": ' key
     * ', "value": ' value ', "headers": [' headers ']}\n' */
    int64_t fixed_len = prefix_len + 15 + 21 + tt_len + 10 + 11 + 14 + 3;
    line_count out = {0, 0, -1};
    int rc = -1;
    if (count >= 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = count_records((const uint8_t *)buf.buf, buf.len, count, base_offset, base_timestamp, append_time,
                           log_append_time, fixed_len, first, stop, last, &out);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&buf);
    if (rc < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("LLL", (long long)out.bytes, (long long)out.records, (long long)out.first);
}

/* ---- render_v2_jsonl: decoding and rendering fused, without the GIL ------------------------- */

/* From a records section straight to its JSON lines: the bytes render_jsonl gives for the records
 * decode_v2_records gives, without creating them. It walks the section as count_records does, and
 * leaves to the Python path (returns RENDER_UNUSUAL) exactly what count_records leaves to it: the
 * two agree on every line they take, and the decoder and renderer stay the oracle for the rest.
 * No Python object is touched between Py_BEGIN_ALLOW_THREADS and Py_END_ALLOW_THREADS: memory
 * comes from PyMem_RawRealloc, which needs no GIL. */

typedef struct {
    char *buf;
    size_t len;
    size_t cap;
} rawbuf;

enum { RENDER_OK = 0, RENDER_UNUSUAL = -1, RENDER_NO_MEMORY = -2 };

/* Room for `need` more bytes; -1 when memory runs out (the caller raises MemoryError with the GIL). */
static int
rb_reserve(rawbuf *o, size_t need)
{
    if (o->cap - o->len >= need)
        return 0;
    if (need > ((size_t)PY_SSIZE_T_MAX >> 1) - o->len)
        return -1;
    size_t cap = o->cap ? o->cap : (size_t)1 << 16;
    while (cap - o->len < need)
        cap *= 2;
    char *b = PyMem_RawRealloc(o->buf, cap);
    if (b == NULL)
        return -1;
    o->buf = b;
    o->cap = cap;
    return 0;
}

/* str(int) of an int64 at d (room for 20); returns the end. */
static inline char *
write_int64(char *d, int64_t v)
{
    char tmp[20];
    int i = 20;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    memcpy(d, tmp + i, (size_t)(20 - i));
    return d + (20 - i);
}

/* A key, value or header value (n < 0: null) at p, n bytes (of `readable` that may be read), appended
 * as render_bytes renders it. */
static inline int
rb_put_bytes(rawbuf *o, const uint8_t *p, int64_t n, Py_ssize_t readable)
{
    if (n < 0) {
        if (rb_reserve(o, 4) < 0)
            return -1;
        memcpy(o->buf + o->len, "null", 4);
        o->len += 4;
        return 0;
    }
    if ((uint64_t)n > ((uint64_t)PY_SSIZE_T_MAX - 32) / 6 || rb_reserve(o, 6 * (size_t)n + 32) < 0)
        return -1;
    char *start = o->buf + o->len;
    o->len += (size_t)(write_bytes(start, p, (Py_ssize_t)n, readable) - start);
    return 0;
}

#define RB_LITERAL(o, s)                                  \
    do {                                                  \
        memcpy((o)->buf + (o)->len, (s), sizeof(s) - 1);  \
        (o)->len += sizeof(s) - 1;                        \
    } while (0)

/* The lines of the records in payload[0:end] with first <= offset < stop, appended to out; with
 * `marks`, each rendered record's offset and the end of its line in out, as two int64s. */
static int
render_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
               int append_time, int64_t log_append_time, const char *prefix, size_t prefix_len, const char *tt,
               size_t tt_len, int64_t first, int64_t stop, int64_t last, rawbuf *out, rawbuf *marks)
{
    records_walk w = records_walk_start(p, end, base_offset, base_timestamp, append_time, log_append_time, last);
    record_view r;
    header_view h;
/* a value inside the section is followed by more of it: write_bytes may read it a word at a time */
#define PUT_BYTES(at, len)                                                       \
    do {                                                                         \
        if (rb_put_bytes(out, (at), (len), end - ((at) - p)) < 0)                \
            return RENDER_NO_MEMORY;                                             \
    } while (0)
#define RESERVE(k)                                   \
    do {                                             \
        if (rb_reserve(out, (k)) < 0)                \
            return RENDER_NO_MEMORY;                 \
    } while (0)

    for (Py_ssize_t i = 0; i < count; i++) {
        if (walk_record(&w, &r) < 0)
            return RENDER_UNUSUAL;
        /* a key that is not UTF-8 is decoded with replacement: the Python path renders it */
        Py_ssize_t at = r.headers;
        for (int64_t k = 0; k < r.n_headers; k++) {
            walk_header(p, r.end, &at, &h); /* checked by walk_record */
            if (!valid_utf8(h.key, (Py_ssize_t)h.key_len))
                return RENDER_UNUSUAL;
        }
        if (r.offset < first || (r.offset >= stop && stop != INT64_MAX))
            continue;

        /* prefix, offset, ', "timestamp": ' ts ', "timestamp_type": "' tt '", "key": ' */
        RESERVE(prefix_len + 20 + 15 + 20 + 21 + tt_len + 10);
        memcpy(out->buf + out->len, prefix, prefix_len);
        out->len += prefix_len;
        out->len = (size_t)(write_int64(out->buf + out->len, r.offset) - out->buf);
        RB_LITERAL(out, ", \"timestamp\": ");
        out->len = (size_t)(write_int64(out->buf + out->len, r.timestamp) - out->buf);
        RB_LITERAL(out, ", \"timestamp_type\": \"");
        memcpy(out->buf + out->len, tt, tt_len);
        out->len += tt_len;
        RB_LITERAL(out, "\", \"key\": ");
        PUT_BYTES(r.key, r.key_len);
        RESERVE(11);
        RB_LITERAL(out, ", \"value\": ");
        PUT_BYTES(r.value, r.value_len);
        RESERVE(14);
        RB_LITERAL(out, ", \"headers\": [");
        at = r.headers;
        for (int64_t k = 0; k < r.n_headers; k++) {
            walk_header(p, r.end, &at, &h);
            RESERVE(3);
            if (k)
                RB_LITERAL(out, ", ");
            RB_LITERAL(out, "[");
            PUT_BYTES(h.key, h.key_len); /* valid UTF-8: the escaped string encode_basestring gives the str */
            RESERVE(2);
            RB_LITERAL(out, ", ");
            PUT_BYTES(h.value, h.value_len);
            RESERVE(1);
            RB_LITERAL(out, "]");
        }
        RESERVE(3);
        RB_LITERAL(out, "]}\n");
        if (marks != NULL) {
            if (rb_reserve(marks, 2 * sizeof(int64_t)) < 0)
                return RENDER_NO_MEMORY;
            int64_t pair[2] = {r.offset, (int64_t)out->len};
            memcpy(marks->buf + marks->len, pair, sizeof(pair));
            marks->len += sizeof(pair);
        }
    }
    return walk_finished(&w) == WALK_OK ? RENDER_OK : RENDER_UNUSUAL;
#undef RESERVE
#undef PUT_BYTES
}

PyDoc_STRVAR(render_v2_jsonl_doc,
"render_v2_jsonl(payload, count, base_offset, base_timestamp, timestamp_type, log_append_time, prefix,\n"
"                first_offset, end_offset, lines=False, last_offset=2**63 - 1)\n"
"    -> bytes | (bytes, bytes) | None\n"
"\n"
"render_jsonl(prefix, records) of the records of an uncompressed v2 records section (decode_v2_records'\n"
"arguments) whose offsets are in [first_offset, end_offset) (2**63 - 1: no end), without creating them;\n"
"with lines=True (marks, lines): marks packs, per line, the record's offset and the end of its line\n"
"in lines as two native int64s (memoryview(marks).cast('q')). None when the payload must be decoded\n"
"and rendered instead: malformed (the decoder raises) or unusual (the renderer decides), as\n"
"count_jsonl. Decodes and renders without the GIL.");

static PyObject *
render_v2_jsonl(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp", "timestamp_type",
                             "log_append_time", "prefix", "first_offset", "end_offset", "lines", "last_offset",
                             NULL};
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp, log_append_time, first, stop, last = INT64_MAX;
    PyObject *timestamp_type, *prefix;
    int lines = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nLLULULL|pL:render_v2_jsonl", kwlist, &buf, &count,
                                     &base_offset, &base_timestamp, &timestamp_type, &log_append_time, &prefix,
                                     &first, &stop, &lines, &last))
        return NULL;
    PyObject *result = NULL;
    rawbuf out = {NULL, 0, 0}, marks = {NULL, 0, 0};
    Py_ssize_t prefix_len, tt_len;
    const char *prefix_utf8 = PyUnicode_AsUTF8AndSize(prefix, &prefix_len);
    const char *tt_utf8 = prefix_utf8 ? PyUnicode_AsUTF8AndSize(timestamp_type, &tt_len) : NULL;
    if (tt_utf8 == NULL) {
        /* not encodable (a lone surrogate): Python's .encode("utf-8") raises for it, on its path */
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_Clear();
            result = Py_NewRef(Py_None);
        }
        goto done;
    }
    int append_time = strcmp(tt_utf8, "LogAppendTime") == 0;
    int rc = RENDER_UNUSUAL;
    if (count >= 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = render_records((const uint8_t *)buf.buf, buf.len, count, base_offset, base_timestamp, append_time,
                            log_append_time, prefix_utf8, (size_t)prefix_len, tt_utf8, (size_t)tt_len, first, stop,
                            last, &out, lines ? &marks : NULL);
        Py_END_ALLOW_THREADS
    }
    if (rc == RENDER_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == RENDER_UNUSUAL) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (!lines) {
        result = PyBytes_FromStringAndSize(out.buf ? out.buf : "", (Py_ssize_t)out.len);
        goto done;
    }
    /* Two objects per batch, not two per line: the cursor slices the lines it serves from `data`. */
    PyObject *packed = PyBytes_FromStringAndSize(marks.buf ? marks.buf : "", (Py_ssize_t)marks.len);
    PyObject *data = packed ? PyBytes_FromStringAndSize(out.buf ? out.buf : "", (Py_ssize_t)out.len) : NULL;
    if (data != NULL)
        result = PyTuple_Pack(2, packed, data);
    Py_XDECREF(packed);
    Py_XDECREF(data);

done:
    PyMem_RawFree(out.buf);
    PyMem_RawFree(marks.buf);
    PyBuffer_Release(&buf);
    return result;
}

/* ---- walk_v2_run: many plain batches in one call, without the GIL ----------------------------- */

/* The decoded views' hot path walked a segment a batch at a time in Python (header parse, offset
 * checks, CRC call, generator layers: ~6 us a batch, more than rendering a 20-record batch). This
 * walks a window of a segment file itself, taking batch after batch while each is *plain*: complete
 * in the window, magic 2, uncompressed or lz4, not a control batch (nor transactional under
 * read_committed), its offsets where the segment walk wants them, its CRC valid, and its records
 * rendered (or counted) by render_records (count_records). At the first batch that is anything
 * else it stops and hands that batch back to the Python walk, which raises what is wrong with it
 * or renders what is unusual: it never decides an error itself, so the Python path stays the
 * oracle for every batch it declines. kfs/views/plain_runs.py holds the list of what the Python
 * walk checks (kfs/storage/segment.py _walk, partition.py _placed_batches, record_stream.py
 * selected_batches, kfs/views/batch_lines.py fused_lines) next to the checks made here. */

#define RUN_MAX_SEGMENT_BYTES INT64_C(2147483647) /* kfs/storage/segment.py MAX_SEGMENT_BYTES */
#define RUN_MAX_RELATIVE_OFFSET INT64_C(2147483647)
#define RUN_MAX_BATCH_ON_DISK ((INT64_C(64) << 20) + 61) /* MAX_BATCH_BYTES + HEADER_PROBE_SIZE */
#define RUN_MAX_BATCH_RECORDS (1 << 20)
#define RUN_MIN_LENGTH 49 /* RECORD_BATCH_OVERHEAD - LOG_OVERHEAD: the smallest v2 length field */

static inline uint64_t
load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline uint32_t
load_be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KFS_HW_CRC32C 1
/* CRC-32C (Castagnoli) with SSE 4.2's crc32 instruction: the check crc32c.crc32c makes in Python,
 * which cannot be called without the GIL. tests/test_plain_runs.py holds the two to the same value. */
__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(const uint8_t *p, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n; p++, n--)
        c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32 ^ 0xFFFFFFFFu;
}

static int
have_hw_crc32c(void)
{
    static int known = -1;
    if (known < 0)
        known = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    return known;
}
#else
#define KFS_HW_CRC32C 0
static uint32_t crc32c_hw(const uint8_t *p, size_t n) { (void)p; (void)n; return 0; }
static int have_hw_crc32c(void) { return 0; }
#endif

/* Kafka's LZ4 frames (KafkaLZ4BlockOutputStream: independent blocks), decompressed here so that a
 * compressed batch does not end the run: with liblz4 itself, the reference implementation (the
 * library the `lz4` package wraps), loaded at run time from the system (liblz4.so.1), so that the
 * build needs no lz4 headers; without it lz4 batches are the Python walk's. The frame is read as
 * kfs/record/compression.py's _lz4 reads it (the header checksum and block checksums not verified,
 * as there); anything else it would reject, or that it handles otherwise (linked blocks), is
 * declined, and the Python walk raises or decodes it. */
typedef int (*lz4_decompress_fn)(const char *src, char *dst, int compressed_size, int dst_capacity);
static lz4_decompress_fn lz4_decompress_safe = NULL;
static int lz4_tried = 0;

static void
load_lz4(void) /* with the GIL, once */
{
    if (lz4_tried)
        return;
    lz4_tried = 1;
    void *lib = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL)
        lz4_decompress_safe = (lz4_decompress_fn)dlsym(lib, "LZ4_decompress_safe");
}

static inline uint32_t
load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define RUN_MAX_BATCH_BYTES (INT64_C(64) << 20) /* compression.py MAX_BATCH_BYTES */

/* The frame at src[0:end] decompressed into out (emptied first): its length, -1 to decline, or
 * RENDER_NO_MEMORY. */
static int64_t
lz4_frame_into(const uint8_t *src, Py_ssize_t end, rawbuf *out)
{
    out->len = 0;
    if (end < 7 || load_le32(src) != 0x184D2204u)
        return -1;
    const uint8_t flg = src[4], bd = src[5];
    if ((flg & 0xC0) != 0x40 || !(flg & 0x20))
        return -1; /* another version, or linked blocks: compression.py's */
    static const size_t max_blocks[8] = {0, 0, 0, 0, 64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024};
    const size_t max_block = max_blocks[(bd >> 4) & 7];
    if (max_block == 0)
        return -1;
    Py_ssize_t pos = 6 + ((flg & 0x08) ? 8 : 0) + ((flg & 0x01) ? 4 : 0) + 1;
    const Py_ssize_t checksum = (flg & 0x10) ? 4 : 0;
    for (;;) {
        if (pos + 4 > end)
            return -1;
        uint32_t n = load_le32(src + pos);
        pos += 4;
        if (n == 0)
            return (int64_t)out->len;
        const int stored = (n & 0x80000000u) != 0;
        n &= 0x7FFFFFFFu;
        if ((int64_t)n + checksum > (int64_t)(end - pos))
            return -1;
        if (stored) {
            if ((int64_t)n > RUN_MAX_BATCH_BYTES - (int64_t)out->len)
                return -1;
            if (rb_reserve(out, n) < 0)
                return RENDER_NO_MEMORY;
            memcpy(out->buf + out->len, src + pos, n);
            out->len += n;
        }
        else {
            if (rb_reserve(out, max_block) < 0)
                return RENDER_NO_MEMORY;
            int got = lz4_decompress_safe((const char *)src + pos, out->buf + out->len, (int)n, (int)max_block);
            if (got < 0)
                return -1;
            out->len += (size_t)got;
        }
        if ((int64_t)out->len > RUN_MAX_BATCH_BYTES)
            return -1; /* compression.py raises BatchTooLargeError */
        pos += (Py_ssize_t)n + checksum;
    }
}

typedef struct {
    int64_t segment_base, max_last, first, stop;
    int64_t previous_last;
    int has_previous, read_committed, count_only;
    size_t budget;
    const char *prefix;
    size_t prefix_len;
} run_params;

typedef struct {
    Py_ssize_t used;      /* bytes of the window taken (whole batches) */
    int64_t first_base;   /* the first taken batch's base offset */
    int64_t last;         /* the last taken batch's last offset */
    int64_t records;      /* records rendered or counted */
    int64_t batches;      /* batches taken */
} run_result;

static int
walk_run(const uint8_t *w, Py_ssize_t n, const run_params *rp, rawbuf *out, rawbuf *marks, rawbuf *scratch,
         run_result *res)
{
    Py_ssize_t p = 0;
    int64_t previous = rp->previous_last;
    int has_previous = rp->has_previous;
    while (n - p >= 61) {
        const uint8_t *b = w + p;
        const int64_t base = (int64_t)load_be64(b);
        const int32_t length = (int32_t)load_be32(b + 8);
        if (length < RUN_MIN_LENGTH || b[16] != 2)
            break;
        const int64_t size = 12 + (int64_t)length;
        if (size > n - p || size > RUN_MAX_BATCH_ON_DISK)
            break;
        const uint16_t attributes = (uint16_t)((b[21] << 8) | b[22]);
        const int codec = attributes & 0x07;
        if ((codec != 0 && !(codec == 3 && lz4_decompress_safe != NULL)) || (attributes & 0x20)
            || ((attributes & 0x10) && rp->read_committed))
            break; /* compressed but not lz4, a control batch, a transaction to check: the Python walk's */
        int64_t last;
        if (__builtin_add_overflow(base, (int64_t)(int32_t)load_be32(b + 23), &last))
            break;
        if (last < base || base < rp->segment_base || last - rp->segment_base > RUN_MAX_RELATIVE_OFFSET
            || (has_previous && base <= previous) || last >= rp->max_last || base >= rp->stop)
            break;
        if (last < rp->first) { /* before the view: passed over unread, as selected_batches does */
            previous = last;
            has_previous = 1;
            if (res->batches == 0)
                res->first_base = base;
            res->last = last;
            res->batches++;
            p += (Py_ssize_t)size;
            res->used = p;
            continue;
        }
        const int32_t count = (int32_t)load_be32(b + 57);
        if (count <= 0 || count > RUN_MAX_BATCH_RECORDS)
            break;
        if (crc32c_hw(b + 21, (size_t)(size - 21)) != load_be32(b + 17))
            break;
        const int append_time = (attributes & 0x08) != 0;
        const int64_t base_ts = (int64_t)load_be64(b + 27), max_ts = (int64_t)load_be64(b + 35);
        const uint8_t *section = b + 61;
        Py_ssize_t section_len = (Py_ssize_t)(size - 61);
        if (codec == 3) {
            const int64_t got = lz4_frame_into(section, section_len, scratch);
            if (got == RENDER_NO_MEMORY)
                return RENDER_NO_MEMORY;
            if (got < 0)
                break;
            section = (const uint8_t *)scratch->buf;
            section_len = (Py_ssize_t)got;
        }
        if (rp->count_only) {
            const size_t tt_len = append_time ? 13 : 10;
            const int64_t fixed_len = (int64_t)rp->prefix_len + 15 + 21 + (int64_t)tt_len + 10 + 11 + 14 + 3;
            line_count lc = {0, 0, -1};
            if (count_records(section, section_len, count, base, base_ts, append_time, max_ts, fixed_len,
                              rp->first, rp->stop, last, &lc) < 0)
                break;
            if (lc.records) {
                int64_t next = last + 1 < rp->stop ? last + 1 : rp->stop; /* (last < max_last: no overflow) */
                if (rb_reserve(marks, 4 * sizeof(int64_t)) < 0)
                    return RENDER_NO_MEMORY;
                int64_t part[4] = {lc.first, next, lc.bytes, (int64_t)(p + size)};
                memcpy(marks->buf + marks->len, part, sizeof(part));
                marks->len += sizeof(part);
                res->records += lc.records;
            }
        }
        else {
            const size_t out_len = out->len, marks_len = marks->len;
            const char *tt = append_time ? "LogAppendTime" : "CreateTime";
            int rc = render_records(section, section_len, count, base, base_ts, append_time, max_ts,
                                    rp->prefix, rp->prefix_len, tt, strlen(tt), rp->first, rp->stop, last, out, marks);
            if (rc == RENDER_NO_MEMORY)
                return RENDER_NO_MEMORY;
            if (rc != RENDER_OK) {
                out->len = out_len; /* the batch is the Python walk's, whole */
                marks->len = marks_len;
                break;
            }
            res->records += (int64_t)((marks->len - marks_len) / (2 * sizeof(int64_t)));
        }
        previous = last;
        has_previous = 1;
        if (res->batches == 0)
            res->first_base = base;
        res->last = last;
        res->batches++;
        p += (Py_ssize_t)size;
        res->used = p;
        if (!rp->count_only && out->len >= rp->budget)
            break;
    }
    return RENDER_OK;
}

PyDoc_STRVAR(walk_v2_run_doc,
"walk_v2_run(window, segment_base, previous_last, max_last, first_offset, end_offset, prefix,\n"
"            read_committed, count_only, budget) -> (used, first_base, last, records, marks, data) | None\n"
"\n"
"The plain batches at the start of `window` (bytes of a segment file from a batch boundary, no further\n"
"than the walk's limit), taken one after another until one is not plain (see the comment above\n"
"walk_run) or the lines reach `budget` bytes: `used` bytes of them, the first's base offset, the last's\n"
"last offset, the records shown. Rendering (count_only false): marks and data as render_v2_jsonl's\n"
"lines mode gives them, for every taken batch's lines in [first_offset, end_offset). Counting:\n"
"marks packs (first offset, next offset, line bytes, where the batch ends in the window) as four\n"
"int64s per batch with lines, data is\n"
"None. previous_last: the last offset of the batch before the window's first (None: none). Batches\n"
"wholly before first_offset are passed over unread. None when no batch was taken (the Python walk\n"
"takes the first), or when this machine has no CRC-32C instruction. Runs without the GIL.");

static PyObject *
walk_v2_run(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"window", "segment_base", "previous_last", "max_last", "first_offset", "end_offset",
                             "prefix", "read_committed", "count_only", "budget", NULL};
    Py_buffer buf;
    long long segment_base, max_last, first, stop;
    PyObject *previous_obj, *prefix;
    int read_committed, count_only;
    Py_ssize_t budget;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*LOLLLUppn:walk_v2_run", kwlist, &buf, &segment_base,
                                     &previous_obj, &max_last, &first, &stop, &prefix, &read_committed, &count_only,
                                     &budget))
        return NULL;
    PyObject *result = NULL;
    rawbuf out = {NULL, 0, 0}, marks = {NULL, 0, 0}, scratch = {NULL, 0, 0};
    run_params rp = {segment_base, max_last, first, stop, 0, previous_obj != Py_None, read_committed, count_only,
                     budget > 0 ? (size_t)budget : 0, NULL, 0};
    if (rp.has_previous) {
        rp.previous_last = PyLong_AsLongLong(previous_obj);
        if (rp.previous_last == -1 && PyErr_Occurred())
            goto done;
    }
    Py_ssize_t prefix_len;
    rp.prefix = PyUnicode_AsUTF8AndSize(prefix, &prefix_len);
    if (rp.prefix == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) { /* the Python path raises for it */
            PyErr_Clear();
            result = Py_NewRef(Py_None);
        }
        goto done;
    }
    rp.prefix_len = (size_t)prefix_len;
    load_lz4();
    if (!have_hw_crc32c() || check_init() < 0) {
        if (!PyErr_Occurred())
            result = Py_NewRef(Py_None);
        goto done;
    }
    run_result res = {0, 0, 0, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = walk_run((const uint8_t *)buf.buf, buf.len, &rp, &out, &marks, &scratch, &res);
    Py_END_ALLOW_THREADS
    if (rc == RENDER_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (res.batches == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *packed = PyBytes_FromStringAndSize(marks.buf ? marks.buf : "", (Py_ssize_t)marks.len);
    PyObject *data = NULL;
    if (packed != NULL)
        data = count_only ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(out.buf ? out.buf : "", (Py_ssize_t)out.len);
    if (data != NULL)
        result = Py_BuildValue("nLLLOO", res.used, (long long)res.first_base, (long long)res.last,
                               (long long)res.records, packed, data);
    Py_XDECREF(packed);
    Py_XDECREF(data);
done:
    PyMem_RawFree(out.buf);
    PyMem_RawFree(marks.buf);
    PyMem_RawFree(scratch.buf);
    PyBuffer_Release(&buf);
    return result;
}

/* ---- render_v2_dump: DumpLogSegments' record lines, fused, without the GIL ------------------- */

/* What `kfs dump --deep-iteration --print-data-log` prints for a v2 data batch's records (kfs/cli/
 * dump_log.py:_v2_data_lines, which stays the oracle and the fallback), straight from the records
 * section: the records_walk of render_records, no record created. Keys, values and header keys are
 * printed as bytes.decode("utf-8", "replace") gives them, so the lines are UTF-8 whatever the bytes. */

/* How many bytes at s[0] (a byte that starts no valid UTF-8 sequence within n) CPython's decoder
 * replaces with one U+FFFD: the maximal subpart of a sequence, as Unicode recommends (the lead and
 * the continuation bytes that could still have completed it), at least 1. */
static inline Py_ssize_t
invalid_subpart(const uint8_t *s, Py_ssize_t n)
{
    const uint8_t c = s[0];
    uint8_t lo = 0x80, hi = 0xBF; /* where the second byte must be */
    Py_ssize_t need;              /* continuation bytes the lead asks for */
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0)
            lo = 0xA0; /* overlong below */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates above */
    }
    else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0)
            lo = 0x90; /* overlong below */
        else if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF above */
    }
    else
        return 1; /* a continuation byte, C0, C1, F5-FF */
    Py_ssize_t k = 1;
    if (n > 1 && s[1] >= lo && s[1] <= hi) {
        k = 2;
        while (k <= need && k < n && (s[k] & 0xC0) == 0x80)
            k++;
    }
    return k <= need ? k : need; /* (k > need would be a whole, valid sequence) */
}

/* bytes.decode("utf-8", "replace") of n bytes at s, as UTF-8, at d (room for 3 * n); returns the end. */
static char *
write_utf8_replace(char *d, const uint8_t *s, const Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint64_t w;
        while (i + 8 <= n && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ULL) == 0)) {
            memcpy(d, &w, 8);
            d += 8;
            i += 8;
        }
        while (i < n && s[i] < 0x80)
            *d++ = (char)s[i++];
        if (i == n)
            break;
        Py_ssize_t k = utf8_sequence(s + i, n - i);
        if (k > 0) {
            memcpy(d, s + i, (size_t)k);
            d += k;
            i += k;
            continue;
        }
        i += invalid_subpart(s + i, n - i);
        memcpy(d, "\xEF\xBF\xBD", 3); /* U+FFFD */
        d += 3;
    }
    return d;
}

#define INT32_MAX_ 2147483647LL

/* dump_common.increment_sequence: sequences wrap at Integer.MAX_VALUE; -1 past int64 (refused). */
static inline int
record_sequence(int64_t base_sequence, int64_t base_offset, int64_t offset, int64_t *sequence)
{
    int64_t increment;
    if (base_sequence < 0) {
        *sequence = -1; /* NO_SEQUENCE */
        return 0;
    }
    if (base_sequence > INT32_MAX_ || __builtin_sub_overflow(offset, base_offset, &increment))
        return -1;
    if (base_sequence > INT32_MAX_ - increment)
        *sequence = increment - (INT32_MAX_ - base_sequence) - 1;
    else
        *sequence = base_sequence + increment;
    return 0;
}

static inline int64_t
be_int64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

static inline uint32_t
be_uint32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

#define V2_HEADER_SIZE 61 /* default_batch.RECORDS_OFFSET */

/* dump_log._batch_line of a v2 batch (`DumpLogSegments.printBatchLevel`) from its 61 header bytes,
 * at d (room for 1024 + the codec's and timestamp type's names); NULL (nothing counted) when a field
 * passes int64 (the last offset), which Python prints. */
static char *
write_batch_line(char *d, const uint8_t *h, int64_t position, int valid, const char *tt, size_t tt_len,
                 const char *codec, size_t codec_len)
{
    const int64_t base_offset = be_int64(h);
    const int64_t length = (int32_t)be_uint32(h + 8), leader_epoch = (int32_t)be_uint32(h + 12);
    const int magic = (int8_t)h[16];
    const uint32_t crc = be_uint32(h + 17);
    const unsigned attributes = (unsigned)h[21] << 8 | h[22];
    const int64_t last_delta = (int32_t)be_uint32(h + 23);
    const int64_t base_timestamp = be_int64(h + 27), max_timestamp = be_int64(h + 35);
    const int64_t producer_id = be_int64(h + 43);
    const int64_t producer_epoch = (int16_t)((unsigned)h[51] << 8 | h[52]);
    const int64_t base_sequence = (int32_t)be_uint32(h + 53), count = (int32_t)be_uint32(h + 57);
    int64_t last_offset, last_sequence;
    if (__builtin_add_overflow(base_offset, last_delta, &last_offset))
        return NULL;
    if (base_sequence == -1) /* NO_SEQUENCE */
        last_sequence = -1;
    else if (base_sequence > INT32_MAX_ - last_delta) /* increment_sequence; all within int64 */
        last_sequence = last_delta - (INT32_MAX_ - base_sequence) - 1;
    else
        last_sequence = base_sequence + last_delta;
#define PUT_LITERAL(s)                    \
    do {                                  \
        memcpy(d, (s), sizeof(s) - 1);    \
        d += sizeof(s) - 1;               \
    } while (0)
#define PUT_BOOL(b)                       \
    do {                                  \
        if (b)                            \
            PUT_LITERAL("true");          \
        else                              \
            PUT_LITERAL("false");         \
    } while (0)
    PUT_LITERAL("baseOffset: ");
    d = write_int64(d, base_offset);
    PUT_LITERAL(" lastOffset: ");
    d = write_int64(d, last_offset);
    PUT_LITERAL(" count: ");
    d = write_int64(d, count);
    PUT_LITERAL(" baseSequence: ");
    d = write_int64(d, base_sequence);
    PUT_LITERAL(" lastSequence: ");
    d = write_int64(d, last_sequence);
    PUT_LITERAL(" producerId: ");
    d = write_int64(d, producer_id);
    PUT_LITERAL(" producerEpoch: ");
    d = write_int64(d, producer_epoch);
    PUT_LITERAL(" partitionLeaderEpoch: ");
    d = write_int64(d, leader_epoch);
    PUT_LITERAL(" isTransactional: ");
    PUT_BOOL(attributes & 0x10);
    PUT_LITERAL(" isControl: ");
    PUT_BOOL(attributes & 0x20);
    if (attributes & 0x40) { /* Java prints the OptionalLong of RecordBatch.deleteHorizonMs() as it is */
        PUT_LITERAL(" deleteHorizonMs: OptionalLong[");
        d = write_int64(d, base_timestamp);
        *d++ = ']';
    }
    else
        PUT_LITERAL(" deleteHorizonMs: OptionalLong.empty");
    PUT_LITERAL(" position: ");
    d = write_int64(d, position);
    *d++ = ' ';
    memcpy(d, tt, tt_len);
    d += tt_len;
    PUT_LITERAL(": ");
    d = write_int64(d, max_timestamp);
    PUT_LITERAL(" size: ");
    d = write_int64(d, 12 + length);
    PUT_LITERAL(" magic: ");
    d = write_int64(d, magic);
    PUT_LITERAL(" compresscodec: ");
    memcpy(d, codec, codec_len);
    d += codec_len;
    PUT_LITERAL(" crc: ");
    d = write_int64(d, crc);
    PUT_LITERAL(" isvalid: ");
    PUT_BOOL(valid);
    *d++ = '\n';
#undef PUT_BOOL
#undef PUT_LITERAL
    return d;
}

/* The lines of the section's records into out; each offset that does not follow the one before
 * (*previous: the offset before the first, -1 for none, as dump_log keeps it) as an (offset before,
 * offset) pair of int64s into gaps; *previous left at the last record's offset. */
static int
dump_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
             int append_time, int64_t log_append_time, const char *tt, size_t tt_len, int64_t base_sequence,
             int64_t *previous, rawbuf *out, rawbuf *gaps)
{
    records_walk w = records_walk_start(p, end, base_offset, base_timestamp, append_time, log_append_time, INT64_MAX);
    record_view r;
    header_view h;
    int64_t before = *previous;

    for (Py_ssize_t i = 0; i < count; i++) {
        if (walk_record(&w, &r) < 0)
            return RENDER_UNUSUAL;
        int64_t sequence;
        if (record_sequence(base_sequence, base_offset, r.offset, &sequence) < 0)
            return RENDER_UNUSUAL;
        if (before != -1 && (before == INT64_MAX || r.offset != before + 1)) {
            if (rb_reserve(gaps, 2 * sizeof(int64_t)) < 0)
                return RENDER_NO_MEMORY;
            int64_t pair[2] = {before, r.offset};
            memcpy(gaps->buf + gaps->len, pair, sizeof(pair));
            gaps->len += sizeof(pair);
        }
        before = r.offset;

        /* Every key, value and header key is inside the record: 3 bytes for each of its bytes (a
         * U+FFFD per byte at worst, a comma per header key) and the fixed parts. */
        if ((size_t)r.size > ((size_t)PY_SSIZE_T_MAX >> 2) || rb_reserve(out, 3 * (size_t)r.size + 200 + tt_len) < 0)
            return RENDER_NO_MEMORY;
        char *d = out->buf + out->len;
#define PUT_LITERAL(s)                    \
    do {                                  \
        memcpy(d, (s), sizeof(s) - 1);    \
        d += sizeof(s) - 1;               \
    } while (0)
        PUT_LITERAL("| offset: ");
        d = write_int64(d, r.offset);
        *d++ = ' ';
        memcpy(d, tt, tt_len);
        d += tt_len;
        PUT_LITERAL(": ");
        d = write_int64(d, r.timestamp);
        PUT_LITERAL(" keySize: ");
        d = write_int64(d, r.key_len);
        PUT_LITERAL(" valueSize: ");
        d = write_int64(d, r.value_len);
        PUT_LITERAL(" sequence: ");
        d = write_int64(d, sequence);
        PUT_LITERAL(" headerKeys: [");
        Py_ssize_t at = r.headers;
        for (int64_t k = 0; k < r.n_headers; k++) {
            walk_header(p, r.end, &at, &h); /* checked by walk_record */
            if (k)
                *d++ = ',';
            d = write_utf8_replace(d, h.key, (Py_ssize_t)h.key_len);
        }
        *d++ = ']';
        if (r.key_len >= 0) {
            PUT_LITERAL(" key: ");
            d = write_utf8_replace(d, r.key, (Py_ssize_t)r.key_len);
        }
        if (r.value_len >= 0) {
            PUT_LITERAL(" payload: ");
            d = write_utf8_replace(d, r.value, (Py_ssize_t)r.value_len);
        }
        *d++ = '\n';
#undef PUT_LITERAL
        out->len = (size_t)(d - out->buf);
    }
    if (walk_finished(&w) < 0)
        return RENDER_UNUSUAL;
    *previous = before;
    return RENDER_OK;
}

PyDoc_STRVAR(render_v2_dump_doc,
"render_v2_dump(payload, count, base_offset, base_timestamp, timestamp_type, log_append_time,\n"
"               base_sequence, previous_offset, batch=None, position=0, compression='none', valid=True)\n"
"    -> (str, int, bytes) | None\n"
"\n"
"The record lines `kfs dump --deep-iteration --print-data-log` prints for an uncompressed v2 records\n"
"section (decode_v2_records' arguments, and the batch's base sequence), without creating records:\n"
"(lines, the last record's offset, gaps). previous_offset is the offset of the record dumped before\n"
"(-1: none); gaps packs each offset that does not follow the one before as (offset before, offset),\n"
"two native int64s. With `batch` (the batch's bytes, from its header on), the lines start with its\n"
"batch line (dump_log._batch_line: at `position`, its codec named `compression`, its CRC `valid`).\n"
"None when the payload must be decoded instead (malformed, or out of the renderer's range), or\n"
"count < 1. Decodes and renders without the GIL.");

static PyObject *
render_v2_dump(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp", "timestamp_type",
                             "log_append_time", "base_sequence", "previous_offset", "batch", "position",
                             "compression", "valid", NULL};
    Py_buffer buf, batch = {.buf = NULL, .obj = NULL};
    Py_ssize_t count;
    long long base_offset, base_timestamp, log_append_time, base_sequence, previous, position = 0;
    PyObject *timestamp_type, *compression = NULL;
    int valid = 1;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nLLULLL|z*LUp:render_v2_dump", kwlist, &buf, &count,
                                     &base_offset, &base_timestamp, &timestamp_type, &log_append_time,
                                     &base_sequence, &previous, &batch, &position, &compression, &valid))
        return NULL;
    PyObject *result = NULL;
    rawbuf out = {NULL, 0, 0}, gaps = {NULL, 0, 0};
    Py_ssize_t tt_len, codec_len = 4;
    const char *codec_utf8 = "none";
    if (compression != NULL && (codec_utf8 = PyUnicode_AsUTF8AndSize(compression, &codec_len)) == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_Clear();
            result = Py_NewRef(Py_None);
        }
        goto done;
    }
    const char *tt_utf8 = PyUnicode_AsUTF8AndSize(timestamp_type, &tt_len);
    if (tt_utf8 == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) { /* a lone surrogate: Python's path prints it */
            PyErr_Clear();
            result = Py_NewRef(Py_None);
        }
        goto done;
    }
    int append_time = strcmp(tt_utf8, "LogAppendTime") == 0;
    int64_t last = previous;
    int rc = RENDER_UNUSUAL;
    if (count > 0 && (batch.buf == NULL || batch.len >= V2_HEADER_SIZE)) {
        Py_BEGIN_ALLOW_THREADS
        rc = RENDER_OK;
        if (batch.buf != NULL) {
            if (rb_reserve(&out, 1024 + (size_t)tt_len + (size_t)codec_len) < 0)
                rc = RENDER_NO_MEMORY;
            else {
                char *end = write_batch_line(out.buf, (const uint8_t *)batch.buf, position, valid, tt_utf8,
                                             (size_t)tt_len, codec_utf8, (size_t)codec_len);
                if (end == NULL)
                    rc = RENDER_UNUSUAL;
                else
                    out.len = (size_t)(end - out.buf);
            }
        }
        if (rc == RENDER_OK)
            rc = dump_records((const uint8_t *)buf.buf, buf.len, count, base_offset, base_timestamp, append_time,
                              log_append_time, tt_utf8, (size_t)tt_len, base_sequence, &last, &out, &gaps);
        Py_END_ALLOW_THREADS
    }
    if (rc == RENDER_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc == RENDER_UNUSUAL) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *lines = PyUnicode_DecodeUTF8(out.buf, (Py_ssize_t)out.len, NULL); /* valid: written so */
    PyObject *packed = lines ? PyBytes_FromStringAndSize(gaps.buf ? gaps.buf : "", (Py_ssize_t)gaps.len) : NULL;
    if (packed != NULL)
        result = Py_BuildValue("(OLO)", lines, (long long)last, packed);
    Py_XDECREF(lines);
    Py_XDECREF(packed);

done:
    PyMem_RawFree(out.buf);
    PyMem_RawFree(gaps.buf);
    if (batch.obj != NULL)
        PyBuffer_Release(&batch);
    PyBuffer_Release(&buf);
    return result;
}

/* ---- gather: a read reply copied into malloc'd memory without the GIL ------------------------ */

PyDoc_STRVAR(gather_doc,
"gather(pieces) -> int\n"
"\n"
"The address of a malloc'd block holding the bytes-like pieces one after another (0 when they are\n"
"empty), for libfuse to free(): a decoded read's reply, allocated and copied without the GIL\n"
"(kfs/fuse/zerocopy.py). The caller frees it when libfuse does not take it.");

static PyObject *
gather(PyObject *module, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "gather() takes a sequence of bytes-like objects");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_buffer *views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    if (views == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    Py_ssize_t held = 0;
    size_t total = 0;
    for (; held < n; held++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, held), &views[held], PyBUF_SIMPLE) < 0)
            goto done;
        if ((size_t)views[held].len > (size_t)PY_SSIZE_T_MAX - total) {
            held++;
            PyErr_NoMemory();
            goto done;
        }
        total += (size_t)views[held].len;
    }
    char *mem = NULL;
    if (total) {
        Py_BEGIN_ALLOW_THREADS
        mem = malloc(total);
        if (mem != NULL) {
            size_t at = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (views[i].len) {
                    memcpy(mem + at, views[i].buf, (size_t)views[i].len);
                    at += (size_t)views[i].len;
                }
            }
        }
        Py_END_ALLOW_THREADS
        if (mem == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = PyLong_FromVoidPtr(mem);
    if (result == NULL)
        free(mem);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    Py_DECREF(seq);
    return result;
}

/* ---- the module ------------------------------------------------------------------------------ */

static PyMethodDef speedups_methods[] = {
    {"init", speedups_init, METH_VARARGS,
     "init(record_type, corrupt_batch_error): the Record class to create and read, the error to raise."},
    {"decode_v2_records", (PyCFunction)(void (*)(void))decode_v2_records, METH_VARARGS | METH_KEYWORDS,
     decode_v2_records_doc},
    {"render_jsonl", (PyCFunction)(void (*)(void))render_jsonl, METH_VARARGS | METH_KEYWORDS, render_jsonl_doc},
    {"count_jsonl", (PyCFunction)(void (*)(void))count_jsonl, METH_VARARGS | METH_KEYWORDS, count_jsonl_doc},
    {"render_v2_jsonl", (PyCFunction)(void (*)(void))render_v2_jsonl, METH_VARARGS | METH_KEYWORDS,
     render_v2_jsonl_doc},
    {"render_v2_dump", (PyCFunction)(void (*)(void))render_v2_dump, METH_VARARGS | METH_KEYWORDS,
     render_v2_dump_doc},
    {"gather", gather, METH_O, gather_doc},
    {"walk_v2_run", (PyCFunction)(void (*)(void))walk_v2_run, METH_VARARGS | METH_KEYWORDS, walk_v2_run_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "kfs.record._speedups",
    "The v2 record decoder and the JSON-lines renderer of kfs, compiled (see kfs/record/speedups.py).",
    -1,
    speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    init_tables();
    init_count_tables();
    return PyModule_Create(&speedups_module);
}
