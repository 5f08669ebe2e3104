/* render_v2_jsonl: a records section -> JSON lines, fused: no Record is created, and the loop runs
 * without the GIL (two readers decode on two cores). */

#include "renderers.h"
#include "offsets_json.h"

/* From a records section straight to its JSON lines: the bytes render_jsonl gives for the records
 * decode_v2_records gives, without creating them. It walks the section as kfs_count_records does, and
 * leaves to the Python path (returns RENDER_UNUSUAL) exactly what kfs_count_records leaves to it: the
 * two agree on every line they take, and the decoder and renderer stay the oracle for the rest.
 * No Python object is touched between Py_BEGIN_ALLOW_THREADS and Py_END_ALLOW_THREADS: memory
 * comes from PyMem_RawRealloc, which needs no GIL. */

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
    o->len += (size_t)(kfs_write_bytes(start, p, (Py_ssize_t)n, readable) - start);
    return 0;
}

#define RB_LITERAL(o, s)                                  \
    do {                                                  \
        memcpy((o)->buf + (o)->len, (s), sizeof(s) - 1);  \
        (o)->len += sizeof(s) - 1;                        \
    } while (0)

/* How a JSON line is written: the line prefix (the topic and partition's `{"topic": ..., "offset": `)
 * and the batch's timestamp type, as UTF-8. */
typedef struct {
    const char *prefix, *tt;
    size_t prefix_len, tt_len;
} jsonl_how;

/* Record r's line up to its key: prefix, offset, ', "timestamp": ' ts ', "timestamp_type": "' tt
 * '", "key": ' (the part every JSON line writer shares). 0, or -1 out of memory. */
static KFS_ALWAYS_INLINE int
put_line_head(const jsonl_how *j, const record_view *r, rawbuf *out)
{
    if (rb_reserve(out, j->prefix_len + 20 + 15 + 20 + 21 + j->tt_len + 10) < 0)
        return -1;
    memcpy(out->buf + out->len, j->prefix, j->prefix_len);
    out->len += j->prefix_len;
    out->len = (size_t)(write_int64(out->buf + out->len, r->offset) - out->buf);
    RB_LITERAL(out, ", \"timestamp\": ");
    out->len = (size_t)(write_int64(out->buf + out->len, r->timestamp) - out->buf);
    RB_LITERAL(out, ", \"timestamp_type\": \"");
    memcpy(out->buf + out->len, j->tt, j->tt_len);
    out->len += j->tt_len;
    RB_LITERAL(out, "\", \"key\": ");
    return 0;
}

/* Record r's JSON line, appended to out: render_shown_lines' writer for kfs_render_records. */
static KFS_ALWAYS_INLINE int
jsonl_line(const void *how, const uint8_t *p, Py_ssize_t end, const record_view *r, rawbuf *out)
{
    const jsonl_how *j = how;
    header_view h = {NULL, NULL, 0, 0};
/* a value inside the section is followed by more of it: kfs_write_bytes may read it a word at a time */
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

    if (put_line_head(j, r, out) < 0)
        return RENDER_NO_MEMORY;
    PUT_BYTES(r->key, r->key_len);
    RESERVE(11);
    RB_LITERAL(out, ", \"value\": ");
    PUT_BYTES(r->value, r->value_len);
    RESERVE(14);
    RB_LITERAL(out, ", \"headers\": [");
    Py_ssize_t at = r->headers;
    for (int64_t k = 0; k < r->n_headers; k++) {
        walk_header(p, r->end, &at, &h);
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
    return RENDER_OK;
#undef RESERVE
#undef PUT_BYTES
}

/* How an Avro line is written: the JSON line's parts, and the table. */
typedef struct {
    jsonl_how j;
    avro_lines *avro;
} avro_how;

/* kfs.registry.lines.framed of a key: byte 0 and a 4-byte id other than 0, or byte 1 and a 16-byte GUID. */
static inline int
framed_key(const uint8_t *k, int64_t n)
{
    return (n >= 5 && k[0] == 0 && (k[1] | k[2] | k[3] | k[4]) != 0) || (n >= 17 && k[0] == 1);
}

static inline const avro_entry *
avro_entry_of(avro_lines *a, const uint8_t *id)
{
    for (int i = 0, k = a->last; i < a->n; i++, k = k + 1 == a->n ? 0 : k + 1)
        if (memcmp(a->entries[k].id, id, 4) == 0) {
            a->last = k;
            return &a->entries[k];
        }
    return NULL;
}

/* Record r's line as render_jsonl's `avro` step writes it (put_record with avro_value): the record's
 * own parts, its value's datum as JSON, then `, "headers": []` and the schema's tail. RENDER_UNUSUAL
 * for every record that step leaves to the Python decoder. */
static KFS_ALWAYS_INLINE int
avro_line(const void *how, const uint8_t *p, Py_ssize_t end, const record_view *r, rawbuf *out)
{
    const avro_how *a = how;
    const jsonl_how *j = &a->j;
    const uint8_t *v = r->value;
    if (r->n_headers != 0 || r->value_len < 5 || v[0] != 0 || (r->key_len >= 0 && framed_key(r->key, r->key_len)))
        return RENDER_UNUSUAL;
    const avro_entry *e = avro_entry_of(a->avro, v + 1);
    if (e == NULL || (e->protobuf && (r->value_len < 6 || v[5] != 0)))
        return RENDER_UNUSUAL;
    a->avro->text.len = 0;
    const int rendered = e->protobuf
        ? kfs_protobuf_render_into(e->program, v + 6, (Py_ssize_t)r->value_len - 6, &a->avro->text)
        : kfs_avro_render_into(e->program, v + 5, (Py_ssize_t)r->value_len - 5, &a->avro->text);
    if (rendered < 0)
        return RENDER_NO_MEMORY;
    if (rendered == 0)
        return RENDER_UNUSUAL;
    const json_out *t = &a->avro->text;
    if (put_line_head(j, r, out) < 0 ||
        rb_put_bytes(out, r->key, r->key_len, end - (r->key_len < 0 ? 0 : r->key - p)) < 0)
        return RENDER_NO_MEMORY;
    if (rb_reserve(out, 11 + t->len + 15 + e->tail_len + 2) < 0)
        return RENDER_NO_MEMORY;
    RB_LITERAL(out, ", \"value\": ");
    memcpy(out->buf + out->len, t->buf, t->len);
    out->len += t->len;
    RB_LITERAL(out, ", \"headers\": []");
    memcpy(out->buf + out->len, e->tail, e->tail_len);
    out->len += e->tail_len;
    RB_LITERAL(out, "}\n");
    return RENDER_OK;
}

/* Record r's line as `kfs cat` shows an offset commit of `__consumer_offsets` (render_jsonl's `commits`:
 * put_record then put_commit, the same bytes): RENDER_UNUSUAL, the batch the Python walk's, for a record
 * that is not a plain offset commit (group metadata, a tombstone's null key, a header, a key or value
 * the commit writers leave to the line decoder). */
static KFS_ALWAYS_INLINE int
commit_line(const void *how, const uint8_t *p, Py_ssize_t end, const record_view *r, rawbuf *out)
{
    (void)p;
    (void)end;
    const jsonl_how *j = how;
    if (r->n_headers != 0 || r->key_len < 0)
        return RENDER_UNUSUAL;
    const size_t room = j->prefix_len + 20 + 15 + 20 + 21 + j->tt_len + COMMIT_JSON_ROOM(r->key_len) +
                        COMMIT_JSON_ROOM(r->value_len < 0 ? 0 : r->value_len) + 40;
    if (rb_reserve(out, room) < 0)
        return RENDER_NO_MEMORY;
    char *start = out->buf + out->len, *d = start;
    memcpy(d, j->prefix, j->prefix_len);
    d = write_int64(d + j->prefix_len, r->offset);
    COMMIT_PUT_LITERAL(d, ", \"timestamp\": ");
    d = write_int64(d, r->timestamp);
    COMMIT_PUT_LITERAL(d, ", \"timestamp_type\": \"");
    memcpy(d, j->tt, j->tt_len);
    d += j->tt_len;
    COMMIT_PUT_LITERAL(d, "\", \"key\": ");
    if ((d = commit_key_json(d, r->key, (Py_ssize_t)r->key_len)) == NULL)
        return RENDER_UNUSUAL;
    COMMIT_PUT_LITERAL(d, ", \"value\": ");
    if (r->value_len < 0)
        COMMIT_PUT_LITERAL(d, "null");
    else if ((d = commit_value_json(d, r->value, (Py_ssize_t)r->value_len)) == NULL)
        return RENDER_UNUSUAL;
    COMMIT_PUT_LITERAL(d, ", \"headers\": []}\n");
    out->len += (size_t)(d - start);
    return RENDER_OK;
}

/* The lines of the records in payload[0:end] with first <= offset < stop, appended to out; with
 * `marks`, each rendered record's offset and the end of its line in out, as two int64s. */
int
kfs_render_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
                   int append_time, int64_t log_append_time, const char *prefix, size_t prefix_len, const char *tt,
                   size_t tt_len, int64_t first, int64_t stop, int64_t last, rawbuf *out, rawbuf *marks)
{
    const jsonl_how how = {prefix, tt, prefix_len, tt_len};
    return render_shown_lines(p, end, count, base_offset, base_timestamp, append_time, log_append_time, first, stop,
                              last, jsonl_line, &how, out, marks);
}

/* kfs_render_records for `__consumer_offsets`' offset commits (commit_line); RENDER_UNUSUAL for a batch
 * holding anything else. */
int
kfs_render_commit_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                          int64_t base_timestamp, int append_time, int64_t log_append_time, const char *prefix,
                          size_t prefix_len, const char *tt, size_t tt_len, int64_t first, int64_t stop, int64_t last,
                          rawbuf *out, rawbuf *marks)
{
    const jsonl_how how = {prefix, tt, prefix_len, tt_len};
    return render_shown_lines(p, end, count, base_offset, base_timestamp, append_time, log_append_time, first, stop,
                              last, commit_line, &how, out, marks);
}

/* kfs_render_records for values framed by the schema registry's ids (avro_line); RENDER_UNUSUAL for a
 * batch holding any other record. */
int
kfs_render_avro_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                        int64_t base_timestamp, int append_time, int64_t log_append_time, const char *prefix,
                        size_t prefix_len, const char *tt, size_t tt_len, avro_lines *avro, int64_t first,
                        int64_t stop, int64_t last, rawbuf *out, rawbuf *marks)
{
    const avro_how how = {{prefix, tt, prefix_len, tt_len}, avro};
    return render_shown_lines(p, end, count, base_offset, base_timestamp, append_time, log_append_time, first, stop,
                              last, avro_line, &how, out, marks);
}

KFS_DOC(kfs_render_v2_jsonl_doc,
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

PyObject *
kfs_render_v2_jsonl(PyObject *module, PyObject *args, PyObject *kwargs)
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
    rawbuf out = {NULL, 0, 0, 0}, marks = {NULL, 0, 0, 0};
    Py_ssize_t prefix_len, tt_len;
    const char *prefix_utf8 = kfs_utf8_or_decline(prefix, &prefix_len);
    const char *tt_utf8 = prefix_utf8 ? kfs_utf8_or_decline(timestamp_type, &tt_len) : NULL;
    if (tt_utf8 == NULL) {
        result = PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    int append_time = strcmp(tt_utf8, "LogAppendTime") == 0;
    int rc = RENDER_UNUSUAL;
    if (count >= 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = kfs_render_records((const uint8_t *)buf.buf, buf.len, count, base_offset, base_timestamp, append_time,
                                log_append_time, prefix_utf8, (size_t)prefix_len, tt_utf8, (size_t)tt_len, first,
                                stop, last, &out, lines ? &marks : NULL);
        Py_END_ALLOW_THREADS
    }
    if (rc != RENDER_OK) {
        result = kfs_declined(rc);
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
