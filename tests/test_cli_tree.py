"""`crcmerkle tree show|diff|build|merge`, called through merkle.cli.main (no subprocess)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from merkle.cli import main
from merkle.trees.model import TreeBuilder
from merkle.trees.treefile import read_tree, write_tree

DATA = Path(__file__).parent / "data"


def run(capsys, *argv):
    rc = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return rc, out, err


def test_show_text_and_json(capsys):
    rc, out, _ = run(capsys, "tree", "show", DATA / "check_crc32.tree", "--blocks")
    assert rc == 0 and "1833a6a1" in out and "@40000 +40000  7d6dd059" in out
    rc, out, _ = run(capsys, "tree", "show", DATA / "tombstones.tree", "--json")
    d = json.loads(out)
    assert rc == 0 and d["deleted_blocks"] == 1 and d["unhealthy_chunks"] == 1
    assert d["block_list"][0]["block_id"] == -7
    assert all(isinstance(c["data_checksum"], str) for b in d["block_list"] for c in b["chunks"])


def test_show_tree_not_generated(capsys):
    rc, out, _ = run(capsys, "tree", "show", DATA / "tombstone_only.tree")
    assert rc == 0 and "none (tree not generated)" in out


def _pair(tmp_path):
    b = TreeBuilder(7)
    for off in (0, 100, 200):
        b.add_chunk(1, off, 100, leaf=off + 1)
    b.add_chunk(2, 0, 100, leaf=9)
    peer = b.build()
    o = TreeBuilder(7)
    o.add_chunk(1, 0, 100, leaf=1)
    o.add_chunk(1, 100, 100, leaf=55, checksum_matches=False)
    ours = o.build()
    write_tree(ours, tmp_path / "ours.tree")
    write_tree(peer, tmp_path / "peer.tree")
    return tmp_path / "ours.tree", tmp_path / "peer.tree"


def test_diff_exit_codes_and_report(capsys, tmp_path):
    ours, peer = _pair(tmp_path)
    rc, out, _ = run(capsys, "tree", "diff", ours, peer)
    assert rc == 1
    assert "missing blocks (1): 2" in out and "block 1: offsets 200" in out
    assert "corrupt chunks (1)" in out
    rc, out, _ = run(capsys, "tree", "diff", peer, ours)
    assert rc == 0 and "nothing to repair" in out
    rc, out, _ = run(capsys, "tree", "diff", peer, peer)
    assert rc == 0 and "match" in out
    rc, out, _ = run(capsys, "tree", "diff", ours, peer, "--json")
    d = json.loads(out)
    assert rc == 1 and d["needs_repair"] and d["missing_blocks"] == [2]
    assert d["corrupt_chunks"] == {"1": [100]} and d["missing_chunks"] == {"1": [200]}


def test_diff_of_different_containers_is_exit_2_one_line(capsys, tmp_path):
    """Ozone refuses it (CONTAINER_ID_MISMATCH); no repair report is printed."""
    ours, _ = _pair(tmp_path)  # container 7
    rc, out, err = run(capsys, "tree", "diff", ours, DATA / "check_crc32.tree")  # container 1
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("crcmerkle: error: ") and "container 7" in err and "container 1" in err
    rc, out, err = run(capsys, "tree", "diff", ours, DATA / "check_crc32.tree", "--json")
    assert rc == 2 and out == ""


def test_diff_json_counts_unhealthy_chunks_filtered(capsys, tmp_path):
    b = TreeBuilder(7)
    b.add_chunk(1, 0, 100, leaf=1, checksum_matches=False)
    b.add_chunk(1, 100, 100, leaf=2, checksum_matches=False)
    peer = b.build()
    o = TreeBuilder(7)
    o.add_chunk(1, 0, 100, leaf=3, checksum_matches=False)
    write_tree(peer, tmp_path / "peer.tree")
    write_tree(o.build(), tmp_path / "ours.tree")
    rc, out, _ = run(
        capsys, "tree", "diff", tmp_path / "ours.tree", tmp_path / "peer.tree", "--json"
    )
    d = json.loads(out)
    # both unhealthy at 0, only-in-peer unhealthy at 100: nothing to pull, two filtered
    assert rc == 0 and not d["needs_repair"] and d["unhealthy_chunks_filtered"] == 2
    assert d["counts"]["unhealthy_chunks_filtered"] == 2
    rc, out, _ = run(capsys, "tree", "diff", tmp_path / "ours.tree", tmp_path / "peer.tree")
    assert rc == 0 and "unhealthy peer chunks skipped: 2" in out


def test_merge_keeps_unknown_top_level_fields(capsys, tmp_path):
    raw = (DATA / "check_crc32.tree").read_bytes()
    extra = bytes([0x1A, 2, 0xAA, 0xBB])  # an old file's removed field 3
    (tmp_path / "stored.tree").write_bytes(raw[:2] + extra + raw[2:])
    shutil.copy(DATA / "check_crc32c.tree", tmp_path / "scanned.tree")
    rc, _, _ = run(
        capsys,
        "tree",
        "merge",
        tmp_path / "stored.tree",
        tmp_path / "scanned.tree",
        "-o",
        tmp_path / "out.tree",
    )
    assert rc == 0
    assert (tmp_path / "out.tree").read_bytes() == (DATA / "check_crc32c.tree").read_bytes() + extra


@pytest.mark.parametrize("content", [b"", b"\x08", b"hello world, not a tree"])
def test_diff_bad_file_is_exit_2_one_line(capsys, tmp_path, content):
    bad = tmp_path / "bad.tree"
    bad.write_bytes(content)
    rc, out, err = run(capsys, "tree", "diff", bad, DATA / "check_crc32.tree")
    assert rc == 2 and out == ""
    assert err.startswith("crcmerkle: error: ") and str(bad) in err and err.count("\n") == 1


def test_missing_file_and_no_action(capsys, tmp_path):
    rc, _, err = run(capsys, "tree", "show", tmp_path / "nope.tree")
    assert rc == 2 and "No such file" in err
    rc, _, err = run(capsys, "tree")
    assert rc == 2 and "show, diff, build or merge" in err


CSV = """block_id,offset,length,checksums,checksum_matches
2,0,12345,{c3},true
1,40000,40000,{c2},true
1,0,40000,{c1},yes
"""


def _check_windows():
    from test_ozone_values import CHUNKS

    import merkle

    return [
        " ".join(
            format(int(x), "08x") for x in merkle.checksum_windows(d, 16384, algorithm="crc32")
        )
        for _, _, d in CHUNKS
    ]


def test_build_from_csv_reproduces_the_check_value(capsys, tmp_path):
    c1, c2, c3 = _check_windows()
    table = tmp_path / "chunks.csv"
    table.write_text(CSV.format(c1=c1, c2=c2, c3=c3))
    out_path = tmp_path / "metadata" / "1.tree"
    out_path.parent.mkdir()
    rc, out, _ = run(capsys, "tree", "build", table, "-o", out_path, "--container-id", 1)
    assert rc == 0 and "1833a6a1" in out
    assert out_path.read_bytes() == (DATA / "check_crc32.tree").read_bytes()


def test_build_from_parquet_with_leaves_and_tombstones(capsys, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "block_id": [1, 1, 2],
            "offset": [0, 100, 0],
            "length": [100, 100, 5],
            "leaf": [1, 2, 3],
            "deleted": [False, False, True],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    rc, _, _ = run(
        capsys,
        "tree",
        "build",
        tmp_path / "t.parquet",
        "-o",
        tmp_path / "x.tree",
        "--container-id",
        3,
    )
    tree = read_tree(tmp_path / "x.tree")
    assert rc == 0 and tree.block(2).deleted and tree.block(1).chunks[1].value == 2
    table = pa.table(
        {
            "block_id": [1],
            "offset": [0],
            "length": [8],
            "checksums": pa.array([[0x1CA55F45, 0x7D6DD059]], pa.list_(pa.uint32())),
        }
    )
    pq.write_table(table, tmp_path / "w.parquet")
    rc, _, _ = run(
        capsys,
        "tree",
        "build",
        tmp_path / "w.parquet",
        "-o",
        tmp_path / "w.tree",
        "--container-id",
        3,
    )
    from merkle.trees.ozone import leaf_checksum

    assert rc == 0
    assert read_tree(tmp_path / "w.tree").chunk_value[0] == leaf_checksum([0x1CA55F45, 0x7D6DD059])


@pytest.mark.parametrize(
    "csv_text,msg",
    [
        ("block_id,offset\n1,0\n", "missing column 'length'"),
        ("block_id,offset,length\n1,0,1\n", "exactly one of"),
        ("block_id,offset,length,leaf\nx,0,1,5\n", "block_id"),
        ("block_id,offset,length,checksums\n1,0,1,zz\n", "not a hex checksum"),
    ],
)
def test_build_bad_tables(capsys, tmp_path, csv_text, msg):
    (tmp_path / "t.csv").write_text(csv_text)
    rc, _, err = run(
        capsys, "tree", "build", tmp_path / "t.csv", "-o", tmp_path / "o.tree", "--container-id", 1
    )
    assert rc == 2 and msg in err and not (tmp_path / "o.tree").exists()


def test_merge(capsys, tmp_path):
    stored = TreeBuilder(7)
    stored.mark_deleted(5, value=0x99)
    write_tree(stored.build(data_checksum=False), tmp_path / "stored.tree")
    shutil.copy(DATA / "check_crc32.tree", tmp_path / "scanned.tree")
    scanned_raw = (tmp_path / "scanned.tree").read_bytes()
    # container IDs differ: an error
    rc, _, err = run(
        capsys,
        "tree",
        "merge",
        tmp_path / "stored.tree",
        tmp_path / "scanned.tree",
        "-o",
        tmp_path / "out.tree",
    )
    assert rc == 2 and "different containers: 7 and 1" in err and err.count("\n") == 1
    # a corrupt stored tree is no tree, as in Ozone
    (tmp_path / "stored.tree").write_bytes(b"\x08")
    rc, _, _ = run(
        capsys,
        "tree",
        "merge",
        tmp_path / "stored.tree",
        tmp_path / "scanned.tree",
        "-o",
        tmp_path / "out.tree",
    )
    assert rc == 0 and (tmp_path / "out.tree").read_bytes() == scanned_raw
    stored = TreeBuilder(1)
    stored.mark_deleted(5, value=0x99)
    write_tree(stored.build(data_checksum=False), tmp_path / "stored.tree")
    rc, _, _ = run(
        capsys,
        "tree",
        "merge",
        tmp_path / "stored.tree",
        tmp_path / "scanned.tree",
        "-o",
        tmp_path / "out.tree",
    )
    merged = read_tree(tmp_path / "out.tree")
    assert rc == 0 and merged.block(5).deleted and merged.n_blocks == 3
