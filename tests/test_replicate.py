"""`crcmerkle replicate`: a new replica from a good one, verified, atomic, never clobbering."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from merkle.cli import main
from merkle.replica.crcmerkle.copier import STAGING_PREFIX, open_in
from merkle.replica.errors import ReplicaError
from merkle.replica.reconcile import replica_groups
from merkle.replica.replicate import (
    SourceNotGoodError,
    TargetExistsError,
    commands_from_plan,
    replicate,
)
from merkle.replica.scan import scan_container

from replica_helpers import make_cluster, snapshot


@pytest.fixture
def cluster(tmp_path):
    root = tmp_path / "c"
    make_cluster(root, containers=2, datanodes=4, seed=5)
    return root


def _replicas(root: Path, cid: int):
    return sorted(replica_groups(root)[cid])


def _free_target(root: Path, cid: int) -> Path:
    holders = {p.parent.parent.name for p in _replicas(root, cid)}
    dn = next(
        (d for d in sorted(os.listdir(root)) if d.startswith("dn") and d not in holders), "dn-new"
    )
    (root / dn / "vol0").mkdir(parents=True, exist_ok=True)  # volumes exist; never made
    return root / dn / "vol0" / str(cid)


def test_the_copy_is_a_healthy_replica_with_the_source_value(cluster):
    src = _replicas(cluster, 1)[0]
    tgt = _free_target(cluster, 1)
    before = snapshot(src)
    r = replicate(src, tgt)
    assert r.status == "created" and r.chunks > 0 and r.bytes_copied > 0
    s = scan_container(tgt, write_tree=False)
    assert s.ok, s.errors
    src_scan = scan_container(src, write_tree=False)
    assert s.tree.data_checksum == src_scan.tree.data_checksum == r.data_checksum
    assert (tgt / "metadata" / "1.tree").read_bytes() == (src / "metadata" / "1.tree").read_bytes()
    assert (tgt / "metadata" / "1.blocks").read_bytes() == (
        src / "metadata" / "1.blocks"
    ).read_bytes()
    snap = snapshot(src)
    snap.pop(".crcmerkle.lock", None)
    before.pop(".crcmerkle.lock", None)
    assert snap == before  # the source is only read
    assert not [n for n in os.listdir(tgt.parent) if n.startswith(STAGING_PREFIX)]


def test_an_existing_target_is_never_touched(cluster):
    reps = _replicas(cluster, 1)
    other = reps[1]
    before = snapshot(other)
    # same value already there: reported as present, nothing written
    assert replicate(reps[0], other).status == "present"
    assert snapshot(other) == before
    # a replica with another value (a corrupted chunk the scan recorded in its tree)
    blk = sorted((other / "chunks").iterdir())[0]
    data = bytearray(blk.read_bytes())
    data[0] ^= 1
    blk.write_bytes(bytes(data))
    assert not scan_container(other).ok
    before = snapshot(other)
    with pytest.raises(TargetExistsError):
        replicate(reps[0], other)
    assert snapshot(other) == before
    junk = _free_target(cluster, 1)
    junk.mkdir(parents=True)
    (junk / "note").write_text("not a replica")
    with pytest.raises(TargetExistsError):
        replicate(reps[0], junk)
    assert (junk / "note").read_text() == "not a replica"


def test_a_corrupt_source_creates_nothing(tmp_path):
    root = tmp_path / "c"
    m = make_cluster(root, "bitflip=1", containers=1, datanodes=4, seed=2)
    bad = next(f for f in m["faults"] if f["type"] == "bitflip")
    src = root / bad["replicas"][0]
    tgt = _free_target(root, 1)
    with pytest.raises(SourceNotGoodError, match="recorded window checksums"):
        replicate(src, tgt)
    assert not tgt.exists()
    assert (
        not [n for n in os.listdir(tgt.parent) if n.startswith(STAGING_PREFIX)]
        if tgt.parent.exists()
        else True
    )


def test_a_crash_leaves_only_staging_and_a_rerun_completes(cluster):
    src = _replicas(cluster, 2)[0]
    tgt = _free_target(cluster, 2)

    def crash(step, detail):
        if step == "metadata":
            raise KeyboardInterrupt  # as if killed between the data and the tree

    with pytest.raises(KeyboardInterrupt):
        replicate(src, tgt, on_step=crash)
    assert not tgt.exists()
    assert [n for n in os.listdir(tgt.parent) if n.startswith(STAGING_PREFIX)]
    r = replicate(src, tgt)
    assert r.status == "created" and scan_container(tgt, write_tree=False).ok
    assert not [n for n in os.listdir(tgt.parent) if n.startswith(STAGING_PREFIX)]


def test_links_and_foreign_staging_are_refused(cluster, tmp_path):
    src = _replicas(cluster, 1)[0]
    victim = tmp_path / "victim.block"
    victim.write_bytes(b"x" * 100)
    blk = sorted((src / "chunks").iterdir())[0]
    saved = blk.read_bytes()
    blk.unlink()
    blk.symlink_to(victim)
    tgt = _free_target(cluster, 1)
    with pytest.raises(ReplicaError, match="symbolic link"):
        replicate(src, tgt)
    assert not tgt.exists()
    blk.unlink()
    blk.write_bytes(saved)
    stage = tgt.parent / f"{STAGING_PREFIX}1.tmp"
    stage.mkdir(parents=True)
    (stage / "precious").write_text("keep")
    with pytest.raises(ReplicaError, match="did not make"):
        replicate(src, tgt)
    assert (stage / "precious").read_text() == "keep"
    fd = os.open(str(tmp_path), os.O_RDONLY)
    try:
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(ReplicaError, match="not a regular file"):
            open_in(fd, "fifo")  # and it did not hang on the FIFO
    finally:
        os.close(fd)


def test_cli_single_and_plan_report(cluster, tmp_path, capsys):
    src1, src2 = _replicas(cluster, 1)[0], _replicas(cluster, 2)[0]
    t1, t2 = _free_target(cluster, 1), _free_target(cluster, 2)
    from merkle.replica.commandlist import lines_digest

    # as `crcmerkle spark plan` writes it: argv, the list's digest, the scanned roots
    cmds = [
        {
            "round": 1,
            "container": 2,
            "source_replica": str(src2),
            "target_replica": str(t2),
            "argv": ["crcmerkle", "replicate", str(src2), str(t2)],
        },
        {
            "round": 0,
            "container": 1,
            "source_replica": str(src1),
            "target_replica": str(t1),
            "argv": ["crcmerkle", "replicate", str(src1), str(t1)],
        },
    ]
    plan = {
        "format": "crcmerkle-spark-plan",
        "scanned_roots": [str(cluster)],
        "copy_plan": {"commands": cmds, "sha256": lines_digest(cmds)},
    }
    assert commands_from_plan(plan) == [[str(src1), str(t1)], [str(src2), str(t2)]]
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(plan))
    assert main(["replicate", "--report", str(f)]) == 0
    assert "created" in capsys.readouterr().out
    assert main(["replicate", "--report", str(f), "--json"]) == 0  # re-run: present
    out = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in out["results"]] == ["present", "present"]
    assert main(["replicate", str(src1)]) == 2
    f.write_text("{}")
    assert main(["replicate", "--report", str(f)]) == 2
    assert "not a crcmerkle spark plan" in capsys.readouterr().err


def test_the_staging_marker_is_not_left_in_the_new_replica(cluster):
    src = _replicas(cluster, 1)[0]
    tgt = _free_target(cluster, 1)
    seen = []

    def look(step, detail):
        if step == "tree":  # still staging: the marker names the source
            stage = tgt.parent / f"{STAGING_PREFIX}1.tmp"
            seen.append((stage / "SOURCE").read_text())

    assert replicate(src, tgt, on_step=look).status == "created"
    assert seen == [f"{os.path.abspath(src)}\n"]
    assert sorted(os.listdir(tgt)) == ["chunks", "metadata"]
    assert scan_container(tgt, write_tree=False).ok


def test_ozone_replicas_are_refused_and_left_untouched(tmp_path, capsys):
    """On Ozone volumes new replicas are Ozone's to make: replicate refuses (exit 2, one line)
    a source or a target on a datanode volume, before it takes a lock or writes anything."""
    pytest.importorskip("rocksdict")
    from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults
    from merkle.replica.ozone.layout import find_volumes

    root = tmp_path / "oz"
    generate_cluster(
        root,
        GeneratorConfig(containers=2, seed=3, layout="ozone", faults=parse_faults("none", "ozone")),
    )
    volumes = [v for v, _ in find_volumes(root)]
    src = next(r for v in volumes for r in v.replicas()).root
    before = snapshot(root)
    holder = {v.root for v in volumes if any(r.root == src for r in v.replicas())}
    free = next(v for v in volumes if v.root not in holder)
    target = free.root / "hdds" / "elsewhere" / str(src.name)
    for argv in ([str(src), str(target)], [str(src), str(tmp_path / "vol" / src.name)]):
        (tmp_path / "vol").mkdir(exist_ok=True)
        assert main(["replicate", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Ozone datanode volume" in err, err
    assert snapshot(root) == before and not list(root.rglob(".crcmerkle.lock"))
