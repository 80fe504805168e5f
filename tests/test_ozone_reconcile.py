"""`crcmerkle reconcile --offline` on Ozone datanode volumes: convergence (a re-scan clean, the
block_data rows and counters equal to a clean replica's), the volume's RocksDB LOCK (refused
while held, held for the whole repair), crash safety at every write step (an exception and a
SIGKILL), unknown protobuf fields kept, and what is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from merkle.replica.errors import ReplicaError  # noqa: E402
from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from merkle.replica.ozone import datanode_pb2 as pb  # noqa: E402
from merkle.replica.ozone.blockdata import decode_blocks  # noqa: E402
from merkle.replica.ozone.layout import find_volumes  # noqa: E402
from merkle.replica.ozone.rocks import LockedVolumeDB, VolumeDB, container_prefix  # noqa: E402
from merkle.replica.reconcile import reconcile  # noqa: E402
from merkle.replica.scan import scan_paths  # noqa: E402

#: every fault a peer can repair (no fabricated rows, no unusable replicas, no tombstones:
#: a tombstoned block's row stays where it is, by design, so rows would differ)
REPAIRABLE = (
    "bitflip=2,bitflip2=1,truncate=1,missing-chunks=1,missing-file=1,extra-block=1,"
    "tree-corrupt=1,tree-missing=1"
)


class Crash(Exception):
    pass


def _generate(root: Path, faults: str, *, containers: int = 4, seed: int = 7) -> Dict[str, Any]:
    return generate_cluster(
        root,
        GeneratorConfig(
            containers=containers, seed=seed, layout="ozone", faults=parse_faults(faults, "ozone")
        ),
    )


def _groups(root: Path) -> Dict[int, List[Path]]:
    out: Dict[int, List[Path]] = {}
    for vol, _ in find_volumes(root):
        for r in vol.replicas():
            out.setdefault(r.container_id, []).append(r.root)
    return out


def _round(root: Path, **kw: Any) -> List[Any]:
    results = []
    for _cid, reps in sorted(_groups(root).items()):
        for r in reps:
            results.append(reconcile(r, [p for p in reps if p != r], offline=True, **kw))
    return results


def _db_state(root: Path) -> Dict[int, List[Tuple[Dict[bytes, bytes], Dict[str, int]]]]:
    """Per container, per replica: its block_data rows and metadata counters."""
    out: Dict[int, List[Tuple[Dict[bytes, bytes], Dict[str, int]]]] = {}
    for vol, _ in find_volumes(root):
        with VolumeDB(vol.db_dir) as db:
            for r in vol.replicas():
                out.setdefault(r.container_id, []).append(
                    (dict(db.block_values(r.container_id)), db.metadata(r.container_id))
                )
    return out


def _assert_converged(root: Path) -> None:
    results = scan_paths([root])
    assert results and all(r.ok for r in results), [(r.path, r.errors) for r in results if not r.ok]
    values: Dict[int, set] = {}
    for r in results:
        values.setdefault(r.container_id, set()).add(r.tree.data_checksum)
    assert all(len(v) == 1 for v in values.values()), values
    for cid, reps in _db_state(root).items():
        rows0 = reps[0][0]
        for rows, counters in reps:
            assert rows == rows0, cid  # byte for byte the rows of the clean replica
            meta = decode_blocks(cid, rows.items(), "db").meta
            assert counters["#BLOCKCOUNT"] == len(meta.blocks)
            assert counters["#BYTESUSED"] == meta.data_bytes
            if "#DATACHECKSUM" in counters:
                assert counters["#DATACHECKSUM"] == next(iter(values[cid]))


def _cli(*argv: Any) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "merkle", *map(str, argv)], capture_output=True, text=True
    )


def file_states(root: Path) -> Dict[str, Tuple[bytes, int]]:
    """Every file under root: bytes and mtime."""
    return {
        os.path.relpath(p, root): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def _sizes(root: Path) -> Dict[str, int]:
    return {os.path.relpath(p, root): p.stat().st_size for p in root.rglob("*.block")}


# ---- convergence -----------------------------------------------------------------------------


def test_offline_reconcile_converges_and_rows_equal_a_clean_replicas(tmp_path: Path) -> None:
    root = tmp_path / "c"
    manifest = _generate(root, REPAIRABLE)
    before = _db_state(root)
    damaged = {os.path.relpath(p, root) for p in manifest["expected_errors"]}
    assert damaged and scan_paths([root]) and not all(r.ok for r in scan_paths([root]))
    sizes = _sizes(root)
    out = _cli("reconcile", "--all", "--offline", "--json", root)
    assert out.returncode == 0, out.stderr + out.stdout
    report = json.loads(out.stdout)
    assert not report["failed"] and not report["unconverged"]
    assert any(p["copied"] for r in report["results"] for p in r["peers"])
    _assert_converged(root)
    after = _sizes(root)
    assert all(after[n] >= s for n, s in sizes.items())  # nothing shortened
    # a row that existed is only ever extended: its other fields are as they were
    for cid, reps in before.items():
        now = _db_state(root)[cid]
        for (rows0, _), (rows1, _) in zip(reps, now):
            for k, v in rows0.items():
                old, new = pb.BlockData(), pb.BlockData()
                old.ParseFromString(v)
                new.ParseFromString(rows1[k])
                assert old.blockID == new.blockID and list(old.metadata) == list(new.metadata)
    # nothing of our binding is left in a DB directory
    assert not list(root.rglob("rocksdict-config.json"))
    # a second round has nothing to do and changes no row
    state = _db_state(root)
    out = _cli("reconcile", "--all", "--offline", root)
    assert out.returncode == 0 and "copied" not in out.stdout
    assert _db_state(root) == state
    assert _cli("scan", root).returncode == 0


def test_dry_run_offline_plans_and_writes_no_row(tmp_path: Path) -> None:
    root = tmp_path / "c"
    _generate(root, "missing-file=1,bitflip=1", containers=2)
    before = file_states(root)
    out = _cli("reconcile", "--all", "--offline", "--dry-run", root)
    assert out.returncode == 1 and "pull block" in out.stdout, out.stderr
    assert file_states(root) == before  # nothing at all, DB directories included


# ---- the volume's lock -----------------------------------------------------------------------

HOLD_LOCKF = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
time.sleep(60)
"""

HOLD_ROCKSDB = """
import sys, time, rocksdict as rd
names = rd.Rdict.list_cf(sys.argv[1], rd.Options(raw_mode=True))
db = rd.Rdict(sys.argv[1], options=rd.Options(raw_mode=True),
              column_families={n: rd.Options(raw_mode=True) for n in names if n != "default"})
print("held", flush=True)
time.sleep(60)
"""


def _db_of(replica: Path) -> Path:
    ((vol, _),) = find_volumes(replica)
    assert vol.db_dir is not None
    return vol.db_dir


def _tree_states(root: Path) -> Dict[str, Tuple[bytes, int]]:
    """Every file outside the DB directories: bytes and mtime."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and "container.db" not in p.parts:
            out[os.path.relpath(p, root)] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


@pytest.mark.parametrize("holder", [HOLD_LOCKF, HOLD_ROCKSDB], ids=["lockf", "datanode"])
def test_refused_while_the_volumes_lock_is_held(tmp_path: Path, holder: str) -> None:
    root = tmp_path / "c"
    _generate(root, "missing-file=1", containers=1)
    reps = _groups(root)[1]
    db = _db_of(reps[0])
    arg = db / "LOCK" if holder is HOLD_LOCKF else db
    child = subprocess.Popen(
        [sys.executable, "-c", holder, str(arg)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        files = _tree_states(root)
        db_files = sorted(os.listdir(db))
        out = _cli("reconcile", "--offline", *reps)
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr.count("\n") == 1 and "online" in out.stderr, out.stderr
        assert "ozone admin container reconcile 1" in out.stderr
        assert _tree_states(root) == files and sorted(os.listdir(db)) == db_files
        with pytest.raises(ReplicaError, match="online"):
            reconcile(reps[0], reps[1:], offline=True)
    finally:
        child.kill()
        child.wait()
    assert _cli("reconcile", "--offline", *reps).returncode in (0, 1)


def test_without_offline_the_refusal_names_it(tmp_path: Path) -> None:
    root = tmp_path / "c"
    _generate(root, "none", containers=1)
    reps = _groups(root)[1]
    out = _cli("reconcile", *reps)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "--offline" in out.stderr and "ozone admin container reconcile 1'" in out.stderr


def test_the_lock_is_held_for_the_whole_repair(tmp_path: Path) -> None:
    root = tmp_path / "c"
    m = _generate(root, "missing-file=1", containers=1)
    target = root / m["faults"][0]["replicas"][0]
    peers = [p for p in _groups(root)[1] if p != target]
    probe = (
        "import fcntl,os,sys\nfd=os.open(sys.argv[1],os.O_RDWR)\ntry:\n"
        "    fcntl.lockf(fd,fcntl.LOCK_EX|fcntl.LOCK_NB); print('free')\n"
        "except OSError: print('held')\n"
    )
    seen: List[str] = []

    def step(kind: str, detail: Any) -> None:
        out = subprocess.run(
            [sys.executable, "-c", probe, str(_db_of(target) / "LOCK")],
            capture_output=True,
            text=True,
        )
        seen.append(f"{kind}:{out.stdout.strip()}")

    r = reconcile(target, peers, offline=True, on_step=step)
    assert r.peers[0].status == "repaired" and not r.remaining
    assert {s.split(":")[0] for s in seen} >= {"chunk", "block", "metadata", "tree"}
    assert all(s.endswith(":held") for s in seen), seen


# ---- crash safety ----------------------------------------------------------------------------

CRASH_FAULTS = "bitflip=1,truncate=1,missing-file=1,extra-block=1"


def test_crash_after_any_write_step_then_rerun_converges(tmp_path: Path) -> None:
    template = tmp_path / "template"
    _generate(template, CRASH_FAULTS, containers=1, seed=11)
    probe = tmp_path / "probe"
    shutil.copytree(template, probe)
    steps: List[str] = []
    _round(probe, on_step=lambda s, d: steps.append(s))
    assert {"chunk", "block", "metadata", "tree"} <= set(steps)
    _assert_converged(probe)
    # every block_data batch and the tree write after it, and the first of every other step
    # (the copier's own steps are the crcmerkle layout's, crash-tested step by step there;
    # an offline open costs ~0.2 s, so every step of every round would take minutes)
    chosen = sorted(
        {k for k, s in enumerate(steps) if s == "metadata"}
        | {k + 1 for k, s in enumerate(steps[:-1]) if s == "metadata"}
        | {steps.index(s) for s in set(steps)}
    )
    assert len(chosen) >= 8
    for k in chosen:
        work = tmp_path / f"crash{k}"
        shutil.copytree(template, work)
        sizes = _sizes(work)
        calls = [0]

        def crash(step: str, detail: Any, k: int = k, calls: List[int] = calls) -> None:
            calls[0] += 1
            if calls[0] == k + 1:
                raise Crash(step)

        with pytest.raises(Crash):
            _round(work, on_step=crash)
        _round(work)  # the re-run, after the "restart"
        _assert_converged(work)
        after = _sizes(work)
        assert all(after[n] >= s for n, s in sizes.items())
        shutil.rmtree(work)


KILL_CHILD = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_ozone_reconcile import _round
kind, nth = sys.argv[2], int(sys.argv[3])
seen = [0]
def step(s, d):
    if s == kind:
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
_round(Path(sys.argv[1]), on_step=step)
"""


@pytest.mark.parametrize(
    "kind,nth", [("chunk", 2), ("block", 1), ("metadata", 1), ("metadata", 2), ("tree", 1)]
)
def test_sigkill_at_a_write_step_then_rerun_converges(tmp_path: Path, kind: str, nth: int) -> None:
    """A real crash: the process dies with the DB open (its WAL synced, the LOCK dropped by
    the kernel), then a re-run repairs what is left."""
    root = tmp_path / "c"
    _generate(root, CRASH_FAULTS, containers=1, seed=11)
    code = KILL_CHILD.format(tests=os.fspath(Path(__file__).resolve().parent))
    # the killed child cannot remove its DB snapshots: they go under tmp_path, not /tmp
    (tmp_path / "snapshots").mkdir()
    out = subprocess.run(
        [sys.executable, "-c", code, str(root), kind, str(nth)],
        capture_output=True,
        text=True,
        env={**os.environ, "CRCMERKLE_SNAPSHOT_DIR": os.fspath(tmp_path / "snapshots")},
    )
    assert out.returncode == -9, out.stderr
    _round(root)
    _assert_converged(root)


# ---- unknown fields --------------------------------------------------------------------------

#: fields a newer Ozone might add: BlockData field 111 (varint 42), ChunkInfo field 112
TOP_UNKNOWN = bytes([0xF8, 0x06, 42])
CHUNK_UNKNOWN = bytes([0x82, 0x07, 3]) + b"new"


def test_unknown_fields_of_rewritten_rows_are_kept(tmp_path: Path) -> None:
    """Our row of a block lacks its last chunk (a peer has it) and carries fields this
    version does not know, at the top and in a chunk: the repair appends the peer's chunk
    and keeps them."""
    root = tmp_path / "c"
    _generate(root, "none", containers=1, seed=3)
    reps = _groups(root)[1]
    target, peers = reps[0], reps[1:]
    db_dir = _db_of(target)
    with VolumeDB(db_dir) as db:
        rows = dict(db.block_values(1))
    bid, raw = next(
        (k, v)
        for k, v in rows.items()
        if pb.BlockData.FromString(v).chunks and len(pb.BlockData.FromString(v).chunks) >= 2
    )
    msg = pb.BlockData.FromString(raw)
    dropped = msg.chunks[-1].len
    del msg.chunks[-1]
    msg.size -= dropped
    msg.chunks[0].MergeFromString(CHUNK_UNKNOWN)
    value = msg.SerializeToString() + TOP_UNKNOWN
    db = LockedVolumeDB(db_dir)
    try:
        db.write_batch({container_prefix(1) + bid: value}, {})
    finally:
        db.close()
    tree = target / "metadata" / "1.tree"
    tree.unlink()  # the datanode's tree would not list the chunk either
    r = reconcile(target, peers, offline=True)
    assert [c.offset for p in r.peers for c in p.copied] == [msg.size], r.to_dict()
    assert not r.remaining
    with VolumeDB(db_dir) as db:
        new = dict(db.block_values(1))[bid]
    assert TOP_UNKNOWN in new
    fixed = pb.BlockData.FromString(new)
    assert fixed.chunks[0].SerializeToString().endswith(CHUNK_UNKNOWN)
    # the known fields equal the clean peer's row, the unknown ones come on top
    with VolumeDB(_db_of(peers[0])) as db:
        clean = pb.BlockData.FromString(dict(db.block_values(1))[bid])
    fixed.chunks[0].Clear()
    fixed.chunks[0].CopyFrom(
        pb.ChunkInfo.FromString(
            pb.BlockData.FromString(new).chunks[0].SerializeToString()[: -len(CHUNK_UNKNOWN)]
        )
    )
    assert fixed.SerializeToString().replace(TOP_UNKNOWN, b"") == clean.SerializeToString()
    assert all(x.ok for x in scan_paths([root]))


# ---- refusals --------------------------------------------------------------------------------


def test_what_is_not_repaired_offline_is_refused_with_one_line(tmp_path: Path) -> None:
    root = tmp_path / "c"
    m = _generate(root, "meta-corrupt=1,open-container=1,container-checksum=1", containers=4)
    by_kind = {f["type"]: root / f["replicas"][0] for f in m["faults"]}
    for kind, why in (
        ("meta-corrupt", "do not decode"),
        ("open-container", "state OPEN"),
        ("container-checksum", "checksum mismatch"),
    ):
        target = by_kind[kind]
        cid = int(target.name)
        peers = [p for p in _groups(root)[cid] if p != target]
        files = _tree_states(target)
        out = _cli("reconcile", "--offline", target, *peers)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert why in out.stderr, (kind, out.stderr)
        assert _tree_states(target) == files
    crc = tmp_path / "crc"
    generate_cluster(crc, GeneratorConfig(containers=1, seed=1, layout="crcmerkle"))
    ozone_rep = _groups(root)[1][0]
    with pytest.raises(ReplicaError, match="from Ozone replicas only"):
        reconcile(ozone_rep, [next(crc.rglob("1"))], offline=True)


# ---- links and I/O errors --------------------------------------------------------------------


def test_a_link_in_place_of_a_block_file_is_never_written_through(tmp_path: Path) -> None:
    root = tmp_path / "c"
    m = _generate(root, "missing-file=1", containers=1)
    fault = m["faults"][0]
    target = root / fault["replicas"][0]
    peers = [p for p in _groups(root)[1] if p != target]
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep me")
    link = target / "chunks" / f"{fault['block_id']}.block"
    assert not link.exists()
    link.symlink_to(outside)
    r = reconcile(target, peers, offline=True)
    assert outside.read_bytes() == b"keep me" and link.is_symlink()
    assert any(p.failures for p in r.peers) and r.remaining


def test_an_io_error_writing_block_data_is_an_io_error(tmp_path: Path, monkeypatch: Any) -> None:
    import errno

    root = tmp_path / "c"
    m = _generate(root, "extra-block=1", containers=1)  # the others gain a row
    source = root / m["faults"][0]["replicas"][0]
    target = next(p for p in _groups(root)[1] if p != source)
    peers = [p for p in _groups(root)[1] if p != target]
    tree = target / "metadata" / "1.tree"
    stored = tree.read_bytes()
    state = _db_state(root)

    def fail(self: Any, *a: Any) -> None:
        raise OSError(errno.EIO, "writing block_data: Input/output error", self.path)

    monkeypatch.setattr(LockedVolumeDB, "write_batch", fail)
    with pytest.raises(OSError) as info:
        reconcile(target, peers, offline=True)
    assert info.value.errno == errno.EIO
    assert tree.read_bytes() == stored and _db_state(root) == state  # the tree comes last
    monkeypatch.undo()
    _round(root)
    _assert_converged(root)


def test_owner_and_mode_of_rewritten_files_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "c"
    m = _generate(root, "bitflip=1", containers=1)
    fault = m["faults"][0]
    target = root / fault["replicas"][0]
    peers = [p for p in _groups(root)[1] if p != target]
    tree = target / "metadata" / "1.tree"
    block = target / "chunks" / f"{fault['block_id']}.block"
    os.chmod(tree, 0o640)
    os.chmod(block, 0o604)
    before = {p: (os.stat(p).st_uid, os.stat(p).st_gid) for p in (tree, block)}
    r = reconcile(target, peers, offline=True)
    assert r.peers[0].copied and not r.remaining
    assert os.stat(tree).st_mode & 0o777 == 0o640 and os.stat(block).st_mode & 0o777 == 0o604
    assert {p: (os.stat(p).st_uid, os.stat(p).st_gid) for p in (tree, block)} == before
