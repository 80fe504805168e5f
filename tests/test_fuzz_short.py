"""A short, bounded fuzz campaign in CI (issue 6): every target of fuzz/ runs for a few
seconds with the built-in engine (fixed seed, no extra package), and the harness proves it
can fail. The long, coverage-guided campaign is `fuzz/run.sh` (see fuzz/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: seconds per target; the whole file stays under ~30 s on the 2-vCPU CI machine
BUDGET = {"kernels": 8, "tree": 4, "blockmeta": 4, "diff": 4}
#: a run that executes fewer inputs than this is not fuzzing anything (broken harness)
MIN_EXECS = {"kernels": 300, "tree": 2000, "blockmeta": 2000, "diff": 1000}


def run_fuzz(*args: str, env: dict | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "fuzz", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("target", sorted(BUDGET))
def test_short_campaign(target, tmp_path):
    report = tmp_path / "report.json"
    r = run_fuzz(
        target,
        "--engine",
        "builtin",
        "--time",
        str(BUDGET[target]),
        "--seed",
        "1",
        "--report",
        str(report),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    stats = json.loads(report.read_text())
    assert stats["failures"] == 0
    assert stats["execs"] >= MIN_EXECS[target], stats


def test_harness_reports_a_wrong_backend(tmp_path):
    """FUZZ_SELFTEST=37 makes one backend 'wrong' for 37-byte inputs: the campaign must stop
    with a mismatch and save an input that replays as a failure (and passes without it)."""
    r = run_fuzz(
        "kernels",
        "--engine",
        "builtin",
        "--runs",
        "50000",
        "--seed",
        "2",
        env={"FUZZ_SELFTEST": "37"},
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "backend mismatch" in r.stderr and "n=37" in r.stderr
    saved = r.stderr.rsplit("saved to ", 1)[1].strip()
    assert run_fuzz("kernels", "--replay", saved, env={"FUZZ_SELFTEST": "37"}).returncode == 1
    assert run_fuzz("kernels", "--replay", saved).returncode == 0
    os.unlink(saved)


def test_parser_seeds_are_valid_inputs():
    """Every seed parses (so mutations start from the success path, where the round-trip
    checks live) and the targets accept them."""
    from merkle.replica.replicadir.blockmeta import ContainerMeta
    from merkle.trees.treefile import tree_from_bytes

    from fuzz import fuzz_parsers as fp
    from fuzz.__main__ import seed_files

    trees = seed_files("tree") + fp.seeds_tree()
    metas = seed_files("blockmeta") + fp.seeds_blockmeta()
    assert len(trees) >= 6 and len(metas) >= 4
    for s in trees:
        tree_from_bytes(s)
        fp.target_tree(s)
    for s in metas:
        ContainerMeta.from_bytes(s[1:])
        fp.target_blockmeta(s)


def test_atheris_engine_when_installed():
    """The coverage-guided engine runs the same targets (skipped without atheris)."""
    pytest.importorskip("atheris")
    r = run_fuzz("tree", "--engine", "atheris", "--runs", "3000")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Done 3000 runs" in r.stderr
