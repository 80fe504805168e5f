"""The `.tree` file: Ozone's ContainerChecksumInfo (proto2), read and written natively.

Wire format (package hadoop.hdds.datanode, DatanodeClientProtocol.proto), written exactly as
Java protobuf writes it: fields in field-number order, int64 as varint (negative values as 10
bytes), bool as one varint byte, repeated messages unpacked. One message per file, no framing.

    ContainerChecksumInfo { optional int64 containerID = 1;
                            optional ContainerMerkleTree containerMerkleTree = 2; }  // 3 retired
    ContainerMerkleTree   { optional int64 dataChecksum = 1; repeated BlockMerkleTree blockMerkleTree = 2; }
    BlockMerkleTree       { optional int64 blockID = 1; optional int64 dataChecksum = 2;
                            repeated ChunkMerkleTree chunkMerkleTree = 3; optional bool deleted = 4; }
    ChunkMerkleTree       { optional int64 offset = 1; optional int64 length = 2;
                            optional int64 dataChecksum = 3; optional bool checksumMatches = 4; }

What Ozone writes: containerID and containerMerkleTree always; dataChecksum of the container
only when a full tree was generated; every block field except `deleted`, written only for
tombstones; every chunk field. A tree read from bytes remembers which optional fields were
present, so `tree_to_bytes(tree_from_bytes(b)) == b` for any canonical encoding; trees built or
changed here are written as Ozone writes them. Unknown fields are skipped when reading.

Files are `<container>/metadata/<containerID>.tree`; `write_tree` writes a temp file in the same
directory, fsyncs it, renames it over the target and fsyncs the directory.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from merkle import _native
from merkle.tree import ContainerTree

__all__ = ["TreeFileError", "read_tree", "tree_from_bytes", "tree_path", "tree_to_bytes",
           "write_tree"]

PathLike = Union[str, "os.PathLike[str]"]

_BLOCK_DEFAULT = 0b011  # blockID + dataChecksum (+ deleted when true)
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


def tree_path(container_dir: PathLike, container_id: int) -> Path:
    """Where Ozone keeps a container's tree: <container>/metadata/<containerID>.tree."""
    return Path(container_dir) / "metadata" / f"{int(container_id)}.tree"


def tree_to_bytes(tree: ContainerTree) -> bytes:
    wire = tree._wire or {}
    return _native._ozt_encode(
        wire.get("has_container_id", True), tree.container_id, wire.get("has_tree", True),
        tree.data_checksum is not None, tree.data_checksum or 0,
        tree.block_id, tree.block_value, tree.block_deleted.view(np.uint8),
        wire.get("block_present"), tree.block_chunk_start, tree.chunk_offset,
        tree.chunk_length, tree.chunk_value, tree.chunk_matches.view(np.uint8),
        wire.get("chunk_present"))


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
        raise TreeFileError("no containerID and no containerMerkleTree field "
                            "(foreign or unrelated protobuf data)", source)
    bp, cp = cols["block_present"], cols["chunk_present"]
    bdel = cols["block_deleted"].view(np.bool_)
    block_default = np.where(bdel, _BLOCK_DEFAULT | 4, _BLOCK_DEFAULT).astype(np.uint8)
    wire = {
        "has_container_id": cols["has_container_id"], "has_tree": cols["has_tree"],
        "block_present": None if np.array_equal(bp, block_default) else bp,
        "chunk_present": None if bool(np.all(cp == _CHUNK_DEFAULT)) else cp,
    }
    kwargs = dict(
        data_checksum=cols["data_checksum"] if cols["has_data_checksum"] else None,
        block_id=cols["block_id"], block_value=cols["block_value"], block_deleted=bdel,
        block_chunk_start=cols["block_chunk_start"], chunk_offset=cols["chunk_offset"],
        chunk_length=cols["chunk_length"], chunk_value=cols["chunk_value"],
        chunk_matches=cols["chunk_matches"].view(np.bool_))
    try:
        tree = ContainerTree(cols["container_id"], validate=True, **kwargs)
    except ValueError:
        # Not in Ozone's order (or duplicate IDs/offsets): normalise as Ozone's maps would
        # (sorted, the later entry wins); such a tree is then written back in Ozone's form.
        tree = _normalised(cols["container_id"], kwargs)
        wire["block_present"] = wire["chunk_present"] = None
    tree._wire = wire if any(v is not None for v in (wire["block_present"], wire["chunk_present"])) \
        or not (wire["has_container_id"] and wire["has_tree"]) else None
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
        container_id, data_checksum=kw["data_checksum"], block_id=kw["block_id"][bkeep],
        block_value=kw["block_value"][bkeep], block_deleted=kw["block_deleted"][bkeep],
        block_chunk_start=start, chunk_offset=kw["chunk_offset"][rows],
        chunk_length=kw["chunk_length"][rows], chunk_value=kw["chunk_value"][rows],
        chunk_matches=kw["chunk_matches"][rows])


def read_tree(path: PathLike, *, corrupt_ok: bool = False,
              missing_ok: bool = False) -> Optional[ContainerTree]:
    """Read a `.tree` file.

    Raises TreeFileError naming the file for an empty, truncated, corrupt or foreign file,
    unless `corrupt_ok`, which returns None ("no tree"), as Ozone does. A missing file raises
    FileNotFoundError unless `missing_ok` (then None).
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    try:
        return tree_from_bytes(data, source=name)
    except TreeFileError:
        if corrupt_ok:
            return None
        raise


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows: directories cannot be opened; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically: temp file in the same directory, fsync, rename
    over the target, fsync the directory. A crash leaves the old file or the new one."""
    name = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(name))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(name) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def write_tree(tree: ContainerTree, path: PathLike) -> None:
    """Write `tree` to a `.tree` file atomically (see write_bytes_atomic)."""
    write_bytes_atomic(path, tree_to_bytes(tree))
