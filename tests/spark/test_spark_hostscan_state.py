"""`--state` on the data-local scan (spark_udfs.jobs.hostscan, issue 34), on local[2]: each
volume's progress in its own database under the state directory on its host; a rerun
within --max-age reads no data and tables every replica from its record, findings and
chunks as the read wrote them; a driver killed mid-scan (SIGKILL) and run again reads only
what the killed run had not saved, with the uninterrupted run's findings."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")

from merkle.replica.generate import GeneratorConfig, generate_cluster, parse_faults  # noqa: E402
from merkle.replica.inventory import load_inventory  # noqa: E402
from merkle.replica.scanstate import DB_NAME  # noqa: E402

#: what a read changes and a record does not hold: left out of the comparison
VARYING = {"bytes_read", "seconds", "cpu_seconds"}


@pytest.fixture(scope="module")
def ozone(tmp_path_factory: Any) -> Tuple[Path, Dict[str, Any]]:
    root = tmp_path_factory.mktemp("hoststate") / "c"
    generate_cluster(
        root,
        GeneratorConfig(
            containers=8, seed=34, layout="ozone", faults=parse_faults("default", "ozone")
        ),
    )
    return root, json.loads((root / "manifest.json").read_text())


def _inventory_file(tmp_path: Path, root: Path, manifest: Dict[str, Any]) -> Path:
    path = tmp_path / "datanodes.json"
    vols = sorted(os.fspath(p) for p in (root / "dn0").iterdir())
    path.write_text(
        json.dumps(
            [{"host": "localhost", "uuid": manifest["datanode_uuids"]["dn0"], "volumes": vols}]
        )
    )
    return path


def _table(df: Any) -> List[str]:
    rows = [{k: v for k, v in r.asDict().items() if k not in VARYING} for r in df.collect()]
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def _tables(t: Any) -> Dict[str, List[str]]:
    return {n: _table(getattr(t, n)) for n in ("containers", "chunks", "errors")}


def test_a_rerun_within_max_age_tables_every_replica_from_its_record(
    spark: Any, ozone: Any, tmp_path: Path
) -> None:
    from spark_udfs.jobs.hostscan import scan_datanodes

    root, manifest = ozone
    inv = load_inventory(os.fspath(_inventory_file(tmp_path, root, manifest)))
    plain = scan_datanodes(spark, inv, executor_wait=0)
    state = {"dir": os.fspath(tmp_path / "state"), "max_age": None, "checkpoint_seconds": 0.0}
    t0 = time.time()
    first = scan_datanodes(spark, inv, executor_wait=0, state=state)
    want = _tables(plain)
    assert any("CORRUPT_CHUNK" in e for e in want["errors"])  # the generated faults
    assert _tables(first) == want
    read = sum(r["bytes_read"] for r in first.volumes.collect())
    assert read > 0
    # a database per volume, private, none of them inside a volume
    st = os.lstat(state["dir"])
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    dbs = sorted(Path(state["dir"]).glob(f"volume-*/{DB_NAME}"))
    assert len(dbs) == len(inv.hosts[0].volumes)
    t1 = time.time()
    second = scan_datanodes(spark, inv, executor_wait=0, state={**state, "max_age": 7 * 86400.0})
    assert sum(r["bytes_read"] for r in second.volumes.collect()) == 0
    assert {r["status"] for r in second.volumes.collect()} == {"SCANNED"}
    assert _tables(second) == want  # findings and chunks as the read wrote them
    _check_volume_figures(first, second, t0, t1)


def _check_volume_figures(first: Any, second: Any, t0: float, t1: float) -> None:
    """The periodic validator's per-volume figures in the volumes table and the report: the
    first pass read every replica (its own verification times), the second none (the first's
    times and bytes carried, no rate)."""
    from spark_udfs.jobs.report import verification_age, verification_age_lines

    one = {r["volume"]: r.asDict() for r in first.volumes.collect()}
    two = {r["volume"]: r.asDict() for r in second.volumes.collect()}
    assert one.keys() == two.keys()
    for vol, a in one.items():
        b = two[vol]
        assert 0 < a["replicas_read"] <= a["replicas"], a
        assert a["bytes_total"] == a["bytes_read"] > 0 and a["read_seconds"] > 0, a
        assert t0 <= a["oldest_verified_at"] <= t1, a
        # none read again but a replica no record vouches for (one whose metadata a fault
        # took: nothing of its data could be read, so it was never recorded as verified)
        assert b["replicas_read"] < a["replicas_read"] and b["bytes_read"] == 0, (a, b)
        assert b["bytes_total"] == a["bytes_total"], (a, b)
        assert abs(b["oldest_verified_at"] - a["oldest_verified_at"]) < 1e-3, (a, b)
    now = t1 + 3600.0
    age = verification_age(second.volumes, now=now)
    assert age["volumes_with_figures"] == len(one)
    assert age["replicas_read"] == sum(b["replicas_read"] for b in two.values())
    oldest = min(a["oldest_verified_at"] for a in one.values())
    assert abs(age["oldest_verification_age_seconds"] - (now - oldest)) < 1e-3
    assert age["longest_full_pass_seconds"] is None  # nothing read: no rate to time a pass by
    read = verification_age(first.volumes, now=now)
    slowest = max(a["bytes_total"] / (a["bytes_read"] / a["read_seconds"]) for a in one.values())
    assert abs(read["longest_full_pass_seconds"] - slowest) < 1e-6
    assert read["replicas_read"] == sum(a["replicas_read"] for a in one.values())
    text = "\n".join(verification_age_lines({"verification_age": age}))
    assert f"{age['replicas_read']} of {age['replicas']} replica(s)" in text, text
    assert "oldest verification: 1.0 h ago" in text, text


def test_state_is_refused_where_it_cannot_be_honoured(tmp_path: Path, capsys: Any) -> None:
    from crcmerkle_cli import main

    base = ["spark", "scan", os.fspath(tmp_path), "-o", os.fspath(tmp_path / "o")]
    for argv, why in [
        ([*base, "--state", "/s"], "goes with --datanodes"),
        ([*base, "--max-age", "1d"], "go with --state"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, (argv, err)


def _saved(state: Path) -> int:
    """Replicas and blocks the volumes' databases hold, read as another process would."""
    n = 0
    for db_path in state.glob(f"volume-*/{DB_NAME}"):
        try:
            db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
            try:
                n += sum(
                    db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                    for t in ("replicas", "blocks")
                )
            finally:
                db.close()
        except sqlite3.Error:
            pass
    return n


@pytest.mark.slow
def test_a_driver_killed_mid_scan_resumes_with_the_uninterrupted_findings(
    ozone: Any, tmp_path: Path
) -> None:
    root, manifest = ozone
    inv = _inventory_file(tmp_path, root, manifest)
    env = {**os.environ}

    def scan(out: str, *extra: str) -> List[str]:
        return [sys.executable, "-m", "crcmerkle_cli", "spark", "scan", "--datanodes",
                os.fspath(inv), "-o", out, *extra]  # fmt: skip

    whole = subprocess.run(scan(os.fspath(tmp_path / "whole"), "--bytes-per-second", "0"),
                           env=env, capture_output=True, text=True)  # fmt: skip
    assert whole.returncode == 1, whole.stderr[-2000:]
    state = tmp_path / "state"
    argv = ["--state", os.fspath(state), "--checkpoint-seconds", "0"]
    # paced so that the scan lasts well past the kill
    child = subprocess.Popen(
        scan(os.fspath(tmp_path / "killed"), *argv, "--bytes-per-second", "200KiB"),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    saved = 0
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and child.poll() is None:
            saved = _saved(state)
            if saved >= 4:
                break
            time.sleep(0.1)
        assert child.poll() is None, "the scan ended before it could be killed"
        os.killpg(child.pid, signal.SIGKILL)  # the driver, its JVM and the Python workers
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()
    assert saved >= 4
    again = subprocess.run(scan(os.fspath(tmp_path / "again"), *argv, "--bytes-per-second", "0"),
                           env=env, capture_output=True, text=True)  # fmt: skip
    assert again.returncode == 1, again.stderr[-2000:]
    pq = pytest.importorskip("pyarrow.parquet")

    def table(out: str, name: str) -> List[str]:
        rows = pq.read_table(os.fspath(tmp_path / out / name)).to_pylist()
        return sorted(
            json.dumps(
                {k: v for k, v in r.items() if k not in VARYING}, sort_keys=True, default=str
            )
            for r in rows
        )

    for name in ("containers", "chunks", "errors"):
        assert table("again", name) == table("whole", name), name
    read_whole = sum(
        r["bytes_read"]
        for r in pq.read_table(os.fspath(tmp_path / "whole" / "volumes")).to_pylist()
    )
    read_again = sum(
        r["bytes_read"]
        for r in pq.read_table(os.fspath(tmp_path / "again" / "volumes")).to_pylist()
    )
    assert 0 < read_again < read_whole  # only what the killed run had not saved
