/* _crcfast.h - merkle.crc32c(), crc32() and crc64nvme() as plain C functions (METH_FASTCALL |
 * METH_KEYWORDS).
 *
 * Why not Cython `def`: merkle._crc is built with module state on CPython 3.12+ (isolated
 * sub-interpreters), and there every Python constant a Cython function touches (its keyword
 * names, the default 0) is a module-state lookup of ~10 ns; these functions are called
 * per small buffer, so they would lose ~25 ns a call. They need no module state at all: only
 * built-in types and exceptions. The behaviour and messages are those of the rest of the
 * module (_common.pxi's _get_buffer and _as_int). Included by _crc.pyx (and, for the
 * threshold, _native.pyx through _common.pxi: the functions here are static and unused there). */
#ifndef CRCM_CRCFAST_H
#define CRCM_CRCFAST_H

#include <Python.h>
#include <string.h>
#include "crcmerkle.h"

/* From this many bytes on the GIL is released around the kernel; merkle.GIL_RELEASE_THRESHOLD
 * (_common.pxi takes it from here; the reasoning for the number is there). */
#define CRCM_PY_GIL_THRESHOLD 65536

/* Replaces the pending exception with `type`(message built from the old one's str). */
static void crcm_py_reraise_as(PyObject *type, const char *prefix, const char *suffix) {
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyErr_NormalizeException(&exc_type, &exc, &tb);
    PyObject *text = exc ? PyObject_Str(exc) : NULL;
    if (text != NULL)
        PyErr_Format(type, "%s%U%s", prefix, text, suffix);
    else
        PyErr_Format(type, "%s%s", prefix, suffix);
    Py_XDECREF(text);
    Py_XDECREF(exc_type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
}

/* The start value modulo 2**64 (zlib's rule, taken mod 2**32 by the caller for the 32-bit
 * CRCs); -1 with an exception set on error. */
static int crcm_py_start(PyObject *value, uint64_t *out) {
    unsigned long long v;
    if (PyLong_Check(value)) {
        v = PyLong_AsUnsignedLongLongMask(value);
    } else {
        PyObject *index = PyNumber_Index(value);
        if (index == NULL) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "value must be an integer, not %.200s",
                             Py_TYPE(value)->tp_name);
            }
            return -1;
        }
        v = PyLong_AsUnsignedLongLongMask(index);
        Py_DECREF(index);
    }
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* One kernel call: CRC-64/NVME or a 32-bit CRC (then crc < 2**32). */
static inline uint64_t crcm_py_kernel(crcm_algorithm alg, uint64_t crc, const uint8_t *p,
                                      size_t n) {
    if (alg == CRCM_CRC64NVME) return crcm_crc64nvme(crc, p, n);
    return crcm_crc(alg, (uint32_t)crc, p, n);
}

/* crcm_py_kernel with the GIL released as gil_release_mode says (the crc32c package's keyword,
 * same meanings): negative (-1, the default) from CRCM_PY_GIL_THRESHOLD bytes on (below it, the
 * release costs more than other threads gain), 0 never, positive always. */
static inline uint64_t crcm_py_kernel_gil(crcm_algorithm alg, uint64_t crc, const uint8_t *p,
                                          size_t n, long gil_release_mode) {
    if (gil_release_mode == 0 || (gil_release_mode < 0 && n < CRCM_PY_GIL_THRESHOLD))
        return crcm_py_kernel(alg, crc, p, n);
    Py_BEGIN_ALLOW_THREADS
    crc = crcm_py_kernel(alg, crc, p, n);
    Py_END_ALLOW_THREADS
    return crc;
}

/* gil_release_mode as a C long: any integer (bool, __index__ types), as the crc32c package
 * takes it; -1 with an exception set on error. */
static int crcm_py_gil_mode(PyObject *value, long *out) {
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "gil_release_mode must be an integer, not %.200s",
                         Py_TYPE(value)->tp_name);
        }
        return -1;
    }
    long mode = PyLong_AsLong(index);
    Py_DECREF(index);
    if (mode == -1 && PyErr_Occurred()) return -1;  /* OverflowError, as the crc32c package */
    *out = mode;
    return 0;
}

/* Whether a keyword (a str) is `name`: compact ASCII compared in place, the rest by the API
 * (PyUnicode_CompareWithASCIIString alone: a few ns more a keyword on 3.13). */
static inline int crcm_py_key_is(PyObject *key, const char *name, Py_ssize_t len) {
    if (PyUnicode_IS_COMPACT_ASCII(key))
        return PyUnicode_GET_LENGTH(key) == len &&
               memcmp(PyUnicode_DATA(key), name, (size_t)len) == 0;
    return PyUnicode_CompareWithASCIIString(key, name) == 0;
}

static PyObject *crcm_py_crc(crcm_algorithm alg, const char *fname, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *data = NULL, *value = NULL, *gil_mode = NULL;
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most 3 positional arguments (%zd given)",
                     fname, nargs);
        return NULL;
    }
    if (nargs >= 1) data = args[0];
    if (nargs >= 2) value = args[1];
    if (nargs >= 3) gil_mode = args[2];
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        PyObject **slot;
        if (crcm_py_key_is(key, "value", 5))
            slot = &value;
        else if (crcm_py_key_is(key, "data", 4))
            slot = &data;
        else if (crcm_py_key_is(key, "gil_release_mode", 16))
            slot = &gil_mode;
        else {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'",
                         fname, key);
            return NULL;
        }
        if (*slot != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'",
                         fname, key);
            return NULL;
        }
        *slot = args[nargs + i];
    }
    if (data == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'data' (pos 1)", fname);
        return NULL;
    }
    uint64_t crc = 0;
    if (value != NULL && crcm_py_start(value, &crc) < 0) return NULL;
    if (alg != CRCM_CRC64NVME) crc &= 0xFFFFFFFFu;
    long mode = -1;
    if (gil_mode != NULL && crcm_py_gil_mode(gil_mode, &mode) < 0) return NULL;

    if (PyBytes_CheckExact(data))  /* no buffer export for bytes */
        return PyLong_FromUnsignedLongLong(crcm_py_kernel_gil(
            alg, crc, (const uint8_t *)PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data),
            mode));
    if (PyUnicode_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "Strings must be encoded before hashing");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_C_CONTIGUOUS) < 0) {
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            crcm_py_reraise_as(PyExc_ValueError, "data must be a C-contiguous buffer (", ")");
        } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "a bytes-like object is required, not '%.200s'",
                         Py_TYPE(data)->tp_name);
        }
        return NULL;
    }
    crc = crcm_py_kernel_gil(alg, crc, (const uint8_t *)view.buf, (size_t)view.len, mode);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(crc);
}

static PyObject *crcm_py_crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    (void)self;
    return crcm_py_crc(CRCM_CRC32C, "crc32c", args, nargs, kwnames);
}

static PyObject *crcm_py_crc32(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    (void)self;
    return crcm_py_crc(CRCM_CRC32, "crc32", args, nargs, kwnames);
}

static PyObject *crcm_py_crc64nvme(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
    (void)self;
    return crcm_py_crc(CRCM_CRC64NVME, "crc64nvme", args, nargs, kwnames);
}

static PyMethodDef crcm_py_defs[3] = {
    {"crc32c", (PyCFunction)(void (*)(void))crcm_py_crc32c, METH_FASTCALL | METH_KEYWORDS,
     "crc32c(data, value=0, gil_release_mode=-1)\n--\n\n"
     "CRC-32C (Castagnoli) of data, continuing from value; like zlib.crc32. Unsigned int.\n\n"
     "value may be given by keyword, as the crc32c package allows: "
     "crc32c(b, value=crc32c(a)).\n"
     "gil_release_mode as the crc32c package's: -1 (any negative) releases the GIL for large\n"
     "buffers only, 0 never, 1 (any positive) always."},
    {"crc32", (PyCFunction)(void (*)(void))crcm_py_crc32, METH_FASTCALL | METH_KEYWORDS,
     "crc32(data, value=0, gil_release_mode=-1)\n--\n\n"
     "CRC-32 (IEEE 802.3, zlib's) of data, continuing from value. Equals zlib.crc32.\n\n"
     "Not the crc32c package 1.x's crc32, which computed CRC-32C (that is merkle.crc32c).\n"
     "gil_release_mode as crc32c's."},
    {"crc64nvme", (PyCFunction)(void (*)(void))crcm_py_crc64nvme, METH_FASTCALL | METH_KEYWORDS,
     "crc64nvme(data, value=0, gil_release_mode=-1)\n--\n\n"
     "CRC-64/NVME of data, continuing from value (S3's x-amz-checksum-crc64nvme is the 8-byte\n"
     "big-endian value, base64). value may be given by keyword; any integer is taken mod 2**64.\n"
     "Unsigned int. gil_release_mode as crc32c's."},
};

/* Flags a heap type immutable (Py_TPFLAGS_IMMUTABLETYPE, CPython 3.10+), as static types and
 * hashlib's are: setting or deleting a class attribute then raises TypeError. Cython makes
 * heap types (type specs, needed for module state) without the flag and has no directive for
 * it; PyType_FromSpec sets nothing more than this bit for a spec that has it. A static type
 * (older builds) is immutable already. */
static inline int crcm_py_make_immutable(PyObject *type) {
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "a type is required");
        return -1;
    }
#if PY_VERSION_HEX >= 0x030A0000
    PyTypeObject *t = (PyTypeObject *)type;
    if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        t->tp_flags |= Py_TPFLAGS_IMMUTABLETYPE;
        PyType_Modified(t);
    }
#endif
    return 0;
}

/* A new function object for crc32c (which == 0), crc32 (1) or crc64nvme (2), its __module__
 * module_name.
 * The PyMethodDef is static and read-only: one per process serves every interpreter. */
static inline PyObject *crcm_py_function(int which, PyObject *module_name) {
    return PyCFunction_NewEx(&crcm_py_defs[which >= 0 && which <= 2 ? which : 0], NULL, module_name);
}

#endif
