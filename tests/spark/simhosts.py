"""Simulated datanode hosts for the data-local Spark tests: the harness of
spark_udfs.rehearsal.simhosts (what `crcmerkle spark demo --hosts N` runs), re-exported, with
the pytest fixtures. A generated Ozone cluster of 3 datanodes x 2 volumes, a Spark standalone
master on 127.0.0.1 and one worker per datanode, worker i bound to 127.0.0.(i+2), each started
in its own mount namespace where that datanode's volumes, and only those, are bind-mounted at
/srv/ozone/disk0, /srv/ozone/disk1. Executors are the workers' children and inherit their
mounts; the driver (the pytest process) sees only empty mount points.

Fixtures (import them into a test module: `from simhosts import sim_cluster, sim_spark`):
  - sim_cluster (module): a started SimCluster; skipped with one line when not root, when
    the kernel refuses `unshare --mount` or a bind mount, or when /srv/ozone/disk* exist and
    are not empty. A test module may set SIM_GENERATE = {...} (generate_cluster keyword
    arguments: containers, seed, faults, ...; or {"layout": "bookkeeper", ...} and the
    bookie generator's) to change the generated cluster, and SIM_HOSTS = N its host count.
  - sim_spark (module): a SparkSession whose driver is this process, on sim_cluster's master,
    with STRICT_LOCALITY_CONF and one 512m/1-core executor per worker registered.
Everything is stopped afterwards, also on failure. One simulated cluster per machine at a
time (flock on LOCK_FILE; a second waits up to 10 minutes, then skips). The executors have
tests/spark on their path: functions defined in a test module are pickled by reference to it.

Run as a script (the same as spark_udfs/rehearsal/mount_exec.py):
  python simhosts.py mount-exec SRC DST [SRC DST ...] -- PROGRAM ARGS...
"""

from __future__ import annotations

import os  # noqa: F401  (tests patch simhosts.os.geteuid)
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from spark_udfs.rehearsal import simhosts as _impl  # noqa: E402
from spark_udfs.rehearsal.mount_exec import (  # noqa: E402,F401
    PARENT_ENV as _PARENT_ENV,
    die_with_parent as _die_with_parent,
    mount_exec as _mount_exec_impl,
)
from spark_udfs.rehearsal.simhosts import (  # noqa: E402,F401
    _START_TIMEOUT_S,
    ABSENT_HOST,
    DATANODES,
    DEFAULT_GENERATE,
    EXECUTOR_MEMORY,
    LOCK_FILE,
    MOUNT_TEMPLATE,
    VOLUMES,
    WORKER_MEMORY,
    Datanode,
    SimCluster,
    SimHostsUnavailable,
    Worker,
    _alive,
    _children_map,
    _kill_tree,
    _read_datanodes,
    _remove_created,
    _rss_kib,
    _take_lock,
    _tree,
    check_can_simulate,
    checkout_root,
    cpu_seconds,
    driver_mounts,
    driver_rss_mib,
    host_of,
    stop_cluster,
)

#: where the simulated hosts mount their volumes; a test may point it elsewhere for
#: _prepare_mount_points
MOUNT_ROOT = _impl.MOUNT_ROOT


def _prepare_mount_points(paths: Sequence[str]) -> List[Path]:
    """spark_udfs.rehearsal.simhosts._prepare_mount_points under this module's MOUNT_ROOT."""
    return _impl._prepare_mount_points(paths, root=MOUNT_ROOT)


def start_cluster(generate: Optional[Dict[str, Any]] = None, **kwargs: Any) -> SimCluster:
    """spark_udfs.rehearsal.simhosts.start_cluster with tests/spark on the executors' path."""
    return _impl.start_cluster(generate, python_path=[str(HERE)], **kwargs)


# ---------------------------------------------------------------------- fixtures
try:
    import pytest
except ImportError:  # pragma: no cover - the mount-exec entry point runs without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="module")
    def sim_cluster(request: Any) -> Iterator[SimCluster]:
        """The started simulated cluster (module-scoped); skipped in one line when it
        cannot be made here."""
        generate = getattr(request.module, "SIM_GENERATE", None)
        hosts = getattr(request.module, "SIM_HOSTS", DATANODES)
        t0 = time.monotonic()
        try:
            sim = start_cluster(generate, datanodes=hosts)
        except SimHostsUnavailable as exc:
            pytest.skip(f"simulated hosts: {exc}")
        sim.start_seconds = time.monotonic() - t0 - sim.lock_wait_seconds
        try:
            yield sim
        finally:
            stop_cluster(sim)

    @pytest.fixture(scope="module")
    def sim_spark(sim_cluster: SimCluster) -> Iterator[Any]:
        """A SparkSession driven by this process on the simulated cluster, each worker's
        executor registered. A process holds one SparkContext: an active one on another
        master (the local[2] `spark` fixture) is stopped first."""
        from pyspark import SparkContext

        from spark_udfs.cluster.locality import wait_for_executors
        from spark_udfs.cluster.session import get_session

        active = SparkContext._active_spark_context
        if active is not None and active.master != sim_cluster.master_url:
            from pyspark.sql import SparkSession

            session = SparkSession.getActiveSession()
            (session.stop() if session is not None else active.stop())
        t0 = time.monotonic()
        session = get_session(
            sim_cluster.master_url,
            app_name="crcmerkle-simhosts",
            conf={
                **sim_cluster.executor_conf(),
                "spark.ui.enabled": "true",
                "spark.sql.shuffle.partitions": "4",
            },
        )
        try:
            hosts = sorted(sim_cluster.workers)
            got = wait_for_executors(session.sparkContext, hosts, _START_TIMEOUT_S)
            if not set(hosts) <= set(got):
                raise RuntimeError(
                    f"executors missing on {sorted(set(hosts) - set(got))}: "
                    + sim_cluster._log_tails()
                )
            session.executors_seconds = time.monotonic() - t0  # type: ignore[attr-defined]
            yield session
        finally:
            session.stop()


# ---------------------------------------------------------------------- mount-exec
def _mount_exec(argv: List[str]) -> int:
    """mount-exec SRC DST [SRC DST ...] -- PROGRAM ARGS... (spark_udfs.rehearsal.mount_exec)."""
    return _mount_exec_impl(argv)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "mount-exec":
        sys.exit(_mount_exec(sys.argv[2:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
