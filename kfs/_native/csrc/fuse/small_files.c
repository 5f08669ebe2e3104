/* small_files: the OPEN, READ and RELEASE of a small rendered file (`.value`, info.json) in C. */

#include "../native.h"

#include <fcntl.h>
#include <pthread.h>
#include <time.h>

/* A `cat offset/<N>.value` is four FUSE requests: LOOKUP (the lookup, in Python), then OPEN, READ and
 * RELEASE of bytes the lookup already rendered. Each request through mfusepy is a ctypes callback
 * into Python (argument conversion, mfusepy's wrappers, the GIL, a thread state) and costs more than
 * what it does; a minimal mfusepy file system spent ~30 us a request over a C one here.
 *
 * The tree (kfs/fuse/tree.py) hands every small file it renders to `small_files_put` with the time it
 * rendered it; kfs/fuse/fast_small.py puts the three functions below in libfuse's operations table in
 * place of mfusepy's, keeping mfusepy's. OPEN of a path rendered within the tree's reuse time (the
 * same rule as KfsTree._fresh_small) makes a handle holding a copy of the bytes, tagged in `fh`'s top
 * bit; READ and RELEASE of such a handle are answered here, without Python. Anything else (a path
 * not here or rendered too long ago, a write open, any other handle) goes to mfusepy's callback, so
 * this is only ever a cache: a miss is the Python path, never another answer.
 *
 * The table holds copies (no Python object is touched without the GIL), one per slot of a fixed
 * table by the path's hash (a collision replaces; a miss costs nothing but the Python path), files
 * of at most SMALL_MAX_BYTES.
 *
 * It lives in the fuse layer because it patches libfuse's operations table, which only the mount
 * owns: the offsets of the table's members and of struct fuse_file_info's come from mfusepy's ctypes
 * declarations (mfusepy 3.1.1 on libfuse 3); kfs/fuse/fast_small.py says what else it assumes of
 * mfusepy and tests/test_fuse_libfuse_table.py fails when that changes. */

#define SMALL_SLOTS 1024
#define SMALL_MAX_BYTES (16 * 1024)
#define HANDLE_TAG (UINT64_C(1) << 63)

typedef struct {
    char *path;       /* malloc'd, NUL-terminated; NULL: empty slot */
    char *data;       /* malloc'd copy (NULL when len is 0) */
    size_t len;
    double rendered;  /* CLOCK_MONOTONIC seconds (time.monotonic()) */
} small_entry;

typedef struct {
    size_t len;
    char data[];
} small_handle;

/* libfuse3's `struct fuse_bufvec` with one buffer, as kfs/fuse/zerocopy.py declares it (padded for
 * fields later versions may append); libfuse free()s it and a non-fd buffer's mem after replying. */
typedef struct {
    size_t size;
    int flags;
    void *mem;
    int fd;
    int64_t pos;
} small_fuse_buf;

typedef struct {
    size_t count, idx, off;
    small_fuse_buf buf[1];
    char padding[64];
} small_fuse_bufvec;

typedef int (*open_fn)(const char *, void *);
typedef int (*read_buf_fn)(const char *, small_fuse_bufvec **, size_t, int64_t, void *);
typedef int (*release_fn)(const char *, void *);

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static small_entry table[SMALL_SLOTS];
static double reuse_seconds = 0.0;

/* Set once by small_files_install, before libfuse starts a thread. */
static open_fn python_open = NULL;
static read_buf_fn python_read_buf = NULL;
static release_fn python_release = NULL;
static Py_ssize_t fh_offset, flags_offset, direct_io_offset;
static int direct_io_bit, all_direct_io;
static unsigned long long served_opens, served_reads; /* counted atomically; logged at unmount */

static uint64_t
path_hash(const char *p)
{
    uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a */
    for (; *p; p++)
        h = (h ^ (uint8_t)*p) * UINT64_C(1099511628211);
    return h;
}

static double
monotonic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
entry_clear(small_entry *e)
{
    free(e->path);
    free(e->data);
    memset(e, 0, sizeof(*e));
}

static inline uint64_t *
fh_of(void *fi)
{
    return (uint64_t *)((char *)fi + fh_offset);
}

static int
small_open(const char *path, void *fi)
{
    const int flags = *(int *)((char *)fi + flags_offset);
    if (path == NULL || (flags & (O_WRONLY | O_RDWR | O_TRUNC | O_APPEND | O_CREAT)))
        return python_open(path, fi); /* (EROFS, from the one place that says it) */
    small_handle *h = NULL;
    const small_entry *e = &table[path_hash(path) % SMALL_SLOTS];
    pthread_mutex_lock(&table_lock);
    if (e->path != NULL && strcmp(e->path, path) == 0 && monotonic_now() - e->rendered < reuse_seconds) {
        h = malloc(sizeof(small_handle) + e->len);
        if (h != NULL) {
            h->len = e->len;
            if (e->len)
                memcpy(h->data, e->data, e->len);
            __atomic_fetch_add(&served_opens, 1, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&table_lock);
    if (h == NULL)
        return python_open(path, fi);
    *fh_of(fi) = (uint64_t)(uintptr_t)h | HANDLE_TAG;
    if (all_direct_io) /* -o direct_io: every open is (as KfsOperations.open makes them) */
        *(unsigned *)((char *)fi + direct_io_offset) |= 1u << direct_io_bit;
    return 0;
}

static int
small_read_buf(const char *path, small_fuse_bufvec **bufp, size_t size, int64_t off, void *fi)
{
    const uint64_t fh = *fh_of(fi);
    if (!(fh & HANDLE_TAG)) {
        char *window_mem = NULL; /* (a page-cached decoded file read on: read_windows.c, else Python) */
        if (!kfs_read_windows_serve(fh, size, off, &window_mem))
            return python_read_buf(path, bufp, size, off, fi);
        small_fuse_bufvec *v = calloc(1, sizeof(*v));
        if (v == NULL) {
            free(window_mem);
            return -ENOMEM;
        }
        v->count = 1;
        v->buf[0].size = size;
        v->buf[0].mem = window_mem;
        *bufp = v;
        return 0;
    }
    const small_handle *h = (const small_handle *)(uintptr_t)(fh & ~HANDLE_TAG);
    size_t n = 0;
    if (off >= 0 && (uint64_t)off < h->len)
        n = h->len - (size_t)off < size ? h->len - (size_t)off : size;
    small_fuse_bufvec *v = calloc(1, sizeof(*v));
    char *mem = n ? malloc(n) : NULL;
    if (v == NULL || (n && mem == NULL)) {
        free(v);
        free(mem);
        return -ENOMEM;
    }
    if (n)
        memcpy(mem, h->data + off, n);
    v->count = 1;
    v->buf[0].size = n;
    v->buf[0].mem = mem;
    *bufp = v;
    __atomic_fetch_add(&served_reads, 1, __ATOMIC_RELAXED);
    return 0;
}

static int
small_release(const char *path, void *fi)
{
    const uint64_t fh = *fh_of(fi);
    if (!(fh & HANDLE_TAG))
        return python_release(path, fi);
    free((void *)(uintptr_t)(fh & ~HANDLE_TAG));
    return 0;
}

KFS_DOC(kfs_small_files_put_doc,
"small_files_put(path, data, rendered)\n"
"\n"
"Keep a copy of a small file's bytes as rendered at `rendered` (time.monotonic()), for the OPEN, READ\n"
"and RELEASE answered in C (kfs/fuse/fast_small.py). Files over 16 KiB are not kept.");

PyObject *
kfs_small_files_put(PyObject *module, PyObject *args)
{
    const char *path;
    Py_buffer data;
    double rendered;
    if (!PyArg_ParseTuple(args, "sy*d:small_files_put", &path, &data, &rendered))
        return NULL;
    if (data.len > SMALL_MAX_BYTES) {
        PyBuffer_Release(&data);
        Py_RETURN_NONE;
    }
    char *path_copy = strdup(path);
    char *data_copy = data.len ? malloc((size_t)data.len) : NULL;
    if (path_copy == NULL || (data.len && data_copy == NULL)) {
        free(path_copy);
        free(data_copy);
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    if (data.len)
        memcpy(data_copy, data.buf, (size_t)data.len);
    small_entry fresh = {path_copy, data_copy, (size_t)data.len, rendered};
    small_entry *e = &table[path_hash(path) % SMALL_SLOTS];
    pthread_mutex_lock(&table_lock);
    small_entry old = *e;
    *e = fresh;
    pthread_mutex_unlock(&table_lock);
    entry_clear(&old);
    PyBuffer_Release(&data);
    Py_RETURN_NONE;
}

KFS_DOC(kfs_small_files_clear_doc, "small_files_clear() -> (opens served, reads served): forget every kept file.");

PyObject *
kfs_small_files_clear(PyObject *module, PyObject *unused)
{
    pthread_mutex_lock(&table_lock);
    small_entry kept[SMALL_SLOTS];
    memcpy(kept, table, sizeof(table));
    memset(table, 0, sizeof(table));
    pthread_mutex_unlock(&table_lock);
    const unsigned long long opens = __atomic_load_n(&served_opens, __ATOMIC_RELAXED),
                             reads = __atomic_load_n(&served_reads, __ATOMIC_RELAXED);
    for (int i = 0; i < SMALL_SLOTS; i++)
        entry_clear(&kept[i]);
    return Py_BuildValue("KK", opens, reads);
}

KFS_DOC(kfs_small_files_install_doc,
"small_files_install(operations, open_at, read_buf_at, release_at, fh_at, flags_at, direct_io_at,\n"
"                    direct_io_bit, reuse_seconds, all_direct_io)\n"
"\n"
"Put the C open, read_buf and release in libfuse's `struct fuse_operations` at address `operations`\n"
"(offsets of the three members; mfusepy's callbacks there are kept and called for what C does not\n"
"answer), before fuse_main starts. fh_at, flags_at: offsets in `struct fuse_file_info`; direct_io_at\n"
"and direct_io_bit: where its direct_io bit is. reuse_seconds: how long after its rendering a file\n"
"is opened from here. Once per process.");

PyObject *
kfs_small_files_install(PyObject *module, PyObject *args)
{
    unsigned long long operations;
    Py_ssize_t open_at, read_buf_at, release_at;
    double reuse;
    int direct;
    if (!PyArg_ParseTuple(args, "Knnnnnnidp:small_files_install", &operations, &open_at, &read_buf_at, &release_at,
                          &fh_offset, &flags_offset, &direct_io_offset, &direct_io_bit, &reuse, &direct))
        return NULL;
    char *ops = (char *)(uintptr_t)operations;
    void **open_slot = (void **)(ops + open_at), **read_slot = (void **)(ops + read_buf_at),
         **release_slot = (void **)(ops + release_at);
    if (python_open != NULL || *open_slot == NULL || *read_slot == NULL || *release_slot == NULL
        || direct_io_bit < 0 || direct_io_bit > 31) {
        PyErr_SetString(PyExc_RuntimeError, "small_files_install: installed already, or a callback is missing");
        return NULL;
    }
    python_open = (open_fn)*open_slot;
    python_read_buf = (read_buf_fn)*read_slot;
    python_release = (release_fn)*release_slot;
    reuse_seconds = reuse;
    all_direct_io = direct;
    *open_slot = (void *)small_open;
    *read_slot = (void *)small_read_buf;
    *release_slot = (void *)small_release;
    Py_RETURN_NONE;
}
