/* The limits storage's batch checks hold a batch to, as the compiled walks make them. */

#ifndef KFS_BATCH_LIMITS_H
#define KFS_BATCH_LIMITS_H

#include <stdint.h>

/* The batch checks of kfs/storage/batch_walk.py (_walk, _offsets_problem) and compression.py, as the
 * compiled walks make them (walk_v2_run.c, find_v2_batch.c, v2_record_at in decode_records.c). */
#define KFS_MAX_SEGMENT_BYTES INT64_C(2147483647)              /* batch_walk.py MAX_SEGMENT_BYTES */
#define KFS_MAX_RELATIVE_OFFSET INT64_C(2147483647)            /* batch_walk.py MAX_RELATIVE_OFFSET */
#define KFS_MAX_BATCH_ON_DISK ((INT64_C(64) << 20) + 61)       /* MAX_BATCH_BYTES + HEADER_PROBE_SIZE */
#define KFS_MAX_BATCH_RECORDS (1 << 20)                        /* compression.py MAX_BATCH_RECORDS */
#define KFS_MIN_V2_LENGTH 49 /* RECORD_BATCH_OVERHEAD - LOG_OVERHEAD: the smallest v2 length field */

#endif /* KFS_BATCH_LIMITS_H */
