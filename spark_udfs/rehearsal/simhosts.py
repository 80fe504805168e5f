"""Simulated datanode hosts on one machine: a generated Ozone cluster of N datanodes x 2
volumes, a Spark standalone master on 127.0.0.1 and one worker per datanode, worker i bound
to 127.0.0.(i+2), each started in its own mount namespace where that datanode's volumes, and
only those, are bind-mounted at /srv/ozone/disk0, /srv/ozone/disk1 (the same paths on every
"host", as hdds.datanode.dir is on a real cluster). The volumes are generated valid at those
paths (`.container` files hold absolute paths). With generate={"layout": "bookkeeper", ...}
the hosts are BookKeeper bookies instead: bookie-(i+1) (ID 127.0.0.(i+2):3181) on worker i,
its two ledger directories at /srv/ozone/ledgers-0, -1, which its cookies name. Executors are
the workers' children and inherit their mounts; the driver sees only empty mount points.

Used by `crcmerkle spark demo --hosts N` (spark_udfs.rehearsal.demo) and by the data-local
tests (tests/spark/simhosts.py adds the pytest fixtures).

SimCluster (what start_cluster returns):
  root, cluster_dir, manifest        private mkdtemp, the generated cluster, its manifest
  datanodes: [Datanode(index, uuid, cluster_id, sources)]   read from each hdds/VERSION
  mount_paths ['/srv/ozone/disk0', '/srv/ozone/disk1'], master_url, master_ui
  workers: {host: Worker(host, datanode, proc, log, ui_port)}   127.0.0.2.. serve dn0..
  start_worker(host, datanode) / wait_workers(hosts) / alive_workers()
  kill_worker(host)                  SIGKILL the worker, its executor and Python workers
  inventory(absent=(ABSENT_HOST,)) / write_inventory(path, absent=...)   plain JSON list
  executor_conf()                    --conf settings for a driver on this cluster
  rss_mib(), start_seconds, lock_wait_seconds   figures
Module functions: start_cluster(generate, ...) / stop_cluster(sim), check_can_simulate(),
host_of(i), checkout_root(), driver_mounts(), driver_rss_mib(); SimHostsUnavailable.
Everything started is stopped by stop_cluster, also on failure; the mounts die with their
namespaces; of /srv/ozone/disk* only what was created here is removed. One simulated
cluster per machine at a time (flock on LOCK_FILE).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spark_udfs.cluster.session import SHORT_JOB_JAVA_OPTS
from spark_udfs.rehearsal.mount_exec import PARENT_ENV as _PARENT_ENV
from spark_udfs.rehearsal.standalone import clean_env, free_port, spark_home

__all__ = [
    "ABSENT_HOST",
    "BOOKIE_MOUNT_TEMPLATE",
    "LAYOUTS",
    "DATANODES",
    "LOCK_FILE",
    "MAX_DATANODES",
    "MOUNT_ROOT",
    "STATE_MOUNT",
    "ROOT_ENV",
    "VOLUMES",
    "Datanode",
    "SimCluster",
    "SimHostsUnavailable",
    "Worker",
    "check_can_simulate",
    "check_mount_points",
    "check_not_running",
    "checkout_root",
    "cpu_seconds",
    "driver_mounts",
    "driver_rss_mib",
    "host_of",
    "mount_paths",
    "start_cluster",
    "stop_cluster",
]

#: in every daemon's environment: the cluster's private directory, which names the daemons
#: of one cluster (a pid in _PARENT_ENV may be reused once that process has gone)
ROOT_ENV = "CRCMERKLE_SIMHOSTS_ROOT"
#: the script each daemon's `unshare` runs (by path: the daemons have no PYTHONPATH)
MOUNT_EXEC = Path(__file__).resolve().parent / "mount_exec.py"

#: where every simulated host mounts its volumes (volume v at MOUNT_ROOT/disk<v>; a bookie's
#: ledger directory v at MOUNT_ROOT/ledgers-<v>)
MOUNT_ROOT = Path("/srv/ozone")
MOUNT_TEMPLATE = str(MOUNT_ROOT / "disk{volume}")
#: each simulated host's own state directory (`--state`), kept across its workers'
#: restarts: the host's <root>/state-<host> (0700), bind-mounted here in its namespace
STATE_MOUNT = str(MOUNT_ROOT / "state")
BOOKIE_MOUNT_TEMPLATE = str(MOUNT_ROOT / "ledgers-{volume}")
#: the layouts a simulated cluster may hold (start_cluster's generate={"layout": ...})
LAYOUTS = ("ozone", "bookkeeper")
#: datanodes (and workers) by default, volumes per datanode
DATANODES, VOLUMES = 3, 2
#: the most simulated hosts: 127.0.0.2 .. 127.0.0.8 (127.0.0.9 is ABSENT_HOST)
MAX_DATANODES = 7
#: an inventory host that never gets a worker
ABSENT_HOST = "127.0.0.9"
#: generate_cluster arguments (a module's SIM_GENERATE overrides them)
DEFAULT_GENERATE: Dict[str, Any] = {"containers": 6, "seed": 25, "faults": "none"}
WORKER_MEMORY, EXECUTOR_MEMORY = "1g", "512m"
_START_TIMEOUT_S = 120.0


class SimHostsUnavailable(Exception):
    """The simulated hosts cannot be set up here (one line: what is missing)."""


@dataclass(frozen=True)
class Datanode:
    """One generated datanode: its index (dn<index>), its UUID and cluster ID read from its
    volumes' hdds/VERSION, and its volume directories as generated (bind-mount sources, in
    volume order: source i is mounted at mount_paths[i]). Of a bookie (layout bookkeeper):
    `uuid` is its bookie ID, `cluster_id` the instanceId, `sources` its ledger directories."""

    index: int
    uuid: str
    cluster_id: str
    sources: List[Path]


@dataclass
class Worker:
    """A running simulated host: a standalone worker bound to `host` with `datanode`'s
    volumes mounted."""

    host: str
    datanode: Datanode
    proc: subprocess.Popen
    log: Path
    ui_port: int


@dataclass
class SimCluster:
    root: Path  # private mkdtemp holding everything
    cluster_dir: Path  # the generated cluster (generate's OUT)
    manifest: Dict[str, Any]
    datanodes: List[Datanode]
    master_url: str = ""
    master_ui: str = ""  # http://127.0.0.1:<port>
    mount_paths: List[str] = field(
        default_factory=lambda: [MOUNT_TEMPLATE.format(volume=v) for v in range(VOLUMES)]
    )
    workers: Dict[str, Worker] = field(default_factory=dict)
    _procs: List[subprocess.Popen] = field(default_factory=list)
    _conf_dir: Optional[Path] = None
    _created_mounts: List[Path] = field(default_factory=list)
    _lock_fd: Optional[int] = None
    #: time spent waiting for another simulated cluster to finish (LOCK_FILE)
    lock_wait_seconds: float = 0.0
    #: more directories on the executors' PYTHONPATH (the tests add tests/spark: functions
    #: defined in a test module are pickled by reference to it)
    python_path: List[str] = field(default_factory=list)
    #: time to generate the cluster and get the master and every worker ALIVE (set by the
    #: sim_cluster fixture; lock wait excluded)
    start_seconds: float = 0.0
    #: what the hosts hold: "ozone" datanodes or "bookkeeper" bookies (LAYOUTS)
    layout: str = "ozone"

    # ------------------------------------------------------------------ daemons
    def _env(self, host: str) -> Dict[str, str]:
        return clean_env(
            {
                "SPARK_CONF_DIR": str(self._conf_dir),
                "SPARK_LOG_DIR": str(self.root),
                "SPARK_LOCAL_IP": host,
                "SPARK_DAEMON_MEMORY": "256m",
                # eight JVMs share the machine's cores: see SHORT_JOB_JAVA_OPTS
                "SPARK_DAEMON_JAVA_OPTS": SHORT_JOB_JAVA_OPTS,
                "SPARK_WORKER_DIR": str(self.root / f"work-{host}"),
                _PARENT_ENV: str(os.getpid()),
                ROOT_ENV: str(self.root),
            }
        )

    def _start_master(self) -> None:
        port, ui = free_port(), free_port()
        log = self.root / "master.log"
        with open(log, "wb") as out:  # through mount-exec (no mount): it dies with us
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(MOUNT_EXEC),
                    "--",
                    str(spark_home() / "bin" / "spark-class"),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                env=self._env("127.0.0.1"),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
            )
        self._procs.append(proc)
        self.master_url, self.master_ui = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}"

    def start_worker(self, host: str, datanode: int) -> Worker:
        """Start a worker bound to `host` (127.0.0.N) in a new mount namespace holding
        `datanode`'s volumes at mount_paths (any datanode: a fresh address with another
        datanode's disks is a worker 'started with the wrong disks'). Returns at once; see
        wait_workers. The worker is killed when the calling THREAD ends (PR_SET_PDEATHSIG):
        call it from the test's main thread."""
        if host in self.workers and self.workers[host].proc.poll() is None:
            raise ValueError(f"a worker already runs on {host}")
        dn = self.datanodes[datanode]
        ui = free_port()
        work = self.root / f"work-{host}"
        work.mkdir(exist_ok=True)
        binds: List[str] = []
        for src, dst in zip(dn.sources, self.mount_paths):
            binds += [str(src), dst]
        binds += [str(self.state_dir(host)), STATE_MOUNT]
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            sys.executable,
            str(MOUNT_EXEC),
            *binds,
            "--",
            str(spark_home() / "bin" / "spark-class"),
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            host,
            "--cores",
            "1",
            "--memory",
            WORKER_MEMORY,
            "--webui-port",
            str(ui),
            "--work-dir",
            str(work),
        ]
        log = self.root / f"worker-{host}.log"
        with open(log, "ab") as out:
            # its own session: kill_worker takes the whole tree, nothing else
            proc = subprocess.Popen(
                argv,
                env=self._env(host),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
            )
        self._procs.append(proc)
        worker = Worker(host, dn, proc, log, ui)
        self.workers[host] = worker
        return worker

    def state_dir(self, host: str) -> Path:
        """The directory `host` sees at STATE_MOUNT (created private): a restarted worker of
        the same host sees what the killed one wrote, another host never."""
        d = self.root / f"state-{host}"
        d.mkdir(mode=0o700, exist_ok=True)
        return d

    def alive_workers(self) -> List[str]:
        """Hosts of the workers the master lists ALIVE."""
        with urllib.request.urlopen(self.master_ui + "/json/", timeout=5) as r:
            state = json.load(r)
        return sorted(w["host"] for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def wait_workers(self, hosts: Sequence[str], timeout_s: float = _START_TIMEOUT_S) -> None:
        """Wait until the master lists every host in `hosts` ALIVE; RuntimeError with the
        logs' tails when a daemon exits or the time runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if set(hosts) <= set(self.alive_workers()):
                    return
            except OSError:
                pass
            dead = [
                p
                for p in self._procs
                if p.poll() is not None
                and any(w.proc is p for w in self.workers.values() if w.host in hosts)
            ]
            if dead or time.monotonic() > deadline:
                raise RuntimeError("simulated hosts did not come up: " + self._log_tails())
            time.sleep(0.5)

    def _log_tails(self) -> str:
        return " | ".join(
            f"{p.name}: {p.read_text(errors='replace')[-800:]}"
            for p in sorted(self.root.glob("*.log"))
        )

    def kill_worker(self, host: str) -> None:
        """SIGKILL the worker on `host` with every process below it (its executors and their
        Python workers), as a host that dies: no clean shutdown message to the driver."""
        worker = self.workers[host]
        _kill_tree(worker.proc.pid)
        worker.proc.wait()

    def stop(self) -> None:
        """Stop every daemon this cluster started (workers first, each with its tree)."""
        for w in list(self.workers.values()):
            if w.proc.poll() is None:
                _kill_tree(w.proc.pid, signal.SIGTERM, grace_s=10)
        for p in self._procs[::-1]:
            if p.poll() is None:
                _kill_tree(p.pid, signal.SIGTERM, grace_s=10)
            p.wait()

    def rss_mib(self) -> Dict[str, float]:
        """Resident memory (MiB) of the master and of each worker with everything below it
        (executor JVM, Python workers), by name: the figures the scale model uses
        (docs/operations/scale-model.md)."""
        out: Dict[str, float] = {}
        named = [("master", self._procs[0])] + [
            (f"worker {w.host}", w.proc) for w in self.workers.values()
        ]
        for name, proc in named:
            if proc.poll() is None:
                out[name] = sum(_rss_kib(p) for p in _tree(proc.pid)) / 1024
        return out

    def executor_cpu_s(self) -> float:
        """CPU seconds (user + system, reaped children included) of every process below the
        live workers (executor JVMs and their Python workers): what a scan cost the hosts."""
        return sum(
            cpu_seconds(_tree(w.proc.pid)) for w in self.workers.values() if w.proc.poll() is None
        )

    # ------------------------------------------------------------------ for the jobs
    def executor_conf(self) -> Dict[str, str]:
        """Spark settings a driver on this cluster needs: executors with this interpreter,
        this checkout (and python_path) on their path, 1 core and 512m each, strict
        locality."""
        from spark_udfs.cluster.locality import STRICT_LOCALITY_CONF

        return {
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": os.pathsep.join(
                [str(checkout_root()), *self.python_path]
            ),
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.executor.extraJavaOptions": SHORT_JOB_JAVA_OPTS,
            "spark.cores.max": str(len(self.datanodes) + 2),
            **STRICT_LOCALITY_CONF,
        }

    def inventory(self, absent: Sequence[str] = (ABSENT_HOST,)) -> List[Dict[str, Any]]:
        """The plain-JSON inventory: every started worker's host with its datanode's UUID
        and the mount paths, then each host of `absent` (no worker) with the UUID of a
        datanode no worker serves (else a made-up one)."""
        key = "bookie" if self.layout == "bookkeeper" else "uuid"
        out = [
            {"host": w.host, key: w.datanode.uuid, "volumes": list(self.mount_paths)}
            for w in sorted(self.workers.values(), key=lambda w: w.host)
        ]
        served = {w.datanode.uuid for w in self.workers.values()}
        spare = [d.uuid for d in self.datanodes if d.uuid not in served]
        for i, host in enumerate(absent):
            if i < len(spare):
                ident = spare[i]
            elif key == "bookie":
                ident = f"{host}:3181"
            else:
                ident = f"00000000-0000-4000-8000-{i:012d}"
            out.append({"host": host, key: ident, "volumes": list(self.mount_paths)})
        return out

    def write_inventory(self, path: Path, absent: Sequence[str] = (ABSENT_HOST,)) -> Path:
        path.write_text(json.dumps(self.inventory(absent), indent=1) + "\n")
        return path


def checkout_root() -> Path:
    """The directory holding the `merkle` package this process imported (executors import
    the same checkout through PYTHONPATH)."""
    import merkle

    return Path(merkle.__file__).resolve().parent.parent


def host_of(i: int) -> str:
    """The address of simulated host i (0-based): 127.0.0.(i+2)."""
    return f"127.0.0.{i + 2}"


# ---------------------------------------------------------------------- process trees
def _children_map() -> Dict[int, List[int]]:
    out: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        try:
            ppid = int(stat[stat.rfind(b")") + 1 :].split()[1])
        except (IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(name))
    return out


def _tree(pid: int) -> List[int]:
    children = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds (utime, stime, cutime, cstime of /proc/PID/stat) summed over `pids`; a
    process that has gone is skipped."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()  # the name may hold spaces
            total += sum(int(x) for x in rest[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def _kill_tree(pid: int, sig: int = signal.SIGKILL, grace_s: float = 0.0) -> None:
    """Signal `pid` and all its descendants (found before signalling; pyspark's daemon makes
    its own process group, so a group kill would miss it); after `grace_s`, SIGKILL what is
    left of them."""
    pids = _tree(pid)
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass
    if sig != signal.SIGKILL:
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def driver_rss_mib() -> float:
    """Resident memory (MiB) of this process and of its children (the driver's JVM)."""
    children = _children_map()
    return sum(_rss_kib(p) for p in [os.getpid(), *children.get(os.getpid(), [])]) / 1024


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


# ---------------------------------------------------------------------- set-up
def check_can_simulate() -> None:
    """SimHostsUnavailable (one line) unless this process may make mount namespaces and
    bind mounts and run Spark's daemons: root, util-linux's unshare and mount, a Java
    runtime, and a kernel that allows `unshare --mount` and `mount --bind`."""
    if os.geteuid() != 0:
        raise SimHostsUnavailable("simulated hosts need root (unshare --mount, mount --bind)")
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        raise SimHostsUnavailable("simulated hosts need util-linux's unshare and mount")
    from spark_udfs.cluster.session import JavaNotFoundError, find_java

    try:
        find_java()
    except JavaNotFoundError as exc:
        raise SimHostsUnavailable(f"the Spark master and workers need Java: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="simhosts-probe-") as d:
        src, dst = Path(d, "src"), Path(d, "dst")
        src.mkdir()
        dst.mkdir()
        (src / "probe").write_text("ok")
        r = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                sys.executable,
                str(MOUNT_EXEC),
                str(src),
                str(dst),
                "--",
                "cat",
                str(dst / "probe"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if r.returncode != 0 or r.stdout != "ok":
            why = (r.stderr.strip().splitlines() or ["no reason given"])[-1]
            raise SimHostsUnavailable(
                f"the kernel refused a mount namespace or a bind mount "
                f"(unshare --mount; mount --bind): {why}"
            )
        if (dst / "probe").exists():  # the mount leaked out of its namespace
            raise SimHostsUnavailable(
                "a bind mount made in a private namespace was visible "
                "outside it: refusing to mount at /srv/ozone"
            )


def mount_paths(layout: str = "ozone") -> List[str]:
    """Where every simulated host mounts its volumes (MOUNT_TEMPLATE, volume by volume; a
    bookie's ledger directories: BOOKIE_MOUNT_TEMPLATE)."""
    template = BOOKIE_MOUNT_TEMPLATE if layout == "bookkeeper" else MOUNT_TEMPLATE
    return [template.format(volume=v) for v in range(VOLUMES)]


def check_mount_points(paths: Sequence[str]) -> None:
    """SimHostsUnavailable when a mount point is not ours to use: not a directory, a mount
    point in use, or not empty (someone's real data)."""
    mounted = set(_mount_points())
    for p in map(Path, paths):
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            raise SimHostsUnavailable(f"{p} exists and is not a directory: not mounting there")
        if str(p) in mounted:
            raise SimHostsUnavailable(f"{p} is a mount point in use: not mounting there")
        if p.is_dir() and any(p.iterdir()):
            raise SimHostsUnavailable(f"{p} exists and is not empty: not mounting there")


def check_not_running() -> None:
    """SimHostsUnavailable when another simulated cluster runs on this machine now (it
    holds LOCK_FILE). A probe: start_cluster takes the lock for good."""
    os.close(_take_lock(0.0))


def _prepare_mount_points(paths: Sequence[str], root: Optional[Path] = None) -> List[Path]:
    """Create the mount points the driver's namespace lacks (and `root`, default
    MOUNT_ROOT, above them); refuse when one exists and is not empty, or has something
    mounted on it (someone's real data). Returns what was created (and must be removed)."""
    root = MOUNT_ROOT if root is None else root
    check_mount_points(paths)
    created: List[Path] = []
    for p in [root, *map(Path, paths)]:
        if not p.exists():
            p.mkdir(mode=0o755)
            created.append(p)
    return created


def _read_datanodes(cluster_dir: Path, datanodes: int = DATANODES) -> List[Datanode]:
    from merkle.replica.layouts import layout_named

    ozone = layout_named("ozone")  # the volumes' identity as the scan reads it (hdds/VERSION)
    out = []
    for d in range(datanodes):
        sources = [cluster_dir / f"dn{d}" / f"vol{v}" for v in range(VOLUMES)]
        found = [v for s in sources for v in ozone.volumes(str(s))]
        uuids = {v.datanode or "" for v in found} or {""}
        clusters = {v.cluster_id or "" for v in found} or {""}
        if len(uuids) != 1 or "" in uuids or len(clusters) != 1:
            raise RuntimeError(
                f"dn{d}: its volumes disagree on datanodeUuid/clusterID: "
                f"{sorted(uuids)} {sorted(clusters)}"
            )
        out.append(Datanode(d, uuids.pop(), clusters.pop(), sources))
    if len({d.uuid for d in out}) != len(out):
        raise RuntimeError("two generated datanodes share a UUID")
    return out


#: one simulated cluster per machine at a time: they share the mount points, and removing a
#: mount point in one namespace detaches the mounts on it in every other
LOCK_FILE = Path("/run/lock/crcmerkle-simhosts.lock")
_LOCK_WAIT_S = 600.0


def _take_lock(wait_s: float = _LOCK_WAIT_S) -> int:
    import fcntl

    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise SimHostsUnavailable(
                    f"another simulated cluster is running (it holds {LOCK_FILE}"
                    + (f" for {wait_s:.0f} s" if wait_s else "")
                    + ")"
                ) from None
            time.sleep(1.0)


def start_cluster(
    generate: Optional[Dict[str, Any]] = None,
    *,
    datanodes: int = DATANODES,
    cluster_dir: Optional[Path] = None,
    python_path: Sequence[str] = (),
    lock_wait_s: float = _LOCK_WAIT_S,
) -> SimCluster:
    """Generate the cluster (in a private mkdtemp, or in `cluster_dir`, new or empty, which
    is left in place) and start the master and one worker per datanode (worker i on
    host_of(i) with dn<i>'s disks); wait until all are ALIVE. SimHostsUnavailable when this
    machine cannot; stop_cluster() undoes everything. One simulated cluster per machine at a
    time (LOCK_FILE; a second one waits up to `lock_wait_s`)."""
    if not 1 <= datanodes <= MAX_DATANODES:
        raise ValueError(f"simulated hosts: 1 to {MAX_DATANODES} datanodes, not {datanodes}")
    layout = (generate or {}).get("layout", "ozone")
    if layout not in LAYOUTS:
        raise ValueError(f"simulated hosts: layout {layout!r} (known: {', '.join(LAYOUTS)})")
    check_can_simulate()
    t0 = time.monotonic()
    lock = _take_lock(lock_wait_s)
    lock_wait = time.monotonic() - t0
    try:
        paths = mount_paths(layout)
        created = _prepare_mount_points([*paths, STATE_MOUNT])
    except BaseException:
        os.close(lock)
        raise
    root = Path(tempfile.mkdtemp(prefix="crcmerkle-simhosts-"))
    sim: Optional[SimCluster] = None
    try:
        cluster_dir = root / "cluster" if cluster_dir is None else Path(cluster_dir)
        if layout == "bookkeeper":
            from spark_udfs.rehearsal import bookkeeper as bk

            if (generate or {}).get("log_bytes"):  # clean bookies sized for a rate bench
                manifest, bookies = bk.write_rate_bookies(
                    cluster_dir,
                    datanodes,
                    BOOKIE_MOUNT_TEMPLATE,
                    VOLUMES,
                    log_bytes=int(generate["log_bytes"]),  # type: ignore[index]
                    payload=int(generate.get("payload", 64 << 10)),  # type: ignore[union-attr]
                )
            else:
                manifest, bookies = bk.generate_bookie_hosts(
                    cluster_dir, datanodes, generate or {}, BOOKIE_MOUNT_TEMPLATE, VOLUMES
                )
            hosts = [Datanode(i, *b) for i, b in enumerate(bookies)]
        else:
            manifest = _generate_datanodes(cluster_dir, datanodes, generate or {})
            hosts = _read_datanodes(cluster_dir, datanodes)
        sim = SimCluster(
            root,
            cluster_dir,
            manifest,
            hosts,
            mount_paths=paths,
            python_path=list(python_path),
            _created_mounts=created,
            _lock_fd=lock,
            layout=layout,
        )
        sim.lock_wait_seconds = lock_wait
        conf = root / "conf"
        conf.mkdir()
        from spark_udfs.cluster.session import LOG4J2

        (conf / "log4j2.properties").write_text(LOG4J2)
        sim._conf_dir = conf
        sim._start_master()
        for i in range(datanodes):
            sim.start_worker(host_of(i), i)
        sim.wait_workers([host_of(i) for i in range(datanodes)])
        return sim
    except BaseException:
        if sim is not None:
            stop_cluster(sim)
        else:
            shutil.rmtree(root, ignore_errors=True)
            _remove_created(created)
            os.close(lock)
        raise


def _generate_datanodes(cluster_dir: Path, datanodes: int, generate: Dict[str, Any]) -> Any:
    """The Ozone cluster (generate_cluster; DEFAULT_GENERATE overridden by `generate`),
    its volumes valid at the mount paths."""
    from merkle.replica.generate import generate_cluster, parse_faults

    args = {**DEFAULT_GENERATE, **{k: v for k, v in generate.items() if k != "layout"}}
    faults = args.pop("faults")
    if isinstance(faults, str):
        faults = parse_faults(faults, "ozone")
    return generate_cluster(
        cluster_dir,
        datanodes=datanodes,
        volumes=VOLUMES,
        layout="ozone",
        mount_path=MOUNT_TEMPLATE,
        faults=faults,
        **args,
    )


def _remove_created(created: Sequence[Path]) -> None:
    for p in reversed(created):  # deepest first; only if still empty (rmdir refuses else)
        try:
            p.rmdir()
        except OSError:
            pass


def stop_cluster(sim: SimCluster) -> None:
    """Stop every daemon, remove the private directory and the mount points created."""
    try:
        sim.stop()
    finally:
        shutil.rmtree(sim.root, ignore_errors=True)
        _remove_created(sim._created_mounts)
        if sim._lock_fd is not None:
            os.close(sim._lock_fd)
            sim._lock_fd = None


def _mount_points() -> List[str]:
    """Every mount point of this process's namespace (octal escapes of mountinfo decoded)."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:
                    out.append(fields[4].encode().decode("unicode_escape"))
    except OSError:
        pass
    return out


def driver_mounts() -> List[str]:
    """Mount points under MOUNT_ROOT in this process's namespace (none expected)."""
    root = str(MOUNT_ROOT)
    return [p for p in _mount_points() if p == root or p.startswith(root + "/")]
