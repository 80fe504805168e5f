"""Issue 25: the cheap census, `Layout.scan(..., metadata_only=True)` and `crcmerkle scan
--metadata-only` (and `--trees-only` beside it, for contrast): no block data read, each
replica's tree its stored `.tree` where that still describes the block metadata, else the tree
the data scan builds when every chunk matches (merkle.replica.census)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from merkle.cli import main  # noqa: E402
from merkle.replica.blocks import CRC32, BlockMeta, ChunkMeta, ContainerMeta  # noqa: E402
from merkle.replica.census import stale_reason  # noqa: E402
from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from merkle.replica.layouts import layout_named  # noqa: E402
from merkle.replica.results import (  # noqa: E402
    CORRUPT_CHUNK,
    TREE_CORRUPT,
    TREE_FROM_METADATA,
    TREE_MISSING,
    TREE_STALE,
    ScanResult,
)
from merkle.replica.scan import scan_paths  # noqa: E402
from merkle.replica.verify import scan_files  # noqa: E402
from merkle.trees.merge import merge  # noqa: E402
from merkle.trees.model import ContainerTree  # noqa: E402
from merkle.trees.treefile import tree_from_bytes, tree_to_bytes  # noqa: E402

from replica_helpers import SMALL, make_cluster  # noqa: E402

LAYOUTS = ("ozone", "crcmerkle")
GOLDEN = Path(__file__).resolve().parent / "data" / "ozone-golden" / "cases"
#: the findings only a data read can make
DATA_KINDS = {
    "CORRUPT_CHUNK",
    "MISSING_CHUNK",
    "INCONSISTENT_CHUNK_LENGTH",
    "MISSING_DATA_FILE",
    "UNREADABLE_DATA_FILE",
}
CENSUS_KINDS = {TREE_STALE, TREE_FROM_METADATA}


def scan(root: Path, **kw: Any) -> Dict[str, ScanResult]:
    """{replica path: result}, read-only (a data scan unless told)."""
    return {r.path: r for r in scan_paths([root], write_tree=False, **kw)}


def tree_file(replica: str) -> Path:
    """The `.tree` of a replica: metadata/<id>.tree on both layouts."""
    return Path(replica) / "metadata" / f"{Path(replica).name}.tree"


def kinds(r: ScanResult) -> List[str]:
    return sorted(e.kind for e in r.errors)


def trees(root: Path) -> Dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*.tree")}


@pytest.fixture
def opened(monkeypatch: Any) -> List[str]:
    """Every name os.open is asked for from now on (the replica readers open each file by
    name relative to a directory descriptor: merkle.replica.safeopen)."""
    names: List[str] = []
    real = os.open

    def recording(path: Any, *args: Any, **kw: Any) -> int:
        names.append(os.fspath(path))
        return real(path, *args, **kw)

    monkeypatch.setattr(os, "open", recording)
    return names


def block_files(names: List[str]) -> List[str]:
    return [n for n in names if n.endswith(".block") or "_chunk_" in n]


@pytest.fixture(params=LAYOUTS)
def healthy(request: Any, tmp_path: Path) -> Path:
    root = tmp_path / request.param
    make_cluster(root, containers=4, layout=request.param)
    return root


# ---- a healthy cluster ----------------------------------------------------------------------


def test_census_trees_are_the_data_scans_trees(healthy: Path, opened: List[str]) -> None:
    data = scan(healthy)
    assert block_files(opened)  # the recorder sees the data scan open its block files
    before = trees(healthy)
    opened.clear()
    census = scan(healthy, metadata_only=True)
    assert block_files(opened) == [] and any(n.endswith(".tree") for n in opened)
    assert sorted(census) == sorted(data) and len(data) == 12
    for path, r in census.items():
        # the stored trees describe their metadata: used as they are, no finding
        assert r.errors == [] and r.ok and r.bytes_read == 0 and not r.tree_written
        assert r.tree.data_checksum == data[path].tree.data_checksum is not None
        assert (r.blocks, r.chunks) == (data[path].blocks, data[path].chunks)
        assert data[path].bytes_read > 0
    assert trees(healthy) == before  # read-only


def test_without_trees_the_census_builds_the_data_scans_trees(
    healthy: Path, opened: List[str]
) -> None:
    data = scan(healthy)
    for p in list(trees(healthy)):
        p.unlink()
    opened.clear()
    census = scan(healthy, metadata_only=True)
    assert block_files(opened) == []
    for path, r in census.items():
        assert kinds(r) == [TREE_FROM_METADATA, TREE_MISSING] and r.ok
        assert all(e.is_warning for e in r.errors) and r.bytes_read == 0
        assert r.tree.data_checksum == data[path].tree.data_checksum
        assert tree_to_bytes(r.tree) == tree_to_bytes(data[path].tree)
    assert trees(healthy) == {}  # never written
    # trees-only, for contrast: no tree at all
    only = scan(healthy, trees_only=True)
    assert all(kinds(r) == [TREE_MISSING] and r.tree.n_blocks == 0 for r in only.values())


# ---- one replica at a time --------------------------------------------------------------------


@pytest.fixture(params=LAYOUTS)
def cluster(request: Any, tmp_path: Path) -> Any:
    """(root, the data scan's results, one replica's path) of a clean cluster."""
    root = tmp_path / request.param
    make_cluster(root, containers=2, layout=request.param)
    data = scan(root)
    return root, data, sorted(data)[0]


def test_a_corrupt_block_is_for_the_deep_scan(cluster: Any, opened: List[str]) -> None:
    root, clean, rep = cluster
    block = sorted((Path(rep) / "chunks").iterdir())[0]
    raw = bytearray(block.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    block.write_bytes(bytes(raw))
    data = scan(root)[rep]
    assert CORRUPT_CHUNK in kinds(data) and data.tree.data_checksum != clean[rep].tree.data_checksum
    opened.clear()
    census = scan(root, metadata_only=True)[rep]
    assert block_files(opened) == []
    assert census.errors == [] and census.bytes_read == 0
    assert census.tree.data_checksum == clean[rep].tree.data_checksum
    only = scan(root, trees_only=True)[rep]
    assert only.errors == [] and only.tree.data_checksum == clean[rep].tree.data_checksum


def test_a_stored_tree_with_the_datanodes_own_findings_is_kept(cluster: Any) -> None:
    """A tree in which the datanode's own scan marked a chunk unhealthy describes the
    metadata still: the census keeps that observation (it reads no data to make its own)."""
    root, clean, rep = cluster
    block = sorted((Path(rep) / "chunks").iterdir())[0]
    raw = bytearray(block.read_bytes())
    raw[3] ^= 0x01
    block.write_bytes(bytes(raw))
    observed = scan(root)[rep].tree
    assert not bool(observed.chunk_matches.all())
    tree_file(rep).write_bytes(tree_to_bytes(observed))
    census = scan(root, metadata_only=True)[rep]
    assert census.errors == []
    assert tree_to_bytes(census.tree) == tree_to_bytes(observed)


def _without_last_block(tree: ContainerTree) -> ContainerTree:
    """`tree` as it was before its last block was written (an older tree)."""
    live = np.flatnonzero(~tree.block_deleted)
    last = int(tree.block_id[live[-1]])
    keep = tree.chunk_block_id != last
    return ContainerTree.from_columns(
        tree.container_id,
        tree.chunk_block_id[keep],
        tree.chunk_offset[keep],
        tree.chunk_length[keep],
        leaf=tree.chunk_value[keep],
        checksum_matches=tree.chunk_matches[keep],
    )


def test_an_older_tree_is_rebuilt_not_trusted(cluster: Any, opened: List[str]) -> None:
    root, clean, rep = cluster
    stale = _without_last_block(clean[rep].tree)
    tree_file(rep).write_bytes(tree_to_bytes(stale))
    data = scan(root)[rep]
    assert data.errors == []  # the data scan rebuilds it without a word
    opened.clear()
    census = scan(root, metadata_only=True)[rep]
    assert block_files(opened) == []
    assert kinds(census) == [TREE_FROM_METADATA, TREE_STALE] and census.ok
    stale_note = next(e for e in census.errors if e.kind == TREE_STALE)
    assert "recorded in the block metadata is not in it" in stale_note.detail
    assert census.tree.data_checksum == data.tree.data_checksum == clean[rep].tree.data_checksum
    assert tree_file(rep).read_bytes() == tree_to_bytes(stale)  # not rewritten
    # trees-only takes the file as it is
    only = scan(root, trees_only=True)[rep]
    assert only.errors == [] and only.tree.data_checksum == stale.data_checksum
    assert only.tree.data_checksum != clean[rep].tree.data_checksum


def test_a_tree_never_built_is_rebuilt_with_its_tombstones(cluster: Any) -> None:
    """Ozone's block deletion may write a tree before any scan: tombstones, no container
    value (hasDataChecksum false: Ozone counts it as no tree). Rebuilt, tombstones kept, as
    the data scan merges them."""
    root, clean, rep = cluster
    tombstones = ContainerTree.from_columns(
        clean[rep].container_id,
        [],
        [],
        [],
        leaf=np.zeros(0, dtype=np.int64),
        deleted_blocks={1 << 40: 12345},
        data_checksum=False,
    )
    assert tombstones.data_checksum is None
    tree_file(rep).write_bytes(tree_to_bytes(tombstones))
    data = scan(root)[rep]
    census = scan(root, metadata_only=True)[rep]
    assert kinds(census) == [TREE_FROM_METADATA, TREE_STALE]
    assert "no container value" in next(e for e in census.errors if e.kind == TREE_STALE).detail
    assert tree_to_bytes(census.tree) == tree_to_bytes(data.tree)
    assert (1 << 40) in census.tree.block_id.tolist()


def test_a_corrupt_tree_is_reported_and_rebuilt(cluster: Any) -> None:
    root, clean, rep = cluster
    tree_file(rep).write_bytes(b"\xff\x07 not a tree")
    census = scan(root, metadata_only=True)[rep]
    assert kinds(census) == [TREE_CORRUPT, TREE_FROM_METADATA] and census.ok
    assert census.tree.data_checksum == clean[rep].tree.data_checksum
    assert tree_file(rep).read_bytes() == b"\xff\x07 not a tree"
    only = scan(root, trees_only=True)[rep]
    assert kinds(only) == [TREE_CORRUPT] and only.tree.n_blocks == 0


# ---- metadata problems: exactly the data scan's ---------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_metadata_findings_are_the_data_scans(
    tmp_path: Path, layout: str, opened: List[str]
) -> None:
    """Every generated fault (both layouts' own): the census reports every finding of the
    data scan that needs no data read, and nothing a data read would find; where the data
    scan found no data problem, the trees are equal."""
    root = tmp_path / layout
    generate_cluster(
        root,
        GeneratorConfig(
            **{
                **SMALL,
                "containers": 10,
                "layout": layout,
                "faults": parse_faults("default", layout),
            }
        ),
    )
    data = scan(root)
    opened.clear()
    census = scan(root, metadata_only=True)
    assert block_files(opened) == [] and sorted(census) == sorted(data)
    compared = damaged = 0
    for path, d in data.items():
        c = census[path]
        assert c.bytes_read == 0
        without_data = [k for k in kinds(d) if k not in DATA_KINDS]
        assert [k for k in kinds(c) if k not in CENSUS_KINDS] == without_data, path
        if not set(kinds(d)) & DATA_KINDS:
            assert c.tree.data_checksum == d.tree.data_checksum, path
            compared += 1
        else:
            damaged += 1
    assert compared >= 10 and damaged >= 5


# ---- Ozone's own bytes ------------------------------------------------------------------------


class MemoryFiles:
    """A replica held in memory (merkle.replica.files.ReplicaFiles): its block metadata and
    `.tree`; any block file asked for fails the test."""

    def __init__(self, meta: ContainerMeta, tree: Optional[bytes]) -> None:
        self.container_id = meta.container_id
        self.location = f"memory/{meta.container_id}"
        self._meta, self._tree = meta, tree

    def load_meta(self) -> ContainerMeta:
        return self._meta

    def read_tree(self) -> bytes:
        if self._tree is None:
            raise FileNotFoundError(2, "No such file or directory")
        return self._tree

    def open_block(self, block_id: int) -> Any:
        raise AssertionError(f"the census opened block {block_id}")

    def block_name(self, block_id: int) -> str:
        return f"{block_id}.block"


def golden_meta(container_id: int, ops: List[Any]) -> ContainerMeta:
    """The block metadata Ozone's writer was given: ["chunk", block, offset, length,
    [window checksums, hex], healthy] steps (healthy ones: the client's record)."""
    meta = ContainerMeta(container_id)
    for op in ops:
        if op[0] == "chunk":
            _, block, offset, length, windows, healthy = op
            assert healthy
            meta.put_chunks(
                block,
                [
                    ChunkMeta(
                        offset, length, CRC32, 16384, b"".join(bytes.fromhex(w) for w in windows)
                    )
                ],
            )
    return meta


def golden_case(name: str) -> Dict[str, Any]:
    path = GOLDEN / name / "case.json"
    if not path.is_file():  # pragma: no cover - a partial checkout
        pytest.skip(f"golden data missing: {path}")
    return json.loads(path.read_text())


def test_a_tree_from_metadata_is_ozones_byte_for_byte() -> None:
    """Ozone's writer given the chunks' recorded checksums (what it does when it builds a
    tree from block metadata) wrote these bytes: the census builds the same ones."""
    name = "golden_g02_check_vectors_crc32"
    spec = golden_case(name)["files"]["ours.tree"]
    meta = golden_meta(spec["ozone"]["containerID"], spec["build"]["ops"])
    r = scan_files(MemoryFiles(meta, None), metadata_only=True)
    assert kinds(r) == [TREE_FROM_METADATA, TREE_MISSING] and r.bytes_read == 0
    assert tree_to_bytes(r.tree) == (GOLDEN / name / "ours.tree").read_bytes()


def test_a_block_without_chunks_is_left_out_as_the_data_scan_does() -> None:
    """golden_g03 holds a block without chunks (block 5): Ozone's tree from metadata keeps
    it, its scanner's tree does not, and the census follows the data scan: the stored tree is
    rebuilt without it; every other value is Ozone's."""
    name = "golden_g03_check_vectors_crc32c"
    spec = golden_case(name)["files"]["ours.tree"]
    meta = golden_meta(spec["ozone"]["containerID"], spec["build"]["ops"])
    meta.blocks[5] = BlockMeta(5)  # the ["block", 5] step: a row without chunks
    ozone = (GOLDEN / name / "ours.tree").read_bytes()
    r = scan_files(MemoryFiles(meta, ozone), metadata_only=True)
    assert kinds(r) == [TREE_FROM_METADATA, TREE_STALE]
    assert "its block 5 is not one a data scan reads" in r.errors[0].detail + r.errors[1].detail
    theirs = tree_from_bytes(ozone)
    assert theirs.block_id.tolist() == [1, 2, 5] and r.tree.block_id.tolist() == [1, 2]
    assert r.tree.block_value.tolist() == theirs.block_value[:2].tolist()
    for col in ("chunk_offset", "chunk_length", "chunk_value", "chunk_matches"):
        assert getattr(r.tree, col).tolist() == getattr(theirs, col).tolist()


def test_ozones_tombstone_only_tree_then_metadata_is_ozones_merge() -> None:
    """golden_g07: a tree written by Ozone's block deletion alone (no container value), then
    a tree of the recorded chunks merged into it by updateTree: the census, given that
    stored tree and that metadata, gives Ozone's merged bytes (TREE_STALE: never built)."""
    name = "golden_g07_tombstone_only_then_scan"
    case = golden_case(name)
    spec = case["files"]["scanned.tree"]
    meta = golden_meta(spec["ozone"]["containerID"], spec["build"]["ops"])
    stored = (GOLDEN / name / "ours.tree").read_bytes()
    r = scan_files(MemoryFiles(meta, stored), metadata_only=True)
    assert kinds(r) == [TREE_FROM_METADATA, TREE_STALE]
    assert tree_to_bytes(r.tree) == (GOLDEN / name / "merged.tree").read_bytes()


def test_ozones_tree_of_its_own_metadata_is_trusted() -> None:
    """golden_g02's tree was built from exactly this metadata: it describes it."""
    name = "golden_g02_check_vectors_crc32"
    spec = golden_case(name)["files"]["ours.tree"]
    meta = golden_meta(spec["ozone"]["containerID"], spec["build"]["ops"])
    stored = (GOLDEN / name / "ours.tree").read_bytes()
    r = scan_files(MemoryFiles(meta, stored), metadata_only=True)
    assert r.errors == [] and tree_to_bytes(r.tree) == stored
    # one more chunk recorded since: older than the metadata
    meta.put_chunks(2, [ChunkMeta(12345, 10, CRC32, 16384, bytes(4))])
    r = scan_files(MemoryFiles(meta, stored), metadata_only=True)
    assert kinds(r) == [TREE_FROM_METADATA, TREE_STALE]
    assert "block 2 offset 12345" in next(e for e in r.errors if e.kind == TREE_STALE).detail


# ---- the rule, case by case -------------------------------------------------------------------


def _tree(blocks: Dict[int, List[Any]], **kw: Any) -> ContainerTree:
    rows = [(b, o, n, v, m) for b, chunks in blocks.items() for o, n, v, m in chunks]
    b, o, n, v, m = (list(x) for x in zip(*rows)) if rows else ([],) * 5
    return ContainerTree.from_columns(
        5, b, o, n, leaf=np.array(v, dtype=np.int64), checksum_matches=np.array(m, dtype=bool), **kw
    )


RECORDED = _tree({1: [(0, 10, 111, True), (10, 5, 222, True)], 2: [(0, 7, 333, True)]})


@pytest.mark.parametrize(
    "stored, why",
    [
        (RECORDED, None),
        (_tree({1: [(0, 10, 111, True), (10, 5, 999, False)], 2: [(0, 7, 333, True)]}), None),
        (_tree({1: [(0, 10, 111, True), (10, 3, 999, False)], 2: [(0, 7, 333, True)]}), None),
        (_tree({1: [(0, 10, 111, True), (10, 5, 222, True)]}), "block 2 recorded"),
        (_tree({1: [(0, 10, 111, True)], 2: [(0, 7, 333, True)]}), "offset 10 recorded"),
        (
            _tree(
                {
                    1: [(0, 10, 111, True), (10, 5, 222, True), (15, 1, 1, True)],
                    2: [(0, 7, 333, True)],
                }
            ),
            "offset 15 is not one a data scan reads",
        ),
        (
            _tree(
                {
                    1: [(0, 10, 111, True), (10, 5, 222, True)],
                    2: [(0, 7, 333, True)],
                    3: [(0, 1, 1, True)],
                }
            ),
            "block 3 is not one a data scan reads",
        ),
        (
            _tree({1: [(0, 10, 111, True), (10, 5, 223, True)], 2: [(0, 7, 333, True)]}),
            "differs from the recorded one",
        ),
        (
            _tree({1: [(0, 10, 111, True), (10, 6, 222, True)], 2: [(0, 7, 333, True)]}),
            "differs from the recorded one",
        ),
        (
            _tree(
                {1: [(0, 10, 111, True), (10, 5, 222, True)], 2: [(0, 7, 333, True)]},
                data_checksum=False,
            ),
            "no container value",
        ),
    ],
    ids=[
        "same",
        "unhealthy-observed",
        "short-observed",
        "block-added",
        "chunk-added",
        "chunk-gone",
        "block-gone",
        "healthy-value",
        "healthy-length",
        "never-built",
    ],
)
def test_the_staleness_rule(stored: ContainerTree, why: Optional[str]) -> None:
    got = stale_reason(stored, merge(stored, RECORDED))
    assert (got is None) if why is None else (got is not None and why in got), got


def test_a_tombstone_over_a_recorded_block_is_not_staleness() -> None:
    """Block deletion records the tombstone first, then removes the row: a tree ahead of the
    metadata is current (the tombstone wins, as in the data scan's merge)."""
    stored = _tree({1: [(0, 10, 111, True), (10, 5, 222, True)]}, deleted_blocks={2: 77})
    assert stale_reason(stored, merge(stored, RECORDED)) is None


def test_values_that_do_not_add_up_are_not_trusted() -> None:
    t = RECORDED
    bad = ContainerTree(
        5,
        data_checksum=t.data_checksum,
        block_id=t.block_id,
        block_value=t.block_value + 1,
        block_chunk_start=t.block_chunk_start,
        chunk_offset=t.chunk_offset,
        chunk_length=t.chunk_length,
        chunk_value=t.chunk_value,
        chunk_matches=t.chunk_matches,
    )
    assert "do not add up" in (stale_reason(bad, merge(bad, RECORDED)) or "")


# ---- the interface and the command ------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_two_cheap_passes_are_exclusive(tmp_path: Path, layout: str) -> None:
    root = tmp_path / layout
    make_cluster(root, layout=layout)
    lay = layout_named(layout)
    refs = [r for v in lay.volumes(str(root)) for r in lay.replicas(v)]
    with pytest.raises(ValueError, match="mutually exclusive"):
        list(lay.scan(refs, trees_only=True, metadata_only=True))


def run(capsys: Any, *argv: Any) -> Any:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_command(tmp_path: Path, layout: str, capsys: Any) -> None:
    root = tmp_path / layout
    make_cluster(root, containers=2, layout=layout)
    data = json.loads(run(capsys, "scan", root, "--no-write", "--json")[1])
    value = {r["path"]: r["data_checksum"] for r in data["replicas"]}
    for flag in ("--metadata-only", "--trees-only"):
        st, out, _ = run(capsys, "scan", root, flag, "--json")
        got = json.loads(out)
        assert st == 0 and got["summary"]["bytes_read"] == 0 and got["failed"] == []
        assert {r["path"]: r["data_checksum"] for r in got["replicas"]} == value
        assert set(got["replicas"][0]) == set(data["replicas"][0])
        # (issue 36) every output says that no data was read, and what was compared
        assert got["summary"]["data_read"] is False and data["summary"]["data_read"] is True
        assert got["summary"]["compared"].startswith("compared from recorded checksums")
        assert not any(r["verified"] for r in got["replicas"])
        assert all(r["verified"] for r in data["replicas"])
        st, out, _ = run(capsys, "scan", root, flag)
        assert st == 0 and "scanned 6 replicas, 0 bytes" in out
        assert "no data read: compared from recorded checksums" in out
        assert "no data read" not in run(capsys, "scan", root, "--no-write")[1]
    # a missing .tree: warnings (exit 0; 1 with --strict), and nothing is written
    rep = sorted(value)[0]
    tree_file(rep).unlink()
    st, out, _ = run(capsys, "scan", root, "--metadata-only")
    assert st == 0 and "warning: TREE_MISSING" in out and "warning: TREE_FROM_METADATA" in out
    assert run(capsys, "scan", root, "--metadata-only", "--strict")[0] == 1
    assert run(capsys, "scan", root, "--trees-only")[0] == 0
    assert not tree_file(rep).exists()
    # findings: exit 1; a PATH that is not there: exit 2; both flags: exit 2
    (Path(rep) / "metadata" / f"{Path(rep).name}.container").unlink(missing_ok=True)
    if layout == "crcmerkle":
        (Path(rep) / "metadata" / f"{Path(rep).name}.blocks").unlink()
    st, out, _ = run(capsys, "scan", root, "--metadata-only", "--json")
    assert st == 1 and json.loads(out)["summary"]["with_errors"] == 1
    assert run(capsys, "scan", tmp_path / "nothing", "--metadata-only")[0] == 2
    st, _, err = run(capsys, "scan", root, "--trees-only", "--metadata-only")
    assert st == 2 and "not allowed with" in err


def test_the_test_layout_takes_the_census_too(
    tmp_path: Path, monkeypatch: Any, opened: List[str]
) -> None:
    """tests/layouts/flat.py, a layout no shipped file knows: the census through the
    interface alone (its scan hands metadata_only to scan_files)."""
    from test_layout import TESTS_PARENT, flat_cluster

    monkeypatch.syspath_prepend(str(TESTS_PARENT))
    from tests.layouts.flat import LAYOUT

    root, damaged, block = flat_cluster(tmp_path / "flat")
    refs = [r for v in LAYOUT.volumes(str(root)) for r in LAYOUT.replicas(v)]
    data = {ref.path: r for ref, r, exc in LAYOUT.scan(refs)}
    assert [e.kind for e in data[str(damaged)].errors] == [CORRUPT_CHUNK]
    assert [n for n in opened if n.endswith(".data")]  # the recorder sees the data scan's
    opened.clear()
    census = {ref.path: (r, exc) for ref, r, exc in LAYOUT.scan(refs, metadata_only=True)}
    assert not [n for n in opened if n.endswith(".data")]
    assert all(exc is None and r.errors == [] and r.bytes_read == 0 for r, exc in census.values())
    for path, r in data.items():
        if path != str(damaged):
            assert census[path][0].tree.data_checksum == r.tree.data_checksum
