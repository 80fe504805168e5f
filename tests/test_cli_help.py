"""The command line as a new user reads it: every parser's help and description, the verbs a
bare `crcmerkle` lists, the exit-status epilogue, options that mean one thing everywhere."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from merkle.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
#: options hidden from --help on purpose (argparse.SUPPRESS): compatibility spellings only
HIDDEN = {("crcmerkle checksum", "--buffer-size"), ("crcmerkle scan", "--buffer-size")}


def _parsers(
    parser: argparse.ArgumentParser, path: str = "crcmerkle"
) -> Iterator[Tuple[str, argparse.ArgumentParser]]:
    """Every parser and subparser, each with the command that reaches it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            yield action


def test_every_option_of_every_parser_has_help() -> None:
    missing: List[str] = []
    hidden = set()
    for path, parser in _parsers(build_parser()):
        for action in _options(parser):
            name = (action.option_strings or [action.dest])[-1]
            if action.help == argparse.SUPPRESS:
                hidden.add((path, name))
            elif not (action.help or "").strip():
                missing.append(f"{path} {name}")
    assert missing == []
    assert hidden == HIDDEN  # a new hidden option is a decision: list it here


def test_every_command_has_a_description() -> None:
    bare = [
        path for path, parser in _parsers(build_parser()) if not (parser.description or "").strip()
    ]
    assert bare == []


@pytest.mark.parametrize("action", ["scan", "diff", "report", "run"])
def test_spark_actions_describe_themselves(action: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["spark", action, "--help"]) == 0
    out = capsys.readouterr().out
    description = out.split("\n\n")[1]  # the paragraph after the usage
    assert not description.startswith(("positional arguments", "options")), out[:400]
    assert len(description.split()) >= 20


def test_no_command_lists_the_verbs(capsys: pytest.CaptureFixture) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "merkle.cli" not in err
    for verb in ("checksum", "scan", "reconcile", "generate", "spark"):
        assert f"{verb}," in err or f"{verb})" in err


def test_exit_status_epilogue_covers_copycheck_and_plan(capsys: pytest.CaptureFixture) -> None:
    assert main(["--help"]) == 0  # the rule every verb's epilogue starts with
    out = " ".join(capsys.readouterr().out.split())
    assert "spark plan: a listed datanode may not stop yet" in out
    assert "spark copycheck: a key's copy is not proved" in out
    for argv in (
        ["spark", "--help"],
        ["spark", "copycheck", "--help"],
        ["spark", "plan", "--help"],
    ):
        assert main(argv) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "exit status" in out
        assert "copycheck: some key's verdict is not MATCH" in out, argv
        assert "plan: some listed datanode may not stop yet" in out, argv


def test_bytes_per_second_zero_is_unlimited_in_scan_and_spark_scan() -> None:
    """`scan` refused 0 ("must be a positive number of bytes") where `spark scan` took it
    for unlimited: both take it, for unlimited (no limiter), and say so."""
    parser = build_parser()
    assert parser.parse_args(["scan", "--bytes-per-second", "0", "x"]).rate is None
    assert parser.parse_args(["scan", "--rate", "16MiB", "x"]).rate == 16 << 20
    spark = parser.parse_args(["spark", "scan", "--bytes-per-second", "0", "-o", "o", "x"])
    assert not spark.bytes_per_second  # spark_udfs.cli passes `or None`: no limiter
    for path, sub in _parsers(parser):
        for action in _options(sub):
            if "--bytes-per-second" in action.option_strings:
                assert "0: unlimited" in " ".join(action.help.split()), path


def test_scan_with_rate_zero_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "c"
    assert (
        main(
            [
                "generate",
                str(out),
                "--layout",
                "crcmerkle",
                "--datanode-count",
                "1",
                "--replicas",
                "1",
                "--containers",
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
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["scan", "--bytes-per-second", "0", "--no-write", str(out)]) == 0
    assert "error" not in capsys.readouterr().err


def test_generate_datanode_count_and_the_deprecated_spelling(capsys: pytest.CaptureFixture) -> None:
    parser = build_parser()
    assert parser.parse_args(["generate", "o"]).datanode_count == 3
    assert parser.parse_args(["generate", "o", "--datanode-count", "5"]).datanode_count == 5
    capsys.readouterr()
    args = parser.parse_args(["generate", "o", "--datanodes", "4"])
    assert args.datanode_count == 4 and not hasattr(args, "datanodes")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "deprecated" in err and "--datanode-count 4" in err


def test_demo_directory_is_ignored_by_git() -> None:
    if not (ROOT / ".gitignore").is_file():
        pytest.skip("not a checkout (the wheel suite): no .gitignore beside tests/")
    default = build_parser().parse_args(["spark", "demo"]).dir
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert f"{default}/" in lines


def test_ozone_report_says_which_repair_list_to_act_on() -> None:
    from spark_udfs.jobs.report import STATES, format_text

    report = {
        "generated": "2026-01-01T00:00:00+00:00",
        "replication": 3,
        "first": 20,
        "summary": {s: 0 for s in STATES},
        "containers": {s: [] for s in STATES},
        "mismatched": [],
        "unrecoverable": [],
        "pending_deletions": [],
        "ozone_reconcile": [
            {
                "containerID": 7,
                "argv": ["ozone", "admin", "container", "reconcile", "7"],
                "datanodes": [],
            }
        ],
        "repair_plan": {
            "total": 1,
            "rounds": 1,
            "datanode_limit": 20,
            "commands": [
                {
                    "round": 1,
                    "container": 7,
                    "target": "dn-a",
                    "source": "dn-b",
                    "bytes": 10,
                    "items": [{"kind": "CORRUPT_CHUNK"}],
                }
            ],
        },
    }
    text = format_text(report)
    assert "ACT ON THIS LIST" in text.split("ozone admin container reconcile 7")[0]
    after = text.split("Repair plan:")[1]
    assert "for information only" in after and "do not run it" in after
    report["ozone_reconcile"] = []  # crcmerkle's layout: the plan is the action, no caveat
    assert "for information only" not in format_text(report)
