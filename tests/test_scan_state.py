"""Issue 34: progress that outlives the process (`crcmerkle scan --state DIR`) and the
periodic scan (`--max-age`): a rerun after SIGKILL continues the pass and its findings are
the uninterrupted run's; a second pass within --max-age reads no data; a changed replica is
read first with its new finding; a state that cannot be trusted is refused in one line or
moved aside, never believed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("yaml")

import merkle  # noqa: E402
from merkle.cli import main  # noqa: E402
from merkle.replica.scanstate import DB_NAME, FORMAT_VERSION, parse_duration  # noqa: E402

from replica_helpers import make_cluster  # noqa: E402

#: where the merkle under test lives (a checkout, or an installed wheel): the child's path
MERKLE_HOME = str(Path(merkle.__file__).resolve().parents[1])
LAYOUTS = ("ozone", "crcmerkle")


def scan_json(capsys: Any, *argv: str) -> Tuple[int, Dict[str, Any], str]:
    capsys.readouterr()
    status = main(["scan", *argv, "--json"])
    out = capsys.readouterr()
    return status, json.loads(out.out), out.err


def findings(data: Dict[str, Any]) -> Dict[str, List[Tuple[str, Any, Any]]]:
    """{replica path: its findings' keys}: what two runs must agree on."""
    return {
        r["path"]: sorted((e["error"], e["block_id"] or 0, e["offset"] or 0) for e in r["errors"])
        for r in data["replicas"]
    }


def cluster(tmp_path: Path, layout: str, containers: int = 4) -> Path:
    out = tmp_path / "cluster"
    make_cluster(out, "bitflip=1", containers=containers, seed=7, layout=layout)
    return out


def a_block_file(root: Path, clean: Dict[str, Any]) -> Tuple[str, Path]:
    """(replica path, one of its block files) of a replica without findings."""
    for r in clean["replicas"]:
        if not r["errors"] and r["bytes_read"]:
            blocks = sorted((Path(r["path"]) / "chunks").glob("*.block"))
            if blocks:
                return r["path"], blocks[0]
    raise AssertionError("no clean replica with a block file")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_second_pass_within_max_age_reads_no_data(
    tmp_path: Path, capsys: Any, layout: str
) -> None:
    root = cluster(tmp_path, layout)
    state = str(tmp_path / "state")
    s1, first, _ = scan_json(capsys, str(root), "--state", state, "--max-age", "7d")
    assert s1 == 1 and first["summary"]["bytes_read"] > 0
    assert all(r["read"] is True and r["verified_at"] for r in first["replicas"])
    s2, second, _ = scan_json(capsys, str(root), "--state", state, "--max-age", "7d")
    assert s2 == 1  # the bit flip found by the first read still stands
    assert second["summary"]["bytes_read"] == 0
    st = second["summary"]["state"]
    assert st["read"] == 0 and st["not_read_unchanged"] == len(first["replicas"])
    assert findings(second) == findings(first)
    by_path = {r["path"]: r for r in first["replicas"]}
    for r in second["replicas"]:
        # never reported as freshly verified: not read, with the time it was read
        assert r["read"] is False and r["bytes_read"] == 0
        assert r["verified_at"] == by_path[r["path"]]["verified_at"]
    # without --max-age a completed pass is not a reason to skip: a new pass reads all
    s3, third, _ = scan_json(capsys, str(root), "--state", state)
    assert s3 == 1 and third["summary"]["bytes_read"] == first["summary"]["bytes_read"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_changed_replica_is_read_first_and_its_finding_is_new(
    tmp_path: Path, capsys: Any, layout: str
) -> None:
    root = cluster(tmp_path, layout)
    state = str(tmp_path / "state")
    _, first, _ = scan_json(capsys, str(root), "--state", state, "--max-age", "7d")
    replica, block = a_block_file(root, first)
    with open(block, "r+b") as f:  # a chunk rewritten: the file's times change
        f.seek(5)
        byte = f.read(1)
        f.seek(5)
        f.write(bytes([byte[0] ^ 0x10]))
    status, again, _ = scan_json(capsys, str(root), "--state", state, "--max-age", "7d")
    assert status == 1
    read = [r for r in again["replicas"] if r["read"]]
    assert [r["path"] for r in read] == [replica]
    assert {e["error"] for e in read[0]["errors"]} == {"CORRUPT_CHUNK"}
    assert again["summary"]["bytes_read"] == read[0]["bytes_read"] > 0


def test_due_replicas_are_read_oldest_first_after_the_changed_ones(
    tmp_path: Path, capsys: Any
) -> None:
    root = tmp_path / "c"
    make_cluster(
        root, "none", containers=3, seed=2, layout="crcmerkle", datanodes=1, volumes=1, replicas=1
    )
    state = str(tmp_path / "state")
    _, first, _ = scan_json(capsys, str(root), "--state", state)
    paths = [r["path"] for r in first["replicas"]]
    assert len(paths) == 3
    db = sqlite3.connect(os.path.join(state, DB_NAME))
    with db:  # the last replica verified longest ago, the first most recently
        for age, p in zip((100, 200, 300), paths):
            db.execute(
                "UPDATE replicas SET verified_at = ? WHERE key = ?",
                (time.time() - age, f"crcmerkle\0{p}"),
            )
    db.close()
    block = sorted((Path(paths[1]) / "chunks").glob("*.block"))[0]
    os.utime(block)  # changed: its times moved
    _, again, _ = scan_json(capsys, str(root), "--state", state, "--max-age", "10s")
    assert [r["path"] for r in again["replicas"]] == [paths[1], paths[2], paths[0]]


def _rows(state: Path, table: str) -> int:
    """Rows of one table of the state, read as another process would (0: not there yet)."""
    try:
        db = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
        try:
            return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def killed_after(argv: List[str], env: Dict[str, str], state: Path, table: str, n: int) -> int:
    """Start `crcmerkle scan ARGV`, SIGKILL it once the state's `table` holds `n` rows (it
    must still be running then), and return the rows seen."""
    child = subprocess.Popen(
        [sys.executable, "-m", "merkle", "scan", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    seen = 0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and child.poll() is None:
            seen = _rows(state, table)
            if seen >= n:
                break
            time.sleep(0.02)
        assert child.poll() is None, "the scan ended before it could be killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    return seen


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_kill_9_mid_pass_resumes_and_the_findings_are_the_uninterrupted_runs(
    tmp_path: Path, capsys: Any, layout: str
) -> None:
    root = cluster(tmp_path, layout, containers=8)
    _, whole, _ = scan_json(capsys, str(root))  # the uninterrupted run, no state
    total = whole["summary"]["bytes_read"]
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": MERKLE_HOME}
    rate = str(max(1, total // 6))  # about 6 s per volume... the kill comes long before
    recorded = killed_after(
        [str(root), "--state", str(state), "--rate", rate], env, state, "replicas", 3
    )
    assert recorded >= 3
    status, resumed, _ = scan_json(capsys, str(root), "--state", str(state))
    st = resumed["summary"]["state"]
    assert status == 1 and st["resumed_pass"] is True
    assert st["not_read_unchanged"] >= recorded
    assert findings(resumed) == findings(whole)
    # what the rerun read is exactly what the killed run had not recorded
    read_now = sum(r["bytes_read"] for r in resumed["replicas"] if r["read"])
    carried = {r["path"] for r in resumed["replicas"] if not r["read"]}
    assert read_now == sum(r["bytes_read"] for r in whole["replicas"] if r["path"] not in carried)
    assert 0 < read_now < total


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_kill_9_inside_a_large_replica_resumes_after_its_last_saved_block(
    tmp_path: Path, capsys: Any, layout: str
) -> None:
    # one container of 40 blocks, a replica on each of two datanodes: the kill lands inside one
    root = tmp_path / "cluster"
    make_cluster(
        root, "bitflip=1", containers=1, seed=11, layout=layout, datanodes=2, volumes=1,
        replicas=2, min_blocks=40, max_blocks=40,
    )  # fmt: skip
    _, whole, _ = scan_json(capsys, str(root))
    total = whole["summary"]["bytes_read"]
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": MERKLE_HOME}
    argv = [str(root), "--state", str(state), "--checkpoint-seconds", "0"]
    saved = killed_after([*argv, "--rate", str(max(1, total // 8))], env, state, "blocks", 5)
    assert saved >= 5
    status, resumed, _ = scan_json(capsys, *argv)
    st = resumed["summary"]["state"]
    assert status == 1 and st["resumed_pass"] is True
    assert st["resumed_blocks"] >= saved
    assert findings(resumed) == findings(whole)
    # the replica in flight was read from after its last saved block, not from its first
    in_flight = [r for r in resumed["replicas"] if r.get("resumed_bytes")]
    assert len(in_flight) == 1 and in_flight[0]["read"] is True
    by_path = {r["path"]: r for r in whole["replicas"]}
    r = in_flight[0]
    assert r["bytes_read"] + r["resumed_bytes"] == by_path[r["path"]]["bytes_read"]
    assert r["data_checksum"] == by_path[r["path"]]["data_checksum"]
    read_now = sum(x["bytes_read"] for x in resumed["replicas"] if x["read"])
    assert read_now == total - r["resumed_bytes"] - sum(
        by_path[x["path"]]["bytes_read"] for x in resumed["replicas"] if not x["read"]
    )
    assert _rows(state, "blocks") == 0  # the replica's record replaced its blocks
    # and a third run carries the replica whole, with the size of all its blocks
    _, third, _ = scan_json(capsys, *argv, "--max-age", "1d")
    assert third["summary"]["bytes_read"] == 0 and findings(third) == findings(whole)


def test_a_state_that_cannot_be_trusted_is_refused_in_one_line(tmp_path: Path, capsys: Any) -> None:
    root = cluster(tmp_path, "crcmerkle", containers=2)

    def refused(state: Path, *extra: str) -> str:
        capsys.readouterr()
        assert main(["scan", str(root), "--state", str(state), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        return err

    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert "symbolic link" in refused(link)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert "writable by others" in refused(shared)
    assert "inside the scanned path" in refused(root / "state")
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    (planted / DB_NAME).symlink_to(tmp_path / "elsewhere.sqlite")
    assert "symbolic link" in refused(planted)
    assert not (tmp_path / "elsewhere.sqlite").exists()
    capsys.readouterr()
    assert main(["scan", str(root), "--max-age", "1d"]) == 2
    assert "--max-age goes with --state" in capsys.readouterr().err
    assert "not with --trees-only" in refused(real, "--trees-only")


def test_a_newer_state_is_left_alone_and_a_corrupt_one_moved_aside(
    tmp_path: Path, capsys: Any
) -> None:
    root = cluster(tmp_path, "crcmerkle", containers=2)
    state = tmp_path / "state"
    assert main(["scan", str(root), "--state", str(state)]) == 1
    db_file = state / DB_NAME
    db = sqlite3.connect(db_file)
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(FORMAT_VERSION + 1),))
    db.close()
    before = db_file.read_bytes()
    capsys.readouterr()
    assert main(["scan", str(root), "--state", str(state)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "newer crcmerkle" in err
    assert db_file.read_bytes() == before  # not read, not changed
    for p in state.iterdir():
        p.unlink()
    db_file.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)  # a torn, unreadable file
    capsys.readouterr()
    status, data, err = scan_json(capsys, str(root), "--state", str(state))
    assert status == 1 and "starting afresh" in err and err.count("\n") == 1
    assert data["summary"]["state"]["read"] == len(data["replicas"]) > 0
    aside = [p for p in state.iterdir() if ".unusable-" in p.name]
    assert aside and aside[0].read_bytes().startswith(b"SQLite format 3")


def test_a_record_that_does_not_parse_or_match_is_read_again(tmp_path: Path, capsys: Any) -> None:
    root = cluster(tmp_path, "crcmerkle", containers=2)
    state = str(tmp_path / "state")
    _, first, _ = scan_json(capsys, str(root), "--state", state, "--max-age", "7d")
    paths = [r["path"] for r in first["replicas"]]
    db = sqlite3.connect(os.path.join(state, DB_NAME))
    with db:
        db.execute(
            "UPDATE replicas SET record = 'not json' WHERE key = ?", (f"crcmerkle\0{paths[0]}",)
        )
        db.execute("UPDATE replicas SET identity = 'x' WHERE key = ?", (f"crcmerkle\0{paths[1]}",))
    db.close()
    _, again, _ = scan_json(capsys, str(root), "--state", state, "--max-age", "7d")
    assert {r["path"] for r in again["replicas"] if r["read"]} == set(paths[:2])
    assert findings(again) == findings(first)


def test_the_state_is_private(tmp_path: Path) -> None:
    root = cluster(tmp_path, "crcmerkle", containers=1)
    state = tmp_path / "new"
    old = os.umask(0)
    try:
        assert main(["scan", str(root), "--state", str(state)]) in (0, 1)
    finally:
        os.umask(old)
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / DB_NAME).stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "text, seconds",
    [("7d", 7 * 86400), ("12h", 43200), ("30m", 1800), ("90s", 90), ("2w", 14 * 86400), ("45", 45)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "0", "-1d", "7x", "nan", "inf"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


Samples = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


def per_volume(samples: Samples, name: str, **labels: str) -> Dict[str, float]:
    """{volume: value} of the samples of metric `name` with `labels`."""
    return {
        dict(k)["volume"]: v
        for (n, k), v in samples.items()
        if n == name and all(dict(k).get(a) == b for a, b in labels.items())
    }


def test_the_metrics_file_holds_the_runs_own_figures(tmp_path: Path, capsys: Any) -> None:
    """Parsed back with prometheus_client's own parser; every figure against the JSON."""
    parser = pytest.importorskip("prometheus_client.parser")
    root = cluster(tmp_path, "crcmerkle", containers=3)
    state, prom = str(tmp_path / "state"), tmp_path / "node" / "crcmerkle.prom"
    prom.parent.mkdir()
    argv = [str(root), "--state", state, "--max-age", "7d", "--metrics-file", str(prom)]
    for run in (1, 2):
        status, data, _ = scan_json(capsys, *argv)
        assert status == 1
        samples: Samples = {}
        for family in parser.text_string_to_metric_families(prom.read_text()):
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

        read = per_volume(samples, "crcmerkle_scan_replicas", read="true")
        carried = per_volume(samples, "crcmerkle_scan_replicas", read="false")
        st = data["summary"]["state"]
        assert (
            sum(read.values()) == st["read"] and sum(carried.values()) == st["not_read_unchanged"]
        )
        assert len(read) == 6  # 3 datanodes x 2 volumes
        assert (
            sum(per_volume(samples, "crcmerkle_scan_bytes_read").values())
            == data["summary"]["bytes_read"]
        )
        kinds: Dict[Tuple[str, str], int] = {}
        for r in data["replicas"]:
            for e in r["errors"]:
                kinds[(e["error"], e["severity"])] = kinds.get((e["error"], e["severity"]), 0) + 1
        found = {
            (dict(k)["kind"], dict(k)["level"]): v
            for (n, k), v in samples.items()
            if n == "crcmerkle_scan_findings"
        }
        assert found == kinds and kinds  # the bit flip, carried on the second run
        assert samples[("crcmerkle_scan_read_errors", ())] == len(data["failed"]) == 0
        assert samples[("crcmerkle_scan_max_age_seconds", ())] == 7 * 86400
        ages = per_volume(samples, "crcmerkle_scan_oldest_verification_age_seconds")
        assert len(ages) == 6 and all(0 <= a < 600 for a in ages.values())
        passes = per_volume(samples, "crcmerkle_scan_full_pass_seconds")
        if run == 1:
            assert len(passes) == 6 and all(p > 0 for p in passes.values())
        else:  # nothing read: no rate, no estimate
            assert passes == {} and data["summary"]["bytes_read"] == 0
    assert [p.name for p in prom.parent.iterdir()] == ["crcmerkle.prom"]  # no temporary left


def test_the_metrics_file_is_never_written_through_a_link(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("prometheus_client")
    root = cluster(tmp_path, "crcmerkle", containers=1)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "m.prom"
    link.symlink_to(victim)
    capsys.readouterr()
    argv = ["scan", str(root), "--state", str(tmp_path / "s"), "--metrics-file", str(link)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--metrics-file" in err
    assert victim.read_text() == "keep\n" and link.is_symlink()
    capsys.readouterr()
    assert main(["scan", str(root), "--metrics-file", str(tmp_path / "x.prom")]) == 2
    assert "--metrics-file goes with --state" in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _recorded(state: Path) -> int:
    if not (state / DB_NAME).exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
        try:
            return int(db.execute("SELECT COUNT(*) FROM replicas").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def _wait(what: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_loop_stops_on_sigterm_with_its_state_saved_and_the_next_start_resumes(
    tmp_path: Path, capsys: Any
) -> None:
    """`--loop` as a process: scraped over HTTP mid-pass (a real client, the library's
    parser), SIGTERM mid-read exits 0 with the metrics file written, the next start resumes."""
    pytest.importorskip("prometheus_client.parser")

    root = cluster(tmp_path, "crcmerkle", containers=8)
    _, whole, _ = scan_json(capsys, str(root))
    total = whole["summary"]["bytes_read"]
    state, prom, port = tmp_path / "state", tmp_path / "m.prom", _free_port()
    argv = [sys.executable, "-m", "merkle", "scan", str(root), "--state", str(state)]
    argv += ["--max-age", "1h", "--loop", "--rate", str(max(1, total // 30))]  # ~5 s a volume
    argv += ["--metrics-port", str(port), "--metrics-file", str(prom)]
    out, err = open(tmp_path / "out", "w"), open(tmp_path / "err", "w")
    child = subprocess.Popen(
        argv, stdout=out, stderr=err, env={**os.environ, "PYTHONPATH": MERKLE_HOME}
    )
    try:
        _wait(lambda: _recorded(state) >= 3 or child.poll() is not None)
        assert child.poll() is None
        samples = _scrape(port)
        assert samples[("crcmerkle_scan_max_age_seconds", ())] == 3600
        assert sum(per_volume(samples, "crcmerkle_scan_bytes_read").values()) > 0
        assert sum(per_volume(samples, "crcmerkle_scan_replicas", read="true").values()) >= 3
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait()
        out.close()
        err.close()
    assert "stopped; the state is saved" in (tmp_path / "err").read_text()
    assert "crcmerkle_scan_bytes_read" in prom.read_text()
    recorded = _recorded(state)
    status, resumed, _ = scan_json(capsys, str(root), "--state", str(state), "--max-age", "1h")
    st = resumed["summary"]["state"]
    assert status == 1 and st["resumed_pass"] is True and st["not_read_unchanged"] == recorded
    assert findings(resumed) == findings(whole)
    assert 0 < resumed["summary"]["bytes_read"] < total


def test_the_loop_reads_again_what_falls_due(tmp_path: Path) -> None:
    root = cluster(tmp_path, "crcmerkle", containers=2)
    state = tmp_path / "state"
    argv = [sys.executable, "-m", "merkle", "scan", str(root), "--state", str(state)]
    argv += ["--max-age", "1s", "--loop"]
    out_file = tmp_path / "out"
    with open(out_file, "w") as out:
        child = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": MERKLE_HOME},
        )
        try:
            _wait(lambda: out_file.read_text().count("pass done") >= 2 or child.poll() is not None)
            assert child.poll() is None
            child.send_signal(signal.SIGTERM)
            assert child.wait(timeout=60) == 0
        finally:
            child.kill()
            child.wait()
    done = [line for line in out_file.read_text().splitlines() if line.startswith("pass done")]
    # every replica due again after a second: each pass reads all six
    assert all(line.startswith("pass done: 6 replicas read") for line in done[:2]), done


def test_metrics_without_prometheus_client_are_one_line(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = cluster(tmp_path, "crcmerkle", containers=1)
    s = str(tmp_path / "s")
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails, as uninstalled
    for argv in (
        [str(root), "--state", s, "--metrics-file", s + ".prom"],
        [str(root), "--state", s, "--max-age", "1d", "--loop", "--metrics-port", "9"],
    ):
        capsys.readouterr()
        assert main(["scan", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pip install 'crcmerkle[metrics]'" in err, err
    assert not Path(s).exists()  # refused before any work


def test_loop_options_are_refused_without_what_they_need(tmp_path: Path, capsys: Any) -> None:
    root = cluster(tmp_path, "crcmerkle", containers=1)
    s = str(tmp_path / "s")
    for argv, why in [
        ([str(root), "--loop"], "--loop goes with --state"),
        ([str(root), "--state", s, "--loop"], "--loop goes with --state"),
        ([str(root), "--state", s, "--max-age", "1d", "--loop", "--json"], "not with --json"),
        ([str(root), "--state", s, "--metrics-port", "9999"], "give --loop"),
        (
            [str(root), "--state", s, "--metrics-file", s + ".prom", "--emit", s + "-out"],
            "--metrics-file is not written by --emit",
        ),  # fmt: skip
        ([str(root), "--checkpoint-seconds", "0"], "goes with --state"),
        ([str(root), "--state", s, "--checkpoint-seconds", "-1"], "not 0 or a positive"),
    ]:
        capsys.readouterr()
        assert main(["scan", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, (argv, err)


def test_a_saved_block_that_does_not_parse_is_read_again() -> None:
    from merkle.replica.verify import BlockObservation, block_from_record, block_record

    ob = BlockObservation(7, True, bytes_read=4096)
    d = block_record(ob)
    assert block_from_record(json.loads(json.dumps(d))) == ob
    for bad in (None, [], {}, {**d, "chunks": [[0, "4096", 1, True]]}, {**d, "chunks": [[0]]},
                {**d, "errors": [{}]}, {**d, "block_id": "x"}):  # fmt: skip
        assert block_from_record(bad) is None, bad


def _volume_figures(out: Path) -> Dict[str, Dict[str, Any]]:
    """The emitted volumes' periodic-validator figures, by volume."""
    pq = pytest.importorskip("pyarrow.parquet")
    keys = ("replicas_read", "bytes_total", "oldest_verified_at")
    rows = pq.read_table(str(out / "volumes")).to_pylist()
    return {r["volume"]: {k: r[k] for k in keys} for r in rows}


def _emitted(out: Path) -> Dict[str, List[str]]:
    """Every emitted table's rows, sorted, without what a run's reading changes (the bytes
    it read, its seconds, the volumes' count of replicas read and when the oldest was:
    _volume_figures checks those)."""
    pq = pytest.importorskip("pyarrow.parquet")
    tables: Dict[str, List[str]] = {}
    for name in ("chunks", "blocks", "containers", "errors", "volumes"):
        rows = pq.read_table(str(out / name)).to_pylist()
        for r in rows:
            for k in ("bytes_read", "seconds", "replicas_read", "read_seconds"):
                r.pop(k, None)
            r.pop("oldest_verified_at", None)
        tables[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return tables


@pytest.mark.parametrize("layout", LAYOUTS)
def test_emit_with_state_writes_the_same_tables_from_the_records_without_reading(
    tmp_path: Path, capsys: Any, layout: str
) -> None:
    pytest.importorskip("pyarrow")
    root = cluster(tmp_path, layout)
    state = str(tmp_path / "state")
    out = tmp_path / "out"
    argv = [str(root), "--emit", str(out), "--host", "h0", "--state", state, "--max-age", "7d"]
    s1, first, _ = scan_json(capsys, *argv)
    assert s1 == 1 and first["summary"]["bytes_read"] > 0
    tables = _emitted(out)
    assert any('"CORRUPT_CHUNK"' in e for e in tables["errors"])  # the bit flip, emitted
    figures = _volume_figures(out)
    assert all(f["replicas_read"] > 0 and f["oldest_verified_at"] for f in figures.values())
    s2, second, _ = scan_json(capsys, *argv)
    assert s2 == 1 and second["summary"]["bytes_read"] == 0
    assert second["summary"]["state"]["not_read_unchanged"] == second["summary"]["replicas"]
    assert _emitted(out) == tables  # chunks and findings as the read wrote them
    # the volumes' figures: nothing read, the first run's data and verification times carried
    again = _volume_figures(out)
    assert again.keys() == figures.keys()
    for vol, f in figures.items():
        g = again[vol]
        assert g["replicas_read"] == 0 and g["bytes_total"] == f["bytes_total"], (f, g)
        assert abs(g["oldest_verified_at"] - f["oldest_verified_at"]) < 1e-3, (f, g)
    # a record that cannot give the trees (an older record: no "scanned") is read again
    db = sqlite3.connect(str(Path(state) / DB_NAME))
    key, text = db.execute("SELECT key, record FROM replicas LIMIT 1").fetchone()
    rec = json.loads(text)
    rec.pop("scanned")
    with db:
        db.execute("UPDATE replicas SET record = ? WHERE key = ?", (json.dumps(rec), key))
    db.close()
    _, third, _ = scan_json(capsys, *argv)
    assert third["summary"]["state"]["recorded"] == 1 and third["summary"]["bytes_read"] > 0
    assert _emitted(out) == tables


def _scrape(port: int) -> Samples:
    import urllib.request

    parser = pytest.importorskip("prometheus_client.parser")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    samples: Samples = {}
    for family in parser.text_string_to_metric_families(text):
        for x in family.samples:
            samples[(x.name, tuple(sorted(x.labels.items())))] = x.value
    return samples


def _loop_child(argv: List[str], out: Path) -> subprocess.Popen[bytes]:
    with open(out, "w") as f:
        return subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": MERKLE_HOME}
        )


def _stop(child: subprocess.Popen[bytes]) -> int:
    try:
        child.send_signal(signal.SIGTERM)
        return child.wait(timeout=60)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_loop_emits_each_pass_and_a_restart_emits_the_same_without_reading(
    tmp_path: Path, capsys: Any, layout: str
) -> None:
    """`--loop --emit URI` as a process: each volume's tables written as its pass completes,
    the same tables a one-shot --emit writes; the metrics scraped mid-service count the
    one-shot's findings; SIGTERM exits 0; a restart within --max-age reads no data and
    writes the same tables again (each replica's rows from its record)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("prometheus_client")
    root = cluster(tmp_path, layout)
    ref = tmp_path / "ref"
    status, once, _ = scan_json(capsys, str(root), "--emit", str(ref), "--host", "h0")
    assert status == 1
    want = _emitted(ref)
    kinds: Dict[str, int] = {}
    for e in (json.loads(x) for x in want["errors"]):
        kinds[e["error"]] = kinds.get(e["error"], 0) + 1
    assert "CORRUPT_CHUNK" in kinds
    state, out, port = tmp_path / "state", tmp_path / "out", _free_port()
    argv = [sys.executable, "-m", "merkle", "scan", str(root), "--state", str(state)]
    argv += ["--max-age", "1h", "--loop", "--emit", str(out), "--host", "h0"]
    argv += ["--metrics-port", str(port)]
    for run in (1, 2):
        log = tmp_path / f"log{run}"
        child = _loop_child(argv, log)
        try:
            _wait(lambda g=log, c=child: "pass done" in g.read_text() or c.poll() is not None)
            assert child.poll() is None, log.read_text()
            samples = _scrape(port)
        finally:
            assert _stop(child) == 0
        text = log.read_text()
        assert "stopped; the state is saved" in text
        assert _emitted(out) == want, text
        replicas = once["summary"]["replicas"]
        read = replicas if run == 1 else 0
        assert f"pass done: {read} replicas read" in text, text
        assert f"emitted {replicas} replicas of " in text and "as host h0" in text, text
        got = {
            dict(k[1])["kind"]: v
            for k, v in samples.items()
            if k[0] == "crcmerkle_scan_findings" and v
        }
        assert got == kinds, (got, kinds)
        read_bytes = sum(per_volume(samples, "crcmerkle_scan_bytes_read").values())
        assert read_bytes == (once["summary"]["bytes_read"] if run == 1 else 0)
    assert not list(out.rglob("*.tmp"))


def test_a_loop_stopped_mid_pass_leaves_no_half_written_volume_and_resumes(
    tmp_path: Path, capsys: Any
) -> None:
    """SIGTERM mid-pass with --emit: the volumes that completed are written, the others not
    (no temporary file left), and the next start reads only what the first did not record,
    then writes every volume's tables as a one-shot --emit does."""
    pytest.importorskip("pyarrow")
    root = cluster(tmp_path, "crcmerkle", containers=8)
    ref = tmp_path / "ref"
    _, once, _ = scan_json(capsys, str(root), "--emit", str(ref), "--host", "h0")
    want, total = _emitted(ref), once["summary"]["bytes_read"]
    state, out = tmp_path / "state", tmp_path / "out"
    argv = [sys.executable, "-m", "merkle", "scan", str(root), "--state", str(state)]
    argv += ["--max-age", "1h", "--loop", "--emit", str(out), "--host", "h0"]
    log = tmp_path / "log1"
    child = _loop_child(argv + ["--rate", str(max(1, total // 30))], log)  # ~5 s a volume
    try:
        _wait(lambda: _recorded(state) >= 3 or child.poll() is not None)
        assert child.poll() is None, log.read_text()
    finally:
        assert _stop(child) == 0
    assert "pass done" not in log.read_text()
    assert not list(out.rglob("*.tmp")) and not list(out.rglob(".*"))
    recorded = _recorded(state)
    assert 3 <= recorded < once["summary"]["replicas"]
    log = tmp_path / "log2"
    child = _loop_child(argv, log)
    try:
        _wait(lambda: "pass done" in log.read_text() or child.poll() is not None)
        assert child.poll() is None, log.read_text()
    finally:
        assert _stop(child) == 0
    text = log.read_text()
    assert f"pass done: {once['summary']['replicas'] - recorded} replicas read" in text, text
    assert _emitted(out) == want


def _first_verified(state: Path) -> str:
    """The replica path the state says was verified first (a pass's oldest: read first by
    the next pass)."""
    db = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
    try:
        (key,) = db.execute("SELECT key FROM replicas ORDER BY verified_at LIMIT 1").fetchone()
    finally:
        db.close()
    return str(key).rsplit("\0", 1)[-1]


def _emitted_now(out: Path) -> Tuple[int, List[str]]:
    """(rows of the emitted containers table, the errors table's kinds and replicas)."""
    pq = pytest.importorskip("pyarrow.parquet")
    containers = pq.read_table(str(out / "containers")).num_rows
    errors = pq.read_table(str(out / "errors")).to_pylist()
    return containers, sorted(f"{e['error']} {e['replica']}" for e in errors)


def test_the_loop_writes_a_finding_to_uri_mid_pass_with_every_volume_whole(
    tmp_path: Path, capsys: Any
) -> None:
    """--emit-every: a finding of the pass in progress is in URI long before the pass ends,
    and at every moment URI holds every replica (those not read yet with the rows of the
    pass before): a reader never sees a volume in part."""
    pytest.importorskip("pyarrow")
    root = cluster(tmp_path, "crcmerkle", containers=8)
    _, once, _ = scan_json(capsys, str(root))
    total, replicas = once["summary"]["bytes_read"], once["summary"]["replicas"]
    state, out = tmp_path / "state", tmp_path / "out"
    argv = [sys.executable, "-m", "merkle", "scan", str(root), "--state", str(state)]
    # every replica due again at once: each pass reads all, a volume's pass ~8 s
    argv += ["--max-age", "1s", "--loop", "--emit", str(out), "--host", "h0", "--no-write"]
    argv += ["--emit-every", "1s", "--rate", str(max(1, total // 48))]
    log = tmp_path / "log"
    child = _loop_child(argv, log)
    try:
        _wait(lambda: "pass done" in log.read_text() or child.poll() is not None)
        assert child.poll() is None, log.read_text()
        count, before = _emitted_now(out)
        assert count == replicas
        # bit rot in the replica the next pass reads first (changed or oldest verified)
        victim = _first_verified(state)
        block = sorted((Path(victim) / "chunks").glob("*.block"))[0]
        with open(block, "r+b") as f:
            f.seek(100)
            byte = f.read(1)
            f.seek(100)
            f.write(bytes([byte[0] ^ 0x10]))
        volume = os.path.dirname(victim) + os.sep
        in_volume = sum(1 for r in once["replicas"] if r["path"].startswith(volume))
        seen: List[Tuple[int, List[str], int]] = []

        def found() -> bool:
            count, errors = _emitted_now(out)
            # the victim's volume's replicas this pass has printed (read) so far
            text = log.read_text()
            done = text.split("pass done", 1)[1] if "pass done" in text else ""
            read = sum(1 for line in done.splitlines() if f" {volume}" in line)
            seen.append((count, errors, read))
            return any(victim in e for e in errors) or child.poll() is not None

        _wait(found)
        assert child.poll() is None, log.read_text()
        count, errors, read = seen[-1]
        assert read < in_volume, "written only when its volume's pass ended"
        assert f"CORRUPT_CHUNK {victim}" in errors
        assert set(before) <= set(errors)  # the replicas not read yet: the pass before's rows
        assert all(c == replicas for c, _, _ in seen), seen  # whole at every look
    finally:
        assert _stop(child) == 0
    assert not list(out.rglob("*.tmp")) and not list(out.rglob(".*"))
