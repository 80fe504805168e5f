"""A SparkSession set up the way that measured best here (docs/performance/spark.md).

Why each setting:
  - SPARK_LOCAL_IP=127.0.0.1 silences the "hostname resolves to a loopback address" warning
    on single-host runs (only set when the caller has not set it);
  - a log4j2.properties at level error (SPARK_CONF_DIR=CONF_DIR, inside the package, never
    a shared temporary directory) removes start-up noise;
  - PYSPARK_PYTHON=sys.executable so Python workers import the same merkle build;
  - spark.sql.execution.arrow.maxRecordsPerBatch=1024: 256-1,000 rows of 16 KiB were 1.5x
    faster than 4,000+; the jobs ship metadata rows, which this also suits;
  - spark.sql.execution.arrow.pythonUDF.columnarInput.enabled=false: on (the 4.2+ default) it
    made pandas/arrow UDFs over Parquet 1.1-1.6x slower and ignored maxRecordsPerBatch;
  - spark.sql.codegen.cache.maxEntries=2000: every query's generated Java is compiled by
    Janino unless the same code is in this cache, whose default of 100 entries a diff, a
    report or a plan (dozens of queries each, repeated per table) overflows; measured on 2
    cores (AMD Zen 4, 2026-12-03, tests/spark/test_spark_plan.py, four pairs, order alternated):
    13 % less wall time and 14 % less CPU than with 100, the same queries and the same
    generated code (a static setting: the size is read when the first query compiles);
  - spark.python.daemon.module=spark_udfs.cluster.worker_daemon: Spark starts its Python
    workers with `python -m` in the driver's directory, which puts that directory first on
    their import path; from the root of a crcmerkle clone they would import its unbuilt merkle/
    instead of the installed package. This daemon drops such a directory first
    (spark_udfs._syspath).
Precedence: a value the caller passes (`conf`, i.e. `crcmerkle spark --conf`) wins; then
what the launcher set (`spark-submit --conf`, PYSPARK_SUBMIT_ARGS, spark-defaults.conf);
DEFAULT_CONF fills in only what neither set. `spark.sql.shuffle.partitions`, when nobody
set it, follows the cluster: SHUFFLE_TASKS_PER_CORE x the default parallelism (the cores
of the executors registered at start-up), so a 200-core cluster is not held to 8 tasks.
The UI is switched off by default only for an embedded (local) master.
On a cluster (`spark-submit`, master given by the launcher) only the Spark settings apply.

Spark's console progress bars (`[Stage 0:> (0 + 2) / 2]` on stderr) are off unless the USER
set `spark.ui.showConsoleProgress`: the tool draws its own progress line
(spark_udfs.cluster.progress), only on a terminal, and the bars would fight with it and land in
redirected stderr and --json runs. pyspark's launcher (spark-submit `pyspark-shell`, which
starts the JVM when crcmerkle does) sets the key to true as a shell's default, so a value in
the JVM's conf is not proof of
a choice: the user's choice is what `conf` (`crcmerkle spark --conf`), PYSPARK_SUBMIT_ARGS or a
spark-defaults.conf says; under a real `spark-submit app.py` (no shell default) the launcher's
value is the user's.

The JVM's own stderr: when this module starts the JVM (quiet, not --debug), its stderr goes
through a filter thread that drops the one line every start of Spark's JVM prints on Java 17+
(`WARNING: Using incubator modules: jdk.incubator.vector`, from Spark's --add-modules) and
passes everything else through unchanged. Under spark-submit the JVM is not ours: that line
is printed by spark-submit before Python starts.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Optional

__all__ = [
    "CONF_DIR",
    "DEFAULT_CONF",
    "JVM_NOISE",
    "LOCAL_CONF",
    "LOG4J2",
    "SHUFFLE_TASKS_PER_CORE",
    "SHORT_JOB_JAVA_OPTS",
    "JavaNotFoundError",
    "find_java",
    "get_session",
    "launcher_conf",
    "prepare_environment",
]

#: Spark's configuration directory used for a quiet local driver: shipped inside the package
#: (read-only data of the wheel, owned by whoever installed it), never a directory in a shared
#: temporary directory. Spark's launcher sources `$SPARK_CONF_DIR/spark-env.sh` and puts the
#: directory first on the JVM's classpath, so whoever can write into it runs code as the
#: user of every later `crcmerkle spark ...` (root on a datanode). It holds only
#: log4j2.properties.
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"  # spark_udfs/conf

#: Spark's logging at level error (CONF_DIR/log4j2.properties, the one copy of this text)
LOG4J2 = (CONF_DIR / "log4j2.properties").read_text(encoding="utf-8")

DEFAULT_CONF: Dict[str, str] = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "1024",
    "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled": "false",
    "spark.sql.codegen.cache.maxEntries": "2000",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.daemon.module": "spark_udfs.cluster.worker_daemon",
}


#: defaults for an embedded (local[*]) driver only: nobody looks at its UI, and its port
#: would clash between concurrent runs
LOCAL_CONF: Dict[str, str] = {"spark.ui.enabled": "false"}

#: shuffle partitions per core when nobody set spark.sql.shuffle.partitions (Spark's tuning
#: guide: 2-3 tasks per core; adaptive execution coalesces small ones)
SHUFFLE_TASKS_PER_CORE = 2
_SHUFFLE = "spark.sql.shuffle.partitions"

#: JIT and GC options for JVMs that run short jobs over little data on a few cores: the
#: rehearsal's daemons and executors (eight JVMs on one machine for `spark demo --hosts 3`) and
#: the test suite's drivers. C1 only, and the serial collector: measured on 2 cores (AMD Zen 4,
#: 2026-12-02), two Spark test modules alone took 123 s and 160 CPU-seconds with these against
#: 166 s and 237 CPU-seconds with the JVM's defaults, whose C2 compiler threads spend more CPU
#: than their faster code gives back within a few minutes, and G1's concurrent threads
#: compete with the work for the two cores. Not a default of `crcmerkle spark` jobs: a real
#: scan runs for hours, where C2 pays. The code cache is kept at the tiered JVM's 240 MiB: C1
#: alone makes the JVM size it as a client VM's, 48 MiB, which a test worker's driver running
#: module after module filled ("Out of space in CodeCache for method handle intrinsic", an
#: InternalError that ended the JVM and every later module's session). Set through
#: SPARK_SUBMIT_OPTS (a driver), SPARK_DAEMON_JAVA_OPTS (a master or worker) and
#: spark.executor.extraJavaOptions.
SHORT_JOB_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"


class JavaNotFoundError(RuntimeError):
    """No Java runtime for Spark's JVM (pyspark would fail later with JAVA_GATEWAY_EXITED)."""


def find_java() -> str:
    """The java executable Spark will start: $JAVA_HOME/bin/java, else java on PATH.
    JavaNotFoundError (with how to install one) when there is neither."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if os.access(java, os.X_OK):
            return java
        raise JavaNotFoundError(
            f"JAVA_HOME={home} holds no bin/java; Spark needs a Java 17+ runtime"
        )
    on_path = shutil.which("java")
    if on_path is None:
        raise JavaNotFoundError(
            "Spark needs a Java 17+ runtime: no java on PATH and JAVA_HOME "
            "is unset (Debian/Ubuntu: apt-get install "
            "openjdk-17-jre-headless)"
        )
    return on_path


def prepare_environment(quiet: bool = True) -> None:
    """Set the environment a local driver and its Python workers need (see module doc)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Local Python workers must import this checkout's merkle/spark_udfs even when they are
    # not installed (tests run from the source tree): put the package root on PYTHONPATH.
    root = str(Path(__file__).resolve().parents[2])  # above spark_udfs/cluster/
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + [p for p in paths if p])
    if quiet and "SPARK_CONF_DIR" not in os.environ and not _default_conf_dir_used():
        os.environ["SPARK_CONF_DIR"] = str(CONF_DIR)


def _default_conf_dir_used() -> bool:
    """True when $SPARK_HOME/conf holds configuration: pointing SPARK_CONF_DIR elsewhere
    (for a quiet log4j2) would hide its spark-defaults.conf from the launcher."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        try:
            from pyspark.find_spark_home import _find_spark_home

            home = _find_spark_home()
        except Exception:  # noqa: BLE001 - no Spark home: nothing to hide
            return False
    d = Path(home) / "conf"
    return any(
        (d / f).exists() for f in ("spark-defaults.conf", "log4j2.properties", "spark-env.sh")
    )


#: the one line Spark's JVM prints on every start (Java 17+, `--add-modules
#: jdk.incubator.vector`); dropped from the JVM's stderr when this module starts the JVM
JVM_NOISE = b"WARNING: Using incubator modules: jdk.incubator.vector"


class _StderrFilter:
    """Copies a pipe (the JVM's stderr) to fd 2 as it comes, minus JVM_NOISE lines. Text is
    passed on at once (Spark's own progress bars use `\\r` without newlines); only a line
    that still could become JVM_NOISE is held until its end."""

    def __init__(self, fd: int, out_fd: int = 2) -> None:
        self.fd = fd
        self.out_fd = out_fd
        self.held = b""

    def feed(self, data: bytes) -> bytes:
        """What to write for `data` (tests call it directly)."""
        buf = self.held + data
        self.held = b""
        out = []
        while buf:
            line, nl, rest = buf.partition(b"\n")
            if not nl:  # a partial line: hold it only while it may still be the noise
                if JVM_NOISE.startswith(line.rstrip(b"\r")) or line.startswith(JVM_NOISE):
                    self.held = line
                else:
                    out.append(line)
                break
            if line.rstrip(b"\r") != JVM_NOISE:
                out.append(line + nl)
            buf = rest
        return b"".join(out)

    def run(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                text = self.held
                self.held = b""
                if text and text.rstrip(b"\r") != JVM_NOISE:
                    self._write(text)
                return
            self._write(self.feed(data))

    def _write(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.out_fd, data) :]
        except OSError:
            pass  # our stderr is gone: drop the JVM's text, as the JVM would


def _launch_filtered_gateway() -> None:
    """Start the JVM gateway (SparkContext._gateway) with its stderr through _StderrFilter;
    nothing when a gateway exists or a launcher (spark-submit) owns the JVM."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    import subprocess
    import threading

    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(popen_kwargs={"stderr": subprocess.PIPE})
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        filt = _StderrFilter(proc.stderr.fileno())
        threading.Thread(target=filt.run, name="crcmerkle-jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


_CONSOLE = "spark.ui.showConsoleProgress"


def _user_set(key: str, launcher: Dict[str, str]) -> bool:
    """True when the user (not pyspark's shell default) set `key`: in PYSPARK_SUBMIT_ARGS, in
    the spark-defaults.conf the launcher read, or in the conf of a spark-submit that runs
    this program as its application (not as `pyspark-shell`)."""
    import shlex

    if key not in launcher:
        return False
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS")
    if "PYSPARK_GATEWAY_PORT" in os.environ and submit_args is None:
        return True  # spark-submit app.py: no shell default was added
    try:
        words = shlex.split(submit_args or "")
    except ValueError:
        words = (submit_args or "").split()
    if any(w.startswith(key + "=") for w in words):
        return True
    dirs = [os.environ.get("SPARK_CONF_DIR")]
    home = os.environ.get("SPARK_HOME")
    if home:
        dirs.append(os.path.join(home, "conf"))
    for i, w in enumerate(words):
        if w == "--properties-file" and i + 1 < len(words):
            dirs.append(words[i + 1])
    for d in dirs:
        if not d:
            continue
        f = Path(d) if d.endswith(".conf") else Path(d) / "spark-defaults.conf"
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        if any(
            ln.split("=", 1)[0].split()[0] == key
            for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")
        ):
            return True
    return False


def launcher_conf(quiet: bool = False) -> Dict[str, str]:
    """The settings already decided before this process chose any: those of the running
    SparkContext, else the spark.* system properties of the driver JVM, where spark-submit
    (or pyspark's launcher, from PYSPARK_SUBMIT_ARGS) put its --conf values and
    spark-defaults.conf. Starts the JVM gateway if needed (the session reuses it; `quiet`:
    its stderr through the filter that drops JVM_NOISE, see the module doc)."""
    from pyspark import SparkConf, SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        return dict(sc.getConf().getAll())
    if quiet:
        _launch_filtered_gateway()
    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


_MIN_SPLITS = "spark.sql.files.minPartitionNum"


def _master_given() -> bool:
    """True when a launcher already chose the master: spark-submit (it starts the driver with
    PYSPARK_GATEWAY_PORT set and its --master in the JVM's conf), PYSPARK_SUBMIT_ARGS with
    --master, or the MASTER variable Spark's scripts read. Overriding it with local[*] would
    silently run a cluster job on the driver alone."""
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return (
        "PYSPARK_GATEWAY_PORT" in os.environ
        or "--master" in submit_args
        or "spark.master" in submit_args
        or bool(os.environ.get("MASTER"))
    )


def get_session(
    master: Optional[str] = None,
    app_name: str = "crcmerkle",
    conf: Optional[Dict[str, Any]] = None,
    quiet: bool = True,
) -> Any:
    """getOrCreate a SparkSession: `master` defaults to local[*] unless the launcher (e.g.
    spark-submit) already set one. `conf` entries win over the launcher's settings, which win
    over DEFAULT_CONF (see the module docstring)."""
    prepare_environment(quiet)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        find_java()  # a driver we start ourselves needs a JVM: say so before pyspark fails

    given = {k: str(v) for k, v in (conf or {}).items()}
    launcher = launcher_conf(quiet)
    builder = SparkSession.builder.appName(app_name)
    if master is None and not _master_given() and "spark.master" not in launcher:
        master = "local[*]"
    if master:
        builder = builder.master(master)
    effective_master = master or launcher.get("spark.master", "")
    defaults = dict(DEFAULT_CONF)
    if effective_master.startswith("local"):
        defaults.update(LOCAL_CONF)
    chosen = {k: v for k, v in defaults.items() if k not in launcher}
    if not _user_set(_CONSOLE, launcher):
        chosen[_CONSOLE] = "false"  # pyspark's shell default, not the user's: see module doc
    for k, v in {**chosen, **given}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if _SHUFFLE not in given and _SHUFFLE not in launcher:
        spark.conf.set(
            _SHUFFLE, str(max(1, SHUFFLE_TASKS_PER_CORE * spark.sparkContext.defaultParallelism))
        )
    if spark.conf.get(_MIN_SPLITS, None) is None:
        # Parquet splits default to 128 MiB, so a 400 MiB table is read by 4 tasks: on 2 or
        # 4 cores the last wave runs half empty. Three splits per core at least (measured:
        # the diff's pass over its tables 25% faster on local[2]); on a cluster reading
        # terabytes the 128 MiB cap decides, as before.
        spark.conf.set(_MIN_SPLITS, str(3 * spark.sparkContext.defaultParallelism))
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
    return spark
