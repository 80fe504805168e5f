"""Replicas per second per core of the census (`--metadata-only`) and of `--trees-only`,
against a data scan, on a generated Ozone cluster (local scanner, one thread, hot cache).

    python bench/census_rate.py [--containers 300] [--rounds 3] [--chunks 1280]

Generates an Ozone cluster (3 datanodes x 2 volumes, 3 replicas per container, the
generator's default sizes), then runs the three passes in turn, round after round
(interleaved: the VM's speed drifts), each over the whole cluster through scan_paths as
`crcmerkle scan` does. Per pass: wall seconds and this process's CPU seconds (every thread:
RocksDB's included), replicas per CPU-second (the per-core rate) and bytes read. The
per-volume part (the RocksDB snapshot and open, paid once per volume) is timed apart, so that
the per-replica cost can be carried to volumes of thousands of replicas.

A generated replica is small (a few blocks of 64 KiB chunks); a real 5 GB container has about
1,280 chunks of 4 MiB, each with 256 CRC32 window checksums of 16 KiB. --chunks N times the
census's per-replica metadata work (decoding the block_data rows, building the tree, judging
the stored tree) on one in-memory replica of N such chunks, the part that grows with size.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

from merkle.replica.generate import GeneratorConfig, generate_cluster
from merkle.replica.scan import scan_paths

PASSES = {"data": {}, "trees-only": {"trees_only": True}, "metadata-only": {"metadata_only": True}}


def timed(fn: Any) -> Tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def volume_open_seconds(root: Path) -> Tuple[int, float]:
    """(volumes, CPU seconds of one snapshot + open + close of each volume's DB)."""
    from merkle.replica.ozone.layout import find_volumes
    from merkle.replica.ozone.rocks import VolumeDB

    vols = [v for v, _ in find_volumes(str(root)) if v.db_dir is not None]
    c0 = time.process_time()
    for v in vols:
        VolumeDB(v.db_dir).close()
    return len(vols), time.process_time() - c0


def large_replica_seconds(chunks: int, rounds: int) -> Dict[str, float]:
    """CPU seconds of the census's metadata work on one replica of `chunks` 4 MiB chunks
    (256 CRC32 windows of 16 KiB each, 64 chunks per block): rows decoded, tree built, the
    stored tree judged (kept) and, without one, built."""
    from merkle.replica.blocks import CRC32, ChunkMeta, ContainerMeta
    from merkle.replica.ozone.blockdata import encode_block, read_blocks
    from merkle.replica.ozone.rocks import block_key
    from merkle.replica.verify import scan_files
    from merkle.trees.treefile import tree_to_bytes

    rng = np.random.default_rng(1)
    meta = ContainerMeta(7)
    for i in range(chunks):
        sums = rng.integers(0, 2**32, 256, dtype=np.uint32).astype(">u4").tobytes()
        meta.put_chunks(
            1 + i // 64, [ChunkMeta((i % 64) * 4 * 2**20, 4 * 2**20, CRC32, 16384, sums)]
        )
    rows = [(block_key(7, b)[9:], encode_block(7, meta.blocks[b])) for b in sorted(meta.blocks)]

    class Files:
        container_id, location = 7, "memory/7"

        def __init__(self, tree: Any) -> None:
            self.tree = tree

        def load_meta(self) -> Any:
            return read_blocks(7, iter(rows), file_per_chunk=False).meta

        def read_tree(self) -> bytes:
            if self.tree is None:
                raise FileNotFoundError(2, "No such file or directory")
            return self.tree

        def open_block(self, block_id: int) -> Any:
            raise AssertionError("the census opened a block file")

        def block_name(self, block_id: int) -> str:
            return f"{block_id}.block"

    built = scan_files(Files(None), metadata_only=True)
    stored = tree_to_bytes(built.tree)
    assert not scan_files(Files(stored), metadata_only=True).errors  # kept
    out: Dict[str, List[float]] = {"decode": [], "stored tree kept": [], "tree built": []}
    for _ in range(rounds):
        out["decode"].append(timed(Files(None).load_meta)[2])
        out["stored tree kept"].append(
            timed(lambda: scan_files(Files(stored), metadata_only=True))[2]
        )
        out["tree built"].append(timed(lambda: scan_files(Files(None), metadata_only=True))[2])
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--containers", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunks", type=int, default=1280)
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="census-rate-", dir=args.dir))
    try:
        root = tmp / "ozone"
        _, gen_s, _ = timed(
            lambda: generate_cluster(
                root, GeneratorConfig(containers=args.containers, seed=1, layout="ozone")
            )
        )
        cpu: Dict[str, List[float]] = {k: [] for k in PASSES}
        wall: Dict[str, List[float]] = {k: [] for k in PASSES}
        replicas = nbytes = 0
        for _ in range(args.rounds):
            for name, kw in PASSES.items():
                results, w, c = timed(functools.partial(scan_paths, [root], write_tree=False, **kw))
                assert all(r.ok for r in results), name
                replicas = len(results)
                if name == "data":
                    nbytes = sum(r.bytes_read for r in results)
                else:
                    assert sum(r.bytes_read for r in results) == 0, name
                wall[name].append(w)
                cpu[name].append(c)
        nvol, vol_cpu = volume_open_seconds(root)
        print(
            f"Ozone cluster: {replicas} replicas on {nvol} volumes, {nbytes / 1e6:.0f} MB "
            f"of block data (generated in {gen_s:.0f} s); {args.rounds} rounds, median; "
            f"one thread, hot page cache; CPU = this process's user+sys"
        )
        print(
            f"{'pass':<15}{'wall s':>8}{'CPU s':>8}{'replicas/CPU-s':>16}"
            f"{'per replica, volume opens excluded':>38}"
        )
        for name in PASSES:
            c, w = statistics.median(cpu[name]), statistics.median(wall[name])
            per = (c - (0 if name == "trees-only" else vol_cpu)) / replicas
            print(f"{name:<15}{w:>8.2f}{c:>8.2f}{replicas / c:>16.0f}{per * 1e3:>31.2f} ms CPU")
        print(
            f"one volume's DB snapshot+open+close: {vol_cpu / nvol * 1e3:.1f} ms CPU "
            f"(data and metadata-only pay it per volume)"
        )
        big = large_replica_seconds(args.chunks, args.rounds)
        print(
            f"one replica of {args.chunks} chunks x 4 MiB (256 windows each), in memory: "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in big.items())
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
