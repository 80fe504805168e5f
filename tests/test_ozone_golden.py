"""Ozone-exact, proved by Ozone's own code: every case of tests/data/ozone-golden/.

Those files were written by Apache Ozone's Java (ContainerMerkleTreeWriter,
ContainerChecksumTreeManager, ContainerDiffReport, run unmodified; the commit is in
manifest.json): `.tree` bytes, every value, every diff answer and every merge result. Each case
is checked five ways: read values, rewrite bytes, build from scratch with the public builders
(TreeBuilder and ContainerTree.from_columns) and write bytes, diff answers (every field, the
exception case included), merge values and bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from merkle.trees import ozone
from merkle.trees.diff import ContainerIDMismatchError, diff
from merkle.trees.merge import merge
from merkle.trees.model import ContainerTree, TreeBuilder

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "data" / "ozone-golden"
#: Where the project's CI keeps the shared original (beside the clone); optional.
SHARED = HERE.parent.parent / "shared" / "ozone-golden"

if not (GOLDEN / "manifest.json").is_file():  # pragma: no cover - a partial checkout
    pytest.skip(
        f"golden data missing: {GOLDEN} (it ships with the repository)", allow_module_level=True
    )

MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
CASES: Dict[str, Dict[str, Any]] = {
    c["name"]: json.loads((GOLDEN / "cases" / c["name"] / "case.json").read_text())
    for c in MANIFEST["cases"]
}
FILES = [(name, f) for name, case in sorted(CASES.items()) for f in sorted(case["files"])]
DIFFS = sorted(n for n, c in CASES.items() if c["diff"])
MERGES = sorted(n for n, c in CASES.items() if c["merge"])
FILE_IDS = [f"{n}/{f}" for n, f in FILES]


def raw(name: str, fname: str) -> bytes:
    return (GOLDEN / "cases" / name / fname).read_bytes()


def values(tree: ContainerTree) -> Dict[str, Any]:
    """A tree in the golden data's notation."""
    return {
        "containerID": tree.container_id,
        "dataChecksum": tree.data_checksum,
        "blocks": [
            [
                b.block_id,
                b.value,
                b.deleted,
                [[c.offset, c.length, c.value, c.checksum_matches] for c in b.chunks],
            ]
            for b in tree.blocks()
        ],
    }


def test_the_set_is_whole():
    assert MANIFEST["counts"]["cases"] == len(CASES) == 37
    assert MANIFEST["ozone"]["commit"] == "78d5650c313f2fa0731bdf08b76d4604090dabca"
    assert len(DIFFS) >= 23 and len(MERGES) >= 20
    for name, fname in FILES:
        spec = CASES[name]["files"][fname]
        data = raw(name, fname)
        assert len(data) == spec["bytes"] and hashlib.sha256(data).hexdigest() == spec["sha256"]


def test_copy_matches_the_shared_original():
    """The repository's copy is the shared set, byte for byte (when it is there to compare)."""
    if not (SHARED / "manifest.json").is_file():
        pytest.skip(
            "no original golden set to compare with on this machine; the "
            "repository's tests/data/ozone-golden is checked against its own "
            "manifest.json hashes (test_the_set_is_whole)"
        )
    for path in sorted(SHARED.rglob("*")):
        if path.is_file():
            assert (GOLDEN / path.relative_to(SHARED)).read_bytes() == path.read_bytes(), path


# ---- read values, rewrite bytes --------------------------------------------------------


@pytest.mark.parametrize("name,fname", FILES, ids=FILE_IDS)
def test_read_values(name, fname):
    tree = ContainerTree.from_bytes(raw(name, fname))
    assert values(tree) == CASES[name]["files"][fname]["ozone"]
    assert tree.inconsistencies() == []  # every stored value is what we compute


@pytest.mark.parametrize("name,fname", FILES, ids=FILE_IDS)
def test_rewrite_bytes(name, fname):
    data = raw(name, fname)
    tree = ContainerTree.from_bytes(data)
    assert tree.to_bytes() == data
    assert tree.replace().to_bytes() == data  # a changed (re-validated) tree: Ozone's form


# ---- build from scratch ------------------------------------------------------------------


def _windows(hexes: List[str]) -> List[bytes]:
    return [bytes.fromhex(h) for h in hexes]


def _leaf(hexes: List[str]) -> int:
    return ozone.leaf_checksum(_windows(hexes)) if hexes else 0


def build_with_builder(name: str, fname: str) -> ContainerTree:
    spec = CASES[name]["files"][fname]
    build = spec["build"]
    b = TreeBuilder(spec["ozone"]["containerID"])
    for op in build["ops"]:
        if op[0] == "chunk":
            _, bid, off, length, hexes, ok = op
            b.add_chunk(bid, off, length, windows=_windows(hexes), checksum_matches=ok)
        elif op[0] == "block":
            b.add_block(op[1])
        else:
            assert op[0] == "tombstone"
            b.mark_deleted(op[1], value=op[2])
    for bid, chunks in build["deleted"]:
        # addDeletedBlocks: the tombstone's value comes from the block's chunks
        if chunks:
            for off, length, hexes in chunks:
                b.add_chunk(bid, off, length, windows=_windows(hexes))
        b.mark_deleted(bid)
    return b.build(data_checksum=build["root"])


def build_with_columns(name: str, fname: str) -> ContainerTree:
    spec = CASES[name]["files"][fname]
    build = spec["build"]
    bids, offs, lens, parts, counts, oks = [], [], [], [], [], []
    empty, tombs = [], {}
    for op in build["ops"]:
        if op[0] == "chunk":
            _, bid, off, length, hexes, ok = op
            w = b"".join(_windows(hexes))
            bids.append(bid)
            offs.append(off)
            lens.append(length)
            parts.append(w)
            counts.append(len(w))
            oks.append(ok)
        elif op[0] == "block":
            empty.append(op[1])
        else:
            tombs[op[1]] = op[2]
    for bid, chunks in build["deleted"]:
        leaves = [_leaf(h) for _, _, h in sorted(chunks, key=lambda c: c[0])]
        tombs[bid] = ozone.block_checksum(bid, leaves)
    return ContainerTree.from_columns(
        spec["ozone"]["containerID"],
        np.array(bids, dtype=np.int64),
        np.array(offs, dtype=np.int64),
        np.array(lens, dtype=np.int64),
        window_bytes=b"".join(parts),
        window_byte_counts=counts,
        checksum_matches=oks,
        deleted_blocks=tombs or None,
        empty_blocks=empty or None,
        data_checksum=build["root"],
    )


@pytest.mark.parametrize("name,fname", FILES, ids=FILE_IDS)
@pytest.mark.parametrize(
    "builder", [build_with_builder, build_with_columns], ids=["TreeBuilder", "from_columns"]
)
def test_build_from_scratch_writes_ozones_bytes(builder, name, fname):
    tree = builder(name, fname)
    assert values(tree) == CASES[name]["files"][fname]["ozone"]
    assert tree.to_bytes() == raw(name, fname)


# ---- diff --------------------------------------------------------------------------------


def _chunk_map(d: Dict[int, np.ndarray]) -> Dict[int, List[int]]:
    return {int(b): [int(o) for o in offs] for b, offs in d.items()}


@pytest.mark.parametrize("name", DIFFS)
def test_diff_answers(name):
    case = CASES[name]["diff"]
    ours = ContainerTree.from_bytes(raw(name, case["ours"]))
    peer = ContainerTree.from_bytes(raw(name, case["peer"]))
    want = case["ozone"]
    if want["exception"]:
        assert "Container Diff failed" in want["exception"]
        with pytest.raises(ContainerIDMismatchError) as info:
            diff(ours, peer)
        assert (info.value.ours, info.value.peer) == (ours.container_id, peer.container_id)
        return
    r = diff(ours, peer)
    assert r.needs_repair == want["needsRepair"]
    assert r.missing_blocks.tolist() == want["missingBlocks"]
    assert _chunk_map(r.missing_chunks) == {b: offs for b, offs in want["missingChunks"]}
    assert _chunk_map(r.corrupt_chunks) == {b: offs for b, offs in want["corruptChunks"]}
    got_deleted = [[int(peer.block_id[i]), int(peer.block_value[i])] for i in r.deleted_block_rows]
    assert got_deleted == want["divergedDeletedBlocks"]
    assert r.unhealthy_chunks_filtered == want["numUnhealthyChunksFiltered"]
    d = r.to_dict()
    assert d["needs_repair"] == want["needsRepair"]
    assert d["unhealthy_chunks_filtered"] == want["numUnhealthyChunksFiltered"]


# ---- merge -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MERGES)
def test_merge_values_and_bytes(name):
    m = CASES[name]["merge"]
    stored = ContainerTree.from_bytes(raw(name, m["stored"]))
    scanned = ContainerTree.from_bytes(raw(name, m["scanned"]))
    merged = merge(stored, scanned)
    assert values(merged) == CASES[name]["files"][m["merged"]]["ozone"]
    assert merged.to_bytes() == raw(name, m["merged"])
