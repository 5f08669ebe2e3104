/* render_v2_dump: the record lines of `kfs dump --deep-iteration --print-data-log`, fused, without the
 * GIL. */

#include "../record/records_walk.h"
#include "../views/json_text.h"

/* What `kfs dump --deep-iteration --print-data-log` prints for a v2 data batch's records (kfs/cli/
 * dump_log.py:_v2_data_lines, which stays the oracle and the fallback), straight from the records
 * section: the records_walk of kfs_render_records, no record created. Keys, values and header keys are
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

/* What dump_line writes with, and keeps from record to record. */
typedef struct {
    const char *tt;
    size_t tt_len;
    int64_t base_sequence, base_offset;
    int64_t before; /* the offset of the record dumped before, -1 for none */
    rawbuf *out, *gaps;
} dump_how;

/* walk_records' emitter for dump_records: record r's line into out, and its offset into gaps when it
 * does not follow the one before. */
static KFS_ALWAYS_INLINE int
dump_line(void *ctx, const uint8_t *p, const record_view *r)
{
    dump_how *dh = ctx;
    rawbuf *out = dh->out;
    header_view h = {NULL, NULL, 0, 0};
    int64_t sequence;
    if (record_sequence(dh->base_sequence, dh->base_offset, r->offset, &sequence) < 0)
        return RENDER_UNUSUAL;
    if (dh->before != -1 && (dh->before == INT64_MAX || r->offset != dh->before + 1)) {
        if (rb_put_pair(dh->gaps, dh->before, r->offset) < 0)
            return RENDER_NO_MEMORY;
    }
    dh->before = r->offset;

    /* Every key, value and header key is inside the record: 3 bytes for each of its bytes (a
     * U+FFFD per byte at worst, a comma per header key) and the fixed parts. */
    if ((size_t)r->size > ((size_t)PY_SSIZE_T_MAX >> 2) || rb_reserve(out, 3 * (size_t)r->size + 200 + dh->tt_len) < 0)
        return RENDER_NO_MEMORY;
    char *d = out->buf + out->len;
#define PUT_LITERAL(s)                    \
    do {                                  \
        memcpy(d, (s), sizeof(s) - 1);    \
        d += sizeof(s) - 1;               \
    } while (0)
    PUT_LITERAL("| offset: ");
    d = write_int64(d, r->offset);
    *d++ = ' ';
    memcpy(d, dh->tt, dh->tt_len);
    d += dh->tt_len;
    PUT_LITERAL(": ");
    d = write_int64(d, r->timestamp);
    PUT_LITERAL(" keySize: ");
    d = write_int64(d, r->key_len);
    PUT_LITERAL(" valueSize: ");
    d = write_int64(d, r->value_len);
    PUT_LITERAL(" sequence: ");
    d = write_int64(d, sequence);
    PUT_LITERAL(" headerKeys: [");
    Py_ssize_t at = r->headers;
    for (int64_t k = 0; k < r->n_headers; k++) {
        walk_header(p, r->end, &at, &h); /* checked by walk_record */
        if (k)
            *d++ = ',';
        d = write_utf8_replace(d, h.key, (Py_ssize_t)h.key_len);
    }
    *d++ = ']';
    if (r->key_len >= 0) {
        PUT_LITERAL(" key: ");
        d = write_utf8_replace(d, r->key, (Py_ssize_t)r->key_len);
    }
    if (r->value_len >= 0) {
        PUT_LITERAL(" payload: ");
        d = write_utf8_replace(d, r->value, (Py_ssize_t)r->value_len);
    }
    *d++ = '\n';
#undef PUT_LITERAL
    out->len = (size_t)(d - out->buf);
    return RENDER_OK;
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
    dump_how how = {tt, tt_len, base_sequence, base_offset, *previous, out, gaps};
    const int rc = walk_records(&w, count, dump_line, &how);
    if (rc == RENDER_OK)
        *previous = how.before;
    return rc;
}

KFS_DOC(kfs_render_v2_dump_doc,
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

PyObject *
kfs_render_v2_dump(PyObject *module, PyObject *args, PyObject *kwargs)
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
    rawbuf out = {NULL, 0, 0, 0}, gaps = {NULL, 0, 0, 0};
    Py_ssize_t tt_len, codec_len = 4;
    const char *codec_utf8 = "none";
    if (compression != NULL && (codec_utf8 = kfs_utf8_or_decline(compression, &codec_len)) == NULL) {
        result = PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    const char *tt_utf8 = kfs_utf8_or_decline(timestamp_type, &tt_len); /* (a lone surrogate: Python prints it) */
    if (tt_utf8 == NULL) {
        result = PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
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
    if (rc != RENDER_OK) {
        result = kfs_declined(rc);
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
