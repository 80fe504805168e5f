"""Helpers to start a Spark standalone master and workers on 127.0.0.1 the way a node would,
shared by the standalone-cluster test and bench/spark_cluster_rates.py: those of
spark_udfs.rehearsal.standalone (what `crcmerkle spark demo --hosts N` runs), re-exported."""

from __future__ import annotations

from spark_udfs.rehearsal.standalone import clean_env, free_port, spark_home

__all__ = ["clean_env", "free_port", "spark_home"]
