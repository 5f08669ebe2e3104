/* The records walk: a records section read one record at a time, checked, no object created; what
 * count_jsonl.c, render_v2_jsonl.c and render_v2_dump.c share (records_walk.c has kfs_walk_record), and
 * the two section walkers walk_v2_run.c calls. */

#ifndef KFS_RECORDS_WALK_H
#define KFS_RECORDS_WALK_H

#include "json_text.h"
#include "record_fields.h"

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
    Py_ssize_t end;             /* of the record */
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
    header_view h;
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

typedef struct {
    int64_t bytes;   /* length of the lines of the counted records */
    int64_t records; /* how many were counted */
    int64_t first;   /* offset of the first one counted, or -1 */
} line_count;

/* count_jsonl.c: the lines of the records in payload[0:end] with first <= offset < stop, counted into
 * *out. 0, or -1 when the section is the Python path's. */
KFS_HIDDEN int kfs_count_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                                 int64_t base_timestamp, int append_time, int64_t log_append_time, int64_t fixed_len,
                                 int64_t first, int64_t stop, int64_t last, line_count *out);

/* render_v2_jsonl.c: the lines of the records in payload[0:end] with first <= offset < stop, appended
 * to out (and their marks). RENDER_OK, RENDER_UNUSUAL (the Python path's) or RENDER_NO_MEMORY. */
KFS_HIDDEN int kfs_render_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                                  int64_t base_timestamp, int append_time, int64_t log_append_time, const char *prefix,
                                  size_t prefix_len, const char *tt, size_t tt_len, int64_t first, int64_t stop,
                                  int64_t last, rawbuf *out, rawbuf *marks);

/* render_kcat.c: kcat's -f output. A format is a list of parts (KcatFormat.program in
 * kfs/views/kcat_format.py): literals (the topic and partition among them) and fields. */
enum { KCAT_LITERAL = 'L', KCAT_OFFSET = 'o', KCAT_KEY = 'k', KCAT_KEY_LEN = 'K', KCAT_VALUE = 's',
       KCAT_VALUE_LEN = 'S', KCAT_VALUE_LEN_BE32 = 'R', KCAT_TIMESTAMP = 'T', KCAT_HEADERS = 'h',
       /* kcat -J's envelope (KcatJson.program): a key, a value as JSON strings or null, the headers' member
        * (or nothing without headers), the timestamp type's name */
       KCAT_JSON_KEY = 'J', KCAT_JSON_VALUE = 'j', KCAT_JSON_HEADERS = 'H', KCAT_JSON_TSTYPE = 'Y' };
#define KCAT_MAX_PARTS 512
/* The most output one batch may render here: a batch whose output would pass it (a format repeating %s
 * over a large value, a long literal over many records) is the Python renderer's, which writes a large
 * record a token at a time (kfs.views.kcat_format.KcatFormat.pieces): memory bounded whatever the format. */
#define KCAT_BATCH_OUTPUT ((uint64_t)8 << 20)

typedef struct {
    int op;
    const char *text; /* a literal's bytes (in the program) */
    size_t len;
} kcat_part;

typedef struct {
    const kcat_part *parts;
    int n_parts;
    const char *null; /* what a null key or value prints */
    size_t null_len;
} kcat_format;

/* The parts of a program of n bytes into parts[0:max_parts]: how many, or -1 when it is malformed. */
KFS_HIDDEN int kfs_kcat_parse(const uint8_t *program, Py_ssize_t n, kcat_part *parts, int max_parts);

/* The kcat lines of the records in payload[0:end] with first <= offset < stop, appended to out (and
 * their marks, as kfs_render_records gives them). RENDER_OK, RENDER_UNUSUAL or RENDER_NO_MEMORY. */
KFS_HIDDEN int kfs_render_kcat_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                                       int64_t base_timestamp, int append_time, int64_t log_append_time,
                                       const kcat_format *f, int64_t first, int64_t stop, int64_t last, rawbuf *out,
                                       rawbuf *marks);

#endif /* KFS_RECORDS_WALK_H */
