/* One record of a records section, checked (records_walk.h). One copy, called by the three walks: the
 * call costs less than inlining it into their loops (measured when it moved here). */

#include "records_walk.h"

/* kfs_walk_record: see records_walk.h. */
int
kfs_walk_record(records_walk *w, record_view *r)
{
    const uint8_t *p = w->p;
    Py_ssize_t pos = w->pos;
    int64_t n;

    if (walk_length(p, w->end, &pos, &n) < 0 || n <= 0 || n > w->end - pos)
        return WALK_REFUSED; /* (a record holds at least its attributes) */
    const Py_ssize_t record_end = pos + (Py_ssize_t)n;
    r->start = w->pos;
    r->size = (Py_ssize_t)n;
    r->end = record_end;
    pos++; /* attributes */
    if (walk_length(p, record_end, &pos, &n) < 0 || __builtin_add_overflow(w->base_timestamp, n, &r->timestamp))
        return WALK_REFUSED;
    if (w->append_time)
        r->timestamp = w->log_append_time;
    if (walk_length(p, record_end, &pos, &n) < 0 || __builtin_add_overflow(w->base_offset, n, &r->offset))
        return WALK_REFUSED;
    if (r->offset < w->base_offset || r->offset > w->last || (w->walked_any && r->offset <= w->previous))
        return WALK_REFUSED; /* outside the batch's offsets or out of order: the decoder says what it is */
    w->previous = r->offset;
    w->walked_any = 1;
    if (walk_length(p, record_end, &pos, &n) < 0 || n > record_end - pos) /* key */
        return WALK_REFUSED;
    r->key = p + pos;
    r->key_len = n < 0 ? -1 : n;
    if (n > 0)
        pos += (Py_ssize_t)n;
    if (walk_length(p, record_end, &pos, &n) < 0 || n > record_end - pos) /* value */
        return WALK_REFUSED;
    r->value = p + pos;
    r->value_len = n < 0 ? -1 : n;
    if (n > 0)
        pos += (Py_ssize_t)n;
    if (walk_length(p, record_end, &pos, &n) < 0 || n < 0 || n > (record_end - pos) / MIN_HEADER_SIZE)
        return WALK_REFUSED;
    r->n_headers = n;
    r->headers = pos;
    header_view h;
    for (int64_t i = 0; i < r->n_headers; i++)
        if (walk_header(p, record_end, &pos, &h) < 0)
            return WALK_REFUSED;
    if (pos != record_end)
        return WALK_REFUSED;
    w->pos = pos;
    return WALK_OK;
}

