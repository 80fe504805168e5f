"""How the scanner reads a replica's files, wherever they are.

The scanner (merkle.replica.scan) needs four things of a replica: its block-metadata bytes,
its stored `.tree` bytes, and each block file opened for positional reads into a buffer the
scanner owns. `ReplicaFiles` is that interface; `LocalReplicaFiles` implements it for a
directory with os.preadv (no copy, no shared file position), and spark_udfs.fs implements it
over pyarrow.fs for HDFS, S3 and other stores, so a Spark executor runs exactly the local
scanner's code on remote replicas.

Missing files raise FileNotFoundError; other I/O failures raise OSError.
"""

from __future__ import annotations

import os
from typing import Optional, Protocol

from merkle.replica.fileio import pread_into
from merkle.replica.crcmerkle.layout import ContainerPaths

__all__ = ["BlockFile", "LocalReplicaFiles", "ReplicaFiles"]


class BlockFile(Protocol):
    """One open block file."""

    def pread_into(self, view: memoryview, offset: int) -> int:
        """Fill `view` from `offset`; the bytes read (fewer only at end of file)."""

    def fileno(self) -> Optional[int]:
        """An OS descriptor to map the file from, or None when it has none (remote)."""

    def close(self) -> None:
        ...


class ReplicaFiles(Protocol):
    """The files of one replica (see the module docstring)."""

    container_id: int
    #: where the replica is, for messages and result rows (a path or a URI)
    location: str

    def read_blockmeta(self) -> bytes:
        ...

    def read_tree(self) -> bytes:
        ...

    def open_block(self, block_id: int) -> BlockFile:
        ...

    def block_name(self, block_id: int) -> str:
        """The block file's name, for messages."""


class _LocalBlockFile:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def pread_into(self, view: memoryview, offset: int) -> int:
        return pread_into(self._fd, view, offset)

    def fileno(self) -> Optional[int]:
        return self._fd

    def close(self) -> None:
        os.close(self._fd)


class LocalReplicaFiles:
    """A replica in a local directory (ContainerPaths)."""

    def __init__(self, paths: ContainerPaths) -> None:
        self.paths = paths
        self.container_id = paths.container_id
        self.location = os.fspath(paths.root)

    def read_blockmeta(self) -> bytes:
        return self.paths.blockmeta.read_bytes()

    def read_tree(self) -> bytes:
        return self.paths.tree.read_bytes()

    def open_block(self, block_id: int) -> BlockFile:
        return _LocalBlockFile(os.open(self.paths.block_file(block_id), os.O_RDONLY))

    def block_name(self, block_id: int) -> str:
        return self.paths.block_file(block_id).name
