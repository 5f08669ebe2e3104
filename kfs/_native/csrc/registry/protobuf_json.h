/* Protobuf messages to JSON text by a program compiled from the message's descriptor (protobuf_json.c,
 * kfs/registry/protobuf_program.py), for the compiled walker (views/walk_v2_run.c), which renders without
 * the GIL: the program a capsule holds (NULL with an exception when it holds none), *needs_gil set when
 * rendering by it calls into Python (a float or double: PyOS_double_to_string); and the JSON text of the
 * message p[0:n] into a buffer of the caller's (from out->len; grown by PyMem_RawRealloc, the caller's to
 * free): 1 rendered, 0 declined (the Python path's), -1 out of memory. */

#ifndef KFS_PROTOBUF_JSON_H
#define KFS_PROTOBUF_JSON_H

#include "../native.h"
#include "json_out.h"

KFS_HIDDEN const void *kfs_protobuf_program_of(PyObject *capsule, int *needs_gil);
KFS_HIDDEN int kfs_protobuf_render_into(const void *program, const uint8_t *p, Py_ssize_t n, json_out *out);

#endif /* KFS_PROTOBUF_JSON_H */
