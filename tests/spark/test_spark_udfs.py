"""Every UDF form on local Spark gives what merkle gives on the driver; nulls, empties, errors."""

from __future__ import annotations

import numpy as np
import pytest

import merkle
from merkle import ozone
from spark_udfs import udfs

ROWS = [b"123456789", None, b"", bytes(range(256)) * 70, b"\x00" * 16384, b"x" * 16385]
FORMS = [f for f in udfs.FORMS if udfs.HAS_ARROW_UDF or not f.startswith("arrow")]


@pytest.fixture(scope="module")
def data(spark):
    return spark.createDataFrame([(i, v) for i, v in enumerate(ROWS)], "id int, data binary")


def _windows(v, bpc, alg):
    return None if v is None else merkle.checksum_windows(v, bpc, algorithm=alg).tolist()


@pytest.mark.parametrize("form", FORMS)
def test_scalar_forms_match_merkle(spark, data, form):
    bpc = 1000
    out = data.select(
        "id",
        udfs.crc32c_udf(form)("data").alias("c"),
        udfs.crc32_udf(form)("data").alias("z"),
        udfs.window_checksums_udf(bpc, "crc32", form=form)("data").alias("w"),
        udfs.window_checksums_udf(bpc, "crc32c", packed=True, form=form)("data").alias("p"),
    )
    out = (
        out.select("*", udfs.leaf_udf(form)("w").alias("lw"), udfs.leaf_udf(form)("p").alias("lp"))
        .orderBy("id")
        .collect()
    )
    for r, v in zip(out, ROWS):
        assert r.c == (None if v is None else merkle.crc32c(v))
        assert r.z == (None if v is None else merkle.crc32(v))
        assert (None if r.w is None else list(r.w)) == _windows(v, bpc, "crc32")
        want_p = _windows(v, bpc, "crc32c")
        assert r.p == (None if want_p is None else np.array(want_p, ">u4").tobytes())
        w32 = _windows(v, bpc, "crc32")
        assert r.lw == (None if v is None else ozone.leaf_checksum(np.array(w32, np.uint32)))
        assert r.lp == (None if v is None else ozone.leaf_checksum(np.array(want_p, np.uint32)))


def test_types_and_builtin_crc32_agree(spark, data):
    from pyspark.sql import functions as F

    df = data.select(
        F.crc32("data").alias("builtin"),
        udfs.crc32_udf()("data").alias("ours"),
        udfs.crc32c_udf()("data").alias("c"),
    )
    assert dict(df.dtypes) == {"builtin": "bigint", "ours": "bigint", "c": "bigint"}
    assert all(r.builtin == r.ours for r in df.collect())


def test_sql_registration(spark, data):
    names = udfs.register(spark)
    assert "crcmerkle_crc32c" in names and "crcmerkle_block_value" in names
    data.createOrReplaceTempView("t_udf")
    r = spark.sql(
        "SELECT crcmerkle_crc32c(CAST('123456789' AS BINARY)) AS a, "
        "crcmerkle_leaf(crcmerkle_windows_crc32(data)) AS l, "
        "crcmerkle_windows_crc32_packed(data) AS p FROM t_udf WHERE id = 3"
    ).collect()
    assert r[0].a == 0xE3069283
    w = merkle.checksum_windows(ROWS[3], 16384, algorithm="crc32")
    assert r[0].l == ozone.leaf_checksum(w)
    assert r[0].p == w.astype(">u4").tobytes()


def test_grouped_aggregates(spark):
    rng = np.random.default_rng(1)
    rows = []
    want_blocks = {}
    for b in (2**62 + 1, 7, 3):  # a block ID float64 cannot hold exactly
        leaves = [int(x) for x in rng.integers(0, 2**32, 4)]
        want_blocks[b] = ozone.block_checksum(b, leaves)
        for i in rng.permutation(4):
            rows.append((b, int(i) * 10, leaves[i]))
    rows.append((3, 99, None))  # missing chunk: no leaf, skipped
    df = spark.createDataFrame(rows, "block long, offset long, leaf long")
    blocks = df.groupBy("block").agg(
        udfs.block_value_udf()("block", "offset", "leaf").alias("value")
    )
    got = {r.block: r.value for r in blocks.collect()}
    assert got == want_blocks
    total = blocks.agg(udfs.container_value_udf()("block", "value").alias("v")).collect()[0].v
    assert total == ozone.container_checksum([want_blocks[b] for b in sorted(want_blocks)])


def test_map_in_arrow_path(spark, data):
    out = udfs.map_in_arrow_checksum(data, "data", "crc").orderBy("id").collect()
    assert [r.crc for r in out] == [None if v is None else merkle.crc32c(v) for v in ROWS]
    assert "data" not in out[0].asDict()
    w = (
        udfs.map_in_arrow_checksum(data, "data", "w", algorithm="crc32", bytes_per_checksum=4096)
        .orderBy("id")
        .collect()
    )
    assert [None if r.w is None else list(r.w) for r in w] == [
        _windows(v, 4096, "crc32") for v in ROWS
    ]


def test_bad_inputs_fail_clearly(spark):
    from pyspark.errors import PythonException

    with pytest.raises(ValueError, match="bytes_per_checksum must be > 0"):
        udfs.window_checksums_udf(0)
    with pytest.raises(ValueError, match="algorithm"):
        udfs.checksum_udf("sha1")
    with pytest.raises(ValueError, match="form"):
        udfs.crc32c_udf("rows")
    with pytest.raises(ValueError, match="no column"):
        udfs.map_in_arrow_checksum(spark.range(1), "data")
    bad = spark.createDataFrame([([1, 2**32],)], "w array<bigint>")
    with pytest.raises(PythonException, match="32-bit"):
        bad.select(udfs.leaf_udf()("w")).collect()
    text = spark.createDataFrame([("abc",)], "s string")
    with pytest.raises(PythonException, match="encoded"):
        text.select(udfs.crc32c_udf("arrow" if udfs.HAS_ARROW_UDF else "series")("s")).collect()
