"""Crash safety with real process death (issue 6): a scan + reconcile round is SIGKILLed at
each kind of write step (first and last occurrence of each), then:
- every `.tree` and `.blocks` file is the old one or a complete new one, never torn;
- the replica lock died with the process (the re-run is not refused);
- a re-run converges, with every byte of ground truth in place and no block file shorter.
tests/test_replica_reconcile.py covers every step with an in-process exception; this file
adds what only a real kill shows: the kernel dropping the flock, a torn chunk pwrite, and
the window between the temp-file fsync and the rename (and between rename and dir fsync).
CRASH_KILL_ALL=1 kills at every write event instead (87 on this cluster, ~1 min).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_replica_reconcile import assert_converged

from merkle.replica.replicadir.blockmeta import ContainerMeta
from merkle.trees.treefile import tree_from_bytes

from replica_helpers import file_sizes, full_round, make_cluster

CHILD = Path(__file__).resolve().parent / "crash_child.py"


def _run_child(root: Path, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHILD), str(root), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _metadata_files(root: Path) -> dict:
    return {
        p: p.read_bytes()
        for p in sorted(root.rglob("metadata/*"))
        if p.suffix in (".tree", ".blocks")
    }


def _parses(path: Path, data: bytes) -> bool:
    try:
        if path.suffix == ".tree":
            tree_from_bytes(data)
        else:
            ContainerMeta.from_bytes(data)
        return True
    except ValueError:  # TreeFileError, BlockMetaError
        return False


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("crashkill") / "template"
    m = make_cluster(
        root,
        "bitflip,truncate,missing-file,missing-chunks,tombstone,"
        "extra-block,meta-corrupt,tree-missing,tree-corrupt",
        containers=2,
        seed=31,
        min_blocks=4,
        max_blocks=6,
    )
    return root, m


def _kill_points(events: list) -> list:
    """First and last occurrence of every kind of event."""
    first, last = {}, {}
    for i, kind in enumerate(events):
        first.setdefault(kind, i)
        last[kind] = i
    return sorted(set(first.values()) | set(last.values()))


def test_probe_sees_every_kind_of_write(template, tmp_path):
    root, _ = template
    work = tmp_path / "probe"
    shutil.copytree(root, work)
    r = _run_child(work, -1)
    assert r.returncode == 0, r.stderr
    kinds = set(json.loads(r.stdout))
    assert {
        "pwrite",
        "before-rename.tree",
        "after-rename.tree",
        "before-rename.blocks",
        "after-rename.blocks",
        "step-chunk",
        "step-block",
        "step-metadata",
        "step-tree",
    } <= kinds


def test_sigkill_at_each_kind_of_write_step_then_rerun_converges(template, tmp_path):
    root, m = template
    probe = tmp_path / "probe"
    shutil.copytree(root, probe)
    events = json.loads(_run_child(probe, -1).stdout)
    points = _kill_points(events)
    assert len(points) >= 12
    if os.environ.get("CRASH_KILL_ALL"):  # the long campaign: every single write event
        points = list(range(len(events)))
    for k in points:
        work = tmp_path / f"kill{k}"
        shutil.copytree(root, work)
        before = _metadata_files(work)
        sizes = file_sizes(work)
        r = _run_child(work, k)
        assert r.returncode == -9, (k, events[k] if k < len(events) else None, r.stderr[-800:])
        for path, data in _metadata_files(work).items():  # old or new, never torn
            assert data == before.get(path) or _parses(path, data), (k, events[k], path)
        full_round(work)  # the restart: must not be refused by a stale lock
        assert_converged(work, m)
        after = file_sizes(work)
        assert all(after[n] >= s for n, s in sizes.items()), (k, events[k])
        shutil.rmtree(work)


#: a long campaign: CI's campaigns step runs it, not the fast tier (.ci/lib.sh CAMPAIGNS)
pytestmark = pytest.mark.slow
