/* arrow_columns: the Spark source's undecoded columns built straight into Arrow buffers, no Python
 * object per record (kfs/spark/arrow_columns.py wraps them into a pa.RecordBatch).
 *
 * Why: the Python path (kfs.spark.source.arrow_batches) made a Record per record and appended its
 * key, value, timestamp and headers to Python lists, then had Arrow copy the lists: ~0.5 us of
 * Python a record, the largest part of a `decode=raw` task. Here a v2 records section (the batch
 * already selected by the storage layer: offset range, control and aborted batches; its CRC checked,
 * decompressed by the Python codecs where they are needed) is walked by the module's one records walk
 * (record/records_walk.h: every length, varint and offset checked) and each record shown is appended
 * to growable C buffers in Arrow's layout:
 *
 *   key, value                 binary: validity bitmap, int32 offsets, data
 *   offset                     int64
 *   timestamp                  int64, Kafka's ms * 1000 (Spark's us), wrapping as the Python path's
 *                              numpy multiply does
 *   timestampType              int32 (0 CreateTime, 1 LogAppendTime, -1 NoTimestampType)
 *   headers                    list<struct<key: string, value: binary>>: int32 list offsets, the key
 *                              strings' offsets and data, the values' validity, offsets and data
 *
 * A section the walk refuses, or one with a header key that is not UTF-8 (the decoder makes it a str
 * with replacement characters), is declined (None) with the builder as it was before the call: the
 * Python decoder then raises what is wrong with it or decodes it, and its Records are appended here
 * by arrow_append_records, so that the two paths mix in one builder and the rows keep their order.
 *
 * The builder is a capsule; arrow_take hands its buffers to a second capsule that owns them (freed
 * when the last Arrow buffer over them goes: pa.foreign_buffer keeps its base alive) and leaves the
 * builder empty: no copy between the walk and Arrow. The v2 walk runs without the GIL (its memory comes
 * from PyMem_RawRealloc); a builder is for one thread at a time (a second caller while it works gets
 * RuntimeError). */

#include "../record/records_walk.h"
#include "../storage/batch_limits.h"

#define BUILDER_CAPSULE "kfs.arrow_columns.builder"
#define OWNER_CAPSULE "kfs.arrow_columns.buffers"

enum {
    B_KEY_VALID, B_KEY_OFFSETS, B_KEY_DATA,
    B_VALUE_VALID, B_VALUE_OFFSETS, B_VALUE_DATA,
    B_OFFSET, B_TIMESTAMP, B_TIMESTAMP_TYPE,
    B_HEADER_ENDS, B_HKEY_OFFSETS, B_HKEY_DATA, B_HVALUE_VALID, B_HVALUE_OFFSETS, B_HVALUE_DATA,
    N_BUFFERS
};

/* The counts that go with the buffers. */
typedef struct {
    int64_t rows, key_nulls, value_nulls, headers, hvalue_nulls;
} column_counts;

typedef struct {
    rawbuf b[N_BUFFERS];
    column_counts n;
    int64_t limit; /* the most bytes of one binary column's data: int32 offsets (lower in tests) */
    size_t hint[N_BUFFERS]; /* each buffer's size when last taken: the next rows' first allocation */
    int started; /* the offsets buffers hold their leading 0 */
    int payloads; /* 0: keys and values go in as nulls, headers not at all (a read that shows none of them) */
    int busy;    /* a call is appending (without the GIL) */
} arrow_columns;

/* Where a builder was before a call: restored when the call declines or fails. */
typedef struct {
    size_t len[N_BUFFERS];
    column_counts n;
} builder_mark;

enum { APPEND_FULL = -3 }; /* an offset would pass int32: the caller takes the rows, then appends again */

static builder_mark
mark_of(const arrow_columns *c)
{
    builder_mark m;
    for (int i = 0; i < N_BUFFERS; i++)
        m.len[i] = c->b[i].len;
    m.n = c->n;
    return m;
}

static void
rewind_to(arrow_columns *c, const builder_mark *m)
{
    for (int i = 0; i < N_BUFFERS; i++)
        c->b[i].len = m->len[i];
    c->n = m->n;
}

static inline int
put_raw(rawbuf *o, const void *v, size_t n)
{
    if (rb_reserve(o, n) < 0)
        return RENDER_NO_MEMORY;
    if (n)
        memcpy(o->buf + o->len, v, n);
    o->len += n;
    return RENDER_OK;
}

static inline int
put_i32(rawbuf *o, int32_t v)
{
    return put_raw(o, &v, sizeof(v));
}

static inline int
put_i64(rawbuf *o, int64_t v)
{
    return put_raw(o, &v, sizeof(v));
}

/* Bit i of a validity bitmap (of which bits 0..i-1 are set): set or cleared explicitly, since a rewind
 * leaves stale bits past the rows it keeps. */
static inline int
put_bit(rawbuf *o, int64_t i, int valid)
{
    const size_t byte = (size_t)(i >> 3);
    if (byte >= o->len) {
        if (rb_reserve(o, 1) < 0)
            return RENDER_NO_MEMORY;
        o->buf[o->len++] = 0;
    }
    const uint8_t m = (uint8_t)(1u << (i & 7));
    if (valid)
        o->buf[byte] = (char)((uint8_t)o->buf[byte] | m);
    else
        o->buf[byte] = (char)((uint8_t)o->buf[byte] & (uint8_t)~m);
    return RENDER_OK;
}

/* The leading 0 of every offsets buffer, once per batch of rows. */
static int
start_columns(arrow_columns *c)
{
    if (c->started)
        return RENDER_OK;
    /* Allocated at the size the last rows took (and an eighth more), not grown from 64 KiB by doubling
     * and copying for every batch of rows. (Measured under load: within noise of the walk's ~50 ns a
     * record; kept since it costs nothing.) */
    for (int i = 0; i < N_BUFFERS; i++)
        if (c->hint[i] && rb_reserve(&c->b[i], c->hint[i] + c->hint[i] / 8) < 0)
            return RENDER_NO_MEMORY;
    const int offsets[] = {B_KEY_OFFSETS, B_VALUE_OFFSETS, B_HEADER_ENDS, B_HKEY_OFFSETS, B_HVALUE_OFFSETS};
    for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++)
        if (put_i32(&c->b[offsets[i]], 0) < 0)
            return RENDER_NO_MEMORY;
    c->started = 1;
    return RENDER_OK;
}

/* Item `index` of a binary or string column: n bytes at p, or null (n < 0). `valid` NULL: the column
 * has no nulls (header keys). */
static inline int
put_binary(rawbuf *valid, rawbuf *offsets, rawbuf *data, int64_t index, const void *p, int64_t n, int64_t *nulls,
           int64_t limit)
{
    if (n > limit - (int64_t)data->len)
        return APPEND_FULL;
    if (valid != NULL && put_bit(valid, index, n >= 0) < 0)
        return RENDER_NO_MEMORY;
    if (n < 0)
        ++*nulls;
    else if (put_raw(data, p, (size_t)n) < 0)
        return RENDER_NO_MEMORY;
    return put_i32(offsets, (int32_t)data->len);
}

#define CHECK(call)                       \
    do {                                  \
        const int rc_ = (call);           \
        if (rc_ != RENDER_OK)             \
            return rc_;                   \
    } while (0)

/* One row's columns but the headers (which follow, then end_headers). */
static inline int
put_row(arrow_columns *c, int64_t offset, int64_t timestamp, int32_t timestamp_type, const void *key,
        int64_t key_len, const void *value, int64_t value_len)
{
    const int64_t i = c->n.rows;
    if (!c->payloads)
        key_len = value_len = -1;
    CHECK(put_binary(&c->b[B_KEY_VALID], &c->b[B_KEY_OFFSETS], &c->b[B_KEY_DATA], i, key, key_len,
                     &c->n.key_nulls, c->limit));
    CHECK(put_binary(&c->b[B_VALUE_VALID], &c->b[B_VALUE_OFFSETS], &c->b[B_VALUE_DATA], i, value, value_len,
                     &c->n.value_nulls, c->limit));
    CHECK(put_i64(&c->b[B_OFFSET], offset));
    CHECK(put_i64(&c->b[B_TIMESTAMP], (int64_t)((uint64_t)timestamp * 1000u))); /* ms -> us */
    CHECK(put_i32(&c->b[B_TIMESTAMP_TYPE], timestamp_type));
    return RENDER_OK;
}

static inline int
put_header(arrow_columns *c, const void *key, int64_t key_len, const void *value, int64_t value_len)
{
    if (!c->payloads)
        return RENDER_OK;
    if (c->n.headers >= INT32_MAX - 1)
        return APPEND_FULL;
    CHECK(put_binary(NULL, &c->b[B_HKEY_OFFSETS], &c->b[B_HKEY_DATA], c->n.headers, key, key_len, NULL,
                     c->limit));
    CHECK(put_binary(&c->b[B_HVALUE_VALID], &c->b[B_HVALUE_OFFSETS], &c->b[B_HVALUE_DATA], c->n.headers, value,
                     value_len, &c->n.hvalue_nulls, c->limit));
    c->n.headers++;
    return RENDER_OK;
}

static inline int
end_row(arrow_columns *c)
{
    CHECK(put_i32(&c->b[B_HEADER_ENDS], (int32_t)c->n.headers));
    c->n.rows++;
    return RENDER_OK;
}

/* ---- a v2 records section ------------------------------------------------------------------- */

typedef struct {
    arrow_columns *c;
    int64_t first, stop; /* the rows shown: first <= offset < stop (stop INT64_MAX: no end) */
    int32_t timestamp_type;
    int64_t last_walked; /* the offset of the last record walked, shown or not */
} section_rows;

/* walk_records' emitter: record r's row, when shown. Any record's header key that is not UTF-8 declines
 * the section (the decoder's str has replacement characters, which arrow_append_records takes). */
static KFS_ALWAYS_INLINE int
emit_row(void *ctx, const uint8_t *p, const record_view *r)
{
    section_rows *s = ctx;
    s->last_walked = r->offset;
    if (!header_keys_utf8(p, r))
        return RENDER_UNUSUAL;
    if (r->offset < s->first || (r->offset >= s->stop && s->stop != INT64_MAX))
        return RENDER_OK;
    arrow_columns *c = s->c;
    CHECK(put_row(c, r->offset, r->timestamp, s->timestamp_type, r->key, r->key_len, r->value, r->value_len));
    header_view h = {NULL, NULL, 0, 0};
    Py_ssize_t at = r->headers;
    for (int64_t k = 0; k < r->n_headers; k++) {
        walk_header(p, r->end, &at, &h); /* checked by the walk */
        CHECK(put_header(c, h.key, h.key_len, h.value, h.value_len));
    }
    return end_row(c);
}

static arrow_columns *
builder_of(PyObject *capsule)
{
    arrow_columns *c = PyCapsule_GetPointer(capsule, BUILDER_CAPSULE);
    if (c != NULL && c->busy) {
        PyErr_SetString(PyExc_RuntimeError, "an Arrow column builder is in use by another thread");
        return NULL;
    }
    return c;
}

/* The bytes of keys, values and headers the builder holds: what bounds an Arrow batch's size beside its
 * rows (a batch of 16,384 records of 1 MiB would be 16 GiB). */
static inline int64_t
payload_bytes(const arrow_columns *c)
{
    return (int64_t)(c->b[B_KEY_DATA].len + c->b[B_VALUE_DATA].len + c->b[B_HKEY_DATA].len
                     + c->b[B_HVALUE_DATA].len);
}

KFS_DOC(kfs_arrow_payload_bytes_doc,
"arrow_payload_bytes(builder) -> int\n"
"\n"
"The bytes of keys, values and header keys and values the builder holds (no offsets or bitmaps).");

PyObject *
kfs_arrow_payload_bytes(PyObject *module, PyObject *capsule)
{
    (void)module;
    const arrow_columns *c = builder_of(capsule);
    return c == NULL ? NULL : PyLong_FromLongLong((long long)payload_bytes(c));
}

/* What a call answers after a rewind for rc: None (the Python path's turn), False (full: take the rows
 * and append again), or NULL with MemoryError set. */
static PyObject *
declined(arrow_columns *c, int rc)
{
    if (rc == APPEND_FULL) {
        if (c->n.rows == 0) { /* (cannot happen at 2 GiB: a batch is at most 64 MiB decompressed, kfs's limit) */
            PyErr_SetString(PyExc_OverflowError, "one Kafka batch holds more than an Arrow column's data limit");
            return NULL;
        }
        Py_RETURN_FALSE;
    }
    return kfs_declined(rc);
}

KFS_DOC(kfs_arrow_builder_doc,
"arrow_builder(data_limit=2**31 - 1, payloads=True) -> builder\n"
"\n"
"An empty builder of the Spark source's undecoded Arrow columns (key, value, offset, timestamp,\n"
"timestampType, headers), for arrow_append_v2, arrow_append_run, arrow_append_records and arrow_take.\n"
"data_limit: the most bytes one binary column's data may hold before an append answers False (Arrow's\n"
"int32 offsets; lower only to test what happens at it). payloads False: every key and value is null\n"
"and no row has headers (a read that shows none of them: no byte of them is copied).");

static void
free_builder(PyObject *capsule)
{
    arrow_columns *c = PyCapsule_GetPointer(capsule, BUILDER_CAPSULE);
    if (c == NULL) {
        PyErr_Clear();
        return;
    }
    for (int i = 0; i < N_BUFFERS; i++)
        PyMem_RawFree(c->b[i].buf);
    PyMem_RawFree(c);
}

PyObject *
kfs_arrow_builder(PyObject *module, PyObject *args)
{
    (void)module;
    long long limit = INT32_MAX;
    int payloads = 1;
    if (!PyArg_ParseTuple(args, "|Lp:arrow_builder", &limit, &payloads))
        return NULL;
    if (limit < 0 || limit > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "arrow_builder: data_limit must be in [0, 2**31 - 1]");
        return NULL;
    }
    arrow_columns *c = PyMem_RawCalloc(1, sizeof(*c));
    if (c == NULL)
        return PyErr_NoMemory();
    c->limit = limit;
    c->payloads = payloads;
    PyObject *capsule = PyCapsule_New(c, BUILDER_CAPSULE, free_builder);
    if (capsule == NULL)
        PyMem_RawFree(c);
    return capsule;
}

KFS_DOC(kfs_arrow_append_v2_doc,
"arrow_append_v2(builder, payload, count, base_offset, base_timestamp, log_append_time, first_offset,\n"
"                end_offset, last_offset) -> (rows, last_walked) | False | None\n"
"\n"
"The records of an uncompressed v2 records section (decode_v2_records' arguments; log_append_time\n"
"None for CreateTime) whose offsets are in [first_offset, end_offset) (2**63 - 1: no end) appended as\n"
"rows, without creating them: the builder's rows now, and the offset of the last record walked. None\n"
"when the section must be decoded instead (malformed: the decoder raises; a header key that is not\n"
"UTF-8), False when an Arrow offset would pass int32 (take the rows, then call again); either way the\n"
"builder is as it was. Walks without the GIL.");

PyObject *
kfs_arrow_append_v2(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *capsule, *append_time_obj;
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp, first, stop, last;

    if (!PyArg_ParseTuple(args, "Oy*nLLOLLL:arrow_append_v2", &capsule, &buf, &count, &base_offset, &base_timestamp,
                          &append_time_obj, &first, &stop, &last))
        return NULL;
    PyObject *result = NULL;
    arrow_columns *c = builder_of(capsule);
    long long log_append_time = 0;
    const int append_time = append_time_obj != Py_None;
    if (c == NULL || (append_time && (log_append_time = PyLong_AsLongLong(append_time_obj)) == -1 && PyErr_Occurred()))
        goto done;
    if (count < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int rc = start_columns(c); /* (before the mark: a rewind keeps the leading 0s `started` says are there) */
    const builder_mark before = mark_of(c);
    section_rows s = {c, first, stop, append_time ? 1 : 0, INT64_MIN};
    c->busy = 1;
    if (rc == RENDER_OK) {
        Py_BEGIN_ALLOW_THREADS
        records_walk w = records_walk_start((const uint8_t *)buf.buf, buf.len, base_offset, base_timestamp,
                                            append_time, log_append_time, last);
        rc = walk_records(&w, count, emit_row, &s);
        Py_END_ALLOW_THREADS
    }
    c->busy = 0;
    if (rc != RENDER_OK) {
        rewind_to(c, &before);
        result = declined(c, rc);
        goto done;
    }
    result = Py_BuildValue("(LL)", (long long)c->n.rows, (long long)s.last_walked);

done:
    PyBuffer_Release(&buf);
    return result;
}

/* ---- many plain batches of a segment in one call -------------------------------------------- */

/* A batch at a time cost ~6 us of Python (the segment walk's generators, the header parse, the CRC call:
 * kfs/views/plain_runs.py): more than the rows of a 20-record batch. arrow_append_run walks a window of a
 * segment from a batch boundary itself, as views/walk_v2_run.c does for the JSON lines, with the same
 * checks (storage/batch_limits.h), taking batch after batch while each is plain: whole in the window, magic
 * 2, uncompressed or lz4, not a control batch (nor transactional under read_committed), its offsets where
 * the segment walk wants them and below `max_last`, its CRC valid, its records walked. The first that is
 * anything else ends the run, for the Python walk to raise what is wrong with it or decode it. The run
 * also ends after the batch whose last record is at or past `stop` (the piece ends there, as
 * record_stream.record_lists_from does) and after the batch that brings the builder to `rows` rows or
 * `bytes` bytes of keys, values and headers (where the Python path closes an Arrow batch). */

typedef struct {
    int64_t segment_base, max_last, first, stop, rows, bytes;
    int64_t previous_last;
    int has_previous, read_committed;
} run_params;

typedef struct {
    Py_ssize_t used;    /* bytes of the window taken (whole batches) */
    int64_t first_base; /* the first taken batch's base offset */
    int64_t last;       /* the last taken batch's last offset */
    int64_t walked;     /* the offset of the last record walked in it (INT64_MIN: none walked) */
    int64_t batches;    /* batches taken */
} run_result;

static inline void
take_batch(run_result *res, int64_t base, int64_t last, Py_ssize_t end, int64_t walked)
{
    if (res->batches == 0)
        res->first_base = base;
    res->last = last;
    res->walked = walked;
    res->batches++;
    res->used = end;
}

static int
append_run(arrow_columns *c, const uint8_t *w, Py_ssize_t n, const run_params *rp, rawbuf *scratch,
           run_result *res)
{
    Py_ssize_t p = 0;
    int64_t previous = rp->previous_last;
    int has_previous = rp->has_previous;
    const v2_run_limits lim = {rp->segment_base, rp->max_last, rp->first, rp->stop, rp->read_committed};
    for (;;) {
        v2_plain_batch pb;
        const int next = v2_run_next(w + p, n - p, &lim, has_previous, previous, scratch, &pb);
        if (next == RENDER_NO_MEMORY)
            return RENDER_NO_MEMORY;
        if (next == V2_RUN_END)
            break;
        const int64_t base = pb.base, last = pb.last, size = pb.size;
        if (next == V2_RUN_PASS) { /* before the piece: passed over unread, as selected_batches does */
            previous = last;
            has_previous = 1;
            p += (Py_ssize_t)size;
            take_batch(res, base, last, p, INT64_MIN);
            continue;
        }
        const int32_t count = pb.count;
        const int append_time = pb.append_time;
        const int64_t base_ts = pb.base_ts, max_ts = pb.max_ts;
        const uint8_t *section = pb.section;
        const Py_ssize_t section_len = pb.section_len;
        const builder_mark before = mark_of(c);
        section_rows s = {c, rp->first, rp->stop, append_time ? 1 : 0, INT64_MIN};
        records_walk rw = records_walk_start(section, section_len, base, base_ts, append_time, max_ts, last);
        const int rc = walk_records(&rw, count, emit_row, &s);
        if (rc != RENDER_OK) /* declined, or full: the batch is the one-batch path's, whole */
            rewind_to(c, &before);
        if (rc == RENDER_NO_MEMORY)
            return RENDER_NO_MEMORY;
        if (rc != RENDER_OK)
            break;
        previous = last;
        has_previous = 1;
        p += (Py_ssize_t)size;
        take_batch(res, base, last, p, s.last_walked);
        if ((s.last_walked >= rp->stop && rp->stop != INT64_MAX) || c->n.rows >= rp->rows
            || payload_bytes(c) >= rp->bytes)
            break;
    }
    return RENDER_OK;
}

KFS_DOC(kfs_arrow_append_run_doc,
"arrow_append_run(builder, window, segment_base, previous_last, max_last, first_offset, end_offset,\n"
"                 read_committed, rows, bytes=2**63 - 1) -> (used, first_base, last, last_walked, rows) | None\n"
"\n"
"The plain batches at the start of `window` (bytes of a segment file from a batch boundary, no further\n"
"than the walk's limit) appended as rows, batch after batch, until one is not plain (see append_run),\n"
"the last record walked is at or past end_offset (2**63 - 1: no end), or the builder holds `rows` rows\n"
"or `bytes` bytes of keys, values and headers (arrow_payload_bytes):\n"
"`used` bytes of the window taken, the first's base offset, the last's last offset, the offset of the\n"
"last record walked in it (-2**63: none, it was before first_offset and passed over), the builder's\n"
"rows now. previous_last:\n"
"the last offset of the batch before the window's first (None: none). None when no batch was taken\n"
"(the Python walk takes the first), or this machine has no CRC-32C instruction. Runs without the GIL.");

PyObject *
kfs_arrow_append_run(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *capsule, *previous_obj;
    Py_buffer buf;
    long long segment_base, max_last, first, stop, rows, bytes = INT64_MAX;
    int read_committed;
    if (!PyArg_ParseTuple(args, "Oy*LOLLLpL|L:arrow_append_run", &capsule, &buf, &segment_base, &previous_obj,
                          &max_last, &first, &stop, &read_committed, &rows, &bytes))
        return NULL;
    PyObject *result = NULL;
    rawbuf scratch = {NULL, 0, 0, 0};
    run_params rp = {segment_base, max_last, first, stop, rows, bytes, 0, previous_obj != Py_None, read_committed};
    arrow_columns *c = builder_of(capsule);
    if (c == NULL)
        goto done;
    if (rp.has_previous) {
        rp.previous_last = PyLong_AsLongLong(previous_obj);
        if (rp.previous_last == -1 && PyErr_Occurred())
            goto done;
    }
    kfs_load_lz4();
    if (!kfs_have_hw_crc32c()) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (start_columns(c) != RENDER_OK) {
        PyErr_NoMemory();
        goto done;
    }
    const builder_mark whole = mark_of(c);
    run_result res = {0, 0, 0, INT64_MIN, 0};
    int rc;
    c->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = append_run(c, (const uint8_t *)buf.buf, buf.len, &rp, &scratch, &res);
    Py_END_ALLOW_THREADS
    c->busy = 0;
    if (rc == RENDER_NO_MEMORY) {
        rewind_to(c, &whole);
        PyErr_NoMemory();
        goto done;
    }
    if (res.batches == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = Py_BuildValue("(nLLLL)", res.used, (long long)res.first_base, (long long)res.last,
                           (long long)res.walked, (long long)c->n.rows);
done:
    PyMem_RawFree(scratch.buf);
    PyBuffer_Release(&buf);
    return result;
}

/* ---- Records (the decoder's, for what the walk declines or does not read) ------------------- */

static const char *const timestamp_type_names[] = {"NoTimestampType", "CreateTime", "LogAppendTime"};

/* A bytes-like object or None (n -1) as a pointer and length; *view is released by the caller when
 * view->obj is set. */
static int
bytes_or_none(PyObject *o, Py_buffer *view, const void **p, int64_t *n)
{
    view->obj = NULL;
    if (o == Py_None) {
        *p = NULL;
        *n = -1;
        return 0;
    }
    if (PyBytes_Check(o)) {
        *p = PyBytes_AS_STRING(o);
        *n = PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) < 0)
        return -1;
    *p = view->buf;
    *n = view->len;
    return 0;
}

/* After a failed put: NULL with MemoryError set, or 1 for full (APPEND_FULL). */
static int
put_failed(int rc)
{
    if (rc == APPEND_FULL)
        return 1;
    PyErr_NoMemory();
    return -1;
}

/* Record r's row: 0, 1 when the builder is full, -1 with an exception set. */
static int
append_record(kfs_state *st, arrow_columns *c, PyObject *r)
{
    if (!PyObject_TypeCheck(r, st->record_type)) {
        PyErr_Format(PyExc_TypeError, "arrow_append_records: a %s is not a Record", Py_TYPE(r)->tp_name);
        return -1;
    }
    PyObject *tt = SLOT(st, r, SLOT_TIMESTAMP_TYPE), *headers = SLOT(st, r, SLOT_HEADERS);
    PyObject *offset_obj = SLOT(st, r, SLOT_OFFSET), *timestamp_obj = SLOT(st, r, SLOT_TIMESTAMP);
    if (tt == NULL || headers == NULL || offset_obj == NULL || timestamp_obj == NULL || SLOT(st, r, SLOT_KEY) == NULL
        || SLOT(st, r, SLOT_VALUE) == NULL) {
        PyErr_SetString(PyExc_AttributeError, "arrow_append_records: a Record with a slot unset");
        return -1;
    }
    int32_t type_id = -2;
    for (int i = 0; i < 3; i++)
        if (PyUnicode_Check(tt) && PyUnicode_CompareWithASCIIString(tt, timestamp_type_names[i]) == 0)
            type_id = i - 1;
    if (type_id == -2) {
        PyErr_Format(PyExc_KeyError, "%R", tt);
        return -1;
    }
    const long long offset = PyLong_AsLongLong(offset_obj);
    if (offset == -1 && PyErr_Occurred())
        return -1;
    const long long timestamp = PyLong_AsLongLong(timestamp_obj);
    if (timestamp == -1 && PyErr_Occurred())
        return -1;
    Py_buffer kv, vv;
    const void *k, *v;
    int64_t kn, vn;
    if (bytes_or_none(SLOT(st, r, SLOT_KEY), &kv, &k, &kn) < 0)
        return -1;
    if (bytes_or_none(SLOT(st, r, SLOT_VALUE), &vv, &v, &vn) < 0) {
        if (kv.obj)
            PyBuffer_Release(&kv);
        return -1;
    }
    int rc = put_row(c, offset, timestamp, type_id, k, kn, v, vn);
    if (kv.obj)
        PyBuffer_Release(&kv);
    if (vv.obj)
        PyBuffer_Release(&vv);
    if (rc != RENDER_OK)
        return put_failed(rc);
    PyObject *seq = PySequence_Fast(headers, "a Record's headers must be a sequence");
    if (seq == NULL)
        return -1;
    int out = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && out == 0; i++) {
        PyObject *pair = PySequence_Fast(PySequence_Fast_GET_ITEM(seq, i), "a header must be a (key, value) pair");
        if (pair == NULL || PySequence_Fast_GET_SIZE(pair) != 2) {
            if (pair != NULL)
                PyErr_SetString(PyExc_ValueError, "a header must be a (key, value) pair");
            Py_XDECREF(pair);
            out = -1;
            break;
        }
        Py_ssize_t key_len;
        const char *key = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(pair, 0), &key_len);
        Py_buffer hv;
        const void *hp;
        int64_t hn;
        if (key == NULL || bytes_or_none(PySequence_Fast_GET_ITEM(pair, 1), &hv, &hp, &hn) < 0) {
            Py_DECREF(pair);
            out = -1;
            break;
        }
        rc = put_header(c, key, key_len, hp, hn);
        if (hv.obj)
            PyBuffer_Release(&hv);
        Py_DECREF(pair);
        if (rc != RENDER_OK)
            out = put_failed(rc);
    }
    Py_DECREF(seq);
    if (out == 0 && (rc = end_row(c)) != RENDER_OK)
        out = put_failed(rc);
    return out;
}

KFS_DOC(kfs_arrow_append_records_doc,
"arrow_append_records(builder, records) -> int | False\n"
"\n"
"The decoder's Records appended as rows, in order (the Python path's, for batches arrow_append_v2\n"
"declines or does not read: legacy messages, malformed sections): the builder's rows now, or False\n"
"when an Arrow offset would pass int32 (take the rows, then call again), the builder as it was.");

PyObject *
kfs_arrow_append_records(PyObject *module, PyObject *args)
{
    PyObject *capsule, *records;
    if (!PyArg_ParseTuple(args, "OO:arrow_append_records", &capsule, &records))
        return NULL;
    kfs_state *st = kfs_ready_state(module);
    arrow_columns *c = st ? builder_of(capsule) : NULL;
    if (c == NULL)
        return NULL;
    PyObject *seq = PySequence_Fast(records, "arrow_append_records: records must be a sequence");
    if (seq == NULL)
        return NULL;
    int rc = start_columns(c) == RENDER_OK ? 0 : put_failed(RENDER_NO_MEMORY);
    const builder_mark before = mark_of(c);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && rc == 0; i++)
        rc = append_record(st, c, PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    if (rc != 0) {
        rewind_to(c, &before);
        return rc < 0 ? NULL : declined(c, APPEND_FULL);
    }
    return PyLong_FromLongLong(c->n.rows);
}

/* ---- the buffers, to Arrow -------------------------------------------------------------------- */

typedef struct {
    char *buf[N_BUFFERS];
} owned_buffers;

static void
free_owned(PyObject *capsule)
{
    owned_buffers *o = PyCapsule_GetPointer(capsule, OWNER_CAPSULE);
    if (o == NULL) {
        PyErr_Clear();
        return;
    }
    for (int i = 0; i < N_BUFFERS; i++)
        PyMem_RawFree(o->buf[i]);
    PyMem_RawFree(o);
}

KFS_DOC(kfs_arrow_take_doc,
"arrow_take(builder) -> (counts, owner, spans)\n"
"\n"
"The builder's rows, the builder left empty: counts (rows, key nulls, value nulls, headers, header\n"
"value nulls), the object that owns the memory (kept alive by every pa.foreign_buffer over it), and\n"
"(address, size) of each buffer: key validity, offsets, data; value validity, offsets, data; offset;\n"
"timestamp (us); timestampType; headers' list offsets; header keys' offsets, data; header values'\n"
"validity, offsets, data.");

PyObject *
kfs_arrow_take(PyObject *module, PyObject *capsule)
{
    (void)module;
    arrow_columns *c = builder_of(capsule);
    if (c == NULL || start_columns(c) != RENDER_OK)
        return c == NULL ? NULL : PyErr_NoMemory();
    owned_buffers *o = PyMem_RawCalloc(1, sizeof(*o));
    if (o == NULL)
        return PyErr_NoMemory();
    PyObject *owner = PyCapsule_New(o, OWNER_CAPSULE, free_owned);
    if (owner == NULL) {
        PyMem_RawFree(o);
        return NULL;
    }
    PyObject *spans = PyTuple_New(N_BUFFERS);
    PyObject *counts = Py_BuildValue("(LLLLL)", (long long)c->n.rows, (long long)c->n.key_nulls,
                                     (long long)c->n.value_nulls, (long long)c->n.headers,
                                     (long long)c->n.hvalue_nulls);
    for (int i = 0; spans != NULL && counts != NULL && i < N_BUFFERS; i++) {
        PyObject *span = Py_BuildValue("(Kn)", (unsigned long long)(uintptr_t)c->b[i].buf, (Py_ssize_t)c->b[i].len);
        if (span == NULL) {
            Py_CLEAR(spans);
            break;
        }
        PyTuple_SET_ITEM(spans, i, span);
    }
    if (spans == NULL || counts == NULL) {
        Py_XDECREF(spans);
        Py_XDECREF(counts);
        Py_DECREF(owner); /* (o owns nothing yet) */
        return NULL;
    }
    for (int i = 0; i < N_BUFFERS; i++) {
        o->buf[i] = c->b[i].buf; /* the owner's now */
        c->hint[i] = c->b[i].len;
        c->b[i] = (rawbuf){NULL, 0, 0, 0};
    }
    c->n = (column_counts){0, 0, 0, 0, 0};
    c->started = 0;
    PyObject *result = PyTuple_Pack(3, counts, owner, spans);
    Py_DECREF(counts);
    Py_DECREF(owner);
    Py_DECREF(spans);
    return result;
}
