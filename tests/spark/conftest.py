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


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from spark_udfs.cluster.session import get_session

    # 2g: every module caches its scans' stages in this one session; with PySpark 3.5's
    # default 1g the protected storage left the plan tests' execution no memory
    session = get_session(
        "local[2]",
        app_name="crcmerkle-tests",
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "2g",
        },
    )
    yield session
    session.stop()


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
