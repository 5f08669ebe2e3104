/* gather: a read reply copied into malloc'd memory without the GIL. */

#include "../native.h"

KFS_DOC(kfs_gather_doc,
"gather(pieces) -> int\n"
"\n"
"The address of a malloc'd block holding the bytes-like pieces one after another (0 when they are\n"
"empty), for libfuse to free(): a decoded read's reply, allocated and copied without the GIL\n"
"(kfs/fuse/zerocopy.py). The caller frees it when libfuse does not take it.");

PyObject *
kfs_gather(PyObject *module, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "gather() takes a sequence of bytes-like objects");
    if (seq == NULL)
        return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_buffer *views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
    if (views == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    Py_ssize_t held = 0;
    size_t total = 0;
    for (; held < n; held++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, held), &views[held], PyBUF_SIMPLE) < 0)
            goto done;
        if ((size_t)views[held].len > (size_t)PY_SSIZE_T_MAX - total) {
            held++;
            PyErr_NoMemory();
            goto done;
        }
        total += (size_t)views[held].len;
    }
    char *mem = NULL;
    if (total) {
        Py_BEGIN_ALLOW_THREADS
        mem = malloc(total);
        if (mem != NULL) {
            size_t at = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (views[i].len) {
                    memcpy(mem + at, views[i].buf, (size_t)views[i].len);
                    at += (size_t)views[i].len;
                }
            }
        }
        Py_END_ALLOW_THREADS
        if (mem == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = PyLong_FromVoidPtr(mem);
    if (result == NULL)
        free(mem);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    Py_DECREF(seq);
    return result;
}
