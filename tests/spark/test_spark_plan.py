"""The decommission/maintenance plan: HDDS-1881's cases, each also with a disagreeing or
corrupt replica, and a plan carried out with `crcmerkle replicate` that lets the node stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pyarrow as pa
import pytest

from merkle.cli import main
from merkle.trees.model import ContainerTree
from spark_udfs.jobs.diff import diff_chunks
from spark_udfs.jobs.plan import (
    DECOMMISSIONING,
    MAINTENANCE,
    build_plan,
    copy_commands,
    may_decommission,
    may_enter_maintenance,
    plan_tables,
    replica_table,
    replicas_missing,
)
from spark_udfs.tables import from_arrow, tree_to_rows

D, M, I = DECOMMISSIONING, MAINTENANCE, "IN_SERVICE"  # noqa: E741 (the states' initials)


def test_the_formula_on_the_design_documents_examples():
    # (healthy, maintenance) -> replica count, as HDDS-1881's tables give it (expected 3)
    table = {
        (3, 0): 0,
        (2, 0): 1,
        (1, 0): 2,
        (0, 0): 3,
        (2, 1): 0,
        (1, 1): 1,
        (0, 1): 2,
        (0, 3): 1,
        (4, 0): -1,
        (3, 1): 0,
        (2, 2): 0,
    }
    for (h, m), want in table.items():
        assert replicas_missing(3, h, m) == want, (h, m)
    assert replicas_missing(3, 1, 2, maintenance_min=2) == 1
    assert may_decommission(1, 2) and not may_decommission(0, 3) and not may_decommission(2, 0)
    assert may_enter_maintenance(1) and not may_enter_maintenance(1, maintenance_min=2)


# ---- the formula cases, in Spark --------------------------------------------------------


def _tree(cid: int, kind: str) -> ContainerTree:
    """A replica: "ok", "corrupt" (an unhealthy chunk, so another value) or "disagrees"
    (clean, with a block the others lack)."""
    blocks = [1, 1, 2, 2] + ([3] if kind == "disagrees" else [])
    offs = [0, 100, 0, 100] + ([0] if kind == "disagrees" else [])
    leaf = np.array([11, 12, 21, 22, 31][: len(blocks)], dtype=np.int64) + cid * 1000
    ok = np.ones(len(blocks), dtype=bool)
    if kind == "corrupt":
        leaf[1] ^= 0x5A5A
        ok[1] = False
    return ContainerTree.from_columns(
        cid, blocks, offs, [100] * len(blocks), leaf=leaf, checksum_matches=ok
    )


#: name -> (states of the replicas (None: the node is dead, no replica), the replicas' kinds,
#:          Ozone's (missing, leaving nodes may stop), ours (missing, may stop, reasons))
CASES: Dict[str, Tuple[List[Any], List[str], Tuple[int, bool], Tuple[int, bool, set]]] = {
    "all healthy": ([I, I, I], ["ok"] * 3, (0, True), (0, True, set())),
    "all healthy, one corrupt": ([I, I, I], ["ok", "ok", "corrupt"], (0, True), (1, True, set())),
    "one failure": ([I, I, None], ["ok", "ok", "ok"], (1, True), (1, True, set())),
    "one failure, one disagrees": (
        [I, I, None],
        ["ok", "disagrees", "ok"],
        (1, True),
        (3, True, set()),
    ),  # a 1:1 tie: no good copy
    "one decommissioning": ([I, I, D], ["ok"] * 3, (1, False), (1, False, {"UNDER_REPLICATED"})),
    "one decommissioning, it disagrees": (
        [I, I, D],
        ["ok", "ok", "disagrees"],
        (1, False),
        (1, False, {"UNDER_REPLICATED", "ONLY_COPY"}),
    ),
    "failure + decommission": (
        [I, None, D],
        ["ok", "ok", "ok"],
        (2, False),
        (2, False, {"UNDER_REPLICATED"}),
    ),
    "failure + decommission, in-service corrupt": (
        [I, None, D],
        ["corrupt", "ok", "ok"],
        (2, False),
        (3, False, {"LAST_GOOD_COPY"}),
    ),
    "all three decommissioned": ([D, D, D], ["ok"] * 3, (3, False), (3, False, {"LAST_GOOD_COPY"})),
    "all three decommissioned, one corrupt": (
        [D, D, D],
        ["corrupt", "ok", "ok"],
        (3, False),
        (3, False, {"LAST_GOOD_COPY", "UNDER_REPLICATED"}),
    ),
    "maintenance of two": ([I, M, M], ["ok"] * 3, (0, True), (0, True, set())),
    "maintenance of two, in-service corrupt": (
        [I, M, M],
        ["corrupt", "ok", "ok"],
        (0, True),
        (1, False, {"LAST_GOOD_COPY"}),
    ),
    "4 replicas, decommission the only good one": (
        [D, I, I, I],
        ["ok", "corrupt", "corrupt", "corrupt"],
        (0, True),
        (3, False, {"LAST_GOOD_COPY"}),
    ),
}
#: maintenance-min 2 (Ozone's newer default keeps two in service)
CASES_MM2 = {
    "maintenance of two": ([I, M, M], ["ok"] * 3, (1, False), (1, False, {"UNDER_REPLICATED"})),
    "maintenance of two, in-service corrupt": (
        [I, M, M],
        ["corrupt", "ok", "ok"],
        (1, False),
        (2, False, {"LAST_GOOD_COPY"}),
    ),
}


def _cluster(
    spark: Any, cases: Dict[str, Any], tmp: Path
) -> Tuple[Any, Dict[str, str], Dict[str, int]]:
    """Every case as its own container on its own datanodes, plus three spare in-service
    datanodes (a filler container) to copy to; read back from Parquet, as a real scan is (a
    DataFrame made from local rows carries them in every branch of the plan)."""
    tables, leaving, cid_of = [], {}, {}
    for k, (name, (states, kinds, _, _)) in enumerate(sorted(cases.items())):
        cid = k + 1
        cid_of[name] = cid
        for j, (st, kind) in enumerate(zip(states, kinds)):
            dn = f"c{cid}n{j}"
            if st is None:
                continue  # dead: its replica is not in the scan
            if st != I:
                leaving[dn] = st
            tables.append(tree_to_rows(dn, _tree(cid, kind), f"/x/{dn}/vol0/{cid}"))
    for j in range(3):
        tables.append(tree_to_rows(f"spare{j}", _tree(999, "ok"), f"/x/spare{j}/vol0/999"))
    path = str(tmp / "chunks.parquet")
    from_arrow(spark, pa.concat_tables(tables)).write.parquet(path)
    return spark.read.parquet(path), leaving, cid_of


@pytest.mark.parametrize(
    "maintenance_min,cases",
    [(1, CASES), (2, CASES_MM2)],
    ids=["maintenance-min 1", "maintenance-min 2"],
)
def test_hdds_1881_cases_with_and_without_checksums(spark, tmp_path, maintenance_min, cases):
    chunks, leaving, cid_of = _cluster(spark, cases, tmp_path)
    diff = diff_chunks(chunks)
    reps = replica_table(diff, None, leaving)
    r, c, held = plan_tables(
        diff, reps, leaving, 3, maintenance_min=maintenance_min, every_container=True
    )
    rows = {int(x["container"]): x for x in c.collect()}
    why: Dict[int, set] = {}
    ozone_held: Dict[int, bool] = {}
    for h in held.collect():
        why.setdefault(int(h["container"]), set()).update(h["reasons"])
        ozone_held[int(h["container"])] = (
            ozone_held.get(int(h["container"]), False) or not h["ozone_ok"]
        )
    for name, (_states, _kinds, (o_missing, o_stop), (missing, stop, reasons)) in cases.items():
        x = rows[cid_of[name]]
        got = (
            int(x["ozone_missing"]),
            not ozone_held.get(cid_of[name], False),
            int(x["missing"]),
            not x["holds_back"],
            why.get(cid_of[name], set()),
        )
        assert got == (o_missing, o_stop, missing, stop, reasons), name


def test_plan_commands_copy_from_good_replicas_to_free_nodes(spark, tmp_path):
    chunks, leaving, cid_of = _cluster(spark, CASES, tmp_path)
    decom = sorted(d for d, s in leaving.items() if s == D)
    maint = sorted(d for d, s in leaving.items() if s == M)
    plan = build_plan(
        diff_chunks(chunks), decommission=decom, maintenance=maint, chunks=chunks, first=50
    )
    cmds = plan["copy_plan"]["commands"]
    only_good = cid_of["4 replicas, decommission the only good one"]
    mine = [c for c in cmds if c["container"] == only_good]
    # the only good copy is on the leaving node: it is the source, three new copies
    assert len(mine) == 3 and {c["source"] for c in mine} == {f"c{only_good}n0"}
    assert all(c["source_leaving"] for c in mine)
    # targets: in-service datanodes holding no replica of it, each once
    assert len({c["target"] for c in mine}) == 3
    assert all(
        c["target"] not in leaving and not c["target"].startswith(f"c{only_good}n") for c in mine
    )
    assert plan["summary"]["would_lose"] >= 1 and only_good in plan["containers"]["WOULD_LOSE"]
    assert only_good in plan["containers"]["OZONE_WOULD_ALLOW"]
    corrupt = cid_of["all three decommissioned, one corrupt"]
    assert all(c["source"] != f"c{corrupt}n0" for c in cmds if c["container"] == corrupt)
    # fewest good copies first; a datanode at most `limit` times per round
    assert [c["good_copies"] for c in cmds if c["round"] == 0] == sorted(
        c["good_copies"] for c in cmds if c["round"] == 0
    )
    assert all(c["argv"][:2] == ["crcmerkle", "replicate"] for c in cmds)


def test_copy_commands_spread_bytes_and_respect_the_limit():
    needs = [
        {
            "container": i,
            "good_copies": 1,
            "need": 1,
            "planned": 0,
            "bytes": 100 + i,
            "sources": [("a", f"/a/v/{i}", False)],
            "holders": {"a"},
        }
        for i in range(6)
    ]
    cmds = copy_commands(needs, ["a", "b", "c"], {"b": ["/b/v0", "/b/v1"], "c": ["/c/v"]}, limit=2)
    assert [c["round"] for c in cmds] == [0, 0, 1, 1, 2, 2]
    assert {c["target"] for c in cmds} == {"b", "c"}
    per = {t: sum(c["bytes"] for c in cmds if c["target"] == t) for t in ("b", "c")}
    assert abs(per["b"] - per["c"]) <= 105  # least bytes planned first
    assert {c["target_replica"].rsplit("/", 1)[0] for c in cmds if c["target"] == "b"} == {
        "/b/v0",
        "/b/v1",
    }


# ---- end to end: plan, replicate, plan again --------------------------------------------


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_a_carried_out_plan_lets_the_nodes_stop(spark, tmp_path, capsys):
    from merkle.replica.generate import generate_cluster, parse_faults

    root = tmp_path / "cluster"
    m = generate_cluster(
        root,
        faults=parse_faults("bitflip=2,truncate=1"),
        containers=8,
        datanodes=7,
        seed=11,
        block_size=48 * 1024,
        chunk_size=16 * 1024,
        bytes_per_checksum=4096,
        min_blocks=2,
        max_blocks=3,
    )
    assert m["faults"]
    conf = ["--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=4"]
    scan = str(tmp_path / "scan")
    assert main(["spark", "scan", str(root), "-o", scan, *conf]) == 1  # the faults
    plan_file = tmp_path / "plan.json"
    rc = main(
        [
            "spark",
            "plan",
            scan,
            "--decommission",
            "dn0",
            "--maintenance",
            "dn1",
            "--report",
            str(plan_file),
            *conf,
        ]
    )
    text = capsys.readouterr().out
    assert rc == 1 and "dn0 (decommission): NOT yet" in text
    plan = json.loads(plan_file.read_text())
    assert plan["format"] == "crcmerkle-spark-plan" and plan["summary"]["copies"] > 0
    # the diff's repair plan is another kind: `replicate --report` refuses it in one line
    assert main(["spark", "diff", scan, "-o", str(tmp_path / "diff"), *conf]) == 1
    repair = tmp_path / "diff" / "plan.json"
    assert json.loads(repair.read_text())["format"] == "crcmerkle-spark-repair-plan"
    capsys.readouterr()
    assert main(["replicate", "--report", str(repair)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "crcmerkle-spark-plan" in err
    assert all(n["can_stop_after_copies"] for n in plan["datanodes"]), plan["datanodes"]
    assert main(["replicate", "--report", str(plan_file)]) == 0
    spark.catalog.clearCache()
    scan2 = str(tmp_path / "scan2")
    assert main(["spark", "scan", str(root), "-o", scan2, *conf]) == 1  # still there
    capsys.readouterr()
    rc = main(
        ["spark", "plan", scan2, "--decommission", "dn0", "--maintenance", "dn1", "--json", *conf]
    )
    after = json.loads(capsys.readouterr().out)
    assert rc == 0, after["datanodes"]
    assert after["summary"]["may_stop_now"] == 2 and after["summary"]["copies"] == 0
    assert main(["spark", "plan", scan2, "--decommission", "nope", *conf]) == 2
    assert "nope" in capsys.readouterr().err


# ---- a scan that read nothing: no plan (exit 2) ------------------------------------------


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_plan_and_run_exit_2_when_nothing_was_read(spark, tmp_path, capsys):
    from merkle.replica.generate import generate_cluster

    root = tmp_path / "c"
    generate_cluster(root, containers=2, seed=5)
    metas = sorted(root.glob("*/*/*/metadata/*.blocks"))
    scan = str(tmp_path / "scan")
    for meta in metas[:2]:  # 4 of 6 replicas still readable
        meta.unlink()
    assert main(["spark", "scan", str(root), "-o", scan]) == 1
    capsys.readouterr()
    args = ["spark", "plan", scan, "--decommission", "dn0"]
    assert main(args + ["--min-read-fraction", "0.5"]) in (0, 1)
    assert capsys.readouterr().err == ""
    assert main(args + ["--min-read-fraction", "0.9"]) == 2
    err = capsys.readouterr().err
    assert (
        "only 4 of 6 replica(s) were read (66.7% < --min-read-fraction 0.9)" in err
        and err.count("\n") == 1
    )
    for meta in metas[2:]:  # now none
        meta.unlink()
    assert main(["spark", "scan", str(root), "-o", scan]) == 2
    capsys.readouterr()
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert (
        err.startswith("crcmerkle: error: none of the 6 replica(s) could be read")
        and err.count("\n") == 1
        and out == ""
    )
    assert (
        main(["spark", "run", str(root), "-o", str(tmp_path / "o"), "--decommission", "dn0"]) == 2
    )
    assert "none of the 6 replica(s) could be read" in capsys.readouterr().err


# ---- Ozone volumes: the datanodes make the copies ------------------------------------------


def _ozone_path(dn: str, cid: int) -> str:
    return f"/data/{dn}/hdds/CID-1/current/containerDir0/{cid}"


def test_copy_commands_on_ozone_volumes_have_no_argv():
    needs = [
        {
            "container": 7,
            "good_copies": 1,
            "need": 2,
            "planned": 0,
            "bytes": 10,
            "sources": [("a", _ozone_path("a", 7), True)],
            "holders": {"a", "b"},
        }
    ]
    vols = {d: [_ozone_path(d, 7).rsplit("/", 1)[0]] for d in "bcd"}
    cmds = copy_commands(needs, ["b", "c", "d"], vols)
    assert [(c["source"], c["target"]) for c in cmds] == [("a", "c"), ("a", "d")]
    assert all(
        "argv" not in c
        and c["target_replica"] is None
        and c["by"] == "ozone"
        and c["source_replica"] == _ozone_path("a", 7)
        for c in cmds
    )
    # the crcmerkle layout keeps its argv
    needs[0].update(planned=0, sources=[("a", "/x/a/vol0/7", True)])
    cmds = copy_commands(needs, ["b", "c", "d"], {d: [f"/x/{d}/vol0"] for d in "bcd"})
    assert all(
        c["argv"] == ["crcmerkle", "replicate", "/x/a/vol0/7", c["target_replica"]]
        and c["by"] == "crcmerkle replicate"
        for c in cmds
    )


def test_a_plan_on_ozone_volumes_leaves_the_copies_to_ozone(spark, tmp_path, capsys):
    from spark_udfs.jobs.plan import format_text, to_json

    tables = [
        tree_to_rows(dn, _tree(1, kind), _ozone_path(dn, 1))
        for dn, kind in (("leaving", "ok"), ("a", "corrupt"), ("b", "corrupt"), ("c", "corrupt"))
    ]
    tables += [tree_to_rows(f"s{j}", _tree(9, "ok"), _ozone_path(f"s{j}", 9)) for j in range(3)]
    path = str(tmp_path / "chunks.parquet")
    from_arrow(spark, pa.concat_tables(tables)).write.parquet(path)
    chunks = spark.read.parquet(path)
    plan = build_plan(diff_chunks(chunks), decommission=["leaving"], chunks=chunks)
    cp = plan["copy_plan"]
    assert cp["carried_out_by"] == "ozone" and len(cp["commands"]) == 3
    assert all(
        "argv" not in c and c["source"] == "leaving" and c["target"].startswith("s")
        for c in cp["commands"]
    )
    # no host known (no host column, no inventory): no command names the datanode's
    # identity as if it were a host; the text asks for --datanodes
    assert plan["ozone"]["datanodes"] == [{"datanode": "leaving", "host": None}]
    assert [e["containerID"] for e in plan["ozone"]["reconcile_first"]] == [1]
    text = format_text(plan)
    assert "ReplicationManager" in text and "ozone admin container reconcile 1" in text
    assert "crcmerkle replicate --report" not in text
    assert "ozone admin datanode decommission" not in text and "--datanodes FILE" in text
    # and `replicate --report` finds nothing it could run
    f = tmp_path / "plan.json"
    f.write_text(to_json(plan))
    assert main(["replicate", "--report", str(f)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    # issue 36 item 5: a command is printed shell-quoted, whatever its words (a layout's argv)
    plan["ozone"]["datanodes"] = [
        {
            "datanode": "leaving",
            "host": "h1",
            "argv": ["ozone", "admin", "datanode", "decommission", "h1; id"],
        }
    ]
    plan["ozone"]["reconcile_first"] = [{"containerID": 1, "argv": ["ozone", "$(id)"]}]
    text = format_text(plan)
    assert "  ozone admin datanode decommission 'h1; id'\n" in text
    assert "  ozone '$(id)'\n" in text
    # issue 36 item 7: a plan over a census says that no data was read, never "read 4 of 4"
    assert plan["read"]["data_read"] == 7  # plan_read counts the replicas whose data was read
    plan["read"]["data_read"] = 0  # as after a census (--metadata-only) or --trees-only
    text = format_text(plan)
    assert "NO DATA READ: 7 of 7 replica(s)" in text and "read 7 of 7" not in text
    plan["read"]["data_read"] = 7
    assert "read 7 of 7 replica(s) of the scan" in format_text(plan)


# ---- the demo's decommission step -----------------------------------------------------------


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_the_demo_step_blocks_the_node_and_its_copies_make_it_safe(spark, tmp_path):
    from spark_udfs.cli.demodir import DEMO_ENTRIES
    from spark_udfs.demo.decommission import run_plan_demo

    said: List[str] = []
    assert run_plan_demo(tmp_path, spark, said.append, demo_layout="ozone") is True
    text = "\n".join(said)
    assert "would let dn7 be DECOMMISSIONED now" in text and "dn7 may stop now" in text
    assert "UNEXPECTED" not in text
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["containers"]["WOULD_LOSE"] == [1] and plan["summary"]["copies"] == 3
    # a re-run of the demo accepts what the step wrote, and a failed one removes it
    assert {p.name for p in tmp_path.iterdir()} <= DEMO_ENTRIES


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_the_ozone_demo_runs_the_decommission_step(spark, tmp_path, monkeypatch):
    import spark_udfs.demo.decommission as plan_demo
    from spark_udfs.demo import run_demo

    calls: List[Dict[str, Any]] = []

    def step(work, spark_, say, demo_layout="crcmerkle"):
        calls.append({"work": work, "layout": demo_layout})
        return False  # the step's verdict must reach the result

    monkeypatch.setattr(plan_demo, "run_plan_demo", step)
    (tmp_path / "d").mkdir()
    res = run_demo(tmp_path / "d", layout="ozone", say=lambda s: None)
    assert calls == [{"work": tmp_path / "d", "layout": "ozone"}]
    assert res.findings.exact and res.plan_ok is False and not res.ok
