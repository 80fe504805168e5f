# Argument helpers shared by merkle/_crc.pyx and merkle/_native.pyx (included into both, so
# each module has its own copy: _crc must not depend on _native at run time, see _crc.pyx).
# Needs in the including module: cimports of PyObject_GetBuffer, PyBUF_C_CONTIGUOUS,
# PyNumber_Index, PyLong_AsUnsignedLongLong, uint64_t; the name LengthOverflowError.

# From this many bytes on the GIL is released around the kernel. Releasing and taking it back
# costs ~0.1 us: on Zen 3 a 16 KiB crc32c call took 815 ns with the release and 719 ns without
# (medians of 41 interleaved rounds), while the ymm kernels need ~0.45 us for 16 KiB. At 64 KiB
# (~1.7 us of work) the release costs ~6%, and threads still checksum large buffers in parallel.
# The number itself is in _crcfast.h, which merkle.crc32c()/crc32() (plain C) use as well.
cdef extern from "_crcfast.h":
    enum: CRCM_PY_GIL_THRESHOLD
GIL_RELEASE_THRESHOLD = CRCM_PY_GIL_THRESHOLD


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


cdef uint64_t _length(object len2) except? 0xFFFFFFFFFFFFFFFF:
    len2 = _as_int(len2, "len2")
    try:
        return PyLong_AsUnsignedLongLong(len2)
    except OverflowError:
        # OverflowError as zlib's crc32_combine (CPython 3.14) and isal raise for a length that
        # does not fit; also a ValueError, as crcmerkle raised before.
        raise LengthOverflowError(f"len2 must be in 0..2**64-1, not {len2}") from None
