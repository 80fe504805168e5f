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
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from merkle._native cimport *

import numpy as np

cnp.import_array()

# From this many bytes on the GIL is released around the kernel. Releasing and taking it back
# costs ~0.1 us: on Zen 3 a 16 KiB crc32c call took 815 ns with the release and 719 ns without
# (medians of 41 interleaved rounds), while the ymm kernels need ~0.45 us for 16 KiB. At 64 KiB
# (~1.7 us of work) the release costs ~6%, and threads still checksum large buffers in parallel.
GIL_RELEASE_THRESHOLD = 65536
cdef Py_ssize_t _GIL_THRESHOLD = GIL_RELEASE_THRESHOLD


class BackendUnavailableError(RuntimeError):
    """The named backend exists but this build or CPU cannot run it."""


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


cdef int _get_buffer(object data, Py_buffer *view, int flags=0) except -1:
    """Borrow a C-contiguous byte view of data, with clear errors for what is not one."""
    if isinstance(data, str):
        raise TypeError("Strings must be encoded before hashing")
    try:
        PyObject_GetBuffer(data, view, PyBUF_C_CONTIGUOUS | flags)
    except BufferError as exc:
        raise ValueError(f"data must be a C-contiguous buffer ({exc})") from None
    except TypeError:
        raise TypeError(
            f"a bytes-like object is required, not {type(data).__name__!r}") from None
    return 0


cdef inline object _as_int(object value, str name):
    """value as a Python int: ints, and any integer type with __index__ (numpy integers,
    including the uint32 values this module returns), as zlib does; float and str refused."""
    if isinstance(value, int):
        return value
    try:
        return PyNumber_Index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None


cdef inline uint32_t _mask32(object value, str name="value") except? 0xFFFFFFFF:
    # zlib semantics: any integer is taken modulo 2**32 (negative ones too).
    return <uint32_t>PyLong_AsUnsignedLongMask(_as_int(value, name))


cdef inline uint64_t _mask64(object value, str name="value") except? 0xFFFFFFFFFFFFFFFF:
    # as _mask32: any integer is taken modulo 2**64
    return <uint64_t>PyLong_AsUnsignedLongLongMask(_as_int(value, name))


cdef uint32_t _crc_of(crcm_algorithm alg, uint32_t crc, object data) except? 0xFFFFFFFF:
    cdef Py_buffer view
    cdef const uint8_t *p
    cdef size_t n
    if PyBytes_CheckExact(data):  # fast path: no buffer export for bytes
        p = <const uint8_t *>PyBytes_AS_STRING(data)
        n = <size_t>PyBytes_GET_SIZE(data)
        if n < <size_t>_GIL_THRESHOLD:
            return crcm_crc(alg, crc, p, n)
        with nogil:
            crc = crcm_crc(alg, crc, p, n)
        return crc
    _get_buffer(data, &view)
    try:
        p = <const uint8_t *>view.buf
        n = <size_t>view.len
        if n < <size_t>_GIL_THRESHOLD:
            crc = crcm_crc(alg, crc, p, n)
        else:
            with nogil:
                crc = crcm_crc(alg, crc, p, n)
    finally:
        PyBuffer_Release(&view)
    return crc


def crc32c(data, value=0, /):
    """CRC-32C (Castagnoli) of data, continuing from value; like zlib.crc32. Unsigned int."""
    return PyLong_FromUnsignedLong(_crc_of(CRCM_CRC32C, _mask32(value), data))


def crc32(data, value=0, /):
    """CRC-32 (IEEE 802.3, zlib's) of data, continuing from value. Equals zlib.crc32."""
    return PyLong_FromUnsignedLong(_crc_of(CRCM_CRC32, _mask32(value), data))


cdef uint64_t _crc64_of(uint64_t crc, object data) except? 0xFFFFFFFFFFFFFFFF:
    """_crc_of for CRC-64/NVME."""
    cdef Py_buffer view
    cdef const uint8_t *p
    cdef size_t n
    if PyBytes_CheckExact(data):
        p = <const uint8_t *>PyBytes_AS_STRING(data)
        n = <size_t>PyBytes_GET_SIZE(data)
        if n < <size_t>_GIL_THRESHOLD:
            return crcm_crc64nvme(crc, p, n)
        with nogil:
            crc = crcm_crc64nvme(crc, p, n)
        return crc
    _get_buffer(data, &view)
    try:
        p = <const uint8_t *>view.buf
        n = <size_t>view.len
        if n < <size_t>_GIL_THRESHOLD:
            crc = crcm_crc64nvme(crc, p, n)
        else:
            with nogil:
                crc = crcm_crc64nvme(crc, p, n)
    finally:
        PyBuffer_Release(&view)
    return crc


def crc64nvme(data, /, value=0):
    """CRC-64/NVME of data, continuing from value (S3's x-amz-checksum-crc64nvme is the 8-byte
    big-endian value, base64). value may be given by keyword; any integer is taken mod 2**64.
    Unsigned int."""
    return PyLong_FromUnsignedLongLong(_crc64_of(_mask64(value), data))


cdef uint64_t _length(object len2) except? 0xFFFFFFFFFFFFFFFF:
    len2 = _as_int(len2, "len2")
    try:
        return PyLong_AsUnsignedLongLong(len2)
    except OverflowError:
        raise ValueError(f"len2 must be in 0..2**64-1, not {len2}") from None


def crc32c_combine(crc1, crc2, len2, /):
    """CRC-32C of A||B from crc1 = crc32c(A), crc2 = crc32c(B) and len2 = len(B)."""
    return PyLong_FromUnsignedLong(
        crcm_combine(CRCM_CRC32C, _mask32(crc1, "crc1"), _mask32(crc2, "crc2"),
                     _length(len2)))


def crc32_combine(crc1, crc2, len2, /):
    """CRC-32 of A||B from crc1 = crc32(A), crc2 = crc32(B) and len2 = len(B), like zlib."""
    return PyLong_FromUnsignedLong(
        crcm_combine(CRCM_CRC32, _mask32(crc1, "crc1"), _mask32(crc2, "crc2"),
                     _length(len2)))


def crc64nvme_combine(crc_a, crc_b, len_b, /):
    """CRC-64/NVME of A||B from crc_a = crc64nvme(A), crc_b = crc64nvme(B), len_b = len(B).
    crc_a and crc_b are taken mod 2**64; len_b must be in 0..2**64-1 (as the 32-bit combines)."""
    return PyLong_FromUnsignedLongLong(
        crcm_crc64nvme_combine(_mask64(crc_a, "crc_a"), _mask64(crc_b, "crc_b"), _length(len_b)))


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

    algorithm may also be a tuple of two different algorithms, e.g. ("crc32c", "crc64nvme"):
    both checksums of every window are then computed in one pass over data (each window is
    read from memory once) and a tuple of two arrays is returned, in the tuple's order; `out`
    is then None or a tuple of two arrays of the matching dtypes.
    """
    cdef crcm_algorithm alg, alg_b
    cdef bint pair = isinstance(algorithm, tuple)
    if pair:
        if len(algorithm) != 2:
            raise ValueError(f"algorithm tuple must name two algorithms, not {len(algorithm)}")
        alg = _algorithm(algorithm[0])
        alg_b = _algorithm(algorithm[1])
        if alg == alg_b:
            raise ValueError(f"algorithm tuple names {_ALGORITHM_NAMES[alg]!r} twice")
        if out is not None and not (isinstance(out, tuple) and len(out) == 2):
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
            if view.len < _GIL_THRESHOLD:
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
        if total < <size_t>_GIL_THRESHOLD:
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


cdef class _CRCHash:
    """hashlib-style running CRC; a per-object lock keeps it consistent across threads."""
    cdef uint32_t _crc
    cdef crcm_algorithm _alg
    cdef PyThread_type_lock _lock

    def __cinit__(self, *args, **kwargs):
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError("cannot allocate a lock")

    def __dealloc__(self):
        if self._lock != NULL:
            PyThread_free_lock(self._lock)

    def __init__(self, data=b"", *, value=0):
        # value: a stored checksum to continue from (crc32c(b, value=crc32c(a)) == crc(a+b))
        self._crc = _mask32(value)
        if not (isinstance(data, bytes) and not data):
            self.update(data)

    cdef inline void _acquire(self):
        # Try without dropping the GIL first; only block (GIL released) if another thread
        # holds the lock, or the two threads would deadlock on the GIL.
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)

    cdef inline uint32_t _value(self):
        self._acquire()
        cdef uint32_t v = self._crc
        PyThread_release_lock(self._lock)
        return v

    def update(self, data, /):
        """Feed more bytes (any C-contiguous buffer)."""
        cdef Py_buffer view
        _get_buffer(data, &view)
        cdef const uint8_t *p = <const uint8_t *>view.buf
        cdef size_t n = <size_t>view.len
        try:
            if n < <size_t>_GIL_THRESHOLD:
                self._acquire()
                self._crc = crcm_crc(self._alg, self._crc, p, n)
                PyThread_release_lock(self._lock)
            else:
                with nogil:
                    PyThread_acquire_lock(self._lock, WAIT_LOCK)
                    self._crc = crcm_crc(self._alg, self._crc, p, n)
                    PyThread_release_lock(self._lock)
        finally:
            PyBuffer_Release(&view)

    def consume(self, stream, chunk_size):
        """Read `stream` (anything with .read(n)) to its end in chunks of at most chunk_size
        bytes, adding each to the checksum; yields the chunks as they are read (the
        google-crc32c convention: `for chunk in h.consume(f, 1 << 20): out.write(chunk)`;
        `collections.deque(h.consume(f, n), maxlen=0)` just checksums)."""
        size = _as_int(chunk_size, "chunk_size")
        if size <= 0:
            raise ValueError(f"chunk_size must be positive, not {size}")
        while True:
            chunk = stream.read(size)
            if not chunk:
                return
            self.update(chunk)
            yield chunk

    def intdigest(self):
        """The checksum as an unsigned int."""
        return PyLong_FromUnsignedLong(self._value())

    def digest(self):
        """The checksum as 4 bytes, big-endian (as Ozone and HDFS store it)."""
        cdef uint32_t v = self._value()
        cdef char buf[4]
        buf[0] = <char>(v >> 24)
        buf[1] = <char>(v >> 16)
        buf[2] = <char>(v >> 8)
        buf[3] = <char>v
        return PyBytes_FromStringAndSize(buf, 4)

    def hexdigest(self):
        """The checksum as 8 lowercase hex digits."""
        return f"{self._value():08x}"

    def copy(self):
        """An independent hash object with the same state."""
        cdef _CRCHash other = type(self).__new__(type(self))
        other._crc = self._value()
        return other

    def reset(self):
        """Back to the checksum of no data."""
        self._acquire()
        self._crc = 0
        PyThread_release_lock(self._lock)

    @property
    def digest_size(self):
        return 4

    @property
    def block_size(self):
        return 1

    def __repr__(self):
        return f"<{type(self).__name__} {self.hexdigest()}>"


cdef class CRC32C(_CRCHash):
    """Running CRC-32C in hashlib's shape: CRC32C(b"abc").hexdigest(). Usable with
    hashlib.file_digest(f, CRC32C)."""

    def __cinit__(self, *args, **kwargs):
        self._alg = CRCM_CRC32C

    @property
    def name(self):
        return "crc32c"


cdef class CRC32(_CRCHash):
    """Running CRC-32 (zlib's) in hashlib's shape."""

    def __cinit__(self, *args, **kwargs):
        self._alg = CRCM_CRC32

    @property
    def name(self):
        return "crc32"


cdef class CRC64NVME(_CRCHash):
    """Running CRC-64/NVME in hashlib's shape: CRC64NVME(b"abc").hexdigest(). digest() is the
    8-byte big-endian value, whose base64 is S3's x-amz-checksum-crc64nvme. The base class's
    lock guards this class's 64-bit state; every method reading or writing it is overridden."""
    cdef uint64_t _crc64

    def __cinit__(self, *args, **kwargs):
        self._alg = CRCM_CRC64NVME

    def __init__(self, data=b"", *, value=0):
        self._crc64 = _mask64(value)
        if not (isinstance(data, bytes) and not data):
            self.update(data)

    cdef inline uint64_t _value64(self):
        self._acquire()
        cdef uint64_t v = self._crc64
        PyThread_release_lock(self._lock)
        return v

    def update(self, data, /):
        """Feed more bytes (any C-contiguous buffer)."""
        cdef Py_buffer view
        _get_buffer(data, &view)
        cdef const uint8_t *p = <const uint8_t *>view.buf
        cdef size_t n = <size_t>view.len
        try:
            if n < <size_t>_GIL_THRESHOLD:
                self._acquire()
                self._crc64 = crcm_crc64nvme(self._crc64, p, n)
                PyThread_release_lock(self._lock)
            else:
                with nogil:
                    PyThread_acquire_lock(self._lock, WAIT_LOCK)
                    self._crc64 = crcm_crc64nvme(self._crc64, p, n)
                    PyThread_release_lock(self._lock)
        finally:
            PyBuffer_Release(&view)

    def intdigest(self):
        """The checksum as an unsigned int."""
        return PyLong_FromUnsignedLongLong(self._value64())

    def digest(self):
        """The checksum as 8 bytes, big-endian (base64 of it is S3's checksum header)."""
        cdef uint64_t v = self._value64()
        cdef char buf[8]
        cdef int i
        for i in range(8):
            buf[i] = <char>(v >> (56 - 8 * i))
        return PyBytes_FromStringAndSize(buf, 8)

    def hexdigest(self):
        """The checksum as 16 lowercase hex digits."""
        return f"{self._value64():016x}"

    def copy(self):
        """An independent hash object with the same state."""
        cdef CRC64NVME other = type(self).__new__(type(self))
        other._crc64 = self._value64()
        return other

    def reset(self):
        """Back to the checksum of no data."""
        self._acquire()
        self._crc64 = 0
        PyThread_release_lock(self._lock)

    @property
    def digest_size(self):
        return 8

    @property
    def name(self):
        return "crc64nvme"


def read_probe(data):
    """Read every byte of data (xor of its 64-bit words), GIL released: the memory-read speed
    that checksums of cold data are compared with in benchmarks. Returns the xor."""
    cdef Py_buffer view
    cdef uint64_t acc
    _get_buffer(data, &view)
    try:
        with nogil:
            acc = crcm_read_probe(<const uint8_t *>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return acc


def backend():
    """Name of the kernel in use, e.g. 'avx512-vpclmulqdq' or 'portable'."""
    return crcm_backend_name().decode()


def available_backends():
    """Backends this build and CPU can run, best first."""
    cdef const char *names[16]
    cdef size_t n = crcm_available_backends(names, 16)
    return [names[i].decode() for i in range(min(n, 16))]


def compiled_backends():
    """Backends this build contains, best first (some may not run on this CPU)."""
    cdef const char *names[16]
    cdef size_t n = crcm_compiled_backends(names, 16)
    return [names[i].decode() for i in range(min(n, 16))]


def set_backend(name):
    """Force a backend by name for the whole process; returns the previous one's name."""
    if not isinstance(name, str):
        raise TypeError(f"backend name must be a str, not {type(name).__name__}")
    previous = backend()
    cdef bytes encoded = name.encode()
    cdef int rc = crcm_set_backend(encoded)
    if rc == -1:
        raise ValueError(f"unknown backend {name!r}; this build has: {', '.join(compiled_backends())}")
    if rc == -2:
        raise BackendUnavailableError(
            f"backend {name!r} cannot run on this CPU; available: {', '.join(available_backends())}")
    return previous

include "_ozone.pxi"
