/* count_jsonl: the length of a records section's JSON lines, without rendering them. */

#include "renderers.h"

/* Lengths of what put_record writes, without writing it: the size of a decoded view is the sum of
 * its lines, and a stat must not cost the rendering. Each function is the length twin of a writer
 * (int64_len of ob_put_int64, kfs_bytes_len of kfs_write_bytes, kfs_count_records of put_record);
 * tests/test_sizes.py holds them to the renderer. */

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

/* A count's rules and its sum (kept here, a local of kfs_count_records, not behind the caller's pointer:
 * the compiler keeps it all in registers through the walk, as it did the copied loop's). */
typedef struct {
    int64_t fixed_len, first, stop;
    Py_ssize_t end; /* of the section */
    line_count sum;
} count_how;

/* walk_records' emitter for kfs_count_records: the length of record r's line, added when it is shown.
 * Every record's header keys must be UTF-8, as emit_shown_line asks of the renderers (checked here
 * while the headers' lengths are summed, one walk of them). */
static KFS_ALWAYS_INLINE int
count_line(void *ctx, const uint8_t *p, const record_view *r)
{
    count_how *c = ctx;
    const Py_ssize_t end = c->end;
    header_view h = {NULL, NULL, 0, 0};
    int64_t len = c->fixed_len + int64_len(r->offset) + int64_len(r->timestamp);
    len += r->key_len < 0 ? 4 : kfs_bytes_len(r->key, (Py_ssize_t)r->key_len, end - (r->key - p));
    len += r->value_len < 0 ? 4 : kfs_bytes_len(r->value, (Py_ssize_t)r->value_len, end - (r->value - p));
    Py_ssize_t at = r->headers;
    for (int64_t k = 0; k < r->n_headers; k++) {
        walk_header(p, r->end, &at, &h); /* checked by walk_record */
        if (!valid_utf8(h.key, (Py_ssize_t)h.key_len))
            return RENDER_UNUSUAL; /* decoded with replacement: the Python renderer renders it */
        len += (k ? 2 : 0) + 1 + kfs_bytes_len(h.key, (Py_ssize_t)h.key_len, end - (h.key - p)) + 2 + 1; /* [k, v] */
        len += h.value_len < 0 ? 4 : kfs_bytes_len(h.value, (Py_ssize_t)h.value_len, end - (h.value - p));
    }
    if (record_shown(r->offset, c->first, c->stop)) {
        if (c->sum.records == 0)
            c->sum.first = r->offset;
        c->sum.records++;
        c->sum.bytes += len;
    }
    return RENDER_OK;
}

/* The lines of the records in payload[0:end] with first <= offset < stop. Returns 0, or -1 when the
 * payload is malformed or holds something the Python renderer would render (an invalid UTF-8
 * header key, a value beyond int64): the caller then decodes and renders, which raises or renders. */
int
kfs_count_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
                  int append_time, int64_t log_append_time, int64_t fixed_len, int64_t first, int64_t stop,
                  int64_t last, line_count *out)
{
    records_walk w = records_walk_start(p, end, base_offset, base_timestamp, append_time, log_append_time, last);
    count_how how = {fixed_len, first, stop, end, *out};
    const int rc = walk_records(&w, count, count_line, &how);
    *out = how.sum;
    return rc == RENDER_OK ? 0 : -1;
}

KFS_DOC(kfs_count_jsonl_doc,
"count_jsonl(payload, count, base_offset, base_timestamp, timestamp_type, log_append_time, prefix,\n"
"            first_offset, end_offset, last_offset=2**63 - 1) -> (bytes, records, first) | None\n"
"\n"
"The length of render_jsonl(prefix, records) for the records of an uncompressed v2 records section\n"
"(decode_v2_records' arguments) whose offsets are in [first_offset, end_offset), how many they are\n"
"and the offset of the first (-1 if none), without creating them. None when the payload must be\n"
"decoded and rendered instead: malformed (the decoder raises), or unusual (the renderer decides),\n"
"as is a record whose offset is outside [base_offset, last_offset] (the batch's header's).\n"
"Runs without the GIL.");

PyObject *
kfs_count_jsonl(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"payload", "count", "base_offset", "base_timestamp", "timestamp_type",
                             "log_append_time", "prefix", "first_offset", "end_offset", "last_offset", NULL};
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_timestamp, log_append_time, first, stop, last = INT64_MAX;
    PyObject *timestamp_type, *prefix;

    if (kfs_ready_state(module) == NULL)
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
    int64_t fixed_len = jsonl_fixed_len((size_t)prefix_len, (size_t)tt_len);
    line_count out = {0, 0, -1};
    int rc = -1;
    if (count >= 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = kfs_count_records((const uint8_t *)buf.buf, buf.len, count, base_offset, base_timestamp, append_time,
                           log_append_time, fixed_len, first, stop, last, &out);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&buf);
    if (rc < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("LLL", (long long)out.bytes, (long long)out.records, (long long)out.first);
}
