"""Where a container replica keeps its files (modelled on Ozone's FILE_PER_BLOCK layout).

    <datanode>/                       a directory of volumes
      <volume>/                       a directory of container replicas (one disk in Ozone)
        <containerID>/                one replica; the directory name is the decimal ID
          chunks/<blockID>.block      one file per block; a chunk's offset is its file offset
          metadata/<containerID>.tree     the Merkle tree (Ozone's ContainerChecksumInfo proto)
          metadata/<containerID>.blocks   block metadata (what Ozone keeps in RocksDB), see
                                          merkle.replica.crcmerkle.blockmeta for the format
          .crcmerkle.lock             advisory lock held while a writer, scanner or
                                      reconciler modifies the replica (see replica_lock)

Discovery (`find_containers`) accepts a replica, a volume or a datanode (or any directory
above them): a directory is a replica when its name is an integer and it holds `chunks/` or
`metadata/`; the walk does not descend into replicas.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Union

from merkle.replica.errors import NotAReplicaError

__all__ = ["BLOCK_SUFFIX", "ContainerPaths", "LOCK_NAME", "META_SUFFIX", "ReplicaLocation",
           "container_paths", "find_containers", "is_container_dir"]

PathLike = Union[str, "os.PathLike[str]"]

BLOCK_SUFFIX = ".block"
META_SUFFIX = ".blocks"
TREE_SUFFIX = ".tree"
LOCK_NAME = ".crcmerkle.lock"


@dataclass(frozen=True)
class ContainerPaths:
    """Every path of one replica, derived from its directory."""

    root: Path
    container_id: int

    @property
    def chunks_dir(self) -> Path:
        return self.root / "chunks"

    @property
    def metadata_dir(self) -> Path:
        return self.root / "metadata"

    @property
    def tree(self) -> Path:
        return self.metadata_dir / f"{self.container_id}{TREE_SUFFIX}"

    @property
    def blockmeta(self) -> Path:
        return self.metadata_dir / f"{self.container_id}{META_SUFFIX}"

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    def block_file(self, block_id: int) -> Path:
        return self.chunks_dir / f"{int(block_id)}{BLOCK_SUFFIX}"


def _container_id(name: str) -> Optional[int]:
    try:
        value = int(name, 10)
    except ValueError:
        return None
    return value if str(value) == name and value >= 0 else None


def is_container_dir(path: PathLike) -> bool:
    p = Path(path)
    return (_container_id(p.name) is not None and p.is_dir()
            and ((p / "chunks").is_dir() or (p / "metadata").is_dir()))


def container_paths(path: PathLike, container_id: Optional[int] = None) -> ContainerPaths:
    """The paths of the replica at `path` (its ID is the directory name unless given)."""
    p = Path(path)
    cid = _container_id(p.name) if container_id is None else int(container_id)
    if cid is None:
        raise NotAReplicaError("a container replica directory is named by its decimal "
                               "container ID", os.fspath(path))
    return ContainerPaths(p, cid)


@dataclass(frozen=True)
class ReplicaLocation:
    """A replica found by discovery, with the volume it lives on (rate limits are per volume)."""

    paths: ContainerPaths
    volume: Path

    @property
    def container_id(self) -> int:
        return self.paths.container_id

    @property
    def root(self) -> Path:
        return self.paths.root


def _walk(p: Path) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(p), key=lambda e: e.name)
    except NotADirectoryError:
        return
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            continue
        child = Path(e.path)
        if is_container_dir(child):
            yield child
        else:
            yield from _walk(child)


def find_containers(path: PathLike) -> List[ReplicaLocation]:
    """Every replica at or under `path` (a replica, volume, datanode or cluster directory),
    in path order. Raises NotAReplicaError when there is none, FileNotFoundError if `path`
    does not exist."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    if is_container_dir(p):
        return [ReplicaLocation(container_paths(p), p.parent)]
    found = [ReplicaLocation(container_paths(c), c.parent) for c in _walk(p)]
    if not found:
        raise NotAReplicaError("no container replica here (expected <volume>/<containerID>/"
                               "chunks or metadata)", os.fspath(path))
    return found
