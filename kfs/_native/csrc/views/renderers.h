/* The record renderers of the views, over a records walk (record/records_walk.h): the JSON lines of
 * count_jsonl.c and render_v2_jsonl.c and kcat's output (render_kcat.c), which walk_v2_run.c calls
 * batch by batch. */

#ifndef KFS_RENDERERS_H
#define KFS_RENDERERS_H

#include "../record/records_walk.h"
#include "json_text.h"

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

#endif /* KFS_RENDERERS_H */
