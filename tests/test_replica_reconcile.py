"""The reconciler: convergence, byte-identical repairs, no data loss, crash safety, peers
that vanish, the lock, the dry run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from merkle.replica.crcmerkle.layout import container_paths
from merkle.replica.errors import ReplicaLockedError
from merkle.replica.generate import FAULT_TYPES
from merkle.replica.lock import ReplicaLock
from merkle.replica.reconcile import reconcile, reconcile_round, replica_groups
from merkle.replica.scan import scan_container
from merkle.trees.treefile import read_tree

from replica_helpers import (
    check_data,
    container_values,
    file_sizes,
    full_round,
    make_cluster,
    scan_all,
    snapshot,
    unrepairable,
)


class Crash(Exception):
    """Stands for the process dying between two write steps."""


def assert_converged(root, manifest):
    """Every container's replicas agree (except unrepairable ones) and scan clean; data is
    the pristine data; tombstones are everywhere."""
    bad = unrepairable(manifest)
    values = container_values(root)
    for cid, vals in values.items():
        if not any(c == cid for c, _ in bad):
            assert len(set(vals)) == 1 and vals[0] is not None, (cid, vals)
    for rep, r in scan_all(root, write_tree=False).items():
        cid = int(Path(rep).name)
        leftover = {(e.kind, e.block_id) for e in r.errors}
        allowed = {("CORRUPT_CHUNK", b) for c, b in bad if c == cid}
        assert leftover <= allowed, (rep, r.errors)
    for cid, blocks in manifest["tombstones"].items():
        # A tombstone keeps its block's value, so a replica that still has the block live can
        # hold the same container value (Ozone's O(1) check then has nothing to repair).
        for rep in manifest["containers"][cid]["replicas"]:
            tree = read_tree(root / rep / "metadata" / f"{cid}.tree")
            for b in blocks:
                assert b in tree, (rep, b)
    assert check_data(root, manifest) > 0


@pytest.mark.parametrize("fault", FAULT_TYPES)
def test_each_fault_alone_converges(tmp_path, fault):
    root = tmp_path / "c"
    m = make_cluster(root, fault, containers=2, seed=11)
    sizes = file_sizes(root)
    full_round(root)
    assert_converged(root, m)
    after = file_sizes(root)
    for name, n in sizes.items():  # no block file ever disappears or shrinks
        assert after[name] >= n, name


@pytest.mark.parametrize("seed", range(4))
def test_mixed_faults_converge_and_rerun_is_a_noop(tmp_path, seed):
    root = tmp_path / "c"
    m = make_cluster(
        root, "default", containers=4, seed=seed, algorithm="mixed", min_blocks=3, max_blocks=6
    )
    sizes = file_sizes(root)
    results = full_round(root)
    assert_converged(root, m)
    after = file_sizes(root)
    assert all(after[k] >= v for k, v in sizes.items())
    # the unrepairable chunk is reported with its reason, on every replica of its container
    for cid, block in unrepairable(m):
        for r in results[cid]:
            assert any(
                p.block_id == block and "no readable peer has a healthy copy" in p.reason
                for p in r.remaining
            ), r.remaining
    before = snapshot(root)
    again = full_round(root)
    assert snapshot(root) == before
    for rs in again.values():
        for r in rs:
            assert not r.changed and all(not p.copied for p in r.peers)


def test_same_chunk_on_two_replicas_is_repaired_from_the_third(tmp_path):
    root = tmp_path / "c"
    m = make_cluster(root, "bitflip2", containers=1, seed=3)
    f = m["faults"][0]
    healthy = [r for r in m["containers"]["1"]["replicas"] if r not in f["replicas"]]
    results = full_round(root)
    copied = [
        (Path(r.path).relative_to(root).as_posix(), p.peer, c.offset)
        for r in results[1]
        for p in r.peers
        for c in p.copied
    ]
    assert {c[0] for c in copied} == set(f["replicas"])
    assert all(c[2] == f["chunk_offset"] for c in copied)
    assert any(Path(c[1]).relative_to(root).as_posix() == healthy[0] for c in copied)
    assert_converged(root, m)


def test_same_chunk_on_all_replicas_is_reported_not_invented(tmp_path):
    root = tmp_path / "c"
    m = make_cluster(root, "bitflip-all", containers=1, seed=3)
    before = snapshot(root)
    results = full_round(root)
    f = m["faults"][0]
    for r in results[1]:
        assert not r.changed
        assert [(p.block_id, p.offset) for p in r.remaining] == [(f["block_id"], f["chunk_offset"])]
    # only trees were rewritten by the scans; no block data changed
    data = {k: v for k, v in snapshot(root).items() if k.endswith(".block")}
    assert data == {k: v for k, v in before.items() if k.endswith(".block")}


def test_tombstone_alone_does_not_change_the_container_value(tmp_path):
    """Tombstones keep their value: equal container values, nothing to do (Ozone's rule)."""
    root = tmp_path / "c"
    make_cluster(root, "tombstone", containers=1, seed=5)
    results = full_round(root)
    assert len(set(container_values(root)[1])) == 1
    assert all(p.status == "in-sync" for r in results[1] for p in r.peers)


def test_tombstone_with_the_live_value_is_not_adopted(tmp_path):
    """A tombstone keeps its block's value; Ozone examines a block present on both sides only
    when the values differ, so the replicas that still hold it live keep it live."""
    root = tmp_path / "c"
    m = make_cluster(root, "tombstone", containers=1, seed=5)
    f = m["faults"][0]
    others = [r for r in m["containers"]["1"]["replicas"] if r not in f["replicas"]]
    # another divergence on the replicas that kept the block, so the container values differ
    other_block = next(int(b) for b in m["containers"]["1"]["blocks"] if int(b) != f["block_id"])
    for rep in others:
        with open(root / rep / "chunks" / f"{other_block}.block", "r+b") as fh:
            fh.seek(5)
            x = fh.read(1)
            fh.seek(5)
            fh.write(bytes([x[0] ^ 1]))
    full_round(root)
    for rep in others:
        assert not read_tree(root / rep / "metadata" / "1.tree").block(f["block_id"]).deleted
    for rep in f["replicas"]:
        assert read_tree(root / rep / "metadata" / "1.tree").block(f["block_id"]).deleted
    assert_converged(root, m)


def test_tombstone_is_adopted_in_the_tree_only(tmp_path):
    """Where the live copy's value differs (here it is corrupt), the tombstone is adopted, in
    the tree only: the data stays."""
    root = tmp_path / "c"
    m = make_cluster(root, "tombstone", containers=1, seed=5)
    f = m["faults"][0]
    others = [r for r in m["containers"]["1"]["replicas"] if r not in f["replicas"]]
    for rep in others:
        with open(root / rep / "chunks" / f"{f['block_id']}.block", "r+b") as fh:
            fh.seek(5)
            x = fh.read(1)
            fh.seek(5)
            fh.write(bytes([x[0] ^ 1]))
    full_round(root)
    for rep in others:
        assert (root / rep / "chunks" / f"{f['block_id']}.block").exists()  # data kept
        assert read_tree(root / rep / "metadata" / "1.tree").block(f["block_id"]).deleted
    assert len(set(container_values(root)[1])) == 1


def test_dry_run_changes_nothing_and_prints_the_plan(tmp_path):
    root = tmp_path / "c"
    make_cluster(root, "missing-file,bitflip", containers=1, seed=8)
    before = snapshot(root)
    reps = replica_groups(root)[1]
    results = reconcile_round(reps, dry_run=True)
    assert snapshot(root) == before
    planned = [c for r in results for p in r.peers for c in p.planned]
    assert planned and all(c.length > 0 for c in planned)
    assert {c.reason for c in planned} <= {"missing_block", "corrupt_chunk", "missing_chunk"}
    # each needed chunk is planned once per replica, not once per peer
    for r in results:
        keys = [(c.block_id, c.offset) for p in r.peers for c in p.planned]
        assert len(keys) == len(set(keys))


def test_locked_replica_is_refused(tmp_path):
    root = tmp_path / "c"
    make_cluster(root, "bitflip", containers=1, seed=1)
    reps = replica_groups(root)[1]
    with ReplicaLock(container_paths(reps[0])):
        with pytest.raises(ReplicaLockedError):
            reconcile(reps[0], reps[1:])
        with pytest.raises(ReplicaLockedError):
            scan_container(reps[0])
        reconcile(reps[0], reps[1:], dry_run=True)  # read-only: no lock needed


def test_unreadable_and_foreign_peers_are_skipped(tmp_path):
    root = tmp_path / "c"
    m = make_cluster(root, "missing-file", containers=2, seed=2)
    f = m["faults"][0]
    cid = f["container_id"]
    target = root / f["replicas"][0]
    good = [root / r for r in m["containers"][str(cid)]["replicas"] if root / r != target]
    other = root / m["containers"][str(3 - cid)]["replicas"][0]
    r = reconcile(target, [tmp_path / "gone" / str(cid), other, good[0]])
    assert [p.status for p in r.peers] == ["skipped", "skipped", "repaired"]
    assert "does not exist" in r.peers[0].reason and "container" in r.peers[1].reason
    assert scan_container(target, write_tree=False).ok


def test_peer_vanishing_mid_repair(tmp_path):
    root = tmp_path / "c"
    m = make_cluster(root, "meta-missing", containers=1, seed=6, min_blocks=3)
    target = root / m["faults"][0]["replicas"][0]
    peers = [root / r for r in m["containers"]["1"]["replicas"] if root / r != target]
    moved = tmp_path / "away"

    def vanish(step, detail):
        if step == "chunk" and not moved.exists():
            # the first peer's data dies after one chunk (its directories are held open by
            # descriptor, so moving the replica away is not enough: its files go)
            moved.mkdir()
            for f in (peers[0] / "chunks").iterdir():
                shutil.move(str(f), str(moved / f.name))

    r = reconcile(target, peers, on_step=vanish)
    # the open block file still reads (POSIX); the blocks after it are gone
    assert r.peers[0].failures and r.peers[0].copied
    assert r.peers[1].status == "repaired"
    for f in moved.iterdir():
        shutil.move(str(f), str(peers[0] / "chunks" / f.name))
    assert scan_container(target, write_tree=False).ok
    assert r.after == scan_container(peers[1], write_tree=False).tree.data_checksum
    full_round(root)
    assert_converged(root, m)


def test_peer_with_stale_tree_and_bad_data_is_not_trusted(tmp_path):
    """A peer whose tree still says 'healthy' but whose bytes rotted: verification refuses
    the copy; the next peer supplies it."""
    root = tmp_path / "c"
    m = make_cluster(root, "bitflip2", containers=1, seed=9)
    f = m["faults"][0]
    a, b = (root / r for r in f["replicas"])  # both corrupt, trees stale (never scanned)
    healthy = next(root / r for r in m["containers"]["1"]["replicas"] if r not in f["replicas"])
    r = reconcile(a, [b, healthy])
    assert any(
        "does not match our recorded window checksums" in x.reason for x in r.peers[0].failures
    )
    assert r.peers[1].status == "repaired" and not r.remaining
    assert scan_container(a, write_tree=False).ok


def _crash_cluster(tmp_path):
    template = tmp_path / "template"
    m = make_cluster(
        template,
        "bitflip,truncate,missing-file,missing-chunks,tombstone,"
        "extra-block,meta-corrupt,tree-missing",
        containers=2,
        seed=21,
        min_blocks=4,
        max_blocks=6,
    )
    return template, m


def test_crash_after_any_write_step_then_rerun_converges(tmp_path):
    template, m = _crash_cluster(tmp_path)
    steps = []
    probe = tmp_path / "probe"
    shutil.copytree(template, probe)
    full_round(probe, on_step=lambda s, d: steps.append(s))
    assert {"chunk", "block", "metadata", "tree"} <= set(steps)
    for k in range(len(steps)):
        work = tmp_path / f"crash{k}"
        shutil.copytree(template, work)
        sizes = file_sizes(work)
        calls = [0]

        def crash(step, detail, k=k, calls=calls):
            calls[0] += 1
            if calls[0] == k + 1:
                raise Crash(step)

        with pytest.raises(Crash):
            full_round(work, on_step=crash)
        full_round(work)  # the re-run, after the "restart"
        assert_converged(work, m)
        after = file_sizes(work)
        assert all(after[n] >= s for n, s in sizes.items())
        shutil.rmtree(work)


def test_crash_between_data_and_metadata_leaves_a_repairable_replica(tmp_path):
    root = tmp_path / "c"
    m = make_cluster(root, "missing-file", containers=1, seed=4)
    target = root / m["faults"][0]["replicas"][0]
    peers = [root / r for r in m["containers"]["1"]["replicas"] if root / r != target]

    def crash(step, detail):
        if step == "block":
            raise Crash()

    with pytest.raises(Crash):
        reconcile(target, peers, on_step=crash)
    # data written, metadata not yet: the block is still reported missing...
    assert [e.kind for e in scan_container(target, write_tree=False).errors] == [
        "MISSING_DATA_FILE"
    ] or scan_container(target, write_tree=False).ok
    # ...and a re-run (the lock died with the "process") repairs it
    r = reconcile(target, peers)
    assert not r.remaining and scan_container(target, write_tree=False).ok


def test_torn_chunk_write_then_rerun_converges(tmp_path, monkeypatch):
    """The process dies inside a pwrite, half a chunk on disk (a torn write)."""
    import merkle.replica.reconcile.copying as rr  # where the copier writes (pwrite)

    root = tmp_path / "c"
    m = make_cluster(root, "bitflip,missing-chunks", containers=1, seed=12)
    real = os.pwrite

    def torn(fd, data, offset):
        if len(data) < 1024:  # the lock file's PID
            return real(fd, data, offset)
        real(fd, bytes(data[: len(data) // 2]), offset)
        raise Crash()

    monkeypatch.setattr(rr.os, "pwrite", torn)
    with pytest.raises(Crash):
        full_round(root)
    monkeypatch.setattr(rr.os, "pwrite", real)
    full_round(root)
    assert_converged(root, m)


def test_crash_test_covers_many_steps(tmp_path):
    template, _ = _crash_cluster(tmp_path)
    steps = []
    full_round(template, on_step=lambda s, d: steps.append(s))
    assert len(steps) >= 20 and steps.count("metadata") >= 3


def test_two_healthy_copies_that_differ_are_reported(tmp_path):
    """A write-path divergence: each replica's chunk matches its own checksums, the values
    differ. Nothing is copied; the reason names the peer."""
    from merkle.replica.replicadir.writer import ContainerWriter

    reps = []
    for i, payload in enumerate([b"a" * 9000, b"b" * 9000]):
        root = tmp_path / f"dn{i}" / "vol0" / "4"
        with ContainerWriter.create(root, chunk_size=4096, bytes_per_checksum=1024) as w:
            w.write_block(1, b"same" * 2000)
            w.write_block(2, payload)
        reps.append(root)
    results = reconcile_round(reps)
    for r, other in zip(results, reversed(reps)):
        assert not r.changed
        assert {(p.block_id, p.offset) for p in r.remaining} == {(2, 0), (2, 4096), (2, 8192)}
        assert all(
            "healthy copies differ" in p.reason and str(other) in p.reason for p in r.remaining
        )


@pytest.mark.parametrize("local_len,planned", [(100, [100, 200]), (150, []), (50, [])])
def test_plan_follows_ozones_contiguity_rule(local_len, planned):
    """A pulled chunk is written only where the previous local chunk ends exactly at its
    offset (a chunk starting inside the file, or past its end, stops the block)."""
    from merkle.replica.reconcile import ChunkCopy, _Copier
    from merkle.replica.replicadir.blockmeta import ChunkMeta, ContainerMeta

    data = bytes(range(200))
    local, peer = ContainerMeta(1), ContainerMeta(1)
    local.put_chunks(1, [ChunkMeta.from_data(0, data[:local_len], bytes_per_checksum=64)])
    peer.put_chunks(
        1, [ChunkMeta.from_data(o, data[:100], bytes_per_checksum=64) for o in (0, 100, 200)]
    )
    from merkle.replica.reconcile import _Peer

    copies = [
        ChunkCopy(1, o, 100, "missing_chunk", peer.blocks[1].chunk_at(o).leaf) for o in (100, 200)
    ]
    winners = {c.offset: (c.length, c.peer_value) for c in copies}
    copier = _Copier(
        None,
        _Peer("peer", None, peer, None),
        local,
        lambda b, o: winners.get(o),
        {1: 10**6},
        None,
        True,
    )
    items, stops = copier.plan_block(1, copies)
    assert [c.offset for c, _ in items] == planned
    assert (not stops) == bool(planned)
    if stops:
        assert stops[0].offset == 100 and "does not follow" in stops[0].reason


def test_none_chunks_are_not_reported_as_missing(tmp_path):
    """Chunks of checksum type NONE are never in the scanner's tree (Ozone skips them): a
    replica holding one is in sync with its copy, with nothing left to repair."""
    from merkle.replica.replicadir.writer import ContainerWriter

    reps = []
    for dn in ("dn1", "dn2"):
        root = tmp_path / dn / "vol" / "4"
        with ContainerWriter.create(root, 4, bytes_per_checksum=1024) as w:
            w.write_chunk(1, 0, bytes(range(256)) * 8)
            w.write_chunk(1, 2048, b"n" * 500, algorithm="none")
        reps.append(root)
    r = reconcile(reps[0], [reps[1]])
    assert r.remaining == [] and r.scan.ok
    assert [c.offset for c in r.scan.tree.block(1).chunks] == [0]
