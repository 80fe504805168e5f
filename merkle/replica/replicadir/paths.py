"""A container replica as a directory: the shape every directory-of-block-files layout shares.

    <containerID>/                    one replica; the directory name is the decimal ID
      chunks/<blockID>.block          one file per block; a chunk's offset is its file offset
      metadata/<containerID>.tree     the Merkle tree (Ozone's ContainerChecksumInfo proto)
      metadata/<containerID>.blocks   block metadata (merkle.replica.replicadir.blockmeta)
      .crcmerkle.lock                 advisory lock held while a writer, scanner or
                                      reconciler modifies the replica (merkle.replica.lock)

crcmerkle's layout (merkle.replica.crcmerkle) arranges such directories in volumes of
datanodes; an Ozone container directory has the same shape (Ozone's FILE_PER_BLOCK layout,
its block metadata in RocksDB instead of `.blocks`). The neutral code (the verifier, the
replica files, the lock, the repair job, the generator) speaks this shape, never a layout.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from merkle.replica.errors import NotAReplicaError

__all__ = [
    "BLOCK_SUFFIX",
    "ContainerPaths",
    "LOCK_NAME",
    "MAX_CONTAINER_ID",
    "META_SUFFIX",
    "TREE_SUFFIX",
    "container_id_of",
    "container_paths",
    "is_container_dir",
    "refuse_link",
]

PathLike = Union[str, "os.PathLike[str]"]

BLOCK_SUFFIX = ".block"
META_SUFFIX = ".blocks"
TREE_SUFFIX = ".tree"
LOCK_NAME = ".crcmerkle.lock"
#: Ozone's container IDs are Java longs
MAX_CONTAINER_ID = (1 << 63) - 1


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


def container_id_of(name: str) -> Optional[int]:
    """The container ID a replica directory's name gives (its decimal form exactly, 0 to
    2**63-1), else None."""
    try:
        value = int(name, 10)
    except ValueError:
        return None
    return value if str(value) == name and 0 <= value <= MAX_CONTAINER_ID else None


def is_container_dir(path: PathLike) -> bool:
    p = Path(path)
    return (
        container_id_of(p.name) is not None
        and p.is_dir()
        and ((p / "chunks").is_dir() or (p / "metadata").is_dir())
    )


def refuse_link(path: PathLike) -> None:
    """NotAReplicaError when the replica directory `path` names is a symbolic link (its last
    component, a trailing slash ignored): a replica is never followed or written through."""
    name = os.fspath(path)
    if os.path.islink(name.rstrip("/") or name):
        raise NotAReplicaError("is a symbolic link: a replica directory is never followed", name)


def container_paths(path: PathLike, container_id: Optional[int] = None) -> ContainerPaths:
    """The paths of the replica at `path` (its ID is the directory name unless given)."""
    p = Path(path)
    cid = container_id_of(p.name) if container_id is None else int(container_id)
    if cid is None:
        raise NotAReplicaError(
            "a container replica directory is named by its decimal container ID (0 to 2**63-1)",
            os.fspath(path),
        )
    return ContainerPaths(p, cid)
