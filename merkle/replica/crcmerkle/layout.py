"""Where a container replica keeps its files (modelled on Ozone's FILE_PER_BLOCK layout).

    <datanode>/                       a directory of volumes
      <volume>/                       a directory of container replicas (one disk in Ozone)
        <containerID>/                one replica; the directory name is the decimal ID
          chunks/<blockID>.block      one file per block; a chunk's offset is its file offset
          metadata/<containerID>.tree     the Merkle tree (Ozone's ContainerChecksumInfo proto)
          metadata/<containerID>.blocks   block metadata (what Ozone keeps in RocksDB), see
                                          merkle.replica.replicadir.blockmeta for the format
          .crcmerkle.lock             advisory lock held while a writer, scanner or
                                      reconciler modifies the replica (see replica_lock)

Discovery (`find_containers`) accepts a replica, a volume or a datanode (or any directory
above them): a directory is a replica when its name is an integer and it holds `chunks/` or
`metadata/`; the walk does not descend into replicas. Container IDs are Ozone's signed 64-bit
longs: a decimal name above 2**63-1 is no replica. With `on_error`, a directory the walk
cannot read (EACCES, EIO) or a replica-like directory with an out-of-range ID is reported
there and the walk goes on. A symbolic link where a replica, volume or datanode directory
could be is never followed: the walk reports it there ("is a symbolic link"), and a replica
named directly that is a link is refused (`refuse_link`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple, Union

from merkle.replica.errors import NotAReplicaError
from merkle.replica.replicadir.paths import (  # the replica directory's shape, this layout's
    BLOCK_SUFFIX,
    LOCK_NAME,
    MAX_CONTAINER_ID,
    META_SUFFIX,
    TREE_SUFFIX,
    ContainerPaths,
    container_id_of,
    container_paths,
    is_container_dir,
    refuse_link,
)

__all__ = [
    "BLOCK_SUFFIX",
    "ContainerPaths",
    "LOCK_NAME",
    "MAX_CONTAINER_ID",
    "META_SUFFIX",
    "TREE_SUFFIX",
    "ReplicaLocation",
    "container_id_of",
    "container_paths",
    "datanode_of",
    "find_containers",
    "holds_containers",
    "is_container_dir",
    "refuse_link",
]

PathLike = Union[str, "os.PathLike[str]"]

#: Called with (path, exception) for an entry the walk could not use.
WalkErrorFn = Callable[[Path, Exception], object]


def _looks_like_replica(p: Path) -> bool:
    """A directory holding chunks/ or metadata/ (raises OSError if it cannot be checked)."""
    for sub in ("chunks", "metadata"):
        try:
            os.stat(p / sub)
            if (p / sub).is_dir():
                return True
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue
    return False


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


def _walk(p: Path, on_error: Optional[WalkErrorFn], depth: Optional[int] = None) -> Iterator[Path]:
    """The replicas under `p`, in path order (`depth`: directory levels looked into below `p`,
    unlimited when None)."""
    if depth is not None and depth <= 0:
        return
    try:
        with os.scandir(p) as it:
            entries = sorted(it, key=lambda e: e.name)
    except NotADirectoryError:
        return
    except OSError as exc:
        if on_error is None:
            raise
        on_error(p, exc)
        return
    for e in entries:
        try:
            if e.is_symlink():
                # a link where a replica, volume or datanode directory may be: reported,
                # never followed (it could lead a repair into a foreign directory)
                if e.is_dir() and on_error is not None:
                    on_error(
                        Path(e.path),
                        NotAReplicaError("is a symbolic link to a directory: not followed", e.path),
                    )
                continue
            if not e.is_dir(follow_symlinks=False):
                continue
            child = Path(e.path)
            decimal = e.name.isdigit() and e.name.isascii()
            if decimal and _looks_like_replica(child):
                if container_id_of(e.name) is not None:
                    yield child
                elif on_error is not None:
                    on_error(
                        child,
                        NotAReplicaError(
                            "container ID out of range (above 2**63-1): not scanned",
                            os.fspath(child),
                        ),
                    )
                continue
        except OSError as exc:
            if on_error is None:
                raise
            on_error(Path(e.path), exc)
            continue
        yield from _walk(child, on_error, None if depth is None else depth - 1)


#: replica directories are at most this deep below a cluster directory
#: (<cluster>/<datanode>/<volume>/<containerID>)
_DEPTH = 3


def holds_containers(path: PathLike) -> bool:
    """Is `path` a replica, or does it hold one within three directory levels (a volume, a
    datanode, a cluster)? Stops at the first replica found; False for a path that does not
    exist or cannot be read."""
    p = Path(path)
    try:
        return is_container_dir(p) or next(_walk(p, None, _DEPTH), None) is not None
    except OSError:
        return False


def datanode_of(replica: str) -> str:
    """The datanode a replica path names: the directory above its volume
    (<datanode>/<volume>/<containerID>), or the path's first component when it is shorter."""
    parts = replica.rstrip("/").split("/")
    return parts[-3] if len(parts) >= 3 else parts[0]


def find_containers(
    path: PathLike, on_error: Optional[WalkErrorFn] = None
) -> List[ReplicaLocation]:
    """Every replica at or under `path` (a replica, volume, datanode or cluster directory),
    in path order. Raises NotAReplicaError when there is none (and nothing went to
    `on_error`), FileNotFoundError if `path` does not exist. Entries the walk cannot use go to
    `on_error` when given (see the module docstring), else raise."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    if is_container_dir(p):
        refuse_link(p)
        return [ReplicaLocation(container_paths(p), p.parent)]
    reported: List[Tuple[Path, Exception]] = []

    def note(where: Path, exc: Exception) -> None:
        reported.append((where, exc))
        if on_error is not None:
            on_error(where, exc)

    found = [
        ReplicaLocation(container_paths(c), c.parent)
        for c in _walk(p, note if on_error is not None else None)
    ]
    if not found and reported:
        return found
    if not found:
        raise NotAReplicaError(
            "no container replica here (expected <volume>/<containerID>/chunks or metadata)",
            os.fspath(path),
        )
    return found
