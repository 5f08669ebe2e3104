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
 *                             (the pool follows the words); (0, -1): a writer's symbol the reader
 *                             lacks, declined
 *   OP_RECORD                 n, then n child nodes (a field's, or a default's: see below)
 *   OP_ARRAY, OP_MAP          the items' (values') node
 *   OP_UNION_ONE              n, then n nodes, -1 for the null branch (all non-null ones write `column`)
 *   OP_UNION_MEMBERS          n, then n times (member, node), member -1 for the null branch: the value
 *                             goes to child column `member` of the struct column, the others null
 *                             (member -2: a member the query does not show, read past).
 *   OP_INT_DOUBLE, OP_LONG_DOUBLE nothing more (a writer's int or long promoted to the reader's double)
 *   OP_DEFAULT                (offset, length) of a datum in the pool, then the node reading it: a
 *                             reader field the writer schema lacks, its default (schema resolution)
 *   OP_WRITER_PAST            the node (of column -1) reading past a writer's field the reader lacks,
 *                             which Avro's readers skip rather than read: an array or map block given
 *                             with its size in bytes is skipped by that size there, so it is declined
 * A node of column -1 writes nothing: its datum is read past, checked as it would be decoded (a field
 * a query prunes: Spark asked for the struct's other fields). A record's n nodes write each child of its
 * struct once, in any order (a writer's field order, when the program resolves a writer schema to the
 * reader's), a node of column -1 for each field not shown or not the reader's. */

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
    AOP_INT_DOUBLE,  /* int -> float64 (a writer's int read as the reader's double) */
    AOP_LONG_DOUBLE, /* long -> float64 */
    AOP_DEFAULT,     /* a reader field the writer lacks: its default, an Avro datum in the pool, read by a node */
    AOP_WRITER_PAST, /* a writer's field the reader lacks: its node read past, declined on a sized block */
};

#endif /* KFS_AVRO_ARROW_H */
