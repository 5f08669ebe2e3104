/* kfs.record._speedups: the hot loops of kfs, compiled. One C file per job, linked into this one
 * module (pyproject.toml lists them; speedups.h is what they share):
 *
 *   decode_records.c   decode_v2_records: the records section of a magic v2 batch -> Record objects;
 *                      the twin of the loop in kfs/record/default_batch.py:decode_records;
 *                      v2_record_at: the one record of a batch a `.value` wants
 *   render_jsonl.c     render_jsonl: Record objects -> JSON lines; the twin of
 *                      kfs/views/jsonl.py:render_line, for many records at once
 *   count_jsonl.c      count_jsonl: the length of a records section's JSON lines, without rendering them
 *   render_v2_jsonl.c  render_v2_jsonl: a records section -> JSON lines, fused: no Record is created,
 *                      and the loop runs without the GIL (two readers decode on two cores)
 *   walk_v2_run.c      walk_v2_run: many plain batches of a segment in one call, without the GIL
 *                      (their CRCs in crc32c.c, their lz4 frames in lz4_frame.c)
 *   render_kcat.c      a records section -> kcat's -f output (`kfs cat -f`), for walk_v2_run
 *   render_v2_dump.c   render_v2_dump: the record lines of `kfs dump --deep-iteration --print-data-log`
 *   gather.c           gather: a read reply copied into malloc'd memory without the GIL
 *   find_v2_batch.c    find_v2_batch: a `.value` lookup's walk over one index interval, in one call
 *   index_search.c     index_slot: Kafka's warm/cold binary search of an index mapping
 *   small_files.c      small_files_*: OPEN, READ and RELEASE of small rendered files, in libfuse's table
 *   crc32c.c           crc32c: a batch's CRC-32C, three lanes at a time (what walk_v2_run checks)
 *   json_text.c        the JSON escaping all the renderers share (json_text.h)
 *   records_walk.c     one record of a records section, checked (records_walk.h)
 *   module.c           init(), the method table, the module
 *
 * The helpers small and hot enough to be inlined into those loops are static inline in the headers:
 * record_fields.h (varints), json_text.h (per-byte escaping and UTF-8 checks), records_walk.h (a
 * records section, record by record).
 *
 * The Python code stays the reference and the fallback (kfs/record/speedups.py loads this module
 * when it was built): both must give the same records, the same bytes and the same errors, and
 * tests/test_speedups.py holds them to it.
 *
 * The input is hostile: a segment file can be truncated or corrupt anywhere. Every read is checked
 * against the end of the record it belongs to (itself checked against the end of the payload) before
 * it is made, and every error path releases what it holds.
 */

#include "json_text.h"

#include <structmember.h> /* T_OBJECT_EX; PyMemberDescrObject comes with Python.h */

/* ---- state set by init() (speedups.h) -------------------------------------------------------- */

PyTypeObject *kfs_record_type = NULL;
PyObject *kfs_corrupt_error = NULL;
Py_ssize_t kfs_slot_offsets[N_SLOTS];

static const char *const slot_names[N_SLOTS] = {
    "offset", "timestamp", "timestamp_type", "key", "value", "headers",
};

static PyObject *
speedups_init(PyObject *module, PyObject *args)
{
    PyTypeObject *type;
    PyObject *error;
    Py_ssize_t offsets[N_SLOTS];

    if (!PyArg_ParseTuple(args, "O!O:init", &PyType_Type, &type, &error))
        return NULL;
    if (!PyType_Check(error) || !PyType_IsSubtype((PyTypeObject *)error, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "init: the second argument must be an exception class");
        return NULL;
    }
    if (type->tp_itemsize != 0 || type->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "init: the record type must be a fixed-size class");
        return NULL;
    }
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)type, slot_names[i]);
        if (descr == NULL)
            return NULL;
        int is_member = Py_IS_TYPE(descr, &PyMemberDescr_Type);
        PyMemberDef *member = is_member ? ((PyMemberDescrObject *)descr)->d_member : NULL;
        Py_DECREF(descr); /* the class keeps it, and the PyMemberDef with it */
        if (!is_member) {
            PyErr_Format(PyExc_TypeError, "init: %s has no __slots__ member %s", type->tp_name, slot_names[i]);
            return NULL;
        }
        if (member->type != T_OBJECT_EX || member->offset <= 0 ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "init: %s.%s is not an object slot", type->tp_name, slot_names[i]);
            return NULL;
        }
        offsets[i] = member->offset;
    }
    memcpy(kfs_slot_offsets, offsets, sizeof(offsets));
    Py_INCREF(type);
    Py_XSETREF(kfs_record_type, type);
    Py_INCREF(error);
    Py_XSETREF(kfs_corrupt_error, error);
    Py_RETURN_NONE;
}

int
kfs_check_init(void)
{
    if (kfs_record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kfs.record._speedups.init() has not been called");
        return -1;
    }
    return 0;
}

/* ---- the module ------------------------------------------------------------------------------ */

static PyMethodDef speedups_methods[] = {
    {"init", speedups_init, METH_VARARGS,
     "init(record_type, corrupt_batch_error): the Record class to create and read, the error to raise."},
    {"decode_v2_records", (PyCFunction)(void (*)(void))kfs_decode_v2_records, METH_VARARGS | METH_KEYWORDS,
     kfs_decode_v2_records_doc},
    {"render_jsonl", (PyCFunction)(void (*)(void))kfs_render_jsonl, METH_VARARGS | METH_KEYWORDS, kfs_render_jsonl_doc},
    {"count_jsonl", (PyCFunction)(void (*)(void))kfs_count_jsonl, METH_VARARGS | METH_KEYWORDS, kfs_count_jsonl_doc},
    {"render_v2_jsonl", (PyCFunction)(void (*)(void))kfs_render_v2_jsonl, METH_VARARGS | METH_KEYWORDS,
     kfs_render_v2_jsonl_doc},
    {"render_v2_dump", (PyCFunction)(void (*)(void))kfs_render_v2_dump, METH_VARARGS | METH_KEYWORDS,
     kfs_render_v2_dump_doc},
    {"gather", kfs_gather, METH_O, kfs_gather_doc},
    {"crc32c", kfs_crc32c, METH_O, kfs_crc32c_doc},
    {"find_v2_batch", kfs_find_v2_batch, METH_VARARGS, kfs_find_v2_batch_doc},
    {"v2_record_at", kfs_v2_record_at, METH_VARARGS, kfs_v2_record_at_doc},
    {"index_slot", kfs_index_slot, METH_VARARGS, kfs_index_slot_doc},
    {"small_files_put", kfs_small_files_put, METH_VARARGS, kfs_small_files_put_doc},
    {"small_files_clear", kfs_small_files_clear, METH_NOARGS, kfs_small_files_clear_doc},
    {"small_files_install", kfs_small_files_install, METH_VARARGS, kfs_small_files_install_doc},
    {"walk_v2_run", (PyCFunction)(void (*)(void))kfs_walk_v2_run, METH_VARARGS | METH_KEYWORDS, kfs_walk_v2_run_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "kfs.record._speedups",
    "The v2 record decoder and the JSON-lines renderer of kfs, compiled (see kfs/record/speedups.py).",
    -1,
    speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    kfs_init_json_tables();
    kfs_init_crc32c();
    return PyModule_Create(&speedups_module);
}
