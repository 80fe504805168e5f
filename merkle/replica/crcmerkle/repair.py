"""A repair of a crcmerkle-layout replica (the reconciler's side of this layout,
merkle.replica.crcmerkle.interface): the replica opened and locked for the repair, where the
repair stores its block metadata and tree (`.blocks`, `.tree`, each replaced atomically), a
peer's files and block metadata, the replicas under a directory by container ID, and the
check that a replica a report names records that container."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from merkle.replica.crcmerkle.layout import (
    META_SUFFIX,
    TREE_SUFFIX,
    WalkErrorFn,
    container_paths,
    find_containers,
    refuse_link,
)
from merkle.replica.errors import BlockMetaError, ReplicaError
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.lock import ReplicaLock
from merkle.replica.replicadir.blockmeta import ContainerMeta, decode_blockmeta, encode_blockmeta
from merkle.replica.safeopen import open_dir, read_regular
from merkle.trees.model import ContainerTree
from merkle.trees.treefile import TreeFileError, tree_from_bytes, tree_to_bytes

__all__ = ["CrcmerkleRepair", "check_container_id", "load_peer", "replica_groups"]

PathLike = Union[str, "os.PathLike[str]"]


class CrcmerkleRepair:
    """The target of a repair in place: never a link, held by the replica lock (not in a dry
    run) until close(); the block metadata goes to `.blocks`, the tree to `.tree`."""

    def __init__(self, path: PathLike, *, dry_run: bool = False) -> None:
        self.paths = container_paths(path)
        refuse_link(path)  # never locked or written through a link
        if not self.paths.root.is_dir():
            raise ReplicaError("replica does not exist", os.fspath(path))
        self._lock = None if dry_run else ReplicaLock(self.paths).acquire()
        try:
            self.files = LocalReplicaFiles(self.paths)
        except BaseException:
            self._release()
            raise

    def save_blocks(
        self,
        meta: ContainerMeta,
        peer_values: Dict[int, bytes],
        block_ids: Sequence[int],
        tree: ContainerTree,
    ) -> None:
        self.files.write_metadata(META_SUFFIX, encode_blockmeta(meta))

    def save_tree(self, tree: ContainerTree) -> None:
        # the tree carries the stored tree's unknown top-level fields (written after field 2)
        self.files.write_metadata(TREE_SUFFIX, tree_to_bytes(tree))

    def close(self) -> None:
        try:
            self.files.close()
        finally:
            self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def load_peer(
    path: PathLike, container_id: int
) -> Tuple[LocalReplicaFiles, ContainerMeta, Dict[int, bytes]]:
    """(files, block metadata, {}) of a peer; ReplicaError/OSError when it cannot serve (its
    `.blocks` unreadable, corrupt, newer or not a regular file)."""
    paths = container_paths(path)
    if not paths.root.is_dir():
        raise ReplicaError("peer replica does not exist", os.fspath(path))
    if paths.container_id != container_id:
        raise ReplicaError(
            f"peer is container {paths.container_id}, not {container_id}", os.fspath(path)
        )
    files = LocalReplicaFiles(paths)
    try:
        name = f"{paths.root}/metadata/{container_id}{META_SUFFIX}"
        try:
            raw = files.read_blockmeta()
        except FileNotFoundError:
            raise BlockMetaError("block-metadata file is missing", name, missing=True) from None
        meta = decode_blockmeta(raw, name, container_id)
    except BaseException:
        files.close()
        raise
    return files, meta, {}


def replica_groups(path: PathLike, on_error: Optional[WalkErrorFn] = None) -> Dict[int, List[Path]]:
    """Replicas at or under `path` grouped by container ID ({ID: [paths]}); entries the walk
    cannot use go to `on_error` when given (else raise)."""
    groups: Dict[int, List[Path]] = {}
    for loc in find_containers(path, on_error):
        groups.setdefault(loc.container_id, []).append(loc.root)
    return groups


def check_container_id(dir_fd: int, path: str, container_id: int) -> None:
    """The replica open at `dir_fd` (reached without links; `path` for messages) records
    `container_id` in its own metadata: its `.blocks` (else its `.tree`) says so;
    ReplicaError otherwise. A `.blocks` or `.tree` that does not decode is left to the
    repair, which reports (and refuses) it."""
    try:
        mfd = open_dir("metadata", dir_fd, display=os.path.join(path, "metadata"))
    except FileNotFoundError:
        raise ReplicaError(
            "has no metadata/ saying which container it is (refused)", path
        ) from None
    try:
        try:
            raw: Optional[bytes] = read_regular(mfd, f"{container_id}{META_SUFFIX}")
        except FileNotFoundError:
            raw = None
        if raw is not None:
            try:
                meta = decode_blockmeta(raw, f"{path}/metadata/{container_id}{META_SUFFIX}")
            except BlockMetaError:
                return  # unreadable: the repair itself reports (and refuses) it
            if meta.container_id != container_id:
                raise ReplicaError(
                    f"not container {container_id}: its block metadata "
                    f"records container {meta.container_id} (refused)",
                    path,
                )
            return
        try:
            traw = read_regular(mfd, f"{container_id}{TREE_SUFFIX}")
        except FileNotFoundError:
            raise ReplicaError(
                f"its metadata does not say it is container {container_id} "
                f"(no .blocks, no .tree; refused)",
                path,
            ) from None
        try:
            tree = tree_from_bytes(traw, source=path)
        except TreeFileError:
            return
        if tree.container_id != container_id:
            raise ReplicaError(
                f"its tree records container {tree.container_id}, not {container_id} (refused)",
                path,
            )
    finally:
        os.close(mfd)
