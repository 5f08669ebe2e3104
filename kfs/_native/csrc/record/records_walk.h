/* The records walk: a records section read one record at a time, checked, no object created; what the
 * renderers (views/, cli/render_v2_dump.c) and storage/record_at.c share (records_walk.c has
 * kfs_walk_record). */

#ifndef KFS_RECORDS_WALK_H
#define KFS_RECORDS_WALK_H

#include "record_fields.h"
#include "utf8.h"

/* What kfs_count_records, kfs_render_records and dump_records share: a records section read record by
 * record against its ends, every length and offset checked, pointing into the payload. Anything a
 * walk refuses (malformed, a varint beyond int64, an offset or timestamp past int64, offsets out of
 * order or outside [base_offset, last]) leaves the section to the decoder, which raises or decodes
 * it: the walk accepts a subset of what decode_v2_records accepts, and sees the same fields. */

typedef struct {
    const uint8_t *p;
    Py_ssize_t end;        /* of the section */
    Py_ssize_t pos;        /* of the next record */
    int64_t base_offset, base_timestamp, last;
    int append_time;       /* LogAppendTime: every timestamp is log_append_time */
    int64_t log_append_time;
    int64_t previous;      /* offset of the record before, if any */
    int walked_any;
} records_walk;

typedef struct {
    int64_t offset, timestamp;
    const uint8_t *key, *value; /* into the payload */
    int64_t key_len, value_len; /* -1: null */
    Py_ssize_t headers;         /* position of the first header */
    int64_t n_headers;
    Py_ssize_t start, end;      /* of the record (its Length field), and its end */
    Py_ssize_t size;            /* bytes from Attributes to the record's end (its Length) */
} record_view;

typedef struct {
    const uint8_t *key, *value;
    int64_t key_len, value_len; /* key_len >= 0; value_len -1: null */
} header_view;

enum { WALK_OK = 0, WALK_REFUSED = -1 };

static inline records_walk
records_walk_start(const uint8_t *p, Py_ssize_t end, int64_t base_offset, int64_t base_timestamp,
                   int append_time, int64_t log_append_time, int64_t last)
{
    records_walk w = {p, end, 0, base_offset, base_timestamp, last, append_time, log_append_time, 0, 0};
    return w;
}

/* A length or count within int64 at p[*pos] (before p[limit]), or WALK_REFUSED. */
static inline int
walk_length(const uint8_t *p, Py_ssize_t limit, Py_ssize_t *pos, int64_t *n)
{
    varint_t v;
    if (read_varint(p, limit, pos, &v) != VARINT_OK || v.hi)
        return WALK_REFUSED;
    *n = zigzag(v.lo);
    return WALK_OK;
}

/* The header at p[*pos] of a record ending at p[record_end]; advances *pos past it. */
static inline int
walk_header(const uint8_t *p, Py_ssize_t record_end, Py_ssize_t *pos, header_view *h)
{
    int64_t n;
    if (walk_length(p, record_end, pos, &n) < 0 || n < 0 || n > record_end - *pos)
        return WALK_REFUSED;
    h->key = p + *pos;
    h->key_len = n;
    *pos += (Py_ssize_t)n;
    if (walk_length(p, record_end, pos, &n) < 0 || n > record_end - *pos)
        return WALK_REFUSED;
    h->value = p + *pos;
    h->value_len = n < 0 ? -1 : n;
    if (n > 0)
        *pos += (Py_ssize_t)n;
    return WALK_OK;
}

/* The next record of the walk into *r (its headers checked: walk_header reads them again). */
KFS_HIDDEN int kfs_walk_record(records_walk *w, record_view *r);

/* Whether every header key of record r is UTF-8: one that is not, the decoder makes a str with
 * replacement characters, and the fused renderers leave its section to the Python renderer. */
static inline int
header_keys_utf8(const uint8_t *p, const record_view *r)
{
    header_view h = {NULL, NULL, 0, 0};
    Py_ssize_t at = r->headers;
    for (int64_t k = 0; k < r->n_headers; k++) {
        walk_header(p, r->end, &at, &h); /* checked by walk_record */
        if (!valid_utf8(h.key, (Py_ssize_t)h.key_len))
            return 0;
    }
    return 1;
}

/* After `count` records: the section must end there. */
static inline int
walk_finished(const records_walk *w)
{
    return w->pos == w->end ? WALK_OK : WALK_REFUSED;
}

/* ---- the one record loop -------------------------------------------------------------------- */

/* What a walk hands each record it accepts to (an emitter: a renderer's line, a length, a dump line,
 * a lookup): RENDER_OK to go on, or the code that ends the walk. r points into the section p. */
typedef int (*record_fn)(void *ctx, const uint8_t *p, const record_view *r);

#define KFS_ALWAYS_INLINE inline __attribute__((always_inline))

/* The records of a section, `count` of them, each walked (kfs_walk_record) and handed to `each`:
 * RENDER_OK when every one was and the section ends with the last; RENDER_UNUSUAL when the walk
 * refuses one or bytes follow the last (the decoder then says what is wrong); else the code `each`
 * ended the walk with. Every records loop of the module is this one (the views' renderers and
 * counter, the dump's lines, storage's record lookup). Always inlined, with `each` a constant
 * function: each caller gets its own copy of the loop with its emitter inlined in it, as the copied
 * loops were, and no call through a pointer per record. */
static KFS_ALWAYS_INLINE int
walk_records(records_walk *w, Py_ssize_t count, record_fn each, void *ctx)
{
    record_view r;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (kfs_walk_record(w, &r) < 0)
            return RENDER_UNUSUAL;
        const int rc = each(ctx, w->p, &r);
        if (rc != RENDER_OK)
            return rc;
    }
    return walk_finished(w) == WALK_OK ? RENDER_OK : RENDER_UNUSUAL;
}

#endif /* KFS_RECORDS_WALK_H */
