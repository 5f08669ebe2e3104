/* render_kcat: a records section -> kcat's -f output (`kfs cat -f FMT`), fused like render_v2_jsonl:
 * no Record is created, and the loop runs without the GIL (walk_v2_run calls it). */

#include "renderers.h"

/* The format arrives as a program kfs/views/kcat_format.py makes (KcatFormat.program): one op byte
 * per part, a literal's op followed by its length (uint32, little-endian) and bytes. The topic and
 * the partition are literals there already. The Python renderer (KcatFormat.render) stays the oracle:
 * a header key that is not UTF-8 (the decoder makes it a str with replacement characters, which that
 * renderer prints) leaves the batch to it, as render_v2_jsonl does; so does a batch whose output would pass
 * KCAT_BATCH_OUTPUT (records_walk.h), which that renderer writes in pieces. */

static inline int
rb_put(rawbuf *o, const void *s, size_t n)
{
    if (rb_reserve(o, n) < 0)
        return -1;
    if (n)
        memcpy(o->buf + o->len, s, n);
    o->len += n;
    return 0;
}

static inline int
rb_put_int(rawbuf *o, int64_t v)
{
    if (rb_reserve(o, 20) < 0)
        return -1;
    o->len = (size_t)(write_int64(o->buf + o->len, v) - o->buf);
    return 0;
}

/* n bytes as kcat -J's JSON writer (yajl, UTF-8 not validated) writes a string: quoted, with `"`, `\\`
 * and control characters escaped (\\u00XX in capitals but for \\b \\f \\n \\r \\t), every other byte
 * as it is; n < 0: null. KcatJson's _json_bytes in kfs/views/kcat_format.py is its twin. */
static inline int
rb_put_json(rawbuf *o, const uint8_t *s, int64_t n)
{
    if (n < 0)
        return rb_put(o, "null", 4);
    if ((uint64_t)n > ((uint64_t)PY_SSIZE_T_MAX - 2) / 6 || rb_reserve(o, 6 * (size_t)n + 2) < 0)
        return -1;
    static const char hex[] = "0123456789ABCDEF";
    char *d = o->buf + o->len;
    *d++ = '"';
    for (int64_t i = 0; i < n; i++) {
        const uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *d++ = (char)c;
            continue;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\b': *d++ = 'b'; break;
        case '\f': *d++ = 'f'; break;
        case '\n': *d++ = 'n'; break;
        case '\r': *d++ = 'r'; break;
        case '\t': *d++ = 't'; break;
        default:
            *d++ = 'u';
            *d++ = '0';
            *d++ = '0';
            *d++ = hex[c >> 4];
            *d++ = hex[c & 15];
        }
    }
    *d++ = '"';
    o->len = (size_t)(d - o->buf);
    return 0;
}

int
kfs_kcat_parse(const uint8_t *program, Py_ssize_t n, kcat_part *parts, int max_parts)
{
    int count = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        if (count == max_parts)
            return -1;
        kcat_part *part = &parts[count++];
        part->op = program[i++];
        part->text = NULL;
        part->len = 0;
        switch (part->op) {
        case KCAT_LITERAL:
            if (n - i < 4)
                return -1;
            part->len = (size_t)kfs_load_le32(program + i);
            i += 4;
            if ((size_t)(n - i) < part->len)
                return -1;
            part->text = (const char *)program + i;
            i += (Py_ssize_t)part->len;
            break;
        case KCAT_OFFSET: case KCAT_KEY: case KCAT_KEY_LEN: case KCAT_VALUE: case KCAT_VALUE_LEN:
        case KCAT_VALUE_LEN_BE32: case KCAT_TIMESTAMP: case KCAT_HEADERS: case KCAT_JSON_KEY:
        case KCAT_JSON_VALUE: case KCAT_JSON_HEADERS: case KCAT_JSON_TSTYPE:
            break;
        default:
            return -1;
        }
    }
    return count;
}

/* How kcat's lines are written: the format, the batch's timestamp type, and where the batch's output
 * started in out (KCAT_BATCH_OUTPUT bounds it). */
typedef struct {
    const kcat_format *f;
    int append_time;
    size_t start;
} kcat_how;

/* Record r's output by the format, appended to out: render_shown_lines' writer for
 * kfs_render_kcat_records. */
static KFS_ALWAYS_INLINE int
kcat_line(const void *how, const uint8_t *p, Py_ssize_t end, const record_view *r, rawbuf *out)
{
    const kcat_how *k = how;
    const kcat_format *f = k->f;
    header_view h = {NULL, NULL, 0, 0};
    Py_ssize_t at;
    /* n more bytes keep the batch's output within KCAT_BATCH_OUTPUT, else the batch is the Python path's */
#define ROOM(n)                                                                 \
    do {                                                                        \
        if ((uint64_t)(out->len - k->start) + (uint64_t)(n) > KCAT_BATCH_OUTPUT) \
            return RENDER_UNUSUAL;                                              \
    } while (0)
#define PUT(s, n)                                \
    do {                                         \
        ROOM(n);                                 \
        if (rb_put(out, (s), (size_t)(n)) < 0)   \
            return RENDER_NO_MEMORY;             \
    } while (0)
#define PUT_INT(v)                               \
    do {                                         \
        ROOM(20);                                \
        if (rb_put_int(out, (v)) < 0)            \
            return RENDER_NO_MEMORY;             \
    } while (0)
#define PUT_JSON(s, n)                                              \
    do {                                                            \
        ROOM((n) < 0 ? 4 : 6 * (uint64_t)(n) + 2);                   \
        if (rb_put_json(out, (s), (n)) < 0)                         \
            return RENDER_NO_MEMORY;                                \
    } while (0)

    for (int j = 0; j < f->n_parts; j++) {
        const kcat_part *part = &f->parts[j];
        switch (part->op) {
        case KCAT_LITERAL:
            PUT(part->text, part->len);
            break;
        case KCAT_OFFSET:
            PUT_INT(r->offset);
            break;
        case KCAT_TIMESTAMP:
            PUT_INT(r->timestamp);
            break;
        case KCAT_KEY:
            if (r->key_len < 0)
                PUT(f->null, f->null_len);
            else
                PUT(r->key, r->key_len);
            break;
        case KCAT_VALUE:
            if (r->value_len < 0)
                PUT(f->null, f->null_len);
            else
                PUT(r->value, r->value_len);
            break;
        case KCAT_KEY_LEN:
            PUT_INT(r->key_len < 0 ? -1 : r->key_len);
            break;
        case KCAT_VALUE_LEN:
            PUT_INT(r->value_len < 0 ? -1 : r->value_len);
            break;
        case KCAT_VALUE_LEN_BE32: {
            /* kcat writes the length as a uint32 cast of a ssize_t: its low 32 bits */
            const uint32_t v = (uint32_t)(r->value_len < 0 ? -1 : r->value_len);
            const uint8_t be[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
            PUT(be, 4);
            break;
        }
        case KCAT_JSON_KEY:
            PUT_JSON(r->key, r->key_len);
            break;
        case KCAT_JSON_VALUE:
            PUT_JSON(r->value, r->value_len);
            break;
        case KCAT_JSON_TSTYPE: /* (the walker takes magic 2 only: every record has a timestamp type) */
            if (k->append_time)
                PUT("logappend", 9);
            else
                PUT("create", 6);
            break;
        case KCAT_JSON_HEADERS: /* ,"headers":[name,value,...], or nothing for a record without */
            if (r->n_headers == 0)
                break;
            PUT(",\"headers\":[", 12);
            at = r->headers;
            for (int64_t n = 0; n < r->n_headers; n++) {
                walk_header(p, r->end, &at, &h);
                if (n)
                    PUT(",", 1);
                PUT_JSON(h.key, h.key_len);
                PUT(",", 1);
                PUT_JSON(h.value, h.value_len);
            }
            PUT("]", 1);
            break;
        case KCAT_HEADERS:
            at = r->headers;
            for (int64_t n = 0; n < r->n_headers; n++) {
                walk_header(p, r->end, &at, &h);
                if (n)
                    PUT(",", 1);
                PUT(h.key, h.key_len);
                PUT("=", 1);
                if (h.value_len < 0)
                    PUT("NULL", 4);
                else
                    PUT(h.value, h.value_len);
            }
            break;
        }
    }
    return RENDER_OK;
#undef ROOM
#undef PUT
#undef PUT_INT
#undef PUT_JSON
}

int
kfs_render_kcat_records(const uint8_t *p, Py_ssize_t end, Py_ssize_t count, int64_t base_offset,
                        int64_t base_timestamp, int append_time, int64_t log_append_time, const kcat_format *f,
                        int64_t first, int64_t stop, int64_t last, rawbuf *out, rawbuf *marks)
{
    const kcat_how how = {f, append_time, out->len};
    return render_shown_lines(p, end, count, base_offset, base_timestamp, append_time, log_append_time, first, stop,
                              last, kcat_line, &how, out, marks);
}
