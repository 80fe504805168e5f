"""The filesystem layer executors read replicas through: local paths, or any URI pyarrow.fs
understands (hdfs://, s3://, gs://, file://), so block bytes go from storage straight into
the executor's Python worker and never through the JVM or Arrow batches.

Discovery mirrors merkle.replica_layout.find_containers (a replica is a directory named by
its decimal container ID holding chunks/ or metadata/; the walk does not descend into
replicas) but lists through pyarrow.fs so it works on remote stores too. The datanode of a
replica is the name of the directory above its volume (<datanode>/<volume>/<containerID>),
which is how `crcmerkle generate` lays out a cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Tuple

import pyarrow.fs as pafs

__all__ = ["Replica", "discover", "join", "open_fs", "read_bytes"]


def open_fs(uri: str) -> Tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) for a local path or a URI."""
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), os.path.abspath(uri)


def join(base: str, *parts: str) -> str:
    """Join path parts with '/', for URIs as well as local paths."""
    return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])


def read_bytes(uri: str) -> bytes:
    """The whole (small) file: metadata and trees. FileNotFoundError if absent."""
    fs, path = open_fs(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(2, "No such file or directory", uri)
    with fs.open_input_file(path) as f:
        return f.readall()


@dataclass(frozen=True)
class Replica:
    """One replica found by discovery."""

    datanode: str
    path: str  # as given (local path or URI), usable by open_fs
    container: int


def _cid(name: str) -> int:
    try:
        v = int(name, 10)
    except ValueError:
        return -1
    return v if str(v) == name and v >= 0 else -1


def discover(root: str) -> List[Replica]:
    """Every replica at or under `root` (a replica, volume, datanode or cluster directory),
    in path order. FileNotFoundError if root does not exist; ValueError if it holds none."""
    fs, base = open_fs(root)
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(2, "No such file or directory", root)
    prefix = root[: len(root) - len(base)] if "://" in root and root.endswith(base) else ""

    def is_replica(path: str) -> bool:
        if _cid(path.rstrip("/").rsplit("/", 1)[-1]) < 0:
            return False
        kinds = fs.get_file_info([path + "/chunks", path + "/metadata"])
        return any(k.type == pafs.FileType.Directory for k in kinds)

    found: List[str] = []

    def walk(path: str) -> None:
        if is_replica(path):
            found.append(path)
            return
        entries = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        for e in sorted(entries, key=lambda e: e.path):
            if e.type == pafs.FileType.Directory:
                walk(e.path)

    if info.type == pafs.FileType.Directory:
        walk(base.rstrip("/") or "/")
    if not found:
        raise ValueError(f"{root}: no container replica here (expected <volume>/<containerID>/"
                         f"chunks or metadata)")
    out = []
    for p in found:
        parts = p.rstrip("/").split("/")
        datanode = parts[-3] if len(parts) >= 3 else parts[0]
        out.append(Replica(datanode, prefix + p if prefix else p, _cid(parts[-1])))
    return out
