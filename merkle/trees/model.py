"""ContainerTree: one Ozone container replica's checksum tree, held as numpy columns.

Blocks (sorted by ID): `block_id`, `block_value`, `block_deleted`, and `block_chunk_start`
(n_blocks + 1 entries: block i owns chunk rows block_chunk_start[i] .. block_chunk_start[i+1]).
Chunks (grouped by block, sorted by offset): `chunk_offset`, `chunk_length`, `chunk_value`,
`chunk_matches`. Values are unsigned 32-bit tree values in int64 columns, as in Ozone's protos.
`data_checksum` is the container value, or None when no full tree was generated (Ozone leaves
it unset, e.g. for a tree holding only tombstones). The arrays are read-only: a tree is a value
(built from copies: the caller's own numpy arrays stay writable).
`unknown_fields` holds the raw unknown top-level fields of the file the tree was read from (an
old file's removed field 3): Ozone keeps them on every rewrite, after field 2, and so do we.

Builders: `ContainerTree.from_columns` (bulk, native), `ContainerTree.from_chunk_data` (raw
chunk bytes + bytes_per_checksum + algorithm) and `TreeBuilder` (incremental).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from merkle import _native
from merkle.trees.ozone import (
    DEFAULT_ALGORITHM,
    DEFAULT_BYTES_PER_CHECKSUM,
    format_checksum,
    window_values,
)

__all__ = [
    "BlockView",
    "ChunkView",
    "ContainerTree",
    "TreeBuilder",
    "TreeFileError",
    "tree_from_bytes",
    "tree_to_bytes",
]

_I64 = np.int64


@dataclass(frozen=True)
class ChunkView:
    """One chunk, for humans (the tree itself is columnar)."""

    offset: int
    length: int
    value: int
    checksum_matches: bool

    def __repr__(self) -> str:
        flag = "" if self.checksum_matches else " UNHEALTHY"
        return f"<chunk @{self.offset} len {self.length} {format_checksum(self.value)}{flag}>"


@dataclass(frozen=True)
class BlockView:
    """One block and its chunks, for humans."""

    block_id: int
    value: int
    deleted: bool
    chunks: Tuple[ChunkView, ...]

    def __repr__(self) -> str:
        kind = "tombstone" if self.deleted else f"{len(self.chunks)} chunks"
        return f"<block {self.block_id} {format_checksum(self.value)} {kind}>"


def _own(arr: np.ndarray, values: Any, copy: bool) -> np.ndarray:
    """`arr`, copied if it is (a view of) the caller's array `values`: a tree freezes its
    columns, and must never make the caller's own array read-only."""
    if copy and isinstance(values, np.ndarray) and np.may_share_memory(arr, values):
        return arr.copy()
    return arr


def _col(values: Any, dtype: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=dtype)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if dtype is np.bool_:
        if arr.dtype != np.bool_:
            if arr.dtype.kind not in "uib":
                raise TypeError(f"{name} must hold booleans, not {arr.dtype}")
            arr = arr != 0
        return np.ascontiguousarray(arr)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name} must hold integers, not {arr.dtype}")
    if arr.dtype == np.uint64 and int(arr.max()) >= 2**63:
        raise ValueError(f"{name} values must fit in a signed 64-bit integer")
    return np.ascontiguousarray(arr, dtype=dtype)


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def _u8(arr: np.ndarray) -> np.ndarray:
    return arr.view(np.uint8)


def _starts_from_counts(counts: Any, n: int, name: str) -> np.ndarray:
    counts = _col(counts, _I64, name)
    if counts.shape[0] != n:
        raise ValueError(f"{name} has {counts.shape[0]} entries; {n} chunks given")
    if counts.size and int(counts.min()) < 0:
        raise ValueError(f"{name} must be >= 0")
    starts = np.zeros(n + 1, dtype=_I64)
    np.cumsum(counts, out=starts[1:])
    return starts


class ContainerTree:
    """A container replica's checksum tree (columnar, immutable). See the module docstring."""

    __slots__ = (
        "container_id",
        "data_checksum",
        "block_id",
        "block_value",
        "block_deleted",
        "block_chunk_start",
        "chunk_offset",
        "chunk_length",
        "chunk_value",
        "chunk_matches",
        "unknown_fields",
        "_wire",
    )

    def __init__(
        self,
        container_id: int = 0,
        *,
        data_checksum: Optional[int] = None,
        block_id: Any = (),
        block_value: Any = (),
        block_deleted: Any = None,
        block_chunk_start: Any = None,
        chunk_offset: Any = (),
        chunk_length: Any = (),
        chunk_value: Any = (),
        chunk_matches: Any = None,
        validate: bool = True,
        copy: bool = True,
        unknown_fields: bytes = b"",
    ) -> None:
        self.container_id = int(container_id)
        self.unknown_fields = bytes(unknown_fields)
        self.data_checksum = None if data_checksum is None else int(data_checksum)
        bid = _col(block_id, _I64, "block_id")
        nb = bid.shape[0]
        bval = _col(block_value, _I64, "block_value")
        bdel = (
            np.zeros(nb, dtype=np.bool_)
            if block_deleted is None
            else _col(block_deleted, np.bool_, "block_deleted")
        )
        coff = _col(chunk_offset, _I64, "chunk_offset")
        nc = coff.shape[0]
        clen = _col(chunk_length, _I64, "chunk_length")
        cval = _col(chunk_value, _I64, "chunk_value")
        cm = (
            np.ones(nc, dtype=np.bool_)
            if chunk_matches is None
            else _col(chunk_matches, np.bool_, "chunk_matches")
        )
        if block_chunk_start is None:
            if nc:
                raise ValueError("block_chunk_start is required when there are chunks")
            cs = np.zeros(nb + 1, dtype=_I64)
        else:
            cs = _col(block_chunk_start, _I64, "block_chunk_start")
        for name, arr, n in (
            ("block_value", bval, nb),
            ("block_deleted", bdel, nb),
            ("block_chunk_start", cs, nb + 1),
            ("chunk_length", clen, nc),
            ("chunk_value", cval, nc),
            ("chunk_matches", cm, nc),
        ):
            if arr.shape[0] != n:
                raise ValueError(f"{name} has {arr.shape[0]} entries; {n} expected")
        # copy=False: the arrays are the caller's to give away (the decoder's fresh columns)
        self.block_id = _frozen(_own(bid, block_id, copy))
        self.block_value = _frozen(_own(bval, block_value, copy))
        self.block_deleted = _frozen(_own(bdel, block_deleted, copy))
        self.block_chunk_start = _frozen(_own(cs, block_chunk_start, copy))
        self.chunk_offset = _frozen(_own(coff, chunk_offset, copy))
        self.chunk_length = _frozen(_own(clen, chunk_length, copy))
        self.chunk_value = _frozen(_own(cval, chunk_value, copy))
        self.chunk_matches = _frozen(_own(cm, chunk_matches, copy))
        # Wire-format details of a tree read from bytes (which optional fields were present),
        # kept so that from_bytes(b).to_bytes() == b; None means "as Ozone writes".
        self._wire: Optional[Dict[str, Any]] = None
        if validate:
            self._validate()

    def _validate(self) -> None:
        cs = self.block_chunk_start
        nc = self.chunk_offset.shape[0]
        if cs[0] != 0 or cs[-1] != nc or (cs.shape[0] > 1 and bool(np.any(np.diff(cs) < 0))):
            raise ValueError("block_chunk_start must rise from 0 to the number of chunks")
        bid = self.block_id
        if bid.shape[0] > 1 and bool(np.any(bid[1:] <= bid[:-1])):  # no np.diff: overflow
            raise ValueError("block IDs must be strictly increasing (sorted, unique)")
        if nc > 1:
            off = self.chunk_offset
            first = np.zeros(nc, dtype=np.bool_)
            first[cs[:-1][cs[:-1] < nc]] = True
            if bool(np.any((off[1:] <= off[:-1]) & ~first[1:])):
                raise ValueError("chunk offsets must be strictly increasing within each block")

    # ---- builders ------------------------------------------------------------------------

    @classmethod
    def from_columns(
        cls,
        container_id: int,
        block_id: Any,
        offset: Any,
        length: Any = None,
        *,
        leaf: Any = None,
        window_checksums: Any = None,
        window_counts: Any = None,
        window_bytes: Any = None,
        window_byte_counts: Any = None,
        checksum_matches: Any = None,
        deleted_blocks: Any = None,
        empty_blocks: Any = None,
        data_checksum: bool = True,
    ) -> ContainerTree:
        """Build a tree from one row per chunk, all in native passes.

        Give each chunk's `block_id`, `offset`, `length` and one of:
          - `leaf`: the chunk values, already computed;
          - `window_checksums` (flat uint32 values of CRC32/CRC32C windows, chunk after chunk)
            with `window_counts` (windows per chunk);
          - `window_bytes` (the stored window-checksum bytes, chunk after chunk) with
            `window_byte_counts` (bytes per chunk), for SHA256/MD5 or raw stored checksums.
        Rows may come in any order: they are sorted stably by (block, offset) and, as in
        Ozone's per-block offset map, a later row replaces an earlier one at the same offset.
        `checksum_matches` defaults to all true. `deleted_blocks`: block IDs to keep as
        tombstones (value computed from their chunks, if given, which are then dropped), or a
        mapping ID -> tombstone value. `empty_blocks`: IDs of blocks with no chunks.
        `data_checksum=False` leaves the container value unset (a tree not generated).
        """
        bcol = _col(block_id, _I64, "block_id")
        n = bcol.shape[0]
        off = _col(offset, _I64, "offset")
        ln = np.zeros(n, dtype=_I64) if length is None else _col(length, _I64, "length")
        if off.shape[0] != n or ln.shape[0] != n:
            raise ValueError("block_id, offset and length must have the same length")
        # Offsets are Java longs in Ozone, whose writer stores any of them (its golden file
        # golden_g10 holds one >= 2**63, read back as negative): only lengths must be >= 0.
        if n and int(ln.min()) < 0:
            raise ValueError("chunk lengths must be >= 0")
        given = [x is not None for x in (leaf, window_checksums, window_bytes)]
        if sum(given) != 1:
            raise ValueError("give exactly one of leaf, window_checksums, window_bytes")
        if leaf is not None:
            leaves = _col(leaf, _I64, "leaf")
            if leaves.shape[0] != n:
                raise ValueError(f"leaf has {leaves.shape[0]} entries; {n} chunks given")
            if n and (int(leaves.min()) < 0 or int(leaves.max()) > 0xFFFFFFFF):
                raise ValueError("leaf values are unsigned 32-bit (0 to 2**32-1)")
        elif window_checksums is not None:
            windows = window_values(window_checksums)
            if window_counts is None:
                raise ValueError("window_counts is required with window_checksums")
            starts = _starts_from_counts(window_counts, n, "window_counts")
            if starts[-1] != windows.shape[0]:
                raise ValueError(
                    f"window_counts add up to {starts[-1]}, "
                    f"but {windows.shape[0]} window checksums were given"
                )
            leaves = _native._ozt_leaves_u32(windows, starts)
        else:
            if window_byte_counts is None:
                raise ValueError("window_byte_counts is required with window_bytes")
            starts = _starts_from_counts(window_byte_counts, n, "window_byte_counts")
            leaves = _native._ozt_leaves_bytes(window_bytes, starts)
        matches = (
            np.ones(n, dtype=np.bool_)
            if checksum_matches is None
            else _col(checksum_matches, np.bool_, "checksum_matches")
        )
        if matches.shape[0] != n:
            raise ValueError("checksum_matches must have one entry per chunk")
        perm = _native._ozt_sort_rows(bcol, off)
        if perm is not None:
            bcol, off, ln, leaves, matches = (a[perm] for a in (bcol, off, ln, leaves, matches))
        ids, cstart = _native._ozt_group(bcol)
        values = _native._ozt_block_values(ids, cstart, leaves)
        deleted = np.zeros(ids.shape[0], dtype=np.bool_)
        if deleted_blocks is not None or empty_blocks is not None:
            ids, values, deleted, cstart, keep = _add_blocks(
                ids, values, cstart, deleted_blocks, empty_blocks
            )
            if keep is not None:
                off, ln, leaves, matches = (a[keep] for a in (off, ln, leaves, matches))
        tree = cls(
            container_id,
            block_id=ids,
            block_value=values,
            block_deleted=deleted,
            block_chunk_start=cstart,
            chunk_offset=off,
            chunk_length=ln,
            chunk_value=leaves,
            chunk_matches=matches,
            validate=False,
        )
        if data_checksum:
            tree.data_checksum = tree.computed_checksum()
        return tree

    @classmethod
    def from_chunk_data(
        cls,
        container_id: int,
        chunks: Iterable[Tuple[int, int, Any]],
        *,
        bytes_per_checksum: int = DEFAULT_BYTES_PER_CHECKSUM,
        algorithm: str = DEFAULT_ALGORITHM,
        **kwargs: Any,
    ) -> ContainerTree:
        """Build from raw chunk data: `chunks` yields (block_id, offset, data); each chunk's
        windows are checksummed with `algorithm` ("crc32", Ozone's default, or "crc32c")."""
        bids: List[int] = []
        offs: List[int] = []
        lens: List[int] = []
        counts: List[int] = []
        parts: List[np.ndarray] = []
        for block_id, offset, data in chunks:
            w = _native.checksum_windows(data, bytes_per_checksum, algorithm=algorithm)
            bids.append(int(block_id))
            offs.append(int(offset))
            lens.append(len(memoryview(data).cast("B")))
            counts.append(w.shape[0])
            parts.append(w)
        windows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)
        return cls.from_columns(
            container_id, bids, offs, lens, window_checksums=windows, window_counts=counts, **kwargs
        )

    @classmethod
    def empty(cls, container_id: int = 0, *, generated: bool = True) -> ContainerTree:
        """A tree with no blocks (container value 0 if generated)."""
        return cls(container_id, data_checksum=0 if generated else None)

    # ---- derived values ------------------------------------------------------------------

    @property
    def n_blocks(self) -> int:
        return int(self.block_id.shape[0])

    @property
    def n_chunks(self) -> int:
        return int(self.chunk_offset.shape[0])

    @property
    def chunk_block_id(self) -> np.ndarray:
        """The block ID of every chunk row."""
        return np.repeat(self.block_id, np.diff(self.block_chunk_start))

    def computed_checksum(self) -> int:
        """The container value recomputed from the block values (tombstones included)."""
        return int(_native._ozt_container_value(self.block_value))

    def computed_block_values(self) -> np.ndarray:
        """Every block's value recomputed from its chunks (meaningless for tombstones)."""
        return _native._ozt_block_values(self.block_id, self.block_chunk_start, self.chunk_value)

    def inconsistencies(self) -> List[str]:
        """Stored values that do not match their recomputation (empty if consistent)."""
        problems = []
        live = ~self.block_deleted
        bad = np.flatnonzero(live & (self.computed_block_values() != self.block_value))
        for i in bad[:20]:
            problems.append(
                f"block {int(self.block_id[i])}: stored value "
                f"{format_checksum(self.block_value[i])} != computed from chunks"
            )
        if bad.shape[0] > 20:
            problems.append(f"... and {bad.shape[0] - 20} more blocks")
        if self.data_checksum is not None and self.data_checksum != self.computed_checksum():
            problems.append(
                f"container value {format_checksum(self.data_checksum)} != "
                f"{format_checksum(self.computed_checksum())} computed from blocks"
            )
        return problems

    # ---- views ---------------------------------------------------------------------------

    def _block_view(self, i: int) -> BlockView:
        a, b = int(self.block_chunk_start[i]), int(self.block_chunk_start[i + 1])
        chunks = tuple(
            ChunkView(int(o), int(n), int(v), bool(m))
            for o, n, v, m in zip(
                self.chunk_offset[a:b],
                self.chunk_length[a:b],
                self.chunk_value[a:b],
                self.chunk_matches[a:b],
            )
        )
        return BlockView(
            int(self.block_id[i]), int(self.block_value[i]), bool(self.block_deleted[i]), chunks
        )

    def block_index(self, block_id: int) -> int:
        """Row of a block ID, or -1."""
        i = int(np.searchsorted(self.block_id, block_id))
        return i if i < self.n_blocks and int(self.block_id[i]) == block_id else -1

    def block(self, block_id: int) -> BlockView:
        i = self.block_index(block_id)
        if i < 0:
            raise KeyError(block_id)
        return self._block_view(i)

    def __contains__(self, block_id: object) -> bool:
        return isinstance(block_id, (int, np.integer)) and self.block_index(int(block_id)) >= 0

    def blocks(self) -> Iterator[BlockView]:
        """Every block in ID order (one small object per block: for humans and tests)."""
        for i in range(self.n_blocks):
            yield self._block_view(i)

    def summary(self) -> Dict[str, Any]:
        deleted = int(self.block_deleted.sum())
        return {
            "container_id": self.container_id,
            "data_checksum": (
                None if self.data_checksum is None else format_checksum(self.data_checksum)
            ),
            "blocks": self.n_blocks,
            "live_blocks": self.n_blocks - deleted,
            "deleted_blocks": deleted,
            "chunks": self.n_chunks,
            "unhealthy_chunks": int((~self.chunk_matches).sum()),
            "bytes": int(self.chunk_length.sum()),
        }

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form, values as Ozone prints them (lowercase hex, no leading zeros)."""
        out = self.summary()
        out["block_list"] = [
            {
                "block_id": b.block_id,
                "data_checksum": format_checksum(b.value),
                "deleted": b.deleted,
                "chunks": [
                    {
                        "offset": c.offset,
                        "length": c.length,
                        "data_checksum": format_checksum(c.value),
                        "checksum_matches": c.checksum_matches,
                    }
                    for c in b.chunks
                ],
            }
            for b in self.blocks()
        ]
        return out

    def __repr__(self) -> str:
        value = "none" if self.data_checksum is None else format_checksum(self.data_checksum)
        return (
            f"<ContainerTree {self.container_id} {value}: {self.n_blocks} blocks, "
            f"{self.n_chunks} chunks>"
        )

    def __eq__(self, other: object) -> bool:
        """Same container, values and columns (the carried unknown_fields are not compared)."""
        if not isinstance(other, ContainerTree):
            return NotImplemented
        return (
            self.container_id == other.container_id
            and self.data_checksum == other.data_checksum
            and all(
                np.array_equal(getattr(self, f), getattr(other, f))
                for f in (
                    "block_id",
                    "block_value",
                    "block_deleted",
                    "block_chunk_start",
                    "chunk_offset",
                    "chunk_length",
                    "chunk_value",
                    "chunk_matches",
                )
            )
        )

    __hash__ = None  # type: ignore[assignment]

    def replace(self, **changes: Any) -> ContainerTree:
        """A copy with some fields changed (validated)."""
        fields = {
            f: getattr(self, f)
            for f in (
                "data_checksum",
                "block_id",
                "block_value",
                "block_deleted",
                "block_chunk_start",
                "chunk_offset",
                "chunk_length",
                "chunk_value",
                "chunk_matches",
            )
        }
        fields["unknown_fields"] = self.unknown_fields
        fields.update(changes)
        container_id = fields.pop("container_id", self.container_id)
        return ContainerTree(container_id, **fields)

    # ---- wire format (see merkle.trees.treefile for the message layout) ----------------

    def to_bytes(self) -> bytes:
        """The `.tree` file content: ContainerChecksumInfo, byte-identical to Ozone's."""
        return tree_to_bytes(self)

    @classmethod
    def from_bytes(cls, data: Any, *, source: Optional[str] = None) -> ContainerTree:
        """Parse ContainerChecksumInfo bytes; raises TreeFileError (a ValueError)."""
        return tree_from_bytes(data, source=source)


# ---- the `.tree` encoding (ContainerChecksumInfo), natively -------------------------------

_BLOCK_DEFAULT = 0b111  # blockID + dataChecksum + deleted (false included, as Ozone writes)
_CHUNK_DEFAULT = 0b1111


class TreeFileError(ValueError):
    """A `.tree` file (or bytes) that is not a readable ContainerChecksumInfo.

    `path` names the file (None for bytes), `reason` says what is wrong, `offset` is the byte
    offset of the problem when known.
    """

    def __init__(self, reason: str, path: Optional[str] = None, offset: Optional[int] = None):
        self.path = path
        self.reason = reason
        self.offset = offset
        where = f" at byte {offset}" if offset is not None else ""
        prefix = f"{path}: " if path else ""
        super().__init__(f"{prefix}not a valid container checksum tree: {reason}{where}")


def tree_to_bytes(tree: ContainerTree) -> bytes:
    wire = tree._wire or {}
    return _native._ozt_encode(
        wire.get("has_container_id", True),
        tree.container_id,
        wire.get("has_tree", True),
        tree.data_checksum is not None,
        tree.data_checksum or 0,
        tree.block_id,
        tree.block_value,
        tree.block_deleted.view(np.uint8),
        wire.get("block_present"),
        tree.block_chunk_start,
        tree.chunk_offset,
        tree.chunk_length,
        tree.chunk_value,
        tree.chunk_matches.view(np.uint8),
        wire.get("chunk_present"),
        tree.unknown_fields,
    )


def tree_from_bytes(data: Any, *, source: Optional[str] = None) -> ContainerTree:
    """Parse ContainerChecksumInfo bytes. Raises TreeFileError for empty, truncated, corrupt
    or foreign input (naming `source`, e.g. the file, if given)."""
    if len(memoryview(data)) == 0:
        raise TreeFileError("empty (Ozone treats an empty file as no tree)", source)
    try:
        cols = _native._ozt_decode(data)
    except _native._OzoneDecodeError as exc:
        offset, what = exc.args
        raise TreeFileError(what, source, offset) from None
    if not cols["has_container_id"] and not cols["has_tree"]:
        raise TreeFileError(
            "no containerID and no containerMerkleTree field (foreign or unrelated protobuf data)",
            source,
        )
    for col in ("chunk_length",):  # offsets: any int64, as Ozone writes them (golden_g10)
        if cols[col].size and int(cols[col].min()) < 0:
            raise TreeFileError(f"negative {col.replace('_', ' ')}", source)
    bp, cp = cols["block_present"], cols["chunk_present"]
    bdel = cols["block_deleted"].view(np.bool_)
    wire = {
        "has_container_id": cols["has_container_id"],
        "has_tree": cols["has_tree"],
        "block_present": None if bool(np.all(bp == _BLOCK_DEFAULT)) else bp,
        "chunk_present": None if bool(np.all(cp == _CHUNK_DEFAULT)) else cp,
    }
    kwargs = dict(
        data_checksum=cols["data_checksum"] if cols["has_data_checksum"] else None,
        block_id=cols["block_id"],
        block_value=cols["block_value"],
        block_deleted=bdel,
        block_chunk_start=cols["block_chunk_start"],
        chunk_offset=cols["chunk_offset"],
        chunk_length=cols["chunk_length"],
        chunk_value=cols["chunk_value"],
        chunk_matches=cols["chunk_matches"].view(np.bool_),
    )
    try:
        tree = ContainerTree(cols["container_id"], validate=True, copy=False, **kwargs)
    except ValueError:
        # Not in Ozone's order (or duplicate IDs/offsets): normalise as Ozone's maps would
        # (sorted, the later entry wins); such a tree is then written back in Ozone's form.
        tree = _normalised(cols["container_id"], kwargs)
        wire["block_present"] = wire["chunk_present"] = None
    tree.unknown_fields = cols["tail"]
    present = (wire["block_present"], wire["chunk_present"])
    tree._wire = (
        wire
        if any(v is not None for v in present)
        or not (wire["has_container_id"] and wire["has_tree"])
        else None
    )
    return tree


def _normalised(container_id: int, kw: dict) -> ContainerTree:
    cs = kw["block_chunk_start"]
    nb = kw["block_id"].shape[0]
    counts = np.diff(cs)
    row_block = np.repeat(np.arange(nb, dtype=np.int64), counts)
    # Sort blocks (stable; the later duplicate wins), then chunks by (block rank, offset).
    bperm = _native._ozt_sort_rows(np.ascontiguousarray(kw["block_id"]))
    bkeep = np.arange(nb, dtype=np.int64) if bperm is None else bperm
    rank = np.full(nb, -1, dtype=np.int64)
    rank[bkeep] = np.arange(bkeep.shape[0], dtype=np.int64)
    chunk_rank = rank[row_block]
    live_rows = np.flatnonzero(chunk_rank >= 0)
    keys = np.ascontiguousarray(chunk_rank[live_rows])
    offs = np.ascontiguousarray(kw["chunk_offset"][live_rows])
    cperm = _native._ozt_sort_rows(keys, offs)
    rows = live_rows if cperm is None else live_rows[cperm]
    new_counts = np.bincount(chunk_rank[rows], minlength=bkeep.shape[0])
    start = np.zeros(bkeep.shape[0] + 1, dtype=np.int64)
    np.cumsum(new_counts, out=start[1:])
    return ContainerTree(
        container_id,
        data_checksum=kw["data_checksum"],
        block_id=kw["block_id"][bkeep],
        block_value=kw["block_value"][bkeep],
        block_deleted=kw["block_deleted"][bkeep],
        block_chunk_start=start,
        chunk_offset=kw["chunk_offset"][rows],
        chunk_length=kw["chunk_length"][rows],
        chunk_value=kw["chunk_value"][rows],
        chunk_matches=kw["chunk_matches"][rows],
    )


def _add_blocks(
    ids: np.ndarray, values: np.ndarray, cstart: np.ndarray, deleted_blocks: Any, empty_blocks: Any
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Merge tombstones and empty blocks into the grouped blocks; drop tombstones' chunks."""
    extra_ids: Dict[int, Optional[int]] = {}
    if empty_blocks is not None:
        for b in np.asarray(empty_blocks, dtype=_I64).reshape(-1):
            extra_ids.setdefault(int(b), None)
    tomb: Dict[int, Optional[int]] = {}
    if deleted_blocks is not None:
        if isinstance(deleted_blocks, Mapping):
            tomb = {int(k): int(v) for k, v in deleted_blocks.items()}
        else:
            tomb = {int(b): None for b in np.asarray(deleted_blocks, dtype=_I64).reshape(-1)}
    all_ids = np.union1d(ids, np.array(sorted(set(extra_ids) | set(tomb)), dtype=_I64))
    pos = np.searchsorted(all_ids, ids)
    counts = np.zeros(all_ids.shape[0], dtype=_I64)
    counts[pos] = np.diff(cstart)
    new_values = np.empty(all_ids.shape[0], dtype=_I64)
    have = np.zeros(all_ids.shape[0], dtype=np.bool_)
    new_values[pos] = values
    have[pos] = True
    missing = np.flatnonzero(~have)
    if missing.size:  # blocks with no chunks: CRC32C(BE64(id))
        new_values[missing] = _native._ozt_block_values(
            np.ascontiguousarray(all_ids[missing]),
            np.zeros(missing.size + 1, dtype=_I64),
            np.zeros(0, dtype=_I64),
        )
    deleted = np.zeros(all_ids.shape[0], dtype=np.bool_)
    keep = None
    if tomb:
        t_ids = np.array(sorted(tomb), dtype=_I64)
        t_pos = np.searchsorted(all_ids, t_ids)
        deleted[t_pos] = True
        for tid, p in zip(t_ids, t_pos):
            v = tomb[int(tid)]
            if v is not None:
                new_values[p] = v
        if bool(np.any(counts[t_pos])):
            row_block = np.repeat(np.arange(all_ids.shape[0]), counts)
            keep = np.flatnonzero(~deleted[row_block])
            counts[t_pos] = 0
    new_start = np.zeros(all_ids.shape[0] + 1, dtype=_I64)
    np.cumsum(counts, out=new_start[1:])
    return all_ids, new_values, deleted, new_start, keep


class TreeBuilder:
    """Build a tree incrementally (a chunk at a time), as Ozone's tree writer does.

    >>> b = TreeBuilder(7)
    >>> b.add_chunk(1, 0, 4096, windows=[0x1234])      # window checksums (uint32 values)
    >>> b.add_chunk(1, 4096, 4096, leaf=0xabcd, checksum_matches=False)
    >>> b.add_block(2)                                  # a block with no chunks
    >>> b.mark_deleted(3, value=0x42)                   # a tombstone
    >>> tree = b.build()
    """

    def __init__(
        self,
        container_id: int,
        *,
        bytes_per_checksum: int = DEFAULT_BYTES_PER_CHECKSUM,
        algorithm: str = DEFAULT_ALGORITHM,
    ) -> None:
        self.container_id = int(container_id)
        self.bytes_per_checksum = bytes_per_checksum
        self.algorithm = algorithm
        self._block: List[int] = []
        self._offset: List[int] = []
        self._length: List[int] = []
        self._leaf: List[int] = []
        self._matches: List[bool] = []
        self._empty: List[int] = []
        self._deleted: Dict[int, Optional[int]] = {}

    def add_chunk(
        self,
        block_id: int,
        offset: int,
        length: Optional[int] = None,
        *,
        windows: Any = None,
        leaf: Optional[int] = None,
        data: Any = None,
        checksum_matches: bool = True,
    ) -> int:
        """Add one chunk from its window checksums, its leaf value, or its raw data; returns
        the leaf value. A later chunk at the same (block, offset) replaces an earlier one."""
        from merkle.trees.ozone import leaf_checksum

        if sum(x is not None for x in (windows, leaf, data)) != 1:
            raise ValueError("give exactly one of windows, leaf, data")
        if data is not None:
            windows = _native.checksum_windows(
                data, self.bytes_per_checksum, algorithm=self.algorithm
            )
            if length is None:
                length = len(memoryview(data).cast("B"))
        value = int(leaf) if leaf is not None else leaf_checksum(windows)
        self._block.append(int(block_id))
        self._offset.append(int(offset))
        self._length.append(int(length or 0))
        self._leaf.append(value)
        self._matches.append(bool(checksum_matches))
        return value

    def add_block(self, block_id: int) -> None:
        """Make sure a block exists (a block with no chunks hashes to CRC32C(BE64(id)))."""
        self._empty.append(int(block_id))

    def mark_deleted(self, block_id: int, value: Optional[int] = None) -> None:
        """Turn a block into a tombstone: its value is kept (computed from its chunks unless
        given), its chunks are dropped."""
        self._deleted[int(block_id)] = None if value is None else int(value)

    def build(self, *, data_checksum: bool = True) -> ContainerTree:
        deleted: Any = None
        if self._deleted:
            computed = {k: v for k, v in self._deleted.items() if v is not None}
            if len(computed) == len(self._deleted):
                deleted = computed
            else:
                # Value of the unvalued tombstones: their block value as built so far.
                probe = ContainerTree.from_columns(
                    self.container_id,
                    self._block,
                    self._offset,
                    self._length,
                    leaf=np.array(self._leaf, dtype=_I64),
                    empty_blocks=list(self._deleted),
                )
                deleted = {}
                for k, v in self._deleted.items():
                    deleted[k] = (
                        v if v is not None else int(probe.block_value[probe.block_index(k)])
                    )
        return ContainerTree.from_columns(
            self.container_id,
            self._block,
            self._offset,
            self._length,
            leaf=np.array(self._leaf, dtype=_I64),
            checksum_matches=self._matches,
            deleted_blocks=deleted,
            empty_blocks=self._empty or None,
            data_checksum=data_checksum,
        )
