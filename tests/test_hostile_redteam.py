"""Red-team pass over issues 23 and 28 as merged: the same classes of attack against verbs and
code paths the issue did not name. Each test failed before its fix.

  reconcile   a root-only peer's data is never handed to a replica another user owns (as
              replicate already refuses): the peer is skipped, the others still serve
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_hostile import CID, IS_ROOT, block, child, make_replica, payload


def _private(rep: Path) -> None:
    for p in [rep, *rep.rglob("*")]:
        os.chmod(p, 0o700 if p.is_dir() else 0o600)


def _give(rep: Path, uid: int) -> None:
    for p in [rep.parent, rep, *rep.rglob("*")]:
        os.chown(p, uid, uid)


@pytest.mark.skipif(not IS_ROOT, reason="giving a replica to another user needs root")
def test_reconcile_never_hands_a_root_only_peer_to_another_user(tmp_path: Path) -> None:
    reps = [
        make_replica(tmp_path / f"dn{i}" / "vol" / str(CID), {1: payload(1), 2: payload(2)})
        for i in range(3)
    ]
    block(reps[0], 2).unlink()
    for r in reps[1:]:
        _private(r)
    _give(reps[0], 4242)
    r = child("reconcile", reps[0], *reps[1:])
    assert not block(reps[0], 2).exists(), "root-only data was copied into uid 4242's replica"
    # every peer refused: the work could not be done (2), and the reason is printed
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "another user" in r.stdout and "Traceback" not in r.stderr
    # a peer of the same owner still serves: the repair is refused only across owners
    _give(reps[2], 4242)
    r = child("reconcile", reps[0], *reps[1:])
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert block(reps[0], 2).read_bytes() == payload(2)
    # and root's own replica may be repaired from anyone's (what root creates stays root's)
    block(reps[0], 2).unlink()
    _give(reps[0], 0)
    assert child("reconcile", reps[0], *reps[1:]).returncode == 0


# ---- generate: OUT prepared by someone else ----------------------------------------------------


def _generate(out: Path) -> subprocess.CompletedProcess[str]:
    return child(
        "generate",
        out,
        "--layout",
        "crcmerkle",
        "--datanode-count",
        "1",
        "--volumes",
        "1",
        "--containers",
        "1",
        "--replicas",
        "1",
        "--faults",
        "none",
        "--blocks",
        "1",
        "--block-size",
        "4KiB",
        "--chunk-size",
        "4KiB",
        "--bytes-per-checksum",
        "1KiB",
    )


@pytest.mark.parametrize("planted", [".crcmerkle-generate", "manifest.json"])
def test_generate_never_writes_through_a_planted_link(tmp_path: Path, planted: str) -> None:
    """An OUT another user prepared, its marker (or manifest) a link to a root-only file:
    the file is never overwritten (the link is replaced or refused, one line)."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".crcmerkle-generate").write_text("an earlier run\n")
    (out / planted).unlink(missing_ok=True)
    (out / planted).symlink_to(victim)
    r = _generate(out)
    assert victim.read_text() == "precious\n"
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 0:
        assert not (out / planted).is_symlink()
    else:
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr


# ---- secrets in URIs: not only the error line ---------------------------------------------------

SECRET_URI = "s3://AKIAEXAMPLE:se/cr+etKEY@bucket/dn2/vol/7"


@pytest.mark.parametrize(
    "verb",
    [["reconcile"], ["reconcile", "--json"], ["scan", "--json"], ["scan"], ["replicate", "--json"]],
)
def test_a_secret_in_a_uri_is_printed_nowhere(tmp_path: Path, verb: list) -> None:
    """A URI with an unencoded secret given where a local path is expected: the error line
    was redacted (issue 23 item 7), but the text lines and the JSON printed it in full."""
    reps = [make_replica(tmp_path / f"dn{i}" / "vol" / str(CID), {1: payload(1)}) for i in range(2)]
    args = {
        "reconcile": [reps[0], reps[1], SECRET_URI],
        "scan": [reps[0], SECRET_URI],
        "replicate": [SECRET_URI, tmp_path / "dn3" / "vol" / str(CID)],
    }[verb[0]]
    r = child(*verb, *args)
    assert r.returncode in (0, 2), (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    for secret in ("se/cr", "cr+et", "etKEY"):
        assert secret not in r.stdout + r.stderr, r.stdout + r.stderr


# ---- tree build: a table that is not what it should be ----------------------------------------


@pytest.mark.parametrize(
    "body, words",
    [
        (b"block_id,offset,length,checksums\n1,0,10\n", "row 1"),  # a truncated row
        (b"block_id,offset,length,checksums\n1,0,10,,junk\n", "row 1"),  # a field too many
        (b"block_id,offset,length,checksums\n1,0,10,\xff\xfe\n", "UTF-8"),
        (b"block_id,offset,length,checksums\n1,0,10," + b"a" * 200_000 + b"\n", "field"),
    ],
    ids=["truncated-row", "extra-field", "not-utf8", "huge-field"],
)  # short ids: the id is in
# PYTEST_CURRENT_TEST, and a 200 KB environment string makes the child's exec fail (E2BIG)
def test_tree_build_refuses_a_malformed_csv_in_one_line(
    tmp_path: Path, body: bytes, words: str
) -> None:
    """A truncated row was built as a chunk without checksums (exit 0, a silent wrong tree);
    a field too many was dropped; bad bytes or a huge field were 'unexpected' errors."""
    table = tmp_path / "t.csv"
    table.write_bytes(body)
    r = child("tree", "build", table, "-o", tmp_path / "o.tree", "--container-id", "1")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "unexpected" not in r.stderr, r.stderr
    assert str(table) in r.stderr and words in r.stderr, r.stderr
    assert not (tmp_path / "o.tree").exists()


def test_tree_build_refuses_a_bad_parquet_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    table = tmp_path / "t.parquet"
    table.write_bytes(b"x")
    r = child("tree", "build", table, "-o", tmp_path / "o.tree", "--container-id", "1")
    assert r.returncode == 2 and "unexpected" not in r.stderr, r.stderr
    assert str(table) in r.stderr


# ---- reconcile --report: roots that let anyone plant replicas ----------------------------------


def _planted_cluster(root: Path) -> list:
    reps = [
        make_replica(root / n / "vol" / str(CID), {1: payload(1), 2: payload(2)})
        for n in ("dnA", "dnB", "dnC")
    ]
    block(reps[0], 2).unlink()
    return reps


def test_a_report_whose_scanned_root_is_slash_is_refused(tmp_path: Path) -> None:
    """scanned_roots ["/"] made every directory three levels below / (/tmp/<d>/<id>,
    /var/tmp/<d>/<id>, ...: places any user can write, each a 'datanode' with a vote) a
    replica the report's commands may name."""
    from test_hostile_reports import _command, _one_line_refusal, _report

    planted = [Path("/tmp") / f"crcmerkle-redteam-{os.getpid()}-{n}" for n in "ab"]
    try:
        reps = [make_replica(d / str(CID), {1: payload(1), 2: payload(2)}) for d in planted]
        block(reps[0], 2).unlink()
        f = _report(tmp_path / "rep", [_command(reps[0], reps[1:])], [Path("/")])
        _one_line_refusal(child("reconcile", "--report", f), "'/'")
        assert not block(reps[0], 2).exists()
    finally:
        import shutil

        for d in planted:
            shutil.rmtree(d, ignore_errors=True)


def test_a_report_whose_replicas_lie_in_a_world_writable_directory_is_refused(
    tmp_path: Path,
) -> None:
    """A scanned root (or datanode or volume directory) any user may write: anyone can plant
    replicas there, and datanodes to outvote the real ones."""
    from test_hostile_reports import _command, _one_line_refusal, _report

    root = tmp_path / "cluster"
    reps = _planted_cluster(root)
    os.chmod(root / "dnB", 0o1777)
    f = _report(tmp_path / "rep", [_command(reps[0], reps[1:])], [root])
    _one_line_refusal(child("reconcile", "--report", f), "writable")
    assert not block(reps[0], 2).exists()
    os.chmod(root / "dnB", 0o755)  # the same report, the directory fixed: it runs
    assert child("reconcile", "--report", f).returncode == 0
    assert block(reps[0], 2).read_bytes() == payload(2)


# --- issue 36 item 5: every printed command is shell-quoted -------------------------------------

#: An argument a planted report or a layout could carry: unquoted, pasting the line runs `id`.
PLANTED_ARG = "h1.example; id"


def test_report_text_quotes_the_ozone_reconcile_commands() -> None:
    from spark_udfs.jobs.report import STATES, format_text

    report = {
        "generated": "now",
        "summary": {s: 0 for s in STATES},
        "containers": {s: [] for s in STATES},
        "first": 10,
        "mismatched": [],
        "unrecoverable": [],
        "pending_deletions": [],
        "ozone_reconcile": [{"containerID": 1, "argv": ["ozone", "admin", PLANTED_ARG]}],
        "repair_plan": {"total": 0, "rounds": 0, "datanode_limit": 20, "commands": []},
    }
    assert "  ozone admin 'h1.example; id'\n" in format_text(report)


def test_reconcile_prints_the_ozone_commands_quoted(capsys: pytest.CaptureFixture) -> None:
    from merkle.cli.reconcile import _print_ozone

    _print_ozone([["ozone", "admin", "container", "reconcile", PLANTED_ARG]], 1)
    assert "  ozone admin container reconcile 'h1.example; id'\n" in capsys.readouterr().out


# --- issue 36 item 12: an output onto its input is refused before anything is written ----------


@pytest.mark.parametrize("verb", ["diff", "scan", "run"])
@pytest.mark.parametrize("where", ["same", "inside", "containing", "link", "file-uri"])
def test_spark_output_over_its_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, verb: str, where: str
) -> None:
    pytest.importorskip("pyspark")
    from merkle.cli import main

    s = tmp_path / "in" / "S"
    (s / "chunks").mkdir(parents=True)
    (s / "chunks" / "part-0.parquet").write_bytes(b"PAR1 tables of a scan")
    os.symlink(s, tmp_path / "alias")
    out = {
        "same": str(s) + "/",
        "inside": str(s / "chunks" / "x"),
        "containing": str(s.parent),
        "link": str(tmp_path / "alias"),
        "file-uri": f"file://{s}",
    }[where]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["spark", verb, str(s), "-o", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the output overlaps the input" in err, err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert (s / "chunks" / "part-0.parquet").read_bytes() == b"PAR1 tables of a scan"


def test_overlaps() -> None:
    from merkle.replica.uri import overlaps

    assert overlaps("s3://b/x?endpoint_override=h:1", "s3://KEY:SECRET@b/x/y/")
    assert not overlaps("s3://b/x", "s3://b/xy") and not overlaps("s3://b/x", "gs://b/x")
    assert not overlaps("/data/S", "/data/S2") and overlaps("/data/S/", "/data/S/../S")
