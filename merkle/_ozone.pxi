# Ozone container trees: Cython bindings of csrc/ozone_tree.h (included by _native.pyx).
#
# Private: merkle/trees/model.py, treefile.py and diff.py call these with arrays they have already
# shaped (contiguous, right dtype); every pointer handed to C is still checked here first
# (dtype, contiguity, length), so a mistake upstream raises instead of reading out of bounds.

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t

cdef extern from "ozone_tree.h" nogil:
    void ozt_leaves_u32(const uint32_t *windows, const int64_t *starts, size_t n_chunks,
                        int64_t *out)
    void ozt_leaves_bytes(const uint8_t *data, const int64_t *starts, size_t n_chunks,
                          int64_t *out)
    void ozt_block_values(const int64_t *block_ids, const int64_t *chunk_start, size_t n_blocks,
                          const int64_t *leaves, int64_t *out)
    int64_t ozt_container_value(const int64_t *block_values, size_t n_blocks)
    int ozt_sort_chunks(const int64_t *block, const int64_t *offset, size_t n, int64_t *perm,
                        size_t *n_out)
    int ozt_sort_blocks(const int64_t *ids, size_t n, int64_t *perm, size_t *n_out)
    int ozt_is_sorted(const int64_t *v, size_t n)
    size_t ozt_group(const int64_t *chunk_block, size_t n, int64_t *ids_out, int64_t *starts_out)

    ctypedef struct ozt_tree_view:
        int has_container_id, has_tree, has_data_checksum
        int64_t container_id, data_checksum
        size_t n_blocks, n_chunks
        const int64_t *block_id
        const int64_t *block_value
        const int64_t *chunk_start
        const uint8_t *block_deleted
        const uint8_t *block_present
        const int64_t *chunk_offset
        const int64_t *chunk_length
        const int64_t *chunk_value
        const uint8_t *chunk_matches
        const uint8_t *chunk_present
        const uint8_t *tail
        size_t tail_len

    ctypedef struct ozt_tree_out:
        int has_container_id, has_tree, has_data_checksum
        int64_t container_id, data_checksum
        size_t n_blocks, n_chunks
        int64_t *block_id
        int64_t *block_value
        int64_t *chunk_start
        uint8_t *block_deleted
        uint8_t *block_present
        int64_t *chunk_offset
        int64_t *chunk_length
        int64_t *chunk_value
        uint8_t *chunk_matches
        uint8_t *chunk_present
        size_t unknown_fields
        uint8_t *tail
        size_t tail_len

    ctypedef struct ozt_error:
        size_t offset
        const char *what

    size_t ozt_encoded_size(const ozt_tree_view *t, uint64_t *block_sizes)
    void ozt_encode(const ozt_tree_view *t, const uint64_t *block_sizes, uint8_t *out)
    int ozt_decode_count(const uint8_t *buf, size_t len, size_t *n_blocks, size_t *n_chunks,
                         size_t *tail_len, ozt_error *err)
    int ozt_decode(const uint8_t *buf, size_t len, ozt_tree_out *out, ozt_error *err)

    ctypedef struct ozt_diff_side:
        size_t n_blocks, n_chunks
        const int64_t *block_id
        const int64_t *block_value
        const int64_t *chunk_start
        const uint8_t *block_deleted
        const int64_t *chunk_offset
        const int64_t *chunk_value
        const uint8_t *chunk_matches

    ctypedef struct ozt_diff_out:
        int64_t *missing_blocks
        int64_t *deleted_blocks
        int64_t *missing_chunks
        int64_t *corrupt_chunks
        int64_t *corrupt_chunks_ours
        int64_t *unrecoverable_chunks
        int64_t *unrecoverable_chunks_ours
        size_t n_missing_blocks, n_deleted_blocks, n_missing_chunks, n_corrupt_chunks
        size_t n_unrecoverable_chunks, n_unhealthy_filtered

    void ozt_diff(const ozt_diff_side *ours, const ozt_diff_side *peer, ozt_diff_out *out)


class _OzoneDecodeError(ValueError):
    """The bytes are not a valid ContainerChecksumInfo: args are (offset, what)."""


# Above this many elements the GIL is released around a bulk tree call.
cdef size_t _OZT_NOGIL = 65536


cdef void *_col(object arr, object dtype, size_t n, str name) except NULL:
    """Data pointer of a C-contiguous 1-D array of exactly n elements of dtype."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(arr).__name__}")
    if arr.dtype != dtype or arr.ndim != 1 or not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be a C-contiguous 1-D {np.dtype(dtype)} array, "
                         f"not {arr.ndim}-D {arr.dtype}")
    if <size_t>arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} elements; {n} expected")
    cdef void *p = cnp.PyArray_DATA(arr)
    if p == NULL:  # never for numpy arrays, but keep the except-NULL contract honest
        raise ValueError(f"{name} has no data")
    return p


cdef void _check_starts(object starts, size_t n, size_t limit, str name) except *:
    """CSR starts: n+1 entries, starts[0] == 0, non-decreasing, last == limit."""
    cdef const int64_t *s = <const int64_t *>_col(starts, np.int64, n + 1, name)
    if s[0] != 0 or <size_t>s[n] != limit:
        raise ValueError(f"{name} must start at 0 and end at {limit}")
    if not ozt_is_sorted(s, n + 1):
        raise ValueError(f"{name} must be non-decreasing")


cdef object _new_i64(size_t n):
    cdef cnp.npy_intp dims = <cnp.npy_intp>n
    return cnp.PyArray_EMPTY(1, &dims, cnp.NPY_INT64, 0)


cdef object _new_u8(size_t n):
    cdef cnp.npy_intp dims = <cnp.npy_intp>n
    return cnp.PyArray_EMPTY(1, &dims, cnp.NPY_UINT8, 0)


def _ozt_leaves_u32(windows, starts):
    """Leaf value of each chunk from uint32 window checksums grouped by CSR starts."""
    cdef size_t n = <size_t>starts.shape[0] - 1
    cdef size_t nw = <size_t>windows.shape[0]
    cdef const uint32_t *w = <const uint32_t *>_col(windows, np.uint32, nw, "windows")
    _check_starts(starts, n, nw, "window starts")
    cdef const int64_t *s = <const int64_t *>cnp.PyArray_DATA(starts)
    out = _new_i64(n)
    cdef int64_t *o = <int64_t *>cnp.PyArray_DATA(out)
    if nw + n < _OZT_NOGIL:
        ozt_leaves_u32(w, s, n, o)
    else:
        with nogil:
            ozt_leaves_u32(w, s, n, o)
    return out


def _ozt_leaves_bytes(data, starts):
    """Leaf value of each chunk from its raw stored window bytes data[starts[i]:starts[i+1]]."""
    cdef size_t n = <size_t>starts.shape[0] - 1
    cdef Py_buffer view
    _get_buffer(data, &view)
    cdef const int64_t *s
    cdef int64_t *o
    try:
        _check_starts(starts, n, <size_t>view.len, "byte starts")
        s = <const int64_t *>cnp.PyArray_DATA(starts)
        out = _new_i64(n)
        o = <int64_t *>cnp.PyArray_DATA(out)
        with nogil:
            ozt_leaves_bytes(<const uint8_t *>view.buf, s, n, o)
    finally:
        PyBuffer_Release(&view)
    return out


def _ozt_block_values(block_ids, chunk_start, leaves):
    """Value of each block from its id and its chunks' leaves (CSR chunk_start)."""
    cdef size_t nb = <size_t>block_ids.shape[0]
    cdef size_t nc = <size_t>leaves.shape[0]
    cdef const int64_t *ids = <const int64_t *>_col(block_ids, np.int64, nb, "block ids")
    cdef const int64_t *lv = <const int64_t *>_col(leaves, np.int64, nc, "leaves")
    _check_starts(chunk_start, nb, nc, "chunk starts")
    cdef const int64_t *cs = <const int64_t *>cnp.PyArray_DATA(chunk_start)
    out = _new_i64(nb)
    cdef int64_t *o = <int64_t *>cnp.PyArray_DATA(out)
    if nb + nc < _OZT_NOGIL:
        ozt_block_values(ids, cs, nb, lv, o)
    else:
        with nogil:
            ozt_block_values(ids, cs, nb, lv, o)
    return out


def _ozt_container_value(block_values):
    cdef size_t n = <size_t>block_values.shape[0]
    cdef const int64_t *v = <const int64_t *>_col(block_values, np.int64, n, "block values")
    cdef int64_t r
    with nogil:
        r = ozt_container_value(v, n)
    return r


def _ozt_sort_rows(keys, offsets=None):
    """None if rows are strictly increasing by (keys, offsets); else the kept row indices
    (stable order, last row of each equal-key run kept)."""
    cdef size_t n = <size_t>keys.shape[0]
    cdef const int64_t *a = <const int64_t *>_col(keys, np.int64, n, "keys")
    cdef const int64_t *b = NULL
    if offsets is not None:
        b = <const int64_t *>_col(offsets, np.int64, n, "offsets")
    perm = _new_i64(n)
    cdef int64_t *p = <int64_t *>cnp.PyArray_DATA(perm)
    cdef size_t m = 0
    cdef int rc
    with nogil:
        if b != NULL:
            rc = ozt_sort_chunks(a, b, n, p, &m)
        else:
            rc = ozt_sort_blocks(a, n, p, &m)
    if rc < 0:
        raise MemoryError("cannot allocate the sort buffer")
    if rc == 0:
        return None
    return perm[:m]


def _ozt_is_sorted(values):
    cdef size_t n = <size_t>values.shape[0]
    cdef const int64_t *v = <const int64_t *>_col(values, np.int64, n, "values")
    return bool(ozt_is_sorted(v, n))


def _ozt_group(chunk_block):
    """(distinct ids, CSR starts) of a sorted chunk->block column."""
    cdef size_t n = <size_t>chunk_block.shape[0]
    cdef const int64_t *cb = <const int64_t *>_col(chunk_block, np.int64, n, "chunk blocks")
    ids = _new_i64(n)
    starts = _new_i64(n + 1)
    cdef int64_t *ip = <int64_t *>cnp.PyArray_DATA(ids)
    cdef int64_t *sp = <int64_t *>cnp.PyArray_DATA(starts)
    cdef size_t g
    with nogil:
        g = ozt_group(cb, n, ip, sp)
    return ids[:g].copy(), starts[:g + 1].copy()


def _ozt_encode(bint has_container_id, int64_t container_id, bint has_tree,
                bint has_data_checksum, int64_t data_checksum,
                block_id, block_value, block_deleted, block_present, chunk_start,
                chunk_offset, chunk_length, chunk_value, chunk_matches, chunk_present,
                bytes tail=b""):
    """Serialize a columnar tree as ContainerChecksumInfo bytes (bool columns as uint8);
    `tail` (unknown top-level fields, raw) is written after field 2."""
    cdef ozt_tree_view t
    cdef size_t nb = <size_t>block_id.shape[0]
    cdef size_t nc = <size_t>chunk_offset.shape[0]
    t.has_container_id = has_container_id
    t.container_id = container_id
    t.has_tree = has_tree
    t.has_data_checksum = has_data_checksum
    t.data_checksum = data_checksum
    t.n_blocks = nb
    t.n_chunks = nc
    t.block_id = <const int64_t *>_col(block_id, np.int64, nb, "block ids")
    t.block_value = <const int64_t *>_col(block_value, np.int64, nb, "block values")
    t.block_deleted = <const uint8_t *>_col(block_deleted, np.uint8, nb, "block deleted")
    t.block_present = NULL
    if block_present is not None:
        t.block_present = <const uint8_t *>_col(block_present, np.uint8, nb, "block presence")
    _check_starts(chunk_start, nb, nc, "chunk starts")
    t.chunk_start = <const int64_t *>cnp.PyArray_DATA(chunk_start)
    t.chunk_offset = <const int64_t *>_col(chunk_offset, np.int64, nc, "chunk offsets")
    t.chunk_length = <const int64_t *>_col(chunk_length, np.int64, nc, "chunk lengths")
    t.chunk_value = <const int64_t *>_col(chunk_value, np.int64, nc, "chunk values")
    t.chunk_matches = <const uint8_t *>_col(chunk_matches, np.uint8, nc, "chunk matches")
    t.chunk_present = NULL
    if chunk_present is not None:
        t.chunk_present = <const uint8_t *>_col(chunk_present, np.uint8, nc, "chunk presence")
    if tail is None:
        tail = b""
    t.tail = <const uint8_t *>PyBytes_AS_STRING(tail)
    t.tail_len = <size_t>len(tail)
    sizes = np.empty(nb, dtype=np.uint64)
    cdef uint64_t *bs = <uint64_t *>cnp.PyArray_DATA(sizes)
    cdef size_t total
    with nogil:
        total = ozt_encoded_size(&t, bs)
    out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
    cdef uint8_t *dst = <uint8_t *>PyBytes_AS_STRING(out)
    with nogil:
        ozt_encode(&t, bs, dst)
    return out


def _ozt_decode(data):
    """Parse ContainerChecksumInfo bytes into columns: a dict of scalars and arrays
    (bool columns as uint8). Raises _OzoneDecodeError(offset, what)."""
    cdef Py_buffer view
    _get_buffer(data, &view)
    cdef ozt_error err
    cdef ozt_tree_out o
    cdef size_t nb = 0, nc = 0, nt = 0
    cdef int rc
    cdef const uint8_t *buf = <const uint8_t *>view.buf
    cdef size_t n = <size_t>view.len
    try:
        with nogil:
            rc = ozt_decode_count(buf, n, &nb, &nc, &nt, &err)
        if rc != 0:
            raise _OzoneDecodeError(err.offset, err.what.decode())
        cols = {
            "block_id": _new_i64(nb), "block_value": _new_i64(nb),
            "block_chunk_start": _new_i64(nb + 1), "block_deleted": _new_u8(nb),
            "block_present": _new_u8(nb), "chunk_offset": _new_i64(nc),
            "chunk_length": _new_i64(nc), "chunk_value": _new_i64(nc),
            "chunk_matches": _new_u8(nc), "chunk_present": _new_u8(nc),
        }
        o.n_blocks = nb
        o.n_chunks = nc
        o.block_id = <int64_t *>cnp.PyArray_DATA(cols["block_id"])
        o.block_value = <int64_t *>cnp.PyArray_DATA(cols["block_value"])
        o.chunk_start = <int64_t *>cnp.PyArray_DATA(cols["block_chunk_start"])
        o.block_deleted = <uint8_t *>cnp.PyArray_DATA(cols["block_deleted"])
        o.block_present = <uint8_t *>cnp.PyArray_DATA(cols["block_present"])
        o.chunk_offset = <int64_t *>cnp.PyArray_DATA(cols["chunk_offset"])
        o.chunk_length = <int64_t *>cnp.PyArray_DATA(cols["chunk_length"])
        o.chunk_value = <int64_t *>cnp.PyArray_DATA(cols["chunk_value"])
        o.chunk_matches = <uint8_t *>cnp.PyArray_DATA(cols["chunk_matches"])
        o.chunk_present = <uint8_t *>cnp.PyArray_DATA(cols["chunk_present"])
        o.unknown_fields = 0
        tail = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>nt)
        o.tail = <uint8_t *>PyBytes_AS_STRING(tail)
        o.tail_len = nt
        with nogil:
            rc = ozt_decode(buf, n, &o, &err)
        if rc != 0:
            raise _OzoneDecodeError(err.offset, err.what.decode())
    finally:
        PyBuffer_Release(&view)
    cols.update(
        has_container_id=bool(o.has_container_id), container_id=o.container_id,
        has_tree=bool(o.has_tree), has_data_checksum=bool(o.has_data_checksum),
        data_checksum=o.data_checksum, unknown_fields=o.unknown_fields, tail=tail)
    return cols


cdef void _diff_side(ozt_diff_side *s, tuple cols, str who) except *:
    block_id, block_value, block_deleted, chunk_start, chunk_offset, chunk_value, chunk_matches = cols
    cdef size_t nb = <size_t>block_id.shape[0]
    cdef size_t nc = <size_t>chunk_offset.shape[0]
    s.n_blocks = nb
    s.n_chunks = nc
    s.block_id = <const int64_t *>_col(block_id, np.int64, nb, who + " block ids")
    s.block_value = <const int64_t *>_col(block_value, np.int64, nb, who + " block values")
    s.block_deleted = <const uint8_t *>_col(block_deleted, np.uint8, nb, who + " block deleted")
    _check_starts(chunk_start, nb, nc, who + " chunk starts")
    s.chunk_start = <const int64_t *>cnp.PyArray_DATA(chunk_start)
    s.chunk_offset = <const int64_t *>_col(chunk_offset, np.int64, nc, who + " chunk offsets")
    s.chunk_value = <const int64_t *>_col(chunk_value, np.int64, nc, who + " chunk values")
    s.chunk_matches = <const uint8_t *>_col(chunk_matches, np.uint8, nc, who + " chunk matches")


def _ozt_diff(tuple ours, tuple peer):
    """One-sided diff of two sorted columnar trees. Each side is (block_id, block_value,
    block_deleted u8, chunk_start, chunk_offset, chunk_value, chunk_matches u8). Returns a dict
    of row-index arrays (peer rows unless *_ours) and the unhealthy-filtered count."""
    cdef ozt_diff_side a, b
    cdef ozt_diff_out o
    _diff_side(&a, ours, "our")
    _diff_side(&b, peer, "peer")
    # Each output holds at most one entry per peer row; untouched pages of np.empty cost nothing.
    mb = _new_i64(b.n_blocks)
    db = _new_i64(b.n_blocks)
    mc = _new_i64(b.n_chunks)
    cc = _new_i64(b.n_chunks)
    cco = _new_i64(b.n_chunks)
    uc = _new_i64(b.n_chunks)
    uco = _new_i64(b.n_chunks)
    o.missing_blocks = <int64_t *>cnp.PyArray_DATA(mb)
    o.deleted_blocks = <int64_t *>cnp.PyArray_DATA(db)
    o.missing_chunks = <int64_t *>cnp.PyArray_DATA(mc)
    o.corrupt_chunks = <int64_t *>cnp.PyArray_DATA(cc)
    o.corrupt_chunks_ours = <int64_t *>cnp.PyArray_DATA(cco)
    o.unrecoverable_chunks = <int64_t *>cnp.PyArray_DATA(uc)
    o.unrecoverable_chunks_ours = <int64_t *>cnp.PyArray_DATA(uco)
    with nogil:
        ozt_diff(&a, &b, &o)
    return {
        "missing_blocks": mb[:o.n_missing_blocks].copy(),
        "deleted_blocks": db[:o.n_deleted_blocks].copy(),
        "missing_chunks": mc[:o.n_missing_chunks].copy(),
        "corrupt_chunks": cc[:o.n_corrupt_chunks].copy(),
        "corrupt_chunks_ours": cco[:o.n_corrupt_chunks].copy(),
        "unrecoverable_chunks": uc[:o.n_unrecoverable_chunks].copy(),
        "unrecoverable_chunks_ours": uco[:o.n_unrecoverable_chunks].copy(),
        "unhealthy_filtered": o.n_unhealthy_filtered,
    }
