"""Planning a repair: which healthy peer chunks the diff selects, in which runs, which version
the majority of peers hold, and the tree our replica will have afterwards."""

from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from merkle.replica.reconcile.peers import _Peer
from merkle.replica.reconcile.results import ChunkCopy
from merkle.trees.diff import DiffReport
from merkle.trees.model import ContainerTree

# ---- planning ----------------------------------------------------------------------------


def _rows_of_block(tree: ContainerTree, row: int) -> range:
    return range(int(tree.block_chunk_start[row]), int(tree.block_chunk_start[row + 1]))


def _selected(report: DiffReport) -> Dict[int, List[ChunkCopy]]:
    """Healthy peer chunks the diff selected, {block: [copies by offset]}."""
    peer = report.peer
    out: Dict[int, Dict[int, ChunkCopy]] = {}
    cbid = peer.chunk_block_id

    def add(row: int, reason: str) -> None:
        if not bool(peer.chunk_matches[row]):
            return  # only healthy copies are pulled (the diff drops unhealthy ones too)
        b = int(cbid[row])
        off = int(peer.chunk_offset[row])
        out.setdefault(b, {})[off] = ChunkCopy(
            b, off, int(peer.chunk_length[row]), reason, int(peer.chunk_value[row])
        )

    for brow in report.missing_block_rows:
        for r in _rows_of_block(peer, int(brow)):
            add(r, "missing_block")
    for r in report.missing_chunk_rows:
        add(int(r), "missing_chunk")
    for r in report.corrupt_chunk_rows:
        add(int(r), "corrupt_chunk")
    return {b: [d[o] for o in sorted(d)] for b, d in sorted(out.items())}


def _runs(copies: List[ChunkCopy]) -> List[List[ChunkCopy]]:
    """A block's copies as Ozone pulls them: its missing-block or missing-chunk list, then its
    corrupt-chunk list, each in offset order and each stopping at its own first gap."""
    first = [c for c in copies if c.reason != "corrupt_chunk"]
    corrupt = [c for c in copies if c.reason == "corrupt_chunk"]
    return [run for run in (first, corrupt) if run]


def _empty_missing_blocks(report: DiffReport) -> List[int]:
    peer = report.peer
    cs = peer.block_chunk_start
    return [int(peer.block_id[r]) for r in report.missing_block_rows if cs[r + 1] == cs[r]]


# ---- the tree after a repair -------------------------------------------------------------


def _rebuilt_tree(
    ours: ContainerTree,
    written: Sequence[ChunkCopy],
    created: Sequence[int],
    adopted: Dict[int, int],
) -> ContainerTree:
    """`ours` with the written chunks (healthy, replacing what they overlap), created empty
    blocks and adopted tombstones: what a fresh scan + merge would give afterwards."""
    by_block: Dict[int, List[Tuple[int, int, int, bool]]] = {}
    tomb: Dict[int, int] = {}
    live: List[int] = []
    cbid = ours.chunk_block_id
    for i in range(ours.n_blocks):
        b = int(ours.block_id[i])
        if bool(ours.block_deleted[i]):
            tomb[b] = int(ours.block_value[i])
        else:
            live.append(b)
    for b, o, n, v, m in zip(
        cbid.tolist(),
        ours.chunk_offset.tolist(),
        ours.chunk_length.tolist(),
        ours.chunk_value.tolist(),
        ours.chunk_matches.tolist(),
    ):
        by_block.setdefault(b, []).append((o, n, v, m))
    for c in written:
        rows = by_block.setdefault(c.block_id, [])
        end = c.offset + c.length
        rows[:] = [
            r for r in rows if not (r[0] == c.offset or (r[0] < end and c.offset < r[0] + r[1]))
        ]
        rows.append((c.offset, c.length, c.peer_value, True))
        live.append(c.block_id)
    live.extend(created)
    tomb.update(adopted)
    bids: List[int] = []
    offs: List[int] = []
    lens: List[int] = []
    vals: List[int] = []
    matches: List[bool] = []
    for b, rows in by_block.items():
        for o, n, v, m in rows:
            bids.append(b)
            offs.append(o)
            lens.append(n)
            vals.append(v)
            matches.append(m)
    rebuilt = ContainerTree.from_columns(
        ours.container_id,
        bids,
        offs,
        lens,
        leaf=np.array(vals, dtype=np.int64),
        checksum_matches=np.array(matches, dtype=bool),
        deleted_blocks=tomb or None,
        empty_blocks=sorted(set(live)) or None,
    )
    rebuilt.unknown_fields = ours.unknown_fields  # kept on every rewrite, as Ozone does
    return rebuilt


def _majority(peers: Sequence[_Peer]) -> Callable[[int, int], Optional[Tuple[int, int]]]:
    """vote(block, offset): the (length, value) more than half of the voters holding a
    healthy copy of that chunk agree on, or None. A voter is a peer's `voter` (its datanode
    under --all/--report, else the replica): several peers of one voter cast one vote when
    their copies agree and none when they disagree (module docstring, "Trust")."""
    cache: Dict[Tuple[int, int], Optional[Tuple[int, int]]] = {}

    def vote(block_id: int, offset: int) -> Optional[Tuple[int, int]]:
        key = (block_id, offset)
        if key in cache:
            return cache[key]
        ballots: Dict[str, set] = {}
        for p in peers:
            t = p.tree
            i = t.block_index(block_id)
            if i < 0 or bool(t.block_deleted[i]):
                continue
            a, b = int(t.block_chunk_start[i]), int(t.block_chunk_start[i + 1])
            offs = t.chunk_offset[a:b]
            j = int(np.searchsorted(offs, offset))
            if j < b - a and int(offs[j]) == offset and bool(t.chunk_matches[a + j]):
                ballots.setdefault(p.voter or p.name, set()).add(
                    (int(t.chunk_length[a + j]), int(t.chunk_value[a + j]))
                )
        votes: Counter = Counter(next(iter(v)) for v in ballots.values() if len(v) == 1)
        abstained = sum(1 for v in ballots.values() if len(v) > 1)
        winner: Optional[Tuple[int, int]] = None
        if votes:
            ((best, n),) = votes.most_common(1)
            if 2 * n > sum(votes.values()) + abstained:
                winner = best
        cache[key] = winner
        return winner

    return vote
