# cython: binding=False, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# cython: subinterpreters_compatible=own_gil
"""The scalar checksum API without numpy: crc32c/crc32/crc64nvme and their combines, the
hashlib-style classes, and the backend switches.

Built with CYTHON_USE_MODULE_STATE=1 (multi-phase init, per-module state, heap types) and
declared safe for isolated sub-interpreters with their own GIL (PEP 684): numpy cannot be
imported in one, so this module imports nothing of numpy, nor merkle._native (the numpy layer,
which re-exports these names and shares the C core's backend slot through _dispatch_state).

Private: the public API is re-exported by merkle/__init__.py.
"""

from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport (PyLong_AsUnsignedLongLong, PyLong_AsUnsignedLongLongMask,
                           PyLong_AsUnsignedLongMask, PyLong_FromUnsignedLong,
                           PyLong_FromUnsignedLongLong)
from cpython.number cimport PyNumber_Index
from cpython.pycapsule cimport PyCapsule_New
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)
from libc.stdint cimport uint8_t, uint32_t, uint64_t

from merkle._native cimport *  # the C core's declarations only (no run-time import)


class BackendUnavailableError(RuntimeError):
    """The named backend exists but this build or CPU cannot run it."""


class LengthOverflowError(OverflowError, ValueError):
    """A combine length outside 0..2**64-1: an OverflowError as zlib raises, and a ValueError."""


include "_common.pxi"

# The C core's backend slot, for merkle._native to adopt (one backend per process).
_dispatch_state = PyCapsule_New(crcm_dispatch_slot(), b"merkle._crc.dispatch_state", NULL)

# consume(): tells "not given" from any value a caller may pass (None included).
_NOT_GIVEN = object()


cdef inline uint32_t _mask32(object value, const char *name=b"value") except? 0xFFFFFFFF:
    # zlib semantics: any integer is taken modulo 2**32 (negative ones too). The name is a C
    # string, made a str only off the fast path: each Python constant costs a module-state
    # lookup per call here.
    if isinstance(value, int):
        return <uint32_t>PyLong_AsUnsignedLongMask(value)
    return <uint32_t>PyLong_AsUnsignedLongMask(_as_int(value, name.decode()))


cdef inline uint64_t _mask64(object value, const char *name=b"value") except? 0xFFFFFFFFFFFFFFFF:
    # as _mask32: any integer is taken modulo 2**64
    if isinstance(value, int):
        return <uint64_t>PyLong_AsUnsignedLongLongMask(value)
    return <uint64_t>PyLong_AsUnsignedLongLongMask(_as_int(value, name.decode()))


cdef inline uint64_t _crc_arg(object value, const char *name,
                              uint64_t top) except? 0xFFFFFFFFFFFFFFFF:
    # A CRC handed to a combine: 0..top or ValueError, as awscrt's combine raises ("not a
    # valid unsigned"). Taken modulo 2**width it would be a silent wrong answer: a negative or
    # too large CRC is a caller's bug (a signed 32-bit read of a stored checksum, say), not a
    # start value to wrap as zlib wraps one.
    if not isinstance(value, int):
        value = _as_int(value, name.decode())
    cdef uint64_t v
    try:
        v = PyLong_AsUnsignedLongLong(value)  # OverflowError: negative, or over 64 bits
    except OverflowError:
        raise ValueError(f"{name.decode()} must be an unsigned CRC in 0..{top}, not "
                         f"{value}") from None
    if v > top:
        raise ValueError(f"{name.decode()} must be an unsigned CRC in 0..{top}, not {value}")
    return v


cdef extern from "_crcfast.h":
    object crcm_py_function(int which, object module_name)
    int crcm_py_make_immutable(object type_) except -1

# crc32c(data, value=0, gil_release_mode=-1), and crc32 and crc64nvme alike, value and
# gil_release_mode by position or keyword (as the crc32c package allows): plain C functions,
# see _crcfast.h for why.
crc32c = crcm_py_function(0, __name__)
crc32 = crcm_py_function(1, __name__)
crc64nvme = crcm_py_function(2, __name__)


def crc32c_combine(crc1, crc2, len2, /):
    """CRC-32C of A||B from crc1 = crc32c(A), crc2 = crc32c(B) and len2 = len(B).

    crc1 or crc2 outside 0..2**32-1 (negative, or too large) raises ValueError, as awscrt's
    combine does; len2 outside 0..2**64-1 raises LengthOverflowError (an OverflowError and a
    ValueError)."""
    return PyLong_FromUnsignedLong(
        crcm_combine(CRCM_CRC32C, _crc_arg(crc1, b"crc1", 0xFFFFFFFF),
                     _crc_arg(crc2, b"crc2", 0xFFFFFFFF), _length(len2)))


def crc32_combine(crc1, crc2, len2, /):
    """CRC-32 of A||B from crc1 = crc32(A), crc2 = crc32(B) and len2 = len(B), like zlib.

    crc1 or crc2 outside 0..2**32-1 (negative, or too large) raises ValueError, as awscrt's
    combine does; len2 outside 0..2**64-1 raises LengthOverflowError (an OverflowError and a
    ValueError)."""
    return PyLong_FromUnsignedLong(
        crcm_combine(CRCM_CRC32, _crc_arg(crc1, b"crc1", 0xFFFFFFFF),
                     _crc_arg(crc2, b"crc2", 0xFFFFFFFF), _length(len2)))


def crc64nvme_combine(crc_a, crc_b, len_b, /):
    """CRC-64/NVME of A||B from crc_a = crc64nvme(A), crc_b = crc64nvme(B), len_b = len(B).
    crc_a or crc_b outside 0..2**64-1 (negative, or too large) raises ValueError, as awscrt's
    combine does; len_b outside 0..2**64-1 raises LengthOverflowError
    (an OverflowError and a ValueError), as the 32-bit combines."""
    return PyLong_FromUnsignedLongLong(
        crcm_crc64nvme_combine(_crc_arg(crc_a, b"crc_a", 0xFFFFFFFFFFFFFFFF),
                               _crc_arg(crc_b, b"crc_b", 0xFFFFFFFFFFFFFFFF), _length(len_b)))


cdef inline uint64_t _feed(crcm_algorithm alg, uint64_t crc, const uint8_t *p,
                          size_t n) noexcept nogil:
    # one running-CRC step of any algorithm; the 32-bit ones keep their value in the low half
    if alg == CRCM_CRC64NVME:
        return crcm_crc64nvme(crc, p, n)
    return crcm_crc(alg, <uint32_t>crc, p, n)


cdef class _CRCHash:
    """hashlib-style running CRC of any width (4 or 8 bytes: the subclass says which, with its
    algorithm); a per-object lock keeps it consistent across threads."""
    cdef uint64_t _crc
    cdef crcm_algorithm _alg
    cdef int _width
    cdef PyThread_type_lock _lock

    def __cinit__(self, *args, **kwargs):
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError("cannot allocate a lock")

    def __dealloc__(self):
        if self._lock != NULL:
            PyThread_free_lock(self._lock)

    def __init__(self, data=b"", *, value=0):
        # value: a stored checksum to continue from (crc32c(b, value=crc32c(a)) == crc(a+b)),
        # taken modulo 2**(8 * width) as zlib takes a start value
        self._crc = _mask64(value) if self._width == 8 else _mask32(value)
        if not (isinstance(data, bytes) and not data):
            self.update(data)

    cdef inline void _acquire(self):
        # Try without dropping the GIL first; only block (GIL released) if another thread
        # holds the lock, or the two threads would deadlock on the GIL.
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)

    cdef inline uint64_t _value(self):
        self._acquire()
        cdef uint64_t v = self._crc
        PyThread_release_lock(self._lock)
        return v

    def update(self, data, /):
        """Feed more bytes (any C-contiguous buffer)."""
        cdef Py_buffer view
        _get_buffer(data, &view)
        cdef const uint8_t *p = <const uint8_t *>view.buf
        cdef size_t n = <size_t>view.len
        try:
            if n < <size_t>CRCM_PY_GIL_THRESHOLD:
                self._acquire()
                self._crc = _feed(self._alg, self._crc, p, n)
                PyThread_release_lock(self._lock)
            else:
                with nogil:
                    PyThread_acquire_lock(self._lock, WAIT_LOCK)
                    self._crc = _feed(self._alg, self._crc, p, n)
                    PyThread_release_lock(self._lock)
        finally:
            PyBuffer_Release(&view)

    def consume(self, stream, chunksize=_NOT_GIVEN, *, chunk_size=_NOT_GIVEN):
        """Read `stream` (anything with .read(n)) in chunks of stream.read(chunksize), adding
        each to the checksum, until a read returns nothing; yields the chunks as they are read
        (google-crc32c's Checksum.consume: `for chunk in h.consume(f, 1 << 20): out.write(chunk)`;
        `collections.deque(h.consume(f, n), maxlen=0)` just checksums).

        chunksize has google-crc32c's spelling and meanings: it goes to stream.read as given, so
        0 yields nothing and -1 (any negative, or None) reads the rest of the stream in one
        chunk. chunk_size (keyword) is accepted as the older spelling."""
        if chunksize is _NOT_GIVEN:
            if chunk_size is _NOT_GIVEN:
                raise TypeError("consume() missing required argument 'chunksize'")
            chunksize = chunk_size
        elif chunk_size is not _NOT_GIVEN:
            raise TypeError("consume() got both chunksize and chunk_size")
        size = None if chunksize is None else _as_int(chunksize, "chunksize")
        return self._consume(stream, size)

    def _consume(self, stream, size):
        # A generator of its own, so consume() checks its arguments when called.
        while True:
            chunk = stream.read(size)
            if not chunk:
                return
            self.update(chunk)
            yield chunk

    def intdigest(self):
        """The checksum as an unsigned int."""
        return PyLong_FromUnsignedLongLong(self._value())

    def digest(self):
        """The checksum as `digest_size` bytes, big-endian (as Ozone and HDFS store the 32-bit
        CRCs; base64 of CRC-64/NVME's 8 bytes is S3's x-amz-checksum-crc64nvme)."""
        cdef uint64_t v = self._value()
        cdef char buf[8]
        cdef int i
        for i in range(self._width):
            buf[i] = <char>(v >> (8 * (self._width - 1 - i)))
        return PyBytes_FromStringAndSize(buf, self._width)

    def hexdigest(self):
        """The checksum as 2 * digest_size lowercase hex digits."""
        return f"{self._value():0{2 * self._width}x}"

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
        return self._width

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
        self._width = 4

    @property
    def name(self):
        return "crc32c"


cdef class CRC32(_CRCHash):
    """Running CRC-32 (zlib's) in hashlib's shape."""

    def __cinit__(self, *args, **kwargs):
        self._alg = CRCM_CRC32
        self._width = 4

    @property
    def name(self):
        return "crc32"


cdef class CRC64NVME(_CRCHash):
    """Running CRC-64/NVME in hashlib's shape: CRC64NVME(b"abc").hexdigest(). digest() is the
    8-byte big-endian value, whose base64 is S3's x-amz-checksum-crc64nvme."""

    def __cinit__(self, *args, **kwargs):
        self._alg = CRCM_CRC64NVME
        self._width = 8

    @property
    def name(self):
        return "crc64nvme"


# Immutable as hashlib's types are (merkle.CRC32C.name = "x" raises TypeError): the heap types
# that the module state needs are mutable unless flagged so.
for _t in (_CRCHash, CRC32C, CRC32, CRC64NVME):
    crcm_py_make_immutable(_t)
del _t


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
    """Force a backend by name for the whole process (every interpreter in it); returns the
    previous one's name."""
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
