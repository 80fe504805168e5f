"""Ozone's one-sided tree diff (what must *we* pull from *this peer*?) and a many-replica view.

Rules (HDDS-10239, as ContainerChecksumTreeManager.diff applies them; pinned by golden data
written by Ozone's own code): different container IDs -> ContainerIDMismatchError. Equal
container values, an unset value counting as 0 -> nothing (O(1)). Otherwise blocks are merged
by ID, and a block present on both sides is examined only when the two block values differ:
- only in ours: ignored (the peer pulls it when it reconciles with us);
- only in peer: a tombstone -> diverged deleted block (adopt it); live -> missing block;
- ours live, peer tombstone (values differ) -> diverged deleted block (adopt the tombstone; no
  data deleted); with equal values ours stays live;
- both tombstones -> adopt the peer's if larger (signed), so replicas converge;
- ours tombstone, peer live -> ignored (the peer adopts ours);
- both live -> chunks merged by offset (lengths never compared):
  - only in peer: healthy -> missing chunk; unhealthy -> not pulled, counted in
    `unhealthy_chunks_filtered` (Ozone's numUnhealthyChunksFiltered);
  - same offset, values differ, ours unhealthy: peer healthy -> corrupt chunk; peer unhealthy
    -> counted in `unhealthy_chunks_filtered`;
  - same offset, values differ, ours healthy: no repair. Both healthy is a write-path
    divergence, listed (beyond Ozone's report) as unrecoverable for operators.
`unhealthy_chunks_filtered` > 0 means the round cannot cover everything: Ozone then does not
advance the container's BCSID. The merge runs natively on the sorted columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from merkle import _native
from merkle.trees.model import ContainerTree
from merkle.trees.ozone import format_checksum

__all__ = ["ContainerIDMismatchError", "DiffReport", "ReplicaReport", "compare_replicas", "diff"]

_EMPTY = np.zeros(0, dtype=np.int64)


class ContainerIDMismatchError(ValueError):
    """Two trees of different containers compared or merged (Ozone: CONTAINER_ID_MISMATCH)."""

    def __init__(self, ours: int, peer: int, what: str = "diff") -> None:
        self.ours = ours
        self.peer = peer
        super().__init__(f"cannot {what} trees of different containers: {ours} and {peer}")


def _side(t: ContainerTree) -> Tuple[np.ndarray, ...]:
    return (
        t.block_id,
        t.block_value,
        t.block_deleted.view(np.uint8),
        t.block_chunk_start,
        t.chunk_offset,
        t.chunk_value,
        t.chunk_matches.view(np.uint8),
    )


def _per_block(tree: ContainerTree, rows: np.ndarray) -> Dict[int, np.ndarray]:
    """Chunk rows of `tree` grouped as {block ID: offsets}."""
    if rows.shape[0] == 0:
        return {}
    blocks = tree.block_id[np.searchsorted(tree.block_chunk_start, rows, side="right") - 1]
    offsets = tree.chunk_offset[rows]
    out: Dict[int, np.ndarray] = {}
    cuts = np.flatnonzero(np.diff(blocks)) + 1
    for grp_b, grp_o in zip(np.split(blocks, cuts), np.split(offsets, cuts)):
        out[int(grp_b[0])] = grp_o
    return out


@dataclass
class DiffReport:
    """What `ours` must pull from `peer`. Row arrays index the peer's tree (and ours for
    *_ours); the properties give block IDs and per-block chunk offsets."""

    ours: ContainerTree
    peer: ContainerTree
    missing_block_rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    deleted_block_rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    missing_chunk_rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    corrupt_chunk_rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    corrupt_chunk_rows_ours: np.ndarray = field(default_factory=lambda: _EMPTY)
    unrecoverable_chunk_rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    unrecoverable_chunk_rows_ours: np.ndarray = field(default_factory=lambda: _EMPTY)
    #: Ozone's numUnhealthyChunksFiltered: peer chunks not pulled because the peer holds them
    #: unhealthy (only in the peer, or where ours is unhealthy too). > 0: the round is partial.
    unhealthy_chunks_filtered: int = 0
    roots_equal: bool = False

    @property
    def missing_blocks(self) -> np.ndarray:
        """IDs of live peer blocks we do not have."""
        return self.peer.block_id[self.missing_block_rows]

    @property
    def diverged_deleted_blocks(self) -> np.ndarray:
        """IDs of peer tombstones we must adopt (tree only; no data is deleted)."""
        return self.peer.block_id[self.deleted_block_rows]

    @property
    def missing_chunks(self) -> Dict[int, np.ndarray]:
        """{block ID: offsets} of healthy peer chunks we lack."""
        return _per_block(self.peer, self.missing_chunk_rows)

    @property
    def corrupt_chunks(self) -> Dict[int, np.ndarray]:
        """{block ID: offsets} where ours is unhealthy, the peer's healthy, values differ."""
        return _per_block(self.peer, self.corrupt_chunk_rows)

    @property
    def unrecoverable_chunks(self) -> Dict[int, np.ndarray]:
        """{block ID: offsets} where both are healthy but differ: no repair; for operators."""
        return _per_block(self.peer, self.unrecoverable_chunk_rows)

    @property
    def needs_repair(self) -> bool:
        return bool(
            self.missing_block_rows.size
            or self.deleted_block_rows.size
            or self.missing_chunk_rows.size
            or self.corrupt_chunk_rows.size
        )

    def counts(self) -> Dict[str, int]:
        return {
            "missing_blocks": int(self.missing_block_rows.size),
            "missing_chunks": int(self.missing_chunk_rows.size),
            "corrupt_chunks": int(self.corrupt_chunk_rows.size),
            "diverged_deleted_blocks": int(self.deleted_block_rows.size),
            "unhealthy_chunks_filtered": int(self.unhealthy_chunks_filtered),
            "unrecoverable_chunks": int(self.unrecoverable_chunk_rows.size),
        }

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready form (values as Ozone prints them)."""

        def chunks(d: Dict[int, np.ndarray]) -> Dict[str, List[int]]:
            return {str(b): [int(o) for o in offs] for b, offs in d.items()}

        ours_v, peer_v = self.ours.data_checksum, self.peer.data_checksum
        return {
            "container_id": self.ours.container_id,
            "ours": None if ours_v is None else format_checksum(ours_v),
            "peer": None if peer_v is None else format_checksum(peer_v),
            "needs_repair": self.needs_repair,
            "counts": self.counts(),
            "missing_blocks": [int(b) for b in self.missing_blocks],
            "missing_chunks": chunks(self.missing_chunks),
            "corrupt_chunks": chunks(self.corrupt_chunks),
            "diverged_deleted_blocks": [int(b) for b in self.diverged_deleted_blocks],
            "unhealthy_chunks_filtered": int(self.unhealthy_chunks_filtered),
            "unrecoverable_chunks": chunks(self.unrecoverable_chunks),
        }

    def __repr__(self) -> str:
        c = self.counts()
        body = ", ".join(f"{k}={v}" for k, v in c.items() if v)
        return f"<DiffReport needs_repair={self.needs_repair}{': ' + body if body else ''}>"


def diff(ours: ContainerTree, peer: ContainerTree) -> DiffReport:
    """What `ours` must pull from `peer` (one-sided; see the module docstring).

    Raises ContainerIDMismatchError for trees of different containers. Equal container values
    (an unset one counting as 0, as in Ozone) return an empty report at once.
    """
    if ours.container_id != peer.container_id:
        raise ContainerIDMismatchError(ours.container_id, peer.container_id)
    if (ours.data_checksum or 0) == (peer.data_checksum or 0):
        return DiffReport(ours, peer, roots_equal=True)
    r = _native._ozt_diff(_side(ours), _side(peer))
    return DiffReport(
        ours,
        peer,
        missing_block_rows=r["missing_blocks"],
        deleted_block_rows=r["deleted_blocks"],
        missing_chunk_rows=r["missing_chunks"],
        corrupt_chunk_rows=r["corrupt_chunks"],
        corrupt_chunk_rows_ours=r["corrupt_chunks_ours"],
        unrecoverable_chunk_rows=r["unrecoverable_chunks"],
        unrecoverable_chunk_rows_ours=r["unrecoverable_chunks_ours"],
        unhealthy_chunks_filtered=int(r["unhealthy_filtered"]),
    )


@dataclass
class ReplicaReport:
    """All replicas of one container compared with each other."""

    names: List[str]
    values: Dict[str, Optional[int]]
    #: {replica: [(peer, report of what it pulls from that peer)]}, peers in the given order,
    #: each report holding only what no earlier peer already supplies.
    plans: Dict[str, List[Tuple[str, DiffReport]]]

    @property
    def match(self) -> bool:
        vals = list(self.values.values())
        return bool(vals) and vals[0] is not None and all(v == vals[0] for v in vals)

    @property
    def groups(self) -> Dict[Optional[int], List[str]]:
        """Replicas grouped by container value (None: no tree generated)."""
        out: Dict[Optional[int], List[str]] = {}
        for n in self.names:
            out.setdefault(self.values[n], []).append(n)
        return out

    def pulls(self, name: str) -> Dict[str, DiffReport]:
        """{peer: report} of the peers `name` must pull something from."""
        return {p: r for p, r in self.plans[name] if r.needs_repair}

    def to_dict(self) -> Dict[str, Any]:
        return {
            "match": self.match,
            "groups": [
                {"data_checksum": None if v is None else format_checksum(v), "replicas": ns}
                for v, ns in self.groups.items()
            ],
            "plans": {n: {p: r.to_dict() for p, r in self.pulls(n).items()} for n in self.names},
        }


def _without(report: DiffReport, taken: Dict[str, set]) -> DiffReport:
    """Drop from report what an earlier peer already supplies; record what this one does."""
    peer = report.peer
    bid = peer.block_id
    cbid = None

    def mask(rows: np.ndarray, key: str, chunk: bool) -> np.ndarray:
        nonlocal cbid
        if rows.size == 0:
            return np.zeros(0, dtype=bool)
        if chunk:
            if cbid is None:
                cbid = peer.chunk_block_id
            keys = list(zip(cbid[rows].tolist(), peer.chunk_offset[rows].tolist()))
        else:
            keys = bid[rows].tolist()
        seen = taken.setdefault(key, set())
        keep = np.array([k not in seen for k in keys], dtype=bool)
        seen.update(keys)
        return keep

    corrupt = mask(report.corrupt_chunk_rows, "corrupt", True)

    return DiffReport(
        report.ours,
        peer,
        missing_block_rows=report.missing_block_rows[
            mask(report.missing_block_rows, "blocks", False)
        ],
        deleted_block_rows=report.deleted_block_rows,
        missing_chunk_rows=report.missing_chunk_rows[
            mask(report.missing_chunk_rows, "chunks", True)
        ],
        corrupt_chunk_rows=report.corrupt_chunk_rows[corrupt],
        corrupt_chunk_rows_ours=report.corrupt_chunk_rows_ours[corrupt],
        unrecoverable_chunk_rows=report.unrecoverable_chunk_rows,
        unrecoverable_chunk_rows_ours=report.unrecoverable_chunk_rows_ours,
        unhealthy_chunks_filtered=report.unhealthy_chunks_filtered,
        roots_equal=report.roots_equal,
    )


def compare_replicas(trees: Mapping[str, ContainerTree]) -> ReplicaReport:
    """Compare every replica of a container: whether they match, groups by value, and for
    each replica what it must pull from whom (peers tried in the mapping's order)."""
    names = list(trees)
    values = {n: trees[n].data_checksum for n in names}
    plans: Dict[str, List[Tuple[str, DiffReport]]] = {}
    for n in names:
        taken: Dict[str, set] = {}
        plans[n] = [(p, _without(diff(trees[n], trees[p]), taken)) for p in names if p != n]
    return ReplicaReport(names, values, plans)
