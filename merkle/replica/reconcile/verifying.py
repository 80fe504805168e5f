"""Verifying after a repair: what is still wrong once every peer has been tried, and why."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from merkle.replica.blocks import NONE, ContainerMeta
from merkle.replica.reconcile.results import Problem
from merkle.trees.model import ContainerTree


def _remaining(
    tree: ContainerTree,
    meta: Optional[ContainerMeta],
    unrecoverable: Dict[Tuple[int, int], List[str]],
    failed: Dict[Tuple[int, int], str],
) -> List[Problem]:
    """What is still wrong after every peer: recorded chunks absent or unhealthy in the
    tree, and chunks whose healthy copies differ."""
    out: List[Problem] = []
    seen = set()
    for (b, o), peers in sorted(unrecoverable.items()):
        out.append(
            Problem(b, o, "healthy copies differ (write-path divergence): " + ", ".join(peers))
        )
        seen.add((b, o))
    cbid = tree.chunk_block_id
    rows = {
        (int(b), int(o)): bool(m) for b, o, m in zip(cbid, tree.chunk_offset, tree.chunk_matches)
    }
    for b, o, m in zip(cbid.tolist(), tree.chunk_offset.tolist(), tree.chunk_matches.tolist()):
        if not m and (b, o) not in seen:
            why = failed.get((b, o))
            out.append(
                Problem(
                    b,
                    o,
                    "unhealthy and no readable peer has a healthy copy"
                    + (f" ({why})" if why else ""),
                )
            )
            seen.add((b, o))
    for (b, o), why in sorted(failed.items()):  # pulls refused or failed, never repaired
        if (b, o) not in seen and not rows.get((b, o), False):
            out.append(Problem(b, o, f"not repaired: {why}"))
            seen.add((b, o))
    if meta is not None:
        for block in meta.sorted_blocks():
            i = tree.block_index(block.block_id)
            if i >= 0 and bool(tree.block_deleted[i]):
                continue
            for c in block.chunks:
                if c.checksum_type == NONE:
                    continue  # never in the scanner's tree (Ozone skips them)
                key = (block.block_id, c.offset)
                if key not in rows and key not in seen and c.length:
                    out.append(
                        Problem(
                            block.block_id,
                            c.offset,
                            "recorded chunk still missing: no readable peer "
                            "supplied it" + (f" ({failed[key]})" if key in failed else ""),
                        )
                    )
                    seen.add(key)
    return out
