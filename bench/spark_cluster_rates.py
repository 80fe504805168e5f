"""The scan job's and the diff job's throughput on a Spark standalone cluster, against
local[2], interleaved round after round (issue 18: the scale model of
docs/operations/scale-model.md from cluster figures, not from local[2] alone).

    python bench/spark_cluster_rates.py                 # full: 1.29 GB scan, 2 x 30 M diff rows
    python bench/spark_cluster_rates.py --quick         # 256 MiB, 2 x 600 k rows, 2 rounds

What it does:
  1. Generates the data of bench/test_bench_spark.py: block files of 2 datanodes (16 MiB
     blocks, 4 MiB chunks, 16 KiB CRC-32 windows; --scan-bytes 2GiB gives 64 containers,
     1.29 GB), and the diff's uniform case (two replicas of --diff-rows chunk rows, 10,000
     per container, 0.1% of chunks diverged, with the blocks and containers tables a scan
     writes). Kept under WORKDIR/data and reused by the next run.
  2. Builds the executors' packed env when WORKDIR/env.tar.gz is missing: a wheel of this
     checkout, then the docs' own two lines (docs/operations/cluster.md: `python -m venv env
     && ...`, `env/bin/venv-pack ...`). --archive uses an existing one.
  3. Starts a standalone master and --workers workers of 1 core each (pyspark's bin/spark-class,
     127.0.0.1 only, a clean environment without this virtualenv: the executors get crcmerkle
     from the archive only), and two drivers that stay up for the whole run: one on local[2]
     (get_session, as the bench does), one through spark-submit the documented way
     (`--archives env.tar.gz#env`, PYSPARK_PYTHON=./env/bin/python). The daemons and the
     drivers run in process groups of their own, all killed on the way out (finally, also
     on SIGTERM / Ctrl-C).
  4. Each job once untimed on each driver, then --rounds rounds; in each round every job runs
     on both drivers, the order alternating between rounds. Each run checks its answer.

Per run it records: wall time of the job (as the bench: one action, end to end); the
executors' task time (Spark's REST API: the sum of the executors' totalDuration, i.e.
task-seconds, Python workers' time included since the tasks wait for them); the CPU time
the processes consumed (from /proc: the executors' process trees, i.e. the worker daemons'
children: executor JVMs and their Python workers; and the driver's tree); and the machine's
other CPU use over the same interval (/proc/stat busy time minus ours) with the load average,
since the figures mean little without them on a shared VM. Per-core rates: bytes (rows) per
task-second and per CPU-second. On local[2] the driver executes the tasks, so its CPU time is
the whole job's. Medians over the rounds are printed and written to WORKDIR/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from multiprocessing.connection import Client, Listener
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
KiB, MiB, GiB = 1024, 1024**2, 1024**3
CLK = os.sysconf("SC_CLK_TCK")
AUTH_ENV = "CRCMERKLE_BENCH_AUTHKEY"

# the standalone-cluster helpers of the cluster test (free ports on 127.0.0.1, SPARK_HOME, a
# node's clean environment) and the Spark benchmarks' data, both one copy
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests" / "spark")]  # bench/conftest first
from spark_standalone import clean_env, free_port, spark_home  # noqa: E402

# ---- helpers ------------------------------------------------------------------------------


def parse_size(s: str) -> int:
    units = {"k": KiB, "kib": KiB, "m": MiB, "mib": MiB, "g": GiB, "gib": GiB}
    t = s.strip().lower()
    for u in sorted(units, key=len, reverse=True):
        if t.endswith(u):
            return int(float(t[: -len(u)]) * units[u])
    return int(t)


def _proc_table() -> Dict[int, tuple]:
    """{pid: (ppid, utime+stime+cutime+cstime in seconds)} of every live process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2 :].split()
        # fields after the name: state ppid ... utime(14) stime(15) cutime(16) cstime(17)
        ppid = int(rest[1])
        cpu = sum(int(x) for x in rest[11:15]) / CLK
        out[int(d)] = (ppid, cpu)
    return out


def tree_cpu(roots: List[int], table: Dict[int, tuple], skip_roots: bool = False) -> float:
    """CPU seconds of the processes under `roots` (the roots too unless skip_roots); a child
    that ended and was reaped is in its parent's cutime/cstime."""
    children: Dict[int, List[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, list(roots)
    seen = set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        if not (skip_roots and pid in roots):
            total += table[pid][1]
        todo.extend(children.get(pid, []))
    return total


def machine_cpu() -> tuple:
    """(busy, steal) CPU seconds of the whole machine since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq) / CLK, steal / CLK


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ---- data (the bench's, bench/test_bench_spark.py) -----------------------------------------


def make_scan_data(root: Path, nbytes: int) -> Dict[str, Any]:
    from merkle.replica.generate import generate_cluster

    meta = root / "meta.json"
    if meta.exists():
        return json.loads(meta.read_text())
    block = 16 * MiB
    containers = max(2, nbytes // (2 * block))
    generate_cluster(
        root / "cluster",
        datanodes=2,
        volumes=1,
        replicas=1,
        containers=int(containers),
        min_blocks=2,
        max_blocks=2,
        block_size=block,
        chunk_size=4 * MiB,
        bytes_per_checksum=16 * KiB,
        algorithm="crc32",
        seed=2,
    )
    m = {
        "path": str(root / "cluster"),
        "containers": int(containers),
        "bytes": sum(p.stat().st_size for p in (root / "cluster").rglob("*.block")),
    }
    meta.write_text(json.dumps(m))
    return m


def make_diff_data(out: Path, n: int) -> Dict[str, Any]:
    """The uniform case of test_bench_spark.diff_tables: two replicas of n chunk rows, 0.1%
    of chunks diverged anywhere (every container diverges somewhere)."""
    meta = out / "meta.json"
    if meta.exists():
        return json.loads(meta.read_text())
    from test_bench_spark import PER_CONTAINER, write_diff_tables

    out.mkdir(parents=True, exist_ok=True)
    changed = write_diff_tables(out, n, "uniform")
    m = {
        "path": str(out),
        "rows": 2 * n,
        "containers": max(1, n // PER_CONTAINER),
        "changed": changed,
    }
    meta.write_text(json.dumps(m))
    return m


# ---- the drivers (child processes) ----------------------------------------------------------


def _task_seconds(spark: Any, counted: Dict[tuple, tuple]) -> tuple:
    """(task seconds, GC seconds) of the application's finished stages so far (REST API:
    the stages' executorRunTime and jvmGcTime, i.e. the tasks' run time summed, Python
    workers' time included since the tasks wait for them). `counted` holds the stages
    already seen; the listener may lag a job's end, so read until no stage is active and
    two reads agree."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    last = None
    for _ in range(40):
        with urllib.request.urlopen(url, timeout=30) as r:
            stages = json.load(r)
        active = any(
            st["status"] in ("ACTIVE", "PENDING") and st.get("numActiveTasks", 0) for st in stages
        )
        cur = {
            (st["stageId"], st["attemptId"]): (
                st.get("executorRunTime", 0) / 1000,
                st.get("jvmGcTime", 0) / 1000,
            )
            for st in stages
            if st["status"] in ("COMPLETE", "FAILED")
        }
        if not active and cur == last:
            break
        last = cur
        time.sleep(0.3)
    counted.update(last or {})
    return (sum(v[0] for v in counted.values()), sum(v[1] for v in counted.values()))


def driver_main(a: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    from spark_udfs.cluster.session import get_session
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.scan import scan_replicas

    conf = {"spark.ui.enabled": "true", "spark.ui.port": str(a.ui_port)}
    spark = get_session(
        "local[2]" if a.driver == "local" else None,
        app_name=f"crcmerkle-cluster-rates-{a.driver}",
        conf=conf,
    )
    sc = spark.sparkContext
    conn = Client(("127.0.0.1", a.port), authkey=bytes.fromhex(os.environ[AUTH_ENV]))
    conn.send(
        {
            "master": sc.master,
            "pid": os.getpid(),
            "parallelism": sc.defaultParallelism,
            "ui": sc.uiWebUrl,
        }
    )
    scan, diff = a.scan_meta and json.loads(a.scan_meta), a.diff_meta and json.loads(a.diff_meta)

    def run_scan() -> int:
        t = scan_replicas(spark, [scan["path"]])
        try:
            row = t.replicas.agg(F.sum("bytes_read"), F.sum("errors")).collect()[0]
            assert int(row[1]) == 0, row
            return int(row[0])
        finally:
            spark.catalog.clearCache()

    def run_diff() -> int:
        d = diff["path"]
        try:
            res = diff_scan(
                {
                    n: spark.read.parquet(f"{d}/{n}.parquet")
                    for n in ("chunks", "blocks", "containers")
                }
            )
            return res.pulls.count()
        finally:
            spark.catalog.clearCache()

    counted: Dict[tuple, tuple] = {}
    while True:
        msg = conn.recv()
        if msg == "stop":
            break
        task0 = _task_seconds(spark, counted)
        conn.send("start")  # the parent samples the CPU counters between start and end
        conn.recv()
        t0 = time.perf_counter()
        got = run_scan() if msg == "scan" else run_diff()
        wall = time.perf_counter() - t0
        conn.send("end")
        conn.recv()
        task1 = _task_seconds(spark, counted)
        want = scan["bytes"] if msg == "scan" else diff["changed"]
        conn.send(
            {
                "wall": wall,
                "task": task1[0] - task0[0],
                "gc": task1[1] - task0[1],
                "ok": got == want,
                "got": got,
            }
        )
    conn.close()
    spark.stop()


# ---- the orchestrator -----------------------------------------------------------------------


class Procs:
    """Child processes, each the leader of its own process group; stop() kills the groups."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.procs: List[tuple] = []

    def start(self, name: str, argv: List[str], env: Dict[str, str], cwd: Path) -> subprocess.Popen:
        log = open(self.logdir / f"{name}.log", "wb")
        p = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append((name, p, log))
        return p

    def check(self) -> None:
        for name, p, _ in self.procs:
            if p.poll() is not None:
                tail = (self.logdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited ({p.returncode}):\n{tail}")

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            for _, p, _ in reversed(self.procs):
                try:
                    os.killpg(p.pid, sig)  # the group: executors and Python workers too
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            for _, p, _ in self.procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        for _, _, log in self.procs:
            log.close()


def build_archive(work: Path) -> Path:
    """A wheel of this checkout and the two recipe lines of docs/operations/cluster.md, run
    in `work`."""
    import re

    text = (ROOT / "docs" / "operations" / "cluster.md").read_text()
    sec = text[re.search(r"^#+ Running on a cluster$", text, re.M).start() :]
    block = re.search(r"```bash\n(.*?)```", sec, re.S).group(1)
    lines = [
        ln
        for ln in block.splitlines()
        if ln.startswith(("python -m venv env ", "env/bin/venv-pack "))
    ]
    assert len(lines) == 2, lines
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(work / "dist"),
            str(ROOT),
        ],
        check=True,
    )
    subprocess.run(
        ["bash", "-ec", "rm -rf env env.tar.gz\n" + "\n".join(lines)], cwd=work, check=True
    )
    return work / "env.tar.gz"


def wait_workers(ui: int, n: int, procs: Procs, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                if json.load(r).get("aliveworkers", 0) >= n:
                    return
        except OSError:
            pass
        procs.check()
        if time.monotonic() > deadline:
            raise RuntimeError("the standalone master/workers did not come up")
        time.sleep(1)


def median(xs: List[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="256 MiB scan, 2 x 600 k diff rows, 2 rounds (unless given)",
    )
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds (default 3)")
    ap.add_argument("--scan-bytes", default=None, help="scan data (default 2GiB: 1.29 GB)")
    ap.add_argument(
        "--diff-rows", type=int, default=None, help="chunk rows per replica (default 30,000,000)"
    )
    ap.add_argument("--workers", type=int, default=2, help="1-core workers (default 2)")
    ap.add_argument(
        "--executor-memory",
        default="1g",
        help="per executor (default 1g, as local[2]'s driver heap)",
    )
    ap.add_argument("--workdir", default="/tmp/crcmerkle-cluster-rates")
    ap.add_argument(
        "--archive",
        default=None,
        help="packed env (default WORKDIR/env.tar.gz, built when missing)",
    )
    ap.add_argument("--jobs", default="scan,diff")
    # driver mode (internal)
    ap.add_argument("--driver", choices=["local", "cluster"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ui-port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--scan-meta", help=argparse.SUPPRESS)
    ap.add_argument("--diff-meta", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.driver:
        driver_main(a)
        return 0

    rounds = a.rounds or (2 if a.quick else 3)
    scan_bytes = parse_size(a.scan_bytes or ("256MiB" if a.quick else "2GiB"))
    diff_rows = a.diff_rows or (600_000 if a.quick else 30_000_000)
    jobs = [j for j in a.jobs.split(",") if j]
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    run_dir = work / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir()

    def say(*x: Any) -> None:
        print(*x, flush=True)

    say(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs; load average at start "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    t0 = time.perf_counter()
    scan = (
        make_scan_data(work / "data" / f"scan-{scan_bytes}", scan_bytes) if "scan" in jobs else None
    )
    diff = (
        make_diff_data(work / "data" / f"diff-uniform-{diff_rows}", diff_rows)
        if "diff" in jobs
        else None
    )
    say(
        f"data ready in {time.perf_counter() - t0:.0f} s: "
        + (
            f"scan {scan['bytes'] / 1e9:.2f} GB ({scan['containers']} containers x 2 datanodes); "
            if scan
            else ""
        )
        + (
            f"diff 2 x {diff_rows:,} chunk rows ({diff['containers']:,} containers), "
            f"{diff['changed']:,} diverged"
            if diff
            else ""
        )
    )
    archive = Path(a.archive) if a.archive else work / "env.tar.gz"
    if not archive.exists():
        say("building the packed env (the docs' recipe) ...")
        archive = build_archive(work)

    conf = run_dir / "conf"
    conf.mkdir()
    sys.path.insert(0, str(ROOT))
    from spark_udfs.cluster.session import LOG4J2

    (conf / "log4j2.properties").write_text(LOG4J2)
    authkey = secrets.token_hex(16)
    procs = Procs(run_dir)
    drivers: Dict[str, Any] = {}
    results: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}

    def on_signal(sig: int, _frame: Any) -> None:
        raise SystemExit(128 + sig)

    signal.signal(signal.SIGTERM, on_signal)
    listener = Listener(("127.0.0.1", 0), authkey=bytes.fromhex(authkey))
    try:
        spark_class = str(spark_home() / "bin" / "spark-class")
        daemon_env = clean_env({"SPARK_CONF_DIR": str(conf), "SPARK_LOG_DIR": str(run_dir)})
        mport, mui = free_port(), free_port()
        procs.start(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(mport),
                "--webui-port",
                str(mui),
            ],
            daemon_env,
            run_dir,
        )
        master = f"spark://127.0.0.1:{mport}"
        workers = []
        mem_mb = int(parse_size(a.executor_memory) // MiB) + 512
        for w in range(a.workers):
            workers.append(
                procs.start(
                    f"worker{w}",
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        master,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        f"{mem_mb}m",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(run_dir / f"work{w}"),
                    ],
                    daemon_env,
                    run_dir,
                )
            )
        wait_workers(mui, a.workers, procs)
        say(
            f"standalone master {master}, {a.workers} workers x 1 core, executors "
            f"{a.executor_memory}"
        )

        common = [
            str(Path(__file__).resolve()),
            "--port",
            str(listener.address[1]),
            "--scan-meta",
            json.dumps(scan) if scan else "",
            "--diff-meta",
            json.dumps(diff) if diff else "",
        ]
        # local[2]: this interpreter, get_session as the bench
        lenv = dict(
            os.environ,
            **{
                AUTH_ENV: authkey,
                "SPARK_CONF_DIR": str(conf),
                "PYTHONPATH": str(ROOT),
                "SPARK_LOCAL_IP": "127.0.0.1",
            },
        )
        lenv.pop("PYSPARK_SUBMIT_ARGS", None)
        lenv.pop("MASTER", None)
        procs.start(
            "driver-local",
            [sys.executable, *common, "--driver", "local", "--ui-port", str(free_port())],
            lenv,
            run_dir,
        )
        drivers["local[2]"] = {"conn": listener.accept(), "pid": procs.procs[-1][1].pid}
        # the cluster: spark-submit the documented way; the driver imports this checkout
        cenv = clean_env(
            {
                AUTH_ENV: authkey,
                "SPARK_CONF_DIR": str(conf),
                "PYSPARK_PYTHON": "./env/bin/python",
                "PYSPARK_DRIVER_PYTHON": sys.executable,
                "PYTHONPATH": str(ROOT),
            }
        )
        procs.start(
            "driver-cluster",
            [
                str(spark_home() / "bin" / "spark-submit"),
                "--master",
                master,
                "--conf",
                f"spark.executor.memory={a.executor_memory}",
                "--conf",
                "spark.executor.cores=1",
                "--archives",
                f"{archive}#env",
                *common,
                "--driver",
                "cluster",
                "--ui-port",
                str(free_port()),
            ],
            cenv,
            run_dir,
        )
        drivers["standalone"] = {"conn": listener.accept(), "pid": procs.procs[-1][1].pid}
        for name, d in drivers.items():
            d["info"] = d["conn"].recv()
            say(
                f"driver {name}: master {d['info']['master']}, default parallelism "
                f"{d['info']['parallelism']}"
            )
        if not drivers["standalone"]["info"]["master"].startswith("spark://"):
            raise RuntimeError("the cluster driver is not on the standalone master")

        def run(mode: str, job: str) -> Dict[str, Any]:
            d = drivers[mode]
            d["conn"].send(job)
            assert d["conn"].recv() == "start"
            tab0, m0, la0, s0 = (
                _proc_table(),
                machine_cpu(),
                os.getloadavg()[0],
                time.perf_counter(),
            )
            d["conn"].send("go")
            assert d["conn"].recv() == "end"
            tab1, m1, s1 = _proc_table(), machine_cpu(), time.perf_counter()
            d["conn"].send("go")
            r = d["conn"].recv()
            if not r["ok"]:
                raise RuntimeError(f"{mode} {job}: wrong answer {r['got']}")
            drv = tree_cpu([d["pid"]], tab1) - tree_cpu([d["pid"]], tab0)
            if mode == "standalone":
                wp = [p.pid for p in workers]
                exe = tree_cpu(wp, tab1, skip_roots=True) - tree_cpu(wp, tab0, skip_roots=True)
            else:  # local[2]: the driver runs the tasks
                exe = drv
            ours = drv + (exe if mode == "standalone" else 0)
            busy = m1[0] - m0[0]
            r.update(
                driver_cpu=drv,
                executor_cpu=exe,
                others_cpu=max(0.0, busy - ours),
                steal=m1[1] - m0[1],
                load=la0,
                span=s1 - s0,
            )
            r["others_cores"] = r["others_cpu"] / r["span"]
            return r

        for rnd in range(-1, rounds):  # -1: the untimed warm-up
            order = list(drivers) if rnd % 2 == 0 else list(drivers)[::-1]
            for job in jobs:
                for mode in order:
                    procs.check()
                    r = run(mode, job)
                    tag = "warm-up" if rnd < 0 else f"round {rnd + 1}"
                    size = (
                        f"{scan['bytes'] / r['wall'] / 1e9:.2f} GB/s"
                        if job == "scan"
                        else f"{diff['rows'] / r['wall'] / 1e6:.2f} M rows/s"
                    )
                    say(
                        f"{tag:8} {job:4} {mode:10} {r['wall']:7.2f} s  {size:16} tasks "
                        f"{r['task']:6.1f} s  CPU executors {r['executor_cpu']:6.1f} s  "
                        f"driver {r['driver_cpu']:5.1f} s  others {r['others_cores']:4.2f} cores  "
                        f"steal {r['steal']:4.1f} s  load {r['load']:.2f}"
                    )
                    if rnd >= 0:
                        results.setdefault(job, {}).setdefault(mode, []).append(r)
    finally:
        for d in drivers.values():
            try:
                d["conn"].send("stop")
            except OSError:
                pass
        time.sleep(2)
        procs.stop()
        listener.close()

    # ---- summary ----
    summary: Dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": cpu_model(),
        "cpus": os.cpu_count(),
        "rounds": rounds,
        "workers": a.workers,
        "scan": scan,
        "diff": diff,
        "jobs": {},
    }
    say("")
    say(
        f"medians of {rounds} rounds ({'; '.join(jobs)}), load average now "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    say(
        "| job | mode | wall s | rate (wall) | task s | per task-s | executor CPU s | per CPU-s "
        "| driver CPU s | others' cores | load |"
    )
    say("|---|---|---|---|---|---|---|---|---|---|---|")
    for job, modes in results.items():
        for mode, rs in modes.items():
            m = {
                k: median([r[k] for r in rs])
                for k in (
                    "wall",
                    "task",
                    "gc",
                    "driver_cpu",
                    "executor_cpu",
                    "others_cpu",
                    "others_cores",
                    "steal",
                    "load",
                )
            }
            if job == "scan":
                n = scan["bytes"]
                rate = lambda s, n=n: f"{n / s / 1e9:.2f} GB/s"  # noqa: E731
            else:
                n = diff["rows"]
                rate = lambda s, n=n: f"{s * 1e6 / n:.3f} core-us/row" if s else "-"  # noqa: E731
            wall_rate = (
                f"{n / m['wall'] / 1e9:.2f} GB/s"
                if job == "scan"
                else f"{n / m['wall'] / 1e6:.2f} M rows/s"
            )
            m.update(
                per_task=n / m["task"] if m["task"] else None,
                per_cpu=n / m["executor_cpu"] if m["executor_cpu"] else None,
                units=n,
            )
            summary["jobs"].setdefault(job, {})[mode] = {"median": m, "runs": rs}
            say(
                f"| {job} | {mode} | {m['wall']:.2f} | {wall_rate} | {m['task']:.1f} | "
                f"{rate(m['task'])} | {m['executor_cpu']:.1f} | {rate(m['executor_cpu'])} | "
                f"{m['driver_cpu']:.1f} | {m['others_cores']:.2f} | {m['load']:.2f} |"
            )
    say(
        "per task-s / per CPU-s: scan GB per executor task-second / CPU-second (a core's "
        "rate); diff: core-microseconds per chunk row. local[2]: the driver runs the tasks, "
        "so its CPU is the whole job's. others' cores: the machine's busy time minus ours "
        "during the job, per second of it (other work on the VM; 2 = every vCPU)."
    )
    (run_dir / "results.json").write_text(json.dumps(summary, indent=1))
    say(f"results: {run_dir / 'results.json'}; logs in {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
