"""The Spark report on Ozone volumes with bad block_data rows (issue 28 point 2): one bad row
costs only its own block, so the replica's metadata stays usable and its container is
UNHEALTHY, never MISSING."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

from test_hostile_ozone_meta import rewrite_rows, two_blocks  # noqa: E402
from test_ozone_layout import make_volume  # noqa: E402

from merkle.replica.ozone.rocks import block_key  # noqa: E402


def test_spark_report_calls_a_container_with_bad_rows_unhealthy_not_missing(
    spark: Any, tmp_path: Path
) -> None:
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.report import build_report
    from spark_udfs.jobs.scan import scan_replicas

    for dn in range(3):
        w = make_volume(tmp_path / "c" / f"dn{dn}" / "vol0", {1: two_blocks(3)}, bpc=1024)
        rewrite_rows(w, lambda rows: rows.__setitem__(block_key(1, 1), b"\xff"))
    t = scan_replicas(spark, [os.fspath(tmp_path / "c")])
    kinds = sorted((r["error"], r["block"]) for r in t.errors.collect())
    assert kinds == [("METADATA_CORRUPT", 1)] * 3
    r = build_report(diff_scan(t), replicas=t.containers, errors=t.errors)
    assert r["containers"]["MISSING"] == [] and r["containers"]["UNHEALTHY"] == [1]
