# cython: binding=False, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Thin Cython layer over the C core: argument checking, buffer access, GIL release.

Private: the public API is re-exported by merkle/__init__.py.
"""

cimport numpy as cnp
from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport (PyLong_AsUnsignedLongLong, PyLong_AsUnsignedLongLongMask,
                           PyLong_AsUnsignedLongMask, PyLong_FromUnsignedLong,
                           PyLong_FromUnsignedLongLong)
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.number cimport PyNumber_Index
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from merkle._native cimport *

import numpy as np

cnp.import_array()

# The scalar API (no numpy) lives in merkle._crc, which isolated sub-interpreters can import;
# it is re-exported here for code that uses merkle._native.crc32c and the like.
from merkle._crc import (
    CRC32,
    CRC32C,
    CRC64NVME,
    BackendUnavailableError,
    LengthOverflowError,
    available_backends,
    backend,
    compiled_backends,
    crc32,
    crc32_combine,
    crc32c,
    crc32c_combine,
    crc64nvme,
    crc64nvme_combine,
    read_probe,
    set_backend,
)
from merkle._crc import _dispatch_state

# One backend per process: this module's copy of the C core uses _crc's slot, so set_backend()
# (whichever module's) applies to both. Done before anything here calls the core.
crcm_dispatch_adopt(PyCapsule_GetPointer(_dispatch_state, b"merkle._crc.dispatch_state"))

include "_common.pxi"


def _core_backend():
    """The backend this module's copy of the C core runs (tests: it follows _crc's)."""
    return crcm_backend_name().decode()


cdef crcm_algorithm _algorithm(object name) except *:
    if name == "crc32c" or name == "CRC32C":
        return CRCM_CRC32C
    if name == "crc32" or name == "CRC32":
        return CRCM_CRC32
    if name == "crc64nvme":
        return CRCM_CRC64NVME
    if isinstance(name, str):
        lowered = name.lower()
        if lowered == "crc32c":
            return CRCM_CRC32C
        if lowered == "crc32":
            return CRCM_CRC32
        if lowered == "crc64nvme":
            return CRCM_CRC64NVME
        raise ValueError(
            f"unknown algorithm {name!r}; expected 'crc32c', 'crc32' or 'crc64nvme'")
    raise TypeError(f"algorithm must be a str, not {type(name).__name__}")


_ALGORITHM_NAMES = {CRCM_CRC32C: "crc32c", CRCM_CRC32: "crc32", CRCM_CRC64NVME: "crc64nvme"}


def _as_uint64_column(obj, str name):
    arr = np.asarray(obj)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if arr.size == 0 and arr.dtype.kind in "fO":
        return np.empty(0, dtype=np.uint64)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name} must hold integers, not {arr.dtype}")
    if arr.dtype != np.uint64:
        if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
            raise ValueError(f"{name} values must be in 0..2**64-1")
        arr = arr.astype(np.uint64)
    return np.ascontiguousarray(arr)


def _as_uint32_column(obj, str name):
    arr = np.asarray(obj)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if arr.size == 0 and arr.dtype.kind in "fO":
        return np.empty(0, dtype=np.uint32)  # np.asarray([]) is float64: an empty column
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name} must hold integers, not {arr.dtype}")
    if arr.dtype != np.uint32:
        if arr.size and (arr.min() < 0 or arr.max() > 0xFFFFFFFF):
            raise ValueError(f"{name} values must be in 0..2**32-1")
        arr = arr.astype(np.uint32)
    return np.ascontiguousarray(arr)


def combine_many(crc1, crc2, len2, *, algorithm="crc32c"):
    """Element-wise combine of two uint32 columns for one fixed len2 -> numpy uint32 array
    (uint64 columns and result for algorithm="crc64nvme")."""
    cdef crcm_algorithm alg = _algorithm(algorithm)
    cdef uint64_t n2 = _length(len2)
    if alg == CRCM_CRC64NVME:
        return _combine_many64(crc1, crc2, n2)
    a = _as_uint32_column(crc1, "crc1")
    b = _as_uint32_column(crc2, "crc2")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"crc1 and crc2 differ in length ({a.shape[0]} != {b.shape[0]})")
    cdef const uint32_t[::1] av = a
    cdef const uint32_t[::1] bv = b
    cdef size_t n = <size_t>a.shape[0]
    out = np.empty(n, dtype=np.uint32)
    cdef uint32_t[::1] ov = out
    if n:
        with nogil:
            crcm_combine_fixed(alg, &av[0], &bv[0], n2, n, &ov[0])
    return out


def fold_fixed(crcs, stride, *, algorithm="crc32c"):
    """The CRC of the concatenation of len(crcs) pieces of `stride` bytes each, from their
    CRCs (a uint32 column; uint64 for algorithm="crc64nvme") -> int; 0 for an empty column.
    Horner's rule with one fixed multiply per piece, in C without the GIL."""
    cdef crcm_algorithm alg = _algorithm(algorithm)
    cdef uint64_t s = _length(stride)
    cdef size_t n
    cdef uint32_t r32
    cdef uint64_t r64
    cdef const uint32_t[::1] v32
    cdef const uint64_t[::1] v64
    if alg == CRCM_CRC64NVME:
        a64 = _as_uint64_column(crcs, "crcs")
        n = <size_t>a64.shape[0]
        if n and s > (<uint64_t>1 << 63) // n:
            raise ValueError(f"{n} pieces of {s} bytes exceed 2**63 bytes")
        if n == 0:
            return 0
        v64 = a64
        with nogil:
            r64 = crcm_fold_fixed64(&v64[0], n, s)
        return r64
    a = _as_uint32_column(crcs, "crcs")
    n = <size_t>a.shape[0]
    if n and s > (<uint64_t>1 << 63) // n:
        raise ValueError(f"{n} pieces of {s} bytes exceed 2**63 bytes")
    if n == 0:
        return 0
    v32 = a
    with nogil:
        r32 = crcm_fold_fixed(alg, &v32[0], n, s)
    return r32


def fold_segments_be(be, bounds, last_len, stride, *, algorithm="crc32c"):
    """Per segment s: the CRC of its pieces, from their CRCs stored big-endian and packed in
    `be` (a uint8 column; 4 bytes each, 8 for algorithm="crc64nvme"), pieces
    bounds[s]..bounds[s+1]-1 (a uint64/int64 column of nseg + 1 ascending indexes), every
    piece `stride` bytes but the segment's last, which is last_len[s] bytes -> a uint32
    column (uint64 for crc64nvme), 0 for an empty segment. One call for every segment: the
    copy check composes a batch of keys with it. ValueError (one line) for bounds beyond the
    pieces, not ascending, or lengths out of range."""
    cdef crcm_algorithm alg = _algorithm(algorithm)
    cdef uint64_t s = _length(stride)
    width = 8 if alg == CRCM_CRC64NVME else 4
    raw = np.ascontiguousarray(be, dtype=np.uint8).reshape(-1)
    bnd = np.ascontiguousarray(bounds)
    lens = np.ascontiguousarray(last_len)
    if bnd.ndim != 1 or bnd.shape[0] < 1 or bnd.dtype.kind not in "ui":
        raise ValueError("bounds: a column of at least one integer index")
    if lens.ndim != 1 or lens.dtype.kind not in "ui" or lens.shape[0] != bnd.shape[0] - 1:
        raise ValueError("last_len: one integer per segment (len(bounds) - 1)")
    pieces = raw.shape[0] // width
    if raw.shape[0] % width:
        raise ValueError(f"be: {raw.shape[0]} bytes is not a whole number of {width}-byte CRCs")
    if bnd.shape[0] and ((bnd.dtype.kind == "i" and bnd.min() < 0) or bnd.max() > pieces):
        raise ValueError(f"bounds: indexes must be in 0..{pieces}")
    if lens.shape[0] and ((lens.dtype.kind == "i" and lens.min() < 0) or lens.max() > s):
        raise ValueError(f"last_len: lengths must be in 0..{s} (the stride)")
    cdef const uint64_t[::1] bv = bnd.astype(np.uint64, copy=False)
    cdef const uint64_t[::1] lv = lens.astype(np.uint64, copy=False)
    cdef size_t nseg = <size_t>lens.shape[0]
    out = np.zeros(nseg, dtype=np.uint64 if width == 8 else np.uint32)
    if nseg == 0:
        return out
    if s > (<uint64_t>1 << 63) // max(pieces, 1):
        raise ValueError(f"{pieces} pieces of {s} bytes exceed 2**63 bytes")
    cdef const uint8_t[::1] rv = raw if raw.shape[0] else np.zeros(8, np.uint8)
    cdef uint64_t[::1] o64
    cdef uint32_t[::1] o32
    cdef int rc
    if width == 8:
        o64 = out
        with nogil:
            rc = crcm_fold_segments_be(alg, &rv[0], &bv[0], &lv[0], nseg, s, &o64[0])
    else:
        o32 = out
        with nogil:
            rc = crcm_fold_segments_be(alg, &rv[0], &bv[0], &lv[0], nseg, s, &o32[0])
    if rc != 0:
        raise ValueError("bounds: indexes must be ascending")
    return out


def _combine_many64(crc1, crc2, uint64_t n2):
    a = _as_uint64_column(crc1, "crc1")
    b = _as_uint64_column(crc2, "crc2")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"crc1 and crc2 differ in length ({a.shape[0]} != {b.shape[0]})")
    cdef const uint64_t[::1] av = a
    cdef const uint64_t[::1] bv = b
    cdef size_t n = <size_t>a.shape[0]
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] ov = out
    if n:
        with nogil:
            crcm_combine_fixed64(&av[0], &bv[0], n2, n, &ov[0])
    return out


cdef object _output_array(object out, size_t n, bint wide=False):
    """A fresh uint32 (wide: uint64) array of n, or the caller's `out` after checking it fits
    exactly."""
    cdef cnp.npy_intp dims = <cnp.npy_intp>n
    if out is None:
        return cnp.PyArray_EMPTY(1, &dims, cnp.NPY_UINT64 if wide else cnp.NPY_UINT32, 0)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, not {type(out).__name__}")
    dtype = np.uint64 if wide else np.uint32
    if out.dtype != dtype or out.ndim != 1:
        raise ValueError(
            f"out must be a 1-D {dtype.__name__} array, not {out.ndim}-D {out.dtype}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be C-contiguous and writable")
    if <size_t>out.shape[0] != n:
        raise ValueError(f"out has {out.shape[0]} elements; {n} are needed")
    return out


cdef void _windows(crcm_algorithm alg, const uint8_t *p, size_t n, size_t bpc,
                   void *dst) noexcept nogil:
    if alg == CRCM_CRC64NVME:
        crcm_windows64(p, n, bpc, <uint64_t *>dst)
    else:
        crcm_windows(alg, p, n, bpc, <uint32_t *>dst)


def checksum_windows(data, bytes_per_checksum, *, algorithm="crc32c", out=None):
    """One checksum per bytes_per_checksum window of data (the last may be short).

    Returns a numpy uint32 array (uint64 for "crc64nvme") of ceil(len(data) /
    bytes_per_checksum) values, each window checksummed from zero, in one native call.

    algorithm may also be a tuple (or a list) of two different algorithms, e.g. ("crc32c",
    "crc64nvme"): both checksums of every window are then computed in one pass over data (each
    window is read from memory once) and a tuple of two arrays is returned, in that order;
    `out` is then None or a tuple (or list) of two arrays of the matching dtypes.
    """
    cdef crcm_algorithm alg, alg_b
    # a list is a pair as a tuple is (a JSON config or a caller's list means the same)
    cdef bint pair = isinstance(algorithm, (tuple, list))
    if pair:
        if len(algorithm) != 2:
            raise ValueError(f"algorithm tuple must name two algorithms, not {len(algorithm)}")
        alg = _algorithm(algorithm[0])
        alg_b = _algorithm(algorithm[1])
        if alg == alg_b:
            raise ValueError(f"algorithm tuple names {_ALGORITHM_NAMES[alg]!r} twice")
        if out is not None and not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("with two algorithms, out must be None or a tuple of two arrays")
    else:
        alg = _algorithm(algorithm)
        alg_b = alg
    if isinstance(bytes_per_checksum, bool) or not isinstance(bytes_per_checksum, int):
        raise TypeError(
            f"bytes_per_checksum must be an int, not {type(bytes_per_checksum).__name__}")
    if bytes_per_checksum <= 0:
        raise ValueError(f"bytes_per_checksum must be > 0, not {bytes_per_checksum}")
    cdef Py_buffer view
    _get_buffer(data, &view)
    cdef size_t bpc, count
    cdef void *dst
    cdef void *dst_b = NULL
    cdef const uint8_t *p = <const uint8_t *>view.buf
    cdef size_t n = <size_t>view.len
    try:
        bpc = <size_t>min(bytes_per_checksum, <object>view.len + 1)
        count = crcm_window_count(n, bpc)
        if pair:
            result = _output_array(None if out is None else out[0], count,
                                   alg == CRCM_CRC64NVME)
            result_b = _output_array(None if out is None else out[1], count,
                                     alg_b == CRCM_CRC64NVME)
            if result is result_b:
                raise ValueError("the two out arrays must be different arrays")
            dst_b = cnp.PyArray_DATA(result_b)
        else:
            result = _output_array(out, count, alg == CRCM_CRC64NVME)
        dst = cnp.PyArray_DATA(result)
        if count:
            if view.len < CRCM_PY_GIL_THRESHOLD:
                if pair:
                    crcm_windows_pair(alg, alg_b, p, n, bpc, dst, dst_b)
                else:
                    _windows(alg, p, n, bpc, dst)
            else:
                with nogil:
                    if pair:
                        crcm_windows_pair(alg, alg_b, p, n, bpc, dst, dst_b)
                    else:
                        _windows(alg, p, n, bpc, dst)
    finally:
        PyBuffer_Release(&view)
    if pair:
        return result, result_b
    return result


cdef bint _is_arrow(object values):
    module = type(values).__module__
    return module is not None and module.startswith("pyarrow")


def _each_arrow(values, crcm_algorithm alg, out):
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        if out is not None:
            result = _output_array(out, <size_t>len(values), alg == CRCM_CRC64NVME)
        else:
            result = np.empty(len(values),
                              dtype=np.uint64 if alg == CRCM_CRC64NVME else np.uint32)
        start = 0
        for chunk in values.chunks:
            stop = start + len(chunk)
            _each_arrow(chunk, alg, result[start:stop])
            start = stop
        return result
    if not isinstance(values, pa.Array):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, not {type(values).__name__}")
    typ = values.type
    cdef size_t n = <size_t>len(values)
    result = _output_array(out, n, alg == CRCM_CRC64NVME)
    if pa.types.is_binary(typ) or pa.types.is_string(typ):
        _each_offsets(values, 4, alg, result)
    elif pa.types.is_large_binary(typ) or pa.types.is_large_string(typ):
        _each_offsets(values, 8, alg, result)
    elif pa.types.is_fixed_size_binary(typ):
        width = typ.byte_width
        data_buf = values.buffers()[1]
        start = values.offset * width
        if n and width:
            checksum_windows(memoryview(data_buf)[start:start + n * width], width,
                             algorithm=_ALGORITHM_NAMES[alg], out=result)
        else:
            result[:] = 0
    else:
        raise TypeError(f"checksum_each needs binary or string values, not {typ}")
    if values.null_count:
        # A null's slot may still span bytes; its checksum is defined as 0.
        result[values.is_null().to_numpy(zero_copy_only=False)] = 0
    return result


def _each_offsets(values, int width, crcm_algorithm alg, result):
    bufs = values.buffers()
    cdef size_t n = <size_t>len(values)
    if n == 0:
        return
    dtype = np.int32 if width == 4 else np.int64
    offsets = np.frombuffer(bufs[1], dtype=dtype)[values.offset:values.offset + n + 1]
    if offsets.shape[0] != n + 1:
        raise ValueError("malformed Arrow array: offsets buffer too short")
    # A private copy: the kernel validates the offsets, then uses them with the GIL released;
    # read from the caller's buffer, a thread changing one in between would send it out of
    # bounds. Each offset is read once (4-8 bytes per value, next to the data it spans).
    offsets = np.array(offsets, dtype=dtype, copy=True)
    cdef Py_buffer view
    cdef const uint8_t *data = NULL
    cdef size_t data_len = 0
    cdef bint have_view = False
    if bufs[2] is not None:
        _get_buffer(bufs[2], &view)
        have_view = True
        data = <const uint8_t *>view.buf
        data_len = <size_t>view.len
    cdef const void *off = cnp.PyArray_DATA(offsets)
    cdef void *dst = cnp.PyArray_DATA(result)
    cdef int rc
    try:
        with nogil:
            if alg == CRCM_CRC64NVME:
                if width == 4:
                    rc = crcm_each64_offsets32(data, data_len, <const int32_t *>off, n,
                                               <uint64_t *>dst)
                else:
                    rc = crcm_each64_offsets64(data, data_len, <const int64_t *>off, n,
                                               <uint64_t *>dst)
            elif width == 4:
                rc = crcm_each_offsets32(alg, data, data_len, <const int32_t *>off, n,
                                         <uint32_t *>dst)
            else:
                rc = crcm_each_offsets64(alg, data, data_len, <const int64_t *>off, n,
                                         <uint32_t *>dst)
    finally:
        if have_view:
            PyBuffer_Release(&view)
    if rc != 0:
        raise ValueError("malformed Arrow array: offsets decrease or run past the data buffer")


cdef void _each_buffers_native(crcm_algorithm alg, const uint8_t **ptrs, const size_t *lens,
                               size_t n, void *dst) noexcept nogil:
    if alg == CRCM_CRC64NVME:
        crcm_each64_buffers(ptrs, lens, n, <uint64_t *>dst)
    else:
        crcm_each_buffers(alg, ptrs, lens, n, <uint32_t *>dst)


def _each_buffers(values, crcm_algorithm alg, out):
    items = values if isinstance(values, (list, tuple)) else list(values)
    cdef size_t n = <size_t>len(items)
    result = _output_array(out, n, alg == CRCM_CRC64NVME)
    if n == 0:
        return result
    cdef Py_buffer *views = <Py_buffer *>PyMem_Malloc(n * sizeof(Py_buffer))
    cdef const uint8_t **ptrs = <const uint8_t **>PyMem_Malloc(n * sizeof(uint8_t *))
    cdef size_t *lens = <size_t *>PyMem_Malloc(n * sizeof(size_t))
    cdef size_t got = 0, i, total = 0
    cdef void *dst = cnp.PyArray_DATA(result)
    if views == NULL or ptrs == NULL or lens == NULL:
        PyMem_Free(views); PyMem_Free(ptrs); PyMem_Free(lens)
        raise MemoryError()
    try:
        for i in range(n):
            item = items[i]
            if item is None:  # a missing value checksums as empty: 0
                ptrs[i] = NULL
                lens[i] = 0
                continue
            _get_buffer(item, &views[got])
            ptrs[i] = <const uint8_t *>views[got].buf
            lens[i] = <size_t>views[got].len
            total += lens[i]
            got += 1
        if total < <size_t>CRCM_PY_GIL_THRESHOLD:
            _each_buffers_native(alg, ptrs, lens, n, dst)
        else:
            with nogil:
                _each_buffers_native(alg, ptrs, lens, n, dst)
    finally:
        for i in range(got):
            PyBuffer_Release(&views[i])
        PyMem_Free(views); PyMem_Free(ptrs); PyMem_Free(lens)
    return result


def checksum_each(values, *, algorithm="crc32c", out=None):
    """One checksum per value: a pyarrow Binary/LargeBinary/String/FixedSizeBinary array (or
    ChunkedArray), read straight from its buffers, or a sequence of bytes-like objects.

    Nulls (and None items) give 0, the checksum of an empty value. Returns numpy uint32
    (uint64 for algorithm="crc64nvme").
    """
    cdef crcm_algorithm alg = _algorithm(algorithm)
    if isinstance(values, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            "checksum_each takes a collection of values; use crc32c()/checksum_windows() "
            "for one buffer")
    if _is_arrow(values):
        return _each_arrow(values, alg, out)
    return _each_buffers(values, alg, out)


include "_ozone.pxi"
include "_bookkeeper.pxi"
