"""The report's repair plan is built and written by the executors (issue 18, point 5): only
counts and the first `--first` commands reach the driver and the JSON; the full list is
written next to the report as JSON lines, and `crcmerkle reconcile --report` runs all of it,
or refuses (exit 2, one line) when it cannot read it: never only the first N."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest

from merkle.cli import main
from merkle.replica.generate import generate_cluster, parse_faults

pytest.importorskip("pyspark")


def _lines(directory: Path) -> List[Dict[str, Any]]:
    """The commands of a directory of JSON-lines part files (as reconcile reads them)."""
    out = []
    for f in sorted(directory.iterdir()):
        if f.name.startswith(("_", ".")):
            continue
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return out


# ---- the driver collects only counts and the first commands --------------------------------


def _synthetic_diff(spark: Any, n: int) -> Any:
    """A DiffResult with `n` containers mismatched on dn0 (one pull each, two candidates)."""
    from spark_udfs.jobs.diff import PULL_SCHEMA, DiffResult

    pulls = spark.createDataFrame(
        [
            (
                c,
                "dn0",
                f"/c/dn0/v/{c}",
                "MISSING_CHUNK",
                1,
                0,
                10,
                ["dn1", "dn2"],
                [f"/c/dn1/v/{c}", f"/c/dn2/v/{c}"],
                None,
                None,
            )
            for c in range(n)
        ],
        PULL_SCHEMA,
    )
    containers = spark.createDataFrame(
        [(c, 3, 0, "MISMATCH", 3, [["dn1", "dn2"], ["dn0"]]) for c in range(n)],
        "container long, n_replicas long, unhealthy_chunks long, state string, "
        "read_replicas long, groups array<array<string>>",
    )
    unrec = spark.createDataFrame(
        [], "container long, block long, offset long, datanodes array<string>, reason string"
    )
    pending = spark.createDataFrame(
        [], "container long, datanode string, replica string, block long, deleted_on array<string>"
    )
    return DiffResult(
        replicas=None,
        containers=containers,
        pulls=pulls,
        unrecoverable=unrec,
        diverged_blocks=None,
        pending_deletions=pending,
    )


def test_build_report_does_not_collect_the_pulls(spark, tmp_path, monkeypatch):
    """No collect brings more than `first` rows to the driver, DiffResult.plan (the driver
    plan) is not called, and the executors' file holds every command."""
    from spark_udfs.jobs.diff import DiffResult
    from spark_udfs.jobs.report import build_report, format_text

    n, first = 300, 5
    diff = _synthetic_diff(spark, n)
    DataFrame = type(diff.pulls)  # the session's class (pyspark.sql.classic under Spark 4)
    sizes: List[int] = []
    real_collect = DataFrame.collect

    def counting_collect(self: Any) -> Any:
        rows = real_collect(self)
        sizes.append(len(rows))
        return rows

    def no_driver_plan(self: Any, limit: int = 20) -> Any:
        raise AssertionError("build_report collected the pulls (DiffResult.plan)")

    monkeypatch.setattr(DataFrame, "collect", counting_collect)
    monkeypatch.setattr(DiffResult, "plan", no_driver_plan)
    out = tmp_path / "r.json.commands"
    rep = build_report(
        diff, first=first, limit=20, commands_to=str(out), commands_ref="r.json.commands"
    )
    monkeypatch.undo()
    assert sizes and max(sizes) <= first
    rc = rep["reconcile_commands"]
    assert {k: rc[k] for k in ("total", "listed", "path", "format")} == {
        "total": n,
        "listed": first,
        "path": "r.json.commands",
        "format": "json-lines",
    }
    # the digest reconcile checks: each part's, as the executors wrote it, and over them
    from merkle.replica.commandlist import parts_digest, read_command_list

    _, parts = read_command_list(str(out))
    assert rc["parts"] == [p.to_dict() for p in parts] and rc["sha256"] == parts_digest(rc["parts"])
    assert len(rep["reconcile"]) == first
    assert rep["repair_plan"]["total"] == n and len(rep["repair_plan"]["commands"]) == first
    assert rep["repair_plan"]["rounds"] == n // 20  # dn0 repairs 20 containers per round
    listed = _lines(out)
    assert sorted(e["container_id"] for e in listed) == list(range(n))
    assert [e["round"] for e in listed] == sorted(e["round"] for e in listed)
    for e in listed:
        c = e["container_id"]
        assert e["round"] == c // 20 and e["datanode"] == "dn0"
        assert e["replica"] == f"/c/dn0/v/{c}" and len(e["peers"]) == 1
        assert e["argv"] == ["crcmerkle", "reconcile", e["replica"], *e["peers"]]
        assert e["peers"][0] == f"/c/{e['peer_datanodes'][0]}/v/{c}"
    assert rep["reconcile"] == listed[:first]
    assert f"Reconcile commands: {n} (all in r.json.commands)" in format_text(rep)


# ---- end to end: run --report, reconcile --report runs every command -----------------------


@pytest.fixture
def faulty(tmp_path):
    root = tmp_path / "c"
    m = generate_cluster(
        root, faults=parse_faults("bitflip=4,missing-file=3"), containers=8, seed=11
    )
    return root, m


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_reconcile_runs_every_command_of_a_truncated_report(spark, faulty, tmp_path, capsys):
    root, _ = faulty
    rep = tmp_path / "report.json"
    rc = main(
        [
            "spark",
            "run",
            str(root),
            "-o",
            str(tmp_path / "out"),
            "--json",
            "--report",
            str(rep),
            "--first",
            "2",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data == json.loads(rep.read_text())
    rc_ = data["reconcile_commands"]
    assert rc_["path"] == "report.json.commands" and rc_["listed"] == 2
    total = rc_["total"]
    assert total > 2 and len(data["reconcile"]) == 2
    full = _lines(tmp_path / "report.json.commands")
    assert len(full) == total and full[:2] == data["reconcile"]
    # moved together with its list, the report still resolves it (relative to the report)
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(rep, moved / "report.json")
    shutil.copytree(tmp_path / "report.json.commands", moved / "report.json.commands")
    assert main(["reconcile", "--report", str(moved / "report.json"), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert len(done["results"]) == total and not done["failed"]
    # every mismatch was repaired: the next report finds none
    assert main(["spark", "run", str(root), "-o", str(tmp_path / "out2"), "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["summary"]["MISMATCHED"] == 0
    assert after["reconcile_commands"]["total"] == 0


# ---- reading the list: missing, unreadable, short, edited -> exit 2, one line ---------------


def _report(tmp_path: Path, n: int, listed: int, path: Any = "r.json.commands") -> Path:
    """A report of `n` commands listing the first `listed`, the full list written at `path`
    (relative to the report) unless path is None. The replicas do not exist: reconcile fails
    on them with exit 2 as well, so tests check the message."""
    cmds = [
        {
            "round": 0,
            "container_id": c,
            "datanode": "dn0",
            "replica": str(tmp_path / f"dn0/v/{c}"),
            "peers": [str(tmp_path / f"dn1/v/{c}")],
            "peer_datanodes": ["dn1"],
            "argv": [
                "crcmerkle",
                "reconcile",
                str(tmp_path / f"dn0/v/{c}"),
                str(tmp_path / f"dn1/v/{c}"),
            ],
        }
        for c in range(n)
    ]
    from merkle.replica.commandlist import lines_digest, parts_digest, read_command_list

    rep = {
        "format": "crcmerkle-spark-report",
        "version": 1,
        "reconcile": cmds[:listed],
        "reconcile_commands": {
            "total": n,
            "listed": listed,
            "path": path,
            "format": "json-lines",
            "sha256": lines_digest(cmds),
        },
        "scanned_roots": [str(tmp_path)],
    }
    if path is not None:
        d = tmp_path / path
        d.mkdir()
        (d / "part-00000.json").write_text("".join(json.dumps(c) + "\n" for c in cmds[: n // 2]))
        (d / "part-00001.json").write_text("".join(json.dumps(c) + "\n" for c in cmds[n // 2 :]))
        (d / "_SUCCESS").write_text("")
        parts = [p.to_dict() for p in read_command_list(str(d))[1]]  # as Spark's writer
        rep["reconcile_commands"].update(parts=parts, sha256=parts_digest(parts))
    f = tmp_path / "r.json"
    f.write_text(json.dumps(rep))
    return f


def _error(capsys: Any) -> str:
    err = capsys.readouterr().err
    assert err.startswith("crcmerkle: error: ") and err.count("\n") == 1, err
    return err


def test_reads_the_full_list(tmp_path):
    from merkle.replica.reconcile import load_report_jobs

    jobs = load_report_jobs(_report(tmp_path, 7, 2))
    assert [j[0][0] for j in jobs] == [str(tmp_path / f"dn0/v/{c}") for c in range(7)]
    assert all(d == {j[1]: "dn1"} for j, d in jobs)


def test_a_missing_command_list_is_exit_2(tmp_path, capsys):
    f = _report(tmp_path, 7, 2)
    shutil.rmtree(tmp_path / "r.json.commands")
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "cannot read the report's command list" in _error(capsys)


def test_no_list_named_is_exit_2(tmp_path, capsys):
    f = _report(tmp_path, 7, 2, path=None)
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "lists only 2 of its 7 reconcile commands" in _error(capsys)


def test_a_short_or_broken_list_is_exit_2(tmp_path, capsys):
    f = _report(tmp_path, 7, 2)
    part = tmp_path / "r.json.commands" / "part-00001.json"
    lines = part.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[1:]))
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "holds 6 command(s), the report says 7" in _error(capsys)
    part.write_text("".join(lines[1:]) + "{not json\n")
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "line 4: not JSON" in _error(capsys)
    part.write_bytes(b"\xff\xfe\n")
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "not UTF-8" in _error(capsys)


def test_an_edited_command_is_refused(tmp_path, capsys):
    f = _report(tmp_path, 7, 2)
    part = tmp_path / "r.json.commands" / "part-00001.json"
    cmds = [json.loads(x) for x in part.read_text().splitlines()]
    cmds[0]["argv"] = ["sh", "-c", "rm -rf /"]
    part.write_text("".join(json.dumps(c) + "\n" for c in cmds))
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "is not 'crcmerkle reconcile' with its replica and peers" in _error(capsys)
    cmds[0]["argv"] = None
    cmds[0]["peers"] = [7]
    part.write_text("".join(json.dumps(c) + "\n" for c in cmds))
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "lacks replica paths" in _error(capsys)


def test_a_remote_or_bad_list_location_is_exit_2(tmp_path, capsys):
    f = _report(tmp_path, 7, 2)
    rep = json.loads(f.read_text())
    rep["reconcile_commands"]["path"] = "s3://bucket/r.json.commands"
    f.write_text(json.dumps(rep))
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert "copy it next to the report" in _error(capsys)
    rep["reconcile_commands"]["total"] = "7"
    f.write_text(json.dumps(rep))
    assert main(["reconcile", "--report", str(f), "--dry-run"]) == 2
    assert 'bad "total"' in _error(capsys)


def test_an_absolute_list_path_is_used_as_written(tmp_path):
    from merkle.replica.reconcile import load_report_jobs

    f = _report(tmp_path, 5, 1)
    rep = json.loads(f.read_text())
    rep["reconcile_commands"]["path"] = str(tmp_path / "r.json.commands")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "r.json").write_text(json.dumps(rep))
    assert len(load_report_jobs(elsewhere / "r.json")) == 5


def test_inline_lists_need_no_file(tmp_path):
    """Complete reports run their inline list; older reports (no reconcile_commands, so no
    digest of their commands) are refused since issue 23 (item 3)."""
    from merkle.replica.errors import ReplicaError
    from merkle.replica.reconcile import load_report_jobs

    f = _report(tmp_path, 3, 3, path=None)
    assert len(load_report_jobs(f)) == 3
    rep = json.loads(f.read_text())
    del rep["reconcile_commands"]
    f.write_text(json.dumps(rep))
    with pytest.raises(ReplicaError, match="no SHA-256 digest"):
        load_report_jobs(f)
