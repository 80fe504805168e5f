"""One exit-status rule for every local verb: 0 clean or nothing to do, 1 findings (corruption,
mismatch, repairs pending or left undone), 2 the work could not be done (bad arguments,
unreadable input, no usable peer). One test per verb and case; the Spark verbs are in
tests/spark/test_spark_errors.py. Every --help carries the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import merkle
from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, build_parser, main

SMALL = [
    "--block-size",
    "48KiB",
    "--chunk-size",
    "16KiB",
    "--bytes-per-checksum",
    "4KiB",
    "--blocks",
    "2-3",
]


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_line(err: str) -> str:
    assert err.startswith("crcmerkle: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.fixture()
def cluster(tmp_path, capsys):
    """One container, three replicas, a chunk corrupted on one of them."""
    root = tmp_path / "c"
    assert (
        run(
            capsys,
            "generate",
            root,
            "--faults",
            "bitflip",
            "--containers",
            "1",
            "--seed",
            "2",
            "--layout",
            "crcmerkle",
            *SMALL,
        )[0]
        == EXIT_OK
    )
    m = json.loads((root / "manifest.json").read_text())
    target = root / m["faults"][0]["replicas"][0]
    peers = [root / r for r in m["containers"]["1"]["replicas"] if root / r != target]
    return root, target, peers


def test_constants():
    assert (EXIT_OK, EXIT_FINDINGS, EXIT_ERROR) == (0, 1, 2)


# ---- checksum -----------------------------------------------------------------------------
def test_checksum(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert run(capsys, "checksum", f)[0] == EXIT_OK
    st, out, err = run(capsys, "checksum", tmp_path / "missing", f)
    assert st == EXIT_ERROR and out.endswith(f"  3  {f}\n")  # the others are still done
    one_line(err)


# ---- scan ---------------------------------------------------------------------------------
def test_scan_clean_findings_and_errors(cluster, tmp_path, capsys):
    root, target, peers = cluster
    assert run(capsys, "scan", peers[0], "--no-write")[0] == EXIT_OK
    assert run(capsys, "scan", root, "--no-write")[0] == EXIT_FINDINGS
    st, _, err = run(capsys, "scan", tmp_path / "nowhere")
    assert st == EXIT_ERROR
    one_line(err)
    (tmp_path / "empty").mkdir()
    st, _, err = run(capsys, "scan", tmp_path / "empty")
    assert st == EXIT_ERROR and "no container replica" in one_line(err)


# ---- reconcile ----------------------------------------------------------------------------
def test_reconcile_nothing_to_do_is_0(cluster, capsys):
    _, target, peers = cluster
    assert run(capsys, "reconcile", peers[0], peers[1], "--dry-run")[0] == EXIT_OK
    assert run(capsys, "reconcile", peers[0], peers[1])[0] == EXIT_OK


def test_reconcile_dry_run_with_repairs_pending_is_1(cluster, capsys):
    _, target, peers = cluster
    st, out, _ = run(capsys, "reconcile", target, *peers, "--dry-run")
    assert st == EXIT_FINDINGS and "pull block" in out
    # and after the repair, the same dry run has nothing pending
    assert run(capsys, "reconcile", target, *peers)[0] == EXIT_OK
    assert run(capsys, "reconcile", target, *peers, "--dry-run")[0] == EXIT_OK


def test_reconcile_left_undone_is_1(tmp_path, capsys):
    root = tmp_path / "c"
    run(
        capsys,
        "generate",
        root,
        "--faults",
        "bitflip-all",
        "--containers",
        "1",
        "--layout",
        "crcmerkle",
        *SMALL,
    )
    st, out, _ = run(capsys, "reconcile", "--all", root)
    assert st == EXIT_FINDINGS and "unrepaired" in out


def test_reconcile_every_peer_unreadable_is_2(cluster, tmp_path, capsys):
    _, target, peers = cluster
    ghosts = [tmp_path / "ghost1" / "1", tmp_path / "ghost2" / "1"]
    st, out, err = run(capsys, "reconcile", target, *ghosts)
    assert st == EXIT_ERROR and "no usable peer" in err
    # the JSON form says the same
    st, out, _ = run(capsys, "reconcile", target, *ghosts, "--json")
    assert st == EXIT_ERROR and json.loads(out)["failed"][0]["error"].startswith("no usable")
    # one usable peer is enough
    assert run(capsys, "reconcile", target, ghosts[0], peers[0])[0] == EXIT_OK


def test_reconcile_all_without_path_or_replicas_is_2(tmp_path, capsys):
    st, _, err = run(capsys, "reconcile", "--all")
    assert st == EXIT_ERROR and "--all needs" in one_line(err)
    (tmp_path / "empty").mkdir()
    st, _, err = run(capsys, "reconcile", "--all", tmp_path / "empty")
    assert st == EXIT_ERROR and "no container replica" in one_line(err)
    st, _, err = run(capsys, "reconcile", "--all", tmp_path / "missing")
    assert st == EXIT_ERROR


def test_reconcile_bad_usage_and_report_are_2(cluster, tmp_path, capsys):
    _, target, _ = cluster
    assert run(capsys, "reconcile", target)[0] == EXIT_ERROR  # no PEER
    assert run(capsys, "reconcile", "--report", tmp_path / "none.json")[0] == EXIT_ERROR
    (tmp_path / "r.json").write_text("{}")
    st, _, err = run(capsys, "reconcile", "--report", tmp_path / "r.json")
    assert st == EXIT_ERROR and "not a crcmerkle spark report" in one_line(err)


# ---- tree ---------------------------------------------------------------------------------
def test_tree(cluster, tmp_path, capsys):
    _, target, peers = cluster
    cid = target.name
    ours, peer = target / "metadata" / f"{cid}.tree", peers[0] / "metadata" / f"{cid}.tree"
    run(capsys, "scan", target)  # store the scanned tree: the corrupt chunk is in it
    assert run(capsys, "tree", "show", ours)[0] == EXIT_OK
    assert run(capsys, "tree", "diff", peer, peer)[0] == EXIT_OK
    assert run(capsys, "tree", "diff", ours, peer)[0] == EXIT_FINDINGS
    (tmp_path / "bad.tree").write_bytes(b"\xff" * 40)
    for argv in (
        ["show", tmp_path / "bad.tree"],
        ["diff", tmp_path / "bad.tree", peer],
        ["show", tmp_path / "missing.tree"],
    ):
        st, _, err = run(capsys, "tree", *argv)
        assert st == EXIT_ERROR
        one_line(err)


def test_tree_merge_and_build(cluster, tmp_path, capsys):
    """merge and build have nothing to report: 0 when the file is written, 2 when not."""
    _, target, peers = cluster
    cid = target.name
    peer = peers[0] / "metadata" / f"{cid}.tree"
    out = tmp_path / "merged.tree"
    assert run(capsys, "tree", "merge", peer, peer, "-o", out)[0] == EXIT_OK and out.is_file()
    (tmp_path / "bad.tree").write_bytes(b"\xff" * 40)
    st, _, err = run(
        capsys, "tree", "merge", peer, tmp_path / "bad.tree", "-o", tmp_path / "never.tree"
    )
    assert st == EXIT_ERROR and not (tmp_path / "never.tree").exists()
    one_line(err)
    csv = tmp_path / "chunks.csv"
    csv.write_text("block_id,offset,length,leaf\n1,0,4096,0000002a\n")
    built = tmp_path / "built.tree"
    assert run(capsys, "tree", "build", csv, "--container-id", "7", "-o", built)[0] == EXIT_OK
    assert built.is_file()
    csv.write_text("block_id,offset,length,leaf\n1,-5,4096,0000002a\n")  # offset out of range
    st, _, err = run(
        capsys, "tree", "build", csv, "--container-id", "7", "-o", tmp_path / "never2.tree"
    )
    assert st == EXIT_ERROR and not (tmp_path / "never2.tree").exists()
    one_line(err)


# ---- generate, soak, bench, usage ---------------------------------------------------------
def test_generate(tmp_path, capsys):
    st, _, err = run(capsys, "generate", tmp_path / "x", "--faults", "gremlins")
    assert st == EXIT_ERROR and "unknown fault type" in one_line(err)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me")
    st, _, err = run(capsys, "generate", tmp_path / "full")
    assert st == EXIT_ERROR and "not empty" in one_line(err)


def test_soak_clean_is_0(tmp_path, capsys):
    assert (
        run(capsys, "soak", "--rounds", "1", "--containers", "1", "--quiet", "--workdir", tmp_path)[
            0
        ]
        == EXIT_OK
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nosuchverb"],
        ["scan"],
        ["bench", "--runs", "0"],
        ["checksum", "-b", "0"],
        ["tree"],
        ["spark"],
        ["scan", "--workers", "x", "p"],
    ],
)
def test_usage_errors_are_2(argv, capsys):
    st, _, err = run(capsys, *argv)
    assert st == EXIT_ERROR
    one_line(err)


def _subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        nested = [
            a for a in p._actions if getattr(a, "choices", None) and isinstance(a.choices, dict)
        ]
        if nested:
            for action_name in nested[0].choices:
                yield [name, action_name]
        yield [name]


@pytest.mark.parametrize("argv", list(_subcommands()), ids=" ".join)
def test_every_help_has_the_table(argv, capsys):
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    for line in ("0    clean, or nothing to do", "1    findings", "2    the work could not"):
        assert line in out, (argv, out)


def test_top_level_help_and_debug_flag(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit status (every crcmerkle verb)" in out and "--debug" in out


def test_unexpected_error_is_one_line_and_debug_shows_it(monkeypatch, capsys):
    import merkle.cli.checksum as verb

    def boom(args):
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(verb, "run", boom)
    monkeypatch.delenv("CRCMERKLE_DEBUG", raising=False)
    st, _, err = run(capsys, "checksum", "x")
    assert st == EXIT_ERROR and "first line" in one_line(err) and "second" not in err
    try:
        with pytest.raises(RuntimeError):
            main(["--debug", "checksum", "x"])
    finally:
        os.environ.pop("CRCMERKLE_DEBUG", None)  # --debug set it for the process


# ---- CRCMERKLE_BACKEND ----------------------------------------------------------------------
@pytest.mark.parametrize("how", ["python -m merkle", "crcmerkle script"])
def test_unsupported_backend_env_is_one_line(how, tmp_path):
    if how == "crcmerkle script":
        script = tmp_path / "crcmerkle"  # what pip's console-script wrapper does
        script.write_text("import sys\nfrom merkle.cli import main\nsys.exit(main())\n")
        cmd = [sys.executable, str(script)]
    else:
        cmd = [sys.executable, "-m", "merkle"]
    env = {**__import__("os").environ, "CRCMERKLE_BACKEND": "no-such-kernel"}
    env.pop("CRCMERKLE_DEBUG", None)
    env["PYTHONPATH"] = str(__import__("pathlib").Path(merkle.__file__).parent.parent)
    r = subprocess.run([*cmd, "checksum", "-"], input=b"", capture_output=True, env=env, timeout=60)
    assert r.returncode == EXIT_ERROR
    err = r.stderr.decode()
    assert "CRCMERKLE_BACKEND='no-such-kernel'" in one_line(err)
    # a program importing the library still gets the ImportError it can catch
    r = subprocess.run(
        [sys.executable, "-c", "import merkle"], capture_output=True, env=env, timeout=60
    )
    assert r.returncode == 1 and b"ImportError: CRCMERKLE_BACKEND=" in r.stderr
    env["CRCMERKLE_DEBUG"] = "1"  # and the command line shows the traceback when asked
    r = subprocess.run([*cmd, "checksum", "-"], input=b"", capture_output=True, env=env, timeout=60)
    assert r.returncode == 1 and b"Traceback" in r.stderr
