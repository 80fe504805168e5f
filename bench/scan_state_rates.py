"""What `crcmerkle scan --state` costs (issue 34): the state's size per million replicas, the
rate of its per-replica transactions, the scan rate with and without it, and the bytes read
again when a scan is SIGKILLed at random moments over one pass and rerun.

    python bench/scan_state_rates.py [--layout crcmerkle|ozone] [--containers 200] [--rounds 3]
                                     [--kills 50]

1. Size: rows shaped as the scan records them (an OK replica's result, a 64-digit identity)
   inserted into a fresh state, the database's bytes per replica times a million.
2. Transactions: one `put` per replica, as the scan does (WAL, synchronous=FULL: an fsync
   each), per second on this machine's disk.
3. Scan rate, hot cache, interleaved rounds: scan_paths over a generated crcmerkle-layout
   cluster without a tracker, and with one on a new state (every replica read, censused and
   recorded), and the second pass within --max-age (metadata time only: no data read).
4. Kills: `crcmerkle scan --state` paced by --rate so that one pass lasts --pass-seconds,
   killed (SIGKILL) after a random delay, --kills times, then run to the end. Before every
   run the replicas' data is evicted from the page cache and their metadata read into it,
   so what a run reads from the disk is what it read of replicas' data; that count is the
   kernel's (the process's block input, from wait4, exact whether killed or not; the
   cluster must be on a disk, not tmpfs). The sum over all the runs is held against one
   uninterrupted pass counted the same way, and the findings of the last run must equal
   that pass's. Once per --checkpoint-seconds (default 0, every block saved, and 1, the
   CLI's default).

Prints one line per figure and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from merkle.replica.generate import GeneratorConfig, generate_cluster  # noqa: E402
from merkle.replica.incremental import StateTracker  # noqa: E402
from merkle.replica.scan import scan_paths  # noqa: E402
from merkle.replica.scanstate import ScanState  # noqa: E402

#: an OK replica's record as the scan keeps it (merkle.replica.incremental.StateTracker.record)
PATH = "/data/hdds1/hdds/CID-e57b8ccf-5023-47d1-b9b8-fd07b6a8c073/current/containerDir0/"
RECORD = {
    "container_id": 123456,
    "data_checksum": "356b4a0f",
    "errors": [],
    "blocks": 20,
    "chunks": 1280,
    "bytes_read": 5368709120,
    "seconds": 31.4,
    "tree_written": False,
    "verified": True,
    "unhealthy_chunks": 0,
    "value": 895306255,
}


def state_size(n: int, tmp: Path) -> Dict[str, float]:
    st = ScanState(str(tmp / "size"), [])
    db = st.db
    db.execute("BEGIN")
    for i in range(n):
        rec = dict(RECORD, container_id=i)
        db.execute(
            "INSERT INTO replicas VALUES (?, ?, ?, ?, ?)",
            (
                f"ozone\0{PATH}{i}",
                "/data/hdds1",
                f"{i:064x}",
                time.time(),
                json.dumps(rec, separators=(",", ":")),
            ),
        )
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    st.close()
    size = sum(p.stat().st_size for p in (tmp / "size").iterdir())
    return {"replicas": n, "bytes": size, "bytes_per_million": size / n * 1e6}


def put_rate(n: int, tmp: Path) -> float:
    st = ScanState(str(tmp / "puts"), [])
    t0 = time.perf_counter()
    for i in range(n):
        st.put(f"k{i}", "/v", "0" * 64, time.time(), RECORD)
    dt = time.perf_counter() - t0
    st.close()
    return n / dt


def one_scan(root: Path, state_dir: Any, max_age: Any = None) -> Dict[str, float]:
    tracker = None
    if state_dir is not None:
        tracker = StateTracker(ScanState(str(state_dir), [str(root)]), max_age)
    w0, c0 = time.perf_counter(), time.process_time()
    results = scan_paths([root], write_tree=False, tracker=tracker)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    if tracker is not None:
        tracker.state.complete_pass()
        tracker.state.close()
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "bytes": sum(r.bytes_read for r in results),
        "replicas": len(results),
    }


def evict_data(root: Path) -> None:
    """The replicas' data out of the page cache (their `.block` files: what a pass reads)
    and everything else in it (their metadata, which every run reads to decide what to read):
    a run's reads from the disk are then its data reads."""
    os.sync()  # written pages cannot be dropped
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            if p.suffix == ".block":
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            else:
                while os.read(fd, 1 << 20):
                    pass
        finally:
            os.close(fd)


def run_counted(argv: List[str], env: Dict[str, str], kill_after: float = 0.0) -> Dict[str, Any]:
    """Run `argv` with the data evicted first; SIGKILL it after `kill_after` seconds (0:
    never). Returns its bytes read from the disk (the kernel's count of the process's block
    input, from wait4: exact, kill or no kill), whether it was killed, and its stdout."""
    evict_data(Path(argv[argv.index("scan") + 1]))
    with tempfile.TemporaryFile() as out:  # not a pipe: a full one would stall the scan
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
        killed = False
        if kill_after:
            time.sleep(kill_after)
            # wait4, not Popen.poll: the child is reaped here, with its counts
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid == 0:
                child.send_signal(signal.SIGKILL)
                killed = True
        if not kill_after or killed:
            _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    return {"bytes": usage.ru_inblock * 512, "killed": killed, "stdout": text}


def findings(out: str) -> Dict[str, List[Any]]:
    data = json.loads(out)
    return {
        r["path"]: sorted((e["error"], e["block_id"] or 0, e["offset"] or 0) for e in r["errors"])
        for r in data["replicas"]
    }


def kills(
    root: Path, tmp: Path, n: int, pass_seconds: float, total: int, checkpoint: float
) -> Dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "merkle", "scan", str(root), "--no-write", "--json"]
    state = tmp / f"kill-state-{checkpoint}"
    rate = str(max(1, int(total / pass_seconds)))
    paced = [*base, "--rate", rate]
    # one uninterrupted pass at the same pace, from the disk: the yardstick
    whole = run_counted([*paced, "--state", str(tmp / f"whole-state-{checkpoint}")], env)
    sizes = {r["path"]: r["bytes_read"] for r in json.loads(whole["stdout"])["replicas"]}
    argv = [*paced, "--state", str(state), "--checkpoint-seconds", str(checkpoint)]
    rng = random.Random(34)
    runs: List[Dict[str, Any]] = []
    for _ in range(n):
        run = run_counted(argv, env, kill_after=rng.uniform(0.3, 2.5 * pass_seconds / n + 0.3))
        runs.append(run)
        if not run["killed"]:
            break  # the pass ended before this kill: the rest is in the state
    killed = [r for r in runs if r["killed"]]
    # the rest of the pass (a long --max-age: a pass that ended is not begun again)
    last = run_counted([*argv, "--max-age", "3650d"], env)
    runs.append(last)
    read_total = sum(r["bytes"] for r in runs)
    same = findings(last["stdout"]) == findings(whole["stdout"])
    return {
        "checkpoint_seconds": checkpoint,
        "kills": len(killed),
        "pass_bytes": whole["bytes"],
        "pass_data_bytes": sum(sizes.values()),
        "largest_replica_bytes": max(sizes.values()),
        "bytes_read_across_restarts": read_total,
        "ratio_to_one_pass": read_total / max(1, whole["bytes"]),
        "read_again_per_restart": (read_total - whole["bytes"]) / max(1, len(killed)),
        "findings_equal_uninterrupted": same,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layout", choices=("crcmerkle", "ozone"), default="crcmerkle")
    ap.add_argument("--containers", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--pass-seconds", type=float, default=40.0)
    ap.add_argument(
        "--checkpoint-seconds",
        type=float,
        nargs="+",
        default=[0.0, 1.0],
        help="the kill campaign once per value (crcmerkle scan --checkpoint-seconds)",
    )
    ap.add_argument("--size-rows", type=int, default=200_000)
    ap.add_argument("--puts", type=int, default=2000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="crcmerkle-state-bench-"))
    out: Dict[str, Any] = {}
    try:
        out["size"] = state_size(args.size_rows, tmp)
        print(
            f"state size: {out['size']['bytes_per_million'] / 1e6:.0f} MB per million replicas "
            f"({args.size_rows} rows: {out['size']['bytes']} bytes)"
        )
        out["puts_per_s"] = put_rate(args.puts, tmp)
        print(f"state transactions (one per replica, fsync'd): {out['puts_per_s']:.0f} per second")
        root = tmp / "cluster"
        generate_cluster(
            root, GeneratorConfig(containers=args.containers, seed=34, layout=args.layout)
        )
        one_scan(root, None)  # the page cache warmed
        rows: Dict[str, List[Dict[str, float]]] = {"plain": [], "state": [], "second": []}
        for r in range(args.rounds):
            rows["plain"].append(one_scan(root, None))
            sdir = tmp / f"state-{r}"
            rows["state"].append(one_scan(root, sdir))
            rows["second"].append(one_scan(root, sdir, max_age=7 * 86400))
        med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in rows.items()}
        out["scan"] = med
        plain, new, second = med["plain"], med["state"], med["second"]
        per_replica_ms = (new["wall_s"] - plain["wall_s"]) / plain["replicas"] * 1e3
        print(
            f"scan, hot, {plain['replicas']:.0f} replicas, {plain['bytes'] / 1e6:.0f} MB: "
            f"without state {plain['wall_s']:.3f} s, with a new state {new['wall_s']:.3f} s "
            f"({new['wall_s'] / plain['wall_s']:.2f}x the time, {per_replica_ms:.2f} ms more "
            f"per replica); the second pass within --max-age {second['wall_s']:.3f} s, "
            f"{second['bytes']:.0f} bytes read"
        )
        out["kills"] = []
        for checkpoint in args.checkpoint_seconds if args.kills else ():
            k = kills(root, tmp, args.kills, args.pass_seconds, int(plain["bytes"]), checkpoint)
            out["kills"].append(k)
            per = k["read_again_per_restart"] / 1e6
            print(
                f"{k['kills']} SIGKILLs over one pass, --checkpoint-seconds {checkpoint:g}: "
                f"{k['bytes_read_across_restarts'] / 1e6:.1f} MB read from the disk in all, "
                f"{k['ratio_to_one_pass']:.3f}x one uninterrupted pass's "
                f"{k['pass_bytes'] / 1e6:.1f} MB ({k['pass_data_bytes'] / 1e6:.1f} MB of "
                f"replica data), {per:.2f} MB read again per restart (largest replica "
                f"{k['largest_replica_bytes'] / 1e6:.2f} MB); findings equal the "
                f"uninterrupted run's: {k['findings_equal_uninterrupted']}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
