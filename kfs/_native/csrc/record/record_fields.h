/* A record's fields as a records section holds them: the varints, and the smallest sizes.
 *
 * Record, as DefaultRecord.java writes it (varints zigzag-encoded, as in protobuf):
 *
 *     Length          varint   (bytes after this field)
 *     Attributes      int8     (unused)
 *     TimestampDelta  varlong  (from BaseTimestamp)
 *     OffsetDelta     varint   (from BaseOffset)
 *     KeyLength       varint   (-1: null key)
 *     Key             bytes
 *     ValueLength     varint   (-1: null value)
 *     Value           bytes
 *     HeadersCount    varint
 *     Headers         { KeyLength varint | Key utf-8 | ValueLength varint (-1: null) | Value bytes }*
 */

#ifndef KFS_RECORD_FIELDS_H
#define KFS_RECORD_FIELDS_H

#include "../native.h"

/* Python's reader (default_batch._varint) accepts up to 10 bytes whatever the 10th holds, so a
 * varint's value before zigzag decoding can have up to 70 bits: `lo` holds the low 64, `hi` the
 * rest. hi != 0 means the decoded value does not fit in an int64 (Kafka never writes one). */
typedef struct {
    uint64_t lo;
    unsigned hi;
} varint_t;

enum { VARINT_OK = 0, VARINT_TRUNCATED = -1, VARINT_TOO_LONG = -2 };

/* The varint at p[*pos], which must end at or before p[end]; advances *pos past it. */
static inline int
read_varint(const uint8_t *p, Py_ssize_t end, Py_ssize_t *pos, varint_t *v)
{
    Py_ssize_t i = *pos;
    uint64_t r = 0;
    uint8_t b;

    if (i < end && p[i] < 0x80) { /* nearly every length, delta and count fits in one byte */
        v->lo = p[i];
        v->hi = 0;
        *pos = i + 1;
        return VARINT_OK;
    }
    for (int shift = 0; shift < 63; shift += 7) { /* bytes 1 to 9: bits 0-62 */
        if (i >= end)
            return VARINT_TRUNCATED;
        b = p[i++];
        r |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            v->lo = r;
            v->hi = 0;
            *pos = i;
            return VARINT_OK;
        }
    }
    if (i >= end) /* byte 10: bit 63, and bits 64-69 in hi */
        return VARINT_TRUNCATED;
    b = p[i++];
    if (b >= 0x80)
        return VARINT_TOO_LONG;
    v->lo = r | ((uint64_t)(b & 1) << 63);
    v->hi = b >> 1;
    *pos = i;
    return VARINT_OK;
}

static inline int64_t
zigzag(uint64_t v)
{
    return (int64_t)((v >> 1) ^ (~(v & 1) + 1));
}

/* A length or count: negative ones, however long, stay negative (null, or an error where a null is
 * not allowed); positive ones too long for an int64 become INT64_MAX (past any end). */
static inline int64_t
varint_length(const varint_t *v)
{
    if (v->hi)
        return (v->lo & 1) ? -1 : INT64_MAX;
    return zigzag(v->lo);
}

#define MIN_RECORD_SIZE 7 /* one byte for each of Length ... HeadersCount */
#define MIN_HEADER_SIZE 2 /* KeyLength, ValueLength */

#endif /* KFS_RECORD_FIELDS_H */
