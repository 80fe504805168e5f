"""The data-local scan (spark_udfs.jobs.hostscan) on local[2]: the driver is the only executor, so
the inventory's host is this machine ("localhost"); what needs real hosts (placement,
WRONG_HOST, a lost worker) is proved on simulated hosts (test_spark_simhosts.py).

Checked here: every volume of the inventory is one row of the volumes table with what became
of it; a datanode is named by the UUID its volumes record and shown with its host; a host
without an executor is NO_EXECUTOR and gets no task; a volume of another datanode than the
inventory says is WRONG_DATANODE and is not read; a container twice on one datanode is
DUPLICATE_REPLICA and leaves the comparison; the findings equal the single-tree scan's."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")

from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from merkle.replica.inventory import load_inventory  # noqa: E402

CONTAINERS, SEED = 12, 7


@pytest.fixture(scope="module")
def ozone(tmp_path_factory: Any) -> Tuple[Path, Dict[str, Any]]:
    root = tmp_path_factory.mktemp("hostscan") / "c"
    generate_cluster(
        root,
        GeneratorConfig(
            containers=CONTAINERS,
            seed=SEED,
            layout="ozone",
            faults=parse_faults("default", "ozone"),
        ),
    )
    return root, json.loads((root / "manifest.json").read_text())


def _volumes(root: Path, dn: str) -> List[str]:
    return sorted(os.fspath(p) for p in (root / dn).iterdir())


def _inventory(tmp_path: Path, hosts: List[Dict[str, Any]]) -> Any:
    path = tmp_path / "datanodes.json"
    path.write_text(json.dumps(hosts))
    return load_inventory(os.fspath(path))


def _rows(df: Any) -> List[Dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def test_a_datanode_is_scanned_by_its_uuid_and_shown_with_its_host(
    spark: Any, ozone: Any, tmp_path: Path
) -> None:
    from spark_udfs.jobs.hostscan import scan_datanodes
    from spark_udfs.jobs.scan import NO_EXECUTOR, SCANNED, scan_replicas

    root, manifest = ozone
    uuid0, uuid1 = manifest["datanode_uuids"]["dn0"], manifest["datanode_uuids"]["dn1"]
    inv = _inventory(
        tmp_path,
        [
            {"host": "localhost", "uuid": uuid0, "volumes": _volumes(root, "dn0")},
            {"host": "dn1.invalid", "uuid": uuid1, "volumes": ["/srv/ozone/disk0"]},
        ],
    )
    t = scan_datanodes(spark, inv, executor_wait=0)
    vols = sorted((r["host"], r["volume"], r["status"], r["datanode"]) for r in _rows(t.volumes))
    assert vols == sorted(
        [("localhost", v, SCANNED, uuid0) for v in _volumes(root, "dn0")]
        + [("dn1.invalid", "/srv/ozone/disk0", NO_EXECUTOR, uuid1)]
    )
    (no_exec,) = [r for r in _rows(t.volumes) if r["status"] == NO_EXECUTOR]
    assert "dn1.invalid" in no_exec["detail"] and no_exec["ran_on"] is None
    reps = _rows(t.containers)
    assert reps and {(r["datanode"], r["host"]) for r in reps} == {(uuid0, "localhost")}
    assert sum(r["replicas"] for r in _rows(t.volumes) if r["status"] == SCANNED) == len(reps)
    # the same findings as the single-tree scan of dn0's volumes
    whole = scan_replicas(spark, _volumes(root, "dn0"))

    def key(r: Any) -> Tuple[Any, ...]:
        return (
            r["datanode"],
            r["container"],
            r["data_checksum"],
            r["ok"],
            r["errors"],
            r["chunks"],
            r["bytes_read"],
        )

    assert sorted(map(key, reps)) == sorted(map(key, _rows(whole.containers)))

    def errs(df: Any) -> List[Tuple[Any, ...]]:
        return sorted(
            (r["datanode"], r["container"], r["error"], r["block"] or 0) for r in _rows(df)
        )

    assert errs(t.errors) == errs(whole.errors)
    assert {r["host"] for r in _rows(t.errors)} <= {"localhost"}
    # written partitioned by datanode, read back with the schemas
    out = tmp_path / "out"
    t.write(os.fspath(out))
    assert sorted(p.name for p in (out / "volumes").glob("datanode=*")) == sorted(
        f"datanode={u}" for u in (uuid0, uuid1)
    )


def test_a_volume_of_another_datanode_is_not_read(spark: Any, ozone: Any, tmp_path: Path) -> None:
    from spark_udfs.jobs.hostscan import scan_datanodes
    from spark_udfs.jobs.scan import WRONG_DATANODE

    root, manifest = ozone
    uuid1 = manifest["datanode_uuids"]["dn1"]
    # the inventory puts dn1 on this host, but the disks here are dn0's
    inv = _inventory(
        tmp_path, [{"host": "localhost", "uuid": uuid1, "volumes": _volumes(root, "dn0")}]
    )
    t = scan_datanodes(spark, inv, executor_wait=0)
    vols = _rows(t.volumes)
    assert {r["status"] for r in vols} == {WRONG_DATANODE}
    assert all(manifest["datanode_uuids"]["dn0"] in r["detail"] for r in vols)
    assert t.containers.count() == 0 and t.chunks.count() == 0
    assert sum(r["bytes_read"] or 0 for r in vols) == 0


def test_a_container_twice_on_one_datanode_is_compared_once(
    spark: Any, ozone: Any, tmp_path: Path
) -> None:
    from spark_udfs.jobs.hostscan import scan_datanodes
    from spark_udfs.jobs.scan import DUPLICATE_REPLICA

    root, manifest = ozone
    copy = tmp_path / "c"
    shutil.copytree(root / "dn0", copy / "dn0", symlinks=True)
    vol0, vol1 = sorted((copy / "dn0").iterdir())
    # a replica directory of vol0 copied into vol1 (a half-finished move): both volumes
    # list the container (vol1's DB knows none of its blocks: its own findings, not counted)
    reps0 = sorted(p for p in vol0.glob("hdds/*/current/containerDir*/*") if p.is_dir())
    reps1 = {p.name for p in vol1.glob("hdds/*/current/containerDir*/*") if p.is_dir()}
    moved = next(p for p in reps0 if p.name not in reps1)
    target = next(vol1.glob("hdds/*/current/containerDir*")) / moved.name
    shutil.copytree(moved, target, symlinks=True)
    inv = _inventory(
        tmp_path,
        [
            {
                "host": "localhost",
                "uuid": manifest["datanode_uuids"]["dn0"],
                "volumes": [os.fspath(vol0), os.fspath(vol1)],
            }
        ],
    )
    t = scan_datanodes(spark, inv, executor_wait=0)
    cid = int(moved.name)
    reps = [r for r in _rows(t.containers) if r["container"] == cid]
    assert len(reps) == 1 and reps[0]["replica"] == os.fspath(moved)
    dups = [r for r in _rows(t.errors) if r["error"] == DUPLICATE_REPLICA]
    assert [(d["container"], d["replica"]) for d in dups] == [(cid, os.fspath(target))]
    assert not [r for r in _rows(t.chunks) if r["replica"] == os.fspath(target)]


def test_the_cluster_checks_take_out_what_only_the_cluster_shows() -> None:
    from spark_udfs.jobs.hostscan import _cluster_checks
    from spark_udfs.jobs.scan import DUPLICATE_DATANODE, SCANNED, WRONG_DATANODE

    def row(dn: str, host: str, vol: str, cluster: str = "CID-1") -> Dict[str, Any]:
        return {
            "datanode": dn,
            "host": host,
            "volume": vol,
            "cluster_id": cluster,
            "status": SCANNED,
        }

    rows = [
        row("a", "h1", "/d1"),
        row("a", "h1", "/d2"),  # fine
        row("b", "h2", "/d1"),
        row("b", "h3", "/d1"),  # b on two hosts
        row("c", "h4", "/d1"),
        row("d", "h4", "/d2"),  # h4 names two datanodes
        row("e", "h5", "/d1", "CID-2"),  # another cluster
        row("f", "h6", "/d1"),
    ]
    changed, excluded = _cluster_checks(rows)
    # the volumes taken out (their rows with them), never more: e's other volumes would stay
    assert excluded == set(changed)
    assert {k: v[0] for k, v in changed.items()} == {
        ("h2", "/d1"): DUPLICATE_DATANODE,
        ("h3", "/d1"): DUPLICATE_DATANODE,
        ("h4", "/d1"): WRONG_DATANODE,
        ("h4", "/d2"): WRONG_DATANODE,
        ("h5", "/d1"): WRONG_DATANODE,
    }
    assert "h2, h3" in changed[("h2", "/d1")][1]


def test_the_cli_scans_an_inventory_and_refuses_mixed_input(
    spark: Any, ozone: Any, tmp_path: Path, capsys: Any
) -> None:
    from crcmerkle_cli import main

    root, manifest = ozone
    path = tmp_path / "inv.json"
    path.write_text(
        json.dumps(
            [
                {
                    "host": "localhost",
                    "uuid": manifest["datanode_uuids"]["dn0"],
                    "volumes": _volumes(root, "dn0"),
                }
            ]
        )
    )
    rc = main(
        [
            "spark",
            "scan",
            "--datanodes",
            os.fspath(path),
            "-o",
            os.fspath(tmp_path / "o"),
            "--bytes-per-second",
            "0",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 1 and "replica(s)" in out and not err  # the generated faults: findings
    assert (tmp_path / "o" / "volumes").is_dir()
    assert (
        main(
            [
                "spark",
                "scan",
                os.fspath(root),
                "--datanodes",
                os.fspath(path),
                "-o",
                os.fspath(tmp_path / "o2"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("crcmerkle: error: give PATHs or --datanodes") and err.count("\n") == 1
    assert main(["spark", "scan", "-o", os.fspath(tmp_path / "o3")]) == 2
    assert "nothing to scan" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('[{"host": "a/b"}]')
    assert (
        main(["spark", "scan", "--datanodes", os.fspath(bad), "-o", os.fspath(tmp_path / "o4")])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def _task_rows(item: Dict[str, Any], monkeypatch: Any, ran_on: Any = None) -> List[Dict]:
    """A task's volume rows, run in this process (no Spark): spark_udfs.jobs.hostscan's task."""
    import spark_udfs.cluster.locality as locality
    from spark_udfs.jobs.hostscan import _scan_volume

    monkeypatch.setattr(locality, "this_executor_host", lambda: ran_on)
    options = {
        "trees_only": False,
        "metadata_only": False,
        "bytes_per_second": None,
        "idle_io": False,
        "drop_cache": True,
    }
    out = []
    for t in _scan_volume(item, options):
        d = t.to_pydict()
        out += [{k: d[k][i] for k in d} for i in range(t.num_rows) if d["kind"][i] == "VOLUME"]
    return out


def test_a_task_reads_nothing_off_its_host_and_reports_a_volume_it_cannot_list(
    ozone: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    from spark_udfs.jobs.scan import VOLUME_FAILED, WRONG_HOST

    root, manifest = ozone
    vol = _volumes(root, "dn0")[0]
    item = {
        "host": "dn0.example",
        "at": "dn0.example",
        "names": ["dn0.example"],
        "uuid": manifest["datanode_uuids"]["dn0"],
        "datanode": "x",
        "volume": vol,
        "local": False,
    }
    # on another executor's host: nothing read, where it ran said
    opened: List[str] = []
    real_open = os.open
    monkeypatch.setattr(
        os, "open", lambda p, *a, **k: opened.append(str(p)) or real_open(p, *a, **k)
    )
    [row] = _task_rows(item, monkeypatch, ran_on="dn1.example")
    assert (row["status"], row["ran_on"]) == (WRONG_HOST, "dn1.example")
    assert not [p for p in opened if p.startswith(vol)]
    monkeypatch.setattr(os, "open", real_open)
    # on its host, a volume that is not there, and one whose listing fails: one row each
    [row] = _task_rows(
        {**item, "volume": os.fspath(tmp_path / "gone")}, monkeypatch, ran_on="dn0.example"
    )
    assert row["status"] == VOLUME_FAILED and "gone" in row["detail"]
    from merkle.replica.ozone.interface import OzoneLayout

    def broken(self: Any, volume: Any, on_error: Any = None) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(OzoneLayout, "replicas", broken)
    [row] = _task_rows(item, monkeypatch, ran_on="dn0.example")
    assert row["status"] == VOLUME_FAILED and "Input/output error" in row["detail"]
