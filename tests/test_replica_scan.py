"""The scanner: every fault found with its correct error, exactly what the manifest says."""

from __future__ import annotations

import json
import os

import pytest

from merkle.replica.generate import FAULT_TYPES
from merkle.replica.replicadir.writer import ContainerWriter
from merkle.replica.scan import (
    CORRUPT_CHUNK,
    INCONSISTENT_CHUNK_LENGTH,
    MISSING_CHUNK,
    RateLimiter,
    scan_container,
    scan_container as _scan_container,
)
from merkle.trees.treefile import read_tree

from replica_helpers import expected_keys, found_keys, make_cluster, scan_all

# every fault type alone, on 3-replica containers (two containers so placement has room)
SINGLE = [t for t in FAULT_TYPES]


def _check_manifest(root, manifest, **kw):
    results = scan_all(root, **kw)
    assert set(results) == set(manifest["expected_errors"])
    for rep, r in results.items():
        assert found_keys(r) == expected_keys(manifest, rep), rep
    return results


@pytest.mark.parametrize("fault", SINGLE)
def test_each_fault_alone_is_found(tmp_path, fault):
    m = make_cluster(tmp_path / "c", fault, containers=2, seed=11)
    assert [f["type"] for f in m["faults"]] == [fault]
    results = _check_manifest(tmp_path / "c", m)
    n_errors = sum(len(r.errors) for r in results.values())
    if fault in ("tombstone", "extra-block"):
        assert n_errors == 0  # divergence only a diff can see
    else:
        assert n_errors >= 1


@pytest.mark.parametrize("seed", range(6))
def test_mixed_faults_manifest_equals_findings(tmp_path, seed):
    m = make_cluster(
        tmp_path / "c",
        "default",
        containers=4,
        seed=seed,
        algorithm="mixed",
        min_blocks=3,
        max_blocks=6,
    )
    _check_manifest(tmp_path / "c", m)


def test_same_chunk_on_two_and_three_replicas(tmp_path):
    m = make_cluster(tmp_path / "c", "bitflip2,bitflip-all", containers=2, seed=4)
    results = _check_manifest(tmp_path / "c", m)
    for f in m["faults"]:
        assert len(f["replicas"]) == (2 if f["type"] == "bitflip2" else 3)
        for rep in f["replicas"]:
            assert (CORRUPT_CHUNK, f["block_id"], f["chunk_offset"]) in found_keys(results[rep])


def test_workers_and_small_buffers_give_the_same_result(tmp_path):
    m = make_cluster(tmp_path / "c", "default", containers=4, seed=2, min_blocks=3)
    a = scan_all(tmp_path / "c", write_tree=False)
    b = scan_all(tmp_path / "c", write_tree=False, workers=3, buffer_size=5000)
    c = scan_all(tmp_path / "c", write_tree=False, use_mmap=True, workers=2)
    for rep in a:
        assert (
            found_keys(a[rep]) == found_keys(b[rep]) == found_keys(c[rep]) == expected_keys(m, rep)
        )
        assert a[rep].tree == b[rep].tree == c[rep].tree


def _replica(tmp_path, algorithm="crc32"):
    root = tmp_path / "v" / "5"
    with ContainerWriter.create(
        root, algorithm=algorithm, chunk_size=16384, bytes_per_checksum=4096
    ) as w:
        w.write_block(1, os.urandom(40000))  # chunks @0 16K, @16384 16K, @32768 7232
        w.write_block(2, os.urandom(4096))
    return root


@pytest.mark.parametrize("use_mmap", [False, True])
@pytest.mark.parametrize("algorithm", ["crc32", "crc32c"])
def test_truncation_semantics(tmp_path, algorithm, use_mmap):
    import functools

    scan_container = functools.partial(_scan_container, use_mmap=use_mmap)
    root = _replica(tmp_path, algorithm)
    block = root / "chunks" / "1.block"
    os.truncate(block, 16384 + 8192)  # window boundary inside chunk 2
    r = scan_container(root)
    assert found_keys(r) == [(INCONSISTENT_CHUNK_LENGTH, 1, 16384), (MISSING_CHUNK, 1, 32768)]
    chunks = r.tree.block(1).chunks
    assert [(c.offset, c.length, c.checksum_matches) for c in chunks] == [
        (0, 16384, True),
        (16384, 8192, False),
    ]  # missing chunk: no leaf
    os.truncate(block, 16384 + 1000)  # mid-window: the partial window mismatches
    r = scan_container(root)
    assert found_keys(r) == [(CORRUPT_CHUNK, 1, 16384), (MISSING_CHUNK, 1, 32768)]
    assert r.tree.block(1).chunks[1].length == 1000


def test_corruption_changes_the_leaf_and_the_root(tmp_path):
    root = _replica(tmp_path)
    clean = scan_container(root).tree
    with open(root / "chunks" / "1.block", "r+b") as f:
        f.seek(20000)
        b = f.read(1)
        f.seek(20000)
        f.write(bytes([b[0] ^ 0x10]))
    r = scan_container(root)
    assert found_keys(r) == [(CORRUPT_CHUNK, 1, 16384)]
    assert r.tree.data_checksum != clean.data_checksum
    c = r.tree.block(1).chunks[1]
    assert not c.checksum_matches and c.value != clean.block(1).chunks[1].value
    assert read_tree(root / "metadata" / "5.tree") == r.tree


def test_scan_is_idempotent_and_read_only_mode_writes_nothing(tmp_path):
    root = _replica(tmp_path)
    os.unlink(root / "metadata" / "5.tree")
    r = scan_container(root, write_tree=False)
    assert not (root / "metadata" / "5.tree").exists() and not r.tree_written
    r1 = scan_container(root)
    assert r1.tree_written and [e.kind for e in r1.errors] == ["TREE_MISSING"]
    r2 = scan_container(root)
    assert r2.ok and not r2.tree_written and r2.tree == r1.tree


def test_stored_tombstone_survives_a_scan(tmp_path):
    root = _replica(tmp_path)
    with ContainerWriter(root) as w:
        w.delete_block(2)
    r = scan_container(root)
    assert r.ok and r.tree.block(2).deleted


def test_rate_limiter_paces_without_timing(monkeypatch):
    """The limiter asks for the sleeps a 1 MB/s budget implies (clock and sleep faked)."""
    import merkle.replica.scan as rs

    now = [100.0]
    slept = []
    monkeypatch.setattr(rs.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(rs.time, "sleep", lambda s: slept.append(s))
    lim = RateLimiter(1_000_000)
    for _ in range(4):
        lim.acquire(500_000)
    assert slept == pytest.approx([0.5, 1.0, 1.5])
    with pytest.raises(ValueError):
        RateLimiter(0)


def test_rate_limited_scan_passes_every_byte_through_the_limiter(tmp_path):
    root = _replica(tmp_path)
    seen = []

    class Counting(RateLimiter):
        def acquire(self, nbytes):
            seen.append(nbytes)

    r = scan_container(root, limiter=Counting(1e12), write_tree=False)
    assert sum(seen) == r.bytes_read == 44096


def test_scan_result_json_ready(tmp_path):
    m = make_cluster(tmp_path / "c", "bitflip", containers=1, seed=1)
    for r in scan_all(tmp_path / "c").values():
        d = json.loads(json.dumps(r.to_dict()))
        assert d["ok"] == (not m["expected_errors"][os.path.relpath(r.path, tmp_path / "c")])


# ---- Ozone's scanner tree (KeyValueContainerCheck) vs the metadata tree -------------------


def _mixed_replica(tmp_path):
    """Block 1: CRC32 chunk + NONE chunk; block 2: NONE chunks only; block 3: no chunks;
    block 4: one chunk of length 0 (an EC padding block), file deleted; block 5: data, file
    deleted; block 6: plain CRC32C."""
    root = tmp_path / "dn" / "vol" / "9"
    data = bytes(range(256)) * 64
    with ContainerWriter.create(root, 9, algorithm="crc32", bytes_per_checksum=1024) as w:
        w.write_chunk(1, 0, data[:4096])
        w.write_chunk(1, 4096, data[:3000], algorithm="none")
        w.write_chunk(2, 0, data[:2048], algorithm="none")
        w.write_block(3, b"")
        w.write_chunk(4, 0, b"")
        w.write_block(5, data[:5000])
        w.write_chunk(6, 0, data[:7000], algorithm="crc32c")
        stored = w.tree()
    for b in (4, 5):
        os.unlink(root / "chunks" / f"{b}.block")
    return root, stored


def test_scanner_tree_is_ozones(tmp_path):
    root, stored = _mixed_replica(tmp_path)
    # the metadata tree (stored at close) has every block and every recorded chunk
    assert stored.block_id.tolist() == [1, 2, 3, 4, 5, 6]
    assert len(stored.block(1).chunks) == 2
    r = scan_container(root, write_tree=False)
    scanned = r.scanned
    # NONE chunks skipped; blocks with nothing scanned (2: only NONE, 3: no chunks) left out;
    # missing files (4, 5) left out
    assert scanned.block_id.tolist() == [1, 6]
    assert [c.offset for c in scanned.block(1).chunks] == [0]
    assert scanned.block(1).chunks[0].value == stored.block(1).chunks[0].value
    assert scanned.block(6) == stored.block(6)
    # MISSING_DATA_FILE only where the block's first chunk has a length > 0
    assert r.error_keys() == [("MISSING_DATA_FILE", 5, None)]
    # merged into the stored metadata tree: live blocks the scan left out are dropped
    assert r.tree.block_id.tolist() == [1, 6] and r.tree == scanned


def test_scanner_keeps_a_block_whose_chunks_are_all_missing(tmp_path):
    """Ozone adds the block before reading its first checksummed chunk: a block file cut to
    nothing still gives an (empty) block, with MISSING_CHUNK errors."""
    root, _ = _mixed_replica(tmp_path)
    os.truncate(root / "chunks" / "6.block", 0)
    r = scan_container(root, write_tree=False)
    assert 6 in r.scanned and r.scanned.block(6).chunks == ()
    assert ("MISSING_CHUNK", 6, 0) in r.error_keys()
