"""Child process of tests/test_resource_limits.py: measures the peak resident set added by
one operation, in a fresh process (VmHWM reset through /proc/self/clear_refs just before).

    python tests/resource_child.py scan DIR GIB      # sparse GIB-GiB block, then scan it
    python tests/resource_child.py diff N FRACTION   # two N-chunk trees differing in FRACTION

Prints JSON: {"peak_growth": bytes, "seconds": s, ...}.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import merkle
from merkle.replica.replicadir.blockmeta import CRC32, ChunkMeta, ContainerMeta, write_blockmeta
from merkle.replica.replicadir.writer import tree_from_meta
from merkle.replica.scan import scan_container
from merkle.trees.diff import diff
from merkle.trees.model import ContainerTree
from merkle.trees.treefile import write_tree

MiB = 1 << 20


def hwm() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak() -> int:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return rss()


def sparse_replica(root: str, gib: int) -> int:
    """One block of `gib` GiB of zeros (a sparse file: nothing on disk), 4 MiB chunks,
    16 KiB CRC-32 windows, metadata and tree as a writer would leave them."""
    chunk, bpc = 4 * MiB, 16 * 1024
    size = gib << 30
    window = merkle.crc32(bytes(bpc)).to_bytes(4, "big")
    meta = ContainerMeta(1)
    meta.put_chunks(
        1,
        [
            ChunkMeta(off, chunk, CRC32, bpc, window * (chunk // bpc))
            for off in range(0, size, chunk)
        ],
    )
    for d in ("chunks", "metadata"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "chunks", "1.block"), "wb") as f:
        f.truncate(size)
    write_blockmeta(meta, os.path.join(root, "metadata", "1.blocks"))
    write_tree(tree_from_meta(meta), os.path.join(root, "metadata", "1.tree"))
    return size


def do_scan(root: str, gib: int) -> dict:
    size = sparse_replica(root, gib)
    base = reset_peak()
    t0 = time.perf_counter()
    r = scan_container(root, write_tree=True)
    took = time.perf_counter() - t0
    assert r.ok and r.bytes_read == size, r.errors
    return {"peak_growth": hwm() - base, "seconds": took, "bytes": size}


def trees(n: int, fraction: float) -> tuple:
    per_block = 64
    bids = np.repeat(np.arange(n // per_block, dtype=np.int64), per_block)
    offs = np.tile(np.arange(per_block, dtype=np.int64) * (4 * MiB), n // per_block)
    rng = np.random.default_rng(7)
    leaf = rng.integers(0, 1 << 32, n, dtype=np.int64)
    lens = np.full(n, 4 * MiB, dtype=np.int64)
    ours = ContainerTree.from_columns(
        1,
        bids,
        offs,
        lens,
        leaf=leaf,
        checksum_matches=np.zeros(n, bool) if fraction >= 1 else None,
    )
    other = leaf.copy()
    k = max(1, int(n * fraction))
    idx = rng.choice(n, k, replace=False)
    other[idx] ^= 1
    peer = ContainerTree.from_columns(1, bids, offs, lens, leaf=other)
    return ours, peer, k


def do_diff(n: int, fraction: float) -> dict:
    ours, peer, k = trees(n, fraction)
    tree_bytes = sum(
        getattr(peer, c).nbytes
        for c in (
            "block_id",
            "block_value",
            "block_deleted",
            "block_chunk_start",
            "chunk_offset",
            "chunk_length",
            "chunk_value",
            "chunk_matches",
        )
    )
    base = reset_peak()
    t0 = time.perf_counter()
    r = diff(ours, peer)
    took = time.perf_counter() - t0
    got = r.corrupt_chunk_rows.size + r.unrecoverable_chunk_rows.size
    assert got == k, (got, k)
    return {"peak_growth": hwm() - base, "seconds": took, "differing": k, "tree_bytes": tree_bytes}


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "scan":
        out = do_scan(sys.argv[2], int(sys.argv[3]))
    else:
        out = do_diff(int(sys.argv[2]), float(sys.argv[3]))
    print(json.dumps(out))
