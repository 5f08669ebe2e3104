/* find_v2_batch: a `.value` lookup's walk over one offset index interval, in one call. */

#include "batch_limits.h"

/* `offset/<N>.value` walks from the index entry at or below N to the next entry's batch
 * (kfs/storage/segment.py LogSegment.indexed_batch): a page or four of batches. In Python that walk
 * was a third of a lookup (header parses, offset checks, a CRC call and generator layers per batch),
 * and a lookup is most of what a fresh `.value` costs the daemon. This makes the same walk over the
 * bytes the segment read, and accepts an interval only when every check the Python walk makes holds
 * (the table in kfs/storage/segment.py, next to the Python walk); anything else is declined, and the
 * Python walk, which raises what is wrong or handles what is unusual, takes the interval: this never
 * decides an error itself. */

enum { FIND_DECLINED = -1 };

typedef struct {
    int64_t window_position, segment_base, limit, entry_offset, end, target;
} find_params;

/* 1 with the found batch's place in the window; 0 with *need set when the window is too short for
 * the walk (the bytes from the window's start it needs); FIND_DECLINED otherwise. */
static int
find_in_window(const uint8_t *w, int64_t n, const find_params *fp, int64_t *found_at, int64_t *found_size,
               int64_t *need)
{
    int64_t p = 0, previous = 0, found = -1, size_of_found = 0;
    int has_previous = 0;
    for (;;) {
        const int64_t position = fp->window_position + p;
        if (position + 12 > fp->limit)
            return FIND_DECLINED; /* the walk ends before the next entry's batch: never landed */
        if (position + 61 > fp->limit)
            return FIND_DECLINED; /* no whole v2 batch fits: the Python walk says what is there */
        if (p + 61 > n) {
            *need = p + 61;
            return 0;
        }
        const uint8_t *b = w + p;
        static const uint8_t zeros[12];
        if (memcmp(b, zeros, 12) == 0)
            return FIND_DECLINED; /* a preallocated tail or a hole: the Python walk tells which */
        if (position + 17 > fp->limit)
            return FIND_DECLINED;
        const int64_t size = v2_batch_size(b);
        if (size < 0)
            return FIND_DECLINED; /* damage, or a legacy batch: the Python walk's */
        if (position + size > KFS_MAX_SEGMENT_BYTES || position + size > fp->limit || size > KFS_MAX_BATCH_ON_DISK)
            return FIND_DECLINED;
        if (p + size > n) { /* the Python walk reads every batch of the interval whole */
            *need = p + size;
            return 0;
        }
        const int64_t base = (int64_t)kfs_load_be64(b);
        int64_t last;
        if (v2_last_offset(b, base, &last) < 0)
            return FIND_DECLINED;
        if (!v2_offsets_placed(base, last, fp->segment_base, has_previous, previous))
            return FIND_DECLINED; /* batch_walk.py _offsets_problem */
        if (p == 0 && (base > fp->entry_offset || !kfs_have_hw_crc32c() || !v2_crc_holds(b, size)))
            return FIND_DECLINED; /* the entry's batch must be whole, valid and not start past it */
        if (position > fp->end)
            return FIND_DECLINED; /* stepped over the next entry's position: not a batch start */
        if (found < 0 && last >= fp->target) {
            found = p;
            size_of_found = size;
        }
        if (position == fp->end) {
            if (found < 0)
                return FIND_DECLINED;
            *found_at = found;
            *found_size = size_of_found;
            return 1;
        }
        previous = last;
        has_previous = 1;
        p += size;
    }
}

KFS_DOC(kfs_find_v2_batch_doc,
"find_v2_batch(window, window_position, segment_base, limit, entry_offset, end, target)\n"
"    -> (at, size) | int | None\n"
"\n"
"The batch holding offset `target` in one offset index interval of a segment: `window` is the\n"
"segment's bytes from `window_position`, the position of the index entry (`entry_offset`) at or below\n"
"the target; `end` is the next entry's position, `limit` where the segment's complete batches end.\n"
"(at, size): the batch is window[at:at + size], every batch from the entry's to the one at `end` is\n"
"magic 2, whole, and in order, the entry's batch's CRC holds and it does not start past the entry.\n"
"An int: the window must be that long for the walk (read more, call again). None: declined (damage,\n"
"a legacy batch, a zero tail, no CRC-32C instruction): the Python walk takes the interval.");

PyObject *
kfs_find_v2_batch(PyObject *module, PyObject *args)
{
    Py_buffer buf;
    find_params fp;
    if (!PyArg_ParseTuple(args, "y*LLLLLL:find_v2_batch", &buf, &fp.window_position, &fp.segment_base, &fp.limit,
                          &fp.entry_offset, &fp.end, &fp.target))
        return NULL;
    int64_t at = 0, size = 0, need = 0;
    int rc = FIND_DECLINED;
    if (fp.window_position >= 0 && fp.limit <= KFS_MAX_SEGMENT_BYTES)
        rc = find_in_window((const uint8_t *)buf.buf, (int64_t)buf.len, &fp, &at, &size, &need);
    PyBuffer_Release(&buf);
    if (rc == 1)
        return Py_BuildValue("LL", (long long)at, (long long)size);
    if (rc == 0)
        return PyLong_FromLongLong((long long)need);
    Py_RETURN_NONE;
}
