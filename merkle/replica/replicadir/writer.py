"""Write container replicas the way a client write does: data into block files, window
checksums (CRC-32 or CRC-32C at a chosen bytes-per-checksum) into the block metadata, and
the `.tree` the datanode would hold for a closed container.

    with ContainerWriter.create(volume / "7", 7, algorithm="crc32", bytes_per_checksum=16384,
                                chunk_size=4 * MiB) as w:
        w.write_block(1, data)             # split into chunks, checksummed, written
        w.write_chunk(2, 0, chunk_bytes)   # or one chunk at a time (appending, no holes)
        w.delete_block(1)                  # Ozone's block deletion: file gone, tombstone
    # close(): block files fsynced, metadata then tree replaced atomically

The writer holds the replica lock (replica_lock) from open to close. Every file is opened
through the replica's directory descriptors (merkle.replica.files.LocalReplicaFiles): a link
or FIFO planted in place of a block or metadata file is refused, never written through; an
unreadable `.tree` or a newer-version `.blocks` stops the writer instead of being replaced.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Dict, List, Optional, Type, Union

import numpy as np

from merkle.replica.errors import BlockMetaError, ReplicaError, WriterError
from merkle.replica.fileio import fsync_dir
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.lock import ReplicaLock
from merkle.replica.replicadir.blockmeta import ChunkMeta, ContainerMeta, decode_blockmeta
from merkle.replica.replicadir.paths import (
    META_SUFFIX,
    TREE_SUFFIX,
    ContainerPaths,
    container_paths,
)
from merkle.trees.model import ContainerTree
from merkle.trees.ozone import DEFAULT_ALGORITHM, DEFAULT_BYTES_PER_CHECKSUM
from merkle.trees.treefile import TreeFileError, tree_from_bytes, tree_to_bytes

__all__ = ["ContainerWriter", "DEFAULT_CHUNK_SIZE", "tree_from_meta"]

PathLike = Union[str, "os.PathLike[str]"]

#: Ozone's default chunk size (ozone.scm.chunk.size).
DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024


def tree_from_meta(
    meta: ContainerMeta, tombstones: Optional[Dict[int, int]] = None
) -> ContainerTree:
    """The tree of a replica whose data matches its metadata (every chunk healthy): leaves
    from the recorded window checksums, tombstones {blockID: value} added."""
    bids: List[int] = []
    offs: List[int] = []
    lens: List[int] = []
    leaves: List[int] = []
    empty: List[int] = []
    for block in meta.sorted_blocks():
        if not block.chunks:
            empty.append(block.block_id)
        for c in block.chunks:
            bids.append(block.block_id)
            offs.append(c.offset)
            lens.append(c.length)
            leaves.append(c.leaf)
    tomb = {int(k): int(v) for k, v in (tombstones or {}).items()}
    return ContainerTree.from_columns(
        meta.container_id,
        bids,
        offs,
        lens,
        leaf=np.array(leaves, dtype=np.int64),
        deleted_blocks=tomb or None,
        empty_blocks=empty or None,
    )


class ContainerWriter:
    """Stores blocks into one replica; see the module docstring. Not thread-safe."""

    def __init__(
        self,
        path: PathLike,
        container_id: Optional[int] = None,
        *,
        algorithm: str = DEFAULT_ALGORITHM,
        bytes_per_checksum: int = DEFAULT_BYTES_PER_CHECKSUM,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        create: bool = False,
        lock: bool = True,
    ) -> None:
        if chunk_size <= 0 or bytes_per_checksum <= 0:
            raise WriterError("chunk_size and bytes_per_checksum must be > 0")
        self.paths: ContainerPaths = container_paths(path, container_id)
        if self.paths.root.name != str(self.paths.container_id):
            raise WriterError(
                f"directory name must be the container ID {self.paths.container_id}", str(path)
            )
        self.algorithm = algorithm
        self.bytes_per_checksum = int(bytes_per_checksum)
        self.chunk_size = int(chunk_size)
        if create:
            self.paths.chunks_dir.mkdir(parents=True, exist_ok=True)
            self.paths.metadata_dir.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.paths.root.parent)
        elif not self.paths.root.is_dir():
            raise ReplicaError("no such replica", str(path))
        self._lock = ReplicaLock(self.paths)
        if lock:
            self._lock.acquire()
        self.files = LocalReplicaFiles(self.paths)
        try:
            name = f"{self.paths.blockmeta}"
            try:
                self.meta = decode_blockmeta(
                    self.files.read_blockmeta(), name, self.paths.container_id
                )
            except FileNotFoundError:
                if not create:
                    raise BlockMetaError(
                        "block-metadata file is missing", name, missing=True
                    ) from None
                self.meta = ContainerMeta(self.paths.container_id)
            stored: Optional[ContainerTree] = None
            try:
                stored = tree_from_bytes(self.files.read_tree(), source=str(self.paths.tree))
            except FileNotFoundError:
                pass
            except TreeFileError:
                stored = None  # corrupt: rebuilt (its tombstones are lost, as a scan's)
        except BaseException:
            self.files.close()
            self._lock.release()
            raise
        self.tombstones: Dict[int, int] = {}
        if stored is not None:
            for b, v, d in zip(stored.block_id, stored.block_value, stored.block_deleted):
                if d:
                    self.tombstones[int(b)] = int(v)
        self._dirty: Dict[int, int] = {}  # block ID -> open fd
        self._closed = False

    @classmethod
    def create(
        cls, path: PathLike, container_id: Optional[int] = None, **kwargs: object
    ) -> ContainerWriter:
        """Open a replica for writing, creating its directories and metadata if needed."""
        return cls(path, container_id, create=True, **kwargs)  # type: ignore[arg-type]

    # ---- writes --------------------------------------------------------------------------

    def _fd(self, block_id: int) -> int:
        fd = self._dirty.get(block_id)
        if fd is None:
            fd = self.files.open_block_rw(block_id, create=True)
            self._dirty[block_id] = fd
        return fd

    def write_chunk(
        self,
        block_id: int,
        offset: int,
        data: object,
        *,
        algorithm: Optional[str] = None,
        bytes_per_checksum: Optional[int] = None,
    ) -> ChunkMeta:
        """Write one chunk at `offset` (its file offset) and record its window checksums.

        The offset must be within the block's recorded length (no holes); writing at an
        existing chunk's offset replaces that chunk, as Ozone's overwrite does.
        """
        self._check_open()
        block_id = int(block_id)
        if block_id in self.tombstones:
            raise WriterError(
                f"block {block_id} was deleted (tombstone in the tree)", str(self.paths.root)
            )
        block = self.meta.blocks.get(block_id)
        end = block.length if block else 0
        if offset < 0 or offset > end:
            raise WriterError(
                f"block {block_id}: chunk at {offset} would leave a hole (block length {end})",
                str(self.paths.root),
            )
        view = memoryview(data).cast("B")  # type: ignore[arg-type]
        chunk = ChunkMeta.from_data(
            offset,
            view,
            algorithm=algorithm or self.algorithm,
            bytes_per_checksum=bytes_per_checksum or self.bytes_per_checksum,
        )
        fd = self._fd(block_id)
        written = 0
        while written < len(view):
            written += os.pwrite(fd, view[written:], offset + written)
        self.meta.put_chunks(block_id, [chunk])
        return chunk

    def write_block(self, block_id: int, data: object) -> List[ChunkMeta]:
        """Write a whole block as consecutive chunks of `chunk_size` (the last may be short)."""
        view = memoryview(data).cast("B")  # type: ignore[arg-type]
        block = self.meta.blocks.get(int(block_id))
        if block is not None and block.chunks:
            raise WriterError(f"block {block_id} already exists", str(self.paths.root))
        if len(view) == 0:
            self._fd(int(block_id))
            self.meta.put_chunks(int(block_id), [])
            return []
        return [
            self.write_chunk(block_id, off, view[off : off + self.chunk_size])
            for off in range(0, len(view), self.chunk_size)
        ]

    def delete_block(self, block_id: int) -> None:
        """Delete a block as Ozone does: data file and metadata gone, a tombstone (the block's
        last value) kept in the tree so replicas agree it was deleted."""
        self._check_open()
        block_id = int(block_id)
        block = self.meta.blocks.pop(block_id, None)
        if block is None:
            raise WriterError(f"no block {block_id}", str(self.paths.root))
        one = ContainerMeta(self.paths.container_id, {block_id: block})
        self.tombstones[block_id] = int(tree_from_meta(one).block_value[0])
        fd = self._dirty.pop(block_id, None)
        if fd is not None:
            os.close(fd)
        self.files.unlink_block(block_id)

    # ---- commit --------------------------------------------------------------------------

    def tree(self) -> ContainerTree:
        """The tree of what has been written (all chunks healthy) plus tombstones."""
        return tree_from_meta(self.meta, self.tombstones)

    def close(self) -> ContainerTree:
        """fsync the block files, then write metadata and tree atomically; returns the tree."""
        if self._closed:
            return self.tree()
        try:
            for fd in self._dirty.values():
                os.fsync(fd)
            self.files.fsync_chunks()
            self.files.write_metadata(META_SUFFIX, self.meta.to_bytes())
            tree = self.tree()
            self.files.write_metadata(TREE_SUFFIX, tree_to_bytes(tree))
            return tree
        finally:
            self._release()

    def abort(self) -> None:
        """Close without writing metadata or tree (block data already written stays)."""
        self._release()

    def _release(self) -> None:
        for fd in self._dirty.values():
            os.close(fd)
        self._dirty.clear()
        self._closed = True
        self.files.close()
        self._lock.release()

    def _check_open(self) -> None:
        if self._closed:
            raise WriterError("writer is closed", str(self.paths.root))

    def __enter__(self) -> ContainerWriter:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
