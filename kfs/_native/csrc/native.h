/* What the parts of kfs._native._speedups share: the state init() sets, the output buffer of the loops
 * that run without the GIL, and the functions the module exports. The parts are one C file per job in
 * kfs/_native/csrc/<layer>/ (module.c lists them), linked into the one extension module; names shared
 * between files start with kfs_ and are hidden, so that the module exports PyInit__speedups alone. Small
 * hot helpers shared between files are static inline in the layers' headers. */

#ifndef KFS_NATIVE_H
#define KFS_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KFS_HIDDEN __attribute__((visibility("hidden")))

/* ---- the module's state (module.c) --------------------------------------------------------- */

/* Record's six slots, in the order of Record.__slots__. */
enum { SLOT_OFFSET, SLOT_TIMESTAMP, SLOT_TIMESTAMP_TYPE, SLOT_KEY, SLOT_VALUE, SLOT_HEADERS, N_SLOTS };

/* Per module object (PEP 489 multi-phase initialization, as CPython's own modules keep theirs): no
 * Python object lives in a C global. init() fills it with kfs.record.types.Record and
 * CorruptBatchError (handed in by kfs/_native/__init__.py, which cannot be imported from here without
 * a cycle) and where each of Record's slots lives in the object, read from the member descriptors so
 * that the C code fills and reads them as the Python descriptors would. The process-wide C tables (JSON
 * escapes, CRC lanes, liblz4's entry point, libfuse's table: small_files.c) hold no Python object. */
typedef struct {
    PyTypeObject *record_type; /* NULL until init() */
    PyObject *corrupt_error;
    Py_ssize_t slot_offsets[N_SLOTS];
} kfs_state;

#define SLOT(st, obj, i) (*(PyObject **)((char *)(obj) + (st)->slot_offsets[i]))

/* The state of `module` once init() has filled it, or NULL with RuntimeError set. */
KFS_HIDDEN kfs_state *kfs_ready_state(PyObject *module);

/* ---- the output of the loops that run without the GIL ---------------------------------------- */

/* No Python object is touched between Py_BEGIN_ALLOW_THREADS and Py_END_ALLOW_THREADS: memory
 * comes from PyMem_RawRealloc, which needs no GIL. A buffer may start as the storage of a bytes
 * object made with the GIL beforehand (`borrowed`), so the lines need no copy into one after: the
 * bytes is only written, never resized, without the GIL; growing past it moves to raw memory. */

typedef struct {
    char *buf;
    size_t len;
    size_t cap;
    int borrowed; /* buf is a bytes object's storage: not ours to realloc or free */
} rawbuf;

enum { RENDER_OK = 0, RENDER_UNUSUAL = -1, RENDER_NO_MEMORY = -2 };

/* What a call answers when its renderer did not render (rc RENDER_UNUSUAL or RENDER_NO_MEMORY): None,
 * the Python path's turn, or NULL with MemoryError set. */
static inline PyObject *
kfs_declined(int rc)
{
    return rc == RENDER_NO_MEMORY ? PyErr_NoMemory() : Py_NewRef(Py_None);
}

/* The UTF-8 of str s (its length in *len), or NULL: with an exception set, or with none when s cannot be
 * encoded (a lone surrogate), where the Python path's .encode("utf-8") raises on its own path: the call
 * then answers None (`PyErr_Occurred() ? NULL : None`). */
static inline const char *
kfs_utf8_or_decline(PyObject *s, Py_ssize_t *len)
{
    const char *u = PyUnicode_AsUTF8AndSize(s, len);
    if (u == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        PyErr_Clear();
    return u;
}

/* Room for `need` more bytes; -1 when memory runs out (the caller raises MemoryError with the GIL). */
static inline int
rb_reserve(rawbuf *o, size_t need)
{
    if (o->cap - o->len >= need)
        return 0;
    if (need > ((size_t)PY_SSIZE_T_MAX >> 1) - o->len)
        return -1;
    size_t cap = o->cap ? o->cap : (size_t)1 << 16;
    while (cap - o->len < need)
        cap *= 2;
    char *b = PyMem_RawRealloc(o->borrowed ? NULL : o->buf, cap);
    if (b == NULL)
        return -1;
    if (o->borrowed && o->len)
        memcpy(b, o->buf, o->len);
    o->borrowed = 0;
    o->buf = b;
    o->cap = cap;
    return 0;
}

/* Two int64s appended (a record's offset and where its line ends, a gap's two offsets); -1 when memory
 * runs out. */
static inline int
rb_put_pair(rawbuf *o, int64_t a, int64_t b)
{
    if (rb_reserve(o, 2 * sizeof(int64_t)) < 0)
        return -1;
    const int64_t pair[2] = {a, b};
    memcpy(o->buf + o->len, pair, sizeof(pair));
    o->len += sizeof(pair);
    return 0;
}

/* Kafka's big-endian fields. */
static inline uint64_t
kfs_load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline uint32_t
kfs_load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint32_t
kfs_load_be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

/* str(int) of an int64 at d (room for 20); returns the end. */
static inline char *
write_int64(char *d, int64_t v)
{
    char tmp[20];
    int i = 20;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    memcpy(d, tmp + i, (size_t)(20 - i));
    return d + (20 - i);
}

/* ---- the functions the module exports (module.c's method table names them) ------------------- */

#define KFS_DOC(name, text) const char name[] = PyDoc_STR(text)

/* decode_records.c */
KFS_HIDDEN extern const char kfs_decode_v2_records_doc[];
KFS_HIDDEN PyObject *kfs_decode_v2_records(PyObject *module, PyObject *args, PyObject *kwargs);
/* render_jsonl.c */
KFS_HIDDEN extern const char kfs_render_jsonl_doc[];
KFS_HIDDEN PyObject *kfs_render_jsonl(PyObject *module, PyObject *args, PyObject *kwargs);
/* count_jsonl.c */
KFS_HIDDEN extern const char kfs_count_jsonl_doc[];
KFS_HIDDEN PyObject *kfs_count_jsonl(PyObject *module, PyObject *args, PyObject *kwargs);
/* render_v2_jsonl.c */
KFS_HIDDEN extern const char kfs_render_v2_jsonl_doc[];
KFS_HIDDEN PyObject *kfs_render_v2_jsonl(PyObject *module, PyObject *args, PyObject *kwargs);
/* walk_v2_run.c */
KFS_HIDDEN extern const char kfs_walk_v2_run_doc[];
KFS_HIDDEN PyObject *kfs_walk_v2_run(PyObject *module, PyObject *args, PyObject *kwargs);
/* render_v2_dump.c */
KFS_HIDDEN extern const char kfs_render_v2_dump_doc[];
KFS_HIDDEN PyObject *kfs_render_v2_dump(PyObject *module, PyObject *args, PyObject *kwargs);
/* gather.c */
KFS_HIDDEN extern const char kfs_gather_doc[];
KFS_HIDDEN PyObject *kfs_gather(PyObject *module, PyObject *arg);
/* decode_records.c */
KFS_HIDDEN extern const char kfs_v2_record_at_doc[];
KFS_HIDDEN PyObject *kfs_v2_record_at(PyObject *module, PyObject *args);
/* small_files.c */
KFS_HIDDEN extern const char kfs_small_files_put_doc[];
KFS_HIDDEN PyObject *kfs_small_files_put(PyObject *module, PyObject *args);
KFS_HIDDEN extern const char kfs_small_files_clear_doc[];
KFS_HIDDEN PyObject *kfs_small_files_clear(PyObject *module, PyObject *unused);
KFS_HIDDEN extern const char kfs_small_files_install_doc[];
KFS_HIDDEN PyObject *kfs_small_files_install(PyObject *module, PyObject *args);
/* read_windows.c */
KFS_HIDDEN int kfs_read_windows_serve(uint64_t fh, size_t size, int64_t off, char **mem);
KFS_HIDDEN extern const char kfs_read_windows_open_doc[], kfs_read_windows_publish_doc[], kfs_read_windows_note_doc[],
    kfs_read_windows_await_doc[], kfs_read_windows_stall_doc[], kfs_read_windows_close_doc[],
    kfs_read_windows_stats_doc[], kfs_read_windows_forget_doc[];
KFS_HIDDEN PyObject *kfs_read_windows_open(PyObject *module, PyObject *args);
KFS_HIDDEN PyObject *kfs_read_windows_publish(PyObject *module, PyObject *args);
KFS_HIDDEN PyObject *kfs_read_windows_note(PyObject *module, PyObject *args);
KFS_HIDDEN PyObject *kfs_read_windows_await(PyObject *module, PyObject *arg);
KFS_HIDDEN PyObject *kfs_read_windows_stall(PyObject *module, PyObject *args);
KFS_HIDDEN PyObject *kfs_read_windows_close(PyObject *module, PyObject *arg);
KFS_HIDDEN PyObject *kfs_read_windows_forget(PyObject *module, PyObject *arg);
KFS_HIDDEN PyObject *kfs_read_windows_stats(PyObject *module, PyObject *unused);
/* index_search.c */
KFS_HIDDEN extern const char kfs_index_slot_doc[];
KFS_HIDDEN PyObject *kfs_index_slot(PyObject *module, PyObject *args);
/* walk_v2_headers.c */
KFS_HIDDEN extern const char kfs_walk_v2_headers_doc[];
KFS_HIDDEN PyObject *kfs_walk_v2_headers(PyObject *module, PyObject *args);
/* find_v2_batch.c */
KFS_HIDDEN extern const char kfs_find_v2_batch_doc[];
KFS_HIDDEN PyObject *kfs_find_v2_batch(PyObject *module, PyObject *args);
/* crc32c.c */
KFS_HIDDEN extern const char kfs_crc32c_doc[];
KFS_HIDDEN PyObject *kfs_crc32c(PyObject *module, PyObject *args);
/* avro_json.c */
KFS_HIDDEN extern const char kfs_avro_program_doc[];
KFS_HIDDEN PyObject *kfs_avro_program(PyObject *module, PyObject *arg);
KFS_HIDDEN extern const char kfs_render_avro_doc[];
KFS_HIDDEN PyObject *kfs_render_avro(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* avro_arrow.c */
KFS_HIDDEN extern const char kfs_avro_arrow_program_doc[];
KFS_HIDDEN PyObject *kfs_avro_arrow_program(PyObject *module, PyObject *arg);
KFS_HIDDEN extern const char kfs_avro_arrow_decode_doc[];
KFS_HIDDEN PyObject *kfs_avro_arrow_decode(PyObject *module, PyObject *args);
/* protobuf_arrow.c */
KFS_HIDDEN extern const char kfs_protobuf_program_doc[];
KFS_HIDDEN PyObject *kfs_protobuf_program(PyObject *module, PyObject *arg);
KFS_HIDDEN extern const char kfs_render_protobuf_doc[];
KFS_HIDDEN PyObject *kfs_render_protobuf(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
KFS_HIDDEN extern const char kfs_protobuf_arrow_program_doc[];
KFS_HIDDEN PyObject *kfs_protobuf_arrow_program(PyObject *module, PyObject *arg);
KFS_HIDDEN extern const char kfs_protobuf_arrow_decode_doc[];
KFS_HIDDEN PyObject *kfs_protobuf_arrow_decode(PyObject *module, PyObject *args);
KFS_HIDDEN extern const char kfs_avro_text_column_doc[];
KFS_HIDDEN PyObject *kfs_avro_text_column(PyObject *module, PyObject *args);

/* arrow_columns.c */
KFS_HIDDEN extern const char kfs_arrow_builder_doc[], kfs_arrow_append_v2_doc[], kfs_arrow_append_records_doc[],
    kfs_arrow_take_doc[];
KFS_HIDDEN PyObject *kfs_arrow_builder(PyObject *module, PyObject *args);
KFS_HIDDEN PyObject *kfs_arrow_append_v2(PyObject *module, PyObject *args);
KFS_HIDDEN extern const char kfs_arrow_append_run_doc[];
KFS_HIDDEN PyObject *kfs_arrow_append_run(PyObject *module, PyObject *args);
KFS_HIDDEN PyObject *kfs_arrow_append_records(PyObject *module, PyObject *args);
KFS_HIDDEN PyObject *kfs_arrow_take(PyObject *module, PyObject *capsule);
KFS_HIDDEN extern const char kfs_arrow_payload_bytes_doc[];
KFS_HIDDEN PyObject *kfs_arrow_payload_bytes(PyObject *module, PyObject *capsule);

/* offsets_text.c */
KFS_HIDDEN extern const char kfs_offsets_text_columns_doc[];
KFS_HIDDEN PyObject *kfs_offsets_text_columns(PyObject *module, PyObject *args);
KFS_HIDDEN extern const char kfs_offsets_typed_columns_doc[];
KFS_HIDDEN PyObject *kfs_offsets_typed_columns(PyObject *module, PyObject *args);

#endif /* KFS_NATIVE_H */
