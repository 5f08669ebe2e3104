/* Avro's binary encoding as Java's BinaryDecoder reads it, over hostile bytes: the varints, lengths and
 * the map-key duplicate test that both compiled Avro readers share, the JSON renderer (avro_json.c) and
 * the Arrow decoder (avro_arrow.c), so that the two decline exactly the same datums. Each reads at *p,
 * never past end, and returns AVRO_OK, or AVRO_DECLINE where the Python path must answer. */

#ifndef KFS_AVRO_BINARY_H
#define KFS_AVRO_BINARY_H

#include "../native.h"

enum { AVRO_OK = 0, AVRO_DECLINE = -1 };

/* A zigzag varint as Java's BinaryDecoder takes it: at most 10 bytes, the tenth 0 or 1. */
static inline int
avro_read_long(const uint8_t **p, const uint8_t *end, int64_t *v)
{
    uint64_t n = 0;
    for (int shift = 0;; shift += 7) {
        if (*p >= end)
            return AVRO_DECLINE;
        const uint8_t b = *(*p)++;
        if (shift == 63 && b > 1)
            return AVRO_DECLINE;
        n |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
    }
    *v = (int64_t)((n >> 1) ^ (0 - (n & 1)));
    return AVRO_OK;
}

/* An int (and a union or enum index) as Java's BinaryDecoder.readInt takes it: at most 5 bytes, of
 * which the fifth's bits past 32 are dropped (the zigzag of the low 32 bits); a longer one is refused
 * ("Invalid int encoding"). kfs.registry.avro._Skipper.java_int is its twin. */
static inline int
avro_read_int(const uint8_t **p, const uint8_t *end, int32_t *v)
{
    uint32_t n = 0;
    for (int shift = 0;; shift += 7) {
        if (*p >= end || shift > 28)
            return AVRO_DECLINE;
        const uint8_t b = *(*p)++;
        n |= (uint32_t)(b & 0x7F) << shift; /* (at shift 28, the byte's bits past 32 are shifted out) */
        if (!(b & 0x80))
            break;
    }
    *v = (int32_t)((n >> 1) ^ (0U - (n & 1)));
    return AVRO_OK;
}

/* A length (of bytes, a string, a map key) that the datum holds; declined when negative or past its end. */
static inline int
avro_read_length(const uint8_t **p, const uint8_t *end, Py_ssize_t *n)
{
    int64_t v;
    if (avro_read_long(p, end, &v) < 0 || v < 0 || v > end - *p)
        return AVRO_DECLINE;
    *n = (Py_ssize_t)v;
    return AVRO_OK;
}

/* A map key's bytes. */
typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} avro_span;

static inline int
avro_span_order(const void *a, const void *b)
{
    const avro_span *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return memcmp(x->p, y->p, (size_t)x->n);
}

/* Whether any key is given twice (a Python dict keeps one of them); sorts `keys` when there are many. */
static inline int
avro_has_duplicates(avro_span *keys, Py_ssize_t n)
{
    if (n < 2)
        return 0;
    if (n <= 16) {
        for (Py_ssize_t i = 1; i < n; i++)
            for (Py_ssize_t j = 0; j < i; j++)
                if (keys[i].n == keys[j].n && memcmp(keys[i].p, keys[j].p, (size_t)keys[i].n) == 0)
                    return 1;
        return 0;
    }
    qsort(keys, (size_t)n, sizeof(avro_span), avro_span_order);
    for (Py_ssize_t i = 1; i < n; i++)
        if (avro_span_order(&keys[i - 1], &keys[i]) == 0)
            return 1;
    return 0;
}

#endif /* KFS_AVRO_BINARY_H */
