"""Spark: UDF throughput, the scan job, and the hierarchical diff, peers in the same run.

One local[2] session for the file; every case is a whole Spark job, timed end to end (best
of COLD_ROUNDS rounds, one job per round). Ratios in the table at the end are "how many times
faster ours is" (see bench/conftest.py).

Cases (issue 5; sizes scaled down under BENCH_SHORT=1, overridable with the env below):
- udf: CRC of 16 KiB binary rows read from Parquet (BENCH_SPARK_UDF_BYTES, full 2 GiB, short
  256 MiB), summed so only one number comes back: ours through mapInArrow (the jobs' path) at
  three Arrow batch sizes, arrow_udf, pandas_udf Series and Iterator; peers: Spark's built-in
  crc32() (JVM), a pandas UDF calling google-crc32c per row, a plain Python UDF, and the bare
  JVM -> Python transport (mapInArrow doing nothing), which bounds every Python path.
- scan: the scan job over block files (BENCH_SPARK_SCAN_BYTES, full 1 GiB, short 64 MiB) vs
  Spark's binaryFile + crc32(content) and binaryFile read alone.
- diff: two replicas' chunk tables (BENCH_SPARK_DIFF_ROWS rows per replica, full 3 M, short
  200 k; 1,000 chunks per container, 50 per block) with 0.1% of chunks diverged, clustered in
  1% of containers or spread uniformly; ours (container -> block -> chunk) vs a naive full
  outer join of chunk rows; in ns per chunk row (lower is better).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from merkle import benchmarking as bm

pytest.importorskip("pyspark")

from conftest import SHORT  # noqa: E402  (bench/conftest.py)

OURS = bm.OURS
KiB, MiB, GiB = 1024, 1024 ** 2, 1024 ** 3
ROW = 16 * KiB


def _size(env: str, full: int, short: int) -> int:
    v = os.environ.get(env)
    return bm.parse_size(v) if v else (short if SHORT else full)


UDF_BYTES = _size("BENCH_SPARK_UDF_BYTES", 2 * GiB, 256 * MiB)
SCAN_BYTES = _size("BENCH_SPARK_SCAN_BYTES", GiB, 64 * MiB)
DIFF_ROWS = int(os.environ.get("BENCH_SPARK_DIFF_ROWS") or (200_000 if SHORT else 3_000_000))


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from spark_udfs.session import get_session

    s = get_session("local[2]", app_name="crcmerkle-bench")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def udf_parquet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("spark_udf") / "rows.parquet"
    n = UDF_BYTES // ROW
    rng = np.random.default_rng(5)
    writer = None
    per = 4096
    for start in range(0, n, per):
        k = min(per, n - start)
        flat = rng.integers(0, 256, k * ROW, dtype=np.uint8)
        offs = np.arange(k + 1, dtype=np.int32) * ROW
        col = pa.BinaryArray.from_buffers(pa.binary(), k, [None, pa.py_buffer(offs),
                                                           pa.py_buffer(flat)])
        t = pa.table({"data": col})
        if writer is None:
            writer = pq.ParquetWriter(str(path), t.schema, compression="none")
        writer.write_table(t, row_group_size=1024)
    writer.close()
    return str(path)


def _sum(df: Any, col: str) -> int:
    from pyspark.sql import functions as F

    return int(df.agg(F.sum(col)).collect()[0][0] or 0)


def _udf_cases(spark: Any, path: str) -> Dict[str, Any]:
    """{impl name: zero-arg job returning a checksum sum}; same data for all."""
    from pyspark.sql import functions as F

    from spark_udfs import udfs

    df = spark.read.parquet(path)
    cases: Dict[str, Any] = {}

    def map_in_arrow(batch_rows: int) -> Any:
        def job() -> int:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch_rows))
            try:
                return _sum(udfs.map_in_arrow_checksum(df, "data", "crc"), "crc")
            finally:
                spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1024")
        return job

    cases[OURS] = map_in_arrow(256)
    cases["ours mapInArrow 1024-row batches"] = map_in_arrow(1024)
    cases["ours mapInArrow 4096-row batches"] = map_in_arrow(4096)
    if udfs.HAS_ARROW_UDF:
        f_arrow = udfs.crc32c_udf("arrow")
        cases["ours arrow_udf"] = lambda: _sum(df.select(f_arrow("data").alias("c")), "c")
    f_series = udfs.crc32c_udf("series")
    cases["ours pandas_udf"] = lambda: _sum(df.select(f_series("data").alias("c")), "c")
    f_iter = udfs.crc32c_udf("iterator")
    cases["ours pandas_udf iterator"] = lambda: _sum(df.select(f_iter("data").alias("c")), "c")
    cases["spark crc32() builtin"] = lambda: _sum(df.select(F.crc32("data").alias("c")), "c")
    try:
        import google_crc32c  # noqa: F401

        def google_per_row(s: pd.Series) -> pd.Series:  # nested: pickled by value
            import google_crc32c

            return s.map(google_crc32c.value)

        g_crc = F.pandas_udf(google_per_row, "long")
        cases["pandas_udf + google-crc32c"] = lambda: _sum(df.select(g_crc("data").alias("c")),
                                                           "c")
    except ImportError:
        pass
    import merkle

    py_udf = F.udf(lambda b: merkle.crc32c(b), "long")
    cases["python udf"] = lambda: _sum(df.select(py_udf("data").alias("c")), "c")

    def floor() -> int:
        def nothing(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                yield pa.RecordBatch.from_arrays([pa.array([b.num_rows], pa.int64())], ["c"])
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "256")
        try:
            return -_sum(df.mapInArrow(nothing, "c long"), "c")
        finally:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1024")
    cases["transport floor (mapInArrow no-op)"] = floor
    return cases


UDF_IMPLS = [OURS, "ours mapInArrow 1024-row batches", "ours mapInArrow 4096-row batches",
             "ours arrow_udf", "ours pandas_udf", "ours pandas_udf iterator",
             "spark crc32() builtin", "pandas_udf + google-crc32c", "python udf",
             "transport floor (mapInArrow no-op)"]


@pytest.mark.parametrize("impl", UDF_IMPLS)
def test_udf_16k_rows_from_parquet(bench, spark, udf_parquet, impl):
    cases = _udf_cases(spark, udf_parquet)
    if impl not in cases:
        pytest.skip(f"{impl} not available here")
    job = cases[impl]
    got = bench.measure(job, case=f"spark udf: 16 KiB rows from Parquet "
                                  f"({bm.format_size(UDF_BYTES)})",
                        impl=impl, nbytes=UDF_BYTES, cold=True)
    n = UDF_BYTES // ROW
    if impl == "transport floor (mapInArrow no-op)":
        assert got == -n
    elif impl not in ("spark crc32() builtin",):
        assert got == _reference_crc32c_sum(udf_parquet)


_REF: Dict[str, int] = {}


def _reference_crc32c_sum(path: str) -> int:
    if path not in _REF:
        import merkle

        t = pq.read_table(path)
        _REF[path] = int(merkle.checksum_each(t.column("data")).astype(np.int64).sum())
    return _REF[path]


# ---- scan -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scan_cluster(tmp_path_factory) -> str:
    from merkle.replica_generate import generate_cluster

    root = tmp_path_factory.mktemp("spark_scan") / "cluster"
    block = 16 * MiB
    containers = max(1, SCAN_BYTES // (2 * block))
    generate_cluster(root, datanodes=2, volumes=1, replicas=1, containers=int(containers),
                     min_blocks=2, max_blocks=2, block_size=block, chunk_size=4 * MiB,
                     bytes_per_checksum=16 * KiB, algorithm="crc32", seed=2)
    return str(root)


def _data_bytes(root: str) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*.block"))


@pytest.mark.parametrize("impl", [OURS, "spark binaryFile + crc32()", "spark binaryFile read"])
def test_scan_job(bench, spark, scan_cluster, impl):
    from pyspark.sql import functions as F

    from spark_udfs.scan import scan_replicas

    nbytes = _data_bytes(scan_cluster)

    def ours() -> int:
        t = scan_replicas(spark, [scan_cluster])
        try:
            row = t.replicas.agg(F.sum("bytes_read"), F.sum("errors")).collect()[0]
            assert int(row[1]) == 0
            return int(row[0])
        finally:
            spark.catalog.clearCache()

    def binary_file(crc: bool) -> Any:
        def job() -> int:
            df = (spark.read.format("binaryFile").option("pathGlobFilter", "*.block")
                  .option("recursiveFileLookup", "true").load(scan_cluster))
            if crc:
                row = df.select(F.length("content").alias("n"), F.crc32("content").alias("c")
                                ).agg(F.sum("n"), F.sum("c")).collect()[0]
                return int(row[0])
            return _sum(df.select(F.length("content").alias("n")), "n")
        return job

    job = {OURS: ours, "spark binaryFile + crc32()": binary_file(True),
           "spark binaryFile read": binary_file(False)}[impl]
    got = bench.measure(job, case=f"spark scan: block files ({bm.format_size(nbytes)})",
                        impl=impl, nbytes=nbytes, cold=True)
    assert got == nbytes


# ---- diff -------------------------------------------------------------------------------

PER_CONTAINER, PER_BLOCK = 1000, 50


@pytest.fixture(scope="module", params=["clustered", "uniform"])
def diff_tables(request, tmp_path_factory) -> Dict[str, Any]:
    n = DIFF_ROWS
    containers = max(1, n // PER_CONTAINER)
    rng = np.random.default_rng(7)
    i = np.arange(n, dtype=np.int64)
    container = i // PER_CONTAINER
    block = (i % PER_CONTAINER) // PER_BLOCK
    offset = (i % PER_BLOCK) * (4 << 20)
    leaf = rng.integers(0, 2 ** 32, n, dtype=np.int64)
    k = max(1, n // 1000)
    if request.param == "clustered":
        pick = rng.choice(max(1, containers // 100), 1, replace=False) if containers < 100 \
            else rng.choice(containers, containers // 100, replace=False)
        rows = np.concatenate([np.arange(c * PER_CONTAINER, (c + 1) * PER_CONTAINER)
                               for c in pick])
        changed = rng.choice(rows, min(k, rows.size), replace=False)
    else:
        changed = rng.choice(n, k, replace=False)
    leaf2 = leaf.copy()
    leaf2[changed] ^= 1
    path = tmp_path_factory.mktemp(f"spark_diff_{request.param}") / "chunks.parquet"
    base = {"container": container, "block": block, "offset": offset,
            "length": np.full(n, 4 << 20, dtype=np.int64), "deleted": np.zeros(n, dtype=bool)}
    # dn1's changed chunks are unhealthy (as a scan marks corruption): dn1 pulls them
    bad = np.ones(n, dtype=bool)
    bad[changed] = False
    tables = [pa.table({"datanode": pa.array([dn] * n), **base, "checksum_matches": ok,
                        "leaf": lf, "replica": pa.nulls(n, pa.string())})
              for dn, lf, ok in (("dn0", leaf, np.ones(n, dtype=bool)), ("dn1", leaf2, bad))]
    pq.write_table(pa.concat_tables(tables), str(path), row_group_size=1 << 20)
    return {"path": str(path), "scenario": request.param, "changed": int(changed.size)}


@pytest.mark.parametrize("impl", [OURS, "naive full outer join"])
def test_diff_two_replicas(bench, spark, diff_tables, impl):
    from pyspark.sql import functions as F

    from spark_udfs.diff import diff_chunks

    path = diff_tables["path"]

    def ours() -> int:
        try:
            res = diff_chunks(spark.read.parquet(path))
            return res.pulls.count()
        finally:
            spark.catalog.clearCache()

    def naive() -> int:
        df = spark.read.parquet(path)
        a = df.filter(F.col("datanode") == "dn0").select(
            "container", "block", "offset", F.col("leaf").alias("a"))
        b = df.filter(F.col("datanode") == "dn1").select(
            "container", "block", "offset", F.col("leaf").alias("b"))
        j = a.join(b, ["container", "block", "offset"], "full_outer")
        return j.filter(~F.col("a").eqNullSafe(F.col("b"))).count()

    job = ours if impl == OURS else naive
    got = bench.measure(job, case=f"spark diff: 2 x {DIFF_ROWS:,} chunk rows, 0.1% diverged, "
                                  f"{diff_tables['scenario']}", impl=impl,
                        per=2 * DIFF_ROWS, unit="ns/elem", cold=True)
    assert got == diff_tables["changed"]
