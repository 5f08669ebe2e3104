/* walk_v2_headers: the tail walk's run of plain v2 batch headers, in one call. */

#include "batch_limits.h"

/* A segment's tail walk (kfs/storage/segment.py LogSegment._refresh_tail) reads every batch header past
 * the last offset index entry; where the index is missing or empty, that is every header of the segment:
 * ~25 us a header in Python on a slow core, which made a log dir copied without its indexes read 7.5x
 * slower than one with them. This takes the headers of the window the walk has read while each is a plain
 * v2 header whose every check of the Python walk holds (batch_walk.py `_walk` with headers only,
 * `_offsets_problem`: the same checks find_v2_batch makes, without the CRC, which the header walk does
 * not check), and stops at the first that is not, or at the end of the window's whole headers: the Python
 * walk then goes on from there, raising what is wrong or reading the next window. It decides no error.
 *
 * With `marks`, it also leaves the walk marks WalkMarks.passing would (kfs/storage/walk_marks.py): a
 * (largest timestamp before it, last offset, position) for the first batch at or past `next_at`, then
 * every `mark_bytes`. */

static int
put_int64(rawbuf *b, int64_t v)
{
    if (rb_reserve(b, sizeof v) < 0)
        return -1;
    memcpy(b->buf + b->len, &v, sizeof v);
    b->len += sizeof v;
    return 0;
}

static PyObject *
rawbuf_bytes(const rawbuf *b)
{
    return PyBytes_FromStringAndSize(b->len ? b->buf : NULL, (Py_ssize_t)b->len);
}

KFS_DOC(kfs_walk_v2_headers_doc,
"walk_v2_headers(window, at, position, limit, segment_base, previous_last, marks, next_at, largest_time,\n"
"                mark_bytes) -> None | (count, end, last_offset, max_timestamp, mark_times, mark_offsets,\n"
"                                      mark_positions, next_at, largest_time)\n"
"\n"
"The plain v2 batch headers of window[at:] (the segment bytes from `position`) before `limit`, walked as\n"
"the Python header walk would: the number taken, the position after them, the last one's last offset,\n"
"the largest max timestamp among them, and with `marks` the walk marks left (int64 arrays) and the\n"
"marks' state after. None when the first header is not one this takes (the Python walk's).");

PyObject *
kfs_walk_v2_headers(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer window;
    Py_ssize_t at;
    long long position, limit, segment_base, next_at, largest_time, mark_bytes;
    PyObject *previous_obj;
    int marks;
    if (!PyArg_ParseTuple(args, "y*nLLLOpLLL:walk_v2_headers", &window, &at, &position, &limit, &segment_base,
                          &previous_obj, &marks, &next_at, &largest_time, &mark_bytes))
        return NULL;
    PyObject *result = NULL;
    rawbuf times = {0}, offsets = {0}, positions = {0};
    int has_previous = previous_obj != Py_None;
    int64_t previous = 0;
    if (has_previous) {
        int overflow = 0;
        previous = PyLong_AsLongLongAndOverflow(previous_obj, &overflow);
        if (previous == -1 && PyErr_Occurred())
            goto out;
        if (overflow)
            goto declined; /* (a hostile last offset past int64: the Python walk's) */
    }
    if (at < 0 || at > window.len || mark_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "walk_v2_headers: `at` outside the window, or mark_bytes <= 0");
        goto out;
    }
    const uint8_t *w = window.buf;
    static const uint8_t zeros[12];
    Py_ssize_t p = at;
    int64_t count = 0, run_max = INT64_MIN;
    for (;;) {
        const int64_t here = position + (int64_t)(p - at);
        if (here + 61 > limit || p + 61 > window.len)
            break; /* no whole v2 header here: the Python walk reads on, or says what is there */
        const uint8_t *b = w + p;
        if (memcmp(b, zeros, 12) == 0)
            break; /* a preallocated tail or a hole: the Python walk tells which */
        const int64_t size = v2_batch_size(b);
        if (size < 0 || here + size > KFS_MAX_SEGMENT_BYTES || here + size > limit)
            break; /* damage, a legacy batch, a batch still being written: the Python walk's */
        const int64_t base = (int64_t)kfs_load_be64(b);
        int64_t last;
        if (v2_last_offset(b, base, &last) < 0 || !v2_offsets_placed(base, last, segment_base, has_previous, previous))
            break;
        if (size > PY_SSIZE_T_MAX - p)
            break;
        const int64_t max_timestamp = (int64_t)kfs_load_be64(b + 35);
        if (marks && here >= next_at) {
            if (put_int64(&times, largest_time) < 0 || put_int64(&offsets, last) < 0
                || put_int64(&positions, here) < 0) {
                PyErr_NoMemory();
                goto out;
            }
            next_at = here + mark_bytes;
        }
        if (max_timestamp > largest_time)
            largest_time = max_timestamp;
        if (max_timestamp > run_max)
            run_max = max_timestamp;
        previous = last;
        has_previous = 1;
        count++;
        p += (Py_ssize_t)size;
    }
    if (count == 0)
        goto declined;
    result = Py_BuildValue("(LLLLNNNLL)", (long long)count, (long long)(position + (int64_t)(p - at)),
                           (long long)previous, (long long)run_max,
                           rawbuf_bytes(&times), rawbuf_bytes(&offsets), rawbuf_bytes(&positions),
                           next_at, largest_time);
    goto out;
declined:
    result = Py_NewRef(Py_None);
out:
    PyBuffer_Release(&window);
    PyMem_RawFree(times.buf);
    PyMem_RawFree(offsets.buf);
    PyMem_RawFree(positions.buf);
    return result;
}
