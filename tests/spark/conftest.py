"""One session-scoped local[2] SparkSession for every Spark test (as chispa does).

Skips the Spark tests when pyspark or a Java runtime is missing. Settings from
docs/performance/spark.md, applied by spark_udfs.cluster.session: SPARK_LOCAL_IP=127.0.0.1, a
quiet log4j2 via SPARK_CONF_DIR, PYSPARK_PYTHON=sys.executable, this checkout on the workers'
PYTHONPATH.
Few shuffle partitions: test data is tiny and each partition costs a task.
"""

from __future__ import annotations

import shutil
from typing import Any, Iterator

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:  # pragma: no cover
    pytest.skip("Spark tests need a Java runtime (java on PATH)", allow_module_level=True)


_LOCAL_MASTER = "local[2]"


def _local_session() -> Any:
    """The local[2] session, made when none is running: a process holds one SparkContext,
    and the simulated hosts' `sim_spark` fixture stops this one to drive its own cluster."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from spark_udfs.cluster.session import get_session

    active = SparkContext._active_spark_context
    session = SparkSession.getActiveSession()
    if active is not None and active.master == _LOCAL_MASTER and session is not None:
        return session
    # 2g: every module caches its scans' stages in this one session; with PySpark 3.5's
    # default 1g the protected storage left the plan tests' execution no memory
    return get_session(
        _LOCAL_MASTER,
        app_name="crcmerkle-tests",
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "2g",
        },
    )


@pytest.fixture(scope="session")
def _spark_stopped_at_exit() -> Iterator[None]:
    yield
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


@pytest.fixture(scope="module")
def spark(_spark_stopped_at_exit: None) -> Any:
    """Module-scoped, not session-scoped: a module run after a simulated-hosts module (which
    stopped the local session) gets a live one again instead of a stopped SparkContext."""
    return _local_session()


@pytest.fixture(autouse=True, scope="module")
def _uncache_after_module() -> Iterator[None]:
    """Each module's cached DataFrames released when it ends: the session is shared, and
    cached blocks it no longer needs hold storage memory Spark protects from eviction."""
    yield
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.catalog.clearCache()
        for rdd in list(sc._jsc.getPersistentRDDs().values()):
            rdd.unpersist(False)
