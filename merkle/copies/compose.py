"""Full-object CRCs composed from stored checksums, without reading data (issue 27).

Two jobs:
- `full_object_crc`: pieces' CRCs and sizes -> the CRC of their concatenation (an S3 composite
  `-N` value's parts -> the full-object value; a key's window checksums -> the key's CRC).
- `key_crc`: an Ozone key's chunks' `ChecksumData`, block by block in key order -> the CRC of the
  key's bytes, and next to it what Ozone's own COMPOSITE_CRC (`ozone fs -checksum`) says, which
  differs on inconsistent inputs (../shared/ozone-golden/composite-crc/README.md, "Divergences").

Every count and size here comes from metadata an attacker may have written: nothing is allocated
from a claimed size, only from the checksums actually present.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from merkle import _native
from merkle._crc import crc32_combine, crc32c_combine, crc64nvme_combine

ALGORITHMS = ("crc32", "crc32c", "crc64nvme")
_WIDTH = {"crc32": 32, "crc32c": 32, "crc64nvme": 64}
_DTYPE = {"crc32": np.uint32, "crc32c": np.uint32, "crc64nvme": np.uint64}
_COMBINE: dict[str, Callable[[int, int, int], int]] = {
    "crc32": crc32_combine, "crc32c": crc32c_combine, "crc64nvme": crc64nvme_combine}
#: Ozone's ChecksumType names (and crcmerkle's CRC64NVME) -> algorithm
_TYPES = {"CRC32": "crc32", "CRC32C": "crc32c", "CRC64NVME": "crc64nvme"}
#: the largest key, in bytes, that anything here accepts (Java's long)
MAX_BYTES = (1 << 63) - 1


def _algorithm(algorithm: str) -> str:
    name = str(algorithm).lower().replace("-", "").replace("/", "").replace("_", "")
    if name not in _WIDTH:
        raise ValueError(f"unknown algorithm {algorithm!r} (crc32, crc32c or crc64nvme)")
    return name


def _int_column(values: object, name: str, what: str, top: int, dtype: type) -> np.ndarray:
    """A 1-D column of integers in 0..top as `dtype`, or a one-line ValueError. A list goes
    element by element (numpy would turn a list mixing small ints and ints beyond 2**63 into
    floats, losing bits); an array is checked by dtype and range."""
    if isinstance(values, np.ndarray):
        arr = values
    elif isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name}: not a column of integers")
    else:
        items = list(values)  # type: ignore[call-overload]
        for v in items:
            if isinstance(v, (list, tuple, np.ndarray)):
                raise ValueError(f"{name}: must be one-dimensional")
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"{name}: {what} must be integers, not {type(v).__name__}")
            if not 0 <= int(v) <= top:
                raise ValueError(f"{name}: {what} must be in 0..{_bound(top)}")
        return np.array([int(v) for v in items], dtype=dtype)
    if arr.ndim != 1:
        raise ValueError(f"{name}: must be one-dimensional, not {arr.ndim}-D")
    if arr.size == 0:
        return np.empty(0, dtype=dtype)
    if arr.dtype.kind not in "ui":
        raise ValueError(f"{name}: {what} must be integers, not {arr.dtype}")
    # one pass each, and only where the dtype does not already bound the values
    if arr.dtype.kind == "i" and int(arr.min()) < 0:
        raise ValueError(f"{name}: {what} must be in 0..{_bound(top)}")
    if int(np.iinfo(arr.dtype).max) > top and int(arr.max()) > top:
        raise ValueError(f"{name}: {what} must be in 0..{_bound(top)}")
    return np.ascontiguousarray(arr, dtype=dtype)


def _bound(top: int) -> str:
    return f"2**{top.bit_length()}-1"


def _crc_column(values: object, algorithm: str, name: str) -> np.ndarray:
    return _int_column(values, name, "values", (1 << _WIDTH[algorithm]) - 1, _DTYPE[algorithm])


def _size_column(values: object, name: str) -> np.ndarray:
    return _int_column(values, name, "sizes", MAX_BYTES, np.int64)


def full_object_crc(part_crcs: object, part_sizes: object, algorithm: str) -> int:
    """The CRC of the concatenation of parts from each part's CRC and size (S3's composite
    `-N` value's parts -> its full-object value; crc32, crc32c or crc64nvme).

    Runs of equal sizes (a multipart upload's parts, a chunk's windows) are folded natively,
    one multiply per part; runs are joined with one combine each. 0 for no parts (the CRC of
    nothing). One-line ValueError on mismatched lengths, negative sizes, values out of range,
    a part of 0 bytes whose CRC is not 0, or a total beyond 2**63-1 bytes."""
    alg = _algorithm(algorithm)
    crcs = _crc_column(part_crcs, alg, "part_crcs")
    sizes = _size_column(part_sizes, "part_sizes")
    if crcs.shape[0] != sizes.shape[0]:
        raise ValueError(f"{crcs.shape[0]} part CRCs but {sizes.shape[0]} part sizes")
    return _compose(alg, crcs, sizes)[0]


def _compose(alg: str, crcs: np.ndarray, sizes: np.ndarray, strict: bool = True
             ) -> tuple[int, int]:
    """(CRC, total bytes) of validated columns. `strict=False` (Ozone's walk) lets a 0-byte
    piece with a CRC other than 0 through, as Ozone's composer does (it XORs it in)."""
    n = int(crcs.shape[0])
    if n == 0:
        return 0, 0
    starts = np.concatenate(([0], np.flatnonzero(sizes[1:] != sizes[:-1]) + 1, [n])).tolist()
    combine = _COMBINE[alg]
    acc, total = 0, 0
    for begin, end in zip(starts[:-1], starts[1:]):
        size = int(sizes[begin])
        if strict and size == 0 and crcs[begin:end].any():
            # the CRC of no bytes is 0: anything else is a claim no data can back
            bad = begin + int(np.flatnonzero(crcs[begin:end])[0])
            raise ValueError(f"part {bad} has 0 bytes but CRC {int(crcs[bad]):#x}")
        run_bytes = size * (end - begin)
        total += run_bytes
        if total > MAX_BYTES:
            raise ValueError(f"the parts add up to more than 2**63-1 bytes")
        run_crc = int(_native.fold_fixed(crcs[begin:end], size, algorithm=alg))
        acc = combine(acc, run_crc, run_bytes)
    return acc, total


# ---- Ozone keys ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChunkChecksums:
    """One chunk's `ChecksumData` and length, as the datanode stores it (`ChunkInfo`):
    `checksums` are the window CRCs as integers (Ozone stores each as 4 big-endian bytes; see
    `from_ozone`), one per `bytes_per_checksum` bytes, the last window possibly short.
    `checksum_type` is Ozone's name (CRC32, CRC32C, SHA256, MD5, NONE; or its protobuf number)
    or CRC64NVME for the windows crcmerkle's scan recorded. `offset` is the chunk's offset in
    its block, when known."""

    length: int
    checksum_type: str | int
    bytes_per_checksum: int
    checksums: Sequence[int] | np.ndarray
    offset: Optional[int] = None

    @classmethod
    def from_ozone(cls, length: int, checksum_type: str | int, bytes_per_checksum: int,
                   checksums: Iterable[bytes], offset: Optional[int] = None) -> "ChunkChecksums":
        """From `ChecksumData.checksums`: each entry the checksum as big-endian bytes (4 for
        CRC32 and CRC32C, 8 for CRC64NVME, 32 for SHA256, 16 for MD5)."""
        name = _type_name(checksum_type)
        if name not in _ENTRY_BYTES:
            raise ValueError(f"unknown checksum type {name[:40]!r}")
        width = _ENTRY_BYTES[name]
        values = []
        for i, entry in enumerate(checksums):
            raw = bytes(entry)
            if len(raw) != width:
                raise ValueError(f"checksum {i} of the chunk has {len(raw)} bytes, not {width}")
            values.append(int.from_bytes(raw, "big"))
        return cls(length, checksum_type, bytes_per_checksum, values, offset)


@dataclass(frozen=True)
class BlockChecksums:
    """One block of a key, in key order: `length` is the block's length as OM records it
    (`KeyLocation.length`), `chunks` its chunks in block order. For an EC key, one block group:
    `ec_stripes` holds each stripe's data cells in replica-index order (1..d; parity cells left
    out, Ozone discards them) and `chunks` is left empty."""

    length: int
    chunks: Sequence[ChunkChecksums] = ()
    ec_stripes: Optional[Sequence[Sequence[ChunkChecksums]]] = None


@dataclass(frozen=True)
class KeyCrc:
    """A key's full-object CRC from metadata, next to Ozone's COMPOSITE_CRC for it.

    - `crc`: the CRC (`algorithm`) of the key's bytes (those its chunks cover: `length`), or None
      when the metadata cannot give it (mixed checksum types, no CRC) - then `reasons` says why.
    - `om_length`: the sum of the OM block lengths (what the key's size should be).
    - `ozone_algorithm` / `ozone_value`: what `ozone fs -checksum` returns (e.g.
      `COMPOSITE-CRC32C` and the 4 big-endian bytes), or `ozone_error` when Ozone's code throws.
    - `ozone_differs`: True when Ozone's answer is not `crc` (another value, an exception, another
      kind of checksum, or no CRC of the bytes to compare): a copy check can match while
      `ozone fs -checksum` disagrees; `reasons` names the inconsistent inputs."""

    algorithm: Optional[str]
    crc: Optional[int]
    length: int
    om_length: int
    ozone_algorithm: Optional[str]
    ozone_value: Optional[bytes]
    ozone_error: Optional[str]
    ozone_differs: bool
    reasons: tuple[str, ...] = field(default=())


#: ContainerProtos.ChecksumType's numbers, as a decoded ChecksumData.type gives them
_TYPE_NUMBERS = {1: "NONE", 2: "CRC32", 3: "CRC32C", 4: "SHA256", 5: "MD5"}


def _type_name(checksum_type: object) -> str:
    """Ozone's name for a checksum type given by name (any case) or protobuf number."""
    if isinstance(checksum_type, (int, np.integer)) and not isinstance(checksum_type, bool):
        return _TYPE_NUMBERS.get(int(checksum_type), f"type number {int(checksum_type)}")
    return str(checksum_type).upper()


def _check_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{what} must be an integer, not {type(value).__name__}")
    v = int(value)
    if v < 0 or v > MAX_BYTES:
        raise ValueError(f"{what} {v} is out of range 0..2**63-1")
    return v


#: bytes per stored checksum of each ChecksumType (Ozone reads the first 4 of each as an int)
_ENTRY_BYTES = {"CRC32": 4, "CRC32C": 4, "CRC64NVME": 8, "SHA256": 32, "MD5": 16, "NONE": 0}


@dataclass
class _Chunk:
    """A validated chunk: its windows as a column of the algorithm's width (None when the type
    is not a CRC), and as Python ints for the step-by-step Ozone emulation."""
    length: int
    type_name: str
    bpc: int
    values: list[int] | None      # non-CRC types: the int Ozone reads from each entry
    column: Optional[np.ndarray]  # CRC types

    @property
    def count(self) -> int:
        return int(self.column.shape[0]) if self.column is not None else len(self.values or ())

    @property
    def ozone_column(self) -> np.ndarray:
        """`windows` as a uint32 column."""
        if self.column is not None and self.column.dtype == np.uint32:
            return self.column
        return np.array(self.windows, dtype=np.uint32)

    @property
    def windows(self) -> list[int]:
        """What Ozone reads from each entry (getInt: its first 4 bytes) as Python ints, for the
        step-by-step emulation only (not the fast path)."""
        if self.column is None:
            return list(self.values or ())
        if self.column.dtype == np.uint64:  # CRC64NVME entries are 8 bytes, big-endian
            return (self.column >> np.uint64(32)).tolist()
        return self.column.tolist()


def _chunk(chunk: object, where: str) -> _Chunk:
    if not isinstance(chunk, ChunkChecksums):
        raise ValueError(f"{where}: not a ChunkChecksums ({type(chunk).__name__})")
    length = _check_int(chunk.length, f"{where}: length")
    bpc = _check_int(chunk.bytes_per_checksum, f"{where}: bytes_per_checksum")
    if chunk.offset is not None:
        _check_int(chunk.offset, f"{where}: offset")
    type_name = _type_name(chunk.checksum_type)
    if type_name not in _ENTRY_BYTES:
        raise ValueError(f"{where}: unknown checksum type {type_name[:40]!r}")
    alg = _TYPES.get(type_name)
    if alg is None:  # SHA256, MD5, NONE: kept for Ozone's reading of them, never composed
        entry = _ENTRY_BYTES[type_name]
        values = list(chunk.checksums)
        if entry == 0 and values:
            raise ValueError(f"{where}: checksum type NONE with {len(values)} checksums")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 1 << (8 * entry):
                raise ValueError(f"{where}: a {type_name} checksum must be an integer of {entry} bytes")
        return _Chunk(length, type_name, bpc, [int(v) >> (8 * entry - 32) for v in values], None)
    column = _crc_column(chunk.checksums, alg, f"{where}: checksums")
    # the window count must be exact: more or fewer CRCs than windows is corrupt metadata
    if length and bpc == 0:
        raise ValueError(f"{where}: bytes_per_checksum is 0 for {length} bytes")
    expected = -(-length // bpc) if length else 0
    if column.shape[0] != expected:
        raise ValueError(f"{where}: {column.shape[0]} window checksums for {length} bytes "
                         f"at {bpc} bytes per checksum ({expected} expected)")
    return _Chunk(length, type_name, bpc, None, column)


@dataclass
class _Block:
    length: int                      # OM's
    chunks: list[_Chunk]             # replicated: in block order; EC: every data cell in order
    stripes: Optional[list[list[_Chunk]]]  # EC only


def _validate(blocks: Sequence[BlockChecksums]) -> list[_Block]:
    """Every block and chunk checked (one-line ValueError), nothing sized from a claim."""
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
        raise ValueError("blocks must be a sequence of BlockChecksums")
    out: list[_Block] = []
    om_length = 0
    for b, block in enumerate(blocks):
        if not isinstance(block, BlockChecksums):
            raise ValueError(f"block {b}: not a BlockChecksums ({type(block).__name__})")
        om_len = _check_int(block.length, f"block {b}: length")
        om_length += om_len
        if om_length > MAX_BYTES:
            raise ValueError("the blocks add up to more than 2**63-1 bytes")
        if block.ec_stripes is not None:
            if block.chunks:
                raise ValueError(f"block {b}: both chunks and EC stripes")
            stripes = [[_chunk(cell, f"block {b} stripe {s} cell {c}") for c, cell in enumerate(stripe)]
                       for s, stripe in enumerate(block.ec_stripes)]
            out.append(_Block(om_len, [c for stripe in stripes for c in stripe], stripes))
            continue
        own: list[_Chunk] = []
        position = 0
        for c, chunk in enumerate(block.chunks):
            valid = _chunk(chunk, f"block {b} chunk {c}")
            if chunk.offset is not None and int(chunk.offset) != position:
                raise ValueError(f"block {b} chunk {c}: offset {int(chunk.offset)}, "
                                 f"expected {position} (a gap or an overlap)")
            position += valid.length
            own.append(valid)
        out.append(_Block(om_len, own, None))
    if sum(c.length for blk in out for c in blk.chunks) > MAX_BYTES:
        raise ValueError("the chunks add up to more than 2**63-1 bytes")
    return out


def _ozone_agrees(blocks: list[_Block]) -> bool:
    """True when Ozone's block computers see exactly the windows' true lengths (the caller has
    checked one CRC type over the key and OM lengths equal to the chunks'): no empty chunk, one
    bpc per block, the replicated precondition (length <= windows * first chunk's length) met,
    EC cells as long as Ozone takes them (min(group bytes left, replica 1's cell length))."""
    for blk in blocks:
        if not blk.chunks or any(c.length == 0 for c in blk.chunks):
            return False
        if len({c.bpc for c in blk.chunks}) != 1:
            return False
        if blk.stripes is None:
            first = blk.chunks[0].length
            if any(c.length > c.count * first for c in blk.chunks):
                return False
            continue
        left = blk.length
        for stripe in blk.stripes:
            if not stripe:
                return False
            size = stripe[0].length
            for cell in stripe:
                if cell.length != min(left, size):
                    return False
                left -= size
    return True


def _window_sizes(chunks: list[_Chunk]) -> np.ndarray:
    """Every window's length, chunk after chunk: bytes_per_checksum, the last of a chunk what
    is left (counts were checked against the lengths: nothing here comes from a bare claim)."""
    counts = np.fromiter((c.count for c in chunks), dtype=np.int64, count=len(chunks))
    bpcs = np.fromiter((c.bpc for c in chunks), dtype=np.int64, count=len(chunks))
    lengths = np.fromiter((c.length for c in chunks), dtype=np.int64, count=len(chunks))
    sizes = np.repeat(bpcs, counts)
    some = counts > 0
    sizes[np.cumsum(counts)[some] - 1] = lengths[some] - (counts[some] - 1) * bpcs[some]
    return sizes


def key_crc(blocks: Sequence[BlockChecksums]) -> KeyCrc:
    """A key's full-object CRC from its blocks' chunk checksums (key order), with Ozone's
    COMPOSITE_CRC beside it. One-line ValueError on corrupt metadata (negative or oversized
    lengths, window counts that do not match a chunk's length, chunks with gaps or overlaps,
    checksums out of range)."""
    valid = _validate(blocks)
    chunks = [c for blk in valid for c in blk.chunks]
    reasons: list[str] = []
    for b, blk in enumerate(valid):
        covered = sum(c.length for c in blk.chunks)
        if covered != blk.length:
            reasons.append(f"block {b}: OM length {blk.length} but its chunks hold {covered} bytes")
        if len({c.bpc for c in blk.chunks}) > 1:
            reasons.append(f"block {b}: bytes_per_checksum differs between its chunks")
    length = sum(c.length for c in chunks)
    om_length = sum(blk.length for blk in valid)

    types = sorted({c.type_name for c in chunks})
    algorithm: Optional[str] = None
    crc: Optional[int] = None
    if not chunks:
        crc = 0
        reasons.append("no data: the CRC of nothing is 0 for every algorithm")
    elif len(types) > 1:
        reasons.append(f"mixed checksum types ({', '.join(types)}): the CRC of the bytes "
                       "cannot be derived from them")
    elif types[0] not in _TYPES:
        reasons.append(f"checksum type {types[0]} is not a CRC")
    else:
        algorithm = _TYPES[types[0]]
        crcs = np.concatenate([c.column for c in chunks if c.column is not None])
        crc = _compose(algorithm, crcs, _window_sizes(chunks))[0]

    if algorithm == "crc64nvme":
        # crcmerkle's own scan values: Ozone's COMPOSITE_CRC is made of its CRC32/CRC32C ones
        return KeyCrc(algorithm, crc, length, om_length, None, None, None, True,
                      tuple(reasons + ["Ozone has no COMPOSITE_CRC over CRC-64/NVME"]))
    if crc is not None and algorithm is not None and not reasons and _ozone_agrees(valid):
        # Ozone's composition on consistent input is the CRC of the bytes (every golden
        # consistent key; tests/test_compose.py checks it against the emulation): skip the
        # step-by-step walk, which costs a Python step per window
        ozone_alg, ozone_value, ozone_error = (f"COMPOSITE-{algorithm.upper()}",
                                               crc.to_bytes(4, "big"), None)
    else:
        ozone_alg, ozone_value, ozone_error = _ozone(valid, None)
    differs = not (crc is not None and algorithm is not None
                   and ozone_alg == f"COMPOSITE-{algorithm.upper()}"
                   and ozone_value == crc.to_bytes(4, "big"))
    if ozone_error is not None:
        reasons.append(f"Ozone's COMPOSITE_CRC throws {ozone_error}")
    elif differs and ozone_alg is not None and not ozone_alg.startswith("COMPOSITE-"):
        reasons.append(f"Ozone returns {ozone_alg}, not a COMPOSITE_CRC")
    elif differs and crc is not None:
        reasons.append("Ozone's COMPOSITE_CRC is not the CRC of the key's bytes")
    return KeyCrc(algorithm, crc, length, om_length, ozone_alg, ozone_value, ozone_error,
                  differs, tuple(reasons))


# ---- Ozone's COMPOSITE_CRC, as its client computes it --------------------------------------

class _OzoneError(Exception):
    """What Ozone's code would throw (its message, one line)."""


def _composer_digest(updates: Iterable[tuple[int, int]], alg: str) -> int:
    """Ozone's CrcComposer (one stripe): fold (crc, length) pairs; a negative length throws as
    CrcUtil.getMonomial does; no bytes at all leaves an empty digest, which readInt rejects."""
    combine = _COMBINE[alg]
    acc, position = 0, 0
    for value, size in updates:
        if size < 0:
            raise _OzoneError(f"IllegalArgumentException: lengthBytes must be positive, got {size}")
        acc = value if acc == 0 else combine(acc, value, size)
        position += size
    if position <= 0:
        raise _OzoneError("ArrayIndexOutOfBoundsException: readInt of an empty digest")
    return acc


def _ozone_type(chunk: _Chunk) -> str:
    if chunk.type_name not in ("CRC32", "CRC32C"):
        raise _OzoneError(f"IllegalArgumentException: unsupported checksum type: {chunk.type_name}")
    return _TYPES[chunk.type_name]


def _ozone_replicated_block(block: _Block) -> tuple[int, str]:
    """ReplicatedBlockChecksumComputer, COMPOSITE_CRC mode -> (block CRC, type name)."""
    if not block.chunks:
        raise _OzoneError("PathIOException: Fail to get block checksum (no chunks)")
    first = block.chunks[0]
    alg = _ozone_type(first)
    chunk_size = first.length  # Ozone's precondition uses the first chunk's length, not bpc
    bpc = first.bpc            # and the first chunk's bpc for every chunk
    chunk_crcs = []
    for chunk in block.chunks:
        n = chunk.count
        if chunk.length > n * chunk_size:
            raise _OzoneError("IllegalArgumentException: null (Preconditions.checkArgument)")
        # window i is composed as min(bpc, length - i * bpc) bytes: 0 once the length is used
        # up exactly, negative (CrcUtil throws) from window length // bpc + 1 on
        if bpc and chunk.length // bpc + 1 < n:
            first_bad = chunk.length // bpc + 1
            raise _OzoneError("IllegalArgumentException: lengthBytes must be positive, got "
                              f"{chunk.length - first_bad * bpc}")
        sizes = np.minimum(bpc, chunk.length - np.arange(n, dtype=np.int64) * bpc) if bpc \
            else np.zeros(n, dtype=np.int64)
        value, position = _compose(alg, chunk.ozone_column, sizes, strict=False)
        if position <= 0:
            raise _OzoneError("ArrayIndexOutOfBoundsException: readInt of an empty digest")
        chunk_crcs.append((value, chunk.length))
    return _composer_digest(chunk_crcs, alg), first.type_name


def _ozone_ec_group(block: _Block) -> tuple[int, str]:
    """ECBlockChecksumComputer, COMPOSITE_CRC mode. Per stripe it reads replica 1's
    stripeChecksum (the data cells' windows in replica order, then the parity cells', which it
    strips) taking each cell as min(group bytes left, replica 1's chunk length) bytes."""
    stripes = [s for s in (block.stripes or []) if s]
    if not stripes:
        raise _OzoneError("IllegalArgumentException: no chunks (Preconditions.checkArgument)")
    first = stripes[0][0]
    alg = _ozone_type(first)
    bpc = first.bpc
    group_left = block.length
    updates = []
    for stripe in stripes:
        chunk_size = stripe[0].length
        buffer = [w for cell in stripe for w in cell.windows]
        i = 0
        while i < len(buffer):
            remaining = min(group_left, chunk_size)
            if remaining <= 0:
                # windows left over with no group bytes to give them: Ozone's loop never ends
                raise _OzoneError("(no answer: windows beyond the block group's length make "
                                  "ECBlockChecksumComputer loop forever)")
            while i < len(buffer) and remaining > 0:
                updates.append((buffer[i], min(bpc, remaining)))
                i += 1
                remaining -= bpc
            group_left -= chunk_size
    return _composer_digest(updates, alg), first.type_name


def _data_output_capacity(written: int) -> int:
    """The backing array of Hadoop's DataOutputBuffer after `written` 4-byte writes (32 bytes,
    doubled as needed): makeCompositeCrcResult reads past what was written, up to this."""
    cap, size = 32, 0
    for _ in range(written):
        if size + 4 > cap:
            cap = max(cap * 2, size + 4)
        size += 4
    return cap


def ozone_composite_crc(blocks: Sequence[BlockChecksums], request_length: Optional[int] = None
                        ) -> tuple[Optional[str], Optional[bytes], Optional[str]]:
    """What Ozone's client returns for `getFileChecksum` in COMPOSITE_CRC mode over these blocks
    (BaseFileChecksumHelper and the block computers), emulated step by step, quirks included:
    (algorithm name, value as `getBytes()` / `write()` gives it, None), or (None, None, what
    Ozone throws). `request_length` (default: the whole key) is the range a client asked for.
    It walks every window in Python (a check, not the fast path)."""
    if request_length is not None:
        request_length = _check_int(request_length, "request_length")
    return _ozone(_validate(blocks), request_length)


def _ozone(blocks: list[_Block], request_length: Optional[int]
           ) -> tuple[Optional[str], Optional[bytes], Optional[str]]:
    length = sum(b.length for b in blocks) if request_length is None else request_length
    if not blocks or length <= 0:
        # an empty key (or range): MD5MD5CRC32GzipFileChecksum(0, 0, MD5 of 32 zero bytes),
        # as written: bytesPerCRC (int), crcPerBlock (long), the MD5
        return "MD5-of-0MD5-of-0CRC32", bytes(12) + hashlib.md5(bytes(32)).digest(), None
    try:
        block_crcs: list[int] = []
        key_type, current = "", 0
        for block in blocks:
            if current > length:
                break  # checksumBlocks() stops past the requested range
            value, key_type = (_ozone_ec_group(block) if block.stripes is not None
                               else _ozone_replicated_block(block))
            block_crcs.append(value)
            current += block.length
        capacity = _data_output_capacity(len(block_crcs))
        alg = _TYPES[key_type]  # the key's type is the last block's (setChecksumType per block)
        updates = []
        for i, block in enumerate(blocks):
            if i * 4 + 4 > capacity:
                raise _OzoneError("ArrayIndexOutOfBoundsException: readInt out of bounds")
            # blocks past the range read the buffer's zeros; each block counts its OM length
            updates.append((block_crcs[i] if i < len(block_crcs) else 0, block.length))
        value = _composer_digest(updates, alg)
    except _OzoneError as exc:
        return None, None, str(exc)
    return f"COMPOSITE-{key_type}", value.to_bytes(4, "big"), None
