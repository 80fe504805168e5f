"""The soak (merkle/replica/soak.py, `crcmerkle soak`): a few rounds pass, and the soak's checks
fail when the scanner misses a fault or the reconciler repairs nothing (they can fail)."""

from __future__ import annotations

import json

import pytest

import merkle.replica.reconcile.copying as rr  # where the copier verifies (_verify)
import merkle.replica.scan as rs
from merkle.cli import main
from merkle.replica.soak import run_soak


def test_a_few_rounds_pass_with_every_fault_type(tmp_path):
    report = run_soak(11, 3, containers=8, workdir=tmp_path)
    assert report.ok, [r.problems for r in report.rounds]
    totals = report.totals()
    assert sum(t.injected for t in totals.values()) >= 12
    assert sum(t.detected for t in totals.values()) == sum(t.injected for t in totals.values())
    assert set(report.checks().values()) == {0}
    assert not list(tmp_path.iterdir())  # round clusters are cleaned up


def test_cli_prints_the_table_and_exits_zero(tmp_path, capsys):
    assert main(["soak", "--seed", "5", "--rounds", "2", "--workdir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "injected" in out and "RESULT: PASS" in out and "bitflip-all" in out
    assert err.count("round ") == 2
    assert (
        main(
            [
                "soak",
                "--seed",
                "5",
                "--rounds",
                "1",
                "--json",
                "--quiet",
                "--workdir",
                str(tmp_path),
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["checks"]["bytes_lost"] == 0


def test_a_scanner_that_misses_corruption_fails_the_soak(tmp_path, monkeypatch):
    real = rs._Reader.block

    def blind(self, paths, block):  # drops every CORRUPT_CHUNK finding
        out = real(self, paths, block)
        out.errors = [e for e in out.errors if e.kind != rs.CORRUPT_CHUNK]
        return out

    monkeypatch.setattr(rs._Reader, "block", blind)
    report = run_soak(11, 1, containers=8, workdir=tmp_path)
    assert not report.ok and report.checks()["misses"] > 0


def test_a_reconciler_that_copies_nothing_fails_the_soak(tmp_path, monkeypatch):
    monkeypatch.setattr(rr, "_verify", lambda view, c: False)  # every peer chunk "bad"
    report = run_soak(11, 1, containers=8, workdir=tmp_path, keep_failed=True)
    c = report.checks()
    assert not report.ok and c["bytes_lost"] > 0 and c["unrepaired_faults"] > 0
    assert "cluster kept at" in report.rounds[0].problems[0]


def test_cli_exit_status_on_failure(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(rr, "_verify", lambda view, c: False)
    assert (
        main(["soak", "--seed", "11", "--rounds", "1", "--quiet", "--workdir", str(tmp_path)]) == 1
    )
    assert "RESULT: FAIL" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [["--rounds", "0"], ["--containers", "x"]])
def test_usage_errors(bad, capsys):
    assert main(["soak", *bad]) == 2


#: a long campaign: CI's campaigns step runs it, not the fast tier (.ci/lib.sh CAMPAIGNS)
pytestmark = pytest.mark.slow
