/* The record renderers of the views, over a records walk (record/records_walk.h): the JSON lines of
 * count_jsonl.c and render_v2_jsonl.c and kcat's output (render_kcat.c), which walk_v2_run.c calls
 * batch by batch. */

#ifndef KFS_RENDERERS_H
#define KFS_RENDERERS_H

#include "../record/records_walk.h"
#include "../registry/avro_json.h"
#include "../registry/protobuf_json.h"
#include "json_text.h"

/* ---- the records a view shows, line by line ------------------------------------------------ */

/* A view shows the records with first <= offset < stop; stop 2**63 - 1 is no end (the Python path's
 * end=None), so a record at offset 2**63 - 1 is shown then. */
static inline int
record_shown(int64_t offset, int64_t first, int64_t stop)
{
    return offset >= first && (offset < stop || stop == INT64_MAX);
}

/* A line emitter: record r's line (of the section p, which ends at `end`) appended to out, as `how`
 * says to write it. RENDER_OK, RENDER_UNUSUAL (the batch is the Python renderer's) or RENDER_NO_MEMORY. */
typedef int (*line_fn)(const void *how, const uint8_t *p, Py_ssize_t end, const record_view *r, rawbuf *out);

typedef struct {
    line_fn line;
    const void *how;
    Py_ssize_t end;
    int64_t first, stop;
    rawbuf *out, *marks;
} shown_lines;

/* walk_records' emitter for render_shown_lines. A header key that is not UTF-8 (any record's, shown or
 * not) leaves the section to the Python path: the decoder makes it a str with replacement characters,
 * which the Python renderer renders. */
static KFS_ALWAYS_INLINE int
emit_shown_line(void *ctx, const uint8_t *p, const record_view *r)
{
    const shown_lines *s = ctx;
    if (!header_keys_utf8(p, r))
        return RENDER_UNUSUAL;
    if (!record_shown(r->offset, s->first, s->stop))
        return RENDER_OK;
    const int rc = s->line(s->how, p, s->end, r, s->out);
    if (rc != RENDER_OK)
        return rc;
    if (s->marks != NULL && rb_put_pair(s->marks, r->offset, (int64_t)s->out->len) < 0)
        return RENDER_NO_MEMORY;
    return RENDER_OK;
}

/* The lines `line` writes for the shown records of the section p[0:end] (its batch's fields as
 * decode_v2_records takes them, `last` its last offset), appended to out; with `marks`, each line's
 * record offset and where the line ends in out, as two int64s. What every line renderer of the views
 * is (JSON lines, kcat's output): the walk and its rules here once, the writing of a line in `line`.
 * Always inlined with `line` a constant, so each renderer's loop has its writer inlined in it. */
static KFS_ALWAYS_INLINE int
render_shown_lines(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
                   int append_time, int64_t log_append_time, int64_t first, int64_t stop, int64_t last,
                   line_fn line, const void *how, rawbuf *out, rawbuf *marks)
{
    records_walk w = records_walk_start(p, end, base_offset, base_timestamp, append_time, log_append_time, last);
    shown_lines s = {line, how, end, first, stop, out, marks};
    return walk_records(&w, count, emit_shown_line, &s);
}

/* The bytes of a JSON line that are the same for every record of a batch: the prefix, ', "timestamp": ',
 * ', "timestamp_type": "' tt '", "key": ', ', "value": ', ', "headers": [' and ']}\n'. */
static inline int64_t
jsonl_fixed_len(size_t prefix_len, size_t tt_len)
{
    return (int64_t)prefix_len + 15 + 21 + (int64_t)tt_len + 10 + 11 + 14 + 3;
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

/* render_v2_jsonl.c: the same for `__consumer_offsets`' offset commits, as render_jsonl's `commits`
 * renders them (views/offsets_json.h); RENDER_UNUSUAL for a batch holding any other record. */
KFS_HIDDEN int kfs_render_commit_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                                         int64_t base_timestamp, int append_time, int64_t log_append_time,
                                         const char *prefix, size_t prefix_len, const char *tt, size_t tt_len,
                                         int64_t first, int64_t stop, int64_t last, rawbuf *out, rawbuf *marks);

/* The schema-registry step of the walker: render_jsonl's `avro` table (kfs.registry.lines.FramedLines:
 * a value's 4 schema id bytes -> (compiled program, the line's tail `, "value_schema": {...}`)), its
 * programs' entries copied for a walk, and the buffer a datum's JSON text is rendered into. */
typedef struct {
    uint8_t id[4];
    int protobuf;        /* a Protobuf schema's first message (the index byte 0 after the id), not Avro */
    const void *program; /* kfs_avro_program_of, kfs_protobuf_program_of */
    const char *tail;    /* UTF-8 */
    size_t tail_len;
} avro_entry;

typedef struct {
    const avro_entry *entries;
    int n;
    int last;          /* the entry found last (most values of a run are of one schema) */
    json_out text;
} avro_lines;

/* render_v2_jsonl.c: the lines of the records in payload[0:end] with first <= offset < stop, as
 * render_jsonl's `avro` renders them: each record's value framed by a schema id of the table and rendered
 * by its program; RENDER_UNUSUAL (the batch the Python walk's) for any other record (a header, a framed
 * key, a null, unframed or unknown value, a datum the program declines). */
KFS_HIDDEN int kfs_render_avro_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                                       int64_t base_timestamp, int append_time, int64_t log_append_time,
                                       const char *prefix, size_t prefix_len, const char *tt, size_t tt_len,
                                       avro_lines *avro, int64_t first, int64_t stop, int64_t last, rawbuf *out,
                                       rawbuf *marks);

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

#endif /* KFS_RENDERERS_H */
