"""The jobs on an S3-compatible store: moto's server on 127.0.0.1 (tests/loopback_s3.py)
holding a generated cluster with every kind of fault, scanned through `s3://` by the
executors (pyarrow.fs, endpoint and credentials in the URI): the findings equal those of the
local-path run, no credential reaches any output, truncated blocks are MISSING_CHUNK, and
`diff -o URI` writes plan.json to the URI."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

pytest.importorskip("moto")

from merkle.cli import main  # noqa: E402
from merkle.replica.crcmerkle import remote as fs  # noqa: E402
from merkle.replica.generate import generate_cluster, parse_faults  # noqa: E402
from spark_udfs.jobs.diff import diff_scan  # noqa: E402
from spark_udfs.jobs.report import build_report  # noqa: E402
from spark_udfs.jobs.scan import scan_replicas  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopback_s3 import ACCESS_KEY, SECRET_KEY, LoopbackS3  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("s3") / "cluster"
    manifest = generate_cluster(root, faults=parse_faults("default"), containers=6, seed=11)
    with LoopbackS3() as s3:
        s3.upload(str(root), "cluster")
        yield s3, root, manifest


def _rel(replica: str, base: str) -> str:
    """A replica's path relative to the cluster, for a local path or an s3:// display URI."""
    assert SECRET_KEY not in replica and ACCESS_KEY not in replica
    replica = replica.split("?", 1)[0]
    assert replica.startswith(base), (replica, base)
    return replica[len(base) :].lstrip("/")


def _findings(spark: Any, location: str, base: str, out: Path) -> Dict[str, Any]:
    tables = scan_replicas(spark, [location])
    tables.write(str(out))
    t = {n: spark.read.parquet(str(out / n)) for n in tables.TABLES}
    diff = diff_scan(t)
    report = build_report(diff, replicas=t["containers"], errors=t["errors"])
    # no credential anywhere: every string of every table, the report, its commands
    for name, df in t.items():
        for row in df.collect():
            text = json.dumps(row.asDict(recursive=True), default=str)
            assert SECRET_KEY not in text and ACCESS_KEY not in text, name
    text = json.dumps(report, default=str)
    assert SECRET_KEY not in text and ACCESS_KEY not in text
    return {
        "errors": sorted(
            (_rel(r.replica, base), r.error, r.block, r.offset) for r in t["errors"].collect()
        ),
        "values": sorted(
            (_rel(r.replica, base), r.data_checksum, r.verified) for r in t["containers"].collect()
        ),
        "pulls": sorted(
            (
                _rel(p.replica, base),
                p.kind,
                p.block,
                p.offset or -1,
                tuple(_rel(s, base) for s in p.source_replicas),
            )
            for p in diff.pulls.collect()
        ),
        "states": sorted((r.container, r.state) for r in diff.containers.collect()),
        "summary": report["summary"],
        "read": report["read"],
        "reconcile": sorted(
            (e["round"], _rel(e["replica"], base), tuple(_rel(p, base) for p in e["peers"]))
            for e in report["reconcile"]
        ),
    }


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_s3_scan_equals_the_local_scan(spark, store, tmp_path):
    s3, root, manifest = store
    local = _findings(spark, str(root), str(root), tmp_path / "local")
    before = s3.requests
    remote = _findings(spark, s3.uri("cluster"), f"s3://{s3.bucket}/cluster", tmp_path / "s3")
    assert s3.requests > before  # the executors did read the store
    assert remote == local
    # truncated blocks: MISSING_CHUNK on S3 as on local files (reads clamped to the size)
    assert any(e[1] == "MISSING_CHUNK" for e in remote["errors"])
    assert not any(e[1] in ("UNREADABLE_DATA_FILE", "SCAN_FAILED") for e in remote["errors"])
    assert remote["read"]["read"] == remote["read"]["replicas"] - sum(
        1
        for es in manifest["expected_errors"].values()
        for e in es
        if e["error"].startswith("METADATA_")
    )


def test_uri_forms_keep_their_scheme(store):
    s3, root, _ = store
    want = sorted(os.path.relpath(r.path, root) for r in fs.discover(str(root)))
    for uri in (s3.uri("cluster"), s3.uri("cluster", trailing_slash=True)):
        reps = fs.discover(uri)
        assert [r.path.split("?")[0] for r in reps] == [
            f"s3://{s3.bucket}/cluster/{p}" for p in want
        ]
        assert all(
            r.path.endswith(f"?endpoint_override={s3.endpoint}&scheme=http&region=us-east-1")
            for r in reps
        )
        assert all(SECRET_KEY not in r.path and ACCESS_KEY not in r.path for r in reps)
        assert all(SECRET_KEY in r.fs_root for r in reps)  # what the executors open


def test_listing_is_per_directory_not_per_replica(store):
    s3, root, _ = store
    before = s3.requests
    reps = fs.discover(s3.uri("cluster"))
    used = s3.requests - before
    datanodes = len({r.datanode for r in reps})
    volumes = len({r.fs_path.rsplit("/", 1)[0] for r in reps})
    # the root's info, then listings (at most two requests each) of the root, each datanode
    # and each volume, and one probe per volume: a bound by directories, not by replicas
    # (the old walk made about 4 requests per replica); bench/test_bench_listing.py scales it
    assert len(reps) == 18 and used <= 1 + 2 * (1 + datanodes + 2 * volumes), used


def test_diff_writes_plan_json_to_a_uri(spark, store, tmp_path, capsys):
    s3, root, _ = store
    scan_out = tmp_path / "scan"
    assert main(["spark", "scan", s3.uri("cluster"), "-o", str(scan_out)]) == 1  # findings
    text = capsys.readouterr().out
    assert SECRET_KEY not in text and "18 replica(s)" in text
    out = tmp_path / "diff"
    rc = main(["spark", "diff", str(scan_out), "-o", "file://" + str(out)])
    assert rc == 1
    plan = json.loads((out / "plan.json").read_text())
    assert plan["commands"] > 0 and all("round" in c for c in plan["first"])
    assert SECRET_KEY not in json.dumps(plan)
    # the same writer onto the S3 store itself
    from spark_udfs.cli.common import _write_file

    _write_file(s3.uri("out/plan.json"), b"[]\n")
    with s3.filesystem().open_input_stream(f"{s3.bucket}/out/plan.json") as f:
        assert f.read() == b"[]\n"


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("crcmerkle: error: "), err
    assert "Traceback" not in err and SECRET_KEY not in err
    return lines[0]


def test_a_missing_bucket_is_named(spark, store, tmp_path, capsys):
    s3, _, _ = store
    uri = s3.uri("cluster").replace(f"@{s3.bucket}/", "@no-such-bucket-crcmerkle/")
    assert main(["spark", "scan", uri, "-o", str(tmp_path / "o")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "S3 bucket 'no-such-bucket-crcmerkle' does not exist" in line
    # a missing key of an existing bucket stays "no such file"
    assert main(["spark", "scan", s3.uri("nothing-here"), "-o", str(tmp_path / "o")]) == 2
    assert "No such file or directory" in _one_line(capsys.readouterr().err)


@pytest.fixture
def enforced_auth():
    """moto's server checks signatures against its IAM users (none: every key is unknown)
    from the next request on; INITIAL_NO_AUTH_ACTION_COUNT is the setting behind moto's
    env var of that name, read per request, so the in-process server obeys it at once."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    saved = settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    try:
        yield
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count = saved


def test_bad_credentials_are_one_line(spark, store, tmp_path, capsys, enforced_auth):
    s3, _, _ = store
    uri = s3.uri("cluster").replace(SECRET_KEY, "wrong-secret").replace(ACCESS_KEY, "WRONGKEY")
    assert main(["spark", "scan", uri, "-o", str(tmp_path / "o")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "ACCESS_DENIED" in line or "InvalidAccessKeyId" in line, line
    assert "check the credentials" in line and "wrong-secret" not in line
