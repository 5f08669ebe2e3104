/* kfs._native._speedups: the hot loops of kfs, compiled. One shared object, one C file per job, each
 * in the directory of the layer whose Python it speeds up (its twin and fallback); a layer's C uses
 * its own layer's and the layers' below, as its Python does (record <- storage <- views <- cli, fuse).
 * pyproject.toml lists the files; native.h is what they all share.
 *
 *   record/   the formats: decode_records.c (decode_v2_records, default_batch.decode_records' loop),
 *             records_walk.c/.h (a records section walked record by record, checked, no object),
 *             record_fields.h (varints), utf8.h, crc32c.c (crc32c: folded, or three lanes at a time),
 *             lz4_frame.c (Kafka's lz4 frames through the system's liblz4)
 *   storage/  the segment walks: walk_v2_headers.c (a tail walk's run of batch headers),
 *             find_v2_batch.c (a `.value` lookup's walk over one index interval),
 *             record_at.c (v2_record_at: the one record of a batch a `.value` wants), index_search.c
 *             (index_slot: Kafka's warm/cold binary search), batch_limits.h
 *   views/    the decoded views' lines: render_jsonl.c (Record objects -> JSON lines, jsonl.render_line
 *             for many), count_jsonl.c (their length, nothing rendered), render_v2_jsonl.c (a records
 *             section -> JSON lines without the GIL), render_kcat.c (kcat's -f / -J output),
 *             walk_v2_run.c (many plain batches of a segment in one call), json_text.c/.h (the JSON
 *             escaping every renderer shares), renderers.h
 *   cli/      render_v2_dump.c: the record lines of `kfs dump --deep-iteration --print-data-log`
 *   fuse/     gather.c (a read reply in malloc'd memory without the GIL), small_files.c (OPEN, READ
 *             and RELEASE of small rendered files, in libfuse's table), read_windows.c (READs of a
 *             decoded file answered from lines rendered ahead, no GIL)
 *   registry/ avro_json.c: Avro datums to JSON text by a program compiled from the schema
 *             (kfs/registry/avro_program.py), the Python path's answers without its objects;
 *             protobuf_json.c the same for Protobuf messages (json_out.h: the text both write)
 *   registry/ avro_arrow.c: Avro values into the Arrow buffers of Spark's typed column
 *   registry/ protobuf_arrow.c: Protobuf messages likewise (arrow_build.c: the buffers both fill)
 *   module.c  init(), the method table, the module
 *
 * The helpers small and hot enough to be inlined into those loops are static inline in the headers.
 *
 * The Python code stays the reference and the fallback (kfs/_native/__init__.py loads this module
 * when it was built): both must give the same records, the same bytes and the same errors, and
 * tests/test_speedups.py holds them to it.
 *
 * The input is hostile: a segment file can be truncated or corrupt anywhere. Every read is checked
 * against the end of the record it belongs to (itself checked against the end of the payload) before
 * it is made, and every error path releases what it holds.
 */

#include "record/crc32c.h"
#include "views/json_text.h"

#include <structmember.h> /* T_OBJECT_EX; PyMemberDescrObject comes with Python.h */

/* ---- the module's state (native.h) ----------------------------------------------------------- */

static const char *const slot_names[N_SLOTS] = {
    "offset", "timestamp", "timestamp_type", "key", "value", "headers",
};

static inline kfs_state *
get_state(PyObject *module)
{
    return (kfs_state *)PyModule_GetState(module);
}

kfs_state *
kfs_ready_state(PyObject *module)
{
    kfs_state *st = get_state(module);
    if (st->record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kfs._native._speedups.init() has not been called");
        return NULL;
    }
    return st;
}

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
    kfs_state *st = get_state(module);
    memcpy(st->slot_offsets, offsets, sizeof(offsets));
    Py_XSETREF(st->record_type, (PyTypeObject *)Py_NewRef(type));
    Py_XSETREF(st->corrupt_error, Py_NewRef(error));
    Py_RETURN_NONE;
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
    {"crc32c", kfs_crc32c, METH_VARARGS, kfs_crc32c_doc},
    {"find_v2_batch", kfs_find_v2_batch, METH_VARARGS, kfs_find_v2_batch_doc},
    {"walk_v2_headers", kfs_walk_v2_headers, METH_VARARGS, kfs_walk_v2_headers_doc},
    {"v2_record_at", kfs_v2_record_at, METH_VARARGS, kfs_v2_record_at_doc},
    {"index_slot", kfs_index_slot, METH_VARARGS, kfs_index_slot_doc},
    {"small_files_put", kfs_small_files_put, METH_VARARGS, kfs_small_files_put_doc},
    {"small_files_clear", kfs_small_files_clear, METH_NOARGS, kfs_small_files_clear_doc},
    {"small_files_install", kfs_small_files_install, METH_VARARGS, kfs_small_files_install_doc},
    {"read_windows_open", kfs_read_windows_open, METH_VARARGS, kfs_read_windows_open_doc},
    {"read_windows_publish", kfs_read_windows_publish, METH_VARARGS, kfs_read_windows_publish_doc},
    {"read_windows_note", kfs_read_windows_note, METH_VARARGS, kfs_read_windows_note_doc},
    {"read_windows_await", kfs_read_windows_await, METH_O, kfs_read_windows_await_doc},
    {"read_windows_stall", kfs_read_windows_stall, METH_VARARGS, kfs_read_windows_stall_doc},
    {"read_windows_close", kfs_read_windows_close, METH_O, kfs_read_windows_close_doc},
    {"read_windows_forget", kfs_read_windows_forget, METH_O, kfs_read_windows_forget_doc},
    {"read_windows_stats", kfs_read_windows_stats, METH_NOARGS, kfs_read_windows_stats_doc},
    {"walk_v2_run", (PyCFunction)(void (*)(void))kfs_walk_v2_run, METH_VARARGS | METH_KEYWORDS, kfs_walk_v2_run_doc},
    {"avro_program", kfs_avro_program, METH_O, kfs_avro_program_doc},
    {"render_avro", (PyCFunction)(void (*)(void))kfs_render_avro, METH_FASTCALL, kfs_render_avro_doc},
    {"avro_arrow_program", kfs_avro_arrow_program, METH_O, kfs_avro_arrow_program_doc},
    {"avro_arrow_decode", kfs_avro_arrow_decode, METH_VARARGS, kfs_avro_arrow_decode_doc},
    {"protobuf_program", kfs_protobuf_program, METH_O, kfs_protobuf_program_doc},
    {"render_protobuf", (PyCFunction)(void (*)(void))kfs_render_protobuf, METH_FASTCALL, kfs_render_protobuf_doc},
    {"protobuf_arrow_program", kfs_protobuf_arrow_program, METH_O, kfs_protobuf_arrow_program_doc},
    {"protobuf_arrow_decode", kfs_protobuf_arrow_decode, METH_VARARGS, kfs_protobuf_arrow_decode_doc},
    {"avro_text_column", kfs_avro_text_column, METH_VARARGS, kfs_avro_text_column_doc},
    {"arrow_builder", kfs_arrow_builder, METH_VARARGS, kfs_arrow_builder_doc},
    {"arrow_append_v2", kfs_arrow_append_v2, METH_VARARGS, kfs_arrow_append_v2_doc},
    {"arrow_append_run", kfs_arrow_append_run, METH_VARARGS, kfs_arrow_append_run_doc},
    {"arrow_append_records", kfs_arrow_append_records, METH_VARARGS, kfs_arrow_append_records_doc},
    {"arrow_take", kfs_arrow_take, METH_O, kfs_arrow_take_doc},
    {"arrow_payload_bytes", kfs_arrow_payload_bytes, METH_O, kfs_arrow_payload_bytes_doc},
    {"offsets_text_columns", kfs_offsets_text_columns, METH_VARARGS, kfs_offsets_text_columns_doc},
    {"offsets_typed_columns", kfs_offsets_typed_columns, METH_VARARGS, kfs_offsets_typed_columns_doc},
    {NULL, NULL, 0, NULL},
};

static int
speedups_exec(PyObject *module)
{
    /* Process-wide C tables, the same for every module object (no Python object in them): built once. */
    kfs_init_json_tables();
    kfs_init_crc32c();
    return 0;
}

static int
speedups_traverse(PyObject *module, visitproc visit, void *arg)
{
    kfs_state *st = get_state(module);
    Py_VISIT(st->record_type);
    Py_VISIT(st->corrupt_error);
    return 0;
}

static int
speedups_clear(PyObject *module)
{
    kfs_state *st = get_state(module);
    Py_CLEAR(st->record_type);
    Py_CLEAR(st->corrupt_error);
    return 0;
}

static void
speedups_free(void *module)
{
    (void)speedups_clear((PyObject *)module);
}

static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, speedups_exec},
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kfs._native._speedups",
    .m_doc = "The hot loops of kfs, compiled (see kfs/_native/__init__.py).",
    .m_size = sizeof(kfs_state),
    .m_methods = speedups_methods,
    .m_slots = speedups_slots,
    .m_traverse = speedups_traverse,
    .m_clear = speedups_clear,
    .m_free = speedups_free,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
