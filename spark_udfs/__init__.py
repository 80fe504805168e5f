"""Spark (PySpark) column functions and cluster jobs over the crcmerkle core: UDFs, the scan,
diff and report jobs and their command line (`crcmerkle spark ...`).
May import: merkle and its layers (core, trees, replica, the CLI's shared helpers) and pyspark.

Column functions (spark_udfs.udfs; one native call per Arrow batch, LongType results like
Spark's crc32(); pandas_udf Series/Iterator forms on pyspark 3.5 and 4.x, arrow_udf forms on
pyspark >= 4.1, and a mapInArrow path):
    crc32c_udf(), crc32_udf(), checksum_udf(algorithm), window_checksums_udf(bpc, algorithm,
    packed), leaf_udf(), block_value_udf(), container_value_udf(), map_in_arrow_checksum(df,
    column), register(spark)
Jobs (also `crcmerkle spark scan|diff|report|run|demo`, `python -m spark_udfs ...`):
    scan_replicas(spark, roots) -> ScanTables(chunks, blocks, containers, errors, volumes)
                                                                            spark_udfs.scan
    scan_datanodes(spark, inventory): every (host, volume) scanned on its own host (the
        data-local cluster scan; its placement plumbing: spark_udfs.locality) spark_udfs.hostscan
    emit_scan(volumes, uri, host): the scan's tables from one host, no Spark  spark_udfs.emit
    diff_scan(scan_tables) / diff_chunks(chunks_df) -> DiffResult(containers, pulls,
        unrecoverable, pending_deletions, plan())                            spark_udfs.diff
    build_report(diff, replicas=, errors=) / format_text(report)           spark_udfs.report
    get_session(master)                                                     spark_udfs.session
The batch kernels (spark_udfs.kernels) and table conversions (spark_udfs.tables) need no
Spark. Names are imported lazily so `import spark_udfs` does not start or import Spark.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["block_value_udf", "build_report", "checksum_udf", "container_value_udf",
           "crc32_udf", "crc32c_udf", "diff_chunks", "diff_scan", "format_text", "get_session",
           "emit_scan", "leaf_udf", "map_in_arrow_checksum", "register", "repair_plan",
           "scan_datanodes", "scan_replicas", "window_checksums_udf"]

_WHERE = {
    "block_value_udf": "udfs", "checksum_udf": "udfs", "container_value_udf": "udfs",
    "crc32_udf": "udfs", "crc32c_udf": "udfs", "leaf_udf": "udfs",
    "map_in_arrow_checksum": "udfs", "register": "udfs", "window_checksums_udf": "udfs",
    "diff_chunks": "diff", "diff_scan": "diff", "repair_plan": "diff", "build_report": "report",
    "format_text": "report", "get_session": "session", "scan_replicas": "scan",
    "scan_datanodes": "hostscan", "emit_scan": "emit",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"spark_udfs.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'spark_udfs' has no attribute {name!r}")
