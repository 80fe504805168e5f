"""Shared helpers of the tests/test_replica_*.py suites (small clusters, snapshots)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

from merkle.replica.generate import GeneratorConfig, block_data, generate_cluster, parse_faults
from merkle.replica.reconcile import reconcile_round, replica_groups
from merkle.replica.scan import scan_container, scan_paths

KiB = 1024

#: Small sizes keep the suite fast: 4 KiB windows, 16 KiB chunks, blocks up to 48 KiB.
SMALL = dict(
    block_size=48 * KiB, chunk_size=16 * KiB, bytes_per_checksum=4 * KiB, min_blocks=2, max_blocks=4
)


def make_cluster(
    root: Path, faults: str = "none", *, seed: int = 0, containers: int = 1, **kw: Any
) -> Dict[str, Any]:
    cfg = GeneratorConfig(
        **{**SMALL, "containers": containers, "seed": seed, "faults": parse_faults(faults), **kw}
    )
    return generate_cluster(root, cfg)


def expected_keys(manifest: Dict[str, Any], rep: str) -> List[Tuple[str, int, int]]:
    return sorted(
        (e["error"], e["block_id"] or 0, e["offset"] or 0) for e in manifest["expected_errors"][rep]
    )


def found_keys(result: Any) -> List[Tuple[str, int, int]]:
    return sorted((e.kind, e.block_id or 0, e.offset or 0) for e in result.errors)


def scan_all(root: Path, **kw: Any) -> Dict[str, Any]:
    """{relative replica path: ScanResult} of every replica under root."""
    return {os.path.relpath(r.path, root): r for r in scan_paths([root], **kw)}


def file_sizes(root: Path) -> Dict[str, int]:
    return {os.path.relpath(p, root): p.stat().st_size for p in root.rglob("*.block")}


def snapshot(root: Path) -> Dict[str, str]:
    """Content hash of every file (lock files excluded: they hold the last holder's PID)."""
    return {
        os.path.relpath(p, root): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".crcmerkle.lock"
    }


def full_round(root: Path, **kw: Any) -> Dict[int, List[Any]]:
    """Scan everything (as datanodes do), then one reconcile round per container."""
    scan_paths([root])
    return {cid: reconcile_round(reps, **kw) for cid, reps in replica_groups(root).items()}


def container_values(root: Path) -> Dict[int, List[Any]]:
    out: Dict[int, List[Any]] = {}
    for cid, reps in replica_groups(root).items():
        out[cid] = [scan_container(r, write_tree=False).tree.data_checksum for r in reps]
    return out


def unrepairable(manifest: Dict[str, Any]) -> set:
    return {(u["container_id"], u["block_id"]) for u in manifest["unrepairable_chunks"]}


def check_data(root: Path, manifest: Dict[str, Any]) -> int:
    """Every live block file on every replica holds the pristine bytes (up to the block
    length); blocks with an unrepairable chunk are compared outside that chunk. Returns the
    number of block files compared."""
    seed = manifest["seed"]
    lengths: Dict[Tuple[int, int], int] = {}
    for cid, c in manifest["containers"].items():
        for b, n in c["blocks"].items():
            lengths[(int(cid), int(b))] = n
    for f in manifest["faults"]:
        if f["type"] == "extra-block":
            lengths[(f["container_id"], f["block_id"])] = f["length"]
    bad_chunks = {
        (u["container_id"], u["block_id"]): u["offset"] for u in manifest["unrepairable_chunks"]
    }
    chunk = manifest["config"]["chunk_size"]
    compared = 0
    for cid, reps in replica_groups(root).items():
        for rep in reps:
            tree = scan_container(rep, write_tree=False).tree
            for b in tree.blocks():
                if b.deleted:
                    continue
                want = block_data(seed, cid, b.block_id, lengths[(cid, b.block_id)])
                got = (Path(rep) / "chunks" / f"{b.block_id}.block").read_bytes()
                assert len(got) >= len(want), (rep, b.block_id)
                got = got[: len(want)]
                if (cid, b.block_id) in bad_chunks:
                    off = bad_chunks[(cid, b.block_id)]
                    got = got[:off] + got[off + chunk :]
                    want = want[:off] + want[off + chunk :]
                assert got == want, (rep, b.block_id)
                compared += 1
    return compared
