/* index_slot: Kafka's warm/cold binary search of a `.index` or `.timeindex` mapping, compiled. */

#include "../native.h"

/* kfs/storage/index.py SegmentIndex._largest_lower_bound_slot, slot for slot: the same entries are
 * read in the same order, so the pages a lookup touches are the ones AbstractIndex's warm section
 * promises (tests/test_storage_live_index_pages.py). In Python its sixteen-odd entry reads (a
 * struct unpack and a method call each) were a sixth of a `.value` lookup. */

#define WARM_SECTION_BYTES 8192 /* index.py WARM_SECTION_BYTES, Kafka's warmEntries() */

/* The searched key of a slot: base + relative offset (.index, 8-byte entries) or the timestamp
 * (.timeindex, 12-byte entries). */
static inline int64_t
slot_key(const uint8_t *m, Py_ssize_t slot, int entry_size, int64_t base_offset)
{
    const uint8_t *e = m + slot * entry_size;
    if (entry_size == 8)
        return base_offset + (int64_t)(int32_t)kfs_load_be32(e);
    return (int64_t)kfs_load_be64(e);
}

static Py_ssize_t
binary_search(const uint8_t *m, int entry_size, int64_t base_offset, int64_t target, Py_ssize_t lo, Py_ssize_t hi)
{
    while (lo < hi) {
        const Py_ssize_t mid = (lo + hi + 1) >> 1;
        const int64_t found = slot_key(m, mid, entry_size, base_offset);
        if (found > target)
            hi = mid - 1;
        else if (found < target)
            lo = mid;
        else
            return mid;
    }
    return lo;
}

KFS_DOC(kfs_index_slot_doc,
"index_slot(mapping, entries, entry_size, base_offset, target) -> int\n"
"\n"
"The last slot of the index whose key is <= target, or -1 (Kafka's indexSlotRangeFor(...,\n"
"LARGEST_LOWER_BOUND)), searching the warm last 8 KiB first as AbstractIndex does. entry_size 8: an\n"
"offset index (key = base_offset + the entry's relative offset); 12: a time index (the timestamp).\n"
"`entries` must fit in the mapping; the caller has checked the file is still that long.");

PyObject *
kfs_index_slot(PyObject *module, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t entries;
    int entry_size;
    long long base_offset, target;
    if (!PyArg_ParseTuple(args, "y*niLL:index_slot", &buf, &entries, &entry_size, &base_offset, &target))
        return NULL;
    if ((entry_size != 8 && entry_size != 12) || entries < 0 || entries > buf.len / entry_size
        || (entry_size == 8 && (base_offset > INT64_MAX - INT32_MAX || base_offset < INT64_MIN - INT32_MIN))) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "index_slot: entries or entry size do not fit the mapping");
        return NULL;
    }
    const uint8_t *m = (const uint8_t *)buf.buf;
    Py_ssize_t slot = -1;
    if (entries > 0) {
        const Py_ssize_t warm_entries = WARM_SECTION_BYTES / entry_size;
        const Py_ssize_t first_hot = entries - 1 - warm_entries > 0 ? entries - 1 - warm_entries : 0;
        if (slot_key(m, first_hot, entry_size, base_offset) < target)
            slot = binary_search(m, entry_size, base_offset, target, first_hot, entries - 1);
        else if (slot_key(m, 0, entry_size, base_offset) <= target)
            slot = binary_search(m, entry_size, base_offset, target, 0, first_hot);
    }
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(slot);
}
