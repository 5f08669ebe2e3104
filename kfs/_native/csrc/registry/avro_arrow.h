/* Registry-framed Avro values straight into the Arrow buffers of Spark's typed column (avro_arrow.c), by a
 * program compiled from the reader schema and the column's Arrow type in Python
 * (kfs/registry/avro_arrow_program.py). The per-row path (kfs.spark.typed: fastavro, a converter,
 * pa.array) stays the reference: a datum this decoder cannot give byte for byte as that path does is
 * declined to it.
 *
 * The program is a bytes object of little-endian int32 words. Header: word 0 the root node's word index,
 * word 1 the word count, word 2 the number of columns, word 3 the word index of the column table. The
 * column table holds, per column, (kind, first child column, child count, nullable): a column's children
 * are numbered consecutively; a column that is not nullable holds its empty value where its parent is null. A node is (op, column, ...):
 *   OP_BOOL .. OP_BYTES       nothing more
 *   OP_FIXED, OP_DEC_BYTES    a size (fixed) or the precision (decimal in bytes)
 *   OP_DEC_FIXED              size, precision
 *   OP_ENUM                   n, then n times (offset, length) of the symbol's UTF-8 in the text pool
 *                             (the pool follows the words)
 *   OP_RECORD                 n, then n child nodes (one per field of the record, in order)
 *   OP_ARRAY, OP_MAP          the items' (values') node
 *   OP_UNION_ONE              n, then n nodes, -1 for the null branch (all non-null ones write `column`)
 *   OP_UNION_MEMBERS          n, then n times (member, node), member -1 for the null branch: the value
 *                             goes to child column `member` of the struct column, the others null
 *                             (member -2: a member the query does not show, read past).
 * A node of column -1 writes nothing: its datum is read past, checked as it would be decoded (a field
 * a query prunes: Spark asked for the struct's other fields). A record's n nodes then write its
 * struct's children in order, a node of column -1 for each field not shown. */

#ifndef KFS_AVRO_ARROW_H
#define KFS_AVRO_ARROW_H

#include "../native.h"

enum { /* column kinds: the Arrow layout */
    ACOL_BOOL = 1,
    ACOL_I32,
    ACOL_I64,
    ACOL_F32,
    ACOL_F64,
    ACOL_BIN, /* string and binary: int32 offsets and data */
    ACOL_DEC, /* decimal128 */
    ACOL_STRUCT,
    ACOL_LIST,
    ACOL_MAP, /* children: the keys (ACOL_BIN), the values */
};

enum { /* nodes: what is read, into which column */
    AOP_BOOL = 1,
    AOP_INT,         /* int -> int32 (also a date) */
    AOP_INT_LONG,    /* int -> int64 ([int, long]) */
    AOP_LONG,        /* long -> int64 (also a timestamp in µs) */
    AOP_LONG_MILLIS, /* long milliseconds -> int64 µs */
    AOP_FLOAT,       /* float -> float32 */
    AOP_FLOAT_DOUBLE,
    AOP_DOUBLE,
    AOP_STRING,
    AOP_BYTES,
    AOP_FIXED,
    AOP_DEC_BYTES,
    AOP_DEC_FIXED,
    AOP_ENUM,
    AOP_RECORD,
    AOP_ARRAY,
    AOP_MAP,
    AOP_UNION_ONE,
    AOP_UNION_MEMBERS,
};

#endif /* KFS_AVRO_ARROW_H */
