"""Hostile input against the launchers (issue 23): the Spark configuration directory, the
demo's directory, secrets in URIs, numeric options, broken pipes, control characters and
early interrupts. The attacker is any local user who can write a shared directory (/tmp,
a directory prepared for the demo) or who hands root a URI, a path or a file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Tuple

import pytest

from checkout import checkout_text

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> Dict[str, str]:
    """This checkout first on the import path, no Spark configuration inherited."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYSPARK_SUBMIT_ARGS",
            "SPARK_CONF_DIR",
            "PYSPARK_GATEWAY_PORT",
            "PYSPARK_GATEWAY_SECRET",
            "MASTER",
            "CRCMERKLE_DEBUG",
        )
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


# --- issue 23 item 1: SPARK_CONF_DIR in a shared temporary directory -----------------------


def plant_spark_conf_dir(tmpdir: Path, victim: Path) -> Path:
    """What a local attacker prepares before root's first `crcmerkle spark ...`: the fixed
    directory name the old launcher used, with a spark-env.sh (which Spark's launcher
    sources) and log4j2.properties as a link to a root-only file."""
    planted = tmpdir / f"crcmerkle-spark-conf-{os.getuid()}"
    planted.mkdir(mode=0o777)
    (planted / "spark-env.sh").write_text(f"touch {planted / 'SOURCED'}\n")
    (planted / "log4j2.properties").symlink_to(victim)
    return planted


def shared_tmp_with_plant(tmp_path: Path) -> Tuple[Path, Path, Path]:
    """A shared temporary directory `tmp_path/tmp` with the plant above in it, aimed at a
    root-only file `tmp_path/root-only` (content "secret\n"): (shared, victim, planted)."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    victim = tmp_path / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    return shared, victim, plant_spark_conf_dir(shared, victim)


def test_spark_conf_dir_is_never_in_the_shared_temporary_directory(tmp_path, monkeypatch):
    """prepare_environment neither uses nor writes through a planted
    $TMPDIR/crcmerkle-spark-conf-<uid>: the quiet configuration is the package's own."""
    from spark_udfs.cluster import session

    shared, victim, planted = shared_tmp_with_plant(tmp_path)
    empty_home = tmp_path / "spark-home"
    (empty_home / "conf").mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setenv("SPARK_HOME", str(empty_home))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    session.prepare_environment(quiet=True)
    conf_dir = Path(os.environ["SPARK_CONF_DIR"]).resolve()
    assert not str(conf_dir).startswith(str(shared.resolve())), conf_dir
    assert conf_dir == session.CONF_DIR
    assert sorted(p.name for p in conf_dir.iterdir()) == ["log4j2.properties"]
    assert (conf_dir / "log4j2.properties").read_text() == session.LOG4J2
    assert victim.read_text() == "secret\n"  # no write followed the planted link
    assert sorted(p.name for p in planted.iterdir()) == ["log4j2.properties", "spark-env.sh"]


def test_packaged_spark_conf_is_shipped_in_the_wheel_and_sdist():
    """The configuration directory is package data: declared for the wheel and the sdist."""
    pyproject = checkout_text("pyproject.toml")
    assert '"conf/log4j2.properties"' in pyproject
    assert "spark_udfs/conf/log4j2.properties" in checkout_text("MANIFEST.in")


# --- issue 23 item 4: the demo's directory ---------------------------------------------------


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    return victim


def test_demo_marker_is_never_written_through_a_link(tmp_path):
    """An earlier demo's directory whose marker and entries were swapped for links: the
    links are removed, never followed; the marker is a new regular file."""
    from spark_udfs.cli.demodir import DEMO_MARKER, prepare_demo_dir

    victim = _victim(tmp_path)
    private = tmp_path / "private"
    private.mkdir()
    (private / "keep").write_text("keep\n")
    work = tmp_path / "demo"
    work.mkdir()
    (work / DEMO_MARKER).symlink_to(victim)
    (work / "cluster").symlink_to(private)  # an earlier demo's entry, now a link
    (work / "report.json").symlink_to(victim)
    assert prepare_demo_dir(str(work)) is False
    assert victim.read_text() == "secret\n"
    assert (private / "keep").read_text() == "keep\n"
    assert sorted(p.name for p in work.iterdir()) == [DEMO_MARKER]
    marker = os.lstat(work / DEMO_MARKER)
    assert stat.S_ISREG(marker.st_mode) and marker.st_nlink == 1


def test_failed_demo_cleanup_never_follows_links(tmp_path):
    from spark_udfs.cli.demodir import DEMO_MARKER, _clean_failed_demo, prepare_demo_dir

    private = tmp_path / "private"
    (private / "scan").mkdir(parents=True)
    (private / "scan" / "keep").write_text("keep\n")
    work = tmp_path / "demo"
    prepare_demo_dir(str(work))
    (work / "scan").symlink_to(private / "scan")
    (work / "cluster").mkdir()
    (work / "cluster" / "link").symlink_to(private)
    _clean_failed_demo(str(work), created=False)
    assert sorted(p.name for p in work.iterdir()) == [DEMO_MARKER]
    assert (private / "scan" / "keep").read_text() == "keep\n"
    moved = tmp_path / "moved"
    work.rename(moved)
    work.symlink_to(moved)  # the directory itself swapped for a link
    _clean_failed_demo(str(work), created=True)
    assert (moved / DEMO_MARKER).exists() and work.is_symlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_demo_refuses_a_directory_another_user_prepared(tmp_path):
    """The attack as filed: root runs the demo in a directory another user prepared, with
    the marker linked to a root-only file."""
    from merkle.cli import CLIError
    from spark_udfs.cli.demodir import DEMO_MARKER, check_demo_dir, prepare_demo_dir

    victim = _victim(tmp_path)
    work = tmp_path / "demo"
    work.mkdir()
    (work / DEMO_MARKER).symlink_to(victim)
    os.chown(work, 4242, 4242)
    os.lchown(work / DEMO_MARKER, 4242, 4242)
    with pytest.raises(CLIError, match="owned by another user"):
        check_demo_dir(str(work))
    with pytest.raises(CLIError, match="owned by another user"):
        prepare_demo_dir(str(work))
    assert victim.read_text() == "secret\n"
    alice = tmp_path / "alice"
    alice.mkdir()
    os.chown(alice, 4242, 4242)  # a new --dir inside another user's directory
    with pytest.raises(CLIError, match="another user"):
        prepare_demo_dir(str(alice / "demo"))
    assert not (alice / "demo").exists()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CLIError, match="symbolic link"):
        prepare_demo_dir(str(link))


# --- issue 23 item 7: secrets in URIs ---------------------------------------------------------

#: AWS-like secrets pasted unencoded: each holds characters that break a URI's syntax
SECRETS = [
    "wJalrXUt/nFEMI+K7MDENG@bPxRfi%CYEXAMPLE:KEY",
    "Zq/9+Xv",
    "Qr@@Tz",
    "Km%2Fqq",
    "Pw:1234/Yy",
    "/Lead+Slash",
    "Tail+Slash/",
    "Xx:80",
    "Ab%Zz@Cd/Ef+Gh:Ij",
]


def _pieces(secret: str) -> list:
    """The secret and each run of 2+ letters/digits in it: none may be shown."""
    import re

    return [secret] + [p for p in re.findall(r"[A-Za-z0-9]{2,}", secret) if p not in ("80",)]


def _uris(secret: str) -> list:
    return [
        f"s3://AKIAEXAMPLEKEYID:{secret}@bucket/dir/vol",
        f"gs://user:{secret}@bucket/dir",
        f"s3a://AKIAEXAMPLEKEYID:{secret}@bucket",
        f"s3://bucket/dir?access_key=AKIAEXAMPLEKEYID&secret_key={secret}"
        f"&endpoint_override=127.0.0.1:9000&scheme=http",
        f"s3://bucket/dir?session_token={secret}&region=eu",
        f"https://host/obj?X-Amz-Credential=AKIAEXAMPLEKEYID/{secret}"
        f"&X-Amz-Signature={secret}&X-Amz-Security-Token={secret}",
    ]


def _assert_hidden(secret: str, text: str) -> None:
    for piece in _pieces(secret):
        assert piece not in text, (piece, text)
    assert "AKIAEXAMPLEKEYID" not in text or "access_key" not in text


@pytest.mark.parametrize("secret", SECRETS)
def test_display_and_redact_never_show_a_secret_nor_fail(secret):
    from spark_udfs.uri import display, redact

    for uri in _uris(secret):
        shown = display(uri)  # raised ValueError("Port could not be cast ...: 'wJal...'")
        _assert_hidden(secret, shown)
        assert shown.startswith(uri.split("://", 1)[0] + "://")
        for message in (
            f"Cannot parse URI: '{uri}' due to syntax error",
            f"{uri}: No such file or directory",
            f'"{uri}" and {uri}, again',
        ):
            _assert_hidden(secret, redact(message))
    assert display("s3://AKIAEXAMPLEKEYID:Zq/9+Xv@bucket/dir/vol") == "s3://bucket/dir/vol"


def test_display_keeps_what_is_no_secret():
    from spark_udfs.uri import display, redact

    assert display("hdfs://nn:8020/user@x/f") == "hdfs://nn:8020/user@x/f"
    assert (
        display("s3://bucket/a/?endpoint_override=h:9000&scheme=http")
        == "s3://bucket/a?endpoint_override=h:9000&scheme=http"
    )
    assert display("/local/dir@x") == "/local/dir@x"
    assert redact("no uri here: a:b@c") == "no uri here: a:b@c"


def test_redact_cannot_fail_on_any_text():
    from hypothesis import given, settings, strategies as st

    from spark_udfs.uri import redact

    pieces = st.sampled_from(
        list("s3:/@%?&=#[]+ x'\"\\\n\udcff") + ["://", "s3://", "secret_key=", "[::1]:99999"]
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(pieces).map("".join))
    def check(text: str) -> None:
        assert isinstance(redact(text), str)

    check()


@pytest.mark.parametrize("secret", SECRETS)
def test_error_lines_never_show_a_secret(secret):
    """The error line of both command lines, and Spark's/pyarrow's one-line description."""
    import pyarrow

    from merkle.cli import error_line
    from spark_udfs.cluster.errors import describe

    for uri in _uris(secret):
        _assert_hidden(secret, error_line(f"Cannot parse URI: '{uri}'"))
        line = describe(
            pyarrow.lib.ArrowInvalid(
                f"Cannot parse URI: '{uri}' due to syntax error at character '/'"
            )
        )
        _assert_hidden(secret, line)


def test_cli_error_for_a_bad_uri_hides_the_secret(tmp_path, capsys):
    """`crcmerkle scan URI` (it reads local paths only) names the path it could not scan
    without the secret (tests/spark/test_spark_launcher.py: the Spark commands)."""
    from merkle.cli import main

    secret = SECRETS[0]
    uri = f"s3://AKIAEXAMPLEKEYID:{secret}@bucket/dir"
    assert main(["scan", "--no-progress", uri]) == 2
    err = capsys.readouterr().err
    assert err.count("crcmerkle: error:") == 1 and "s3://bucket/dir" in err
    _assert_hidden(secret, err)


# --- issue 23 item 14: numeric options ---------------------------------------------------------

_HUGE = "1" + "0" * 40
_NUMERIC_CASES = [
    (["spark", "plan", "IN", "--decommission", "dn0", "--first", "3000000000"], "--first"),
    (["spark", "plan", "IN", "--decommission", "dn0", "--min-replicas", _HUGE], "--min-replicas"),
    (["spark", "report", "IN", "--limit", "2147483648"], "--limit"),
    (["spark", "report", "IN", "--replication", "-1"], "--replication"),
    (["spark", "run", "IN", "-o", "OUT", "--min-healthy", _HUGE], "--min-healthy"),
    (["spark", "run", "IN", "-o", "OUT", "--maintenance-min", "0"], "--maintenance-min"),
    (["spark", "diff", "IN", "-o", "OUT", "--limit", _HUGE], "--limit"),
    (["spark", "demo", "--dir", "OUT", "--containers", "3000000000"], "--containers"),
    (["spark", "demo", "--dir", "OUT", "--seed", _HUGE], "--seed"),
    (["tree", "build", "--container-id", str(2**63), "-o", "OUT", "IN"], "--container-id"),
    (["tree", "build", "--container-id", "-1", "-o", "OUT", "IN"], "--container-id"),
    (["checksum", "--buffer-size", "99999999999999999999", "IN"], "--buffer-size"),
    (["checksum", "-b", "9" * 30, "IN"], "--bytes-per-checksum"),
    (["generate", "--blocks", "1-" + _HUGE, "OUT"], "--blocks"),
    (["generate", "--block-size", "1T", "OUT"], "--block-size"),
    (["generate", "--seed", _HUGE, "OUT"], "--seed"),
    (["scan", "--workers", "99999999999999", "IN"], "--workers"),
    (["scan", "--rate", "9" * 30, "IN"], "--rate"),
    (["soak", "--rounds", _HUGE], "--rounds"),
    (["bench", "--sizes", "2T"], "--sizes"),
    (["bench", "--runs", _HUGE], "--runs"),
]


@pytest.mark.parametrize(
    "argv, option", _NUMERIC_CASES, ids=[f"{a[0]}-{a[1]}-{o}" for a, o in _NUMERIC_CASES]
)
def test_every_numeric_option_is_checked_at_parse_time(tmp_path, capsys, argv, option):
    """Out of range for what it feeds (a Java int, a signed 64-bit ID, a buffer): one line
    naming the option, exit 2, before any work (no raw Spark cast error, no OverflowError)."""
    from merkle.cli import main

    argv = [str(tmp_path / a) if a in ("IN", "OUT") else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("crcmerkle: error: argument "), err
    assert option in err, err
    assert not (tmp_path / "OUT").exists()


def test_tree_build_takes_the_largest_container_id(tmp_path, capsys):
    from merkle.cli import main

    table = tmp_path / "t.csv"
    table.write_text("block_id,offset,length,checksums\n1,0,4,00000000\n")
    out = tmp_path / "t.tree"
    assert (
        main(["tree", "build", "--container-id", str(2**63 - 1), "-o", str(out), str(table)]) == 0
    )
    assert out.exists()


# --- issue 23 item 14: a closed pipe, an early Ctrl-C -------------------------------------


def _run_into_closed_pipe(args: list, cwd: Path) -> subprocess.CompletedProcess:
    """Run `python ARGS` with stdout a pipe whose reader is already gone (`| head -c0`)."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, *args],
            stdout=w,
            stderr=subprocess.PIPE,
            env=_env(),
            cwd=cwd,
            timeout=120,
            text=True,
        )
    finally:
        os.close(w)


def test_a_closed_pipe_stops_both_command_lines_quietly(tmp_path):
    """`crcmerkle ... | head -c1`: no "Broken pipe" line, no traceback, and the status a shell
    reports for a program the closed pipe stopped (141 = 128 + SIGPIPE)."""
    from merkle.cli import EXIT_BROKEN_PIPE
    from merkle.replica.generate import generate_cluster

    cluster = tmp_path / "cluster"
    generate_cluster(cluster, datanodes=1, volumes=1, containers=3, replicas=1, faults={}, seed=1)
    runs = {
        "scan text": [
            "-m",
            "merkle",
            "scan",
            "--no-write",
            "--no-progress",
            str(cluster),
            str(cluster),
        ],
        "scan json": ["-m", "merkle", "scan", "--json", "--no-write", str(cluster)],
        "help": ["-m", "merkle", "--help"],
        "spark help": ["-m", "spark_udfs", "run", "--help"],
    }
    for what, args in runs.items():
        r = _run_into_closed_pipe(args, tmp_path)
        assert (r.returncode, r.stderr) == (EXIT_BROKEN_PIPE, ""), (what, r.returncode, r.stderr)


_INTERRUPT_WHILE_IMPORTING = """
import os, signal, sys
class CtrlCDuringImport:
    # the user's Ctrl-C lands while merkle (numpy, the native extension) is being imported
    def find_spec(self, name, path=None, target=None):
        if name == "merkle":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlCDuringImport())
mode = sys.argv[1]
sys.argv = ["crcmerkle", "--version"]
if mode == "console-script":  # what pip's generated `crcmerkle` script does
    import importlib, importlib.metadata
    # the entry point as installed (pip wrote the script from it); Python 3.9 has no tomllib
    try:
        entry, = [e.value for e in importlib.metadata.distribution("crcmerkle").entry_points
                  if e.name == "crcmerkle" and e.group == "console_scripts"]
    except importlib.metadata.PackageNotFoundError:  # a checkout on the path, not installed
        import re
        entry = re.search(r'^crcmerkle = "([^"]+)"', open("pyproject.toml").read(), re.M)[1]
    module, _, func = entry.partition(":")
    sys.exit(getattr(importlib.import_module(module), func)())
import runpy
runpy.run_module("spark_udfs", run_name="__main__")
"""


@pytest.mark.parametrize("mode", ["console-script", "spark_udfs"])
def test_ctrl_c_while_importing_is_one_line_and_130(mode):
    r = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_WHILE_IMPORTING, mode],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr, r.stderr
    assert (r.returncode, r.stderr) == (130, "crcmerkle: error: interrupted\n")


# --- issue 23 item 14: tree merge keeps what it does not understand ------------------------


def _varint_bytes(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def _with_nested_unknown_field(raw: bytes, field: int = 2) -> bytes:
    """`raw` (a .tree) with an unknown varint field 15 added inside top-level field `field`
    (the container's Merkle tree message), as a newer Ozone might write."""
    from merkle.replica.protokeep import _varint

    pos, out = 0, b""
    while pos < len(raw):
        start = pos
        key, pos = _varint(raw, pos)
        if key & 7 == 0:
            _, pos = _varint(raw, pos)
            out += raw[start:pos]
            continue
        assert key & 7 == 2
        length, body_at = _varint(raw, pos)
        body, pos = raw[body_at : body_at + length], body_at + length
        if key >> 3 == field:
            body += bytes([15 << 3, 5])
            out += _varint_bytes(key) + _varint_bytes(len(body)) + body
        else:
            out += raw[start:pos]
    return out


def test_tree_merge_never_drops_fields_it_does_not_understand(tmp_path, capsys):
    from merkle.cli import main

    table = tmp_path / "t.csv"
    table.write_text("block_id,offset,length,checksums\n1,0,4,00000000\n")
    plain = tmp_path / "plain.tree"
    assert main(["tree", "build", "--container-id", "5", "-o", str(plain), str(table)]) == 0
    newer = tmp_path / "newer.tree"
    newer.write_bytes(_with_nested_unknown_field(plain.read_bytes()))
    assert main(["tree", "show", str(newer)]) == 0  # readable: only a rewrite would lose
    capsys.readouterr()
    out = tmp_path / "merged.tree"
    for stored, scanned in ((newer, plain), (plain, newer)):
        assert main(["tree", "merge", str(stored), str(scanned), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert "does not understand" in err and err.count("\n") == 1, err
        assert not out.exists()
    top_level = tmp_path / "top.tree"  # an unknown top-level field: carried, so merged
    top_level.write_bytes(plain.read_bytes() + bytes([15 << 3, 5]))
    assert main(["tree", "merge", str(top_level), str(plain), "-o", str(out)]) == 0
    assert out.read_bytes().endswith(bytes([15 << 3, 5]))


# --- issue 23 item 14: control characters in printed names ------------------------------------

FORGED = "dn0\nMISMATCHED: 0\r\x1b[2K"


def test_spark_text_report_keeps_a_forged_name_on_its_line():
    """A datanode directory named with a newline cannot add lines to the text report."""
    from spark_udfs.jobs.report import STATES, format_text

    report = {
        "generated": "now",
        "summary": {s: 1 if s == "MISMATCHED" else 0 for s in STATES},
        "containers": {s: [] for s in STATES},
        "first": 10,
        "mismatched": [
            {
                "containerID": 1,
                "replicas": [
                    {"datanode": FORGED, "dataChecksum": "0x1", "replica": f"/{FORGED}/v/1"}
                ],
            }
        ],
        "unrecoverable": [],
        "pending_deletions": [],
        "repair_plan": {"total": 0, "rounds": 0, "datanode_limit": 20, "commands": []},
    }
    text = format_text(report)
    assert "\r" not in text and "\x1b" not in text
    assert [ln for ln in text.splitlines() if ln.startswith("MISMATCHED")] == ["MISMATCHED: 1"]
    assert "dn0\\nMISMATCHED: 0\\r\\x1b[2K" in text


def test_checksum_names_are_printed_on_one_line(tmp_path, capsys, monkeypatch):
    from merkle.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a\nffffffff  1  forged").write_bytes(b"x")
    assert main(["checksum", "a\nffffffff  1  forged"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "a\\nffffffff  1  forged" in out


# --- issue 23 item 17: what a new user reads ----------------------------------------------------


def test_spark_help_lists_every_action_and_documents_run(capsys):
    from merkle.cli import main

    assert main(["spark", "--help"]) == 0
    top = capsys.readouterr().out
    assert "scan|diff|report|run|plan|copycheck|demo" in top
    assert main(["spark", "run", "--help"]) == 0
    run_help = capsys.readouterr().out.split("positional arguments:")[1]
    for option, words in (
        ("PATH ", "replica, volume, datanode"),
        ("--output OUTPUT", "output directory"),
        ("--trees-only", "stored .tree"),
    ):
        section = run_help[run_help.index(option) :][:300]
        assert words in section, (option, section)


def test_spark_demo_help_says_what_each_layout_repairs(capsys):
    from merkle.cli import main

    assert main(["spark", "demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "repair from the report and scan again" not in text  # the Ozone demo does not
    assert "With --layout crcmerkle it then repairs" in text
    assert "the repair is the datanodes' own" in text


def test_output_directories_are_printed_without_a_doubled_slash():
    from spark_udfs.cli.common import _dir_display

    assert _dir_display("scan/") + "/chunks" == "scan/chunks"
    assert _dir_display("scan//") == "scan"
    assert _dir_display("/") == "/"
    assert _dir_display("s3://K:S/x@bucket/out/") == "s3://bucket/out"
    assert _dir_display("a\nb/") == "a\\nb"


def test_ozone_scan_progress_bar_has_a_total(tmp_path, monkeypatch):
    """The Ozone layout's bar counts replicas, found at discovery (its bytes are in RocksDB)."""
    pytest.importorskip("tqdm")
    from merkle.cli import scan as scan_cli
    from merkle.replica.generate import generate_cluster

    cluster = tmp_path / "cluster"
    generate_cluster(
        cluster, datanodes=2, volumes=1, containers=3, replicas=2, faults={}, seed=1, layout="ozone"
    )
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bar = scan_cli._bar([str(cluster)], True)
    try:
        assert bar is not None and bar.total == 6 and bar.unit == "replica"
    finally:
        bar.close()


def test_golden_skip_message_points_inside_the_repository(monkeypatch):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import test_ozone_golden as golden
    finally:
        sys.path.remove(str(ROOT / "tests"))
    monkeypatch.setattr(golden, "SHARED", ROOT / "no-such-directory")
    with pytest.raises(pytest.skip.Exception) as skipped:
        golden.test_copy_matches_the_shared_original()
    reason = str(skipped.value)
    assert "tests/data/ozone-golden" in reason and "shared" not in reason.lower()


def test_docs_install_from_the_clone_and_name_pyspark_python():
    pages = [
        "README.md",
        "docs/getting-started.md",
        "docs/formats/ozone.md",
        "docs/operations/cluster.md",
        "docs/spark-udfs.md",
    ]
    for page in pages:
        assert 'pip install "crcmerkle[' not in checkout_text(page), page  # no index has it
    assert 'pip install ".[ozone]"' in checkout_text("docs/formats/ozone.md")
    udfs = checkout_text("docs/spark-udfs.md")  # the "Spark column functions (UDFs)" page
    assert "PYSPARK_PYTHON" in udfs and "No module named 'pandas'" in udfs
