"""Hostile replicas: every attack below was reproduced against crcmerkle and must stay fixed.

crcmerkle runs as root on datanodes and repairs replicas from peers, so a planted link, FIFO
or hard link, a lying peer or a crafted metadata file must never make it write outside a
replica, lose data, hang or allocate what a file says. Each test reproduces one attack
(numbered as in the hardening issue; E-numbers are attacks of the same classes found after
it). Attacks that need an unprivileged user run the CLI as `nobody` through setpriv; those
that could hang or crash the process run it in a child with a timeout or a memory limit.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pytest

import merkle
from merkle.cli import main
from merkle.replica.reconcile import reconcile
from merkle.replica.replicadir.blockmeta import (
    CRC32,
    ChunkMeta,
    ContainerMeta,
    read_blockmeta,
    write_blockmeta,
)
from merkle.replica.replicadir.writer import ContainerWriter, tree_from_meta
from merkle.replica.scan import scan_container
from merkle.trees.model import ContainerTree
from merkle.trees.treefile import TreeFileError, read_tree, tree_from_bytes, write_tree

KiB = 1024
MiB = 1024 * KiB
REPO = Path(__file__).resolve().parent.parent
CID = 7
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
HAVE_SETPRIV = shutil.which("setpriv") is not None


def _nobody_can_run_this_python() -> bool:
    """Whether `nobody` can start this interpreter and import this package: not when either
    lies under a directory only root may enter (a pyenv Python in /root, as the wheel step of
    .ci/run uses; the main suite's run covers these attacks)."""
    if not (IS_ROOT and HAVE_SETPRIV):
        return False
    probe = subprocess.run(
        [
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            sys.executable,
            "-c",
            "import merkle",
        ],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd="/",
        capture_output=True,
        timeout=60,
    )
    return probe.returncode == 0


needs_nobody = pytest.mark.skipif(
    not _nobody_can_run_this_python(),
    reason="needs root, setpriv, and a Python and package that nobody may run",
)
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (chown)")


# ---- helpers -----------------------------------------------------------------------------


def payload(block: int, n: int = 24 * KiB, salt: int = 0) -> bytes:
    return np.random.default_rng(block * 1000 + salt).integers(0, 256, n, np.uint8).tobytes()


def make_replica(path: Path, blocks: Dict[int, bytes], **kw) -> Path:
    opts = dict(algorithm="crc32", bytes_per_checksum=4 * KiB, chunk_size=8 * KiB)
    opts.update(kw)
    with ContainerWriter.create(path, CID, **opts) as w:
        for b, data in sorted(blocks.items()):
            w.write_block(b, data)
    return path


def trio(root: Path, n: int = 3) -> List[Path]:
    """n healthy replicas of container 7: blocks 1 and 2, three 8 KiB chunks each."""
    return [
        make_replica(root / f"dn{i}" / "vol" / str(CID), {1: payload(1), 2: payload(2)})
        for i in range(n)
    ]


def block(rep: Path, b: int) -> Path:
    return rep / "chunks" / f"{b}.block"


def meta_file(rep: Path) -> Path:
    return rep / "metadata" / f"{CID}.blocks"


def tree_file(rep: Path) -> Path:
    return rep / "metadata" / f"{CID}.tree"


def flip(path: Path, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def child(
    *argv: str,
    timeout: float = 120,
    user: bool = False,
    memory: Optional[int] = None,
    code: Optional[str] = None,
) -> subprocess.CompletedProcess:
    """`crcmerkle ARGV` (or `python -c CODE`) in a child: as nobody with `user`, with an
    address-space limit of `memory` bytes; a hang fails the test at `timeout`."""
    cmd = (
        [sys.executable]
        + (["-c", code] if code is not None else ["-m", "merkle"])
        + [str(a) for a in argv]
    )
    if user:
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + cmd
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("CRCMERKLE_DEBUG", None)

    if "asan" in env.get("LD_PRELOAD", ""):
        memory = None  # ASan reserves terabytes of shadow address space: no RLIMIT_AS then

    def limit() -> None:
        if memory is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    try:
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            preexec_fn=limit if memory is not None else None,
            cwd="/",
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {timeout} s: {' '.join(cmd)}")


@pytest.fixture
def shared(tmp_path):
    """A directory the unprivileged user can reach (pytest's tmp_path is root-only)."""
    d = Path(tempfile.mkdtemp(prefix="crcmerkle-hostile-", dir="/tmp"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def give_to_nobody(path: Path) -> None:
    import pwd

    pw = pwd.getpwnam("nobody")
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            os.chown(name, pw.pw_uid, pw.pw_gid, follow_symlinks=False)


def scan_errors(result) -> List[str]:
    return [e.kind for e in result.errors]


# ---- 1. the lock file --------------------------------------------------------------------


@pytest.mark.parametrize("how", ["symlink", "hardlink", "fifo"])
def test_1_lock_file_is_never_followed_truncated_or_waited_on(tmp_path, how):
    (rep,) = trio(tmp_path, 1)
    victim = tmp_path / "shadow"
    victim.write_text("root:$6$secret:19000:0:99999:7:::\n" * 20)
    before = victim.read_bytes()
    lock = rep / ".crcmerkle.lock"
    lock.unlink()
    if how == "symlink":
        lock.symlink_to(victim)
    elif how == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    r = child("scan", rep, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "lock" in r.stderr and r.stderr.count("\n") == 1
    assert victim.read_bytes() == before


def test_1_lock_file_pid_is_rewritten_without_truncation(tmp_path):
    (rep,) = trio(tmp_path, 1)
    scan_container(rep)
    text = (rep / ".crcmerkle.lock").read_text()
    assert text.strip() == str(os.getpid()) and len(text) == 24


# ---- 2. links inside the replica ---------------------------------------------------------


def test_2_scan_does_not_read_through_a_linked_block(tmp_path):
    (rep,) = trio(tmp_path, 1)
    block(rep, 1).unlink()
    block(rep, 1).symlink_to("/etc/passwd")
    r = scan_container(rep, write_tree=False)
    assert ("NOT_A_REGULAR_FILE", 1) in [(e.kind, e.block_id) for e in r.errors]
    assert "CORRUPT_CHUNK" not in scan_errors(r)


@pytest.mark.parametrize("what", ["block-link", "dangling-link", "chunks-dir", "metadata-dir"])
def test_2_reconcile_never_writes_through_a_link(tmp_path, what):
    reps = trio(tmp_path)
    target = reps[0]
    victim = tmp_path / "victim.bin"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    if what == "block-link":
        victim.write_bytes(b"x" * len(payload(1)))  # wrong data: reconcile wants to fix it
        block(target, 1).unlink()
        block(target, 1).symlink_to(victim)
    elif what == "dangling-link":
        block(target, 1).unlink()
        block(target, 1).symlink_to(victim)  # does not exist: must not be created
    elif what == "chunks-dir":
        shutil.rmtree(target / "chunks")
        (target / "chunks").symlink_to(foreign)
    else:
        shutil.copytree(target / "metadata", foreign, dirs_exist_ok=True)
        shutil.rmtree(target / "metadata")
        (target / "metadata").symlink_to(foreign)
    before = {p.name: p.read_bytes() for p in foreign.iterdir()}
    victim_before = victim.read_bytes() if victim.exists() else None
    r = child("reconcile", target, reps[1], reps[2], "--json", timeout=120)
    assert r.returncode in (1, 2), r.stdout + r.stderr
    json.loads(r.stdout)  # valid JSON in every outcome
    assert {p.name: p.read_bytes() for p in foreign.iterdir()} == before
    assert (victim.read_bytes() if victim.exists() else None) == victim_before
    if what in ("block-link", "dangling-link"):
        assert block(target, 1).is_symlink()  # reported, left alone


def test_2_peer_block_linked_elsewhere_is_not_read(tmp_path):
    reps = trio(tmp_path)
    flip(block(reps[0], 1), 100)
    block(reps[1], 1).unlink()
    block(reps[1], 1).symlink_to(block(reps[2], 1))  # the right bytes, but through a link
    r = reconcile(reps[0], [reps[1]])
    assert r.remaining and any("not a regular file" in f.reason for f in r.peers[0].failures)
    assert reconcile(reps[0], [reps[2]]).remaining == []


# ---- 3. FIFOs ----------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["block", "tree", "blocks"])
def test_3_fifo_never_hangs_scan_or_reconcile(tmp_path, which):
    reps = trio(tmp_path)
    target = reps[0]
    path = {"block": block(target, 2), "tree": tree_file(target), "blocks": meta_file(target)}[
        which
    ]
    path.unlink()
    os.mkfifo(path)
    r = child("scan", target, "--json", timeout=60)
    out = json.loads(r.stdout)
    errors = [e["error"] for e in out["replicas"][0]["errors"]]
    assert "NOT_A_REGULAR_FILE" in errors and r.returncode == 1
    assert stat.S_ISFIFO(os.lstat(path).st_mode)  # never replaced
    r = child("reconcile", target, reps[1], reps[2], "--json", timeout=60)
    json.loads(r.stdout)
    assert r.returncode in (0, 1, 2)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    # as a peer: never blocks the replica that asks it
    r = child("reconcile", reps[1], target, "--json", timeout=60)
    json.loads(r.stdout)


def test_3_spark_executor_scan_never_hangs_on_a_fifo(tmp_path):
    reps = trio(tmp_path, 1)
    block(reps[0], 1).unlink()
    os.mkfifo(block(reps[0], 1))
    code = textwrap.dedent(f"""
        from merkle.replica.crcmerkle.remote import discover, replica_files
        from merkle.replica.scan import scan_files
        for root in ({str(tmp_path)!r}, "file://" + {str(tmp_path)!r}):
            rep, = discover(root)
            r = scan_files(replica_files(rep))
            print(sorted(e.kind for e in r.errors))
    """)
    r = child(code=code, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("NOT_A_REGULAR_FILE") == 2


# ---- 4-7. a lying peer -------------------------------------------------------------------


def test_4_a_none_record_never_replaces_our_crc_record(tmp_path):
    reps = trio(tmp_path)
    target, good = reps[0], reps[1]
    liar = tmp_path / "liar" / "vol" / str(CID)
    with ContainerWriter.create(
        liar, CID, algorithm="crc32", bytes_per_checksum=4 * KiB, chunk_size=8 * KiB
    ) as w:
        w.write_chunk(1, 0, b"\xee" * 8 * KiB, algorithm="none")  # unverifiable garbage
        w.write_chunk(1, 8 * KiB, payload(1)[8 * KiB : 16 * KiB])
        w.write_chunk(1, 16 * KiB, payload(1)[16 * KiB :])
        w.write_block(2, payload(2))
    flip(block(target, 1), 10)
    meta_before = meta_file(target).read_bytes()
    r = reconcile(target, [liar])
    assert r.remaining, "the corrupt chunk must stay reported"
    assert meta_file(target).read_bytes() == meta_before  # our CRC record kept
    assert b"\xee" * 64 not in block(target, 1).read_bytes()
    assert "CORRUPT_CHUNK" in scan_errors(scan_container(target, write_tree=False))
    assert reconcile(target, [liar, good]).remaining == []
    assert block(target, 1).read_bytes() == payload(1)


def test_5_a_self_consistent_liar_cannot_replace_our_corrupt_chunk(tmp_path):
    reps = trio(tmp_path)
    target, good = reps[0], reps[1]
    lie = bytearray(payload(1))
    lie[100:200] = b"L" * 100
    liar = make_replica(tmp_path / "liar" / "vol" / str(CID), {1: bytes(lie), 2: payload(2)})
    flip(block(target, 1), 150)
    meta_before = meta_file(target).read_bytes()
    r = reconcile(target, [liar])
    assert any("our recorded window checksums" in f.reason for f in r.peers[0].failures)
    assert meta_file(target).read_bytes() == meta_before  # the evidence is kept
    assert block(target, 1).read_bytes()[100:200] != b"L" * 100
    assert reconcile(target, [liar, good]).remaining == []
    assert block(target, 1).read_bytes() == payload(1)


def test_6_a_longer_peer_chunk_never_overwrites_our_next_chunk(tmp_path):
    reps = trio(tmp_path)
    target, good = reps[0], reps[1]
    longer = payload(1)[: 8 * KiB] + b"N" * 8 * KiB + payload(1)[16 * KiB :]
    liar = tmp_path / "liar" / "vol" / str(CID)
    with ContainerWriter.create(
        liar, CID, algorithm="crc32", bytes_per_checksum=4 * KiB, chunk_size=16 * KiB
    ) as w:
        w.write_block(1, longer)  # chunks @0 (16 KiB, starts like ours) and @16K
        for off in range(0, 24 * KiB, 8 * KiB):  # block 2 chunked as ours
            w.write_chunk(2, off, payload(2)[off : off + 8 * KiB])
    flip(block(target, 1), 5)
    r = reconcile(target, [liar])
    data = block(target, 1).read_bytes()
    assert data[8 * KiB : 16 * KiB] == payload(1)[8 * KiB : 16 * KiB]  # next chunk untouched
    assert r.remaining
    assert reconcile(target, [liar, good]).remaining == []
    assert block(target, 1).read_bytes() == payload(1)


def test_7_the_majority_version_wins_and_a_tie_is_left_alone(tmp_path):
    root = tmp_path
    target = make_replica(root / "t" / "vol" / str(CID), {1: payload(1)})  # no block 2
    lie = payload(2, salt=9)
    liar = make_replica(root / "liar" / "vol" / str(CID), {1: payload(1), 2: lie})
    goods = [
        make_replica(root / f"g{i}" / "vol" / str(CID), {1: payload(1), 2: payload(2)})
        for i in range(2)
    ]
    tie = shutil.copytree(target, root / "t2" / "vol" / str(CID))
    r = reconcile(tie, [liar, goods[0]])  # 1 against 1: no majority
    assert not block(tie, 2).exists() or block(tie, 2).stat().st_size == 0
    assert any("majority" in f.reason for p in r.peers for f in p.failures)
    assert any("majority" in x.reason for x in r.remaining)  # reported: exit status 1
    r = reconcile(target, [liar, *goods])
    assert block(target, 2).read_bytes() == payload(2)
    assert any("majority" in f.reason for f in r.peers[0].failures)


def test_7_our_own_record_decides_before_any_vote(tmp_path):
    """Two liars agreeing cannot outvote the client's checksums we hold."""
    reps = trio(tmp_path, 2)
    target, good = reps
    lie = payload(1, salt=5)[: 8 * KiB] + payload(1)[8 * KiB :]  # chunk @0 differs
    liars = [
        make_replica(tmp_path / f"l{i}" / "vol" / str(CID), {1: lie, 2: payload(2)})
        for i in range(2)
    ]
    flip(block(target, 1), 3)
    r = reconcile(target, [*liars, good])
    assert r.remaining == [] and block(target, 1).read_bytes() == payload(1)


# ---- 8-10. nothing lost that we do not understand ----------------------------------------


@needs_nobody
def test_8_an_unreadable_tree_is_reported_not_rewritten(shared):
    reps = [
        make_replica(shared / f"dn{i}" / "vol" / str(CID), {1: payload(1), 2: payload(2)})
        for i in range(2)
    ]
    with ContainerWriter(reps[0]) as w:  # block 2 deleted: a tombstone only the tree holds
        w.delete_block(2)
    with ContainerWriter(reps[1]) as w:
        w.delete_block(2)
    target = reps[0]
    give_to_nobody(shared)
    os.chown(tree_file(target), 0, 0)
    os.chmod(tree_file(target), 0o600)  # the datanode user cannot read it: EACCES
    before = tree_file(target).read_bytes()
    ino = tree_file(target).stat().st_ino
    r = child("scan", target, "--json", user=True)
    out = json.loads(r.stdout)
    assert "TREE_UNREADABLE" in [e["error"] for e in out["replicas"][0]["errors"]]
    assert "TREE_CORRUPT" not in r.stdout and r.returncode == 1
    assert tree_file(target).stat().st_ino == ino and tree_file(target).read_bytes() == before
    r = child("reconcile", target, reps[1], "--json", user=True)
    assert r.returncode == 2 and json.loads(r.stdout)["failed"]
    assert not block(target, 2).exists()  # the deleted block is not pulled back
    assert tree_file(target).read_bytes() == before


def _rewrite(verb: str, target: Path, peer: Path) -> List[Path]:
    """Make `verb` rewrite the metadata of `target` (a replica of a trio, one of its chunks
    corrupted first); the files it rewrote."""
    flip(block(target, 1), 1)
    if verb == "scan":
        assert scan_container(target).tree_written
        return [tree_file(target)]
    if verb == "reconcile":
        block(target, 2).unlink()
        reconcile(target, [peer])
        return [tree_file(target), meta_file(target)]
    if verb == "writer":
        with ContainerWriter(target) as w:
            w.write_block(3, b"abc")
        return [tree_file(target), meta_file(target)]
    assert verb == "write_tree"
    write_tree(read_tree(tree_file(target)), tree_file(target))
    return [tree_file(target)]


@needs_root
@pytest.mark.parametrize("verb", ["scan", "reconcile", "writer"])
def test_9_rewrites_keep_owner_and_mode(tmp_path, verb):
    reps = trio(tmp_path, 2)
    target = reps[0]
    for f in (tree_file(target), meta_file(target)):
        os.chown(f, 65534, 65534)
        os.chmod(f, 0o640)
    for f in _rewrite(verb, target, reps[1]):
        st = f.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o640), f


def _rewrite_header(
    raw: bytes,
    *,
    version: Optional[int] = None,
    extra: bytes = b"",
    block_flags: Optional[int] = None,
    reserved: Optional[bytes] = None,
) -> bytes:
    head, body = bytearray(raw[:32]), bytearray(raw[32:-4])
    if version is not None:
        struct.pack_into(">H", head, 4, version)
    struct.pack_into(">H", head, 6, 32 + len(extra))
    if block_flags is not None:
        struct.pack_into(">I", body, 12, block_flags)
    if reserved is not None:
        body[16 + 17 : 16 + 20] = reserved
    out = bytes(head) + extra + bytes(body)
    return out + struct.pack(">I", merkle.crc32c(out))


def test_10_unknown_tree_fields_survive_a_rewrite(tmp_path):
    (rep,) = trio(tmp_path, 1)
    unknown = b"\xa0\x06\x2a" + b"\xaa\x06\x03xyz"  # fields 100 (varint) and 101 (bytes)
    tree_file(rep).write_bytes(tree_file(rep).read_bytes() + unknown)
    flip(block(rep, 1), 7)
    r = scan_container(rep)
    assert r.tree_written
    raw = tree_file(rep).read_bytes()
    assert raw.endswith(unknown)
    assert tree_from_bytes(raw).chunk_matches.sum() == r.tree.chunk_matches.sum()


def test_10_blocks_extensions_survive_a_rewrite(tmp_path):
    reps = trio(tmp_path, 2)
    target = reps[0]
    raw = _rewrite_header(
        meta_file(target).read_bytes(), extra=b"EXTENSION", block_flags=5, reserved=b"\x01\x02\x03"
    )
    meta_file(target).write_bytes(raw)
    block(target, 2).unlink()
    r = reconcile(target, [reps[1]])
    assert r.remaining == []
    new = meta_file(target).read_bytes()
    assert new != raw or True
    assert struct.unpack_from(">H", new, 6)[0] == 41 and new[32:41] == b"EXTENSION"
    assert struct.unpack_from(">I", new, 41 + 12)[0] == 5
    assert new[41 + 16 + 17 : 41 + 16 + 20] == b"\x01\x02\x03"


def test_10_a_newer_blocks_file_is_never_rewritten(tmp_path, capsys):
    reps = trio(tmp_path, 2)
    target = reps[0]
    newer = _rewrite_header(meta_file(target).read_bytes(), version=2)
    meta_file(target).write_bytes(newer)
    tree_before = tree_file(target).read_bytes()
    st, out, _ = run(capsys, "scan", target, "--json")
    errors = json.loads(out)["replicas"][0]["errors"]
    assert errors[0]["error"] == "METADATA_UNSUPPORTED"
    assert "unsupported version" in errors[0]["detail"] and st == 1
    assert tree_file(target).read_bytes() == tree_before
    st, out, err = run(capsys, "reconcile", target, reps[1])
    assert st == 2 and "unsupported version" in err
    assert meta_file(target).read_bytes() == newer
    assert tree_file(target).read_bytes() == tree_before
    with pytest.raises(Exception, match="unsupported version"):
        ContainerWriter(target)
    assert meta_file(target).read_bytes() == newer


# ---- 11-15. bounded memory, no crash -----------------------------------------------------

LIMIT = 768 * MiB  # python + numpy + merkle use ~150 MiB of address space


def _huge_window_replica(root: Path, bpc: int) -> Path:
    rep = make_replica(root / "dn" / "vol" / str(CID), {})
    data = payload(9, 100)
    block(rep, 1).write_bytes(data)
    meta = ContainerMeta(CID)
    meta.put_chunks(
        1, [ChunkMeta(0, len(data), CRC32, bpc, int(merkle.crc32(data)).to_bytes(4, "big"))]
    )
    write_blockmeta(meta, meta_file(rep))
    write_tree(tree_from_meta(meta), tree_file(rep))
    return rep


def test_11_scan_memory_does_not_follow_bytes_per_checksum(tmp_path):
    rep = _huge_window_replica(tmp_path, 2**32 - 1)
    r = child("scan", rep, "--json", memory=LIMIT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["replicas"][0]["ok"]


def test_11_large_windows_are_checksummed_piecewise(tmp_path):
    """Windows larger than the read buffer: the same verdicts as with a large buffer."""
    rep = make_replica(
        tmp_path / "dn" / "vol" / str(CID),
        {1: payload(1, 3 * MiB + 5)},
        bytes_per_checksum=1 * MiB,
        chunk_size=4 * MiB,
        algorithm="crc32c",
    )
    small = scan_container(rep, write_tree=False, buffer_size=64 * KiB)
    assert small.ok and small.bytes_read == 3 * MiB + 5
    flip(block(rep, 1), 2 * MiB + 3)
    small = scan_container(rep, write_tree=False, buffer_size=64 * KiB)
    big = scan_container(rep, write_tree=False, buffer_size=4 * MiB)
    assert small.error_keys() == big.error_keys() == [("CORRUPT_CHUNK", 1, 0)]
    assert small.scanned == big.scanned


def test_11_checksum_window_larger_than_the_file(tmp_path):
    f = tmp_path / "ten"
    f.write_bytes(b"0123456789")
    r = child("checksum", "-b", "2GiB", f, memory=LIMIT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[1] == f"{merkle.crc32c(b'0123456789'):08x}"
    r = child("checksum", "-b", "7", "--buffer-size", "4", f)
    assert r.stdout.split()[1:] == [
        f"{merkle.crc32c(b'0123456'):08x}",
        f"{merkle.crc32c(b'789'):08x}",
    ]


@pytest.mark.parametrize("which", ["tree", "blocks"])
def test_12_sparse_metadata_is_refused_before_reading(tmp_path, which):
    reps = trio(tmp_path, 2)
    target = reps[0]
    path = tree_file(target) if which == "tree" else meta_file(target)
    with open(path, "r+b") as f:
        f.truncate(1 << 30)  # 1 GiB, a few KiB on disk
    r = child("scan", target, "--json", memory=LIMIT)
    out = json.loads(r.stdout)
    kinds = [e["error"] for e in out["replicas"][0]["errors"]]
    assert ("TREE_UNREADABLE" if which == "tree" else "METADATA_UNREADABLE") in kinds
    assert "exceeds" in r.stdout
    assert path.stat().st_size == 1 << 30  # not rewritten
    if which == "tree":
        r = child("tree", "show", path, memory=LIMIT)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "exceeds" in r.stderr
    r = child("reconcile", reps[1], target, "--json", memory=LIMIT)  # as a peer
    out = json.loads(r.stdout)
    assert out["results"][0]["peers"][0]["status"] == "skipped"


@pytest.mark.parametrize("declared", [1 << 30, 1 << 40])
def test_13_a_peer_declared_chunk_length_is_not_allocated(tmp_path, declared):
    target = make_replica(tmp_path / "t" / "vol" / str(CID), {1: payload(1)})
    peer = make_replica(tmp_path / "p" / "vol" / str(CID), {1: payload(1)})
    block(peer, 3).write_bytes(b"z" * 123)
    meta = read_blockmeta(meta_file(peer))
    bpc = 1 << 30
    meta.put_chunks(3, [ChunkMeta(0, declared, CRC32, bpc, b"\0\0\0\1" * -(-declared // bpc))])
    write_blockmeta(meta, meta_file(peer))
    write_tree(tree_from_meta(meta), tree_file(peer))
    r = child("reconcile", target, peer, "--json", memory=LIMIT)
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert any("short" in f["reason"] for f in out["results"][0]["peers"][0]["failures"])


def test_14_checksum_each_reads_each_arrow_offset_once():
    code = textwrap.dedent("""
        import threading, numpy as np, pyarrow as pa, merkle
        n, size = 512, 64 * 1024
        data = pa.py_buffer(bytes(n * size))
        offsets = np.arange(n + 1, dtype=np.int32) * size
        arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), data])
        good, stop = int(offsets[n - 1]), False
        def flip():
            while not stop:
                offsets[n - 1] = 0       # makes the lengths around it negative
                offsets[n - 1] = good
        t = threading.Thread(target=flip)
        t.start()
        ok = bad = 0
        try:
            for _ in range(300):
                try:
                    merkle.checksum_each(arr)
                    ok += 1
                except ValueError:
                    bad += 1
        finally:
            stop = True
            t.join()
        print(ok, bad)
    """)
    r = child(code=code, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])


def test_15_scan_mmap_survives_a_block_shrinking_mid_scan(tmp_path):
    rep = make_replica(
        tmp_path / "dn" / "vol" / str(CID),
        {1: payload(1, 12 * MiB)},
        chunk_size=4 * MiB,
        bytes_per_checksum=16 * KiB,
    )
    code = textwrap.dedent(f"""
        import os
        from merkle.replica.scan import scan_container
        path = {str(block(rep, 1))!r}
        done = []
        def progress(n):
            if not done:
                done.append(1)
                os.truncate(path, 4096)
        r = scan_container({str(rep)!r}, write_tree=False, use_mmap=True, progress=progress)
        print(sorted(e.kind for e in r.errors))
    """)
    r = child(code=code)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "MISSING_CHUNK" in r.stdout or "INCONSISTENT_CHUNK_LENGTH" in r.stdout
    r = child("scan", "--mmap", "--no-write", rep)
    assert r.returncode == 1 and "CHUNK" in r.stdout


# ---- 16-17. one bad entry does not stop the rest -----------------------------------------


@needs_nobody
def test_16_an_unreadable_replica_directory_does_not_stop_the_scan(shared):
    vol = shared / "dn" / "vol"
    for cid in (1, 2, 3):
        with ContainerWriter.create(vol / str(cid), cid) as w:
            w.write_block(1, payload(cid, 5000))
    give_to_nobody(shared)
    os.chmod(vol / "2", 0)
    r = child("scan", shared, "--json", user=True)
    out = json.loads(r.stdout)
    assert r.returncode == 2
    assert sorted(x["container_id"] for x in out["replicas"]) == [1, 3]
    assert [os.path.basename(f["path"]) for f in out["failed"]] == ["2"]
    r = child("scan", shared, user=True)
    assert r.returncode == 2 and r.stdout.count("OK") == 2 and "Permission denied" in r.stderr
    os.chmod(vol, 0o300)  # the volume itself unlistable
    r = child("scan", shared, "--json", user=True)
    out = json.loads(r.stdout)
    assert r.returncode == 2 and out["failed"] and out["replicas"] == []


def test_17_a_container_id_above_int64_is_reported_not_fatal(tmp_path, capsys):
    reps = trio(tmp_path, 2)
    big = tmp_path / "dn0" / "vol" / str(2**64)
    shutil.copytree(reps[0], big)
    st, out, _ = run(capsys, "scan", tmp_path, "--json")
    doc = json.loads(out)
    assert len(doc["replicas"]) == 2 and st == 2
    assert [f["path"] for f in doc["failed"]] == [str(big)]
    assert "2**63-1" in doc["failed"][0]["error"]
    st, out, _ = run(capsys, "reconcile", "--all", tmp_path, "--json")
    doc = json.loads(out)
    assert len(doc["results"]) == 2 and doc["failed"][0]["path"] == str(big)
    st, _, err = run(capsys, "scan", big)
    assert st == 2 and err.count("\n") == 1


# ---- 18-19. trees and messages -----------------------------------------------------------


# A negative offset is accepted: Ozone's writer stores any long there (its golden file
# golden_g10_offsets_edge holds one >= 2**63); tree offsets never become file positions.
@pytest.mark.parametrize("row, what", [("1,0,10,100000000", "leaf"), ("1,0,-7,1", "length")])
def test_18_tree_build_refuses_out_of_range_values(tmp_path, capsys, row, what):
    table = tmp_path / "t.csv"
    table.write_text("block_id,offset,length,leaf\n" + row + "\n")
    out = tmp_path / "o.tree"
    st, _, err = run(capsys, "tree", "build", table, "--container-id", str(CID), "-o", out)
    assert st == 2 and err.count("\n") == 1 and what in err
    assert not out.exists()


@pytest.mark.parametrize("field", ["length"])  # offsets: any long, as Ozone (golden_g10)
def test_18_the_tree_reader_refuses_negative_offsets_and_lengths(tmp_path, capsys, field):
    import ozone_proto

    msg = ozone_proto.ContainerChecksumInfo()
    msg.containerID = CID
    b = msg.containerMerkleTree.blockMerkleTree.add(blockID=1, dataChecksum=5)
    c = b.chunkMerkleTree.add(offset=0, length=10, dataChecksum=5, checksumMatches=True)
    setattr(c, field, -7)
    raw = msg.SerializeToString()
    with pytest.raises(TreeFileError, match="negative"):
        tree_from_bytes(raw)
    path = tmp_path / "neg.tree"
    path.write_bytes(raw)
    st, out, err = run(capsys, "tree", "show", path)
    assert st == 2 and "negative" in err and "-7 bytes" not in out


def test_19_a_newline_in_a_path_does_not_split_the_error_line(tmp_path):
    r = child("scan", str(tmp_path / "a\nb"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "a\\nb" in r.stderr


def test_19_container_tree_leaves_the_callers_arrays_writable():
    off = np.array([0, 10], dtype=np.int64)
    ln = np.array([10, 5], dtype=np.int64)
    leaf = np.array([1, 2], dtype=np.int64)
    bid = np.array([1, 1], dtype=np.int64)
    t = ContainerTree.from_columns(CID, bid, off, ln, leaf=leaf)
    t2 = ContainerTree(
        CID,
        block_id=np.array([1]),
        block_value=np.array([3]),
        block_chunk_start=np.array([0, 2]),
        chunk_offset=off,
        chunk_length=ln,
        chunk_value=leaf,
    )
    for a in (off, ln, leaf, bid):
        assert a.flags.writeable
    off[0] = 99  # the trees are values: the caller's later writes do not reach them
    assert int(t.chunk_offset[0]) == 0 and int(t2.chunk_offset[0]) == 0
    assert not t.chunk_offset.flags.writeable


# ---- attacks of the same classes found beyond the issue ----------------------------------


def test_E1_a_hard_linked_block_file_is_never_written(tmp_path):
    reps = trio(tmp_path, 2)
    target = reps[0]
    victim = tmp_path / "victim.bin"
    shutil.copy(block(target, 1), victim)
    flip(victim, 10)
    before = victim.read_bytes()
    block(target, 1).unlink()
    os.link(victim, block(target, 1))
    r = reconcile(target, [reps[1]])
    assert victim.read_bytes() == before
    assert any("hard links" in f.reason for p in r.peers for f in p.failures)


def test_E2_a_linked_tree_or_blocks_file_is_neither_read_nor_replaced(tmp_path):
    reps = trio(tmp_path, 2)
    target = reps[0]
    for f in (tree_file(target), meta_file(target)):
        moved = f.with_name("real-" + f.name)
        f.rename(moved)
        f.symlink_to(moved.name)
    flip(block(target, 1), 2)
    r = scan_container(target)
    assert scan_errors(r)[0] == "NOT_A_REGULAR_FILE" and not r.tree_written
    assert tree_file(target).is_symlink() and meta_file(target).is_symlink()
    with pytest.raises(Exception, match="not a regular file"):
        reconcile(target, [reps[1]])
    assert tree_file(target).is_symlink() and meta_file(target).is_symlink()


def test_E3_the_writer_never_creates_or_writes_through_a_link(tmp_path):
    (rep,) = trio(tmp_path, 1)
    victim = tmp_path / "created-by-attack"
    block(rep, 5).symlink_to(victim)
    with ContainerWriter(rep) as w:
        with pytest.raises(OSError, match="not a regular file"):
            w.write_block(5, b"data")
        w.abort()
    assert not victim.exists()


def test_E4_metadata_and_tree_as_directories_or_devices(tmp_path):
    reps = trio(tmp_path, 2)
    target = reps[0]
    meta_file(target).unlink()
    meta_file(target).mkdir()
    tree_file(target).unlink()
    tree_file(target).symlink_to("/dev/zero")  # an endless file through a link
    r = child("scan", target, "--json", timeout=60, memory=LIMIT)
    out = json.loads(r.stdout)
    kinds = [e["error"] for e in out["replicas"][0]["errors"]]
    assert kinds.count("NOT_A_REGULAR_FILE") == 2
    assert meta_file(target).is_dir() and tree_file(target).is_symlink()


def test_E4_a_metadata_file_where_the_directory_belongs_is_one_error(tmp_path, capsys):
    target = trio(tmp_path, 1)[0]
    shutil.rmtree(target / "metadata")
    (target / "metadata").write_bytes(b"planted")
    status, out, _ = run(capsys, "scan", target, "--json")
    errors = json.loads(out)["replicas"][0]["errors"]
    assert status == 1 and len(errors) == 1, errors  # the .tree and .blocks share one cause
    assert errors[0]["error"] == "NOT_A_REGULAR_FILE"
    assert "not a directory (a regular file)" in errors[0]["detail"]
    assert (target / "metadata").read_bytes() == b"planted"


# ---- replicate, and what crcmerkle creates as root (audit after the issue: S1, S4-S6) -----
# `crcmerkle replicate` and the creation helpers every writer shares (merkle.replica.safeopen):
# no setuid/setgid/sticky bit on anything created or rewritten, metadata read within the cap,
# created files and directories owned as the directory they are made in, and no copy written
# through a linked datanode or volume directory.


def _pair(root: Path) -> tuple:
    """A source replica root/dnA/vol1/7 and a free target root/dnB/vol1/7 (its volume made)."""
    src = make_replica(root / "dnA" / "vol1" / str(CID), {1: payload(1), 2: payload(2)})
    (root / "dnB" / "vol1").mkdir(parents=True)
    return src, root / "dnB" / "vol1" / str(CID)


def _tree_entries(top: Path) -> List[Path]:
    out = [top]
    for dirpath, dirnames, filenames in os.walk(top):
        out += [Path(dirpath) / n for n in dirnames + filenames]
    return out


def test_S1_replicate_never_creates_setuid_setgid_or_sticky_files(tmp_path, capsys):
    src, tgt = _pair(tmp_path)
    os.chmod(block(src, 1), 0o4755)  # a planted setuid block file
    os.chmod(block(src, 2), 0o2640)
    os.chmod(src / "chunks", 0o3755)
    os.chmod(src / "metadata", 0o2750)
    os.chmod(meta_file(src), 0o6644)
    os.chmod(src, 0o1755)
    status, out, err = run(capsys, "replicate", src, tgt)
    assert status == 0, err
    for p in _tree_entries(tgt):
        assert stat.S_IMODE(p.lstat().st_mode) & 0o7000 == 0, (p, oct(p.lstat().st_mode))
    assert stat.S_IMODE(block(tgt, 1).stat().st_mode) == 0o755  # the rest of the mode is kept
    assert stat.S_IMODE(block(tgt, 2).stat().st_mode) == 0o640
    assert stat.S_IMODE(block(src, 1).stat().st_mode) == 0o4755  # the source is only read


@pytest.mark.parametrize("verb", ["scan", "reconcile", "write_tree"])
def test_S1_rewrites_keep_the_mode_without_setuid_setgid_or_sticky(tmp_path, verb):
    reps = trio(tmp_path, 2)
    target = reps[0]
    os.chmod(tree_file(target), 0o6640)
    os.chmod(meta_file(target), 0o4640)
    for f in _rewrite(verb, target, reps[1]):
        assert stat.S_IMODE(f.stat().st_mode) == 0o640, (f, oct(f.stat().st_mode))


@pytest.mark.parametrize("which", ["tree", "blocks", "target-tree"])
def test_S4_replicate_refuses_sparse_metadata_before_reading(tmp_path, which):
    src, tgt = _pair(tmp_path)
    if which == "target-tree":  # an existing target is looked at with the same care
        shutil.copytree(src, tgt)
        path = tree_file(tgt)
    else:
        path = tree_file(src) if which == "tree" else meta_file(src)
    with open(path, "r+b") as f:
        f.truncate(1 << 30)  # 1 GiB, a few KiB on disk
    r = child("replicate", src, tgt, memory=LIMIT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    if which == "target-tree":
        assert "not an identical replica" in r.stderr
        assert path.stat().st_size == 1 << 30
    else:
        assert "exceeds" in r.stderr and not tgt.exists()
    assert not [n for n in os.listdir(tgt.parent) if n.startswith(".crcmerkle-replicate-")]


@needs_nobody
def test_S5_what_root_creates_belongs_to_the_directory_owner(shared):
    """Run as root on a datanode whose replicas belong to its own user (here nobody), scan
    (the lock file), reconcile (a pulled block file new to the replica) and replicate (every
    file and directory of the new replica) leave nothing that user cannot use."""
    import pwd

    target = make_replica(shared / "dn0" / "vol" / str(CID), {1: payload(1), 2: payload(2)})
    peers = [
        make_replica(
            shared / f"dn{i}" / "vol" / str(CID), {1: payload(1), 2: payload(2), 4: payload(4)}
        )
        for i in (1, 2)
    ]
    (shared / "dn3" / "vol").mkdir(parents=True)
    copy = shared / "dn3" / "vol" / str(CID)
    for rep in [target] + peers:
        (rep / ".crcmerkle.lock").unlink(missing_ok=True)
    give_to_nobody(shared)
    os.chmod(shared, 0o755)
    assert not block(target, 4).exists()
    assert main(["scan", str(target)]) == 0  # creates the lock file
    r = reconcile(target, peers)
    assert block(target, 4).exists(), r  # pulled: a new block file
    assert main(["replicate", str(target), str(copy)]) == 0
    pw = pwd.getpwnam("nobody")
    for p in _tree_entries(shared)[1:]:
        st = p.lstat()
        assert (st.st_uid, st.st_gid) == (pw.pw_uid, pw.pw_gid), p
        assert stat.S_IMODE(st.st_mode) & 0o7000 == 0, p
    for rep in (target, copy):
        r = child("scan", rep, "--json", user=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_S6_replicate_never_writes_through_a_linked_datanode_or_volume(tmp_path, capsys):
    src = make_replica(tmp_path / "rep3" / "dnA" / "vol1" / str(CID), {1: payload(1)})
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "vol1").mkdir(parents=True)
    (tmp_path / "rep3" / "dnB").symlink_to(elsewhere)
    (tmp_path / "rep3" / "dnC").mkdir()
    (tmp_path / "rep3" / "dnC" / "vol1").symlink_to(elsewhere / "vol1")
    for dn in ("dnB", "dnC"):
        status, _, err = run(capsys, "replicate", src, tmp_path / "rep3" / dn / "vol1" / str(CID))
        assert status == 2 and err.count("\n") == 1 and "symbolic link" in err, err
    assert not os.listdir(elsewhere / "vol1")
    # the volume must exist: it is never created
    status, _, err = run(capsys, "replicate", src, tmp_path / "rep3" / "dnD" / "vol1" / str(CID))
    assert status == 2 and err.count("\n") == 1 and "does not exist" in err, err
    assert not (tmp_path / "rep3" / "dnD").exists()


# ---- S2/S8 (audit): one voice per replica and per datanode; --json in every outcome -------


def _liars_and_good(root: Path) -> List[Path]:
    """target (no block 2) on dn0, the lie of block 2 twice on dn1 (two volumes), the truth
    once on dn2."""
    lie = payload(2, salt=9)
    target = make_replica(root / "dn0" / "vol1" / str(CID), {1: payload(1)})
    liars = [
        make_replica(root / "dn1" / v / str(CID), {1: payload(1), 2: lie}) for v in ("vol1", "vol2")
    ]
    good = make_replica(root / "dn2" / "vol1" / str(CID), {1: payload(1), 2: payload(2)})
    return [target, *liars, good]


def test_S2_one_datanode_with_two_copies_of_a_lie_does_not_outvote_the_truth(tmp_path, capsys):
    target, _, _, _ = _liars_and_good(tmp_path)
    status, out, _ = run(capsys, "reconcile", "--all", tmp_path, "--json")
    json.loads(out)
    data = block(target, 2).read_bytes() if block(target, 2).exists() else b""
    assert data != payload(2, salt=9) and data in (b"", payload(2))
    assert status == 1  # dn1 counts once: 1 against 1, left alone and reported


def test_S2_a_repeated_or_linked_peer_votes_once(tmp_path, capsys):
    target, liar, _, good = _liars_and_good(tmp_path)
    link = tmp_path / "link" / "vol" / str(CID)
    link.parent.mkdir(parents=True)
    link.symlink_to(liar)
    for second in (liar, link):
        status, out, _ = run(capsys, "reconcile", target, liar, second, good, "--json")
        doc = json.loads(out)
        assert not block(target, 2).exists() or block(target, 2).read_bytes() != payload(2, salt=9)
        skipped = [p["reason"] for p in doc["results"][0]["peers"] if p["status"] == "skipped"]
        assert skipped and "same replica" in skipped[0]
    status, out, _ = run(capsys, "reconcile", target, target, good, "--json")
    assert "this replica" in out


def _report(tmp_path: Path, **entry) -> Path:
    reps = trio(tmp_path, 2)
    e = {
        "round": 0,
        "container_id": CID,
        "datanode": "dn0",
        "replica": str(reps[0]),
        "peers": [str(reps[1])],
    }
    e.update(entry)
    path = tmp_path / "R.json"
    path.write_text(
        json.dumps({"format": "crcmerkle-spark-report", "reconcile": [e]}).replace(
            '"ROUND"', "1e400"
        )
    )
    return path


@pytest.mark.parametrize("bad", ["ROUND", [1], True, -1, 1.5, 2**70])
def test_S8_bad_numbers_in_a_report_are_one_line_errors(tmp_path, bad):
    path = _report(tmp_path, round=bad)
    r = child("reconcile", "--report", path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unexpected" not in r.stderr
    assert '"round"' in r.stderr and r.stdout == ""
    r = child("reconcile", "--report", path, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 2 and doc["results"] == [] and '"round"' in doc["failed"][0]["error"]


def test_S8_json_is_printed_when_the_work_cannot_start(tmp_path):
    cases = [
        ("reconcile", "--all", tmp_path / "nonexist"),
        ("reconcile", "--report", tmp_path / "missing.json"),
        ("reconcile", tmp_path / "only-one"),
        ("reconcile", "--all", tmp_path),
    ]  # exists, no replica
    for argv in cases:
        r = child(*argv, "--json")
        doc = json.loads(r.stdout)
        assert r.returncode == 2 and doc["failed"] and doc["results"] == [], argv
        assert r.stderr.count("\n") == 1 and "[Errno" not in r.stderr, r.stderr
    r = child("reconcile", "--all", tmp_path / "nonexist")
    assert r.stdout == "" and "No such file or directory" in r.stderr
    assert "[Errno" not in r.stderr


# ---- S7 (audit): a symbolic link where a replica directory is expected ---------------------


def test_S7_a_linked_replica_directory_is_reported_never_followed(tmp_path, capsys):
    def make(path: Path, cid: int) -> Path:
        with ContainerWriter.create(path, cid) as w:
            w.write_block(1, payload(cid, 5000))
        return path

    foreign = make(tmp_path / "foreign" / "9", 9)
    os.unlink(foreign / "metadata" / "9.tree")
    os.unlink(foreign / ".crcmerkle.lock")  # the writer's own: none may appear again
    reps = [make(tmp_path / "cm" / "dn0" / "vol1" / str(c), c) for c in (1, 2)]
    link = tmp_path / "cm" / "dn0" / "vol1" / "9"
    link.symlink_to(foreign)
    status, out, _ = run(capsys, "scan", tmp_path / "cm" / "dn0", "--json")
    doc = json.loads(out)
    assert status == 2 and len(doc["replicas"]) == 2
    assert [f["path"] for f in doc["failed"]] == [str(link)]
    assert "symbolic link" in doc["failed"][0]["error"]
    for argv in (("scan", link), ("scan", str(link) + "/"), ("reconcile", link, reps[0])):
        status, _, err = run(capsys, *argv)
        assert status == 2 and "symbolic link" in err and err.count("\n") == 1, err
    assert not (foreign / "metadata" / "9.tree").exists()
    assert not (foreign / ".crcmerkle.lock").exists()
    # Spark discovery on local paths does not count a link as a second replica
    (tmp_path / "cm" / "dn1" / "vol1").mkdir(parents=True)
    (tmp_path / "cm" / "dn1" / "vol1" / "1").symlink_to(reps[0])
    code = textwrap.dedent(f"""
        from merkle.replica.crcmerkle.remote import discover
        for root in ({str(tmp_path / "cm")!r}, "file://" + {str(tmp_path / "cm")!r}):
            print(sorted((r.datanode, r.container) for r in discover(root)))
    """)
    r = child(code=code, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[('dn0', 1), ('dn0', 2)]"] * 2


def test_S9_reconcile_text_output_escapes_a_newline_in_a_path(tmp_path, capsys):
    reps = [
        make_replica(tmp_path / f"d\nn{i}" / "vol" / str(CID), {1: payload(1)}) for i in range(2)
    ]
    status, out, _ = run(capsys, "reconcile", *reps)
    assert (
        status == 0
        and "d\\nn0" in out
        and all(line.startswith((str(tmp_path), " ")) for line in out.splitlines())
    )


# ---- the replica directory itself is never reached through a link -------------------------


def test_a_linked_replica_directory_is_refused_by_the_lock_and_the_reader(tmp_path):
    """Below the CLI's check: the lock and the replica reader open the replica directory
    without following a link, so a swap after any check cannot send a write elsewhere."""
    from merkle.replica.crcmerkle.layout import container_paths
    from merkle.replica.errors import ReplicaError
    from merkle.replica.lock import ReplicaLock
    from merkle.replica.safeopen import NotRegularFileError, ReplicaDir

    foreign = tmp_path / "foreign"
    (foreign / "metadata").mkdir(parents=True)
    (tmp_path / "vol").mkdir()
    (tmp_path / "vol" / "9").symlink_to(foreign)
    with pytest.raises((ReplicaError, NotRegularFileError, OSError)):
        ReplicaLock(container_paths(tmp_path / "vol" / "9")).acquire()
    with pytest.raises((NotRegularFileError, OSError)):
        ReplicaDir(tmp_path / "vol" / "9")
    assert sorted(os.listdir(foreign)) == ["metadata"]
