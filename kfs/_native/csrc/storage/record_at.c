/* v2_record_at: the one record of a batch a `.value` wants, the batch checked as records_of checks it. */

#include "../record/decode_records.h"
#include "../record/records_walk.h"
#include "batch_limits.h"

/* A `.value` wants one record of its batch, and records_of (kfs/storage/batch_walk.py) makes twenty:
 * the CRC, the payload decompressed in Python (the lz4 frame parsed there), every record an object.
 * This checks the same of the batch (its CRC, every record walked as records_walk.h walks them: in
 * order, inside the batch's offsets, the section ending with the last) and makes the one record, with
 * kfs_decode_one_record, as decode_v2_records makes it. What the walk refuses, or another codec, is declined:
 * records_of then raises or decodes it. */

/* Where the record at `target` starts in the section, if the walk meets it. */
typedef struct {
    int64_t target;
    Py_ssize_t found; /* -1: not met */
} target_search;

/* walk_records' emitter for v2_record_at: every record is walked (the batch is checked whole), the
 * target's start noted. */
static KFS_ALWAYS_INLINE int
note_target(void *ctx, const uint8_t *p, const record_view *r)
{
    target_search *s = ctx;
    if (r->offset == s->target)
        s->found = r->start;
    return RENDER_OK;
}

KFS_DOC(kfs_v2_record_at_doc,
"v2_record_at(batch, segment_base, target, timestamp_type) -> Record | False | None\n"
"\n"
"The record at offset `target` of a magic v2 batch (exactly its bytes), when the batch is uncompressed\n"
"or lz4, its CRC holds and every record of it walks cleanly, in order, inside the batch's offsets (from\n"
"no lower than `segment_base`): the Record records_of would give for it. False: none of its records\n"
"is at `target` (compacted away). None: declined (damage, another codec, no CRC-32C instruction);\n"
"records_of says what is there. timestamp_type: the header's ('CreateTime' or 'LogAppendTime').");

PyObject *
kfs_v2_record_at(PyObject *module, PyObject *args)
{
    Py_buffer buf;
    long long segment_base, target;
    PyObject *timestamp_type;
    kfs_state *st = kfs_ready_state(module);
    if (st == NULL)
        return NULL;
    if (!PyArg_ParseTuple(args, "y*LLU:v2_record_at", &buf, &segment_base, &target, &timestamp_type))
        return NULL;
    PyObject *result = NULL;
    rawbuf scratch = {NULL, 0, 0, 0};
    const uint8_t *b = (const uint8_t *)buf.buf;
    const Py_ssize_t n = buf.len;
    kfs_load_lz4();
    if (n < 61 || b[16] != 2 || 12 + (int64_t)(int32_t)kfs_load_be32(b + 8) != (int64_t)n || !kfs_have_hw_crc32c())
        goto declined;
    const uint16_t attributes = (uint16_t)((b[21] << 8) | b[22]);
    if (!v2_codec_walkable(attributes))
        goto declined;
    const int64_t base = (int64_t)kfs_load_be64(b);
    const int32_t count = (int32_t)kfs_load_be32(b + 57);
    int64_t last;
    if (v2_last_offset(b, base, &last) < 0 || last < base || base < segment_base || count <= 0
        || count > KFS_MAX_BATCH_RECORDS)
        goto declined;
    if (!v2_crc_holds(b, n))
        goto declined;
    const int append_time = (attributes & 0x08) != 0;
    const int64_t base_ts = (int64_t)kfs_load_be64(b + 27), max_ts = (int64_t)kfs_load_be64(b + 35);
    const uint8_t *section;
    Py_ssize_t section_len;
    const int got = v2_records_section(b, n, attributes, &scratch, &section, &section_len);
    if (got == RENDER_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (got != RENDER_OK)
        goto declined;
    records_walk w = records_walk_start(section, section_len, base, base_ts, append_time, max_ts, last);
    target_search search = {target, -1};
    if (walk_records(&w, count, note_target, &search) != RENDER_OK)
        goto declined;
    const Py_ssize_t found = search.found;
    if (found < 0) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    PyObject *log_append_time = NULL;
    if (append_time && (log_append_time = PyLong_FromLongLong((long long)max_ts)) == NULL)
        goto done;
    const char *why = NULL;
    result = kfs_decode_one_record(st, section, section_len, found, base, base_ts, timestamp_type, log_append_time,
                                   &why);
    Py_XDECREF(log_append_time);
    if (result == NULL && why != NULL) /* unreachable: the walk read this record as the decoder does */
        PyErr_Format(PyExc_SystemError, "v2_record_at: the record the walk read did not decode (%s)", why);
    goto done;
declined:
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(scratch.buf);
    PyBuffer_Release(&buf);
    return result;
}
