/* The parts of arrow_build.h that are not hot: a null of any column, the program's header and column
 * table, and the batch loop both compiled payload decoders (avro_arrow.c, protobuf_arrow.c) run. */

#include "arrow_build.h"

int
ab_append_null(arrow_out *o, int32_t ci)
{
    column *c = o->cols + ci;
    if (ab_put_bit(o, &c->valid, c->n, !c->nullable) < 0)
        return AB_DECLINE;
    static const uint8_t zeros[16];
    switch (c->kind) {
    case ACOL_BOOL:
        if (ab_put_bit(o, &c->vals, c->n, 0) < 0)
            return AB_DECLINE;
        break;
    case ACOL_I32:
    case ACOL_F32:
        if (ab_put_bytes(o, &c->vals, zeros, 4) < 0)
            return AB_DECLINE;
        break;
    case ACOL_I64:
    case ACOL_F64:
        if (ab_put_bytes(o, &c->vals, zeros, 8) < 0)
            return AB_DECLINE;
        break;
    case ACOL_DEC:
        if (ab_put_bytes(o, &c->vals, zeros, 16) < 0)
            return AB_DECLINE;
        break;
    case ACOL_BIN:
        if (ab_put_offset(o, c, (int64_t)c->data.len) < 0)
            return AB_DECLINE;
        break;
    case ACOL_LIST:
    case ACOL_MAP:
        if (ab_put_offset(o, c, o->cols[c->first].n) < 0)
            return AB_DECLINE;
        break;
    case ACOL_STRUCT:
        for (int32_t k = 0; k < c->nchild; k++)
            if (ab_append_null(o, c->first + k) < 0)
                return AB_DECLINE;
        break;
    }
    c->n++;
    return AB_OK;
}

/* ---- the program ------------------------------------------------------------------------------ */

/* Whether a column's children lie within the table and each kind is one of avro_arrow.h's, with the
 * children its layout has (a map: a binary key column). */
static int
check_columns(const aprogram *P)
{
    for (int32_t c = 0; c < P->ncols; c++) {
        const int32_t *e = ab_col_entry(P, c);
        const int32_t kind = e[0], first = e[1], n = e[2];
        if ((e[3] != 0 && e[3] != 1) || kind < ACOL_BOOL || kind > ACOL_MAP || n < 0 || first < 0 || first > P->ncols - n ||
            (n > 0 && first <= c))
            return 0;
        if ((kind == ACOL_LIST && n != 1) || (kind == ACOL_MAP && (n != 2 || ab_col_entry(P, first)[0] != ACOL_BIN)) ||
            (kind != ACOL_STRUCT && kind != ACOL_LIST && kind != ACOL_MAP && n != 0))
            return 0;
    }
    return 1;
}

int
ab_program_load(PyObject *arg, aprogram *P, const char *what)
{
    memset(P, 0, sizeof(*P));
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s: a bytes object", what);
        return 0;
    }
    const Py_ssize_t size = PyBytes_GET_SIZE(arg);
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(arg);
    if (size < 16 || size > INT32_MAX)
        goto bad;
    const int32_t nw = (int32_t)kfs_load_le32(b + 4);
    if (nw < 4 || (Py_ssize_t)nw * 4 > size)
        goto bad;
    char *mem = PyMem_Malloc((size_t)size);
    if (mem == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    int32_t *w = (int32_t *)mem;
    for (int32_t i = 0; i < nw; i++)
        w[i] = (int32_t)kfs_load_le32(b + 4 * (Py_ssize_t)i);
    P->w = w;
    P->nw = nw;
    P->root = w[0];
    P->ncols = w[2];
    P->pool = mem + 4 * (Py_ssize_t)nw;
    P->pool_len = size - 4 * (Py_ssize_t)nw;
    memcpy(mem + 4 * (Py_ssize_t)nw, b + 4 * (Py_ssize_t)nw, (size_t)P->pool_len);
    if (P->ncols < 1 || w[3] < 4 || w[3] > nw || P->ncols > (nw - w[3]) / 4 || !check_columns(P)) {
        ab_program_free(P);
        goto bad;
    }
    return 1;
bad:
    PyErr_Format(PyExc_ValueError, "%s: not a program", what);
    return 0;
}

void
ab_program_free(aprogram *P)
{
    PyMem_Free((void *)P->w);
    P->w = NULL;
}

static void
capsule_free(PyObject *capsule)
{
    aprogram *P = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
    if (P != NULL) {
        ab_program_free(P);
        PyMem_Free(P);
    }
}

PyObject *
ab_program_capsule(aprogram *P, const char *name)
{
    aprogram *kept = PyMem_Malloc(sizeof(aprogram));
    if (kept == NULL) {
        ab_program_free(P);
        return PyErr_NoMemory();
    }
    *kept = *P;
    PyObject *capsule = PyCapsule_New(kept, name, capsule_free);
    if (capsule == NULL) {
        ab_program_free(kept);
        PyMem_Free(kept);
    }
    return capsule;
}

/* ---- a batch ---------------------------------------------------------------------------------- */

PyObject *
ab_bytes(const abuf *b, size_t len)
{
    return PyBytes_FromStringAndSize(len ? (const char *)b->p : NULL, (Py_ssize_t)len);
}

int
ab_array_buffers(const char *fname, Py_ssize_t count, Py_ssize_t offset, const Py_buffer *offsets,
                 PyObject *validity_obj, Py_buffer *validity, PyObject *skip_obj, Py_buffer *skip)
{
    if (validity_obj != Py_None && PyObject_GetBuffer(validity_obj, validity, PyBUF_SIMPLE) < 0)
        return 0;
    if (skip_obj != Py_None && PyObject_GetBuffer(skip_obj, skip, PyBUF_SIMPLE) < 0)
        return 0;
    if (count < 0 || offset < 0 || count > PY_SSIZE_T_MAX / 8 - offset ||
        offsets->len / 4 < offset + count + (count > 0) ||
        (validity->buf != NULL && validity->len * 8 < offset + count) || (skip->buf != NULL && skip->len < count)) {
        PyErr_Format(PyExc_ValueError, "%s: the buffers are shorter than the array", fname);
        return 0;
    }
    return 1;
}

/* The columns' buffers as Python: a list of (length, validity, values, data or None) per column. */
static PyObject *
columns_out(const arrow_out *o)
{
    PyObject *out = PyList_New(o->ncols);
    if (out == NULL)
        return NULL;
    for (int32_t k = 0; k < o->ncols; k++) {
        const column *c = o->cols + k;
        const size_t bitmap = (size_t)((c->n + 7) / 8);
        PyObject *data = c->kind == ACOL_BIN ? ab_bytes(&c->data, c->data.len) : Py_NewRef(Py_None);
        PyObject *t = data == NULL ? NULL
                                   : Py_BuildValue("(LNNN)", (long long)c->n, ab_bytes(&c->valid, bitmap),
                                                   ab_bytes(&c->vals, c->kind == ACOL_BOOL ? bitmap : c->vals.len),
                                                   data);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, t);
    }
    return out;
}

PyObject *
ab_decode_batch(PyObject *args, const char *fname, const char *capsule_name, ab_row_decoder row)
{
    PyObject *capsule, *validity_obj, *skip_obj;
    Py_buffer prefix, offsets, data;
    Py_ssize_t count, offset;
    if (!PyArg_ParseTuple(args, "Oy*nOy*y*nO", &capsule, &prefix, &count, &validity_obj, &offsets, &data, &offset,
                          &skip_obj))
        return NULL;
    PyObject *result = NULL;
    Py_buffer validity = {0}, skip = {0};
    arrow_out o = {0};
    PyObject *status = NULL;
    mark *marks = NULL;
    const aprogram *P = PyCapsule_GetPointer(capsule, capsule_name);
    if (P == NULL)
        goto out;
    if (!ab_array_buffers(fname, count, offset, &offsets, validity_obj, &validity, skip_obj, &skip))
        goto out;
    if (prefix.len != 5) {
        PyErr_Format(PyExc_ValueError, "%s: the buffers are shorter than the array", fname);
        goto out;
    }
    status = PyBytes_FromStringAndSize(NULL, count);
    o.ncols = P->ncols;
    o.cols = PyMem_Calloc((size_t)P->ncols, sizeof(column));
    marks = PyMem_Calloc((size_t)P->ncols, sizeof(mark));
    if (status == NULL || o.cols == NULL || marks == NULL) {
        if (status != NULL)
            PyErr_NoMemory();
        goto out;
    }
    uint8_t *st = (uint8_t *)PyBytes_AS_STRING(status);
    for (int32_t k = 0; k < P->ncols; k++) {
        const int32_t *e = ab_col_entry(P, k);
        o.cols[k].kind = e[0];
        o.cols[k].first = e[1];
        o.cols[k].nchild = e[2];
        o.cols[k].nullable = k == 0 || e[3]; /* (the column itself: a null row is null) */
        if ((e[0] == ACOL_BIN || e[0] == ACOL_LIST || e[0] == ACOL_MAP) && ab_put_offset(&o, o.cols + k, 0) < 0)
            break;
    }
    const uint8_t *vbits = validity.buf, *skips = skip.buf, *bytes = data.buf;
    const uint8_t *offs = offsets.buf;
    for (Py_ssize_t i = 0; i < count && !o.nomem; i++) {
        const Py_ssize_t r = offset + i;
        int declined = 1, decoded = 0;
        if (vbits != NULL && !(vbits[r >> 3] >> (r & 7) & 1))
            declined = 0; /* a null value: a null row */
        else if (skips == NULL || skips[i] == 0) {
            const int32_t start = (int32_t)kfs_load_le32(offs + 4 * r), end = (int32_t)kfs_load_le32(offs + 4 * r + 4);
            if (start < 0 || end < start || end > data.len) {
                PyErr_Format(PyExc_ValueError, "%s: an offset outside the data", fname);
                goto out;
            }
            if (end - start >= 5 && memcmp(bytes + start, prefix.buf, 5) == 0) {
                for (int32_t k = 0; k < P->ncols; k++) {
                    marks[k].n = o.cols[k].n;
                    marks[k].vals = o.cols[k].vals.len;
                    marks[k].data = o.cols[k].data.len;
                }
                if (row(P, &o, bytes + start + 5, bytes + end) == AB_OK)
                    declined = 0, decoded = 1;
                else {
                    for (int32_t k = 0; k < P->ncols; k++) {
                        column *c = o.cols + k;
                        c->n = marks[k].n;
                        c->vals.len = marks[k].vals;
                        c->data.len = marks[k].data;
                        /* (a bool column's value bits and every validity bit past n are rewritten when reached) */
                        if (c->kind == ACOL_BOOL)
                            c->vals.len = (size_t)((c->n + 7) / 8);
                        c->valid.len = (size_t)((c->n + 7) / 8);
                    }
                }
            }
        }
        st[i] = (uint8_t)declined;
        if (!decoded && !o.nomem && ab_append_null(&o, 0) < 0 && !o.nomem) {
            PyErr_Format(PyExc_ValueError, "%s: the column exceeds Arrow's 32-bit offsets", fname);
            goto out;
        }
    }
    if (o.nomem) {
        PyErr_NoMemory();
        goto out;
    }
    PyObject *columns = columns_out(&o);
    if (columns != NULL)
        result = Py_BuildValue("(ON)", status, columns);
out:
    PyMem_Free(marks);
    if (o.cols != NULL) {
        for (int32_t k = 0; k < o.ncols; k++) {
            PyMem_Free(o.cols[k].valid.p);
            PyMem_Free(o.cols[k].vals.p);
            PyMem_Free(o.cols[k].data.p);
        }
        PyMem_Free(o.cols);
    }
    Py_XDECREF(status);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    if (validity.buf != NULL)
        PyBuffer_Release(&validity);
    if (skip.buf != NULL)
        PyBuffer_Release(&skip);
    return result;
}
