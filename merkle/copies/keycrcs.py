"""Every key's full-object CRCs from its chunks' window checksums, for a batch of keys at once
(the copy check's compose step): columns in, columns out, one native fold per run of equal
windows of a key, no object per chunk.

Input (COMPOSE_SCHEMA), sorted by key, block sequence and chunk offset: one row per chunk of
the replica chosen for each block (a verified one: spark_udfs.jobs.copycheck), or one row with a
null `offset` for a block no chunk row stands for (`block_status` then says why: missing,
no verified replica, replicas disagree; null for a live block without chunks). The chunk's
windows come from its recorded checksums (`checksum_type`, `bytes_per_checksum`,
`checksums`: what the datanode stores, which the scan checked against the bytes) for the
recorded algorithm, and from the scan's `--also` columns for the others.

For each algorithm a key gets a value only when every chunk of it has that algorithm's
windows, each chunk's window count is what its length and bytes_per_checksum give, and the
chunks cover every block from offset 0 without a gap to its OM length: the value is then the
CRC of the key's bytes. Ozone's own COMPOSITE_CRC (`ozone fs -checksum`) is that value only on
consistent input (merkle.copies.ozonecrc.ozone_agrees); `ozone_note` says when it would
differ and why.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from merkle import _crc, _native
from merkle.copies.fold import ALGORITHMS, MAX_BYTES, compose_columns

__all__ = ["COMPOSE_SCHEMA", "KEY_CRC_SCHEMA", "compose_keys"]

COMPOSE_SCHEMA = pa.schema(
    [
        ("key_id", pa.int64()),
        ("seq", pa.int32()),
        ("container", pa.int64()),
        ("block", pa.int64()),
        ("block_length", pa.int64()),
        ("block_status", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("checksum_type", pa.string()),
        ("bytes_per_checksum", pa.int64()),
        ("checksums", pa.binary()),
        ("crc64nvme", pa.binary()),
        ("crc32c", pa.binary()),
        ("crc32", pa.binary()),
        ("composite_algorithm", pa.string()),
        ("part_sizes", pa.list_(pa.int64())),
    ]
)

#: per key: each algorithm's full-object value (big-endian, null when the metadata cannot
#: give it), the recorded checksum type(s), the bytes its chunks cover, why it is not
#: verified (null when its blocks were), and when `ozone fs -checksum` would not be the CRC
KEY_CRC_SCHEMA = pa.schema(
    [
        ("key_id", pa.int64()),
        ("crc32", pa.binary()),
        ("crc32c", pa.binary()),
        ("crc64nvme", pa.binary()),
        ("recorded_type", pa.string()),
        ("covered", pa.int64()),
        ("unverified", pa.string()),
        ("ozone_note", pa.string()),
        ("composite", pa.binary()),
        ("composite_note", pa.string()),
    ]
)

#: Ozone's recorded type -> the algorithm its windows are
_RECORDED = {"CRC32": "crc32", "CRC32C": "crc32c"}
_WIDTH = {"crc32": 4, "crc32c": 4, "crc64nvme": 8}
_BE = {"crc32": ">u4", "crc32c": ">u4", "crc64nvme": ">u8"}
_NATIVE = {"crc32": np.uint32, "crc32c": np.uint32, "crc64nvme": np.uint64}


def _np(col: pa.ChunkedArray | pa.Array, fill: int = -1) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(arr.fill_null(fill).to_numpy(zero_copy_only=False), dtype=np.int64)


def _binary(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):  # one chunk (a batch's): no copy of the values
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _lengths(arr: pa.Array) -> np.ndarray:
    return np.asarray(
        pc.binary_length(arr).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64
    )


def _flat(arr: pa.Array, rows: np.ndarray, blen: np.ndarray) -> np.ndarray:
    """The bytes of `arr`'s values at `rows` (ascending), concatenated, as uint8 (no copy of
    each value as an object; no copy at all when the other rows hold no bytes: `blen`, each
    row's byte length, -1 for null)."""
    others = np.ones(blen.shape[0], dtype=bool)
    others[rows] = False
    if rows.shape[0] and not (blen[others] > 0).any():
        first, last = int(rows[0]), int(rows[-1])
        taken = arr.slice(first, last - first + 1)
    else:
        taken = arr.take(pa.array(rows, type=pa.int64()))
    if len(taken) == 0:
        return np.zeros(0, np.uint8)
    wide = pa.types.is_large_binary(taken.type)
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64 if wide else np.int32)[
        taken.offset : taken.offset + len(taken) + 1
    ]
    data = taken.buffers()[2]
    if data is None:
        return np.zeros(0, np.uint8)
    return np.frombuffer(data, dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]


def compose_keys(table: pa.Table | pa.RecordBatch) -> pa.Table:
    """KEY_CRC_SCHEMA rows, one per key of `table` (COMPOSE_SCHEMA, sorted; see the module
    docstring). Nothing is sized from a length read from metadata: window counts come from
    the checksum bytes present, and a chunk whose bytes do not match its length is refused."""
    t = table if isinstance(table, pa.Table) else pa.Table.from_batches([table])
    n = t.num_rows
    if n == 0:
        return KEY_CRC_SCHEMA.empty_table()
    key = _np(t["key_id"])
    starts = np.concatenate(([0], np.flatnonzero(key[1:] != key[:-1]) + 1))
    ends = np.concatenate((starts[1:], [n]))
    nkeys = starts.shape[0]
    row_key = np.repeat(np.arange(nkeys), ends - starts)

    seq = _np(t["seq"])
    container = _np(t["container"])
    block = _np(t["block"])
    block_len = _np(t["block_length"])
    offset_null = np.asarray(t["offset"].is_null().to_numpy(zero_copy_only=False), dtype=bool)
    offset = _np(t["offset"])
    length = _np(t["length"])
    bpc = _np(t["bytes_per_checksum"])
    has_status = np.asarray(t["block_status"].is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    status = _Lazy(t["block_status"])

    unverified: List[Optional[str]] = [None] * nkeys
    notes: List[List[str]] = [[] for _ in range(nkeys)]

    def flag(rows: np.ndarray, why) -> None:  # first reason of each key wins
        for r in rows.tolist():
            k = int(row_key[r])
            if unverified[k] is None:
                unverified[k] = why(r)

    # blocks the chosen replica does not stand for
    flag(np.flatnonzero(has_status), lambda r: f"block {container[r]}/{block[r]}: {status[r]}")

    # chunk rows: every block covered from 0 without a gap, to its OM length
    chunk = ~offset_null
    new_block = np.ones(n, dtype=bool)
    new_block[1:] = (row_key[1:] != row_key[:-1]) | (seq[1:] != seq[:-1])
    bstarts = np.flatnonzero(new_block)
    lens = np.where(chunk, np.maximum(length, 0), 0)
    csum = np.cumsum(lens)
    before = csum - lens  # bytes before this row, over the whole table
    block_base = np.repeat(before[bstarts], np.diff(np.concatenate((bstarts, [n]))))
    expected_offset = before - block_base
    bad_len = chunk & ((length < 0) | (length > MAX_BYTES))
    flag(
        np.flatnonzero(bad_len),
        lambda r: f"block {container[r]}/{block[r]}: chunk length {length[r]} out of range",
    )
    gap = chunk & ~bad_len & (offset != expected_offset)
    flag(
        np.flatnonzero(gap),
        lambda r: (
            f"block {container[r]}/{block[r]}: chunk at offset "
            f"{offset[r]}, expected {expected_offset[r]} (a gap or "
            f"an overlap)"
        ),
    )
    block_ends = np.concatenate((bstarts[1:], [n])) - 1
    covered_block = csum[block_ends] - before[bstarts]
    short = np.flatnonzero((covered_block != block_len[bstarts]) & ~has_status[bstarts])
    for i in short.tolist():
        r = int(bstarts[i])
        k = int(row_key[r])
        if unverified[k] is None:
            unverified[k] = (
                f"block {container[r]}/{block[r]}: its chunks hold "
                f"{int(covered_block[i])} bytes, OM says {block_len[r]}"
            )
    covered = np.add.reduceat(lens, starts) if n else np.zeros(0, np.int64)

    # the window counts each chunk's length and bytes_per_checksum give
    valid_bpc = chunk & (bpc > 0)
    count = np.zeros(n, dtype=np.int64)
    count[valid_bpc] = -(-lens[valid_bpc] // bpc[valid_bpc])

    codes, names = _codes(t["checksum_type"], chunk)
    # S3 composite values whose parts' sizes (not values) the target gave: each key's
    # composite is made from its windows too, where the part boundaries fall between windows
    comp_alg: Optional[List[Optional[str]]] = None
    part_sizes: List[Optional[List[int]]] = []
    composite: List[Optional[bytes]] = [None] * nkeys
    composite_note: List[Optional[str]] = [None] * nkeys
    if "part_sizes" in t.column_names and t["part_sizes"].null_count < n:
        comp_alg = t["composite_algorithm"].take(pa.array(starts)).to_pylist()
        part_sizes = t["part_sizes"].take(pa.array(starts)).to_pylist()

    # each algorithm: where every chunk of a key has its windows
    recorded = _binary(t["checksums"])
    values: Dict[str, List[Optional[bytes]]] = {}
    for alg in ALGORITHMS:
        own = np.isin(codes, [i for i, nm in enumerate(names) if _RECORDED.get(nm) == alg])
        if own[chunk].all():
            src = recorded
        elif not own[chunk].any():
            src = _binary(t[alg])
        else:
            src = pc.if_else(pa.array(own), recorded, _binary(t[alg]))
        blen = _lengths(src)
        ok_row = ~chunk | (valid_bpc & (blen == count * _WIDTH[alg]))
        key_ok = np.logical_and.reduceat(ok_row, starts)
        out: List[Optional[bytes]] = [None] * nkeys
        usable = np.asarray(
            [k for k in np.flatnonzero(key_ok).tolist() if unverified[k] is None], dtype=np.int64
        )
        if usable.shape[0]:
            rows = np.flatnonzero(chunk & np.isin(row_key, usable))
            flat = _flat(src, rows, blen)
            _fold_keys(
                alg,
                flat.view(_BE[alg]),
                row_key[rows],
                count[rows],
                lens[rows],
                bpc[rows],
                usable,
                covered,
                out,
            )
        values[alg] = out
        if comp_alg is not None and usable.shape[0]:
            _composites(
                alg,
                flat.view(_BE[alg]),
                row_key[rows],
                count[rows],
                lens[rows],
                bpc[rows],
                usable,
                comp_alg,
                part_sizes,
                composite,
                composite_note,
            )

    # the recorded type(s) and whether Ozone's COMPOSITE_CRC would be the CRC of the bytes:
    # checked for every key at once, the reasons spelled out only for the keys that differ
    lo = np.where(chunk, codes, np.iinfo(np.int64).max)
    hi = np.where(chunk, codes, -1)
    kmin, kmax = np.minimum.reduceat(lo, starts), np.maximum.reduceat(hi, starts)
    bfirst = np.repeat(
        np.where(chunk[bstarts], lens[bstarts], 0), np.diff(np.concatenate((bstarts, [n])))
    )
    bbpc = np.repeat(bpc[bstarts], np.diff(np.concatenate((bstarts, [n]))))
    odd = chunk & (
        (lens == 0)
        | (bpc != bbpc)
        | (lens > count * bfirst)
        | ~np.isin(codes, [i for i, nm in enumerate(names) if nm in _RECORDED])
    )
    suspect = np.logical_or.reduceat(odd, starts) | (kmin != kmax)
    recorded_type: List[Optional[str]] = [
        names[int(a)] if a == b else None for a, b in zip(kmin.tolist(), kmax.tolist())
    ]
    for k in np.flatnonzero(suspect).tolist():
        a, b = int(starts[k]), int(ends[k])
        types = sorted(
            {
                c
                for c, ch in zip(
                    t["checksum_type"].slice(a, b - a).to_pylist(), chunk[a:b].tolist()
                )
                if ch and c
            }
        )
        recorded_type[k] = ",".join(types) if types else None
        if unverified[k] is not None:
            continue
        why = _ozone_differs(types, chunk[a:b], lens[a:b], bpc[a:b], count[a:b], new_block[a:b])
        if why:
            notes[k].append(f"ozone fs -checksum would differ: {why}")

    return pa.table(
        {
            "key_id": pa.array(key[starts], pa.int64()),
            "crc32": pa.array(values["crc32"], pa.binary()),
            "crc32c": pa.array(values["crc32c"], pa.binary()),
            "crc64nvme": pa.array(values["crc64nvme"], pa.binary()),
            "recorded_type": pa.array(recorded_type, pa.string()),
            "covered": pa.array(covered, pa.int64()),
            "unverified": pa.array(unverified, pa.string()),
            "ozone_note": pa.array(["; ".join(x) if x else None for x in notes], pa.string()),
            "composite": pa.array(composite, pa.binary()),
            "composite_note": pa.array(composite_note, pa.string()),
        },
        schema=KEY_CRC_SCHEMA,
    )


def _codes(col: pa.ChunkedArray, chunk: np.ndarray) -> Tuple[np.ndarray, List[str]]:
    """Each row's recorded type as a small integer (a row that is no chunk, or has no type:
    0, the code of "") and the names the codes stand for (one dictionary encoding)."""
    enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    names = [""] + [str(x) for x in enc.dictionary.to_pylist()]
    codes = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64) + 1
    codes[~chunk] = 0
    return codes, names


class _Lazy:
    """A column's values fetched one at a time (the few rows a message names)."""

    def __init__(self, col: pa.ChunkedArray) -> None:
        self._col = col

    def __getitem__(self, i: int) -> Optional[str]:
        return self._col[int(i)].as_py()


def _window_sizes(cnt: np.ndarray, lens: np.ndarray, bpc: np.ndarray) -> np.ndarray:
    """Every window's length, chunk after chunk (columns of one key's chunk rows): its
    bytes_per_checksum, the last of each chunk what is left (chunks.window_sizes' rule)."""
    sizes = np.repeat(bpc, cnt)
    some = cnt > 0
    sizes[np.cumsum(cnt)[some] - 1] = lens[some] - (cnt[some] - 1) * bpc[some]
    return sizes


def _fold_keys(
    alg: str,
    crcs: np.ndarray,
    rkey: np.ndarray,
    cnt: np.ndarray,
    lens: np.ndarray,
    bpc: np.ndarray,
    usable: np.ndarray,
    covered: np.ndarray,
    out: List[Optional[bytes]],
) -> None:
    """Each usable key's CRC from its chunks' windows (`crcs`, big-endian, chunk after
    chunk: the chunk rows of the usable keys, in key order). The keys whose windows are all
    bytes_per_checksum long but their last (one bpc, every chunk but the last a whole number
    of windows: what every Ozone client writes) are composed in one native call per
    bytes_per_checksum (_native.fold_segments_be: no byte-swapped copy, no Python per key);
    any other key window by window length (compose_columns)."""
    width = _WIDTH[alg]
    wend = np.cumsum(cnt)
    wstart = wend - cnt
    kfirst = np.searchsorted(rkey, usable, side="left")
    klast = np.searchsorted(rkey, usable, side="right") - 1
    full = lens == cnt * bpc
    step = bpc[kfirst]
    one_bpc = (
        (np.minimum.reduceat(bpc, kfirst) == np.maximum.reduceat(bpc, kfirst))
        if kfirst.shape[0]
        else np.zeros(0, bool)
    )
    not_full = (~full).astype(np.int64)
    ragged = (
        np.add.reduceat(not_full, kfirst) - not_full[klast]
        if kfirst.shape[0]
        else np.zeros(0, np.int64)
    )
    w0, w1 = wstart[kfirst], wend[klast]
    tail = lens[klast] - np.maximum(cnt[klast] - 1, 0) * bpc[klast]
    uniform = one_bpc & (ragged == 0) & (w1 > w0)
    # the windows of the usable keys are contiguous, in key order: one bounds column
    bounds = (
        np.concatenate((w0, w1[-1:])).astype(np.uint64) if w0.shape[0] else np.zeros(1, np.uint64)
    )
    raw = crcs.view(np.uint8)
    for stride in np.unique(step[uniform]).tolist():
        these = uniform & (step == stride)
        last = np.where(these, tail, stride).astype(np.uint64)  # other keys: ignored
        folded = _native.fold_segments_be(raw, bounds, last, int(stride), algorithm=alg)
        total = (w1 - w0 - 1) * stride + tail
        for i in np.flatnonzero(these & (total == covered[usable])).tolist():
            out[int(usable[i])] = int(folded[i]).to_bytes(width, "big")
    for i in np.flatnonzero(~uniform).tolist():
        k, a, b = int(usable[i]), int(kfirst[i]), int(klast[i])
        lo, hi = int(w0[i]), int(w1[i])
        if hi == lo:
            if covered[k] == 0:
                out[k] = bytes(width)
            continue
        sizes = _window_sizes(cnt[a : b + 1], lens[a : b + 1], bpc[a : b + 1])
        crc, total_k = compose_columns(alg, crcs[lo:hi].astype(_NATIVE[alg]), sizes, strict=False)
        if total_k == covered[k]:  # cannot differ after compose_keys' checks; never guess
            out[k] = int(crc).to_bytes(width, "big")


#: S3's cap on a multipart upload's parts
MAX_PARTS = 10_000


def _composites(
    alg: str,
    crcs: np.ndarray,
    rkey: np.ndarray,
    cnt: np.ndarray,
    lens: np.ndarray,
    bpc: np.ndarray,
    usable: np.ndarray,
    comp_alg: List[Optional[str]],
    part_sizes: List[Optional[List[int]]],
    composite: List[Optional[bytes]],
    notes: List[Optional[str]],
) -> None:
    """S3's COMPOSITE value (the CRC of the parts' big-endian CRCs) of each usable key whose
    target is a composite of `alg` with known part sizes, from the key's windows: each part's
    CRC is the fold of the windows it covers, so every part boundary must fall between two
    windows (a part of 8 MiB over 16 KiB windows does; else the note says why not)."""
    fn = {"crc32": _crc.crc32, "crc32c": _crc.crc32c, "crc64nvme": _crc.crc64nvme}[alg]
    kfirst = np.searchsorted(rkey, usable, side="left")
    klast = np.searchsorted(rkey, usable, side="right") - 1
    wend = np.cumsum(cnt)
    for k, a, b in zip(usable.tolist(), kfirst.tolist(), klast.tolist()):
        want = (comp_alg[k] or "").lower().replace("-", "")
        sizes_k = part_sizes[k]
        if want != alg or sizes_k is None:
            continue
        if not 0 < len(sizes_k) <= MAX_PARTS or any(p is None or p < 0 for p in sizes_k):
            notes[k] = f"{len(sizes_k)} parts: not a multipart upload's part list"
            continue
        w0 = int(wend[a] - cnt[a])
        w1 = int(wend[b])
        sizes = _window_sizes(cnt[a : b + 1], lens[a : b + 1], bpc[a : b + 1])
        ends = np.cumsum(sizes)
        bounds = np.cumsum(np.asarray(sizes_k, dtype=np.int64))
        if bounds.shape[0] and (bounds[-1] != (ends[-1] if ends.shape[0] else 0)):
            notes[k] = (
                f"the parts add up to {int(bounds[-1])} bytes, the key's chunks to "
                f"{int(ends[-1]) if ends.shape[0] else 0}"
            )
            continue
        idx = np.searchsorted(ends, bounds)  # the window each part ends in
        if (
            (
                (idx < ends.shape[0]) & (ends[np.minimum(idx, max(ends.shape[0] - 1, 0))] != bounds)
            ).any()
            if ends.shape[0]
            else bounds.any()
        ):
            notes[k] = (
                "a part boundary falls inside a checksum window: the parts' CRCs "
                "cannot be made from the windows"
            )
            continue
        native = crcs[w0:w1].astype(_NATIVE[alg])
        start = 0
        packed = bytearray()
        for stop in (idx + 1).tolist():
            crc, _ = compose_columns(alg, native[start:stop], sizes[start:stop], strict=False)
            packed += int(crc).to_bytes(_WIDTH[alg], "big")
            start = stop
        composite[k] = int(fn(bytes(packed))).to_bytes(_WIDTH[alg], "big")


def _ozone_differs(
    types: List[str],
    chunk: np.ndarray,
    lens: np.ndarray,
    bpc: np.ndarray,
    count: np.ndarray,
    new_block: np.ndarray,
) -> Optional[str]:
    """Why Ozone's COMPOSITE_CRC of this key would not be the CRC of its bytes (its README's
    inconsistent inputs: merkle.copies.ozonecrc.ozone_agrees), or None."""
    if len(types) > 1:
        return f"mixed checksum types ({', '.join(types)})"
    if types and types[0] not in _RECORDED:
        return f"the recorded checksums are {types[0]}, not a CRC"
    bstarts = np.flatnonzero(new_block).tolist() + [len(chunk)]
    for a, b in zip(bstarts[:-1], bstarts[1:]):
        rows = np.flatnonzero(chunk[a:b]) + a
        if rows.shape[0] == 0:
            continue
        if (lens[rows] == 0).any():
            return "an empty chunk"
        if np.unique(bpc[rows]).shape[0] > 1:
            return "bytes_per_checksum differs between the chunks of a block"
        first = lens[rows[0]]
        if (lens[rows] > count[rows] * first).any():
            return "a block's first chunk is shorter than a later one"
    return None
