"""Issue 23, the report- and plan-driven verbs as an attacker drives them: whoever can write a
report or a plan (or one part of its command list) must not steer root's writes.

  item 3   forged / swapped / mismatched command lists are exit 2, one line, before anything
           is written; every command is checked against the disk (container, roots, cluster,
           links, its replicas' own metadata); a plan's argv is what runs; a copy is never
           handed to another user than the source replica's owner
  item 13  the command list (and the report) is read as regular files only: a FIFO never
           hangs, /dev/zero or a sparse part is refused, lines are bounded
  item 14  replicate onto a full volume leaves no staging copy; an offline repair with a
           saturated #BYTESUSED does the whole work and can be re-run
  item 17  a report of replicas on Ozone volumes prints the Ozone commands, exit 1
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from test_hostile import CID, IS_ROOT, KiB, block, child, make_replica, payload

from merkle.replica.commandlist import lines_digest, parts_digest, read_command_list
from merkle.replica.replicadir.writer import ContainerWriter

from replica_helpers import snapshot

# ---- a cluster, and reports as `crcmerkle spark report --report FILE` writes them -----------


def _cluster(root: Path, salt: int = 0) -> List[Path]:
    """Three replicas of container 7 under `root` (dn0 damaged: block 2 is missing)."""
    reps = [
        make_replica(
            root / f"dn{i}" / "vol" / str(CID), {1: payload(1, salt=salt), 2: payload(2, salt=salt)}
        )
        for i in range(3)
    ]
    block(reps[0], 2).unlink()
    return reps


def _command(target: Path, peers: List[Path], cid: int = CID, rnd: int = 0) -> Dict[str, Any]:
    return {
        "round": rnd,
        "container_id": cid,
        "datanode": target.parent.parent.name,
        "replica": str(target),
        "peers": [str(p) for p in peers],
        "peer_datanodes": [p.parent.parent.name for p in peers],
        "argv": ["crcmerkle", "reconcile", str(target), *map(str, peers)],
    }


def _report(
    where: Path,
    cmds: List[Dict[str, Any]],
    roots: List[Path],
    listed: int = 1,
    name: str = "r.json",
) -> Path:
    """A report whose full list is written next to it, one part per command, with the parts'
    digests (as the executors' writer and part_digests make them)."""
    where.mkdir(parents=True, exist_ok=True)
    d = where / f"{name}.commands"
    d.mkdir()
    for i, c in enumerate(cmds):
        (d / f"part-{i:05d}.json").write_text(json.dumps(c) + "\n")
    (d / "_SUCCESS").write_text("")
    parts = [p.to_dict() for p in read_command_list(str(d))[1]]
    rep = {
        "format": "crcmerkle-spark-report",
        "version": 1,
        "reconcile": cmds[:listed],
        "reconcile_commands": {
            "total": len(cmds),
            "listed": listed,
            "path": f"{name}.commands",
            "format": "json-lines",
            "parts": parts,
            "sha256": parts_digest(parts),
        },
        "scanned_roots": [str(r) for r in roots],
    }
    f = where / name
    f.write_text(json.dumps(rep))
    return f


def _reseal(f: Path) -> None:
    """What an attacker who can write the whole report does: digests made to fit."""
    rep = json.loads(f.read_text())
    d = f.parent / rep["reconcile_commands"]["path"]
    parts = [p.to_dict() for p in read_command_list(str(d))[1]]
    rep["reconcile_commands"].update(parts=parts, sha256=parts_digest(parts))
    full, _ = read_command_list(str(d))
    rep["reconcile"] = full[: rep["reconcile_commands"]["listed"]]
    f.write_text(json.dumps(rep))


def _one_line_refusal(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


@pytest.fixture
def two_clusters(tmp_path: Path) -> Dict[str, Any]:
    c1, c2 = tmp_path / "c1", tmp_path / "c2"
    return {"c1": c1, "r1": _cluster(c1), "c2": c2, "r2": _cluster(c2, salt=5)}


def _all_files(*roots: Path) -> Dict[str, Dict[str, str]]:
    return {str(r): snapshot(r) for r in roots}


# ---- item 3: reconcile --report ---------------------------------------------------------------


def test_item3_an_honest_report_runs(two_clusters, tmp_path):
    r1 = two_clusters["r1"]
    f = _report(tmp_path / "rep", [_command(r1[0], r1[1:])], [two_clusters["c1"]])
    r = child("reconcile", "--report", f)
    assert r.returncode == 0, r.stderr + r.stdout
    assert block(r1[0], 2).read_bytes() == payload(2)


def test_item3_a_swapped_part_is_refused_before_anything_is_written(two_clusters, tmp_path):
    """A part of another report (another cluster's replica, a third one's data) in place of
    this report's part: the counts agree, the digest does not."""
    c1, r1, c2, r2 = (two_clusters[k] for k in ("c1", "r1", "c2", "r2"))
    f = _report(tmp_path / "a", [_command(r1[1], [r1[2]]), _command(r1[0], r1[1:])], [c1])
    other = _report(tmp_path / "b", [_command(r2[1], [r2[2]]), _command(r2[0], [r1[1]])], [c1, c2])
    shutil.copy(
        other.parent / "r.json.commands" / "part-00001.json",
        f.parent / "r.json.commands" / "part-00001.json",
    )
    before = _all_files(c1, c2)
    r = child("reconcile", "--report", f)
    _one_line_refusal(r, "part-00001.json", "digest")
    assert _all_files(c1, c2) == before and r.stdout == ""


def test_item3_a_list_that_is_not_the_reports_is_refused(two_clusters, tmp_path):
    c1, r1 = two_clusters["c1"], two_clusters["r1"]
    f = _report(tmp_path / "a", [_command(r1[1], [r1[2]]), _command(r1[0], r1[1:])], [c1])
    parts = f.parent / "r.json.commands"
    (parts / "part-00001.json").rename(parts / "part-00009.json")  # same bytes, renamed
    _one_line_refusal(child("reconcile", "--report", f), "not the report's parts")
    (parts / "part-00009.json").rename(parts / "part-00001.json")
    (parts / "part-00002.json").write_text("\n")  # an extra part (no command in it)
    _one_line_refusal(child("reconcile", "--report", f), "not the report's parts")
    (parts / "part-00002.json").unlink()
    rep = json.loads(f.read_text())
    rep["reconcile_commands"]["sha256"] = "0" * 64
    f.write_text(json.dumps(rep))
    _one_line_refusal(child("reconcile", "--report", f), "digest")
    del rep["reconcile_commands"]["sha256"]
    f.write_text(json.dumps(rep))
    _one_line_refusal(child("reconcile", "--report", f), "no SHA-256 digest")


def test_item3_inline_commands_must_be_the_first_of_the_list(two_clusters, tmp_path):
    c1, r1 = two_clusters["c1"], two_clusters["r1"]
    f = _report(tmp_path / "a", [_command(r1[1], [r1[2]]), _command(r1[0], r1[1:])], [c1])
    rep = json.loads(f.read_text())
    rep["reconcile"] = [_command(r1[2], [r1[1]])]  # what the operator reads is not what runs
    f.write_text(json.dumps(rep))
    before = _all_files(c1)
    _one_line_refusal(child("reconcile", "--report", f), "inline commands")
    assert _all_files(c1) == before


def test_item3_a_container_id_must_match_the_directory_and_its_metadata(two_clusters, tmp_path):
    c1, r1 = two_clusters["c1"], two_clusters["r1"]
    f = _report(tmp_path / "a", [_command(r1[0], r1[1:], cid=8)], [c1])
    before = _all_files(c1)
    _one_line_refusal(child("reconcile", "--report", f), "not named after", "nothing was run")
    assert _all_files(c1) == before
    # a directory named 8 holding container 7 (its own .blocks says so)
    fake = c1 / "dn3" / "vol" / "8"
    fake.parent.mkdir(parents=True)
    shutil.copytree(r1[1], fake)
    real8 = []
    for i in (0, 1):  # container 8's own replicas: their records name 8
        with ContainerWriter.create(
            c1 / f"dn{i}" / "vol" / "8",
            8,
            algorithm="crc32",
            bytes_per_checksum=4 * KiB,
            chunk_size=8 * KiB,
        ) as w:
            w.write_block(1, payload(1))
        real8.append(c1 / f"dn{i}" / "vol" / "8")
    (fake / "metadata" / f"{CID}.blocks").rename(fake / "metadata" / "8.blocks")
    g = _report(tmp_path / "b", [_command(real8[0], [fake, real8[1]], cid=8)], [c1])
    _one_line_refusal(child("reconcile", "--report", g), "not container 8")


def test_item3_replicas_must_lie_under_the_scanned_roots_of_one_cluster(two_clusters, tmp_path):
    c1, r1, c2, r2 = (two_clusters[k] for k in ("c1", "r1", "c2", "r2"))
    before = _all_files(c1, c2)
    # a replica of cluster 1 repaired from cluster 2's data: both roots listed
    f = _report(tmp_path / "a", [_command(r1[0], r2[1:])], [c1, c2])
    _one_line_refusal(child("reconcile", "--report", f), "different clusters")
    # a replica the scan never read
    g = _report(tmp_path / "b", [_command(r1[0], r2[1:])], [c1])
    _one_line_refusal(child("reconcile", "--report", g), "not a replica under the roots")
    # a path that names one place and reaches another
    sneaky = Path(f"{c1}/dn9/../dn1/vol/{CID}")
    h = _report(tmp_path / "c", [_command(r1[0], [sneaky])], [c1])
    _one_line_refusal(child("reconcile", "--report", h), "'..'")
    assert _all_files(c1, c2) == before
    # no roots at all: nothing can be checked, nothing runs
    rep = json.loads(f.read_text())
    del rep["scanned_roots"]
    f.write_text(json.dumps(rep))
    _one_line_refusal(child("reconcile", "--report", f), "no scanned roots")


def test_item3_a_replica_reached_through_a_link_is_refused(two_clusters, tmp_path):
    c1, r1 = two_clusters["c1"], two_clusters["r1"]
    (c1 / "dnL").symlink_to(c1 / "dn1")
    f = _report(tmp_path / "a", [_command(r1[0], [c1 / "dnL" / "vol" / str(CID)])], [c1])
    before = _all_files(c1)
    _one_line_refusal(child("reconcile", "--report", f), "link")
    assert _all_files(c1) == before


# ---- item 3: replicate --report -----------------------------------------------------------------


def _plan(where: Path, cmds: List[Dict[str, Any]], roots: List[Path]) -> Path:
    plan = {
        "format": "crcmerkle-spark-plan",
        "version": 1,
        "scanned_roots": [str(r) for r in roots],
        "copy_plan": {"commands": cmds, "sha256": lines_digest(cmds)},
    }
    where.mkdir(parents=True, exist_ok=True)
    f = where / "plan.json"
    f.write_text(json.dumps(plan))
    return f


def _copy(src: Path, tgt: Path, cid: int = CID, argv: Optional[List[str]] = None) -> Dict[str, Any]:
    return {
        "round": 0,
        "container": cid,
        "source": src.parent.parent.name,
        "source_replica": str(src),
        "source_leaving": False,
        "target": tgt.parent.parent.name,
        "target_replica": str(tgt),
        "bytes": 1,
        "by": "crcmerkle replicate",
        "argv": argv or ["crcmerkle", "replicate", str(src), str(tgt)],
    }


@pytest.fixture
def source(tmp_path: Path) -> Dict[str, Path]:
    c = tmp_path / "c"
    src = make_replica(c / "dn0" / "vol" / str(CID), {1: payload(1)})
    (c / "dn1" / "vol").mkdir(parents=True)
    (c / "dn2" / "vol").mkdir(parents=True)
    return {
        "c": c,
        "src": src,
        "t1": c / "dn1" / "vol" / str(CID),
        "t2": c / "dn2" / "vol" / str(CID),
    }


def test_item3_a_plan_copies_what_its_argv_says_or_nothing(source, tmp_path):
    c, src, t1, t2 = source["c"], source["src"], source["t1"], source["t2"]
    honest = _plan(tmp_path / "ok", [_copy(src, t1)], [c])
    assert child("replicate", "--report", honest).returncode == 0 and t1.is_dir()
    shutil.rmtree(t1)
    # the operator approves src -> t1; the fields say t2
    f = _plan(
        tmp_path / "a", [_copy(src, t2, argv=["crcmerkle", "replicate", str(src), str(t1)])], [c]
    )
    _one_line_refusal(child("replicate", "--report", f), '"argv"', "nothing was copied")
    assert not t1.exists() and not t2.exists()


def test_item3_a_plan_is_checked_before_anything_is_copied(source, tmp_path):
    c, src, t1, t2 = source["c"], source["src"], source["t1"], source["t2"]
    elsewhere = tmp_path / "home" / "bob" / "vol"
    elsewhere.mkdir(parents=True)
    outside = elsewhere / str(CID)
    cases = {
        "digest": (lambda f: _edit(f, lambda p: p["copy_plan"]["commands"][0].update(bytes=2))),
        "not a replica under the roots": (
            lambda f: _edit(f, lambda p: p.update(scanned_roots=[str(tmp_path / "elsewhere")]))
        ),
        'bad "round"': (
            lambda f: _edit(
                f, lambda p: p["copy_plan"]["commands"][0].update(round=True), reseal=True
            )
        ),
    }
    for words, spoil in cases.items():
        f = _plan(
            tmp_path / words.replace(" ", "_").replace('"', ""),
            [_copy(src, t1), _copy(src, t2)],
            [c],
        )
        spoil(f)
        _one_line_refusal(child("replicate", "--report", f), words)
        assert not t1.exists() and not t2.exists(), words
    # the second command's target outside the roots: the first is not run either
    f = _plan(tmp_path / "outside", [_copy(src, t1), _copy(src, outside)], [c])
    _one_line_refusal(child("replicate", "--report", f), "not a replica under the roots")
    assert not t1.exists() and not outside.exists()
    # a source whose own metadata says another container
    g = _plan(tmp_path / "cid", [_copy(src, t1, cid=8)], [c])
    _one_line_refusal(child("replicate", "--report", g), "not named after")


def _edit(f: Path, change: Any, reseal: bool = False) -> None:
    plan = json.loads(f.read_text())
    change(plan)
    if reseal:
        plan["copy_plan"]["sha256"] = lines_digest(plan["copy_plan"]["commands"])
    f.write_text(json.dumps(plan))


@pytest.mark.skipif(not IS_ROOT, reason="giving a copy away needs root")
def test_item3_a_copy_is_never_handed_to_another_user(source, tmp_path):
    """A root-only replica copied into a volume another user owns would become that user's:
    refused, nothing created (SOURCE TARGET and --report alike)."""
    c, src, t1 = source["c"], source["src"], source["t1"]
    for p in [src, *src.rglob("*")]:
        os.chmod(p, 0o700 if p.is_dir() else 0o600)
    os.chown(t1.parent, 4242, 4242)
    r = child("replicate", src, t1)
    _one_line_refusal(r, "another user")
    assert not t1.exists() and os.listdir(t1.parent) == []
    f = _plan(tmp_path / "p", [_copy(src, t1)], [c])
    _one_line_refusal(child("replicate", "--report", f), "another user")
    assert os.listdir(t1.parent) == []
    os.chown(t1.parent, 0, 0)  # root's volume: the copy is made (and stays root's)
    assert child("replicate", src, t1).returncode == 0 and os.stat(t1).st_uid == 0


# ---- item 13: the list is read as regular files, bounded ---------------------------------------


def test_item13_a_fifo_never_hangs_the_reader(two_clusters, tmp_path):
    c1, r1 = two_clusters["c1"], two_clusters["r1"]
    f = _report(tmp_path / "a", [_command(r1[0], r1[1:])], [c1], listed=0)
    part = f.parent / "r.json.commands" / "part-00000.json"
    part.unlink()
    os.mkfifo(part)
    _one_line_refusal(child("reconcile", "--report", f, timeout=60), "not a regular file")
    fifo = tmp_path / "report-fifo.json"
    os.mkfifo(fifo)
    _one_line_refusal(child("reconcile", "--report", fifo, timeout=60), "not a regular file")
    _one_line_refusal(child("replicate", "--report", fifo, timeout=60), "not a regular file")


def test_item13_dev_zero_and_sparse_parts_are_refused(two_clusters, tmp_path):
    c1, r1 = two_clusters["c1"], two_clusters["r1"]
    f = _report(tmp_path / "a", [_command(r1[0], r1[1:])], [c1], listed=0)
    rep = json.loads(f.read_text())
    rep["reconcile_commands"]["path"] = "/dev/zero"
    f.write_text(json.dumps(rep))
    _one_line_refusal(
        child("reconcile", "--report", f, timeout=60, memory=1 << 30), "not a regular file"
    )
    g = _report(tmp_path / "b", [_command(r1[0], r1[1:])], [c1], listed=0)
    part = g.parent / "r.json.commands" / "part-00000.json"
    with open(part, "r+b") as fh:
        fh.truncate(3 << 30)  # sparse: 3 GiB of holes, one endless line
    _one_line_refusal(child("reconcile", "--report", g, timeout=60, memory=1 << 30), "limit")
    part.write_text(json.dumps(_command(r1[0], r1[1:])) + " " * (2 << 20) + "\n")
    _one_line_refusal(child("reconcile", "--report", g, timeout=60), "longer than")
    part.unlink()
    part.symlink_to(tmp_path / "a" / "r.json.commands" / "_SUCCESS")
    _one_line_refusal(child("reconcile", "--report", g, timeout=60), "symbolic link")


# ---- item 14: a full volume, a saturated counter -----------------------------------------------


@pytest.fixture
def small_volume(tmp_path: Path):
    """A 256 KiB tmpfs mounted as a datanode volume (root only), unmounted afterwards."""
    if not IS_ROOT:
        pytest.skip("mounting a tmpfs needs root")
    vol = tmp_path / "c" / "dn1" / "vol"
    vol.mkdir(parents=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(vol)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield vol
    finally:
        subprocess.run(["umount", str(vol)], check=True)


def test_item14_a_full_volume_leaves_no_staging_copy(small_volume, tmp_path):
    src = tmp_path / "c" / "dn0" / "vol" / str(CID)
    with ContainerWriter.create(
        src, CID, algorithm="crc32", bytes_per_checksum=4 * KiB, chunk_size=64 * KiB
    ) as w:
        w.write_block(1, payload(1, 1024 * KiB))
    r = child("replicate", src, small_volume / str(CID))
    _one_line_refusal(r, "No space left on device")
    assert os.listdir(small_volume) == []  # no .crcmerkle-replicate-7.tmp left
    assert child("replicate", src, small_volume / str(CID)).returncode == 2  # again: same


def test_item14_a_saturated_bytesused_does_not_fail_an_offline_repair(tmp_path):
    pytest.importorskip("rocksdict")
    from test_ozone_reconcile import _db_of, _generate, _groups

    from merkle.replica.ozone import datanode_pb2 as pb
    from merkle.replica.ozone.rocks import LockedVolumeDB, VolumeDB, container_prefix

    root = tmp_path / "c"
    _generate(root, "none", containers=1, seed=3)
    target, *peers = _groups(root)[1]
    db_dir = _db_of(target)
    with VolumeDB(db_dir) as db:
        rows = dict(db.block_values(1))
    bid, raw = next((k, v) for k, v in rows.items() if len(pb.BlockData.FromString(v).chunks) >= 2)
    msg = pb.BlockData.FromString(raw)
    msg.size -= msg.chunks[-1].len
    del msg.chunks[-1]  # our row lacks its last chunk: the repair extends it
    db = LockedVolumeDB(db_dir)
    try:
        db.write_batch(
            {container_prefix(1) + bid: msg.SerializeToString()},
            {container_prefix(1) + b"#BYTESUSED": struct.pack(">q", (1 << 63) - 1)},
        )
    finally:
        db.close()
    (target / "metadata" / "1.tree").unlink()
    args = ["reconcile", "--offline", "--json", target, *peers]
    r = child(*args)
    assert r.returncode == 0, r.stderr + r.stdout
    assert any(p["copied"] for p in json.loads(r.stdout)["results"][0]["peers"])
    with VolumeDB(db_dir) as db:
        assert dict(db.block_values(1))[bid] == raw  # the whole work was done
        assert db.metadata(1)["#BYTESUSED"] == (1 << 63) - 1  # saturated, not wrapped
    assert child(*args).returncode == 0  # and a re-run succeeds


# ---- item 17: a report of replicas on Ozone volumes ----------------------------------------------


def test_item17_an_ozone_report_prints_the_ozone_commands(tmp_path):
    rep = {
        "format": "crcmerkle-spark-report",
        "version": 1,
        "reconcile": [],
        "reconcile_commands": {
            "total": 0,
            "listed": 0,
            "path": None,
            "format": None,
            "parts": None,
            "sha256": lines_digest([]),
        },
        "ozone_reconcile": [
            {"containerID": c, "argv": ["ozone", "admin", "container", "reconcile", str(c)]}
            for c in (5, 12)
        ],
    }
    f = tmp_path / "r.json"
    f.write_text(json.dumps(rep))
    r = child("reconcile", "--report", f)
    assert r.returncode == 1, r.stderr + r.stdout
    assert "Ozone reconciles" in r.stdout
    assert "  ozone admin container reconcile 5\n" in r.stdout
    assert "  ozone admin container reconcile 12\n" in r.stdout
    r = child("reconcile", "--report", f, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["ozone_reconcile"][1]["argv"][-1] == "12"
    rep["summary"] = {"MISMATCHED": 300}  # the report lists the first ones: say so
    f.write_text(json.dumps(rep))
    r = child("reconcile", "--report", f)
    assert r.returncode == 1 and "300 container(s)" in r.stdout and "--first 300" in r.stdout
    rep["ozone_reconcile"][0]["argv"] = ["sh", "-c", "id"]
    f.write_text(json.dumps(rep))
    _one_line_refusal(child("reconcile", "--report", f), '"argv"')


def test_item3_peer_datanodes_are_taken_from_the_disk_not_the_report(tmp_path):
    """Two copies on one datanode named as two datanodes in the report would outvote a
    third: each datanode votes once, as the disk says where a replica is."""
    c = tmp_path / "c"
    target = make_replica(c / "dn0" / "vol" / str(CID), {1: payload(1)})
    liars = [
        make_replica(c / "dn1" / v / str(CID), {1: payload(1), 2: payload(2, salt=9)})
        for v in ("vol", "vol2")
    ]
    honest = make_replica(c / "dn2" / "vol" / str(CID), {1: payload(1), 2: payload(2)})
    cmd = _command(target, [*liars, honest])
    cmd["peer_datanodes"] = ["dnA", "dnB", "dn2"]
    f = _report(tmp_path / "a", [cmd], [c])
    child("reconcile", "--report", f)
    assert not block(target, 2).exists() or block(target, 2).read_bytes() != payload(2, salt=9)
