"""`--state DIR` on bookies (issue 34 on BookKeeper's layout, merkle.replica.bookkeeper.state):
a second pass within --max-age reads no entry log and finds what the first found, each
finding from a record saying when its log was read; a log that changed is read again, the
others not; a scan killed (SIGKILL) mid-pass resumes, reading only the logs the killed run
had not recorded, with the uninterrupted run's findings; what a bookie scan cannot honour
is refused in one line. `--loop` on bookies as a process: scraped over HTTP, every figure
the scan's own; SIGTERM mid-read exits 0 with the state saved, and the next start resumes.
--bytes-per-second paces each ledger directory; --metrics-file holds the one-shot scan's
figures."""

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

from test_bookkeeper_generate import _generate  # noqa: E402

import merkle  # noqa: E402
from merkle.cli import main  # noqa: E402
from merkle.replica.scanstate import DB_NAME  # noqa: E402

MERKLE_HOME = str(Path(merkle.__file__).resolve().parents[1])


def _scan(capsys: Any, argv: List[str]) -> Tuple[int, Dict[str, Any]]:
    capsys.readouterr()
    status = main(["scan", *argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


def _found(doc: Dict[str, Any]) -> List[Tuple[Any, ...]]:
    """The findings two runs must agree on (without when their data was read)."""
    keys = ("error", "bookie", "ledger", "entry", "file", "offset", "detail")
    return sorted(tuple(f[k] for k in keys) for f in doc["findings"])


@pytest.fixture(scope="module", params=["db", "interleaved"])
def bookies(request: Any, tmp_path_factory: Any) -> Tuple[List[str], str]:
    out = tmp_path_factory.mktemp(f"bkstate-{request.param}") / "bk"
    manifest = _generate(out, "default", request.param)
    paths = [str(out / b) for b in manifest["bookies"]]
    return paths, str(out / manifest["metadata"]["znode_tree"])


def test_a_second_pass_within_max_age_reads_no_entry_log(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = bookies
    plain_status, plain = _scan(capsys, [*paths, "--ledger-metadata", meta])
    state = str(tmp_path / "state")
    argv = [*paths, "--ledger-metadata", meta, "--state", state, "--max-age", "7d"]
    status1, first = _scan(capsys, argv)
    status2, second = _scan(capsys, argv)
    assert plain_status == status1 == status2 == 1
    assert _found(first) == _found(second) == _found(plain)
    s1, s2 = first["summary"], second["summary"]
    assert s1["logs_read"] > 0 and s1["logs_not_read"] == 0 and s1["bytes_read"] > 0
    assert s2["logs_read"] == 0 and s2["logs_not_read"] == s1["logs_read"]
    assert s2["bytes_read"] == 0  # counted: not one byte of an entry log read
    assert s2["copies"] == s1["copies"] and s2["good_copies"] == s1["good_copies"]
    # a finding from a record says when its log was read; none of the first run's does
    assert all(f["read_at"] is None for f in first["findings"])
    carried = [f for f in second["findings"] if f["read_at"] is not None]
    assert carried and all(f["file"] and f["file"].endswith(".log") for f in carried)
    assert all(abs(f["read_at"] - time.time()) < 600 for f in carried)


def test_a_changed_log_is_read_again_and_only_it(bookies: Any, tmp_path: Path, capsys: Any) -> None:
    paths, meta = bookies
    state = str(tmp_path / "state")
    argv = [*paths, "--ledger-metadata", meta, "--state", state, "--max-age", "7d"]
    _, first = _scan(capsys, argv)
    logs = sorted(p for b in paths for p in Path(b).glob("**/current/*.log") if p.stat().st_size)
    victim = logs[0]
    st = victim.stat()
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched: changed
    _, second = _scan(capsys, argv)
    assert second["summary"]["logs_read"] == 1
    assert second["summary"]["logs_not_read"] == first["summary"]["logs_read"] - 1
    assert 0 < second["summary"]["bytes_read"] < first["summary"]["bytes_read"]
    assert _found(second) == _found(first)
    # without --max-age the finished pass counts for nothing: every log is read again
    _, third = _scan(capsys, [*paths, "--ledger-metadata", meta, "--state", state])
    assert third["summary"]["logs_not_read"] == 0
    assert third["summary"]["bytes_read"] == first["summary"]["bytes_read"]


@pytest.mark.parametrize("storage", ["db", "interleaved"])
def test_a_periodic_pass_reads_changed_logs_first_then_the_oldest_verified(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    """With --state and --max-age the logs of a storage are read by risk (issue 34): a
    changed log first, then the due ones oldest first, the fresh ones not at all; the
    findings come out in the logs' order all the same (those of a plain scan)."""
    from merkle.replica.bookkeeper import scan as bkscan

    out = tmp_path / "bk"
    args = ["generate", str(out), "--layout", "bookkeeper", "--storage", storage]
    args += ["--entries", "60-90", "--entry-size", "200-400", "--log-size", "4096", "--seed", "3"]
    assert main(args) == 0  # clean bookies whose logs rotate often: several per directory
    manifest = json.loads((out / "manifest.json").read_text())
    paths = [str(out / b) for b in manifest["bookies"]]
    meta = str(out / manifest["metadata"]["znode_tree"])
    state = tmp_path / "state"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state), "--max-age", "2d"]
    read: List[str] = []
    real = bkscan._verify_log

    def recorded(fd: int, size: int, file: str, *rest: Any, **kw: Any) -> Any:
        read.append(file)
        return real(fd, size, file, *rest, **kw)

    monkeypatch.setattr(bkscan, "_verify_log", recorded)
    _, plain = _scan(capsys, [*paths, "--ledger-metadata", meta])
    read.clear()
    _, first = _scan(capsys, argv)
    # the storage with the most logs read: its last log changed, its first two due (the
    # first the older), the rest fresh; the log-ID order would be first, second, last
    by_dir: Dict[str, List[str]] = {}
    for f in read:
        by_dir.setdefault(os.path.dirname(f), []).append(f)
    group = sorted(max(by_dir.values(), key=len), key=lambda f: int(Path(f).stem, 16))
    assert len(group) >= 3, by_dir
    older, old, changed = group[0], group[1], group[-1]
    db = sqlite3.connect(str(state / DB_NAME))
    key = {k.rsplit("\0", 1)[1]: k for (k,) in db.execute("SELECT key FROM entry_logs")}
    now = time.time()
    with db:
        for f, age in ((old, 3), (older, 5)):
            db.execute(
                "UPDATE entry_logs SET verified_at = ? WHERE key = ?", (now - age * 86400, key[f])
            )
    db.close()
    st = os.stat(changed)
    os.utime(changed, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    read.clear()
    _, second = _scan(capsys, argv)
    mine = [f for f in read if os.path.dirname(f) == os.path.dirname(changed)]
    assert mine == [changed, older, old], read
    assert second["summary"]["logs_read"] == len(read)
    keys_of = ("error", "bookie", "ledger", "entry", "file", "offset", "detail")
    assert [tuple(f[k] for k in keys_of) for f in second["findings"]] == [
        tuple(f[k] for k in keys_of) for f in plain["findings"]
    ]
    assert _found(first) == _found(plain)


def test_a_record_that_does_not_parse_is_read_again(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = bookies
    state = tmp_path / "state"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state), "--max-age", "7d"]
    _, first = _scan(capsys, argv)
    db = sqlite3.connect(state / DB_NAME)
    try:
        with db:
            db.execute("UPDATE entry_logs SET copies = x'00ff'")
    finally:
        db.close()
    _, second = _scan(capsys, argv)
    assert second["summary"]["logs_not_read"] == 0
    assert second["summary"]["bytes_read"] == first["summary"]["bytes_read"]
    assert _found(second) == _found(first)


def test_what_a_bookie_scan_cannot_honour_is_refused_in_one_line(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = bookies
    state = str(tmp_path / "state")
    for extra, why in (
        (["--loop"], "--loop goes with --state DIR and --max-age"),
        (["--checkpoint-seconds", "5"], "--checkpoint-seconds is not taken"),
        (["--also", "crc32"], "--state is not taken with --also"),
        (["--metadata-only"], "--state records verified data"),
    ):
        capsys.readouterr()
        status = main(["scan", *paths, "--ledger-metadata", meta, "--state", state, *extra])
        err = capsys.readouterr().err
        assert status == 2 and why in err and len(err.strip().splitlines()) == 1, (extra, err)
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    capsys.readouterr()
    assert main(["scan", *paths, "--ledger-metadata", meta, "--state", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err


def _recorded(state: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{state / DB_NAME}?mode=ro", uri=True)
        try:
            return int(db.execute("SELECT COUNT(*) FROM entry_logs").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


@pytest.fixture(scope="module")
def rate_bookies(tmp_path_factory: Any) -> Tuple[List[str], str]:
    """Six clean bookies of one 96 MiB entry log each: a scan long enough to be killed in."""
    from merkle.replica.bookkeeper.generate import DUMPS_DIR
    from spark_udfs.rehearsal.bookkeeper import write_rate_bookies

    root = tmp_path_factory.mktemp("bkkill")
    _, out = write_rate_bookies(root, 6, "/srv/ozone/ledgers-{volume}", 1,
                                log_bytes=96 << 20, payload=4096)  # fmt: skip
    return [str(dirs[0]) for _, _, dirs in out], str(root / DUMPS_DIR)


def _killed_mid_pass(argv: List[str], state: Path, logs: int) -> int:
    """Run `crcmerkle scan ARGV` and SIGKILL it once it has recorded 2 of its `logs` entry
    logs (polled every 5 ms: an unpaced log from the page cache takes tens of ms); the
    logs it recorded."""
    child = subprocess.Popen(
        [sys.executable, "-m", "merkle", "scan", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": MERKLE_HOME},
    )
    recorded = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None and recorded < 2:
            recorded = _recorded(state)
            time.sleep(0.005)
        assert child.poll() is None, "the scan ended before it could be killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    recorded = _recorded(state)
    assert 2 <= recorded < logs
    return recorded


def test_a_kill_9_mid_pass_resumes_with_the_uninterrupted_findings(
    rate_bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    paths, meta = rate_bookies
    _, whole = _scan(capsys, [*paths, "--ledger-metadata", meta])
    total = whole["summary"]["bytes_read"]
    state = tmp_path / "state"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state)]
    recorded = _killed_mid_pass(argv, state, len(paths))
    status, resumed = _scan(capsys, argv)
    s = resumed["summary"]
    assert status == 1 and s["resumed_pass"] is True  # the cookies name /srv/ozone: findings
    assert s["logs_not_read"] == recorded and s["logs_read"] == len(paths) - recorded
    # what the rerun read is exactly the logs the killed run had not recorded
    per_log = total // len(paths)
    assert s["bytes_read"] == per_log * (len(paths) - recorded)
    assert _found(resumed) == _found(whole)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _samples(text: str) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    from prometheus_client import parser

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
    }


def _by_label(samples: Any, name: str, **labels: str) -> Dict[str, float]:
    """{volume (or kind/level): value} of metric `name` among samples with `labels`."""
    out = {}
    for (n, ls), v in samples.items():
        d = dict(ls)
        if n == name and all(d.get(k) == want for k, want in labels.items()):
            out[d.get("volume") or f"{d.get('kind')}/{d.get('level')}"] = v
    return out


def _kinds(doc: Dict[str, Any]) -> Dict[str, float]:
    counts: Dict[str, float] = {}
    for f in doc["findings"]:
        key = f"{f['error']}/{f['severity']}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _wait(what: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _start(argv: List[str], tmp_path: Path) -> Tuple[Any, Path, Path]:
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "w") as o, open(err, "w") as e:
        child = subprocess.Popen(
            [sys.executable, "-m", "merkle", "scan", *argv],
            stdout=o,
            stderr=e,
            env={**os.environ, "PYTHONPATH": MERKLE_HOME},
        )
    return child, out, err


def _one_pass_scraped(argv: List[str], where: Path, port: int) -> Tuple[Any, Path, Path]:
    """`scan ARGV` (a --loop) started, its metrics scraped over HTTP (a real client) once its
    first pass is done, then SIGTERM: exit 0 and the state saved. (samples, stdout, stderr)."""
    import urllib.request

    child, out, err = _start(argv, where)
    try:
        _wait(lambda: "pass done" in out.read_text() or child.poll() is not None)
        assert child.poll() is None, err.read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            samples = _samples(resp.read().decode())
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait()
    assert "stopped; the state is saved" in err.read_text()
    return samples, out, err


def test_the_bookie_loop_serves_the_scans_own_figures_and_stops_on_sigterm(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    """A pass of the loop, scraped with a real HTTP client and parsed by prometheus_client:
    the findings by kind and level are the one-shot scan's, the entry logs read those a
    one-shot --state scan reads, the bytes what it read; SIGTERM while it sleeps: exit 0,
    the metrics file written, and the next start finds the pass complete and fresh."""
    pytest.importorskip("prometheus_client")

    paths, meta = bookies
    _, plain = _scan(capsys, [*paths, "--ledger-metadata", meta])
    _, counted = _scan(capsys, [*paths, "--ledger-metadata", meta, "--state", str(tmp_path / "s1")])
    state, prom, port = tmp_path / "state", tmp_path / "m.prom", _free_port()
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state), "--max-age", "7d"]
    argv += ["--loop", "--metrics-port", str(port), "--metrics-file", str(prom)]
    samples, out, err = _one_pass_scraped(argv, tmp_path, port)
    s = counted["summary"]
    assert _by_label(samples, "crcmerkle_scan_findings") == _kinds(plain)
    read = _by_label(samples, "crcmerkle_scan_replicas", read="true")
    assert sum(read.values()) == s["logs_read"] > 0
    assert sum(_by_label(samples, "crcmerkle_scan_replicas", read="false").values()) == 0
    # the volumes of the metrics are the ledger directories that hold entry logs
    dirs = {d for b in plain["bookies"].values() for d in b}
    assert set(read) <= dirs and len(read) > len(plain["bookies"])
    assert sum(_by_label(samples, "crcmerkle_scan_bytes_read").values()) == s["bytes_read"]
    assert samples[("crcmerkle_scan_read_errors", ())] == len(plain["failed"])
    assert samples[("crcmerkle_scan_max_age_seconds", ())] == 7 * 86400
    assert all(age < 600 for age in _by_label(
        samples, "crcmerkle_scan_oldest_verification_age_seconds").values())  # fmt: skip
    done = [line for line in out.read_text().splitlines() if line.startswith("pass done")]
    assert done == [
        f"pass done: {s['logs_read']} entry logs read ({s['bytes_read']} bytes), 0 not read "
        f"(unchanged, verified within --max-age), {s['errors']} errors, {s['warnings']} "
        f"warnings, 0 paths not scanned"
    ]
    # the lines of the findings are the one-shot scan's text lines
    capsys.readouterr()
    main(["scan", *paths, "--ledger-metadata", meta])
    text = capsys.readouterr().out.splitlines()
    wanted = sorted(line for line in text if line.startswith(("error: ", "warning: ")))
    got = sorted(line for line in out.read_text().splitlines()
                 if line.startswith(("error: ", "warning: ")))  # fmt: skip
    assert got == wanted
    assert _samples(prom.read_text())[("crcmerkle_scan_max_age_seconds", ())] == 7 * 86400
    status, again = _scan(capsys, argv[: argv.index("--loop")])
    assert again["summary"]["logs_read"] == 0 and again["summary"]["resumed_pass"] is False
    assert _found(again) == _found(plain)


def test_the_bookie_loop_stopped_mid_read_saves_its_state_and_the_next_start_resumes(
    rate_bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    """Two logs recorded by a one-shot scan killed with SIGKILL; the loop, at 8 MiB/s a
    ledger directory (a 96 MiB log takes 12 s), resumes that pass and gets SIGTERM while
    reading the other four: exit 0 at its next read, none of the four recorded half-read;
    the next start resumes the same pass, reads those four and finds what an uninterrupted
    scan finds."""
    paths, meta = rate_bookies
    _, whole = _scan(capsys, [*paths, "--ledger-metadata", meta])
    state = tmp_path / "state"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state), "--max-age", "7d"]
    recorded = _killed_mid_pass(argv, state, len(paths))
    loop, out, err = _start([*argv, "--loop", "--bytes-per-second", "8MiB"], tmp_path)
    try:
        time.sleep(4)  # started, the index read, some windows of the other logs read
        assert loop.poll() is None, err.read_text()
        loop.send_signal(signal.SIGTERM)
        assert loop.wait(timeout=60) == 0
    finally:
        loop.kill()
        loop.wait()
    assert "stopped; the state is saved" in err.read_text()
    assert "pass done" not in out.read_text()
    assert _recorded(state) == recorded  # a log stopped mid-read is not recorded
    status, resumed = _scan(capsys, argv)
    s = resumed["summary"]
    assert status == 1 and s["resumed_pass"] is True
    assert s["logs_not_read"] == recorded and s["logs_read"] == len(paths) - recorded
    assert _found(resumed) == _found(whole)


def test_bytes_per_second_paces_every_read_of_each_ledger_directory(
    bookies: Any, monkeypatch: Any, capsys: Any
) -> None:
    """--bytes-per-second on bookies: every byte read is granted by its ledger directory's
    own RateLimiter at the rate given (one limiter per directory: each disk at the rate)."""
    from merkle.replica import results

    grants: List[Tuple[int, float, int]] = []
    real = results.RateLimiter.acquire

    def acquire(self: Any, nbytes: int) -> None:
        grants.append((id(self), self.rate, nbytes))
        real(self, nbytes)

    monkeypatch.setattr(results.RateLimiter, "acquire", acquire)
    paths, meta = bookies
    _, doc = _scan(capsys, [*paths, "--ledger-metadata", meta, "--bytes-per-second", "1GiB"])
    assert sum(n for _, _, n in grants) == doc["summary"]["bytes_read"] > 0
    assert {rate for _, rate, _ in grants} == {float(1 << 30)}
    dirs = doc["summary"]["ledger_dirs"]
    assert 1 < len({who for who, _, _ in grants}) <= dirs


def test_the_metrics_file_of_a_bookie_scan_holds_its_own_figures(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    pytest.importorskip("prometheus_client")
    paths, meta = bookies
    prom = tmp_path / "bk.prom"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(tmp_path / "state")]
    _, first = _scan(capsys, [*argv, "--metrics-file", str(prom)])
    samples = _samples(prom.read_text())
    s = first["summary"]
    assert _by_label(samples, "crcmerkle_scan_findings") == _kinds(first)
    assert sum(_by_label(samples, "crcmerkle_scan_replicas", read="true").values()) == s[
        "logs_read"]  # fmt: skip
    assert sum(_by_label(samples, "crcmerkle_scan_bytes_read").values()) == s["bytes_read"]
    _, second = _scan(capsys, [*argv, "--max-age", "1d", "--metrics-file", str(prom)])
    samples = _samples(prom.read_text())
    assert sum(_by_label(samples, "crcmerkle_scan_replicas", read="false").values()) == s[
        "logs_read"]  # fmt: skip
    assert sum(_by_label(samples, "crcmerkle_scan_bytes_read").values()) == 0
    assert _by_label(samples, "crcmerkle_scan_findings") == _kinds(second) == _kinds(first)
    # a file that cannot be written: exit 2 after the findings, in one line
    capsys.readouterr()
    bad = str(tmp_path / "no-such-dir" / "x.prom")
    assert main(["scan", *argv, "--metrics-file", bad]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_spark_stage_paces_each_ledger_directory_at_the_rate_given(
    bookies: Any, monkeypatch: Any
) -> None:
    """`spark scan` on bookies takes --bytes-per-second (with --datanodes, live bookies, the
    datanodes' polite default): its stage function grants every byte it reads from its
    ledger directory's limiter, as the CLI does."""
    import argparse
    from types import SimpleNamespace

    import pyarrow as pa

    from merkle.cli.bookkeeper import metadata_source
    from merkle.replica import results
    from merkle.replica.bookkeeper.scan import list_bookies, scan_bookies
    from merkle.replica.politeio import DEFAULT_BYTES_PER_SECOND
    from spark_udfs.cli.bookkeeper import _rate
    from spark_udfs.jobs.bookkeeper import _storage_fn

    assert _rate(argparse.Namespace(bytes_per_second=None), True) == DEFAULT_BYTES_PER_SECOND
    assert _rate(argparse.Namespace(bytes_per_second=None), False) is None
    assert _rate(argparse.Namespace(bytes_per_second=0), True) is None
    assert _rate(argparse.Namespace(bytes_per_second=5 << 20), False) == 5 << 20

    paths, meta = bookies
    source = metadata_source(meta, None)
    grants: List[Tuple[int, int]] = []
    real = results.RateLimiter.acquire

    def acquire(self: Any, nbytes: int) -> None:
        grants.append((id(self), nbytes))
        real(self, nbytes)

    monkeypatch.setattr(results.RateLimiter, "acquire", acquire)
    storages = list_bookies(paths).storages()
    fn = _storage_fn(
        SimpleNamespace(value=storages), SimpleNamespace(value=source.ledgers),
        bytes_per_second=float(1 << 30),
    )  # fmt: skip
    ids = pa.RecordBatch.from_pydict({"id": list(range(len(storages)))})
    assert list(fn(iter([ids])))
    whole = scan_bookies(paths, source.ledgers).bytes_read
    assert sum(n for _, n in grants) == whole > 0
    assert len({who for who, _ in grants}) > 1


def _emitted_rows(out: Path) -> List[str]:
    """A host's emitted stage-1 rows, sorted, without what reading changes (seconds, CPU,
    bytes read, when a finding's data was read)."""
    pq = pytest.importorskip("pyarrow.parquet")
    rows = pq.read_table(str(out / "bookkeeper")).to_pylist()
    for r in rows:
        for k in ("seconds", "cpu_seconds", "bytes_read", "read_at"):
            r.pop(k, None)
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def test_the_bookie_loop_emits_each_pass_and_a_restart_emits_the_same_without_reading(
    bookies: Any, tmp_path: Path, capsys: Any
) -> None:
    """`--loop --emit URI` on bookies: each pass writes this host's rows, the ones a
    one-shot --emit writes, its finding lines those the rows hold; the metrics scraped
    count them; SIGTERM: exit 0; a restart within --max-age reads no entry log and writes
    the same rows (from the logs' records)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("prometheus_client")

    paths, meta = bookies
    ref = tmp_path / "ref"
    capsys.readouterr()
    assert main(
        ["scan", *paths, "--ledger-metadata", meta, "--emit", str(ref), "--host", "h0"]
    ) in (0, 1)
    want = _emitted_rows(ref)
    found = [json.loads(r) for r in want if json.loads(r)["kind"] == "FINDING"]
    kinds: Dict[str, float] = {}
    for f in found:
        kinds[f"{f['error']}/{f['severity']}"] = kinds.get(f"{f['error']}/{f['severity']}", 0) + 1
    assert kinds  # the generator's faults a host sees alone
    state, out_dir = tmp_path / "state", tmp_path / "emitted"
    argv = [*paths, "--ledger-metadata", meta, "--state", str(state), "--max-age", "7d"]
    argv += ["--loop", "--emit", str(out_dir), "--host", "h0"]
    for run in (1, 2):
        port = _free_port()
        run_dir = tmp_path / f"run{run}"
        run_dir.mkdir()
        samples, out, err = _one_pass_scraped([*argv, "--metrics-port", str(port)], run_dir, port)
        assert _emitted_rows(out_dir) == want
        assert _by_label(samples, "crcmerkle_scan_findings") == kinds
        done = [line for line in out.read_text().splitlines() if line.startswith("pass done")]
        assert len(done) == 1 and f"{len(found)} findings so far" in done[0], done
        read = sum(_by_label(samples, "crcmerkle_scan_replicas", read="true").values())
        assert (read > 0) if run == 1 else (read == 0 and "pass done: 0 entry logs read" in done[0])
        lines = [x for x in out.read_text().splitlines() if x.startswith(("error: ", "warning: "))]
        assert len(lines) == len(found)
    assert not [p for p in out_dir.rglob("*") if p.name.startswith(".")]
