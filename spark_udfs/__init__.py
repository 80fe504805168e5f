"""Spark (PySpark) column functions and cluster jobs over the crcmerkle core: UDFs, the scan,
diff and report jobs and their command line (`crcmerkle spark ...`).
May import: merkle and its layers (core, trees, replica, the CLI's shared helpers) and pyspark.

Column functions (spark_udfs.udfs; one native call per Arrow batch, LongType results like
Spark's crc32(); pandas_udf Series/Iterator forms on pyspark 3.5 and 4.x, arrow_udf forms on
pyspark >= 4.1, and a mapInArrow path):
    crc32c_udf(), crc32_udf(), checksum_udf(algorithm), window_checksums_udf(bpc, algorithm,
    packed), leaf_udf(), block_value_udf(), container_value_udf(), map_in_arrow_checksum(df,
    column), register(spark)
Jobs (spark_udfs.jobs, one module each; also `crcmerkle spark scan|diff|report|run|plan|
copycheck|demo`, `python -m spark_udfs ...`):
    scan_replicas(spark, roots) -> ScanTables(chunks, blocks, containers, errors, volumes)
                                                                   spark_udfs.jobs.scan
    scan_datanodes(spark, inventory): every (host, volume) scanned on its own host (the
        data-local cluster scan)                                   spark_udfs.jobs.hostscan
    diff_scan(scan_tables) / diff_chunks(chunks_df) -> DiffResult(containers, pulls,
        unrecoverable, pending_deletions, plan())                  spark_udfs.jobs.diff
    build_report(diff, replicas=, errors=) / format_text(report)  spark_udfs.jobs.report
    (and the decommission plan spark_udfs.jobs.plan, the copy check spark_udfs.jobs.copycheck)
The cluster side (spark_udfs.cluster): get_session(master) (spark_udfs.cluster.session), task
placement on the data's hosts (locality), hosts, which scanned volumes may vouch for their
replicas (vouch), the progress line, one-line errors.
Tables (no Spark): the chunk table and its conversions (spark_udfs.tables); emit_scan(volumes,
uri, host), the scan's tables from one host (spark_udfs.tables.emit).
The command line: spark_udfs.cli (the router) and one module per verb in spark_udfs/cli/; the
demo: spark_udfs.demo and its steps; the rehearsal on simulated hosts (`spark demo --hosts N`,
and the data-local tests' harness): spark_udfs.rehearsal. The column functions
(spark_udfs.udfs) and their batch kernels (spark_udfs.kernels, no Spark) stay at the top: they
are the package's namesake; so do the URI and filesystem helpers every part uses (uri, fs).
Names are imported lazily so `import spark_udfs` does not start or import Spark.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "block_value_udf",
    "build_report",
    "checksum_udf",
    "container_value_udf",
    "crc32_udf",
    "crc32c_udf",
    "diff_chunks",
    "diff_scan",
    "format_text",
    "get_session",
    "emit_scan",
    "leaf_udf",
    "map_in_arrow_checksum",
    "register",
    "repair_plan",
    "scan_datanodes",
    "scan_replicas",
    "window_checksums_udf",
]

#: where each public name is defined (full module names: they move with the modules)
_WHERE = {
    "block_value_udf": "spark_udfs.udfs",
    "checksum_udf": "spark_udfs.udfs",
    "container_value_udf": "spark_udfs.udfs",
    "crc32_udf": "spark_udfs.udfs",
    "crc32c_udf": "spark_udfs.udfs",
    "leaf_udf": "spark_udfs.udfs",
    "map_in_arrow_checksum": "spark_udfs.udfs",
    "register": "spark_udfs.udfs",
    "window_checksums_udf": "spark_udfs.udfs",
    "diff_chunks": "spark_udfs.jobs.diff",
    "diff_scan": "spark_udfs.jobs.diff",
    "repair_plan": "spark_udfs.jobs.diff",
    "build_report": "spark_udfs.jobs.report",
    "format_text": "spark_udfs.jobs.report",
    "get_session": "spark_udfs.cluster.session",
    "scan_replicas": "spark_udfs.jobs.scan",
    "scan_datanodes": "spark_udfs.jobs.hostscan",
    "emit_scan": "spark_udfs.tables.emit",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'spark_udfs' has no attribute {name!r}")
