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

/* A run's limits (views/walk_v2_run.c's and spark/arrow_columns.c's runs of plain batches): the segment's
 * base offset, the walk's bound on last offsets, the reader's range [first, stop), read_committed. */
typedef struct {
    int64_t segment_base, max_last, first, stop;
    int read_committed;
} v2_run_limits;

/* The plain batch a run takes next, its records section read (in place, or lz4 into the scratch). */
typedef struct {
    int64_t base, last, size, base_ts, max_ts;
    int32_t count;
    int append_time;
    const uint8_t *section;
    Py_ssize_t section_len;
} v2_plain_batch;

enum { V2_RUN_TAKE = 0, V2_RUN_PASS = 1, V2_RUN_END = 2 };

/* The batch at b (avail bytes of the window from it) as a run of plain batches sees it, after the batch
 * before (has_previous, previous: its last offset): V2_RUN_TAKE with *out whole; V2_RUN_PASS when it
 * ends before the range (passed over unread, as selected_batches does; base, last and size set);
 * V2_RUN_END where the run ends (not whole in the window, not magic 2, compressed but not lz4, a control
 * batch, a transaction to check under read_committed, offsets out of place or at max_last, its base at
 * stop, a bad record count or CRC, a frame the compiled walks do not read: the Python walk's batch);
 * RENDER_NO_MEMORY. The one copy of those checks, for both runs. */
static inline int
v2_run_next(const uint8_t *b, Py_ssize_t avail, const v2_run_limits *lim, int has_previous, int64_t previous,
            rawbuf *scratch, v2_plain_batch *out)
{
    if (avail < 61)
        return V2_RUN_END;
    const int64_t base = (int64_t)kfs_load_be64(b);
    const int64_t size = v2_batch_size(b);
    if (size < 0 || size > avail || size > KFS_MAX_BATCH_ON_DISK)
        return V2_RUN_END;
    const uint16_t attributes = (uint16_t)((b[21] << 8) | b[22]);
    if (!v2_codec_walkable(attributes) || (attributes & 0x20) || ((attributes & 0x10) && lim->read_committed))
        return V2_RUN_END; /* compressed but not lz4, a control batch, a transaction to check: the Python walk's */
    int64_t last;
    if (v2_last_offset(b, base, &last) < 0)
        return V2_RUN_END;
    if (!v2_offsets_placed(base, last, lim->segment_base, has_previous, previous) || last >= lim->max_last
        || base >= lim->stop)
        return V2_RUN_END;
    out->base = base;
    out->last = last;
    out->size = size;
    if (last < lim->first)
        return V2_RUN_PASS;
    const int32_t count = (int32_t)kfs_load_be32(b + 57);
    if (count <= 0 || count > KFS_MAX_BATCH_RECORDS)
        return V2_RUN_END;
    if (!v2_crc_holds(b, size))
        return V2_RUN_END;
    out->count = count;
    out->append_time = (attributes & 0x08) != 0;
    out->base_ts = (int64_t)kfs_load_be64(b + 27);
    out->max_ts = (int64_t)kfs_load_be64(b + 35);
    const int got = v2_records_section(b, size, attributes, scratch, &out->section, &out->section_len);
    if (got == RENDER_NO_MEMORY)
        return RENDER_NO_MEMORY;
    return got == RENDER_OK ? V2_RUN_TAKE : V2_RUN_END;
}

#endif /* KFS_BATCH_LIMITS_H */
