"""Spark column functions over the crcmerkle kernels: CRC-32C / CRC-32, window checksums,
Ozone leaves, and grouped block / container values.

Every scalar function exists in these forms, all doing ONE native call per Arrow batch
(spark_udfs.kernels):
  form="series"          pandas_udf, pd.Series -> pd.Series          (pyspark 3.5 and 4.x)
  form="iterator"        pandas_udf, Iterator[pd.Series] -> Iterator  (3.5 and 4.x)
  form="arrow"           arrow_udf, pa.Array -> pa.Array               (pyspark >= 4.1 only)
  form="arrow_iterator"  arrow_udf, Iterator[pa.Array] -> Iterator     (pyspark >= 4.1 only)
plus `map_in_arrow_checksum(df, ...)`, the mapInArrow path (3.3+), which sees whole
RecordBatches and skips the per-UDF projection. Which is fastest was measured in
bench/test_bench_spark.py; the jobs use mapInArrow because they checksum files, not columns.

Results are LongType holding unsigned 32-bit values, like Spark's crc32(). Nulls: a null value
gives null; an empty value gives 0 (CRC, leaf) or an empty list / empty binary (windows).
Grouped aggregates skip rows with a null leaf (a missing chunk) and order rows themselves, by
offset within a block and by block ID within a container, as Ozone hashes them.

This module deliberately has no `from __future__ import annotations`: pandas_udf/arrow_udf read
the real type hints of the wrapped functions to choose the UDF kind.
"""

from typing import Any, Callable, Dict, Iterator, List, Optional

import pandas as pd
import pyarrow as pa

from merkle import ozone
from spark_udfs import kernels

__all__ = [
    "FORMS",
    "HAS_ARROW_UDF",
    "block_value_udf",
    "checksum_udf",
    "container_value_udf",
    "crc32_udf",
    "crc32c_udf",
    "leaf_udf",
    "map_in_arrow_checksum",
    "register",
    "window_checksums_udf",
]

FORMS = ("series", "iterator", "arrow", "arrow_iterator")


def _has_arrow_udf() -> bool:
    try:
        from pyspark.sql.functions import arrow_udf  # noqa: F401  (pyspark >= 4.1)
    except ImportError:
        return False
    return True


#: arrow_udf exists (pyspark >= 4.1): it hands the function a pyarrow.Array, no pandas.
HAS_ARROW_UDF = _has_arrow_udf()


def _to_pandas(arr: pa.Array) -> pd.Series:
    """Arrow result -> pandas Series for the pandas_udf forms; ints with nulls become Int64.

    Lists and binaries become object Series (numpy arrays / bytes, None for null): Spark's
    pandas -> Arrow conversion of array results walks rows in Python anyway and rejects
    Arrow-backed pandas dtypes with nulls, which is why the arrow forms suit these better."""
    if pa.types.is_list(arr.type) or pa.types.is_binary(arr.type):
        return arr.to_pandas()
    if arr.null_count:
        return pd.Series(arr.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get))
    return pd.Series(arr.to_numpy(zero_copy_only=False))


def _make(kernel: Callable[[Any], pa.Array], return_type: str, form: str, name: str) -> Any:
    """Wrap a batch kernel in the requested UDF form (see the module docstring)."""
    from pyspark.sql.functions import pandas_udf

    if form == "series":

        def series_fn(s: pd.Series) -> pd.Series:
            return _to_pandas(kernel(s))

        series_fn.__name__ = name
        return pandas_udf(series_fn, return_type)
    if form == "iterator":

        def iter_fn(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
            for s in batches:
                yield _to_pandas(kernel(s))

        iter_fn.__name__ = name
        return pandas_udf(iter_fn, return_type)
    if form in ("arrow", "arrow_iterator"):
        if not HAS_ARROW_UDF:
            raise RuntimeError(
                f"form={form!r} needs pyspark >= 4.1 (arrow_udf); this pyspark "
                f"has only the pandas forms ('series', 'iterator')"
            )
        from pyspark.sql.functions import arrow_udf

        if form == "arrow":

            def arrow_fn(a: pa.Array) -> pa.Array:
                return kernel(a)

            arrow_fn.__name__ = name
            return arrow_udf(arrow_fn, return_type)

        def arrow_iter_fn(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
            for a in batches:
                yield kernel(a)

        arrow_iter_fn.__name__ = name
        return arrow_udf(arrow_iter_fn, return_type)
    raise ValueError(f"form must be one of {', '.join(FORMS)}, not {form!r}")


def checksum_udf(algorithm: str = "crc32c", form: str = "series") -> Any:
    """CRC of a binary column as LongType (unsigned 32-bit), like Spark's crc32()."""
    alg = kernels.check_algorithm(algorithm)
    return _make(lambda v: kernels.crc_each(v, alg), "long", form, alg)


def crc32c_udf(form: str = "series") -> Any:
    """CRC-32C (Castagnoli) of a binary column, LongType."""
    return checksum_udf("crc32c", form)


def crc32_udf(form: str = "series") -> Any:
    """CRC-32 (IEEE, zlib's, Spark crc32()'s) of a binary column, LongType."""
    return checksum_udf("crc32", form)


def window_checksums_udf(
    bytes_per_checksum: int = ozone.DEFAULT_BYTES_PER_CHECKSUM,
    algorithm: str = "crc32c",
    packed: bool = False,
    form: str = "series",
) -> Any:
    """One checksum per `bytes_per_checksum` window of each binary value (the last may be
    short): array<bigint>, or binary of 4-byte big-endian words (packed=True, Ozone's
    stored ChecksumData form). Bad sizes/algorithms fail here, not inside a task."""
    alg = kernels.check_algorithm(algorithm)
    bpc = kernels.check_bytes_per_checksum(bytes_per_checksum)
    rtype = "binary" if packed else "array<bigint>"
    return _make(
        lambda v: kernels.windows_each(v, bpc, alg, packed),
        rtype,
        form,
        f"windows_{alg}_{bpc}{'_packed' if packed else ''}",
    )


def leaf_udf(form: str = "series") -> Any:
    """Ozone leaf (chunk tree value) from window checksums: array<bigint> or packed binary."""
    return _make(kernels.leaf_each, "long", form, "ozone_leaf")


def block_value_udf() -> Any:
    """Grouped aggregate: Ozone block value from (block_id, offset, leaf) chunk rows.

    Use as `df.groupBy("container", "block").agg(block_value_udf()("block", "offset", "leaf"))`.
    One native call per group; rows are ordered by offset inside. Prefer the jobs' grouped
    Arrow path for whole tables (it does every block of a container in one call).
    """
    from pyspark.sql.functions import pandas_udf

    def block_value(block_id: pd.Series, offset: pd.Series, leaf: pd.Series) -> int:
        return kernels.block_value(block_id, offset, leaf)

    return pandas_udf(block_value, "long")


def container_value_udf() -> Any:
    """Grouped aggregate: Ozone container value from (block_id, block_value) rows, ordered by
    block ID inside; tombstone rows included as ordinary rows."""
    from pyspark.sql.functions import pandas_udf

    def container_value(block_id: pd.Series, block_value: pd.Series) -> int:
        return kernels.container_value(block_id, block_value)

    return pandas_udf(container_value, "long")


def map_in_arrow_checksum(
    df: Any,
    column: str,
    output: str = "crc",
    algorithm: str = "crc32c",
    keep_input: bool = False,
    bytes_per_checksum: Optional[int] = None,
    packed: bool = False,
) -> Any:
    """The mapInArrow path: append `output` = CRC (or window checksums if bytes_per_checksum
    is given) of binary `column` to every row; drop `column` unless keep_input (so the bytes
    are not shipped back to the JVM). One native call per RecordBatch."""
    from pyspark.sql.types import ArrayType, BinaryType, LongType, StructField, StructType

    alg = kernels.check_algorithm(algorithm)
    if bytes_per_checksum is not None:
        kernels.check_bytes_per_checksum(bytes_per_checksum)
    if column not in df.columns:
        raise ValueError(f"no column {column!r} (columns: {', '.join(df.columns)})")
    fields = [f for f in df.schema.fields if keep_input or f.name != column]
    if bytes_per_checksum is None:
        out_type: Any = LongType()
    else:
        out_type = BinaryType() if packed else ArrayType(LongType())
    schema = StructType(fields + [StructField(output, out_type, True)])
    names = [f.name for f in fields]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            col = b.column(b.schema.get_field_index(column))
            if bytes_per_checksum is None:
                res = kernels.crc_each(col, alg)
            else:
                res = kernels.windows_each(col, bytes_per_checksum, alg, packed)
            cols = [b.column(b.schema.get_field_index(n)) for n in names]
            yield pa.RecordBatch.from_arrays(cols + [res], names=names + [output])

    return df.mapInArrow(fn, schema)


def register(spark: Any, prefix: str = "crcmerkle_", form: str = "series") -> List[str]:
    """Register the functions for SQL; returns the names. Window functions use Ozone's
    default 16 KiB window; register `window_checksums_udf(...)` yourself for other sizes.

      SELECT crcmerkle_crc32c(data), crcmerkle_crc32(data),
             crcmerkle_windows_crc32c(data), crcmerkle_windows_crc32(data),
             crcmerkle_windows_crc32_packed(data), crcmerkle_leaf(windows) FROM t
      SELECT block, crcmerkle_block_value(block, offset, leaf) FROM t GROUP BY block
      SELECT crcmerkle_container_value(block, value) FROM blocks
    """
    funcs: Dict[str, Any] = {
        "crc32c": checksum_udf("crc32c", form),
        "crc32": checksum_udf("crc32", form),
        "leaf": leaf_udf(form),
        "block_value": block_value_udf(),
        "container_value": container_value_udf(),
    }
    for alg in kernels.ALGORITHMS:
        funcs[f"windows_{alg}"] = window_checksums_udf(algorithm=alg, form=form)
        funcs[f"windows_{alg}_packed"] = window_checksums_udf(algorithm=alg, packed=True, form=form)
    names = []
    for short, f in funcs.items():
        spark.udf.register(prefix + short, f)
        names.append(prefix + short)
    return names
