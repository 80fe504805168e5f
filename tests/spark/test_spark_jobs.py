"""The scan, diff and report jobs on a generated cluster with injected faults.

Ground truth is the generator's manifest and the local library: the scan job must report
exactly the manifest's expected errors and produce the local scanner's trees; the diff job
must find exactly what merkle.diff finds between those trees (no misses, no false alarms),
only for replicas the manifest faulted, and the manifest's unrepairable chunks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

import pyarrow as pa
import pytest

import merkle
from merkle.replica.crcmerkle.layout import find_containers
from merkle.replica.generate import generate_cluster, parse_faults
from merkle.replica.scan import scan_container
from spark_udfs import tables as T
from spark_udfs.jobs.diff import diff_chunks, diff_scan, repair_plan
from spark_udfs.jobs.report import build_report, format_text
from spark_udfs.jobs.scan import scan_replicas


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Tuple[Path, Dict[str, Any]]:
    root = tmp_path_factory.mktemp("spark") / "cluster"
    manifest = generate_cluster(root, faults=parse_faults("default"), containers=8, seed=1)
    return root, manifest


@pytest.fixture(scope="module")
def local(cluster) -> Dict[Tuple[str, int], Any]:
    """The local scanner's results, keyed like the job's tables: (datanode, container)."""
    root, _ = cluster
    out = {}
    for loc in find_containers(root):
        out[(loc.volume.parent.name, loc.container_id)] = scan_container(loc.root, write_tree=False)
    return out


@pytest.fixture(scope="module")
def scanned(spark, cluster) -> Dict[str, Any]:
    root, _ = cluster
    st = scan_replicas(spark, [str(root)])
    return {
        "tables": st,
        "chunks": T.to_arrow(st.chunks),
        "errors": st.errors.toPandas(),
        "replicas": st.replicas.toPandas(),
    }


@pytest.fixture(scope="module", params=["scan tables", "chunk rows only"])
def diffed(request, spark, scanned) -> Dict[str, Any]:
    """Both ways in: a scan's three levels of values, or keys digested from chunk rows."""
    st = scanned["tables"]
    res = diff_scan(st) if request.param == "scan tables" else diff_chunks(st.chunks)
    return {
        "res": res,
        "pulls": [r.asDict() for r in res.pulls.collect()],
        "pending": [r.asDict() for r in res.pending_deletions.collect()],
        "unrec": [r.asDict() for r in res.unrecoverable.collect()],
        "containers": {r.container: r.asDict() for r in res.containers.collect()},
    }


def _rel(root: Path, replica: str) -> str:
    return os.path.relpath(replica, root)


def _opt(v: Any) -> Any:
    return None if v is None or v != v else int(v)


def test_scan_equals_local_scanner(cluster, local, scanned):
    trees = T.trees_from_table(scanned["chunks"])
    assert set(trees) == set(local)
    for key, r in local.items():
        assert trees[key] == r.tree, key
    reps = scanned["replicas"].set_index(["datanode", "container"])
    for key, r in local.items():
        row = reps.loc[key]
        assert _opt(row["data_checksum"]) == r.tree.data_checksum
        assert int(row["bytes_read"]) == r.bytes_read
        assert (int(row["blocks"]), int(row["chunks"])) == (r.blocks, r.chunks)


def test_scan_through_a_uri_equals_the_path_scan(spark, cluster, scanned):
    root, _ = cluster
    st = scan_replicas(spark, ["file://" + str(root)])  # pyarrow.fs on the executors
    assert T.trees_from_table(T.to_arrow(st.chunks)) == T.trees_from_table(scanned["chunks"])
    got = sorted((r.replica, r.error, r.block, r.offset) for r in st.errors.collect())
    e = scanned["errors"]
    want = sorted(
        ("file://" + rep, kind, _opt(b), _opt(o))
        for rep, kind, b, o in zip(e["replica"], e["error"], e["block"], e["offset"])
    )
    assert got == want


def test_a_replica_that_cannot_be_read_is_an_error_row(spark, tmp_path):
    root = tmp_path / "c"
    generate_cluster(root, containers=2, seed=9)
    broken = find_containers(root)[0]
    broken.paths.blockmeta.unlink()
    broken.paths.blockmeta.mkdir()  # a directory where the .blocks file belongs: never opened
    st = scan_replicas(spark, [str(root)])
    errs = [(r.replica, r.error) for r in st.errors.collect()]
    assert errs == [(str(broken.root), "NOT_A_REGULAR_FILE")]
    reps = {r.replica: r for r in st.replicas.collect()}
    assert len(reps) == 6 and not reps[str(broken.root)].ok
    assert all(r.ok for p, r in reps.items() if p != str(broken.root))


def test_scan_errors_are_exactly_the_manifest(cluster, scanned):
    root, manifest = cluster
    e = scanned["errors"]
    found: Dict[str, List[Tuple[str, Any, Any]]] = {}
    for rep, kind, b, o in zip(e["replica"], e["error"], e["block"], e["offset"]):
        found.setdefault(_rel(root, rep), []).append((kind, _opt(b), _opt(o)))
    want = {
        rep: sorted((x["error"], x["block_id"], x["offset"]) for x in es)
        for rep, es in manifest["expected_errors"].items()
        if es
    }

    def key(k: Tuple[str, Any, Any]) -> Tuple[str, Any, Any]:  # None sorts as 0
        return (k[0], k[1] or 0, k[2] or 0)

    assert {r: sorted(v, key=key) for r, v in found.items()} == {
        r: sorted(v, key=key) for r, v in want.items()
    }


def _reference_pulls(local) -> Set[Tuple[int, str, str, int, Any, Tuple[str, ...]]]:
    """Every (container, target, kind, block, offset, sources) merkle.diff finds."""
    by_c: Dict[int, Dict[str, Any]] = {}
    for (dn, cid), r in local.items():
        by_c.setdefault(cid, {})[dn] = r.tree
    items: Dict[Tuple[int, str, str, int, Any], List[str]] = {}
    for cid, trees in by_c.items():
        for t in sorted(trees):
            for p in sorted(trees):
                if p == t:
                    continue
                d = merkle.diff(trees[t], trees[p])
                for b in d.missing_blocks.tolist():
                    items.setdefault((cid, t, "MISSING_BLOCK", b, None), []).append(p)
                for b in d.diverged_deleted_blocks.tolist():
                    items.setdefault((cid, t, "DIVERGED_DELETED_BLOCK", b, None), []).append(p)
                for kind, m in (
                    ("MISSING_CHUNK", d.missing_chunks),
                    ("CORRUPT_CHUNK", d.corrupt_chunks),
                ):
                    for b, offs in m.items():
                        for o in offs.tolist():
                            items.setdefault((cid, t, kind, b, o), []).append(p)
    return {k + (tuple(v),) for k, v in items.items()}


def test_diff_equals_merkle_diff(local, diffed):
    got = {
        (p["container"], p["datanode"], p["kind"], p["block"], p["offset"], tuple(p["sources"]))
        for p in diffed["pulls"]
    }
    assert got == _reference_pulls(local)
    assert len(got) == len(diffed["pulls"])  # no duplicates


def test_diff_finds_exactly_the_injected_faults(cluster, diffed):
    root, manifest = cluster
    pulls = {
        (_rel(root, p["replica"]), p["block"], p["offset"]): p["kind"] for p in diffed["pulls"]
    }
    unrec = {
        (u["container_id"], u["block_id"], u["offset"]) for u in manifest["unrepairable_chunks"]
    }
    # every damaged chunk / block is pulled from a peer (unless no peer has it healthy)
    kinds = {
        "CORRUPT_CHUNK": "CORRUPT_CHUNK",
        "INCONSISTENT_CHUNK_LENGTH": "CORRUPT_CHUNK",
        "MISSING_CHUNK": "MISSING_CHUNK",
        "MISSING_DATA_FILE": "MISSING_BLOCK",
    }
    for rep, errs in manifest["expected_errors"].items():
        cid = int(Path(rep).name)
        for e in errs:
            if e["error"] not in kinds or (cid, e["block_id"], e["offset"]) in unrec:
                continue
            assert pulls.get((rep, e["block_id"], e["offset"])) == kinds[e["error"]], (rep, e)
    # no false alarms: only replicas of faulted containers pull anything, and only those
    # a fault touched (or, for extra-block and metadata faults, whose peers gained data)
    faulted = {f["container_id"] for f in manifest["faults"]}
    assert {int(Path(r).name) for r, _, _ in pulls} <= faulted
    for c, row in diffed["containers"].items():
        if c not in faulted:
            assert row["state"] == "MATCH"
    # unrecoverable: exactly the chunks corrupted on every replica
    assert {(u["container"], u["block"], u["offset"]) for u in diffed["unrec"]} == unrec
    # tombstones: every replica still holding the block live adopts the tombstone or, when
    # the tombstone alone left the values equal (Ozone keeps its value), reports it pending
    told = {(_rel(root, p["replica"]), p["block"]) for p in diffed["pending"]}
    for (rep, b, _), kind in pulls.items():
        if kind == "DIVERGED_DELETED_BLOCK":
            told.add((rep, b))
    want = set()
    for f in manifest["faults"]:
        if f["type"] == "tombstone":
            reps = manifest["containers"][str(f["container_id"])]["replicas"]
            want |= {(r, f["block_id"]) for r in reps if r not in f["replicas"]}
    assert want and told == want


def test_diff_on_tables_with_tombstones_and_huge_ids(spark):
    big = 2**62 + 3
    a = merkle.TreeBuilder(5)
    a.add_chunk(big, 0, data=b"a" * 100)
    a.add_chunk(big, 100, data=b"b" * 100)
    a.add_chunk(7, 0, data=b"c" * 10)
    ta = a.build()
    b = merkle.TreeBuilder(5)
    b.add_chunk(big, 0, data=b"a" * 100)
    b.add_chunk(big, 100, data=b"X" * 100)
    b.mark_deleted(7, value=12345)
    tb = b.build()
    c = merkle.ContainerTree.empty(5)
    t = pa.concat_tables([T.tree_to_rows("a", ta), T.tree_to_rows("b", tb), T.tree_to_rows("c", c)])
    for name, tree in (("a", ta), ("b", tb), ("c", c)):
        assert T.tree_from_rows(5, t.filter(pa.compute.equal(t["datanode"], name))) == tree
    res = diff_chunks(T.from_arrow(spark, t))
    got = {(p.datanode, p.kind, p.block, p.offset, tuple(p.sources)) for p in res.pulls.collect()}
    ref = _reference_pulls({("a", 5): _R(ta), ("b", 5): _R(tb), ("c", 5): _R(c)})
    assert got == {k[1:] for k in ref}
    assert any(k[2] == big for k in got)  # the 64-bit ID survived the round trip
    # a adopts b's tombstone of block 7 (the values differ anyway): a pull, not pending
    assert ("a", "DIVERGED_DELETED_BLOCK", 7, None, ("b",)) in got
    assert res.pending_deletions.count() == 0
    row = res.containers.collect()[0]
    assert (row.n_replicas, row.state) == (3, "MISMATCH")
    assert row.unhealthy_chunks_filtered == 0
    # healthy replicas differ at (big, 100): unrecoverable
    assert [(u.block, u.offset, u.reason) for u in res.unrecoverable.collect()] == [
        (big, 100, "healthy replicas differ")
    ]


class _R:
    def __init__(self, tree):
        self.tree = tree


def test_diff_counts_unhealthy_chunks_filtered(spark):
    """Ozone's numUnhealthyChunksFiltered in the containers table: peer chunks no pull can
    take (only in the peer and unhealthy there, or unhealthy on both sides)."""
    a = merkle.TreeBuilder(3)
    a.add_chunk(1, 0, leaf=11, checksum_matches=False)
    a.add_chunk(1, 100, leaf=12, checksum_matches=False)
    b = merkle.TreeBuilder(3)
    b.add_chunk(1, 0, leaf=21, checksum_matches=False)
    ta, tb = a.build(), b.build()
    want = sum(merkle.diff(x, y).unhealthy_chunks_filtered for x, y in ((ta, tb), (tb, ta)))
    assert want == 3  # each from the other at 0 (both unhealthy); b from a at 100 (only in a)
    t = pa.concat_tables([T.tree_to_rows("a", ta), T.tree_to_rows("b", tb)])
    res = diff_chunks(T.from_arrow(spark, t))
    row = res.containers.collect()[0]
    assert row.unhealthy_chunks_filtered == want and res.pulls.count() == 0


def test_repair_plan_respects_the_datanode_limit():
    pulls = [
        dict(
            container=c,
            datanode="dn0",
            replica=None,
            kind="MISSING_CHUNK",
            block=1,
            offset=0,
            length=10,
            sources=["dn1", "dn2"],
            source_replicas=[],
        )
        for c in range(50)
    ]
    plan = repair_plan(pulls, limit=20)
    assert len(plan) == 50
    for r in {p["round"] for p in plan}:
        cmds = [p for p in plan if p["round"] == r]
        for dn in ("dn0", "dn1", "dn2"):
            assert sum(dn in (p["target"], p["source"]) for p in cmds) <= 20
    srcs = [p["source"] for p in plan]
    assert abs(srcs.count("dn1") - srcs.count("dn2")) <= 1  # spread over sources
    with pytest.raises(ValueError):
        repair_plan(pulls, limit=0)


def test_plan_commands_on_the_executors(spark):
    """plan_commands: every pull item in exactly one command, a target in at most `limit`
    commands per round, the items of a (container, target) with the same candidates from
    one source, sources spread over the candidates."""
    from spark_udfs.jobs.diff import PULL_SCHEMA, plan_commands

    rows = [
        (
            c,
            "dn0",
            f"/c/dn0/{c}",
            kind,
            b,
            None if kind == "MISSING_BLOCK" else 0,
            10,
            ["dn1", "dn2"],
            [f"/c/dn1/{c}", f"/c/dn2/{c}"],
            None,
            None,
        )
        for c in range(50)
        for b, kind in ((1, "MISSING_CHUNK"), (2, "MISSING_BLOCK"))
    ]
    pulls = spark.createDataFrame(rows, PULL_SCHEMA)
    cmds = [r.asDict(recursive=True) for r in plan_commands(pulls, limit=20).collect()]
    assert len(cmds) == 50  # one source per (container, target)
    assert sorted((c["container"], i["block"]) for c in cmds for i in c["items"]) == sorted(
        (r[0], r[4]) for r in rows
    )
    for r in {c["round"] for c in cmds}:
        assert sum(c["target"] == "dn0" for c in cmds if c["round"] == r) <= 20
    assert sorted({c["round"] for c in cmds}) == [0, 1, 2]
    srcs = [c["source"] for c in cmds]
    assert 10 <= srcs.count("dn1") <= 40  # spread by hash, not all on one
    assert all(
        c["source_replica"] == f"/c/{c['source']}/{c['container']}"
        and c["target_replica"] == f"/c/dn0/{c['container']}"
        and c["bytes"] == 20
        for c in cmds
    )
    with pytest.raises(ValueError):
        plan_commands(pulls, limit=0)


def test_a_tombstone_alone_is_a_pending_deletion_not_a_mismatch(spark):
    live = merkle.TreeBuilder(9)
    live.add_chunk(4, 0, data=b"q" * 50)
    live.add_chunk(6, 0, data=b"r" * 50)
    t_live = live.build()
    gone = merkle.TreeBuilder(9)
    gone.add_chunk(4, 0, data=b"q" * 50)
    gone.mark_deleted(6, value=int(t_live.block_value[1]))  # Ozone keeps the value
    t_gone = gone.build()
    assert t_live.data_checksum == t_gone.data_checksum
    t = pa.concat_tables(
        [
            T.tree_to_rows("dn0", t_live, "/r0"),
            T.tree_to_rows("dn1", t_gone),
            T.tree_to_rows("dn2", t_gone),
        ]
    )
    res = diff_chunks(T.from_arrow(spark, t))
    assert res.pulls.count() == 0
    assert [
        (r.datanode, r.replica, r.block, list(r.deleted_on))
        for r in res.pending_deletions.collect()
    ] == [("dn0", "/r0", 6, ["dn1", "dn2"])]
    assert res.containers.collect()[0].state == "MATCH"
    rep = build_report(res)
    assert rep["summary"]["PENDING_DELETION"] == 1 and rep["summary"]["MISMATCHED"] == 0
    assert rep["pending_deletions"][0]["deleted_on"] == ["dn1", "dn2"]
    assert "live on dn0, deleted on dn1, dn2" in format_text(rep)


def test_report_states_and_json(cluster, scanned, diffed):
    root, manifest = cluster
    st = scanned["tables"]
    rep = build_report(diffed["res"], replicas=st.replicas, errors=st.errors)
    s = rep["summary"]
    assert s["MATCH"] + s["MISMATCHED"] == len(manifest["containers"])
    assert s["UNRECOVERABLE"] == len({u["container_id"] for u in manifest["unrepairable_chunks"]})
    assert s["UNDER_REPLICATED"] == s["OVER_REPLICATED"] == s["MISSING"] == 0
    assert set(rep["containers"]["MISMATCHED"]) == {
        c for c, r in diffed["containers"].items() if r["state"] == "MISMATCH"
    }
    text = format_text(rep)
    assert "MISMATCHED: " in text and "First 100 MISMATCHED containers:" in text
    json.dumps(rep)
    for e in rep["reconcile"]:
        assert e["argv"][:3] == ["crcmerkle", "reconcile", e["replica"]]


def test_trees_only_reads_stored_trees(spark, cluster):
    root, manifest = cluster
    st = scan_replicas(spark, [str(root)], trees_only=True)
    errs = {(_rel(root, r.replica), r.error) for r in st.errors.collect()}
    want = {
        (rep, e["error"])
        for rep, es in manifest["expected_errors"].items()
        for e in es
        if e["error"] in ("TREE_MISSING", "TREE_CORRUPT")
    }
    assert errs == want
    trees = T.trees_from_table(T.to_arrow(st.chunks))
    for loc in find_containers(root):
        if (_rel(root, str(loc.root)), "TREE_MISSING") in want or (
            _rel(root, str(loc.root)),
            "TREE_CORRUPT",
        ) in want:
            continue
        assert trees[(loc.volume.parent.name, loc.container_id)] == merkle.read_tree(loc.paths.tree)


def test_bad_paths_and_tables(spark, tmp_path):
    with pytest.raises(FileNotFoundError):
        scan_replicas(spark, [str(tmp_path / "nope")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no container replica"):
        scan_replicas(spark, [str(tmp_path / "empty")])
    with pytest.raises(ValueError, match="lacks column"):
        diff_chunks(spark.createDataFrame([(1, 2)], "container long, block long"))


def test_output_files_follow_the_rows_not_the_tasks(spark, cluster, tmp_path):
    """One task per replica, yet one Parquet file per small table and datanode
    (ScanTables.write sizes files by rows, partitions by datanode); the scan itself still
    ran on every task."""
    root, _ = cluster
    n = len(find_containers(root))
    st = scan_replicas(spark, [str(root)], partitions=n)
    assert st.stage.rdd.getNumPartitions() == n
    paths = st.write(str(tmp_path / "o"))
    for name, p in paths.items():
        parts = sorted(Path(p).glob("datanode=*"))
        assert parts and not list(Path(p).glob("part-*.parquet")), name
        for d in parts:
            assert len(list(d.glob("part-*.parquet"))) == 1, (name, d)
    assert spark.read.parquet(paths["containers"]).count() == n


def test_to_arrow_keeps_nullable_64_bit_values_exact(spark):
    """The tables' collection (spark_udfs.tables.to_arrow) on every PySpark: a nullable 64-bit
    column beyond 2**53 comes back exact and its null stays null. PySpark 3.5 has no toArrow,
    and its toPandas turns such a column into float64 (2**62 + 3 became 2**62)."""
    big = [2**62 + 3, -(2**63), 2**63 - 1, 2**53 + 1]
    df = spark.createDataFrame([(v,) for v in big] + [(None,)], "v bigint")
    got = T.to_arrow(df.orderBy(df.v.asc_nulls_last()))
    assert got.schema.field("v").type == pa.int64()
    assert got.column("v").to_pylist() == sorted(big) + [None]
