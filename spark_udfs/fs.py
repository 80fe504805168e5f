"""The filesystem layer executors read replicas through: local paths, or any URI pyarrow.fs
understands (hdfs://, s3://, gs://, file://), so block bytes go from storage straight into
the executor's Python worker and never through the JVM or Arrow batches.

`replica_files` gives the scanner (merkle.replica.scan.scan_files) its view of one replica:
merkle's own os.preadv reader for a local path, `ArrowReplicaFiles` for a URI (positional
reads into the scanner's reused buffer through pyarrow's NativeFile.readinto).

Discovery mirrors merkle.replica.crcmerkle.layout.find_containers (a replica is a directory named by
its decimal container ID holding chunks/ or metadata/; the walk does not descend into
replicas) but lists through pyarrow.fs so it works on remote stores too, asking for the
chunks/ and metadata/ entries of every candidate of a directory in one call. The datanode of
a replica is the name of the directory above its volume (<datanode>/<volume>/<containerID>),
which is how `crcmerkle generate` lays out a cluster.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

import pyarrow.fs as pafs

from merkle.replica.files import BlockFile, LocalReplicaFiles, ReplicaFiles
from merkle.replica.crcmerkle.layout import BLOCK_SUFFIX, META_SUFFIX, TREE_SUFFIX, container_paths

__all__ = ["ArrowReplicaFiles", "Replica", "discover", "join", "open_fs", "replica_files"]


def is_uri(location: str) -> bool:
    return "://" in location


@functools.lru_cache(maxsize=64)
def _filesystem(root: str) -> pafs.FileSystem:
    """One filesystem object per discovery root per process: connecting to HDFS or S3 costs
    far more than reading a replica's metadata."""
    return pafs.FileSystem.from_uri(root)[0]


def open_fs(uri: str) -> Tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) for a local path or a URI."""
    if not is_uri(uri):
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def join(base: str, *parts: str) -> str:
    """Join path parts with '/', for URIs as well as local paths."""
    return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])


class _ArrowBlockFile:
    def __init__(self, f: "pafs.NativeFile") -> None:
        self._f = f

    def pread_into(self, view: memoryview, offset: int) -> int:
        self._f.seek(offset)
        got = 0
        while got < len(view):
            n = self._f.readinto(view[got:])
            if n <= 0:
                break
            got += n
        return got

    def fileno(self) -> Optional[int]:
        return None  # never mapped: a remote read error must be an error, not SIGBUS

    def close(self) -> None:
        self._f.close()


class ArrowReplicaFiles:
    """A replica read through a pyarrow FileSystem (merkle.replica.files.ReplicaFiles)."""

    def __init__(self, filesystem: pafs.FileSystem, path: str, container_id: int,
                 location: Optional[str] = None) -> None:
        self.fs = filesystem
        self.path = path.rstrip("/")
        self.container_id = int(container_id)
        self.location = location or self.path

    def _read(self, path: str) -> bytes:
        # open_input_file raises FileNotFoundError (an OSError subclass) for a missing file
        with self.fs.open_input_file(path) as f:
            return f.readall()

    def read_blockmeta(self) -> bytes:
        return self._read(f"{self.path}/metadata/{self.container_id}{META_SUFFIX}")

    def read_tree(self) -> bytes:
        return self._read(f"{self.path}/metadata/{self.container_id}{TREE_SUFFIX}")

    def open_block(self, block_id: int) -> BlockFile:
        path = f"{self.path}/chunks/{self.block_name(block_id)}"
        return _ArrowBlockFile(self.fs.open_input_file(path))

    def block_name(self, block_id: int) -> str:
        return f"{int(block_id)}{BLOCK_SUFFIX}"


@dataclass(frozen=True)
class Replica:
    """One replica found by discovery."""

    datanode: str
    path: str  # as given: a local path, or the URI of the replica (for messages and rows)
    container: int
    #: for URIs: the discovery root (the filesystem is opened from it once per process)
    #: and the replica's path inside that filesystem
    fs_root: Optional[str] = None
    fs_path: Optional[str] = None


def replica_files(replica: Replica) -> ReplicaFiles:
    """How an executor reads `replica` (a local directory, or a store pyarrow.fs reaches)."""
    if replica.fs_root is None:
        return LocalReplicaFiles(container_paths(replica.path, replica.container))
    filesystem = _filesystem(replica.fs_root)
    if isinstance(filesystem, pafs.LocalFileSystem) and replica.fs_path:
        # file:// — the local reader: no link followed, a FIFO never blocks the executor
        return LocalReplicaFiles(container_paths(replica.fs_path, replica.container))
    return ArrowReplicaFiles(_filesystem(replica.fs_root), replica.fs_path or "",
                             replica.container, replica.path)


def _cid(name: str) -> int:
    try:
        v = int(name, 10)
    except ValueError:
        return -1
    return v if str(v) == name and v >= 0 else -1


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def discover(root: str) -> List[Replica]:
    """Every replica at or under `root` (a replica, volume, datanode or cluster directory),
    in path order. FileNotFoundError if root does not exist; ValueError if it holds none."""
    fs, base = open_fs(root)
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(2, "No such file or directory", root)
    prefix = root[: len(root) - len(base)] if is_uri(root) and root.endswith(base) else ""

    def replicas_among(paths: List[str]) -> List[bool]:
        """Which of `paths` are replicas: a decimal name holding chunks/ or metadata/
        (both looked up for every candidate in one call)."""
        cands = [p for p in paths if _cid(_basename(p)) >= 0]
        infos = fs.get_file_info([f"{p}/{sub}" for p in cands for sub in ("chunks", "metadata")])
        yes = {p for i, p in enumerate(cands)
               if pafs.FileType.Directory in (infos[2 * i].type, infos[2 * i + 1].type)}
        return [p in yes for p in paths]

    found: List[str] = []

    def walk(path: str) -> None:
        entries = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        dirs = sorted(e.path for e in entries if e.type == pafs.FileType.Directory)
        for d, is_replica in zip(dirs, replicas_among(dirs)):
            if is_replica:
                found.append(d)
            else:
                walk(d)

    if info.type == pafs.FileType.Directory:
        top = base.rstrip("/") or "/"
        if replicas_among([top])[0]:
            found.append(top)
        else:
            walk(top)
    if not found:
        raise ValueError(f"{root}: no container replica here (expected <volume>/<containerID>/"
                         f"chunks or metadata)")
    out = []
    for p in found:
        parts = p.rstrip("/").split("/")
        datanode = parts[-3] if len(parts) >= 3 else parts[0]
        if is_uri(root):
            out.append(Replica(datanode, prefix + p, _cid(parts[-1]), root, p))
        else:
            out.append(Replica(datanode, p, _cid(parts[-1])))
    return out
