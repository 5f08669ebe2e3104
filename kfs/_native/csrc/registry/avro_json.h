/* Avro datums to the JSON text of kfs's line (docs/schema-registry.md), by a program compiled from the
 * writer schema in Python (kfs/registry/avro_program.py): no Python object per field. The Python path
 * (kfs.registry.avro.AvroRenderer) stays the reference: this renderer answers only datums it renders
 * exactly as that path does, and declines every other one (an error, or anything unusual) to it.
 *
 * The program is a bytes object: little-endian int32 words, then a pool of texts. Word 0 is the root
 * node's word index, word 1 the word count, word 2 whether the pool holds non-ASCII text. A node is
 * its kind, then:
 *   AVRO_RECORD   n, then n times (text offset, text length, child): the field's `"name": `
 *   AVRO_UNION    n, then n times (text offset, text length or -1 for null, child): the `"label": `
 *   AVRO_ENUM     n, then n times (text offset, text length): the symbol as a JSON string
 *   AVRO_FIXED    size
 *   AVRO_ARRAY, AVRO_MAP   child
 * the primitives nothing. Children are word indexes of nodes; a named type recurs by its index. */

#ifndef KFS_AVRO_JSON_H
#define KFS_AVRO_JSON_H

#include "../native.h"
#include "json_out.h"

enum {
    AVRO_NULL = 1,
    AVRO_BOOLEAN,
    AVRO_INT,
    AVRO_LONG,
    AVRO_FLOAT,
    AVRO_DOUBLE,
    AVRO_BYTES,
    AVRO_STRING,
    AVRO_FIXED,
    AVRO_ENUM,
    AVRO_RECORD,
    AVRO_ARRAY,
    AVRO_MAP,
    AVRO_UNION,
};

/* The JSON text of the Avro datum p[0:n] by a program (a capsule avro_program made): 1 with the text at
 * *text (*len bytes of UTF-8, *nonascii when any is >= 0x80; valid until the next call), 0 where the
 * Python path must answer, -1 with an exception set. The GIL is held. */
KFS_HIDDEN int kfs_avro_render(PyObject *program, const uint8_t *p, Py_ssize_t n, const char **text, size_t *len,
                               int *nonascii);

/* For the compiled walker (views/walk_v2_run.c), which renders without the GIL: the program a capsule
 * holds (NULL with an exception when it holds none), *needs_gil set when rendering by it calls into
 * Python (a float or double: PyOS_double_to_string); and the JSON text of the datum p[0:n] into a
 * buffer of the caller's (its text from out->len = 0; grown by PyMem_RawRealloc, the caller's to free):
 * 1 rendered, 0 declined (the Python path's), -1 out of memory. (protobuf_json.h: the same for Protobuf.) */
KFS_HIDDEN const void *kfs_avro_program_of(PyObject *capsule, int *needs_gil);
KFS_HIDDEN int kfs_avro_render_into(const void *program, const uint8_t *p, Py_ssize_t n, json_out *out);

#endif /* KFS_AVRO_JSON_H */
