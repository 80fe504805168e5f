"""Issue 28 point 1 in the Spark jobs: a container whose replicas have only warnings (an OPEN
replica, a missing `.tree`, a file no block_data row names) is neither UNHEALTHY nor
MISMATCHED; the report counts it under WARNINGS; --strict counts the warnings (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from merkle.cli import main  # noqa: E402
from merkle.replica.generate import generate_cluster, parse_faults  # noqa: E402

WARNING_FAULTS = "open-container=1,tree-missing=1,file-without-db-entry=1"


def run(capsys: Any, *argv: Any) -> Any:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_a_container_with_only_warnings_is_not_unhealthy_nor_mismatched(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    root = tmp_path / "c"
    manifest = generate_cluster(
        root, faults=parse_faults(WARNING_FAULTS, "ozone"), containers=3, seed=1, layout="ozone"
    )
    warned = sorted({int(f["container_id"]) for f in manifest["faults"]})
    opened = next(
        int(f["container_id"]) for f in manifest["faults"] if f["type"] == "open-container"
    )
    st, out, _ = run(capsys, "spark", "scan", root, "-o", tmp_path / "s")
    assert st == 0 and "0 error(s), 3 warning(s)" in out
    st, out, _ = run(capsys, "spark", "report", tmp_path / "s", "--json")
    rep = json.loads(out)
    assert st == 0, rep["summary"]
    assert rep["summary"]["MISMATCHED"] == 0 and rep["summary"]["UNHEALTHY"] == 0
    assert rep["summary"]["MATCH"] == 3 and rep["containers"]["WARNINGS"] == warned
    # no repair into the OPEN replica (its empty tree is no observation of its data)
    assert rep["repair_plan"]["total"] == 0 and not rep["mismatched"]
    assert not rep["ozone_reconcile"] and rep["strict"] is False
    st, out, _ = run(capsys, "spark", "report", tmp_path / "s")
    assert st == 0 and f"WARNINGS: {len(warned)}" in out
    st, out, _ = run(capsys, "spark", "report", tmp_path / "s", "--json", "--strict")
    assert st == 1 and json.loads(out)["summary"]["UNHEALTHY"] == len(warned)
    assert json.loads(out)["summary"]["MISMATCHED"] == 0

    # the tables: every finding a warning, every replica ok
    errors = spark.read.parquet(str(tmp_path / "s" / "errors"))
    assert {r["severity"] for r in errors.collect()} == {"warning"}
    reps = spark.read.parquet(str(tmp_path / "s" / "containers")).collect()
    assert all(r["ok"] for r in reps) and sum(r["warnings"] for r in reps) == 3

    # a scan written before findings had levels (no severity column) is judged as then:
    # every finding counts, and the OPEN replica's empty tree is a mismatch
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.report import build_report

    tables = {
        n: spark.read.parquet(str(tmp_path / "s" / n))
        for n in ("chunks", "blocks", "containers", "errors")
    }
    old = build_report(
        diff_scan(tables), replicas=tables["containers"], errors=errors.drop("severity")
    )
    assert old["containers"]["MISMATCHED"] == [opened]
    assert old["summary"]["UNHEALTHY"] == len(warned)

    # a scan output edited to call an error a warning: the table decides, not the column
    from spark_udfs.jobs.report import _replica_findings
    from spark_udfs.jobs.scan import ERROR_SCHEMA

    forged = spark.createDataFrame(
        [
            ("dn0", "/r", 9, "CORRUPT_CHUNK", 1, 0, "", "warning", None),
            ("dn1", "/r", 9, "TREE_MISSING", None, None, "", "warning", None),
            ("dn2", "/r", 9, "TREE_MISSING", None, None, "", "no such level", None),
        ],
        ERROR_SCHEMA,
    )
    judged = {
        r["datanode"]: (r["fails"], r["warns"])
        for r in _replica_findings(forged, strict=False).collect()
    }
    assert judged == {"dn0": (1, 0), "dn1": (0, 1), "dn2": (1, 0)}

    st, out, _ = run(capsys, "spark", "scan", root, "-o", tmp_path / "s2", "--strict")
    assert st == 1
