/* The JSON text `kfs cat` shows for an offset commit's key and value (kfs.internal_topics.offsets_fast's
 * `offsets_key` / `offset_commit_value_jsonl` and render.jsonl: the same checks, the same text), written
 * at a char pointer, for the two renderers that take commits in C: views/render_jsonl.c (JSON lines of
 * `__consumer_offsets`) and spark/offsets_text.c (Spark's decoded columns).
 *
 *   key    {"type": "OffsetCommitKey", "version": T, "data": {"group": G, "topic": P, "partition": N}}
 *   value  {"type": "OffsetCommitValue", "version": V, "data": {"offset": O, ...}}   (versions 0-3)
 *
 * Each writer returns the end of what it wrote, or NULL (nothing written: not an OffsetCommitKey of
 * record type 0 or 1 / an OffsetCommitValue of version 0-3, not plainly well formed, or a string that
 * is not valid UTF-8, which the Python decoder shows with replacement characters). The caller reserves
 * COMMIT_JSON_ROOM(n) bytes for n bytes of key or value. */

#ifndef KFS_OFFSETS_JSON_H
#define KFS_OFFSETS_JSON_H

#include "../native.h"
#include "../record/utf8.h"
#include "json_text.h"

#define COMMIT_JSON_ROOM(n) (6 * (size_t)(n) + 200)

#define COMMIT_PUT_LITERAL(d, s) (memcpy((d), (s), sizeof(s) - 1), (d) += sizeof(s) - 1)

static inline int16_t
commit_be16(const uint8_t *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* The key's text at d. */
static inline char *
commit_key_json(char *d, const uint8_t *k, Py_ssize_t size)
{
    if (size < 4)
        return NULL;
    const int16_t type = commit_be16(k), group_len = commit_be16(k + 2);
    if ((type != 0 && type != 1) || group_len < 0)
        return NULL;
    const Py_ssize_t group_end = 4 + group_len;
    if (group_end + 2 > size)
        return NULL;
    const int16_t topic_len = commit_be16(k + group_end);
    const Py_ssize_t topic_end = group_end + 2 + topic_len;
    if (topic_len < 0 || topic_end + 4 != size || !valid_utf8(k + 4, group_len)
        || !valid_utf8(k + group_end + 2, topic_len))
        return NULL;
    COMMIT_PUT_LITERAL(d, "{\"type\": \"OffsetCommitKey\", \"version\": ");
    d = write_int64(d, type);
    COMMIT_PUT_LITERAL(d, ", \"data\": {\"group\": ");
    d = kfs_write_bytes(d, k + 4, group_len, group_len);
    COMMIT_PUT_LITERAL(d, ", \"topic\": ");
    d = kfs_write_bytes(d, k + group_end + 2, topic_len, topic_len);
    COMMIT_PUT_LITERAL(d, ", \"partition\": ");
    d = write_int64(d, (int32_t)kfs_load_be32(k + topic_end));
    COMMIT_PUT_LITERAL(d, "}}");
    return d;
}

/* The value's text at d. */
static inline char *
commit_value_json(char *d, const uint8_t *v, Py_ssize_t size)
{
    if (size < 12)
        return NULL;
    const int16_t version = commit_be16(v);
    int64_t offset;
    int32_t leader_epoch = 0;
    int16_t length;
    Py_ssize_t start;
    if (version == 3) {
        if (size < 16)
            return NULL;
        offset = (int64_t)kfs_load_be64(v + 2);
        leader_epoch = (int32_t)kfs_load_be32(v + 10);
        length = commit_be16(v + 14);
        start = 16;
    }
    else if (version >= 0 && version <= 2) {
        offset = (int64_t)kfs_load_be64(v + 2);
        length = commit_be16(v + 10);
        start = 12;
    }
    else
        return NULL;
    const Py_ssize_t end = start + length;
    if (length < 0 || end + (version == 1 ? 16 : 8) != size || !valid_utf8(v + start, length))
        return NULL;
    COMMIT_PUT_LITERAL(d, "{\"type\": \"OffsetCommitValue\", \"version\": ");
    d = write_int64(d, version);
    COMMIT_PUT_LITERAL(d, ", \"data\": {\"offset\": ");
    d = write_int64(d, offset);
    if (version == 3) {
        COMMIT_PUT_LITERAL(d, ", \"leaderEpoch\": ");
        d = write_int64(d, leader_epoch);
    }
    COMMIT_PUT_LITERAL(d, ", \"metadata\": ");
    d = kfs_write_bytes(d, v + start, length, length);
    COMMIT_PUT_LITERAL(d, ", \"commitTimestamp\": ");
    d = write_int64(d, (int64_t)kfs_load_be64(v + end));
    if (version == 1) {
        COMMIT_PUT_LITERAL(d, ", \"expireTimestamp\": ");
        d = write_int64(d, (int64_t)kfs_load_be64(v + end + 8));
    }
    COMMIT_PUT_LITERAL(d, "}}");
    return d;
}

#endif /* KFS_OFFSETS_JSON_H */
