/* walk_v2_run: many plain batches of a segment in one call, without the GIL. */

#include "../storage/batch_limits.h"
#include "renderers.h"

/* The decoded views' hot path walked a segment a batch at a time in Python (header parse, offset
 * checks, CRC call, generator layers: ~6 us a batch, more than rendering a 20-record batch). This
 * walks a window of a segment file itself, taking batch after batch while each is *plain*: complete
 * in the window, magic 2, uncompressed or lz4, not a control batch (nor transactional under
 * read_committed), its offsets where the segment walk wants them, its CRC valid, and its records
 * rendered (or counted) by kfs_render_records (kfs_count_records). At the first batch that is anything
 * else it stops and hands that batch back to the Python walk, which raises what is wrong with it
 * or renders what is unusual: it never decides an error itself, so the Python path stays the
 * oracle for every batch it declines. kfs/views/plain_runs.py holds the list of what the Python
 * walk checks (kfs/storage/batch_walk.py _walk, partition_reads.py _placed_batches, record_stream.py
 * selected_batches, kfs/views/batch_lines.py fused_lines) next to the checks made here. */

/* A lines walk stops once its budget is rendered, after the batch it is in: the bytes returned is
 * made that big and a batch's lines more; a larger batch moves the lines to raw memory (one copy). */
#define FILLED_SLACK ((Py_ssize_t)64 << 10)
#define MAX_FILLED_BUDGET ((Py_ssize_t)16 << 20)

typedef struct {
    int64_t segment_base, max_last, first, stop;
    int64_t previous_last;
    int has_previous, read_committed, count_only;
    size_t budget;
    const char *prefix;
    size_t prefix_len;
    const kcat_format *kcat; /* kcat's -f output instead of JSON lines (render_kcat.c), or NULL */
    int commits;             /* `__consumer_offsets`' lines: offset commits in C, any other record declines */
    avro_lines *avro;        /* registry-framed Avro values' lines (render_jsonl's `avro`), or NULL */
} run_params;

typedef struct {
    Py_ssize_t used;      /* bytes of the window taken (whole batches) */
    int64_t first_base;   /* the first taken batch's base offset */
    int64_t last;         /* the last taken batch's last offset */
    int64_t records;      /* records rendered or counted */
    int64_t batches;      /* batches taken */
} run_result;

/* A batch taken whole (rendered, counted, or passed over before the view): the run ends after it. */
static inline void
take_batch(run_result *res, int64_t base, int64_t last, Py_ssize_t end)
{
    if (res->batches == 0)
        res->first_base = base;
    res->last = last;
    res->batches++;
    res->used = end;
}

/* A batch's lines by a decoder's renderer (`commits` or `avro`): rendered into out, their marks into marks. */
static int
render_decoded(const run_params *rp, const v2_plain_batch *pb, int64_t base, int64_t last, rawbuf *out,
               rawbuf *marks)
{
    const char *tt = pb->append_time ? "LogAppendTime" : "CreateTime";
    if (rp->avro != NULL)
        return kfs_render_avro_records(pb->section, pb->section_len, pb->count, base, pb->base_ts, pb->append_time,
                                       pb->max_ts, rp->prefix, rp->prefix_len, tt, strlen(tt), rp->avro, rp->first,
                                       rp->stop, last, out, marks);
    return kfs_render_commit_records(pb->section, pb->section_len, pb->count, base, pb->base_ts, pb->append_time,
                                     pb->max_ts, rp->prefix, rp->prefix_len, tt, strlen(tt), rp->first, rp->stop,
                                     last, out, marks);
}

/* `commit_marks`: counting a decoder's lines (`commits`, `avro`), the rendered lines' marks (`out` holds
 * the lines), per batch. */
static int
walk_run(const uint8_t *w, Py_ssize_t n, const run_params *rp, rawbuf *out, rawbuf *marks, rawbuf *scratch,
         rawbuf *commit_marks, run_result *res)
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
        if (next == V2_RUN_PASS) { /* before the view: passed over unread, as selected_batches does */
            previous = last;
            has_previous = 1;
            p += (Py_ssize_t)size;
            take_batch(res, base, last, p);
            continue;
        }
        const int32_t count = pb.count;
        const int append_time = pb.append_time;
        const int64_t base_ts = pb.base_ts, max_ts = pb.max_ts;
        const uint8_t *section = pb.section;
        const Py_ssize_t section_len = pb.section_len;
        if (rp->count_only) {
            const int64_t fixed_len = jsonl_fixed_len(rp->prefix_len, append_time ? 13 : 10);
            line_count lc = {0, 0, -1};
            if (rp->commits || rp->avro != NULL) { /* (a decoder's lines have no fixed part: rendered, measured) */
                out->len = 0;
                commit_marks->len = 0;
                const int rc = render_decoded(rp, &pb, base, last, out, commit_marks);
                if (rc == RENDER_NO_MEMORY)
                    return RENDER_NO_MEMORY;
                if (rc != RENDER_OK)
                    break;
                lc.records = (int64_t)(commit_marks->len / (2 * sizeof(int64_t)));
                lc.bytes = (int64_t)out->len;
                if (lc.records)
                    memcpy(&lc.first, commit_marks->buf, sizeof(int64_t));
            }
            else if (kfs_count_records(section, section_len, count, base, base_ts, append_time, max_ts, fixed_len,
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
            int rc = rp->kcat != NULL
                ? kfs_render_kcat_records(section, section_len, count, base, base_ts, append_time, max_ts, rp->kcat,
                                          rp->first, rp->stop, last, out, marks)
                : rp->commits || rp->avro != NULL
                ? render_decoded(rp, &pb, base, last, out, marks)
                : kfs_render_records(section, section_len, count, base, base_ts, append_time, max_ts, rp->prefix,
                                     rp->prefix_len, tt, strlen(tt), rp->first, rp->stop, last, out, marks);
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
        p += (Py_ssize_t)size;
        take_batch(res, base, last, p);
        if (!rp->count_only && out->len >= rp->budget)
            break;
    }
    return RENDER_OK;
}

KFS_DOC(kfs_walk_v2_run_doc,
"walk_v2_run(window, segment_base, previous_last, max_last, first_offset, end_offset, prefix,\n"
"            read_committed, count_only, budget, kcat=None, null=b'', commits=False, avro=None,\n"
"            protobuf=None) -> (used, first_base, last, records, marks, data) | None\n"
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
"takes the first), or when this machine has no CRC-32C instruction. Runs without the GIL.\n"
"`kcat`: a program of KcatFormat (kfs/views/kcat_format.py): the records as kcat -f prints them\n"
"instead of JSON lines (a null key or value as `null`); marks as for lines. `commits`: the lines of\n"
"`__consumer_offsets` as render_jsonl's commits renders them, the batches of offset commits only (any\n"
"other record leaves its batch to the Python walk), rendered or counted; not with kcat (None). `avro`:\n"
"render_jsonl's `avro` table (kfs.registry.lines.FramedLines.avro_table): the lines of records whose\n"
"values are framed by its schema ids, rendered or counted (any other record leaves its batch to the\n"
"Python walk); not with kcat or commits (None). `protobuf`: FramedLines' Protobuf table likewise (a\n"
"value of its schema's first message). Without the GIL unless a program renders a float.");

PyObject *
kfs_walk_v2_run(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"window", "segment_base", "previous_last", "max_last", "first_offset", "end_offset",
                             "prefix", "read_committed", "count_only", "budget", "kcat", "null", "commits", "avro",
                             "protobuf", NULL};
    Py_buffer buf, program, null;
    memset(&program, 0, sizeof(program));
    memset(&null, 0, sizeof(null));
    long long segment_base, max_last, first, stop;
    PyObject *previous_obj, *prefix, *avro_table = Py_None, *protobuf_table = Py_None;
    int read_committed, count_only, commits = 0;
    Py_ssize_t budget;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*LOLLLUppn|z*y*pOO:walk_v2_run", kwlist, &buf,
                                     &segment_base, &previous_obj, &max_last, &first, &stop, &prefix, &read_committed,
                                     &count_only, &budget, &program, &null, &commits, &avro_table, &protobuf_table))
        return NULL;
    PyObject *result = NULL, *lines = NULL;
    rawbuf out = {NULL, 0, 0, 0}, marks = {NULL, 0, 0, 0}, scratch = {NULL, 0, 0, 0};
    rawbuf commit_marks = {NULL, 0, 0, 0};
    kcat_part *parts = NULL;
    kcat_format kcat = {NULL, 0, "", 0};
    run_params rp = {segment_base, max_last, first, stop, 0, previous_obj != Py_None, read_committed, count_only,
                     budget > 0 ? (size_t)budget : 0, NULL, 0, NULL, commits, NULL};
    PyObject *avro_items[2] = {NULL, NULL}; /* (the tables' items, held: their programs and tails live through the walk) */
    avro_entry *avro_entries = NULL;
    avro_lines avro = {NULL, 0, 0, {NULL, 0, 0, 0, 0}};
    int needs_gil = 0;
    const int registry = avro_table != Py_None || protobuf_table != Py_None;
    if ((commits || registry) + (program.buf != NULL) > 1 || (commits && registry)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (registry) {
        PyObject *tables[2] = {avro_table, protobuf_table};
        Py_ssize_t n_items = 0;
        for (int t = 0; t < 2; t++) {
            if (tables[t] == Py_None)
                continue;
            if (!PyDict_Check(tables[t])) {
                PyErr_SetString(PyExc_TypeError, "walk_v2_run: avro and protobuf must be dicts or None");
                goto done;
            }
            if ((avro_items[t] = PyDict_Items(tables[t])) == NULL)
                goto done;
            n_items += PyList_GET_SIZE(avro_items[t]);
        }
        if (n_items > INT_MAX / 2 || (avro_entries = PyMem_Calloc((size_t)n_items + 1, sizeof(avro_entry))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (int t = 0; t < 2; t++) {
            for (Py_ssize_t i = 0; avro_items[t] != NULL && i < PyList_GET_SIZE(avro_items[t]); i++) {
                /* (False and anything else: that id's records decline) */
                PyObject *id = PyTuple_GET_ITEM(PyList_GET_ITEM(avro_items[t], i), 0);
                PyObject *entry = PyTuple_GET_ITEM(PyList_GET_ITEM(avro_items[t], i), 1);
                if (!PyBytes_Check(id) || PyBytes_GET_SIZE(id) != 4 || !PyTuple_CheckExact(entry) ||
                    PyTuple_GET_SIZE(entry) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(entry, 1)))
                    continue;
                avro_entry *e = &avro_entries[avro.n];
                int floats = 0;
                Py_ssize_t tail_len;
                e->protobuf = t == 1;
                e->program = t == 1 ? kfs_protobuf_program_of(PyTuple_GET_ITEM(entry, 0), &floats)
                                    : kfs_avro_program_of(PyTuple_GET_ITEM(entry, 0), &floats);
                e->tail = e->program != NULL ? PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(entry, 1), &tail_len) : NULL;
                if (e->tail == NULL) {
                    PyErr_Clear();
                    continue;
                }
                memcpy(e->id, PyBytes_AS_STRING(id), 4);
                e->tail_len = (size_t)tail_len;
                needs_gil |= floats;
                avro.n++;
            }
        }
        avro.entries = avro_entries;
        rp.avro = &avro;
    }
    if (program.buf != NULL) {
        parts = PyMem_Malloc(KCAT_MAX_PARTS * sizeof(kcat_part));
        if (parts == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        kcat.n_parts = kfs_kcat_parse(program.buf, program.len, parts, KCAT_MAX_PARTS);
        if (kcat.n_parts < 0) { /* (a format of more parts than that: the Python renderer's) */
            result = Py_NewRef(Py_None);
            goto done;
        }
        kcat.parts = parts;
        if (null.buf != NULL) {
            kcat.null = null.buf;
            kcat.null_len = (size_t)null.len;
        }
        rp.kcat = &kcat;
    }
    if (rp.has_previous) {
        rp.previous_last = PyLong_AsLongLong(previous_obj);
        if (rp.previous_last == -1 && PyErr_Occurred())
            goto done;
    }
    Py_ssize_t prefix_len;
    rp.prefix = kfs_utf8_or_decline(prefix, &prefix_len); /* (not encodable: the Python path raises for it) */
    if (rp.prefix == NULL) {
        result = PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    rp.prefix_len = (size_t)prefix_len;
    kfs_load_lz4();
    if (!kfs_have_hw_crc32c() || kfs_ready_state(module) == NULL) {
        if (!PyErr_Occurred())
            result = Py_NewRef(Py_None);
        goto done;
    }
    if (!count_only && budget > 0 && budget <= MAX_FILLED_BUDGET) {
        /* The lines go straight into the bytes returned: copying them into one after the walk
         * held the GIL for a memcpy of every byte rendered, which two readers took turns at. */
        lines = PyBytes_FromStringAndSize(NULL, budget + FILLED_SLACK);
        if (lines == NULL)
            goto done;
        out = (rawbuf){PyBytes_AS_STRING(lines), 0, (size_t)(budget + FILLED_SLACK), 1};
    }
    run_result res = {0, 0, 0, 0, 0};
    int rc;
    if (needs_gil) /* (a float's text is Python's own: PyOS_double_to_string) */
        rc = walk_run((const uint8_t *)buf.buf, buf.len, &rp, &out, &marks, &scratch, &commit_marks, &res);
    else {
        Py_BEGIN_ALLOW_THREADS
        rc = walk_run((const uint8_t *)buf.buf, buf.len, &rp, &out, &marks, &scratch, &commit_marks, &res);
        Py_END_ALLOW_THREADS
    }
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
    if (packed != NULL && count_only)
        data = Py_NewRef(Py_None);
    else if (packed != NULL && out.borrowed && out.len >= out.cap / 2) { /* cut `lines` to what was written */
        out.buf = NULL;
        out.borrowed = 0;
        if (_PyBytes_Resize(&lines, (Py_ssize_t)out.len) == 0) {
            data = lines;
            lines = NULL;
        }
    }
    else if (packed != NULL && out.borrowed) {
        /* A short run (the end of a growing segment, a `tail -f`): copied into a bytes of its own
         * size, as a grown buffer is. Cut in place, a few KiB kept (a cursor keeps its last chunks)
         * would pin the block they were cut from, and the heap grew with the holes between them
         * (the live-writer soak's daemon: 60 MB -> 175 MB in 3.5 minutes). */
        data = PyBytes_FromStringAndSize(out.buf, (Py_ssize_t)out.len);
    }
    else if (packed != NULL)
        data = PyBytes_FromStringAndSize(out.buf ? out.buf : "", (Py_ssize_t)out.len);
    if (data != NULL)
        result = Py_BuildValue("nLLLOO", res.used, (long long)res.first_base, (long long)res.last,
                               (long long)res.records, packed, data);
    Py_XDECREF(packed);
    Py_XDECREF(data);
done:
    if (!out.borrowed)
        PyMem_RawFree(out.buf);
    Py_XDECREF(lines);
    PyMem_RawFree(marks.buf);
    PyMem_RawFree(scratch.buf);
    PyMem_RawFree(commit_marks.buf);
    PyMem_Free(parts);
    PyMem_RawFree(avro.text.buf);
    PyMem_Free(avro_entries);
    Py_XDECREF(avro_items[0]);
    Py_XDECREF(avro_items[1]);
    if (program.buf != NULL)
        PyBuffer_Release(&program);
    if (null.buf != NULL)
        PyBuffer_Release(&null);
    PyBuffer_Release(&buf);
    return result;
}
