"""What `crcmerkle scan --state` costs (issue 34): the state's size per million replicas, the
rate of its per-replica transactions, the scan rate with and without it, and the bytes read
again when a scan is SIGKILLed at random moments over one pass and rerun.

    python bench/scan_state_rates.py [--containers 200] [--rounds 3] [--kills 50]

1. Size: rows shaped as the scan records them (an OK replica's result, a 64-digit identity)
   inserted into a fresh state, the database's bytes per replica times a million.
2. Transactions: one `put` per replica, as the scan does (WAL, synchronous=FULL: an fsync
   each), per second on this machine's disk.
3. Scan rate, hot cache, interleaved rounds: scan_paths over a generated crcmerkle-layout
   cluster without a tracker, and with one on a new state (every replica read, censused and
   recorded), and the second pass within --max-age (metadata time only: no data read).
4. Kills: `crcmerkle scan --state` paced by --rate so that one pass lasts --pass-seconds,
   killed (SIGKILL) after a random delay, --kills times, then run to the end. Per killed run
   the bytes it read (/proc/PID/io rchar, sampled just before the kill) less what a run that
   reads no data reads (the interpreter's imports, measured) is an upper bound of what it read
   of replicas' data; what no record kept of it is read again by the next run. The findings of
   the last run must equal those of an uninterrupted run. Once per --checkpoint-seconds
   (default 0, every block saved, and 1, the CLI's default).

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

import sqlite3  # noqa: E402

from merkle.replica.generate import GeneratorConfig, generate_cluster  # noqa: E402
from merkle.replica.incremental import StateTracker  # noqa: E402
from merkle.replica.scan import scan_paths  # noqa: E402
from merkle.replica.scanstate import DB_NAME, ScanState  # noqa: E402

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


def rchar(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def findings(out: str) -> Dict[str, List[Any]]:
    data = json.loads(out)
    return {
        r["path"]: sorted((e["error"], e["block_id"] or 0, e["offset"] or 0) for e in r["errors"])
        for r in data["replicas"]
    }


def accounted(state: Path, sizes: Dict[str, int]) -> Dict[str, int]:
    """{replica path: its data bytes the state holds as verified}: a replica recorded whole,
    or the saved blocks of one in flight (--checkpoint-seconds)."""
    db = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
    try:
        recorded = {k.split("\0", 1)[1] for (k,) in db.execute("SELECT key FROM replicas")}
        out = {p: sizes.get(p, 0) for p in recorded}
        for key, text in db.execute("SELECT key, observation FROM blocks"):
            p = key.split("\0", 1)[1]
            if p not in recorded:  # a record drops its blocks; a new pass's rows stand apart
                out[p] = out.get(p, 0) + int(json.loads(text)["bytes_read"])
    finally:
        db.close()
    return out


def kills(
    root: Path, tmp: Path, n: int, pass_seconds: float, total: int, checkpoint: float
) -> Dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "merkle", "scan", str(root), "--no-write", "--json"]
    whole = subprocess.run(base, capture_output=True, text=True, env=env)
    # the reads of a run that reads no data: the interpreter and the CLI's imports
    probe = subprocess.Popen(
        [sys.executable, "-c", "import merkle.cli.scan, sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env=env,
    )
    time.sleep(1.5)
    import_bytes = rchar(probe.pid)
    probe.communicate(b"")
    state = tmp / f"kill-state-{checkpoint}"
    rate = str(max(1, int(total / pass_seconds)))
    argv = [*base, "--state", str(state), "--rate", rate, "--checkpoint-seconds", str(checkpoint)]
    sizes = {r["path"]: r["bytes_read"] for r in json.loads(whole.stdout)["replicas"]}
    largest = max(sizes.values())
    rng = random.Random(34)
    reread: List[int] = []
    held: Dict[str, int] = {}
    for _ in range(n):
        child = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        time.sleep(rng.uniform(0.3, 2.5 * pass_seconds / n + 0.3))
        if child.poll() is not None:
            break  # the pass ended before this kill: the rest is in the state
        read = rchar(child.pid)
        child.send_signal(signal.SIGKILL)
        child.wait()
        now = accounted(state, sizes)
        # read and saved by this run: replicas recorded, blocks of one in flight saved
        kept = sum(max(0, b - held.get(p, 0)) for p, b in now.items())
        held = now
        # what it read beyond what it saved: at most the replica in flight, and at most
        # its reads beyond the imports' (rchar also counts metadata and the state's reads)
        reread.append(max(0, min(read - import_bytes, kept + largest) - kept))
    # the rest of the pass (a long --max-age: when the last killed run's pass had ended
    # before its kill, nothing is read again by a new pass)
    last = subprocess.run([*argv, "--max-age", "3650d"], capture_output=True, text=True, env=env)
    same = findings(last.stdout) == findings(whole.stdout)
    # every replica is read whole once by the run that recorded it (a recorded replica is
    # never read again in the pass), plus what each killed run read of the one in flight
    db = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
    final = {k.split("\0", 1)[1] for (k,) in db.execute("SELECT key FROM replicas")}
    db.close()
    read_total = sum(sizes.get(p, 0) for p in final) + sum(reread)
    return {
        "checkpoint_seconds": checkpoint,
        "kills": len(reread),
        "pass_bytes": total,
        "largest_replica_bytes": largest,
        "bytes_read_across_restarts_upper_bound": read_total,
        "ratio_to_one_pass_upper_bound": read_total / total,
        "reread_per_restart_upper_bound": sum(reread) / max(1, len(reread)),
        "import_bytes_subtracted": import_bytes,
        "findings_equal_uninterrupted": same,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
            root, GeneratorConfig(containers=args.containers, seed=34, layout="crcmerkle")
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
            ratio = k["ratio_to_one_pass_upper_bound"]
            per = k["reread_per_restart_upper_bound"] / 1e6
            print(
                f"{k['kills']} SIGKILLs over one pass, --checkpoint-seconds {checkpoint:g}: at "
                f"most {ratio:.3f}x one pass read in all, at most {per:.2f} MB read again per "
                f"restart (largest replica {k['largest_replica_bytes'] / 1e6:.2f} MB); findings "
                f"equal the uninterrupted run's: {k['findings_equal_uninterrupted']}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
