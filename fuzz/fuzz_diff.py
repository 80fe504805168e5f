"""Differential fuzz target of the tree diff: the native one-sided merge (ozt_diff) against
Ozone's rules (ContainerChecksumTreeManager.diff, pinned by tests/data/ozone-golden/) written
out as plain Python dict lookups.

Inputs become two small trees over a few block IDs, offsets and values, so that equal and
different values, healthy and unhealthy chunks, tombstones on either side and blocks or
chunks present on one side only all occur often. Why: the reconciler trusts the diff to say
what to pull; a wrong row there is a wrong repair or a missed one.
"""

from __future__ import annotations

from typing import Dict, List, Set, Tuple

from merkle.trees.diff import ContainerIDMismatchError, diff
from merkle.trees.model import ContainerTree

from fuzz.provider import Provider


def _rows(p: Provider) -> List[Tuple[int, int, int, bool]]:
    return [
        (p.int(-1, 6), p.int(0, 3) * 4096, p.int(1, 3) if p.bool() else p.u32(), p.int(0, 3) != 0)
        for _ in range(p.int(0, 14))
    ]


def _edited(
    p: Provider, rows: List[Tuple[int, int, int, bool]]
) -> List[Tuple[int, int, int, bool]]:
    """The peer as a replica of ours that diverged: rows kept, dropped, changed in value or
    health, plus a few new ones (what corruption, loss and repair produce)."""
    out = []
    for b, o, v, ok in rows:
        action = p.int(0, 7)
        if action == 0:
            continue
        if action == 1:
            v = p.int(1, 3)
        elif action == 2:
            ok = not ok
        elif action == 3:
            v, ok = p.int(1, 3), p.bool()
        out.append((b, o, v, ok))
    return out + _rows(p)[: p.int(0, 3)]


def _tree(p: Provider, rows: List[Tuple[int, int, int, bool]]) -> ContainerTree:
    tombs = {p.int(-1, 6): p.int(0, 3) for _ in range(p.int(0, 2))}
    empty = [b for b in [p.int(-1, 6) for _ in range(p.int(0, 1))] if b not in tombs]
    return ContainerTree.from_columns(
        1,
        [r[0] for r in rows],
        [r[1] for r in rows],
        [4096] * len(rows),
        leaf=[r[2] for r in rows],
        checksum_matches=[r[3] for r in rows],
        deleted_blocks=tombs or None,
        empty_blocks=empty or None,
        data_checksum=p.int(0, 7) != 0,
    )


def reference_diff(ours: ContainerTree, peer: ContainerTree) -> Dict[str, object]:
    out: Dict[str, object] = {
        "missing_blocks": set(),
        "deleted": set(),
        "missing_chunks": set(),
        "corrupt": set(),
        "unrecoverable": set(),
        "filtered": 0,
    }
    if (ours.data_checksum or 0) == (peer.data_checksum or 0):  # unset reads as 0
        return out
    mine = {b.block_id: b for b in ours.blocks()}
    filtered = 0
    for pb in peer.blocks():
        a = mine.get(pb.block_id)
        if a is None:
            key = "deleted" if pb.deleted else "missing_blocks"
            out[key].add(pb.block_id)  # type: ignore[attr-defined]
        elif a.value == pb.value:
            continue  # a block on both sides is examined only when the values differ
        elif a.deleted:
            if pb.deleted and a.value < pb.value:  # both tombstones: the larger wins
                out["deleted"].add(pb.block_id)  # type: ignore[attr-defined]
        elif pb.deleted:
            out["deleted"].add(pb.block_id)  # type: ignore[attr-defined]
        else:
            ac = {c.offset: c for c in a.chunks}
            for pc in pb.chunks:
                c = ac.get(pc.offset)
                key2 = (pb.block_id, pc.offset)
                if c is None or (c.value != pc.value and not c.checksum_matches):
                    if pc.checksum_matches:
                        kind = "missing_chunks" if c is None else "corrupt"
                        out[kind].add(key2)  # type: ignore[attr-defined]
                    else:
                        filtered += 1  # reportChunkIfHealthy: dropped and counted
                elif c.value != pc.value and pc.checksum_matches:
                    out["unrecoverable"].add(key2)  # type: ignore[attr-defined]
    out["filtered"] = filtered
    return out


def _pairs(d: Dict[int, object]) -> Set[Tuple[int, int]]:
    return {(int(b), int(o)) for b, offs in d.items() for o in offs}  # type: ignore[attr-defined]


def target_diff(data: bytes) -> None:
    p = Provider(data)
    rows = _rows(p)
    ours = _tree(p, rows)
    kind = p.int(0, 5)
    if kind == 0:
        peer = ours.replace()
    elif kind == 5:  # a different container: Ozone's CONTAINER_ID_MISMATCH
        try:
            diff(ours, ours.replace(container_id=2))
        except ContainerIDMismatchError:
            return
        raise AssertionError("diff of different containers did not raise")
    else:
        peer = _tree(p, _edited(p, rows) if kind >= 2 else _rows(p))
    r = diff(ours, peer)
    got = {
        "missing_blocks": {int(b) for b in r.missing_blocks},
        "deleted": {int(b) for b in r.diverged_deleted_blocks},
        "missing_chunks": _pairs(r.missing_chunks),
        "corrupt": _pairs(r.corrupt_chunks),
        "unrecoverable": _pairs(r.unrecoverable_chunks),
        "filtered": r.unhealthy_chunks_filtered,
    }
    want = reference_diff(ours, peer)
    assert got == want, (
        f"diff != reference:\n ours={ours.to_dict()}\n peer={peer.to_dict()}\n"
        f" got={got}\n want={want}"
    )
    # row arrays must point at what the properties report (the reconciler uses the rows)
    for row, ours_row in zip(r.corrupt_chunk_rows, r.corrupt_chunk_rows_ours):
        assert peer.chunk_offset[row] == ours.chunk_offset[ours_row]


def seeds_diff() -> List[bytes]:
    import random

    rng = random.Random(6)
    return [rng.randbytes(rng.randrange(40, 400)) for _ in range(16)]
