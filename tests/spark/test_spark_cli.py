"""`crcmerkle spark ...` / `python -m spark_udfs ...`: end to end on a small faulty cluster,
in-process (reusing the session fixture), plus the error paths."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from merkle.cli import main
from merkle.replica.generate import generate_cluster, parse_faults


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark_cli") / "c"
    m = generate_cluster(
        root, faults=parse_faults("bitflip=1,missing-file=1,bitflip-all=1"), containers=3, seed=4
    )
    return root, m


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_run_report_json_and_diff(spark, small, tmp_path, capsys):
    root, m = small
    out = tmp_path / "out"
    rep = tmp_path / "report.json"
    rc = main(["spark", "run", str(root), "-o", str(out), "--json", "--report", str(rep)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1  # mismatches and an unrecoverable chunk
    assert data == json.loads(rep.read_text())
    assert data["summary"]["UNRECOVERABLE"] == 1
    assert data["summary"]["MISMATCHED"] >= 1
    assert (out / "chunks").is_dir() and (out / "errors").is_dir()
    rc = main(["spark", "diff", str(out), "-o", str(tmp_path / "diff")])
    text = capsys.readouterr().out
    assert rc == 1 and "mismatched" in text
    plan = json.loads((tmp_path / "diff" / "plan.json").read_text())
    assert plan["commands"] == len(plan["first"]) > 0 and plan["rounds"] == 1
    assert all(p["round"] == 0 and p["items"] for p in plan["first"])
    assert (tmp_path / "diff" / "plan").is_dir()  # the whole plan, written by executors
    rc = main(["spark", "report", str(out)])
    text = capsys.readouterr().out
    assert "Container Health Summary" in text and "UNRECOVERABLE: 1" in text
    # the JSON feeds the reconciler: a dry run plans pulls from the peers the report names
    rc = main(["reconcile", "--report", str(rep), "--dry-run"])
    text = capsys.readouterr().out
    # repairs pending; the unrecoverable chunk has no command
    assert rc == 1 and "pull block" in text
    assert len(data["reconcile"]) >= 1 and all(
        e["argv"][:2] == ["crcmerkle", "reconcile"] for e in data["reconcile"]
    )


def test_errors_are_one_line(spark, tmp_path, capsys):
    assert main(["spark", "scan", str(tmp_path / "missing"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crcmerkle: error: ") and "No such file" in err
    (tmp_path / "t.parquet").write_bytes(b"not parquet")
    assert main(["spark", "diff", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "o")]) != 0
    assert capsys.readouterr().err.startswith("crcmerkle: error: ")
    assert main(["spark"]) == 2
    assert "needs an action" in capsys.readouterr().err
    for bad in (
        ["report", "x", "--limit", "0"],
        ["run", "x", "-o", "y", "--first", "-1"],
        ["demo", "--containers", "zero"],
    ):
        assert main(["spark", *bad]) == 2
        assert "must be a positive integer" in capsys.readouterr().err
    (tmp_path / "r.json").write_text("{}")
    assert main(["reconcile", "--report", str(tmp_path / "r.json")]) == 2
    assert "not a crcmerkle spark report" in capsys.readouterr().err


def test_python_m_spark_udfs_help():
    r = subprocess.run(
        [sys.executable, "-m", "spark_udfs", "--help"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "scan" in r.stdout and "report" in r.stdout


def test_a_run_that_read_nothing_fails(spark, tmp_path, capsys):
    """Every replica's block metadata gone: nothing can be verified, so no container is
    MATCH and the run exits 2 saying why (it used to report everything as matching)."""
    root = tmp_path / "c"
    generate_cluster(root, containers=2, seed=5)
    for meta in root.glob("*/*/*/metadata/*.blocks"):
        meta.unlink()
    rc = main(["spark", "run", str(root), "-o", str(tmp_path / "o"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 2
    rep = json.loads(out)
    assert rep["summary"]["MATCH"] == 0 and rep["summary"]["UNVERIFIED"] == 2
    assert rep["read"] == {"replicas": 6, "read": 0, "fraction": 0.0, "data_read": 0}
    assert (
        err.startswith("crcmerkle: error: none of the 6 replica(s) could be read")
        and err.count("\n") == 1
    )
    assert main(["spark", "diff", str(tmp_path / "o"), "-o", str(tmp_path / "d")]) == 2
    assert "none of the 6" in capsys.readouterr().err


def test_min_read_fraction(spark, tmp_path, capsys):
    root = tmp_path / "c"
    generate_cluster(root, containers=2, seed=5)
    metas = sorted(root.glob("*/*/*/metadata/*.blocks"))
    for meta in metas[:2]:  # 4 of 6 replicas still readable
        meta.unlink()
    args = ["spark", "report", str(tmp_path / "o")]
    assert main(["spark", "scan", str(root), "-o", str(tmp_path / "o")]) == 1  # errors
    assert "6 replica(s), 4 read" in capsys.readouterr().out
    rc = main(args + ["--min-read-fraction", "0.5"])
    out, err = capsys.readouterr()
    assert rc == 1 and "Replicas read: 4 of 6" in out and not err
    assert main(args + ["--min-read-fraction", "0.9"]) == 2
    assert (
        "only 4 of 6 replica(s) were read (66.7% < --min-read-fraction 0.9)"
        in capsys.readouterr().err
    )
    assert main(args + ["--min-read-fraction", "1.5"]) == 2
    assert "from 0 to 1" in capsys.readouterr().err
