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
 * (views/offsets_json.h writes them, for kfs cat's lines too; strings as
 * json.encoder.encode_basestring writes them). A row is declined (an
 * empty placeholder in both columns, status 1) unless its key is an OffsetCommitKey (record type 0
 * or 1) and its value null or an OffsetCommitValue of version 0-3, each plainly well formed (the
 * checks of offsets_fast.py: no negative length, nothing missing, nothing left over) with strings
 * of valid UTF-8: the Python decoder answers those rows, says what is wrong, or writes the
 * replacement characters Java's String(bytes, UTF_8) would show. */

#include "../registry/arrow_build.h"
#include "../views/offsets_json.h"

/* A key's or value's text appended to b by `write` (commit_key_json, commit_value_json): 0, -1 declined, -2
 * no memory. */
static int
commit_text(arrow_out *o, abuf *b, char *(*write)(char *, const uint8_t *, Py_ssize_t), const uint8_t *s,
            Py_ssize_t n)
{
    if (ab_grow(o, b, COMMIT_JSON_ROOM(n)) < 0)
        return -2;
    char *end = write((char *)b->p + b->len, s, n);
    if (end == NULL)
        return -1;
    b->len = (size_t)(end - (char *)b->p);
    return 0;
}

/* One binary array's buffers, checked to hold `count` rows from `offset` (ab_array_buffers). */
typedef struct {
    Py_buffer validity, offsets, data;
} binary_array;

static int
binary_array_open(PyObject *validity, PyObject *offsets, PyObject *data, Py_ssize_t count, Py_ssize_t offset,
                  binary_array *a)
{
    Py_buffer no_skip = {0};
    if (PyObject_GetBuffer(offsets, &a->offsets, PyBUF_SIMPLE) < 0
        || PyObject_GetBuffer(data, &a->data, PyBUF_SIMPLE) < 0)
        return -1;
    return ab_array_buffers("offsets_text_columns", count, offset, &a->offsets, validity, &a->validity, Py_None,
                            &no_skip) ? 0 : -1;
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

/* The end of the row just written to `text`, appended to `offsets`. */
static int
end_row(arrow_out *o, abuf *offsets, const abuf *text)
{
    if (text->len > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "offsets_text_columns: the column exceeds Arrow's 32-bit offsets");
        return -1;
    }
    const int32_t end = (int32_t)text->len;
    if (ab_put_bytes(o, offsets, &end, 4) < 0) {
        PyErr_NoMemory();
        return -1;
    }
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
    arrow_out o = {0};
    abuf key_offsets = {0}, key_text = {0}, value_offsets = {0}, value_text = {0};
    PyObject *status = NULL, *result = NULL;
    if (binary_array_open(kv, ko, kd, count, key_offset, &keys) < 0
        || binary_array_open(vv, vo, vd, count, value_offset, &values) < 0)
        goto out;
    status = PyBytes_FromStringAndSize(NULL, count);
    if (status == NULL || end_row(&o, &key_offsets, &key_text) < 0 || end_row(&o, &value_offsets, &value_text) < 0)
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
        int rc = has_key ? commit_text(&o, &key_text, commit_key_json, k, kn) : -1;
        if (rc == 0) {
            if (has_value)
                rc = commit_text(&o, &value_text, commit_value_json, v, vn);
            else if (ab_put_bytes(&o, &value_text, "null", 4) < 0)
                rc = -2;
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
        if (end_row(&o, &key_offsets, &key_text) < 0 || end_row(&o, &value_offsets, &value_text) < 0)
            goto out;
    }
    result = Py_BuildValue("(ONNNN)", status, ab_bytes(&key_offsets, key_offsets.len), ab_bytes(&key_text, key_text.len),
                           ab_bytes(&value_offsets, value_offsets.len), ab_bytes(&value_text, value_text.len));
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

/* ---- the typed columns (kfs.spark.internal_types): each commit's fields as Arrow buffers ---------------- */

/* A string column's row appended: its bytes to `data`, its end to `offsets`. */
static int
string_row(arrow_out *o, abuf *offsets, abuf *data, const uint8_t *s, Py_ssize_t n)
{
    if (n > 0 && ab_put_bytes(o, data, s, (size_t)n) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return end_row(o, offsets, data);
}

enum { KEY_TYPE, GROUP_OFFSETS, GROUP_DATA, TOPIC_OFFSETS, TOPIC_DATA, PARTITION, HAS_VALUE, VALUE_VERSION,
       OFFSET, LEADER_EPOCH, METADATA_OFFSETS, METADATA_DATA, COMMIT_TIMESTAMP, EXPIRE_TIMESTAMP, TYPED_BUFFERS };

KFS_DOC(kfs_offsets_typed_columns_doc,
"offsets_typed_columns(count, key_validity, key_offsets, key_data, key_offset,\n"
"                      value_validity, value_offsets, value_data, value_offset)\n"
"    -> (status, key_type, group_offsets, group_data, topic_offsets, topic_data, partition,\n"
"        has_value, value_version, offset, leader_epoch, metadata_offsets, metadata_data,\n"
"        commit_timestamp, expire_timestamp)\n"
"\n"
"The fields of each offset commit of a __consumer_offsets batch, as Arrow buffers (little-endian: int16\n"
"record type and value version, int32 partition and leader epoch, int64 offset and timestamps; int32\n"
"offsets and UTF-8 data of group, topic and metadata; a byte per row for has_value, 0 for a tombstone).\n"
"`status` as offsets_text_columns': a declined row (1) holds zeros and empty strings.");

PyObject *
kfs_offsets_typed_columns(PyObject *module, PyObject *args)
{
    (void)module;
    Py_ssize_t count, key_offset, value_offset;
    PyObject *kv, *ko, *kd, *vv, *vo, *vd;
    if (!PyArg_ParseTuple(args, "nOOOnOOOn:offsets_typed_columns", &count, &kv, &ko, &kd, &key_offset, &vv, &vo,
                          &vd, &value_offset))
        return NULL;
    binary_array keys = {0}, values = {0};
    arrow_out o = {0};
    abuf b[TYPED_BUFFERS];
    memset(b, 0, sizeof b);
    PyObject *status = NULL, *result = NULL;
    if (binary_array_open(kv, ko, kd, count, key_offset, &keys) < 0
        || binary_array_open(vv, vo, vd, count, value_offset, &values) < 0)
        goto out;
    status = PyBytes_FromStringAndSize(NULL, count);
    if (status == NULL || end_row(&o, &b[GROUP_OFFSETS], &b[GROUP_DATA]) < 0
        || end_row(&o, &b[TOPIC_OFFSETS], &b[TOPIC_DATA]) < 0
        || end_row(&o, &b[METADATA_OFFSETS], &b[METADATA_DATA]) < 0)
        goto out;
    uint8_t *st = (uint8_t *)PyBytes_AS_STRING(status);
    for (Py_ssize_t i = 0; i < count; i++) {
        const uint8_t *k = NULL, *v = NULL;
        Py_ssize_t kn = 0, vn = 0;
        const int has_key = binary_row(&keys, key_offset + i, &k, &kn);
        const int has_value = binary_row(&values, value_offset + i, &v, &vn);
        if (has_key < 0 || has_value < 0)
            goto out;
        commit_key key = {0};
        commit_value value = {0};
        const int ok = has_key && commit_key_parse(k, kn, &key) && (!has_value || commit_value_parse(v, vn, &value));
        st[i] = !ok;
        if (!ok) {
            memset(&key, 0, sizeof key);
            memset(&value, 0, sizeof value);
        }
        const uint8_t present = ok && has_value;
        if (ab_put_bytes(&o, &b[KEY_TYPE], &key.type, 2) < 0 || ab_put_bytes(&o, &b[PARTITION], &key.partition, 4) < 0
            || ab_put_bytes(&o, &b[HAS_VALUE], &present, 1) < 0
            || ab_put_bytes(&o, &b[VALUE_VERSION], &value.version, 2) < 0
            || ab_put_bytes(&o, &b[OFFSET], &value.offset, 8) < 0
            || ab_put_bytes(&o, &b[LEADER_EPOCH], &value.leader_epoch, 4) < 0
            || ab_put_bytes(&o, &b[COMMIT_TIMESTAMP], &value.commit_timestamp, 8) < 0
            || ab_put_bytes(&o, &b[EXPIRE_TIMESTAMP], &value.expire_timestamp, 8) < 0) {
            PyErr_NoMemory();
            goto out;
        }
        if (string_row(&o, &b[GROUP_OFFSETS], &b[GROUP_DATA], key.group, key.group_len) < 0
            || string_row(&o, &b[TOPIC_OFFSETS], &b[TOPIC_DATA], key.topic, key.topic_len) < 0
            || string_row(&o, &b[METADATA_OFFSETS], &b[METADATA_DATA], value.metadata, value.metadata_len) < 0)
            goto out;
    }
    result = PyTuple_New(1 + TYPED_BUFFERS);
    if (result == NULL)
        goto out;
    Py_INCREF(status);
    PyTuple_SET_ITEM(result, 0, status);
    for (int j = 0; j < TYPED_BUFFERS; j++) {
        PyObject *buffer = ab_bytes(&b[j], b[j].len);
        if (buffer == NULL) {
            Py_CLEAR(result);
            goto out;
        }
        PyTuple_SET_ITEM(result, 1 + j, buffer);
    }
out:
    Py_XDECREF(status);
    binary_array_close(&keys);
    binary_array_close(&values);
    for (int j = 0; j < TYPED_BUFFERS; j++)
        PyMem_Free(b[j].p);
    return result;
}
