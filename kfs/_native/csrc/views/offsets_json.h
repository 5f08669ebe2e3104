/* The JSON text `kfs cat` shows for an offset commit's key and value (kfs.internal_topics.offsets_fast's
 * `offsets_key` / `offset_commit_value_jsonl` and render.jsonl: the same checks, the same text), written
 * at a char pointer, for the two renderers that take commits in C: views/render_jsonl.c (JSON lines of
 * `__consumer_offsets`) and spark/offsets_text.c (Spark's decoded columns); and the parsers under them,
 * which spark/offsets_text.c also uses for the typed columns (commit_key_parse, commit_value_parse).
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

/* An OffsetCommitKey's fields, pointing into its bytes. */
typedef struct {
    int16_t type;
    int16_t group_len, topic_len;
    const uint8_t *group, *topic;
    int32_t partition;
} commit_key;

/* An OffsetCommitValue's fields (versions 0-3), pointing into its bytes; leader_epoch is set in version 3,
 * expire_timestamp in version 1. */
typedef struct {
    int16_t version;
    int16_t metadata_len;
    const uint8_t *metadata;
    int64_t offset, commit_timestamp, expire_timestamp;
    int32_t leader_epoch;
} commit_value;

/* 1 and the key's fields when k is an OffsetCommitKey (record type 0 or 1) plainly well formed with strings
 * of valid UTF-8, else 0. */
static inline int
commit_key_parse(const uint8_t *k, Py_ssize_t size, commit_key *out)
{
    if (size < 4)
        return 0;
    const int16_t type = commit_be16(k), group_len = commit_be16(k + 2);
    if ((type != 0 && type != 1) || group_len < 0)
        return 0;
    const Py_ssize_t group_end = 4 + group_len;
    if (group_end + 2 > size)
        return 0;
    const int16_t topic_len = commit_be16(k + group_end);
    const Py_ssize_t topic_end = group_end + 2 + topic_len;
    if (topic_len < 0 || topic_end + 4 != size || !valid_utf8(k + 4, group_len)
        || !valid_utf8(k + group_end + 2, topic_len))
        return 0;
    out->type = type;
    out->group = k + 4;
    out->group_len = group_len;
    out->topic = k + group_end + 2;
    out->topic_len = topic_len;
    out->partition = (int32_t)kfs_load_be32(k + topic_end);
    return 1;
}

/* 1 and the value's fields when v is an OffsetCommitValue of version 0-3 plainly well formed with valid
 * UTF-8 metadata, else 0. */
static inline int
commit_value_parse(const uint8_t *v, Py_ssize_t size, commit_value *out)
{
    if (size < 12)
        return 0;
    const int16_t version = commit_be16(v);
    int32_t leader_epoch = -1;
    int16_t length;
    Py_ssize_t start;
    if (version == 3) {
        if (size < 16)
            return 0;
        leader_epoch = (int32_t)kfs_load_be32(v + 10);
        length = commit_be16(v + 14);
        start = 16;
    }
    else if (version >= 0 && version <= 2) {
        length = commit_be16(v + 10);
        start = 12;
    }
    else
        return 0;
    const Py_ssize_t end = start + length;
    if (length < 0 || end + (version == 1 ? 16 : 8) != size || !valid_utf8(v + start, length))
        return 0;
    out->version = version;
    out->offset = (int64_t)kfs_load_be64(v + 2);
    out->leader_epoch = leader_epoch;
    out->metadata = v + start;
    out->metadata_len = length;
    out->commit_timestamp = (int64_t)kfs_load_be64(v + end);
    out->expire_timestamp = version == 1 ? (int64_t)kfs_load_be64(v + end + 8) : -1;
    return 1;
}

/* The key's text at d. */
static inline char *
commit_key_json(char *d, const uint8_t *k, Py_ssize_t size)
{
    commit_key key;
    if (!commit_key_parse(k, size, &key))
        return NULL;
    COMMIT_PUT_LITERAL(d, "{\"type\": \"OffsetCommitKey\", \"version\": ");
    d = write_int64(d, key.type);
    COMMIT_PUT_LITERAL(d, ", \"data\": {\"group\": ");
    d = kfs_write_bytes(d, key.group, key.group_len, key.group_len);
    COMMIT_PUT_LITERAL(d, ", \"topic\": ");
    d = kfs_write_bytes(d, key.topic, key.topic_len, key.topic_len);
    COMMIT_PUT_LITERAL(d, ", \"partition\": ");
    d = write_int64(d, key.partition);
    COMMIT_PUT_LITERAL(d, "}}");
    return d;
}

/* The value's text at d. */
static inline char *
commit_value_json(char *d, const uint8_t *v, Py_ssize_t size)
{
    commit_value value;
    if (!commit_value_parse(v, size, &value))
        return NULL;
    COMMIT_PUT_LITERAL(d, "{\"type\": \"OffsetCommitValue\", \"version\": ");
    d = write_int64(d, value.version);
    COMMIT_PUT_LITERAL(d, ", \"data\": {\"offset\": ");
    d = write_int64(d, value.offset);
    if (value.version == 3) {
        COMMIT_PUT_LITERAL(d, ", \"leaderEpoch\": ");
        d = write_int64(d, value.leader_epoch);
    }
    COMMIT_PUT_LITERAL(d, ", \"metadata\": ");
    d = kfs_write_bytes(d, value.metadata, value.metadata_len, value.metadata_len);
    COMMIT_PUT_LITERAL(d, ", \"commitTimestamp\": ");
    d = write_int64(d, value.commit_timestamp);
    if (value.version == 1) {
        COMMIT_PUT_LITERAL(d, ", \"expireTimestamp\": ");
        d = write_int64(d, value.expire_timestamp);
    }
    COMMIT_PUT_LITERAL(d, "}}");
    return d;
}

#endif /* KFS_OFFSETS_JSON_H */
