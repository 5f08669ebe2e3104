/* read_windows: a page-cached decoded file's READs answered in C from lines rendered ahead (no GIL). */

#include "../native.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

/* Two readers of two partitions through one mount met at the GIL: a 1 MiB READ through mfusepy took
 * it ~12 times (the ctypes callback's entry, the cursor's lock, each walker call, the reply's gather),
 * and every time it had given it up the thread waited for the other reader's Python (docs/
 * performance.md, "Two readers in one daemon"). Here a reader's READs do not enter Python at all while
 * it reads on: a Python thread per open file (kfs/fuse/native_read.py) renders the file's lines ahead
 * of the kernel's requests through the reader's own cursor, exactly the bytes a Python READ would get,
 * and publishes them into the file's window; small_files.c's read_buf asks `kfs_read_windows_serve`
 * first and answers a request the window covers with a copy of its bytes. Anything else (no window,
 * a request at position 0, behind the window or far past it, a renderer stopped at the end of the file
 * or at an error) goes to mfusepy's callback: the Python path, which serves it and tells the window
 * (`read_windows_note`), so this is a cache of what Python would answer, never another answer.
 *
 * A window is the stream range [start, end) as contiguous chunks, each a Py_buffer exported by a
 * piece the cursor returned (a view of a rendered chunk: no copy is made to publish it). Buffers are
 * only exported and released with the GIL (publish, note, close); a READ thread only reads their
 * bytes, without the GIL, while the window counts it (`copying`): chunks are dropped (trimmed) only
 * when no copy is under way, and a window is freed only when no READ thread holds it (`users`) —
 * close waits for both. The lock `mu` guards the window's fields; it is never held during a copy, and
 * a Python caller that must wait for it gives the GIL up first (a READ thread never takes the GIL).
 * The renderer's own calls (await, publish, stall) never wait with the GIL held: for the table's lock,
 * `mu` (held by READ threads) or a broadcast (glibc's can wait for the waiters it woke before), which
 * with the GIL held stalled the other file's renderer (py-spy --gil --native of two readers: 97 of the
 * renderers' 170 samples in publish). await and publish keep the GIL when both locks are free (no
 * hand-off per step), and publish wakes READs, without it, only when some wait.
 *
 * Demand: a READ the window covers, or that starts within FORWARD_SLACK past its end, sets the
 * renderer's target AHEAD past the request's end; one past the end waits for the renderer (as a
 * Python READ waits for its cursor). A Python READ elsewhere (a seek) moves the window there with no
 * demand: a reader at random places renders nothing ahead; the next sequential request makes some. */

#define MAX_WINDOWS 64
#define MIB ((int64_t)1 << 20)
#define AHEAD (4 * MIB)         /* rendered past the furthest request's end */
#define FORWARD_SLACK (8 * MIB) /* a request this far past the window's end waits for the renderer (the kernel
                                 * has ~2 requests of 1 MiB out; a seek goes further) */
#define BEHIND (2 * MIB)        /* kept behind the furthest request, for requests that come late */
#define MAX_WAITING 32          /* READs of one file waiting at once, at most (libfuse: 10 threads) */
#define READER_WAIT_SECONDS 10  /* a READ waits this long for the renderer, then asks Python */

typedef struct {
    int64_t pos;
    Py_buffer view;
} chunk;

typedef struct {
    const char *at;
    size_t len;
} span;

typedef struct {
    uint64_t fh;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* broadcast on every change of the fields below */
    int users;              /* threads holding the window (table lookups not yet put back); atomic: counted
                             * under the table's lock, not `mu` (a lookup never waits for one window's lock
                             * holding the table's, which every file's READs share) */
    int nwaiting;           /* READs waiting for the renderer, and where each starts: never trimmed */
    int64_t waiting_at[MAX_WAITING];
    int copying;            /* READ threads copying out of chunks without `mu` */
    int closed;
    int stalled;    /* the renderer stopped (end of file, an error): no READ waits for it */
    int64_t start, end; /* the stream range the chunks hold */
    int64_t target;     /* where the renderer is asked to render to */
    int64_t furthest;   /* the furthest end of a request seen since the window was (re)placed */
    chunk *chunks;
    size_t first, count, cap; /* live chunks: chunks[first .. first + count) */
    unsigned long long hits;
} window;

static struct timespec deadline_in(int seconds);

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static window *table[MAX_WINDOWS];
static unsigned long long total_hits, total_waits, total_bytes, total_timeouts, total_misses; /* atomically */

static window *
acquire(uint64_t fh)
{
    window *w = NULL;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_WINDOWS; i++) {
        if (table[i] != NULL && table[i]->fh == fh) {
            w = table[i];
            __atomic_add_fetch(&w->users, 1, __ATOMIC_ACQ_REL);
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return w;
}

/* `acquire` for a caller holding the GIL that must not wait for the table's lock: 0 with *w (or NULL:
 * no such window) when the lock was free, -1 when it was held (the caller gives the GIL up and calls
 * `acquire`). */
static int
acquire_nowait(uint64_t fh, window **w)
{
    if (pthread_mutex_trylock(&table_lock) != 0)
        return -1;
    *w = NULL;
    for (int i = 0; i < MAX_WINDOWS; i++) {
        if (table[i] != NULL && table[i]->fh == fh) {
            *w = table[i];
            __atomic_add_fetch(&(*w)->users, 1, __ATOMIC_ACQ_REL);
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return 0;
}

static void
put_back_locked(window *w)
{
    if (__atomic_sub_fetch(&w->users, 1, __ATOMIC_ACQ_REL) == 0 && w->closed)
        pthread_cond_broadcast(&w->changed);
}

/* Lock `mu` from a caller holding the GIL. The rule that keeps the two locks from deadlocking: no
 * thread ever waits for the GIL while it holds `mu` (a thread that took `mu` without the GIL gives it
 * back before taking the GIL again), so a GIL holder waits for `mu` only as long as a copy's setup. */
static void
lock_with_gil(window *w)
{
    while (pthread_mutex_trylock(&w->mu) != 0) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&w->mu);
        pthread_mutex_unlock(&w->mu);
        Py_END_ALLOW_THREADS
    }
}

/* With `mu` and the GIL held: give both up, wait for `changed` (or a moment), take them back. */
static void
wait_with_gil(window *w)
{
    Py_BEGIN_ALLOW_THREADS
    const struct timespec deadline = deadline_in(1);
    pthread_cond_timedwait(&w->changed, &w->mu, &deadline);
    pthread_mutex_unlock(&w->mu);
    Py_END_ALLOW_THREADS
    lock_with_gil(w);
}

static int
wait_until(window *w, const struct timespec *deadline)
{
    return deadline ? pthread_cond_timedwait(&w->changed, &w->mu, deadline) : pthread_cond_wait(&w->changed, &w->mu);
}

static struct timespec
deadline_in(int seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += seconds;
    return ts;
}

/* A READ at `off` stops waiting (its slot: any holding `off`, as they are interchangeable). */
static void
unwait_locked(window *w, int64_t off)
{
    for (int i = 0; i < w->nwaiting; i++) {
        if (w->waiting_at[i] == off) {
            w->waiting_at[i] = w->waiting_at[--w->nwaiting];
            return;
        }
    }
}

/* Where chunks may be dropped before: BEHIND the furthest request, and never past a waiting READ. */
static int64_t
trim_point(const window *w)
{
    int64_t before = w->furthest - BEHIND;
    for (int i = 0; i < w->nwaiting; i++)
        if (w->waiting_at[i] < before)
            before = w->waiting_at[i];
    return before;
}

/* Drop the chunks wholly before `before` (all of them when `before` is INT64_MAX), releasing their
 * buffers: `mu` held and the GIL too (a release decrements a piece's export and maybe frees it, no
 * Python code runs); only when no copy is under way (else later: a copy reads them). */
static void
drop_chunks_before(window *w, int64_t before)
{
    if (w->copying)
        return;
    while (w->count) {
        chunk *c = &w->chunks[w->first];
        if (before != INT64_MAX && c->pos + (int64_t)c->view.len > before)
            break;
        PyBuffer_Release(&c->view);
        w->first++;
        w->count--;
        w->start = w->count ? w->chunks[w->first].pos : w->end;
    }
    if (w->count == 0)
        w->first = 0;
}

/* drop_chunks_before for a caller without the GIL: the dropped chunks' buffers are moved into a
 * malloc'd array (*out, *nout) for the caller to release once it holds the GIL again, after giving
 * `mu` up. Drops nothing when no copy is under way or the array cannot be had (a later trim does). */
static void
detach_chunks_before(window *w, int64_t before, Py_buffer **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (w->copying)
        return;
    size_t n = 0;
    while (n < w->count && w->chunks[w->first + n].pos + (int64_t)w->chunks[w->first + n].view.len <= before)
        n++;
    if (n == 0 || (*out = malloc(n * sizeof(Py_buffer))) == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        (*out)[i] = w->chunks[w->first + i].view;
    w->first += n;
    w->count -= n;
    w->start = w->count ? w->chunks[w->first].pos : w->end;
    if (w->count == 0)
        w->first = 0;
    *nout = n;
}

static void
release_buffers(Py_buffer *views, size_t n)
{
    for (size_t i = 0; i < n; i++)
        PyBuffer_Release(&views[i]);
}

/* The index of the chunk holding stream position `pos` (start <= pos < end). */
static size_t
chunk_at(const window *w, int64_t pos)
{
    size_t lo = w->first, hi = w->first + w->count - 1;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo + 1) / 2;
        if (w->chunks[mid].pos <= pos)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* ---- the READ path (libfuse's threads, no GIL) ------------------------------------------------ */

/* Answer a READ of `size` bytes at `off` of handle `fh` from its window: 1 with *mem a malloc'd copy
 * of exactly `size` bytes (for libfuse to free), 0 for the Python path. Never touches Python. */
int
kfs_read_windows_serve(uint64_t fh, size_t size, int64_t off, char **mem)
{
    if (off <= 0 || size == 0 || size > (size_t)(64 * MIB) || off > INT64_MAX - (int64_t)size)
        return 0; /* (a read from 0 starts the file over: the cursor decides what it is now) */
    window *w = acquire(fh);
    if (w == NULL)
        return 0;
    const int64_t stop = off + (int64_t)size;
    span *spans = NULL; /* (a reply's pieces: batches' lines, often small, so as many as they are) */
    size_t nspans = 0;
    int waited = 0;
    pthread_mutex_lock(&w->mu);
    if (!w->closed && off >= w->start && off <= w->end + FORWARD_SLACK) {
        if (stop > w->furthest)
            w->furthest = stop;
        const struct timespec deadline = deadline_in(READER_WAIT_SECONDS);
        const int can_wait = w->nwaiting < MAX_WAITING; /* (else it takes what is there, or asks Python) */
        if (can_wait)
            w->waiting_at[w->nwaiting++] = off;
        for (;;) {
            if (w->target < stop + AHEAD) { /* (asked again after each wake: a move in between drops it) */
                w->target = stop + AHEAD;
                pthread_cond_broadcast(&w->changed);
            }
            if (w->closed || w->stalled || w->end >= stop || off < w->start || !can_wait)
                break;
            waited = 1;
            if (wait_until(w, &deadline) == ETIMEDOUT) {
                __atomic_fetch_add(&total_timeouts, 1, __ATOMIC_RELAXED);
                break;
            }
        }
        if (can_wait)
            unwait_locked(w, off);
        if (!w->closed && off >= w->start && w->end >= stop && w->count) {
            int64_t at = off;
            const size_t first = chunk_at(w, off);
            size_t last = first;
            while (last < w->first + w->count && w->chunks[last].pos < stop)
                last++;
            spans = malloc((last - first) * sizeof(span));
            for (size_t i = first; spans != NULL && at < stop && i < last; i++) {
                const chunk *c = &w->chunks[i];
                const int64_t skip = at - c->pos, len = (int64_t)c->view.len - skip;
                const int64_t take = len < stop - at ? len : stop - at;
                spans[nspans].at = (const char *)c->view.buf + skip;
                spans[nspans].len = (size_t)take;
                nspans++;
                at += take;
            }
            if (spans != NULL && at == stop)
                w->copying++;
            else
                nspans = 0;
        }
    }
    if (!nspans) {
        __atomic_fetch_add(&total_misses, 1, __ATOMIC_RELAXED);
        put_back_locked(w);
        pthread_mutex_unlock(&w->mu);
        free(spans);
        return 0;
    }
    pthread_mutex_unlock(&w->mu);
    char *out = NULL;
    {
        out = malloc(size);
        if (out != NULL) {
            size_t done = 0;
            for (size_t i = 0; i < nspans; i++) {
                memcpy(out + done, spans[i].at, spans[i].len);
                done += spans[i].len;
            }
        }
        pthread_mutex_lock(&w->mu);
        if (--w->copying == 0)
            pthread_cond_broadcast(&w->changed);
        if (out != NULL)
            w->hits++;
        put_back_locked(w);
        pthread_mutex_unlock(&w->mu);
    }
    free(spans);
    if (out == NULL)
        return 0; /* (malloc failed: Python answers, or says ENOMEM) */
    __atomic_fetch_add(&total_hits, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&total_bytes, size, __ATOMIC_RELAXED);
    if (waited)
        __atomic_fetch_add(&total_waits, 1, __ATOMIC_RELAXED);
    *mem = out;
    return 1;
}

/* ---- the Python side (GIL held) ----------------------------------------------------------------- */

static int
parse_fh(PyObject *arg, uint64_t *fh)
{
    const unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *fh = v;
    return 0;
}

/* Append `views` (ownership passes to the window) at the window's end; `mu` held. -1: no memory. */
static int
append_locked(window *w, Py_buffer *views, size_t n, int64_t pos)
{
    if (w->first + w->count + n > w->cap) {
        if (w->first) { /* (compact first) */
            memmove(w->chunks, w->chunks + w->first, w->count * sizeof(chunk));
            w->first = 0;
        }
        if (w->count + n > w->cap) {
            size_t cap = w->cap ? w->cap : 16;
            while (cap < w->count + n)
                cap *= 2;
            chunk *grown = realloc(w->chunks, cap * sizeof(chunk));
            if (grown == NULL)
                return -1;
            w->chunks = grown;
            w->cap = cap;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (views[i].len == 0) {
            PyBuffer_Release(&views[i]); /* (safe with `mu` held: a piece's export, no callback) */
            continue;
        }
        w->chunks[w->first + w->count].pos = pos;
        w->chunks[w->first + w->count].view = views[i];
        w->count++;
        pos += views[i].len;
    }
    if (w->count && w->start > w->chunks[w->first].pos)
        w->start = w->chunks[w->first].pos;
    w->end = pos;
    return 0;
}

/* The buffers of a sequence of bytes-like pieces (*n of them, their total in *total); NULL on error. */
static Py_buffer *
export_pieces(PyObject *pieces, size_t *n, int64_t *total)
{
    PyObject *seq = PySequence_Fast(pieces, "pieces must be a sequence of bytes-like objects");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    Py_buffer *views = PyMem_Calloc(count ? (size_t)count : 1, sizeof(Py_buffer));
    if (views == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    *total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &views[i], PyBUF_SIMPLE) < 0) {
            release_buffers(views, (size_t)i);
            PyMem_Free(views);
            Py_DECREF(seq);
            return NULL;
        }
        *total += views[i].len;
    }
    Py_DECREF(seq);
    *n = (size_t)count;
    return views;
}

KFS_DOC(kfs_read_windows_open_doc,
"read_windows_open(fh, position) -> bool\n"
"\n"
"Give open file `fh` an empty window at stream position `position` (READs of fh are then asked of it\n"
"first). False when fh has one already or every window is taken.");

PyObject *
kfs_read_windows_open(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fh_obj;
    long long position;
    uint64_t fh;
    if (!PyArg_ParseTuple(args, "OL:read_windows_open", &fh_obj, &position) || parse_fh(fh_obj, &fh) < 0)
        return NULL;
    window *w = calloc(1, sizeof(window));
    if (w == NULL)
        return PyErr_NoMemory();
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->changed, &attr);
    pthread_condattr_destroy(&attr);
    w->fh = fh;
    w->start = w->end = w->target = w->furthest = position;
    int placed = 0, free_slot = -1, taken = 0;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_WINDOWS; i++) {
        if (table[i] == NULL && free_slot < 0)
            free_slot = i;
        if (table[i] != NULL && table[i]->fh == fh)
            taken = 1;
    }
    if (free_slot >= 0 && !taken) {
        table[free_slot] = w;
        placed = 1;
    }
    pthread_mutex_unlock(&table_lock);
    if (!placed) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->changed);
        free(w);
    }
    return PyBool_FromLong(placed);
}

/* publish's work on the window, `mu` held (the GIL or not: no Python object is touched). */
static void
publish_locked(window *w, Py_buffer *views, size_t n, int64_t position, int *added, int *failed,
               Py_buffer **dropped, size_t *ndropped)
{
    if (w->closed || position != w->end)
        return;
    if (append_locked(w, views, n, position) < 0) {
        *failed = 1;
        return;
    }
    *added = 1;
    detach_chunks_before(w, trim_point(w), dropped, ndropped);
}

KFS_DOC(kfs_read_windows_publish_doc,
"read_windows_publish(fh, position, pieces) -> bool\n"
"\n"
"Add the bytes-like `pieces` (the cursor's, held by the window until dropped) at stream position\n"
"`position` of fh's window, when that is where the window ends (else False: it moved meanwhile).");

PyObject *
kfs_read_windows_publish(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fh_obj, *pieces;
    long long position;
    uint64_t fh;
    if (!PyArg_ParseTuple(args, "OLO:read_windows_publish", &fh_obj, &position, &pieces) || parse_fh(fh_obj, &fh) < 0)
        return NULL;
    size_t n;
    int64_t total;
    Py_buffer *views = export_pieces(pieces, &n, &total);
    if (views == NULL)
        return NULL;
    /* The window's side without the GIL: its table and `mu` may be held by READ threads a while (and
     * a broadcast may wait for woken waiters), which with the GIL held stalled the other renderer
     * (py-spy --gil --native: most of a renderer's GIL time was here). Buffers are exported above and
     * released below, with the GIL. */
    int added = 0, failed = 0;
    Py_buffer *dropped = NULL;
    size_t ndropped = 0;
    size_t kept = 0; /* (empty pieces released here: append_locked would release them without the GIL) */
    for (size_t i = 0; i < n; i++) {
        if (views[i].len == 0)
            PyBuffer_Release(&views[i]);
        else
            views[kept++] = views[i];
    }
    n = kept;
    /* Uncontended (the table's lock and `mu` free), the window's work is done with the GIL held, as a
     * GIL hand-off per step is not free for one reader; the wake of waiting READs never is: glibc's
     * broadcast can wait for the waiters it woke before (py-spy --native: most of a renderer's GIL
     * time), and only READs waiting need it (the renderer is the only other waiter, and it is here). */
    window *w = NULL;
    int wake = 0;
    const int looked = acquire_nowait(fh, &w) == 0;
    if (looked && (w == NULL || pthread_mutex_trylock(&w->mu) == 0)) {
        if (w != NULL) {
            publish_locked(w, views, n, position, &added, &failed, &dropped, &ndropped);
            wake = added && w->nwaiting > 0;
            if (!wake)
                put_back_locked(w);
            pthread_mutex_unlock(&w->mu);
        }
        if (wake) {
            Py_BEGIN_ALLOW_THREADS
            pthread_cond_broadcast(&w->changed);
            pthread_mutex_lock(&w->mu);
            put_back_locked(w);
            pthread_mutex_unlock(&w->mu);
            Py_END_ALLOW_THREADS
        }
    } else {
        Py_BEGIN_ALLOW_THREADS
        if (!looked)
            w = acquire(fh);
        if (w != NULL) {
            pthread_mutex_lock(&w->mu);
            publish_locked(w, views, n, position, &added, &failed, &dropped, &ndropped);
            if (added && w->nwaiting > 0)
                pthread_cond_broadcast(&w->changed);
            put_back_locked(w);
            pthread_mutex_unlock(&w->mu);
        }
        Py_END_ALLOW_THREADS
    }
    release_buffers(dropped, ndropped);
    free(dropped);
    if (!added)
        release_buffers(views, n);
    PyMem_Free(views);
    if (failed)
        return PyErr_NoMemory();
    return PyBool_FromLong(added);
}

KFS_DOC(kfs_read_windows_note_doc,
"read_windows_note(fh, position, pieces) -> None\n"
"\n"
"What the Python path served fh at `position`: kept when it continues the window (the file grew, or\n"
"the renderer had stopped), nothing when the window holds it already, else the window moves to its\n"
"end, empty and with no demand (a seek). Either way the renderer may be asked again.");

PyObject *
kfs_read_windows_note(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fh_obj, *pieces;
    long long position;
    uint64_t fh;
    if (!PyArg_ParseTuple(args, "OLO:read_windows_note", &fh_obj, &position, &pieces) || parse_fh(fh_obj, &fh) < 0)
        return NULL;
    size_t n;
    int64_t total;
    Py_buffer *views = export_pieces(pieces, &n, &total);
    if (views == NULL)
        return NULL;
    window *w = acquire(fh);
    if (w == NULL) {
        release_buffers(views, n);
        PyMem_Free(views);
        Py_RETURN_NONE;
    }
    const int64_t stop = position + total;
    int kept = 0;
    lock_with_gil(w);
    for (;;) { /* (a move must wait for copies under way: they read the chunks it drops) */
        if (w->closed || (position >= w->start && stop <= w->end))
            break; /* (held already: one the window could not gather, or that came before it held it) */
        if (stop <= w->end && stop + 2 * BEHIND >= w->furthest)
            break; /* (behind the window but not far: a request that came late; the reader reads on) */
        if (position == w->end && total > 0) {
            kept = append_locked(w, views, n, position) == 0;
            w->stalled = 0;
            if (stop > w->furthest)
                w->furthest = stop;
            break;
        }
        if (total == 0 && position == w->end)
            break; /* (the end of the file, where the renderer stopped: it stays stopped) */
        if (w->copying) {
            wait_with_gil(w);
            continue;
        }
        drop_chunks_before(w, INT64_MAX);
        w->start = w->end = w->target = w->furthest = stop;
        w->stalled = 0;
        break;
    }
    pthread_cond_broadcast(&w->changed);
    put_back_locked(w);
    pthread_mutex_unlock(&w->mu);
    if (!kept)
        release_buffers(views, n);
    PyMem_Free(views);
    Py_RETURN_NONE;
}

KFS_DOC(kfs_read_windows_await_doc,
"read_windows_await(fh) -> (position, target) | None\n"
"\n"
"The renderer's wait (without the GIL) until fh's window is asked to reach past its end: where it\n"
"ends and where it should reach. None once the window is closed.");

PyObject *
kfs_read_windows_await(PyObject *Py_UNUSED(module), PyObject *arg)
{
    uint64_t fh;
    if (parse_fh(arg, &fh) < 0)
        return NULL;
    /* Waits without the GIL, and wakes holding it only with an answer: the window is broadcast at every
     * READ's copy, and a renderer woken each time took the GIL each time to look again. */
    int found = 0, closed = 0, answered = 0;
    int64_t end = 0, target = 0;
    window *w = NULL;
    const int looked = acquire_nowait(fh, &w) == 0; /* (asked already and the locks free: no hand-off) */
    if (looked && w == NULL)
        answered = 1;
    else if (looked && pthread_mutex_trylock(&w->mu) == 0) {
        if (w->closed || !(w->stalled || w->end >= w->target)) {
            found = answered = 1;
            closed = w->closed;
            end = w->end;
            target = w->target;
            put_back_locked(w);
        }
        pthread_mutex_unlock(&w->mu);
    }
    if (!answered) {
        Py_BEGIN_ALLOW_THREADS
        if (!looked)
            w = acquire(fh);
        if (w != NULL) {
            found = 1;
            pthread_mutex_lock(&w->mu);
            while (!w->closed && (w->stalled || w->end >= w->target))
                pthread_cond_wait(&w->changed, &w->mu);
            closed = w->closed;
            end = w->end;
            target = w->target;
            put_back_locked(w);
            pthread_mutex_unlock(&w->mu);
        }
        Py_END_ALLOW_THREADS
    }
    if (!found || closed)
        Py_RETURN_NONE;
    return Py_BuildValue("LL", (long long)end, (long long)target);
}

KFS_DOC(kfs_read_windows_stall_doc,
"read_windows_stall(fh, position) -> None\n"
"\n"
"The renderer stopped at `position` (the end of the file as it is now, or an error it met, which the\n"
"Python path meets again and answers): READs past the window go to Python until it is asked again.");

PyObject *
kfs_read_windows_stall(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fh_obj;
    long long position;
    uint64_t fh;
    if (!PyArg_ParseTuple(args, "OL:read_windows_stall", &fh_obj, &position) || parse_fh(fh_obj, &fh) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS /* (no Python object touched: as in publish) */
    window *w = acquire(fh);
    if (w != NULL) {
        pthread_mutex_lock(&w->mu);
        if (w->end == position) { /* (not a window moved meanwhile) */
            w->stalled = 1;
            pthread_cond_broadcast(&w->changed);
        }
        put_back_locked(w);
        pthread_mutex_unlock(&w->mu);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

KFS_DOC(kfs_read_windows_forget_doc,
"read_windows_forget(fh) -> int\n"
"\n"
"Drop the lines fh's window holds (a file left open unread: the mount's idle closer), keeping where it\n"
"ends; READs behind it go to Python. Returns how many bytes it held.");

PyObject *
kfs_read_windows_forget(PyObject *Py_UNUSED(module), PyObject *arg)
{
    uint64_t fh;
    if (parse_fh(arg, &fh) < 0)
        return NULL;
    window *w = acquire(fh);
    if (w == NULL)
        return PyLong_FromLong(0);
    lock_with_gil(w);
    while (w->copying)
        wait_with_gil(w);
    const int64_t held = w->end - w->start;
    drop_chunks_before(w, INT64_MAX);
    w->furthest = w->end;
    pthread_cond_broadcast(&w->changed);
    put_back_locked(w);
    pthread_mutex_unlock(&w->mu);
    return PyLong_FromLongLong((long long)held);
}

KFS_DOC(kfs_read_windows_close_doc,
"read_windows_close(fh) -> int\n"
"\n"
"Remove fh's window (its READs go to Python from now), once no READ thread holds it; release its\n"
"pieces. Returns how many READs it answered (0 without a window).");

PyObject *
kfs_read_windows_close(PyObject *Py_UNUSED(module), PyObject *arg)
{
    uint64_t fh;
    if (parse_fh(arg, &fh) < 0)
        return NULL;
    window *w = NULL;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_WINDOWS; i++) {
        if (table[i] != NULL && table[i]->fh == fh) {
            w = table[i];
            table[i] = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    if (w == NULL)
        return PyLong_FromLong(0);
    lock_with_gil(w);
    w->closed = 1;
    pthread_cond_broadcast(&w->changed);
    while (__atomic_load_n(&w->users, __ATOMIC_ACQUIRE) || w->copying) /* (none comes now: out of the table) */
        wait_with_gil(w);
    pthread_mutex_unlock(&w->mu);
    const unsigned long long hits = w->hits;
    for (size_t i = w->first; i < w->first + w->count; i++)
        PyBuffer_Release(&w->chunks[i].view);
    free(w->chunks);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->changed);
    free(w);
    return PyLong_FromUnsignedLongLong(hits);
}

KFS_DOC(kfs_read_windows_stats_doc,
"read_windows_stats() -> (reads, bytes, reads that waited for the renderer, waits given up, misses)\n"
"\n"
"READs answered from windows in this process since it started, and READs that waited for a renderer\n"
"10 s and went to Python (a renderer that should have rendered and did not: a bug); READs of a file\n"
"with a window that went to Python.");

PyObject *
kfs_read_windows_stats(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused))
{
    return Py_BuildValue("KKKKK", __atomic_load_n(&total_hits, __ATOMIC_RELAXED),
                         __atomic_load_n(&total_bytes, __ATOMIC_RELAXED),
                         __atomic_load_n(&total_waits, __ATOMIC_RELAXED),
                         __atomic_load_n(&total_timeouts, __ATOMIC_RELAXED),
                         __atomic_load_n(&total_misses, __ATOMIC_RELAXED));

}
