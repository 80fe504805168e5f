"""The census (`metadata_only`): a replica's tree without reading its data.

Each replica's tree is its stored `.tree` when that tree still describes the replica's block
metadata, else the tree rebuilt from the checksums recorded there (what the client wrote):
exactly the tree a data scan builds when every chunk matches (merkle.replica.verify builds the
observations, `_recorded_block`, and merges them into the stored tree as a scan does).

When is a stored tree "older than the metadata"? Apache Ozone never compares the two by time:
its datanode writes the `.tree` and the block metadata in separate steps (block deletion
records the tombstone in the tree first, then removes the row; a scan or a reconciliation
writes the tree, then the DB's #DATACHECKSUM, which block deletion never updates), rewrites the
`.container` after every scan (dataScanTimestamp), and its scanners decide when to scan by
the last scan's time alone (ContainerScanHelper). What it does decide from the tree is
whether one was ever built: a tree without a container value (only tombstones, written by
block deletion before any scan) counts as none, and the container's tree is then built from
its block metadata (ContainerChecksumTreeManager.hasDataChecksum,
KeyValueHandler.updateAndGetContainerChecksumFromMetadata). Every later change of the block
metadata (a reconciliation adding blocks or chunks, a row lost) shows in the content: so a
stored tree is trusted when it has a container value, its values add up, and its live blocks
and chunks are those of the rebuilt tree, each chunk it calls healthy with the recorded
length and value; a chunk it calls unhealthy (the datanode's own scan found it corrupt or
short) keeps its observed value: that observation is why the stored tree is worth reading.

The rebuilt tree follows the data scan (Ozone's KeyValueContainerCheck), not Ozone's own
tree-from-metadata at container close: that one also keeps blocks without chunks and chunks
of checksum type NONE, which its scanner leaves out, so a replica's value changes on its first
scan. A stored tree holding them is rebuilt here (TREE_STALE says which block or chunk), so
that replicas compare alike whichever of the two wrote their trees.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from merkle.replica.results import TREE_FROM_METADATA, TREE_STALE, ScanError
from merkle.trees.merge import merge
from merkle.trees.model import ContainerTree

__all__ = ["NO_DATA_READ", "census_tree", "stale_reason"]

#: What a pass that reads no data compared (by trees_only): its summary, text and JSON.
NO_DATA_READ = {
    False: "compared from recorded checksums (--metadata-only, the census: the block "
    "metadata's checksums and the stored .tree), not verified against the data",
    True: "compared from recorded checksums (--trees-only: the stored .tree files), not "
    "verified against the data",
}

FROM_METADATA = (
    "built from the checksums recorded in the block metadata, no data read: the "
    "replica's tree if every chunk matches"
)


def _live_chunks(tree: ContainerTree) -> Tuple[np.ndarray, np.ndarray]:
    """(block ID of every chunk row of a live block, those rows)."""
    live = np.repeat(~tree.block_deleted, np.diff(tree.block_chunk_start))
    return tree.chunk_block_id[live], np.flatnonzero(live)


def stale_reason(stored: ContainerTree, rebuilt: ContainerTree) -> Optional[str]:
    """Why `stored` does not describe the block metadata that `rebuilt` (merge(stored, the
    tree of the recorded checksums)) was built from, in one line; None when it does (the
    module docstring gives the rule)."""
    if stored.data_checksum is None:
        return (
            "it holds no container value (never built from the data or the block "
            "metadata: Ozone counts it as no tree)"
        )
    problems = stored.inconsistencies()
    if problems:
        return f"its values do not add up ({problems[0]})"
    s_ids = stored.block_id[~stored.block_deleted]
    r_ids = rebuilt.block_id[~rebuilt.block_deleted]
    extra = np.setdiff1d(r_ids, s_ids)
    if extra.size:
        return f"block {int(extra[0])} recorded in the block metadata is not in it" + (
            f" ({extra.size} blocks)" if extra.size > 1 else ""
        )
    gone = np.setdiff1d(s_ids, r_ids)
    if gone.size:
        # no row (lost, or removed without a tombstone), or a row whose chunks a data scan
        # does not read (none, or type NONE only: Ozone's tree built from metadata at close
        # keeps such a block, its scanner's tree does not)
        return (
            f"its block {int(gone[0])} is not one a data scan reads (no block metadata "
            f"row, or no chunk with checksums) and holds no tombstone"
            + (f" ({gone.size} blocks)" if gone.size > 1 else "")
        )
    s_blocks, s_rows = _live_chunks(stored)
    r_blocks, r_rows = _live_chunks(rebuilt)
    s_off, r_off = stored.chunk_offset[s_rows], rebuilt.chunk_offset[r_rows]
    if (
        s_rows.size != r_rows.size
        or bool(np.any(s_blocks != r_blocks))
        or bool(np.any(s_off != r_off))
    ):
        return _first_chunk_difference(s_blocks, s_off, r_blocks, r_off)
    healthy = stored.chunk_matches[s_rows]
    differs = healthy & (
        (stored.chunk_length[s_rows] != rebuilt.chunk_length[r_rows])
        | (stored.chunk_value[s_rows] != rebuilt.chunk_value[r_rows])
    )
    if bool(np.any(differs)):
        i = int(np.flatnonzero(differs)[0])
        return (
            f"its healthy chunk at block {int(s_blocks[i])} offset {int(s_off[i])} differs "
            f"from the recorded one (length or checksums)"
        )
    return None


def _first_chunk_difference(
    s_blocks: np.ndarray, s_off: np.ndarray, r_blocks: np.ndarray, r_off: np.ndarray
) -> str:
    stored = set(zip(s_blocks.tolist(), s_off.tolist()))
    recorded = set(zip(r_blocks.tolist(), r_off.tolist()))
    missing = sorted(recorded - stored)
    if missing:
        b, o = missing[0]
        return f"the chunk at block {b} offset {o} recorded in the block metadata is not in it"
    b, o = sorted(stored - recorded)[0]
    return (
        f"its chunk at block {b} offset {o} is not one a data scan reads (not in the "
        f"block metadata, or of checksum type NONE)"
    )


def census_tree(
    stored: Optional[ContainerTree], recorded: ContainerTree, have_meta: bool
) -> Tuple[ContainerTree, List[ScanError]]:
    """The census's tree of one replica and the findings that say where it came from.

    `stored`: its `.tree` as read (None when missing or unusable: the read's own finding is
    reported by the caller); `recorded`: the tree of the recorded checksums (the scanner's
    tree when every chunk matches); `have_meta`: whether the block metadata could be read (if
    not, its finding says so, and the tree is what a data scan gives: the stored tombstones
    alone). The stored tree when it describes the metadata (stale_reason), else
    merge(stored, recorded) with TREE_STALE (why) and TREE_FROM_METADATA."""
    rebuilt = merge(stored, recorded)
    if not have_meta:
        return rebuilt, []
    notes: List[ScanError] = []
    if stored is not None:
        why = stale_reason(stored, rebuilt)
        if why is None:
            return stored, []
        notes.append(ScanError(TREE_STALE, detail=f"the .tree is not trusted: {why}"))
    notes.append(ScanError(TREE_FROM_METADATA, detail=FROM_METADATA))
    return rebuilt, notes
