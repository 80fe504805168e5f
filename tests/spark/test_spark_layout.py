"""A third replica layout (tests/layouts/flat.py), registered on the driver only, through the
Spark scan and diff: the executors get the layout with the job (pickled by reference: its
module is imported there from the checkout on their PYTHONPATH), and the injected corruption
is found and planned for repair, with no file outside tests/ knowing the layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from test_layout import flat_cluster, flat_layout  # noqa: F401  (the fixture)


def test_a_third_layout_through_the_spark_scan_and_diff(
    spark: Any, tmp_path: Path, flat_layout: Any
) -> None:  # noqa: F811
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.report import build_report
    from spark_udfs.jobs.scan import scan_replicas

    root, damaged, block = flat_cluster(tmp_path / "flat")
    t = scan_replicas(spark, [os.fspath(root)])
    errors = [(e["replica"], e["error"], e["block"]) for e in t.errors.collect()]
    assert errors == [(str(damaged), "CORRUPT_CHUNK", block)]
    rows = {r["replica"]: r for r in t.containers.collect()}
    assert len(rows) == 6 and all(r["verified"] for r in rows.values())
    assert [p for p, r in rows.items() if not r["ok"]] == [str(damaged)]
    assert {r["datanode"] for r in rows.values()} == {"dn0", "dn1", "dn2"}
    diff = diff_scan(t)
    pulls = [p.asDict() for p in diff.pulls.collect()]
    container = int(damaged.name.split(".")[0])
    assert pulls and {(p["container"], p["block"], p["datanode"]) for p in pulls} == {
        (container, block, "dn0")
    }
    report = build_report(diff, replicas=t.containers, errors=t.errors)
    assert container in report["containers"]["UNHEALTHY"] + report["containers"]["MISMATCHED"]
    trees = scan_replicas(spark, [os.fspath(root)], trees_only=True)
    assert trees.containers.count() == 6 and trees.errors.count() == 0
