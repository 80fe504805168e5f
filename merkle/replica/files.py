"""How the scanner reads a replica's files, wherever they are.

The scanner (merkle.replica.scan) needs four things of a replica: its block-metadata bytes,
its stored `.tree` bytes, and each block file opened for positional reads into a buffer the
scanner owns. `ReplicaFiles` is that interface; `LocalReplicaFiles` implements it for a
directory with os.preadv (no copy, no shared file position), and
merkle.replica.crcmerkle.remote implements it over pyarrow.fs for HDFS, S3 and other stores,
so a Spark executor runs exactly the local scanner's code on remote replicas.

Missing files raise FileNotFoundError; other I/O failures raise OSError. The local reader
opens every file relative to the replica's directory descriptors without following links or
blocking (merkle.replica.safeopen): a link, FIFO, device or directory in place of a file
raises NotRegularFileError, and a `.tree` / `.blocks` larger than the configured cap raises
FileTooLargeError before anything is read; `read_capped` does the same for a file read
through pyarrow.fs (S3, HDFS).
"""

from __future__ import annotations

import errno
import os
from typing import Any, Optional, Protocol

from merkle.replica.fileio import pread_into
from merkle.replica.politeio import drop_cached
from merkle.replica.replicadir.paths import BLOCK_SUFFIX, META_SUFFIX, TREE_SUFFIX, ContainerPaths
from merkle.replica.safeopen import (
    FileTooLargeError,
    ReplicaDir,
    max_metadata_bytes,
    open_regular,
    read_regular,
    replace_atomic,
)

__all__ = ["BlockFile", "LocalBlockFile", "LocalReplicaFiles", "ReplicaFiles", "read_capped"]


def read_capped(f: Any, display: str, limit: Optional[int] = None) -> bytes:
    """All of an open remote metadata file (a pyarrow RandomAccessFile: `size()` and
    `read(n)`), refused with FileTooLargeError when its size is above `limit` (default
    max_metadata_bytes(), as a local `.tree` / `.blocks`) before one byte is read; at most
    limit+1 bytes are ever read, so a file that grows meanwhile is refused too."""
    cap = max_metadata_bytes() if limit is None else int(limit)
    size = f.size()
    if size > cap:
        raise FileTooLargeError(
            errno.EFBIG,
            f"file of {size} bytes exceeds the {cap}-byte limit for metadata (not read)",
            display,
        )
    data = f.read(cap + 1)
    if len(data) > cap:
        raise FileTooLargeError(errno.EFBIG, f"larger than {cap} bytes (grew while read)", display)
    return bytes(data)


class BlockFile(Protocol):
    """One open block file."""

    def pread_into(self, view: memoryview, offset: int) -> int:
        """Fill `view` from `offset`; the bytes read (fewer only at end of file)."""

    def fileno(self) -> Optional[int]:
        """An OS descriptor to map the file from, or None when it has none (remote)."""

    def close(self) -> None: ...

    # Optional: `drop_cached(offset, length)`, dropping that range from the page cache
    # (merkle.replica.politeio.drop_cached); the verifier calls it after each read when asked
    # to (`drop_cache`) and skips files without it (pyarrow.fs: not this machine's cache).


class ReplicaFiles(Protocol):
    """The files of one replica (see the module docstring)."""

    container_id: int
    #: where the replica is, for messages and result rows (a path or a URI)
    location: str

    def read_blockmeta(self) -> bytes: ...

    def read_tree(self) -> bytes: ...

    def open_block(self, block_id: int) -> BlockFile: ...

    def block_name(self, block_id: int) -> str:
        """The block file's name, for messages."""


class LocalBlockFile:
    """A block file this process opened itself (a descriptor), read with pread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def pread_into(self, view: memoryview, offset: int) -> int:
        return pread_into(self._fd, view, offset)

    def fileno(self) -> Optional[int]:
        return self._fd

    def drop_cached(self, offset: int, length: int) -> None:
        """Drop this range from the page cache (best effort, never raises)."""
        drop_cached(self._fd, offset, length)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        os.close(self._fd)


class LocalReplicaFiles:
    """A replica in a local directory (ContainerPaths), read through directory descriptors
    (see the module docstring). `close()` releases them (also on garbage collection)."""

    def __init__(self, paths: ContainerPaths, directory: Optional[ReplicaDir] = None) -> None:
        self.paths = paths
        self.container_id = paths.container_id
        self.location = os.fspath(paths.root)
        self._dir = directory
        self._own = directory is None

    @property
    def dir(self) -> ReplicaDir:
        if self._dir is None:
            self._dir = ReplicaDir(self.paths.root)
        return self._dir

    def _meta(self, suffix: str) -> bytes:
        name = f"{self.container_id}{suffix}"
        return read_regular(self.dir.sub("metadata"), name, display=self.dir.show("metadata", name))

    def read_blockmeta(self) -> bytes:
        return self._meta(META_SUFFIX)

    def read_tree(self) -> bytes:
        return self._meta(TREE_SUFFIX)

    def open_block(self, block_id: int) -> BlockFile:
        name = self.block_name(block_id)
        return LocalBlockFile(
            open_regular(self.dir.sub("chunks"), name, display=self.dir.show("chunks", name))
        )

    def block_name(self, block_id: int) -> str:
        return f"{int(block_id)}{BLOCK_SUFFIX}"

    # ---- writing (the replica's own writers: scanner, reconciler, ContainerWriter) --------

    def write_metadata(self, suffix: str, data: bytes) -> None:
        """Replace `metadata/<id><suffix>` atomically, keeping its owner and mode (creates
        `metadata/` if needed, never through a link)."""
        name = f"{self.container_id}{suffix}"
        replace_atomic(
            self.dir.sub("metadata", create=True),
            name,
            data,
            display=self.dir.show("metadata", name),
        )

    def open_block_rw(self, block_id: int, *, create: bool = False) -> int:
        """A block file opened read-write (created if `create`), never through a link and
        never a hard-linked file: the descriptor."""
        name = self.block_name(block_id)
        return open_regular(
            self.dir.sub("chunks", create=create),
            name,
            os.O_RDWR,
            create=create,
            single_link=True,
            display=self.dir.show("chunks", name),
        )

    def block_size(self, block_id: int) -> int:
        """The size of a block file (0 when it does not exist; OSError if not regular)."""
        try:
            f = self.open_block(block_id)
        except FileNotFoundError:
            return 0
        try:
            return os.fstat(f.fileno() or -1).st_size
        finally:
            f.close()

    def fsync_chunks(self) -> None:
        try:
            os.fsync(self.dir.sub("chunks"))
        except OSError:
            pass

    def unlink_block(self, block_id: int) -> None:
        """Remove a block file (a link in its place is removed itself, never followed)."""
        try:
            os.unlink(self.block_name(block_id), dir_fd=self.dir.sub("chunks"))
        except FileNotFoundError:
            pass

    def close(self) -> None:
        if self._own and self._dir is not None:
            self._dir.close()
            self._dir = None
