"""Fault-injection soak: generate, scan, reconcile, verify against the ground truth, repeat.

Each round (seeded from the soak seed and the round number, so any round replays alone):
  1. generate a cluster (merkle.replica.generate) with a random shape and a random fault
     mix; faults that do not fit the cluster are dropped one at a time until it does;
  2. scan every replica as a datanode would (trees stored) and compare the findings with the
     manifest's expected errors: an expected error not found is a *miss*, a finding no fault
     expected is a *false alarm*;
  3. reconcile every container (one round, every replica with all the others);
  4. verify: every replica scans clean except the chunks corrupted on every replica (the
     generator's bitflip-all, unrepairable by design, which must be reported by the
     reconciler, not invented); the replicas of a container agree on its value; every live
     block holds exactly the ground-truth bytes (*bytes lost* counts every byte that does
     not); no block file shrank or vanished; every tombstone is in every replica's tree;
     a second reconcile round changes nothing.

A fault is *detected* when the scan found all its expected errors (for faults a scan cannot
see, tombstones and extra blocks: when reconcile acted on them or, for a tombstone whose
container values, or whose block values, are equal everywhere, when Ozone's rule says nothing
needs doing), and *repaired* when
none of the places it damaged shows anything wrong after reconcile.

`run_soak(seed, rounds)` returns a SoakReport; `crcmerkle soak` prints its table and exits
non-zero unless misses, false alarms, bytes lost and unrepaired faults are all zero.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from merkle.replica.generate import (
    FAULT_TYPES,
    GeneratorConfig,
    GeneratorError,
    block_data,
    generate_cluster,
)
from merkle.replica.reconcile import reconcile_round, replica_groups
from merkle.replica.scan import CORRUPT_CHUNK, scan_container, scan_paths

__all__ = ["RoundResult", "SoakReport", "random_faults", "run_round", "run_soak"]

KiB = 1024
#: Faults a scan cannot see: they show up as divergence between replicas instead.
SILENT = ("tombstone", "extra-block")
#: Unrepairable by design: every replica holds the same chunk corrupted.
BY_DESIGN = ("bitflip-all",)


def random_faults(rng: random.Random, containers: int) -> Dict[str, int]:
    """A random mix: each type absent, once or twice, about one fault per container."""
    mix = {k: rng.choice((0, 0, 1, 1, 2)) for k in FAULT_TYPES}
    budget = max(1, containers + rng.randint(-1, 2))
    while sum(mix.values()) > budget:
        k = rng.choice([k for k, v in mix.items() if v])
        mix[k] -= 1
    return {k: v for k, v in mix.items() if v}


def _config(seed: int, round_no: int, containers: int) -> Tuple[GeneratorConfig, random.Random]:
    rng = random.Random(f"soak/{seed}/{round_no}")
    datanodes = rng.randint(3, 5)
    cfg = GeneratorConfig(
        datanodes=datanodes,
        volumes=rng.randint(1, 2),
        containers=containers,
        replicas=3,
        min_blocks=2,
        max_blocks=rng.randint(3, 6),
        block_size=rng.choice((48, 64, 80)) * KiB,
        chunk_size=16 * KiB,
        bytes_per_checksum=rng.choice((1, 2, 4)) * KiB,
        algorithm="mixed",
        faults=random_faults(rng, containers),
        seed=rng.randrange(1 << 31),
    )
    return cfg, rng


@dataclass
class FaultTally:
    injected: int = 0
    detected: int = 0
    repaired: int = 0
    by_design: int = 0
    missed: int = 0
    unrepaired: int = 0

    def add(self, other: FaultTally) -> None:
        for k in self.__dict__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


@dataclass
class RoundResult:
    round_no: int
    seed: int
    containers: int
    replicas: int
    faults: Dict[str, FaultTally]
    misses: int = 0  # expected scan errors not found
    false_alarms: int = 0  # scan errors no fault expected
    bytes_lost: int = 0  # ground-truth bytes absent or different after reconcile
    not_converged: int = 0  # containers whose replicas disagree (outside by-design faults)
    leftover_errors: int = 0  # scan errors after reconcile not explained by design
    shrunk_files: int = 0  # block files that got shorter or vanished
    lost_tombstones: int = 0
    rerun_changes: int = 0  # a second reconcile round still copied or adopted something
    unreported_by_design: int = 0  # unrepairable chunks the reconciler did not report
    bytes_copied: int = 0
    seconds: float = 0.0
    problems: List[str] = field(default_factory=list)
    dropped_faults: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.misses
            or self.false_alarms
            or self.bytes_lost
            or self.not_converged
            or self.leftover_errors
            or self.shrunk_files
            or self.lost_tombstones
            or self.rerun_changes
            or self.unreported_by_design
            or any(t.unrepaired or t.missed for t in self.faults.values())
        )


def _generate(root: Path, cfg: GeneratorConfig, rng: random.Random) -> Tuple[Dict[str, Any], int]:
    """Generate; drop one random fault at a time while the cluster cannot hold them."""
    dropped = 0
    while True:
        try:
            return generate_cluster(root, cfg), dropped
        except GeneratorError as exc:
            if "cannot place" not in str(exc) or not cfg.faults:
                raise
            shutil.rmtree(root)
            k = rng.choice(sorted(cfg.faults))
            cfg.faults[k] -= 1
            if not cfg.faults[k]:
                del cfg.faults[k]
            dropped += 1


def _block_lengths(manifest: Dict[str, Any]) -> Dict[Tuple[int, int], int]:
    out = {
        (int(cid), int(b)): n
        for cid, c in manifest["containers"].items()
        for b, n in c["blocks"].items()
    }
    for f in manifest["faults"]:
        if f["type"] == "extra-block":
            out[(f["container_id"], f["block_id"])] = f["length"]
    return out


def _sizes(root: Path) -> Dict[str, int]:
    return {os.path.relpath(p, root): p.stat().st_size for p in root.rglob("*.block")}


def run_round(seed: int, round_no: int, workdir: Path, *, containers: int = 8) -> RoundResult:
    t0 = time.perf_counter()
    cfg, rng = _config(seed, round_no, containers)
    root = workdir / f"round{round_no}"
    manifest, dropped = _generate(root, cfg, rng)
    tallies: Dict[str, FaultTally] = {k: FaultTally() for k in FAULT_TYPES}
    res = RoundResult(
        round_no,
        cfg.seed,
        containers,
        sum(len(c["replicas"]) for c in manifest["containers"].values()),
        tallies,
        dropped_faults=dropped,
    )
    sizes_before = _sizes(root)

    # -- 1. scan, as datanodes do (trees stored), and compare with the ground truth ------
    found: Dict[str, Counter] = {}
    for scanned in scan_paths([root]):
        found[os.path.relpath(scanned.path, root)] = Counter(
            (e.kind, e.block_id or 0, e.offset or 0) for e in scanned.errors
        )
    expected: Dict[str, Counter] = {
        rep: Counter((e["error"], e["block_id"] or 0, e["offset"] or 0) for e in errs)
        for rep, errs in manifest["expected_errors"].items()
    }
    for rel in set(found) | set(expected):
        reported_here, expected_here = found.get(rel, Counter()), expected.get(rel, Counter())
        for key, n in (expected_here - reported_here).items():
            res.misses += n
            res.problems.append(f"missed {key} on {rel}")
        for key, n in (reported_here - expected_here).items():
            res.false_alarms += n
            res.problems.append(f"false alarm {key} on {rel}")

    # -- 2. reconcile every container -------------------------------------------------------
    groups = replica_groups(root)
    results = {cid: reconcile_round(reps) for cid, reps in groups.items()}
    adopted: Set[Tuple[int, int]] = set()
    copied_blocks: Set[Tuple[int, int]] = set()
    reported: Set[Tuple[int, int, int]] = set()
    for cid, rs in results.items():
        for r in rs:
            for p in r.peers:
                res.bytes_copied += p.bytes_copied
                adopted.update((cid, b) for b in p.tombstones)
                copied_blocks.update((cid, c.block_id) for c in p.copied)
            reported.update((cid, p.block_id or 0, p.offset or 0) for p in r.remaining)

    # -- 3. verify against the ground truth -------------------------------------------------
    by_design = {
        (u["container_id"], u["block_id"], u["offset"]) for u in manifest["unrepairable_chunks"]
    }
    for key in by_design - reported:
        res.unreported_by_design += 1
        res.problems.append(f"unrepairable chunk {key} not reported by reconcile")
    lengths = _block_lengths(manifest)
    tombstones = {(int(c), b) for c, bs in manifest["tombstones"].items() for b in bs}
    chunk = cfg.chunk_size
    damaged: Set[Tuple[int, int]] = set()  # (container, block) still wrong somewhere
    damaged_meta: Set[str] = set()  # replicas with container-level errors left
    values: Dict[int, Set[Optional[int]]] = {}
    tomb_values: Dict[Tuple[int, int], Set[int]] = {}  # a tombstoned block's value per replica
    for cid, reps in groups.items():
        for rep in reps:
            rel = os.path.relpath(rep, root)
            scan = scan_container(rep, write_tree=False)
            values.setdefault(cid, set()).add(scan.tree.data_checksum)
            for e in scan.errors:
                if e.kind == CORRUPT_CHUNK and (cid, e.block_id, e.offset) in by_design:
                    continue
                res.leftover_errors += 1
                res.problems.append(f"after reconcile: {e} on {rel}")
                if e.block_id is None:
                    damaged_meta.add(rel)
                else:
                    damaged.add((cid, e.block_id))
            tree = scan.tree
            for (c, b), n in lengths.items():
                if c != cid:
                    continue
                if (c, b) in tombstones:
                    if b in tree:
                        tomb_values.setdefault((c, b), set()).add(tree.block(b).value)
                    if b not in tree:
                        res.lost_tombstones += 1
                        res.problems.append(f"tombstone {b} missing from {rel}")
                        damaged.add((c, b))
                    continue
                path = Path(rep) / "chunks" / f"{b}.block"
                want = block_data(cfg.seed, cid, b, n)
                try:
                    with open(path, "rb") as fh:
                        got = fh.read(n)
                except FileNotFoundError:
                    got = b""
                bad = [
                    (off, min(n, off + chunk))
                    for off in range(0, n, chunk)
                    if got[off : off + chunk] != want[off : off + chunk]
                    and (cid, b, off) not in by_design
                ]
                lost = sum(e - s for s, e in bad)
                if lost:
                    res.bytes_lost += lost
                    res.problems.append(f"{lost} bytes of block {b} wrong/missing on {rel}")
                    damaged.add((cid, b))
    for cid, vals in values.items():
        if len(vals) != 1 or None in vals:
            if not any(c == cid for c, _, _ in by_design):
                res.not_converged += 1
                res.problems.append(f"container {cid} values differ: {sorted(map(str, vals))}")
    after = _sizes(root)
    for name, n in sizes_before.items():
        if after.get(name, -1) < n:
            res.shrunk_files += 1
            res.problems.append(f"{name} shrank from {n} to {after.get(name)}")

    # -- 4. a second round is a no-op -------------------------------------------------------
    for reps in groups.values():
        for r in reconcile_round(reps):
            if r.changed:
                res.rerun_changes += 1
                res.problems.append(f"second reconcile of {r.path} still changed something")

    # -- per-fault accounting -----------------------------------------------------------------
    for f in manifest["faults"]:
        t = tallies[f["type"]]
        t.injected += 1
        cid, bid = f["container_id"], f.get("block_id")
        exp = [
            (e["replica"], (e["error"], e["block_id"] or 0, e["offset"] or 0))
            for e in f["expected"]
        ]
        if f["type"] in SILENT:
            if f["type"] == "tombstone":
                # Ozone examines a block only when its values differ: a tombstone keeping the
                # live block's value needs nothing, whatever else differs in the container
                seen = (
                    (cid, bid) in adopted
                    or len({v for v in values[cid]}) == 1
                    or len(tomb_values.get((cid, bid), ())) == 1
                )
            else:
                seen = (cid, bid) in copied_blocks
        else:
            seen = all(found.get(rep, Counter())[key] > 0 for rep, key in exp)
        if seen:
            t.detected += 1
        else:
            t.missed += 1
            res.problems.append(f"fault {f['id']} ({f['type']}) not detected")
        if f["type"] in BY_DESIGN:
            t.by_design += 1
            continue
        hit = (bid is not None and (cid, bid) in damaged) or any(
            r in damaged_meta for r in f["replicas"]
        )
        if hit:
            t.unrepaired += 1
            res.problems.append(f"fault {f['id']} ({f['type']}) not repaired")
        else:
            t.repaired += 1
    res.seconds = time.perf_counter() - t0
    return res


@dataclass
class SoakReport:
    seed: int
    rounds: List[RoundResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rounds)

    def totals(self) -> Dict[str, FaultTally]:
        out = {k: FaultTally() for k in FAULT_TYPES}
        for r in self.rounds:
            for k, t in r.faults.items():
                out[k].add(t)
        return out

    def checks(self) -> Dict[str, int]:
        keys = (
            "misses",
            "false_alarms",
            "bytes_lost",
            "not_converged",
            "leftover_errors",
            "shrunk_files",
            "lost_tombstones",
            "rerun_changes",
            "unreported_by_design",
        )
        out = {k: sum(getattr(r, k) for r in self.rounds) for k in keys}
        out["unrepaired_faults"] = sum(t.unrepaired for t in self.totals().values())
        return out

    def to_dict(self) -> Dict[str, Any]:
        return {
            "seed": self.seed,
            "ok": self.ok,
            "rounds": len(self.rounds),
            "containers": sum(r.containers for r in self.rounds),
            "replicas": sum(r.replicas for r in self.rounds),
            "bytes_copied": sum(r.bytes_copied for r in self.rounds),
            "faults": {k: dict(t.__dict__) for k, t in self.totals().items()},
            "checks": self.checks(),
            "failed_rounds": [
                {"round": r.round_no, "problems": r.problems[:20]} for r in self.rounds if not r.ok
            ],
        }

    def table(self) -> str:
        rows: List[Tuple[Any, ...]] = [
            ("fault", "injected", "detected", "repaired", "unrepairable*", "missed", "unrepaired")
        ]
        tot = FaultTally()
        for k, t in self.totals().items():
            tot.add(t)
            rows.append(
                (k, t.injected, t.detected, t.repaired, t.by_design, t.missed, t.unrepaired)
            )
        rows.append(
            (
                "total",
                tot.injected,
                tot.detected,
                tot.repaired,
                tot.by_design,
                tot.missed,
                tot.unrepaired,
            )
        )
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(
                str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))
            )
            for r in rows
        ]
        lines.insert(1, "-" * len(lines[0]))
        lines.insert(len(lines) - 1, "-" * len(lines[0]))
        c = self.checks()
        n_cont = sum(r.containers for r in self.rounds)
        lines.append(
            "* unrepairable by design: the same chunk corrupted on every replica "
            "(reported by reconcile, never invented)"
        )
        lines.append(
            f"rounds {len(self.rounds)}, containers {n_cont}, replicas "
            f"{sum(r.replicas for r in self.rounds)}, bytes copied "
            f"{sum(r.bytes_copied for r in self.rounds)}, seed {self.seed}"
        )
        lines.append("checks: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in c.items()))
        lines.append(
            "RESULT: "
            + ("PASS (zero misses, zero false alarms, zero bytes lost)" if self.ok else "FAIL")
        )
        return "\n".join(lines)


def run_soak(
    seed: int,
    rounds: int,
    *,
    containers: int = 8,
    workdir: Optional[os.PathLike] = None,
    keep_failed: bool = False,
    on_round: Optional[Callable[[RoundResult], Any]] = None,
) -> SoakReport:
    """Run `rounds` rounds (see the module docstring) in a temporary directory (under
    `workdir` if given); a failed round's cluster is kept when `keep_failed`."""
    base = Path(tempfile.mkdtemp(prefix="crcmerkle-soak-", dir=workdir))
    report = SoakReport(seed, [])
    try:
        for i in range(rounds):
            r = run_round(seed, i, base, containers=containers)
            report.rounds.append(r)
            if r.ok or not keep_failed:
                shutil.rmtree(base / f"round{i}", ignore_errors=True)
            else:
                r.problems.insert(0, f"cluster kept at {base / f'round{i}'}")
            if on_round is not None:
                on_round(r)
    finally:
        if not any(p.exists() for p in base.iterdir()):
            shutil.rmtree(base, ignore_errors=True)
    return report
