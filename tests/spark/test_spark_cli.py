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
    m = generate_cluster(root, faults=parse_faults("bitflip=1,missing-file=1,bitflip-all=1"),
                         containers=3, seed=4)
    return root, m


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
    assert plan and all(p["round"] == 0 for p in plan)
    rc = main(["spark", "report", str(out)])
    text = capsys.readouterr().out
    assert "Container Health Summary" in text and "UNRECOVERABLE: 1" in text
    # the JSON feeds the reconciler: a dry run plans pulls from the peers the report names
    rc = main(["reconcile", "--report", str(rep), "--dry-run"])
    text = capsys.readouterr().out
    assert rc == 1 and "pull block" in text  # repairs pending  # the unrecoverable chunk has no command
    assert len(data["reconcile"]) >= 1 and all(e["argv"][:2] == ["crcmerkle", "reconcile"]
                                               for e in data["reconcile"])


def test_errors_are_one_line(spark, tmp_path, capsys):
    assert main(["spark", "scan", str(tmp_path / "missing"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crcmerkle: error: ") and "No such file" in err
    (tmp_path / "t.parquet").write_bytes(b"not parquet")
    assert main(["spark", "diff", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "o")]) != 0
    assert capsys.readouterr().err.startswith("crcmerkle: error: ")
    assert main(["spark"]) == 2
    assert "needs an action" in capsys.readouterr().err
    for bad in (["report", "x", "--limit", "0"], ["run", "x", "-o", "y", "--first", "-1"],
                ["demo", "--containers", "zero"]):
        assert main(["spark", *bad]) == 2
        assert "must be a positive integer" in capsys.readouterr().err
    (tmp_path / "r.json").write_text("{}")
    assert main(["reconcile", "--report", str(tmp_path / "r.json")]) == 2
    assert "not a crcmerkle spark report" in capsys.readouterr().err


def test_python_m_spark_udfs_help():
    r = subprocess.run([sys.executable, "-m", "spark_udfs", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "scan" in r.stdout and "report" in r.stdout
