# Apache BookKeeper stored entries, verified in bulk: Cython binding of csrc/bookkeeper.h
# (included by _native.pyx). Public: merkle.bookkeeper_entries.

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

cdef extern from "bookkeeper.h" nogil:
    ctypedef enum crcm_bk_digest:
        CRCM_BK_CRC32C
        CRCM_BK_CRC32
        CRCM_BK_HMAC_SHA1
        CRCM_BK_DUMMY

    ctypedef struct crcm_bk_out:
        uint8_t *status
        int64_t *ledger_id
        int64_t *entry_id
        int64_t *last_add_confirmed
        int64_t *length
        uint64_t *stored_digest
        uint64_t *computed_digest
        uint32_t *payload_crc32c
        uint32_t *payload_crc32
        uint64_t *payload_crc64nvme

    int crcm_bk_entries(const uint8_t *data, size_t data_len, const int64_t *offsets,
                        const int64_t *sizes, size_t n, crcm_bk_digest digest,
                        const crcm_bk_out *out)

#: BookKeeper digest types (DigestManager's names, lower case) -> the C enum
_BK_DIGESTS = {"crc32c": CRCM_BK_CRC32C, "crc32": CRCM_BK_CRC32,
               "hmac-sha1": CRCM_BK_HMAC_SHA1, "dummy": CRCM_BK_DUMMY}
#: the extra payload CRCs `also` may name (merkle.replica.also.ALSO_ALGORITHMS)
_BK_ALSO = ("crc64nvme", "crc32c", "crc32")

BK_OK = 0
BK_SHORT = 1
BK_OUT_OF_BOUNDS = 2
BK_MISMATCH = 3
BK_UNVERIFIED = 4


cdef object _bk_column(object obj, str name):
    """An int64 column of entry offsets or sizes. Values are not range-checked here: the C loop
    gives each entry whose range is not inside the buffer status 2 (uint64 values above 2**63
    wrap to negative ones, which it refuses the same way)."""
    if (cnp.PyArray_Check(obj) and cnp.PyArray_TYPE(obj) == cnp.NPY_INT64
            and cnp.PyArray_NDIM(obj) == 1 and cnp.PyArray_IS_C_CONTIGUOUS(obj)):
        return obj  # the usual case, without numpy's conversion machinery (~1 us a call)
    arr = np.asarray(obj)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if arr.size == 0 and arr.dtype.kind in "fO":
        return np.empty(0, dtype=np.int64)  # np.asarray([]) is float64: an empty column
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name} must hold integers, not {arr.dtype}")
    return np.ascontiguousarray(arr.astype(np.int64, copy=False))


cdef crcm_bk_digest _bk_digest(object digest) except *:
    if not isinstance(digest, str):
        raise TypeError(f"digest must be a str, not {type(digest).__name__}")
    try:
        return _BK_DIGESTS[digest.lower()]
    except KeyError:
        raise ValueError(f"unknown digest {digest!r}; expected one of "
                         f"{', '.join(map(repr, _BK_DIGESTS))}") from None


cdef list _bk_also(object also):
    if isinstance(also, tuple) and not also:
        return []
    if isinstance(also, str):
        also = (also,)
    names = []
    for a in also:
        if not isinstance(a, str):
            raise TypeError(f"also must name algorithms (str), not {type(a).__name__}")
        low = a.lower()
        if low not in _BK_ALSO:
            raise ValueError(f"also {a!r}: one of {', '.join(_BK_ALSO)}")
        if low not in names:
            names.append(low)
    return names


cdef inline object _bk_empty(size_t n, int typenum):
    cdef cnp.npy_intp dims = <cnp.npy_intp>n
    return cnp.PyArray_EMPTY(1, &dims, typenum, 0)


def bookkeeper_entries(data, offsets, sizes, digest, *, also=()):
    """Verify a batch of BookKeeper stored entries in one native call (GIL released).

    Entry i is `data[offsets[i]:offsets[i] + sizes[i]]`: the bytes after an entry log
    record's 4-byte size word, `ledgerId(8) entryId(8) lastAddConfirmed(8) length(8)
    digest(n) payload`, all big-endian. `data` is any C-contiguous buffer (bytes, memoryview,
    mmap, numpy array); `offsets` and `sizes` are integer columns of one length. `digest` is
    the ledger's digest type: "crc32c" (n = 4), "crc32" (n = 8: four zero bytes and zlib's
    CRC-32), "hmac-sha1" (n = 20) or "dummy" (n = 0). The digest covers header ‖ payload.

    Returns a dict of numpy columns, one value per entry:

    - `status` (uint8): 0 the digest matches (always for "dummy"); 1 too short for the
      32-byte header and the digest; 2 offset/size negative or outside the buffer (nothing of
      it is read, every other column 0); 3 digest mismatch; 4 ("hmac-sha1" only) framing
      fine but the digest is NOT checked here: it is keyed by the ledger's password, so the
      caller computes HMAC-SHA1 (key SHA-1(b"mac" + password), as BookKeeper's
      MacDigestManager) over `data[off:off+32] + data[off+52:off+size]` and compares it with
      `data[off+32:off+52]`.
    - `ledger_id`, `entry_id`, `last_add_confirmed`, `length` (int64): the header,
      for every entry of at least 32 bytes inside the buffer (else 0). `length` is the
      ledger's length including this entry, as the writer recorded it (not checked).
    - `stored_digest`, `computed_digest` (uint64): the digest as stored (the whole 8-byte
      field for "crc32") and as computed, for the CRC digests (0 for "dummy", "hmac-sha1"
      and entries of status 1 or 2).
    - `payload_crc32c` (uint32): the CRC-32C of the payload (after header and digest); 0
      for entries of status 1 or 2, as every payload column.
    - `payload_<name>` for each name in `also` ("crc32", "crc64nvme" (uint64) or "crc32c"):
      another CRC of the payload, from the same pass.

    The payload is read once: the CRC digest is combined from the header's CRC and the
    payload's. ValueError/TypeError (one line) for an unknown digest or `also` name, columns
    of different lengths or non-integer columns; never an exception for lying offsets/sizes.
    """
    cdef crcm_bk_digest dg = _bk_digest(digest)
    names = _bk_also(also)
    off = _bk_column(offsets, "offsets")
    siz = _bk_column(sizes, "sizes")
    if off.shape[0] != siz.shape[0]:
        raise ValueError(
            f"offsets and sizes differ in length ({off.shape[0]} != {siz.shape[0]})")
    cdef size_t n = <size_t>off.shape[0]
    cdef bint want32 = "crc32" in names, want64 = "crc64nvme" in names
    result = {
        "status": _bk_empty(n, cnp.NPY_UINT8),
        "ledger_id": _bk_empty(n, cnp.NPY_INT64),
        "entry_id": _bk_empty(n, cnp.NPY_INT64),
        "last_add_confirmed": _bk_empty(n, cnp.NPY_INT64),
        "length": _bk_empty(n, cnp.NPY_INT64),
        "stored_digest": _bk_empty(n, cnp.NPY_UINT64),
        "computed_digest": _bk_empty(n, cnp.NPY_UINT64),
        "payload_crc32c": _bk_empty(n, cnp.NPY_UINT32),
    }
    if want32:
        result["payload_crc32"] = _bk_empty(n, cnp.NPY_UINT32)
    if want64:
        result["payload_crc64nvme"] = _bk_empty(n, cnp.NPY_UINT64)
    if n == 0:
        return result
    cdef crcm_bk_out o
    o.status = <uint8_t *>cnp.PyArray_DATA(result["status"])
    o.ledger_id = <int64_t *>cnp.PyArray_DATA(result["ledger_id"])
    o.entry_id = <int64_t *>cnp.PyArray_DATA(result["entry_id"])
    o.last_add_confirmed = <int64_t *>cnp.PyArray_DATA(result["last_add_confirmed"])
    o.length = <int64_t *>cnp.PyArray_DATA(result["length"])
    o.stored_digest = <uint64_t *>cnp.PyArray_DATA(result["stored_digest"])
    o.computed_digest = <uint64_t *>cnp.PyArray_DATA(result["computed_digest"])
    o.payload_crc32c = <uint32_t *>cnp.PyArray_DATA(result["payload_crc32c"])
    o.payload_crc32 = (<uint32_t *>cnp.PyArray_DATA(result["payload_crc32"])
                       if want32 else NULL)
    o.payload_crc64nvme = (<uint64_t *>cnp.PyArray_DATA(result["payload_crc64nvme"])
                           if want64 else NULL)
    cdef const int64_t *po = <const int64_t *>cnp.PyArray_DATA(off)
    cdef const int64_t *ps = <const int64_t *>cnp.PyArray_DATA(siz)
    cdef Py_buffer view
    _get_buffer(data, &view)
    try:
        with nogil:
            crcm_bk_entries(<const uint8_t *>view.buf, <size_t>view.len, po, ps, n, dg, &o)
    finally:
        PyBuffer_Release(&view)
    return result  # "crc32c" in also: payload_crc32c, which is always there
