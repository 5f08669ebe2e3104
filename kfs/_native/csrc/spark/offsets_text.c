/* offsets_text: the decoded JSON-text columns of a `__consumer_offsets` batch's offset commits, written
 * straight from the Arrow key and value arrays into two Arrow string columns, no Python per record.
 *
 * Why: the Spark source filled the columns of Kafka's internal topics a Record at a time with the
 * line decoder of `kfs cat` (kfs.internal_topics.lines): ~8 us of Python a record, 28 times the read
 * itself. Nearly every record of `__consumer_offsets` is an offset commit, whose key and value are
 * a few fixed fields (kfs/internal_topics/offsets_fast.py reads them in Python, with the layouts
 * checked against Kafka's schemas at import). This writes the same text those give:
 *
 *   key    {"type": "OffsetCommitKey", "version": T, "data": {"group": G, "topic": P, "partition": N}}
 *   value  {"type": "OffsetCommitValue", "version": V, "data": {"offset": O, ...}}   (versions 0-3)
 *          null                                                                    (a tombstone)
 *
 * strings as json.encoder.encode_basestring writes them (views/json_text.h). A row is declined (an
 * empty placeholder in both columns, status 1) unless its key is an OffsetCommitKey (record type 0
 * or 1) and its value null or an OffsetCommitValue of version 0-3, each plainly well formed (the
 * checks of offsets_fast.py: no negative length, nothing missing, nothing left over) with strings
 * of valid UTF-8: the Python decoder answers those rows, says what is wrong, or writes the
 * replacement characters Java's String(bytes, UTF_8) would show. */

#include "../native.h"
#include "../record/utf8.h"
#include "../views/json_text.h"

typedef struct {
    char *p;
    size_t len, cap;
} tbuf;

static int
reserve(tbuf *b, size_t need)
{
    if (b->cap - b->len >= need)
        return 0;
    if (need > ((size_t)PY_SSIZE_T_MAX >> 2) - b->len)
        return -1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < need)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline void
put(tbuf *b, const char *s, size_t n)
{
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

#define PUT_LITERAL(b, s) put((b), (s), sizeof(s) - 1)

/* A decimal integer, as str() writes it (sprintf's parsing of its format cost more than the rest of a row). */
static inline void
put_int(tbuf *b, int64_t v)
{
    char digits[20];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    char *d = b->p + b->len;
    if (v < 0)
        *d++ = '-';
    while (n > 0)
        *d++ = digits[--n];
    b->len = (size_t)(d - b->p);
}

static inline int16_t
be16(const uint8_t *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline int32_t
be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t
be64(const uint8_t *p)
{
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

/* A JSON string of n bytes of valid UTF-8 (room reserved by the caller: 6 * n + 32). */
static inline void
put_string(tbuf *b, const uint8_t *s, Py_ssize_t n)
{
    b->len = (size_t)(kfs_write_bytes(b->p + b->len, s, n, n) - b->p);
}

/* The key's text, or -1 (declined). */
static int
commit_key(tbuf *b, const uint8_t *k, Py_ssize_t size)
{
    if (size < 4)
        return -1;
    const int16_t type = be16(k), group_len = be16(k + 2);
    if ((type != 0 && type != 1) || group_len < 0)
        return -1;
    const Py_ssize_t group_end = 4 + group_len;
    if (group_end + 2 > size)
        return -1;
    const int16_t topic_len = be16(k + group_end);
    const Py_ssize_t topic_end = group_end + 2 + topic_len;
    if (topic_len < 0 || topic_end + 4 != size || !valid_utf8(k + 4, group_len)
        || !valid_utf8(k + group_end + 2, topic_len))
        return -1;
    if (reserve(b, 6 * (size_t)size + 160) < 0)
        return -2;
    PUT_LITERAL(b, "{\"type\": \"OffsetCommitKey\", \"version\": ");
    put_int(b, type);
    PUT_LITERAL(b, ", \"data\": {\"group\": ");
    put_string(b, k + 4, group_len);
    PUT_LITERAL(b, ", \"topic\": ");
    put_string(b, k + group_end + 2, topic_len);
    PUT_LITERAL(b, ", \"partition\": ");
    put_int(b, be32(k + topic_end));
    PUT_LITERAL(b, "}}");
    return 0;
}

/* The value's text, or -1 (declined). */
static int
commit_value(tbuf *b, const uint8_t *v, Py_ssize_t size)
{
    if (size < 12)
        return -1;
    const int16_t version = be16(v);
    int64_t offset;
    int32_t leader_epoch = 0;
    int16_t length;
    Py_ssize_t start;
    if (version == 3) {
        if (size < 16)
            return -1;
        offset = be64(v + 2);
        leader_epoch = be32(v + 10);
        length = be16(v + 14);
        start = 16;
    }
    else if (version >= 0 && version <= 2) {
        offset = be64(v + 2);
        length = be16(v + 10);
        start = 12;
    }
    else
        return -1;
    const Py_ssize_t end = start + length;
    if (length < 0 || end + (version == 1 ? 16 : 8) != size || !valid_utf8(v + start, length))
        return -1;
    if (reserve(b, 6 * (size_t)size + 200) < 0)
        return -2;
    PUT_LITERAL(b, "{\"type\": \"OffsetCommitValue\", \"version\": ");
    put_int(b, version);
    PUT_LITERAL(b, ", \"data\": {\"offset\": ");
    put_int(b, offset);
    if (version == 3) {
        PUT_LITERAL(b, ", \"leaderEpoch\": ");
        put_int(b, leader_epoch);
    }
    PUT_LITERAL(b, ", \"metadata\": ");
    put_string(b, v + start, length);
    PUT_LITERAL(b, ", \"commitTimestamp\": ");
    put_int(b, be64(v + end));
    if (version == 1) {
        PUT_LITERAL(b, ", \"expireTimestamp\": ");
        put_int(b, be64(v + end + 8));
    }
    PUT_LITERAL(b, "}}");
    return 0;
}

/* One binary array's buffers, checked to hold `count` rows from `offset`. */
typedef struct {
    Py_buffer validity, offsets, data;
} binary_array;

static int
binary_array_open(const char *which, PyObject *validity, PyObject *offsets, PyObject *data, Py_ssize_t count,
                  Py_ssize_t offset, binary_array *a)
{
    if ((validity != Py_None && PyObject_GetBuffer(validity, &a->validity, PyBUF_SIMPLE) < 0)
        || PyObject_GetBuffer(offsets, &a->offsets, PyBUF_SIMPLE) < 0
        || PyObject_GetBuffer(data, &a->data, PyBUF_SIMPLE) < 0)
        return -1;
    if (count < 0 || offset < 0 || count > PY_SSIZE_T_MAX / 8 - offset - 1
        || a->offsets.len / 4 < offset + count + 1
        || (a->validity.buf != NULL && a->validity.len * 8 < offset + count)) {
        PyErr_Format(PyExc_ValueError, "offsets_text_columns: the %s buffers are shorter than the array", which);
        return -1;
    }
    return 0;
}

static void
binary_array_close(binary_array *a)
{
    if (a->validity.buf != NULL)
        PyBuffer_Release(&a->validity);
    if (a->offsets.buf != NULL)
        PyBuffer_Release(&a->offsets);
    if (a->data.buf != NULL)
        PyBuffer_Release(&a->data);
}

/* Row r of the array: 1 and its bytes, 0 for null, -1 (an exception set) for offsets outside the data. */
static int
binary_row(const binary_array *a, Py_ssize_t r, const uint8_t **s, Py_ssize_t *n)
{
    const uint8_t *bits = a->validity.buf;
    if (bits != NULL && !(bits[r >> 3] >> (r & 7) & 1))
        return 0;
    const uint8_t *offs = a->offsets.buf;
    const int32_t start = (int32_t)kfs_load_le32(offs + 4 * r), end = (int32_t)kfs_load_le32(offs + 4 * r + 4);
    if (start < 0 || end < start || end > a->data.len) {
        PyErr_SetString(PyExc_ValueError, "offsets_text_columns: an offset outside the data");
        return -1;
    }
    *s = (const uint8_t *)a->data.buf + start;
    *n = end - start;
    return 1;
}

static int
end_row(tbuf *offsets, const tbuf *text)
{
    if (text->len > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "offsets_text_columns: the column exceeds Arrow's 32-bit offsets");
        return -1;
    }
    if (reserve(offsets, 4) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    const int32_t end = (int32_t)text->len;
    put(offsets, (const char *)&end, 4);
    return 0;
}

KFS_DOC(kfs_offsets_text_columns_doc,
"offsets_text_columns(count, key_validity, key_offsets, key_data, key_offset,\n"
"                     value_validity, value_offsets, value_data, value_offset)\n"
"    -> (status, key_offsets, key_text, value_offsets, value_text)\n"
"\n"
"The JSON text kfs cat shows for the key and value of each offset commit of a __consumer_offsets\n"
"batch (two Arrow binary arrays, by their buffers and offsets), as two Arrow string columns' int32\n"
"offsets and UTF-8 data. `status` holds a byte per row: 0 written, 1 declined (an empty placeholder\n"
"in both columns: not an OffsetCommitKey with a null value or an OffsetCommitValue of versions 0-3,\n"
"not plainly well formed, or a string that is not valid UTF-8; the Python decoder answers it).");

PyObject *
kfs_offsets_text_columns(PyObject *module, PyObject *args)
{
    (void)module;
    Py_ssize_t count, key_offset, value_offset;
    PyObject *kv, *ko, *kd, *vv, *vo, *vd;
    if (!PyArg_ParseTuple(args, "nOOOnOOOn:offsets_text_columns", &count, &kv, &ko, &kd, &key_offset, &vv, &vo, &vd,
                          &value_offset))
        return NULL;
    binary_array keys = {0}, values = {0};
    tbuf key_offsets = {0}, key_text = {0}, value_offsets = {0}, value_text = {0};
    PyObject *status = NULL, *result = NULL;
    if (binary_array_open("key", kv, ko, kd, count, key_offset, &keys) < 0
        || binary_array_open("value", vv, vo, vd, count, value_offset, &values) < 0)
        goto out;
    status = PyBytes_FromStringAndSize(NULL, count);
    if (status == NULL || end_row(&key_offsets, &key_text) < 0 || end_row(&value_offsets, &value_text) < 0)
        goto out;
    uint8_t *st = (uint8_t *)PyBytes_AS_STRING(status);
    for (Py_ssize_t i = 0; i < count; i++) {
        const uint8_t *k = NULL, *v = NULL;
        Py_ssize_t kn = 0, vn = 0;
        const int has_key = binary_row(&keys, key_offset + i, &k, &kn);
        const int has_value = binary_row(&values, value_offset + i, &v, &vn);
        if (has_key < 0 || has_value < 0)
            goto out;
        const size_t key_mark = key_text.len, value_mark = value_text.len;
        int rc = has_key ? commit_key(&key_text, k, kn) : -1;
        if (rc == 0) {
            if (has_value)
                rc = commit_value(&value_text, v, vn);
            else if (reserve(&value_text, 4) < 0)
                rc = -2;
            else
                PUT_LITERAL(&value_text, "null");
        }
        if (rc == -2) {
            PyErr_NoMemory();
            goto out;
        }
        st[i] = rc != 0;
        if (rc != 0) {
            key_text.len = key_mark;
            value_text.len = value_mark;
        }
        if (end_row(&key_offsets, &key_text) < 0 || end_row(&value_offsets, &value_text) < 0)
            goto out;
    }
    result = Py_BuildValue("(Oy#y#y#y#)", status, key_offsets.p, (Py_ssize_t)key_offsets.len,
                           key_text.p ? key_text.p : "", (Py_ssize_t)key_text.len, value_offsets.p,
                           (Py_ssize_t)value_offsets.len, value_text.p ? value_text.p : "",
                           (Py_ssize_t)value_text.len);
out:
    Py_XDECREF(status);
    binary_array_close(&keys);
    binary_array_close(&values);
    PyMem_Free(key_offsets.p);
    PyMem_Free(key_text.p);
    PyMem_Free(value_offsets.p);
    PyMem_Free(value_text.p);
    return result;
}
