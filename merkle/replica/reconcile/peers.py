"""The peers of a repair: loading one (its block metadata and tree), and who it is (the same
replica twice, another owner, the datanode whose vote it casts)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from merkle.replica.blocks import ContainerMeta
from merkle.replica.errors import ReplicaError
from merkle.replica.layout import RepairableLayout
from merkle.replica.layouts import layout_of
from merkle.replica.reconcile.results import PathLike
from merkle.replica.scan import NOT_A_REGULAR_FILE, TREE_UNREADABLE, _scan, read_tree_state
from merkle.trees.model import ContainerTree

# ---- peers -------------------------------------------------------------------------------


@dataclass
class _Peer:
    name: str
    files: Any  # LocalReplicaFiles, or an Ozone replica's files (with .paths and close())
    meta: ContainerMeta
    tree: ContainerTree
    #: an Ozone peer's raw block_data values by localID (copied into new rows, offline)
    values: Dict[int, bytes] = field(default_factory=dict)
    #: who casts this peer's vote (its datanode, or the replica itself): see _majority
    voter: str = ""


def _peer_tree(files: Any) -> ContainerTree:
    """The peer's stored tree, or what a read-only scan observes when it has none; raises
    ReplicaError when its `.tree` is unreadable or not a regular file (its tombstones would
    be unknown)."""
    state = read_tree_state(files)
    if state.error is not None and state.error.kind in (TREE_UNREADABLE, NOT_A_REGULAR_FILE):
        raise ReplicaError(f"{state.error.kind}: {state.error.detail}", files.location)
    tree = state.tree
    if tree is None or tree.data_checksum is None:
        # No usable tree: what a scan observes (read-only; the peer's own scanner owns it).
        tree = _scan(files, False, 1, None, None, 1 << 20).tree
    return tree


def _load_peer(layout: RepairableLayout, path: PathLike, container_id: int) -> _Peer:
    """A peer's metadata (read by `layout`, the target's:
    merkle.replica.layout.RepairableLayout.load_peer) and tree; raises ReplicaError/OSError
    when it cannot serve (its block metadata unreadable, corrupt, newer or not a regular
    file; its `.tree` unreadable or not a regular file: its tombstones would be unknown)."""
    files, meta, values = layout.load_peer(os.fspath(path), container_id)
    try:
        tree = _peer_tree(files)
    except BaseException:
        files.close()
        raise
    return _Peer(os.fspath(path), files, meta, tree, values)


def _handed_to_another_user(ours_root: PathLike, peer_root: PathLike) -> str:
    """Why the peer at `peer_root` must not serve the replica at `ours_root`, or "": what a
    repair writes gets this replica's owner, so a replica owned by a user other than root
    and the peer's owner would be handed the peer's data (a root-only replica read by a
    user), as replicate refuses. (Both directories are already open: neither is a link.)"""
    ours = os.stat(ours_root).st_uid
    theirs = os.stat(peer_root).st_uid
    if ours in (0, theirs):
        return ""
    return (
        f"the peer belongs to uid {theirs} and this replica to uid {ours}: its data "
        f"would be handed to another user (refused)"
    )


def _identity(path: PathLike) -> Optional[Tuple[int, int]]:
    """(st_dev, st_ino) of a replica directory (links followed: a link to a replica is that
    replica), None if it cannot be stat'ed (the peer is then reported unreadable)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def datanode_of(path: PathLike) -> str:
    """The datanode a replica lives on, for the vote, as its layout says
    (merkle.replica.layout.Layout.datanode_of): an Ozone volume's datanodeUuid (else the
    directory above the volume), or for the crcmerkle layout the directory above the
    replica's volume (<datanode>/<volume>/<containerID>, as the Spark scan names it)."""
    p = os.path.abspath(os.fspath(path))
    return layout_of(p).datanode_of(p)
