"""`crcmerkle spark copycheck`: what a user can get wrong is one line, exit 2, found before
Spark starts (the session is replaced by one that fails the test), and a failed check leaves
no partial -o directory (issue 36: nothing vouches unless it was checked)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, List

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("rocksdict")

from merkle.cli import main  # noqa: E402
from merkle.replica.generate import generate_cluster, parse_faults  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any) -> Path:
    """A small generated cluster with its OM DB (no scan: Spark never starts here)."""
    where = tmp_path_factory.mktemp("copycheck-cli") / "cluster"
    generate_cluster(
        where,
        layout="ozone",
        om_db=True,
        containers=2,
        seed=3,
        faults=parse_faults("none", "ozone"),
    )
    return where


def fake_scan(where: Path, rows: int = 1) -> Path:
    """A directory shaped as a scan's output: its three tables, `rows` replica rows."""
    for name in ("chunks", "blocks", "containers"):
        (where / name / "datanode=dn1").mkdir(parents=True)
        pq.write_table(
            pa.table({"container": pa.array(range(rows), pa.int64())}),
            where / name / "datanode=dn1" / "part-0.parquet",
        )
    return where


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_udfs.cli import common

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(common, "_session", refuse)  # every verb starts Spark through it


def run(
    capsys: Any,
    cluster: Path,
    out: Path,
    *args: str,
    om_db: str = "",
    scan: str = "",
    target: str = "",
) -> List[str]:
    capsys.readouterr()
    rc = main(
        [
            "spark",
            "copycheck",
            "--om-db",
            om_db or str(cluster / "om.db"),
            "--scan",
            scan,
            "--target",
            target or str(cluster),
            "-o",
            str(out),
            *args,
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err


def test_what_a_user_gets_wrong_is_one_line_before_spark(
    cluster: Path, capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scan = str(fake_scan(tmp_path / "scan"))
    empty = fake_scan(tmp_path / "empty-scan", rows=0)
    (tmp_path / "empty-dir").mkdir()
    notdb = tmp_path / "not-a-db"
    notdb.mkdir()
    (notdb / "junk").write_text("x")
    cases = [
        ({"target": str(tmp_path / "no-such-copy")}, "no-such-copy"),
        ({"target": f"gs://b/p?listing={tmp_path / 'absent.json'}"}, "absent.json"),
        ({"target": "s3://bucket/p?endpoint_overide=127.0.0.1:9"}, "endpoint_overide"),
        ({"target": f"file://{cluster}?recurse=no"}, "recurse"),
        ({"scan": str(cluster)}, "not a scan's output"),
        ({"scan": str(tmp_path / "empty-dir")}, "not a scan's output"),
        ({"scan": str(empty)}, "holds no replica"),
        ({"om_db": str(notdb)}, "--om-db"),
    ]
    for i, (kw, needle) in enumerate(cases):
        out = tmp_path / f"out{i}"
        err = run(capsys, cluster, out, **{"scan": scan, **kw})
        assert needle in err[0], (kw, err)
        assert not out.exists(), kw
    monkeypatch.setitem(sys.modules, "boto3", None)  # the `s3` extra not installed
    err = run(capsys, cluster, tmp_path / "out-s3", scan=scan, target="s3://bucket/p")
    assert "crcmerkle[s3]" in err[0] and not (tmp_path / "out-s3").exists()


def test_a_map_rule_that_names_no_key_is_an_error_and_leaves_nothing(
    cluster: Path, capsys: Any, tmp_path: Path
) -> None:
    """A mistyped --map prefix compares zero keys: exit 2 naming the rule (it once read
    "every key is proved identical to its copy", exit 0). An -o that existed empty is left
    empty; one the check made is removed."""
    scan = str(fake_scan(tmp_path / "scan"))
    out = tmp_path / "out"
    err = run(
        capsys,
        cluster,
        out,
        "--map",
        "/vol1/obs1/=vol1/obs1/",
        "--map",
        "/vol1/osb1/=copy/",
        scan=scan,
    )
    assert "--map /vol1/osb1/=copy/" in err[0] and "no key" in err[0]
    assert not out.exists()
    out.mkdir()
    err = run(capsys, cluster, out, "--map", "/nothing/=x/", scan=scan)
    assert "--map /nothing/=x/" in err[0]
    assert out.is_dir() and os.listdir(out) == []
