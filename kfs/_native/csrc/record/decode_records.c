/* decode_v2_records: the records section of a magic v2 batch -> Record objects; the twin of the loop
 * in kfs/record/default_batch.py:decode_records. The record's fields are in record_fields.h. One record
 * alone (kfs_decode_one_record) for storage/record_at.c. */

#include "decode_records.h"
#include "record_fields.h"

#include <stdarg.h>

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

/* One record at p[*pos]: a new Record, or NULL with either an exception set or *why saying what is
 * malformed (the caller raises CorruptBatchError). */
static PyObject *
decode_record(const kfs_state *st, const uint8_t *p, Py_ssize_t end, Py_ssize_t *pos_io, int64_t base_offset,
              int64_t base_timestamp, PyObject *timestamp_type, PyObject *log_append_time, key_cache *keys,
              const char **why)
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
    PyObject *r = st->record_type->tp_alloc(st->record_type, 0);
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
        SLOT(st, r, SLOT_TIMESTAMP) = log_append_time;
    }
    else if ((SLOT(st, r, SLOT_TIMESTAMP) = base_plus_delta(base_timestamp, &v)) == NULL)
        goto fail;

    /* OffsetDelta */
    READ_VARINT(record_end);
    if ((SLOT(st, r, SLOT_OFFSET) = base_plus_delta(base_offset, &v)) == NULL)
        goto fail;

    Py_INCREF(timestamp_type);
    SLOT(st, r, SLOT_TIMESTAMP_TYPE) = timestamp_type;

    /* KeyLength, Key */
    READ_VARINT(record_end);
    if ((SLOT(st, r, SLOT_KEY) = read_nullable_bytes(p, record_end, &pos, varint_length(&v), why)) == NULL)
        goto fail;

    /* ValueLength, Value */
    READ_VARINT(record_end);
    if ((SLOT(st, r, SLOT_VALUE) = read_nullable_bytes(p, record_end, &pos, varint_length(&v), why)) == NULL)
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
    SLOT(st, r, SLOT_HEADERS) = headers;
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
raise_corrupt(const kfs_state *st, PyObject *position, const char *fmt, ...)
{
    va_list vargs;
    va_start(vargs, fmt);
    PyObject *message = PyUnicode_FromFormatV(fmt, vargs);
    va_end(vargs);
    if (message == NULL)
        return NULL;
    PyObject *exc = PyObject_CallFunctionObjArgs(st->corrupt_error, message, position, NULL);
    Py_DECREF(message);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

KFS_DOC(kfs_decode_v2_records_doc,
"decode_v2_records(payload, count, base_offset, base_timestamp, timestamp_type, log_append_time,\n"
"                  position=None) -> list[Record]\n"
"\n"
"The `count` records of an uncompressed v2 records section, as default_batch.decode_records gives\n"
"them. With timestamp_type 'LogAppendTime' every timestamp is log_append_time. Raises\n"
"CorruptBatchError (with `position`) on malformed input.");

PyObject *
kfs_decode_v2_records(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp", "timestamp_type",
                             "log_append_time", "position", NULL};
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp;
    PyObject *timestamp_type, *log_append_time, *position = Py_None;

    kfs_state *st = kfs_ready_state(module);
    if (st == NULL)
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
            r = decode_record(st, p, end, &pos, (int64_t)base_offset, (int64_t)base_timestamp, timestamp_type,
                              append_time ? log_append_time : NULL, &keys, &why);
        else
            why = "record past the end of the batch";
        if (r == NULL) {
            if (why != NULL)
                raise_corrupt(st, position, "record batch at position %S: record %zd of %zd is malformed (%s)",
                              position, i, count, why);
            Py_CLEAR(records);
            goto done;
        }
        PyList_SET_ITEM(records, i, r);
    }
    if (pos != end) {
        raise_corrupt(st, position, "record batch at position %S: %zd bytes left after its %zd records", position,
                      end - pos, count);
        Py_CLEAR(records);
        goto done;
    }
    /* Offset deltas rise from 0 (Kafka assigns them in order; the cleaner keeps the order): another
     * order would put records where a reader of the log does not look for them. */
    long long previous = 0;
    int previous_fits = 0;
    for (i = 0; i < count; i++) {
        PyObject *o = SLOT(st, PyList_GET_ITEM(records, i), SLOT_OFFSET);
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
            out_of_order = PyObject_RichCompareBool(o, SLOT(st, PyList_GET_ITEM(records, i - 1), SLOT_OFFSET), Py_LE);
            if (out_of_order < 0) {
                Py_CLEAR(records);
                goto done;
            }
        }
        if (out_of_order) {
            raise_corrupt(st, position, "record batch at position %S: record %zd of %zd is malformed (its offset "
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

/* kfs_decode_one_record: see decode_records.h. */
PyObject *
kfs_decode_one_record(const kfs_state *st, const uint8_t *section, Py_ssize_t len, Py_ssize_t at,
                      int64_t base_offset, int64_t base_timestamp, PyObject *timestamp_type, PyObject *log_append_time,
                      const char **why)
{
    key_cache keys = {.used = 0, .next = 0};
    PyObject *r = decode_record(st, section, len, &at, base_offset, base_timestamp, timestamp_type, log_append_time,
                                &keys, why);
    key_cache_clear(&keys);
    return r;
}
