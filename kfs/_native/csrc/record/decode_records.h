/* The records of a v2 records section as Record objects (decode_records.c). */

#ifndef KFS_DECODE_RECORDS_H
#define KFS_DECODE_RECORDS_H

#include "../native.h"

/* The record at section[at] (of a section of len bytes) as decode_v2_records makes it: a new Record, or
 * NULL with either an exception set or *why saying what is malformed. */
KFS_HIDDEN PyObject *kfs_decode_one_record(const kfs_state *st, const uint8_t *section, Py_ssize_t len,
                                           Py_ssize_t at, int64_t base_offset, int64_t base_timestamp,
                                           PyObject *timestamp_type, PyObject *log_append_time, const char **why);

#endif /* KFS_DECODE_RECORDS_H */
