"""Spark: UDF throughput, the scan job, and the hierarchical diff, peers in the same run.

One local[2] session for the file, warmed up first (the JVM's JIT speeds the same job up by
2-3x over its first runs); every case is a whole Spark job, timed end to end: one untimed
run, then the best of COLD_ROUNDS rounds. Ratios in the table at the end are "how many times
faster ours is" (see bench/conftest.py). Every case checks its answer.

Cases (issue 5; sizes scaled down under BENCH_SHORT=1, overridable with the env below):
- udf: CRC of 16 KiB binary rows read from Parquet (BENCH_SPARK_UDF_BYTES, full 2 GiB, short
  256 MiB), summed so only one number comes back: ours through mapInArrow (the jobs' path) at
  three Arrow batch sizes, arrow_udf, pandas_udf Series and Iterator; peers: Spark's built-in
  crc32() (JVM), a pandas UDF calling google-crc32c per row, a plain Python UDF, and the bare
  JVM -> Python transport (mapInArrow doing nothing), which bounds every Python path.
- scan: the scan job over block files (BENCH_SPARK_SCAN_BYTES, full 2 GiB, short 256 MiB;
  Ozone's 4 MiB chunks and 16 KiB windows) vs Spark's binaryFile + crc32(content) and
  binaryFile read alone.
- diff: two replicas of BENCH_SPARK_DIFF_ROWS chunk rows each (full 30 M as in the issue,
  short 600 k; 10,000 chunks per container, 50 per block) with 0.1% of chunks diverged,
  clustered in 1% of containers or spread uniformly; ours on a scan's tables (containers,
  blocks with their chunk arrays, chunks), ours on the bare chunk table (digests), and a
  naive full outer join of chunk rows; in ns per chunk row (lower is better).
- plan: the decommission plan on PLAN_CONTAINERS containers x 3 against the report on the same
  tables; the repair plan of BENCH_SPARK_PLAN_PULLS pulls (full 770 k, short 40 k) written by the
  executors against collecting the pulls to the driver; the report's plan on the same pulls
  (executors write its commands as JSON lines) against the report as it was (driver plan).
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

import merkle
from merkle.cli import benchmarking as bm

pytest.importorskip("pyspark")

from conftest import SHORT  # noqa: E402  (bench/conftest.py)

OURS = bm.OURS
KiB, MiB, GiB = 1024, 1024**2, 1024**3
ROW = 16 * KiB
#: untimed runs of each job before its timed rounds
WARMUP = 1


#: the bare JVM -> Python transport (mapInArrow doing nothing) at the jobs' batch sizes
FLOOR = "transport floor (mapInArrow no-op)"
FLOOR_1024 = "transport floor, 1024-row batches"


def _size(env: str, full: int, short: int) -> int:
    v = os.environ.get(env)
    return bm.parse_size(v) if v else (short if SHORT else full)


UDF_BYTES = _size("BENCH_SPARK_UDF_BYTES", 2 * GiB, 256 * MiB)
SCAN_BYTES = _size("BENCH_SPARK_SCAN_BYTES", 2 * GiB, 256 * MiB)
DIFF_ROWS = int(os.environ.get("BENCH_SPARK_DIFF_ROWS") or (600_000 if SHORT else 30_000_000))


def _noop() -> Any:
    """mapInArrow doing nothing but count: the JVM -> Python transport alone. Built by a
    function so that cloudpickle ships it by value (workers cannot import this file)."""

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield pa.RecordBatch.from_arrays([pa.array([b.num_rows], pa.int64())], ["c"])

    return count


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from spark_udfs.cluster.session import get_session

    s = get_session("local[2]", app_name="crcmerkle-bench")
    warm_up(s)
    yield s
    s.stop()


def warm_up(s: Any) -> None:
    """JIT warm-up on the code every case shares (Arrow transport, Parquet, aggregation), so
    that the first case measured is not the one that pays for it."""
    wide = s.range(0, 400_000, numPartitions=4).selectExpr("id", "repeat('x', 4096) AS s")
    for _ in range(3):
        wide.mapInArrow(_noop(), "c long").agg({"c": "sum"}).collect()
        wide.selectExpr("crc32(s) AS c").agg({"c": "sum"}).collect()


def _sum(df: Any, col: str) -> int:
    from pyspark.sql import functions as F

    return int(df.agg(F.sum(col)).collect()[0][0] or 0)


# ---- UDFs -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def udf_parquet(tmp_path_factory) -> str:
    return write_udf_parquet(tmp_path_factory.mktemp("spark_udf") / "rows.parquet", UDF_BYTES)


def write_udf_parquet(path: Path, nbytes: int) -> str:
    """nbytes of random 16 KiB binary rows as uncompressed Parquet, 1,024-row row groups."""
    n = nbytes // ROW
    rng = np.random.default_rng(5)
    writer = None
    per = 4096
    for start in range(0, n, per):
        k = min(per, n - start)
        flat = rng.integers(0, 256, k * ROW, dtype=np.uint8)
        offs = np.arange(k + 1, dtype=np.int32) * ROW
        col = pa.BinaryArray.from_buffers(
            pa.binary(), k, [None, pa.py_buffer(offs), pa.py_buffer(flat)]
        )
        t = pa.table({"data": col})
        if writer is None:
            writer = pq.ParquetWriter(str(path), t.schema, compression="none")
        writer.write_table(t, row_group_size=1024)
    assert writer is not None
    writer.close()
    return str(path)


def udf_cases(spark: Any, path: str) -> Dict[str, Any]:
    """{impl name: zero-arg job returning a checksum sum}; same data for all."""
    from pyspark.sql import functions as F

    from spark_udfs import udfs

    df = spark.read.parquet(path)
    cases: Dict[str, Any] = {}

    def batches_of(rows: int, job: Any) -> Any:
        def run() -> int:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(rows))
            try:
                return job()
            finally:
                spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1024")

        return run

    def ours_map_in_arrow() -> int:
        return _sum(udfs.map_in_arrow_checksum(df, "data", "crc"), "crc")

    cases[OURS] = batches_of(256, ours_map_in_arrow)
    cases["ours mapInArrow 1024-row batches"] = batches_of(1024, ours_map_in_arrow)
    cases["ours mapInArrow 4096-row batches"] = batches_of(4096, ours_map_in_arrow)
    if udfs.HAS_ARROW_UDF:
        f_arrow = udfs.crc32c_udf("arrow")
        cases["ours arrow_udf"] = lambda: _sum(df.select(f_arrow("data").alias("c")), "c")
    f_series = udfs.crc32c_udf("series")
    cases["ours pandas_udf"] = lambda: _sum(df.select(f_series("data").alias("c")), "c")
    f_iter = udfs.crc32c_udf("iterator")
    cases["ours pandas_udf iterator"] = lambda: _sum(df.select(f_iter("data").alias("c")), "c")
    cases["spark crc32() builtin"] = lambda: _sum(df.select(F.crc32("data").alias("c")), "c")
    try:
        import google_crc32c  # noqa: F401 (only: is it installed?)

        def google_per_row(s: pd.Series) -> pd.Series:  # nested: pickled by value
            import google_crc32c  # noqa: F811 (imported again where the UDF runs)

            return s.map(google_crc32c.value)

        g_crc = F.pandas_udf(google_per_row, "long")
        cases["pandas_udf + google-crc32c"] = lambda: _sum(df.select(g_crc("data").alias("c")), "c")
    except ImportError:
        pass
    py_udf = F.udf(lambda b: merkle.crc32c(b), "long")
    cases["python udf"] = lambda: _sum(df.select(py_udf("data").alias("c")), "c")
    cases[FLOOR] = batches_of(256, lambda: -_sum(df.mapInArrow(_noop(), "c long"), "c"))
    cases[FLOOR_1024] = batches_of(1024, lambda: -_sum(df.mapInArrow(_noop(), "c long"), "c"))
    return cases


UDF_IMPLS = [
    OURS,
    "ours mapInArrow 1024-row batches",
    "ours mapInArrow 4096-row batches",
    "ours arrow_udf",
    "ours pandas_udf",
    "ours pandas_udf iterator",
    "spark crc32() builtin",
    "pandas_udf + google-crc32c",
    "python udf",
    FLOOR,
    FLOOR_1024,
]


@pytest.mark.parametrize("impl", UDF_IMPLS)
def test_udf_16k_rows_from_parquet(bench, spark, udf_parquet, impl):
    cases = udf_cases(spark, udf_parquet)
    if impl not in cases:
        pytest.skip(f"{impl} not available here")
    got = bench.measure(
        cases[impl],
        case=f"spark udf: 16 KiB rows from Parquet ({bm.format_size(UDF_BYTES)})",
        impl=impl,
        nbytes=UDF_BYTES,
        cold=True,
        warmup=WARMUP,
    )
    n = UDF_BYTES // ROW
    if impl in (FLOOR, FLOOR_1024):
        assert got == -n
    elif impl != "spark crc32() builtin":
        assert got == _reference_crc32c_sum(udf_parquet)


_REF: Dict[str, int] = {}


def _reference_crc32c_sum(path: str) -> int:
    if path not in _REF:
        t = pq.read_table(path)
        _REF[path] = int(merkle.checksum_each(t.column("data")).astype(np.int64).sum())
    return _REF[path]


# ---- scan -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scan_cluster(tmp_path_factory) -> str:
    from merkle.replica.generate import generate_cluster

    root = tmp_path_factory.mktemp("spark_scan") / "cluster"
    block = 16 * MiB
    containers = max(2, SCAN_BYTES // (2 * block))
    generate_cluster(
        root,
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
    return str(root)


def _data_bytes(root: str) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*.block"))


@pytest.mark.parametrize("impl", [OURS, "spark binaryFile + crc32()", "spark binaryFile read"])
def test_scan_job(bench, spark, scan_cluster, impl):
    from pyspark.sql import functions as F

    from spark_udfs.jobs.scan import scan_replicas

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
            df = (
                spark.read.format("binaryFile")
                .option("pathGlobFilter", "*.block")
                .option("recursiveFileLookup", "true")
                .load(scan_cluster)
            )
            if crc:
                row = (
                    df.select(F.length("content").alias("n"), F.crc32("content").alias("c"))
                    .agg(F.sum("n"), F.sum("c"))
                    .collect()[0]
                )
                return int(row[0])
            return _sum(df.select(F.length("content").alias("n")), "n")

        return job

    job = {
        OURS: ours,
        "spark binaryFile + crc32()": binary_file(True),
        "spark binaryFile read": binary_file(False),
    }[impl]
    got = bench.measure(
        job,
        case=f"spark scan: block files ({bm.format_size(nbytes)})",
        impl=impl,
        nbytes=nbytes,
        cold=True,
        warmup=WARMUP,
    )
    assert got == nbytes


# ---- diff -------------------------------------------------------------------------------

PER_CONTAINER, PER_BLOCK = 10_000, 50
CHUNK_LEN = 4 * MiB


def _scan_tables(chunks: pa.Table, out: Path) -> None:
    """The blocks and containers tables a scan would have written beside these chunk rows
    (rows grouped by datanode and container, as the generator makes them)."""
    from spark_udfs.tables import block_rows

    dn = chunks.column("datanode").to_numpy(zero_copy_only=False)
    cid = chunks.column("container").to_numpy()
    cols = {
        c: chunks.column(c).to_numpy(zero_copy_only=False)
        for c in ("block", "offset", "length", "leaf", "checksum_matches")
    }
    cuts = np.flatnonzero((cid[1:] != cid[:-1]) | (dn[1:] != dn[:-1])) + 1
    bounds = np.concatenate(([0], cuts, [cid.size])).tolist()
    blocks, summary = [], []
    for s, e in zip(bounds[:-1], bounds[1:]):
        tree = merkle.ContainerTree.from_columns(
            int(cid[s]),
            cols["block"][s:e],
            cols["offset"][s:e],
            cols["length"][s:e],
            leaf=cols["leaf"][s:e],
            checksum_matches=cols["checksum_matches"][s:e],
        )
        blocks.append(block_rows(str(dn[s]), tree))
        summary.append(
            {
                "datanode": str(dn[s]),
                "replica": None,
                "container": int(cid[s]),
                "data_checksum": tree.data_checksum,
                "tombstones": 0,
                "unhealthy_chunks": int((~tree.chunk_matches).sum()),
            }
        )
    # row groups of ~20 MB, as Spark's writer makes splits of a few per core possible
    pq.write_table(pa.concat_tables(blocks), str(out / "blocks.parquet"), row_group_size=65536)
    pq.write_table(
        pa.Table.from_pylist(
            summary,
            schema=pa.schema(
                [
                    ("datanode", pa.string()),
                    ("replica", pa.string()),
                    ("container", pa.int64()),
                    ("data_checksum", pa.int64()),
                    ("tombstones", pa.int64()),
                    ("unhealthy_chunks", pa.int64()),
                ]
            ),
        ),
        str(out / "containers.parquet"),
    )


def write_diff_tables(out: Path, n: int, scenario: str) -> int:
    """Two replicas (dn0, dn1) of n chunk rows in `out` (chunks.parquet and the scan's
    tables), 0.1% of dn1's chunks changed: "clustered" in 1% of the containers, "uniform"
    anywhere. Returns how many chunks differ. (Also bench/spark_cluster_rates.py's data.)"""
    containers = max(1, n // PER_CONTAINER)
    rng = np.random.default_rng(7)
    i = np.arange(n, dtype=np.int64)
    container = i // PER_CONTAINER
    block = (i % PER_CONTAINER) // PER_BLOCK
    offset = (i % PER_BLOCK) * CHUNK_LEN
    leaf = rng.integers(0, 2**32, n, dtype=np.int64)
    k = max(1, n // 1000)
    if scenario == "clustered":
        pick = rng.choice(containers, max(1, containers // 100), replace=False)
        rows = np.concatenate([np.arange(c * PER_CONTAINER, (c + 1) * PER_CONTAINER) for c in pick])
        changed = rng.choice(rows, min(k, rows.size), replace=False)
    else:
        changed = rng.choice(n, k, replace=False)
    leaf2 = leaf.copy()
    leaf2[changed] ^= 1
    base = {
        "container": container,
        "block": block,
        "offset": offset,
        "length": np.full(n, CHUNK_LEN, dtype=np.int64),
        "deleted": np.zeros(n, dtype=bool),
    }
    # dn1's changed chunks are unhealthy (as a scan marks corruption): dn1 pulls them
    bad = np.ones(n, dtype=bool)
    bad[changed] = False
    tables = [
        pa.table(
            {
                "datanode": pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), [dn]).cast(
                    pa.string()
                ),
                **base,
                "checksum_matches": ok,
                "leaf": lf,
                "replica": pa.nulls(n, pa.string()),
            }
        )
        for dn, lf, ok in (("dn0", leaf, np.ones(n, dtype=bool)), ("dn1", leaf2, bad))
    ]
    chunks = pa.concat_tables(tables)
    pq.write_table(chunks, str(out / "chunks.parquet"), row_group_size=1 << 20)
    _scan_tables(chunks, out)
    return int(changed.size)


@pytest.fixture(scope="module", params=["clustered", "uniform"])
def diff_tables(request, tmp_path_factory) -> Dict[str, Any]:
    out = tmp_path_factory.mktemp(f"spark_diff_{request.param}")
    changed = write_diff_tables(out, DIFF_ROWS, request.param)
    return {"dir": out, "scenario": request.param, "changed": changed}


DIFF_IMPLS = [OURS, "ours, bare chunk table (digests)", "naive full outer join"]


@pytest.mark.parametrize("impl", DIFF_IMPLS)
def test_diff_two_replicas(bench, spark, diff_tables, impl):
    from pyspark.sql import functions as F

    from spark_udfs.jobs.diff import diff_chunks, diff_scan

    d = diff_tables["dir"]

    def read(name: str) -> Any:
        return spark.read.parquet(str(d / f"{name}.parquet"))

    def ours(bare: bool) -> Any:
        def job() -> int:
            try:
                res = (
                    diff_chunks(read("chunks"))
                    if bare
                    else diff_scan({n: read(n) for n in ("chunks", "blocks", "containers")})
                )
                return res.pulls.count()
            finally:
                spark.catalog.clearCache()

        return job

    def naive() -> int:
        df = read("chunks")
        a = df.filter(F.col("datanode") == "dn0").select(
            "container", "block", "offset", F.col("leaf").alias("a")
        )
        b = df.filter(F.col("datanode") == "dn1").select(
            "container", "block", "offset", F.col("leaf").alias("b")
        )
        j = a.join(b, ["container", "block", "offset"], "full_outer")
        return j.filter(~F.col("a").eqNullSafe(F.col("b"))).count()

    job = {
        OURS: ours(False),
        "ours, bare chunk table (digests)": ours(True),
        "naive full outer join": naive,
    }[impl]
    got = bench.measure(
        job,
        case=f"spark diff: 2 x {DIFF_ROWS:,} chunk rows, 0.1% diverged, {diff_tables['scenario']}",
        impl=impl,
        per=2 * DIFF_ROWS,
        unit="ns/elem",
        cold=True,
        warmup=WARMUP,
    )
    assert got == diff_tables["changed"]


# ---- decommission plan ------------------------------------------------------------------

PLAN_CONTAINERS = int(os.environ.get("BENCH_SPARK_PLAN_CONTAINERS") or (300 if SHORT else 3000))
PLAN_DATANODES, PLAN_BLOCKS = 8, 10


@pytest.fixture(scope="module")
def plan_scan(tmp_path_factory) -> Dict[str, Any]:
    """A scan's tables of PLAN_CONTAINERS containers x 3 replicas over 8 datanodes (blocks of
    PER_BLOCK 4 MiB chunks, PLAN_BLOCKS per container), one replica of 1% of the containers
    with a corrupt chunk; the plan decommissions dn0."""
    n_c = PLAN_CONTAINERS
    rng = np.random.default_rng(19)
    per = PLAN_BLOCKS * PER_BLOCK
    i = np.arange(n_c * per, dtype=np.int64)
    container = i // per
    block = (i % per) // PER_BLOCK
    offset = (i % PER_BLOCK) * CHUNK_LEN
    leaf = rng.integers(0, 2**32, i.size, dtype=np.int64)
    corrupt = set(rng.choice(n_c, max(1, n_c // 100), replace=False).tolist())
    tables = []
    for k, step in enumerate((0, 1, 3)):
        dn = (container + step) % PLAN_DATANODES
        ok = np.ones(i.size, dtype=bool)
        lf = leaf.copy()
        if k == 1:  # the second replica of the corrupt containers: first chunk flipped
            hit = np.isin(container, list(corrupt)) & (i % per == 0)
            ok[hit] = False
            lf[hit] ^= 1
        names = np.array([f"dn{d}" for d in range(PLAN_DATANODES)])[dn]
        tables.append(
            pa.table(
                {
                    "datanode": pa.array(names),
                    "container": container,
                    "block": block,
                    "offset": offset,
                    "length": np.full(i.size, CHUNK_LEN, dtype=np.int64),
                    "leaf": lf,
                    "checksum_matches": ok,
                    "deleted": np.zeros(i.size, dtype=bool),
                    "replica": pa.array(
                        np.char.add(np.char.add(names, "/vol0/"), container.astype(str))
                    ),
                }
            )
        )
    chunks = pa.concat_tables(tables)
    order = np.lexsort(
        (
            chunks.column("container").to_numpy(),
            chunks.column("datanode").to_numpy(zero_copy_only=False),
        )
    )
    chunks = chunks.take(pa.array(order))
    out = tmp_path_factory.mktemp("spark_plan")
    pq.write_table(chunks, str(out / "chunks.parquet"), row_group_size=1 << 20)
    _scan_tables(chunks, out)
    return {"dir": out, "corrupt": len(corrupt)}


@pytest.mark.parametrize("impl", [OURS, "spark report (same tables)"])
def test_plan_decommission(bench, spark, plan_scan, impl):
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.plan import build_plan
    from spark_udfs.jobs.report import build_report

    d = plan_scan["dir"]

    def tables() -> Dict[str, Any]:
        return {
            n: spark.read.parquet(str(d / f"{n}.parquet"))
            for n in ("chunks", "blocks", "containers")
        }

    def plan() -> int:
        try:
            t = tables()
            p = build_plan(
                diff_scan(t), decommission=["dn0"], blocks=t["blocks"], chunks=t["chunks"]
            )
            return p["summary"]["copies"]
        finally:
            spark.catalog.clearCache()

    def report() -> int:
        try:
            t = tables()
            r = build_report(diff_scan(t), replicas=t["containers"])
            return r["summary"]["MISMATCHED"]
        finally:
            spark.catalog.clearCache()

    got = bench.measure(
        plan if impl == OURS else report,
        case=f"spark plan: decommission 1 of 8 datanodes, {PLAN_CONTAINERS:,} containers x 3",
        impl=impl,
        per=PLAN_CONTAINERS,
        unit="ns/elem",
        cold=True,
        warmup=WARMUP,
    )
    if impl == OURS:  # one copy per container on dn0, two where an in-service copy is bad
        on_dn0 = sum(1 for c in range(PLAN_CONTAINERS) if 0 in {c % 8, (c + 1) % 8, (c + 3) % 8})
        assert got >= on_dn0
    else:
        assert got == plan_scan["corrupt"]


# ---- repair plan at scale ------------------------------------------------------------------

PLAN_PULLS = int(os.environ.get("BENCH_SPARK_PLAN_PULLS") or (40_000 if SHORT else 770_000))


@pytest.fixture(scope="module")
def pulls_parquet(tmp_path_factory) -> Dict[str, Any]:
    """PLAN_PULLS pull rows as a diff makes them: a widespread fault, 40 pulls per (container,
    target), targets over 12 datanodes, the pulls of a pair with the same two healthy
    candidates."""
    n = PLAN_PULLS
    i = np.arange(n, dtype=np.int64)
    pair = i // 40
    target = pair % 12
    container = pair // 3
    cand = [(target + 1 + pair % 5) % 12, (target + 7) % 12]
    names = np.array([f"dn{d}" for d in range(12)])
    sources = pa.array(
        [[a, b] for a, b in zip(names[cand[0]].tolist(), names[cand[1]].tolist())],
        pa.list_(pa.string()),
    )
    table = pa.table(
        {
            "container": container,
            "datanode": pa.array(names[target]),
            "replica": pa.array(
                np.char.add(names[target], np.char.add("/vol0/", container.astype(str)))
            ),
            "kind": pa.array(np.full(n, "CORRUPT_CHUNK")),
            "block": (i % 40) // 4,
            "offset": (i % 4) * CHUNK_LEN,
            "length": np.full(n, CHUNK_LEN, dtype=np.int64),
            "sources": sources,
            "source_replicas": pa.array([[]] * n, pa.list_(pa.string())),
        }
    )
    out = tmp_path_factory.mktemp("spark_pulls")
    pq.write_table(table, str(out / "pulls.parquet"), row_group_size=1 << 20)
    return {"path": out / "pulls.parquet", "pairs": int(pair[-1]) + 1, "out": out}


@pytest.mark.parametrize("impl", [OURS, "driver: collect pulls + repair_plan"])
def test_repair_plan_at_scale(bench, spark, pulls_parquet, impl):
    """`crcmerkle spark diff` writes the plan from the executors (plan_commands) instead of
    collecting every pull to the driver (repair_plan, which `report` used before it planned
    on the executors too: test_report_plan_at_scale)."""
    from spark_udfs.jobs.diff import plan_commands, repair_plan

    pulls = spark.read.parquet(str(pulls_parquet["path"]))
    runs = iter(range(1_000_000))

    def executors() -> int:
        dest = str(pulls_parquet["out"] / f"plan{next(runs)}")
        plan_commands(pulls).write.parquet(dest)
        return spark.read.parquet(dest).count()

    def driver() -> int:
        return len(repair_plan([r.asDict() for r in pulls.collect()]))

    got = bench.measure(
        executors if impl == OURS else driver,
        case=f"spark repair plan: {PLAN_PULLS:,} pulls",
        impl=impl,
        per=PLAN_PULLS,
        unit="ns/elem",
        cold=True,
        warmup=WARMUP,
    )
    # one command per (container, target): its pulls share their candidates, so one source
    assert got == pulls_parquet["pairs"]


@pytest.mark.parametrize("impl", [OURS, "driver: collect pulls + repair_plan (report before)"])
def test_report_plan_at_scale(bench, spark, pulls_parquet, impl):
    """The report's repair plan on the same pulls: built and written by the executors (JSON
    lines, spark_udfs.jobs.report: counts and the first 100 commands collected) against the
    report as it was, collecting every pull, planning on the driver and listing every
    reconcile command in the JSON."""
    from spark_udfs.jobs.diff import DiffResult, repair_plan
    from spark_udfs.jobs.report import _plan_on_executors

    pulls = spark.read.parquet(str(pulls_parquet["path"]))
    diff = DiffResult(
        replicas=None,
        containers=None,
        pulls=pulls,
        unrecoverable=None,
        diverged_blocks=None,
        pending_deletions=None,
    )
    runs = iter(range(1_000_000))

    def executors() -> int:
        dest = str(pulls_parquet["out"] / f"report{next(runs)}.commands")
        _, listed, total, parts = _plan_on_executors(diff, 20, 100, dest)
        assert parts  # the full list is written and each part digested (what the report signs)
        assert len(listed) == 100
        return total

    def driver() -> int:
        plan = repair_plan([r.asDict() for r in pulls.collect()])
        entries: Dict[Any, Any] = {}
        for p in plan:  # the report's reconcile entries, one per (round, container, target)
            entries.setdefault((p["round"], p["container"], p["target"]), []).append(
                p["source_replica"]
            )
        return len(entries)

    got = bench.measure(
        executors if impl == OURS else driver,
        case=f"spark report plan: {PLAN_PULLS:,} pulls",
        impl=impl,
        per=PLAN_PULLS,
        unit="ns/elem",
        cold=True,
        warmup=WARMUP,
    )
    assert got == pulls_parquet["pairs"]  # one reconcile command per (container, target)
