/* The limits storage's batch checks hold a batch to, and those checks, as the compiled walks make them
 * (views/walk_v2_run.c, storage/find_v2_batch.c, storage/record_at.c): one copy of each, next to the
 * Python they mirror (kfs/storage/batch_walk.py _walk and _offsets_problem, compression.py). */

#ifndef KFS_BATCH_LIMITS_H
#define KFS_BATCH_LIMITS_H

#include "../native.h"
#include "../record/crc32c.h"
#include "../record/lz4_frame.h"

#define KFS_MAX_SEGMENT_BYTES INT64_C(2147483647)              /* batch_walk.py MAX_SEGMENT_BYTES */
#define KFS_MAX_RELATIVE_OFFSET INT64_C(2147483647)            /* batch_walk.py MAX_RELATIVE_OFFSET */
#define KFS_MAX_BATCH_ON_DISK ((INT64_C(64) << 20) + 61)       /* MAX_BATCH_BYTES + HEADER_PROBE_SIZE */
#define KFS_MAX_BATCH_RECORDS (1 << 20)                        /* compression.py MAX_BATCH_RECORDS */
#define KFS_MIN_V2_LENGTH 49 /* RECORD_BATCH_OVERHEAD - LOG_OVERHEAD: the smallest v2 length field */

/* The bytes the v2 batch at b takes on disk (12 + its length field), or -1 when its length is below
 * the smallest v2 batch's or its magic is not 2: damage or a legacy batch, the Python walk's. */
static inline int64_t
v2_batch_size(const uint8_t *b)
{
    const int32_t length = (int32_t)kfs_load_be32(b + 8);
    if (length < KFS_MIN_V2_LENGTH || b[16] != 2)
        return -1;
    return 12 + (int64_t)length;
}

/* The batch's last offset (its base offset plus LastOffsetDelta) into *last: 0, or -1 past int64. */
static inline int
v2_last_offset(const uint8_t *b, int64_t base, int64_t *last)
{
    return __builtin_add_overflow(base, (int64_t)(int32_t)kfs_load_be32(b + 23), last) ? -1 : 0;
}

/* batch_walk.py _offsets_problem finds nothing: the last offset not below the base, the base at or past
 * the segment's, the last within 2**31 - 1 of it, and the base past the last of the batch before. */
static inline int
v2_offsets_placed(int64_t base, int64_t last, int64_t segment_base, int has_previous, int64_t previous)
{
    return !(last < base || base < segment_base || last - segment_base > KFS_MAX_RELATIVE_OFFSET
             || (has_previous && base <= previous));
}

/* The batch's CRC-32C (of everything from its attributes on, `size` bytes in all) is the one it holds
 * (the caller has checked the machine has the instruction). */
static inline int
v2_crc_holds(const uint8_t *b, int64_t size)
{
    return kfs_crc32c_hw(b + 21, (size_t)(size - 21)) == kfs_load_be32(b + 17);
}

/* A compiled walk reads the records of a batch with these attributes: uncompressed, or lz4 when liblz4
 * was loaded (kfs_load_lz4); gzip, snappy and zstd are the Python walk's. */
static inline int
v2_codec_walkable(uint16_t attributes)
{
    const int codec = attributes & 0x07;
    return codec == 0 || (codec == 3 && kfs_lz4_decompress_safe != NULL);
}

/* The records section of the walkable batch of `size` bytes at b, into *section and *len: in place, or
 * its lz4 frame decompressed into scratch. RENDER_OK, RENDER_UNUSUAL (a frame the compiled walks do not
 * read: the Python walk's) or RENDER_NO_MEMORY. */
static inline int
v2_records_section(const uint8_t *b, int64_t size, uint16_t attributes, rawbuf *scratch, const uint8_t **section,
                   Py_ssize_t *len)
{
    *section = b + 61;
    *len = (Py_ssize_t)(size - 61);
    if ((attributes & 0x07) != 3)
        return RENDER_OK;
    const int64_t got = kfs_lz4_frame_into(*section, *len, scratch);
    if (got == RENDER_NO_MEMORY)
        return RENDER_NO_MEMORY;
    if (got < 0)
        return RENDER_UNUSUAL;
    *section = (const uint8_t *)scratch->buf;
    *len = (Py_ssize_t)got;
    return RENDER_OK;
}

#endif /* KFS_BATCH_LIMITS_H */
