"""A second replica of one container on one datanode (a copy left in another volume) is one
DUPLICATE_REPLICA error row of the scan job, not a job that stops: the other replicas are
scanned, the copy is never compared as another datanode's, and the report calls the
container UNHEALTHY."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from replica_helpers import make_cluster


def test_a_second_replica_on_one_datanode_is_reported_and_the_scan_goes_on(
    spark: Any, tmp_path: Path
) -> None:
    from spark_udfs.jobs.diff import diff_scan
    from spark_udfs.jobs.report import build_report
    from spark_udfs.jobs.scan import DUPLICATE_REPLICA, scan_replicas

    root = tmp_path / "c"
    make_cluster(root, containers=4, layout="crcmerkle")
    first = sorted(root.glob("dn0/vol*/[0-9]*"))[0]
    other = next(v for v in sorted(root.glob("dn0/vol*")) if v != first.parent)
    copy = other / first.name
    assert not copy.exists()
    shutil.copytree(first, copy)

    t = scan_replicas(spark, [os.fspath(root)])
    errors = [r.asDict() for r in t.errors.collect()]
    assert [(e["error"], e["datanode"], e["container"], e["severity"]) for e in errors] == [
        (DUPLICATE_REPLICA, "dn0", int(first.name), "error")
    ]
    assert min(os.fspath(first), os.fspath(copy)) in errors[0]["detail"]
    scanned = {(r["datanode"], r["container"]) for r in t.containers.collect()}
    assert len(scanned) == 12  # every container on every datanode, each once
    report = build_report(diff_scan(t), replicas=t.containers, errors=t.errors)
    assert report["containers"]["UNHEALTHY"] == [int(first.name)]
    assert report["containers"]["MISMATCHED"] == []
