"""Combining trees: Ozone's stored+scanned merge, and the tree a repair from a peer produces.

merge(stored, scanned) - a freshly scanned tree merged into the stored one (HDDS-10239):
  - a tombstone always beats a live entry (whichever tree holds it);
  - otherwise the newer (scanned) entry wins, tombstone against tombstone included;
  - a block only in the stored tree survives only as a tombstone (a live one the scan did not
    find is gone: its data file is missing).
  Chunks therefore only ever come from the scanned tree. The result's container value is
  recomputed (tombstones included) when the scanned tree has one, else left unset.
  Properties: idempotent (merge(t, t) == t) and associative; commutative only on the set of
  tombstoned IDs (newer wins otherwise), as Ozone's rule says.

apply_repair(ours, report) - what `ours` looks like after pulling what a DiffReport selected:
  peer chunks written at their offsets as Ozone's reconciler writes them (a run stops at the
  first chunk that does not start exactly where the previous local chunk ends: block files
  have no holes; chunk_follows), then the tree rebuilt; peer tombstones adopted.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from merkle.trees.diff import ContainerIDMismatchError, DiffReport, diff
from merkle.trees.model import ContainerTree

__all__ = ["apply_repair", "chunk_follows", "merge", "reconcile"]

_I64 = np.int64


def _rows_of(tree: ContainerTree, block_rows: np.ndarray) -> np.ndarray:
    """Chunk rows of the given block rows, in order."""
    if block_rows.size == 0:
        return np.zeros(0, dtype=_I64)
    s = tree.block_chunk_start
    counts = s[block_rows + 1] - s[block_rows]
    if int(counts.sum()) == 0:
        return np.zeros(0, dtype=_I64)
    base = np.repeat(s[block_rows] - np.cumsum(np.concatenate(([0], counts[:-1]))), counts)
    return base + np.arange(int(counts.sum()), dtype=_I64)


def _assemble(
    container_id: int,
    ids: np.ndarray,
    values: np.ndarray,
    deleted: np.ndarray,
    src: ContainerTree,
    src_rows: np.ndarray,
    row_block: np.ndarray,
    generated: bool,
) -> ContainerTree:
    """A tree from block columns and chunk rows of `src` assigned to result blocks."""
    counts = (
        np.bincount(row_block, minlength=ids.shape[0])
        if row_block.size
        else np.zeros(ids.shape[0], dtype=_I64)
    )
    start = np.zeros(ids.shape[0] + 1, dtype=_I64)
    np.cumsum(counts, out=start[1:])
    tree = ContainerTree(
        container_id,
        block_id=ids,
        block_value=values,
        block_deleted=deleted,
        block_chunk_start=start,
        chunk_offset=src.chunk_offset[src_rows],
        chunk_length=src.chunk_length[src_rows],
        chunk_value=src.chunk_value[src_rows],
        chunk_matches=src.chunk_matches[src_rows],
        validate=False,
    )
    if generated:
        tree.data_checksum = tree.computed_checksum()
    return tree


def merge(stored: Optional[ContainerTree], scanned: ContainerTree) -> ContainerTree:
    """Merge a freshly scanned tree into the stored one (see the module docstring)."""
    if stored is None:
        return scanned
    if stored.container_id != scanned.container_id:
        raise ContainerIDMismatchError(stored.container_id, scanned.container_id, "merge")
    s_ids, n_ids = stored.block_id, scanned.block_id
    tomb = stored.block_deleted
    # Stored tombstones override the scanned tree's live entries and fill in absent IDs.
    t_ids = s_ids[tomb]
    pos = np.searchsorted(n_ids, t_ids)
    pos_c = np.minimum(pos, max(n_ids.shape[0] - 1, 0))
    in_scanned = (
        (pos < n_ids.shape[0]) & (n_ids[pos_c] == t_ids)
        if n_ids.size
        else np.zeros(t_ids.shape[0], dtype=bool)
    )
    override = np.zeros(n_ids.shape[0], dtype=bool)
    ov_rows = pos[in_scanned]
    ov_src = np.flatnonzero(tomb)[in_scanned]
    keep_stored = ~scanned.block_deleted[ov_rows]  # tombstone vs tombstone: newer wins
    override[ov_rows[keep_stored]] = True
    add_src = np.flatnonzero(tomb)[~in_scanned]

    ids = np.concatenate((n_ids, s_ids[add_src]))
    values = np.concatenate((scanned.block_value, stored.block_value[add_src]))
    deleted = np.concatenate((scanned.block_deleted, np.ones(add_src.shape[0], dtype=bool)))
    values[ov_rows[keep_stored]] = stored.block_value[ov_src[keep_stored]]
    deleted[ov_rows[keep_stored]] = True
    order = np.argsort(ids, kind="stable")
    ids, values, deleted = ids[order], values[order], deleted[order]
    rank = np.empty(order.shape[0], dtype=_I64)
    rank[order] = np.arange(order.shape[0], dtype=_I64)
    # Chunks: the scanned tree's, for blocks that stay live.
    live_rows = np.flatnonzero(~override & ~scanned.block_deleted)
    rows = _rows_of(scanned, live_rows)
    row_block = rank[np.repeat(live_rows, np.diff(scanned.block_chunk_start)[live_rows])]
    merged = _assemble(
        scanned.container_id,
        ids,
        values,
        deleted,
        scanned,
        rows,
        row_block,
        scanned.data_checksum is not None,
    )
    merged.unknown_fields = stored.unknown_fields  # Ozone rewrites from the stored message
    return merged


def chunk_follows(local: Dict[int, int], offset: int) -> bool:
    """Ozone's contiguity rule for a pulled chunk (KeyValueHandler.previousChunkPresent): it is
    written only at offset 0 or where the previous local chunk ({offset: length}, the chunks
    recorded or pulled so far) ends exactly at its offset: block files have no holes."""
    if offset == 0:
        return True
    prev = max((o for o in local if o < offset), default=None)
    return prev is not None and prev + local[prev] == offset


def _pulled_rows(report: DiffReport) -> np.ndarray:
    """The peer chunk rows a repair writes, in Ozone's order: each missing block's chunks,
    then each block's missing chunks, then its corrupt chunks, every run in offset order and
    stopped at its first chunk that does not follow a local one (chunk_follows). Unhealthy
    chunks of a missing block are checked, then skipped (never pulled), as Ozone does."""
    ours, peer = report.ours, report.peer
    cb_peer = peer.chunk_block_id
    local: Dict[int, Dict[int, int]] = {}

    def held(block: int) -> Dict[int, int]:
        if block not in local:
            i = ours.block_index(block)
            a, b = (
                (int(ours.block_chunk_start[i]), int(ours.block_chunk_start[i + 1]))
                if i >= 0
                else (0, 0)
            )
            local[block] = dict(
                zip(ours.chunk_offset[a:b].tolist(), ours.chunk_length[a:b].tolist())
            )
        return local[block]

    def runs(rows: np.ndarray) -> List[np.ndarray]:
        if rows.size == 0:
            return []
        rows = np.sort(rows)  # peer rows are in (block, offset) order
        cuts = np.flatnonzero(np.diff(cb_peer[rows])) + 1
        return np.split(rows, cuts)

    keep: List[int] = []
    for run in (
        runs(_rows_of(peer, report.missing_block_rows))
        + runs(report.missing_chunk_rows)
        + runs(report.corrupt_chunk_rows)
    ):
        loc = held(int(cb_peer[run[0]]))
        for r in run.tolist():
            off = int(peer.chunk_offset[r])
            if not chunk_follows(loc, off):
                break
            if bool(peer.chunk_matches[r]):  # verified reads only
                loc[off] = int(peer.chunk_length[r])
                keep.append(r)
    return np.array(keep, dtype=_I64)


def apply_repair(report: DiffReport) -> ContainerTree:
    """The tree `report.ours` has after pulling from `report.peer` what the report selected.

    Missing blocks and chunks are written from the peer's healthy chunks in offset order, and
    corrupt chunks overwritten, each run stopping at its first gap (Ozone's contiguity rule,
    see _pulled_rows); peer tombstones adopted.
    Local data is never deleted or shortened. Block and container values are rebuilt.
    """
    ours, peer = report.ours, report.peer
    if not report.needs_repair:
        return ours
    cb_peer = peer.chunk_block_id
    # Per-chunk table of ours, plus the pulled chunks; later entries replace earlier ones.
    pulled_rows = _pulled_rows(report)
    blocks = np.concatenate((ours.chunk_block_id, cb_peer[pulled_rows]))
    offs = np.concatenate((ours.chunk_offset, peer.chunk_offset[pulled_rows]))
    lens = np.concatenate((ours.chunk_length, peer.chunk_length[pulled_rows]))
    vals = np.concatenate((ours.chunk_value, peer.chunk_value[pulled_rows]))
    match = np.concatenate((ours.chunk_matches, np.ones(pulled_rows.shape[0], dtype=bool)))
    tombstones = {
        int(b): int(v) for b, v, d in zip(ours.block_id, ours.block_value, ours.block_deleted) if d
    }
    for r in report.deleted_block_rows:
        tombstones[int(peer.block_id[r])] = int(peer.block_value[r])
    empty = [
        int(b)
        for b, s, e, d in zip(
            ours.block_id,
            ours.block_chunk_start[:-1],
            ours.block_chunk_start[1:],
            ours.block_deleted,
        )
        if s == e and not d
    ]
    # A missing block with no chunks at all is reproduced by creating it.
    mb = report.missing_block_rows
    cs = peer.block_chunk_start
    empty += [int(b) for b in peer.block_id[mb[cs[mb + 1] == cs[mb]]]]
    fixed = ContainerTree.from_columns(
        ours.container_id,
        blocks,
        offs,
        lens,
        leaf=vals,
        checksum_matches=match,
        deleted_blocks=tombstones or None,
        empty_blocks=empty or None,
    )
    fixed.unknown_fields = ours.unknown_fields
    return fixed


def reconcile(ours: ContainerTree, *peers: ContainerTree) -> ContainerTree:
    """One reconciliation of `ours` with each peer in turn (diff, repair, rebuild)."""
    for peer in peers:
        ours = apply_repair(diff(ours, peer))
    return ours
