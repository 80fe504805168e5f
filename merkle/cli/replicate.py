"""`crcmerkle replicate`: create a new replica of a container from a good one."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, List

from merkle.cli import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    CLIError,
    exit_status_help,
    one_line,
    print_error,
    redact_json,
)
from merkle.replica.errors import ReplicaError

DESCRIPTION = """\
Create the replica TARGET (a directory <volume>/<containerID> that does not exist) from the
good replica SOURCE: every block file is copied with each window verified against the
source's recorded checksums, then the metadata and the tree are written, and the new replica
appears in one rename. An existing TARGET is never touched (one holding the source's
container value is reported as present). TARGET's volume directory must exist (it is never
created) and its path must contain no symbolic link. What is created gets the owner of the
volume directory and the source's modes, never a setuid, setgid or sticky bit. Safe to
re-run after a crash. A TARGET volume owned by another user than the source replica's (other
than root) is refused: the copy would be handed to that user. On a volume that fills up the
partial copy is removed. With --report, the copy commands of a 'crcmerkle spark plan --json'
plan are run, round by round, once the plan's SHA-256 digest of its commands matches, each
command's argv is exactly 'crcmerkle replicate' of its source and target, and every source
and target lies under the roots the scan read, on volumes of one cluster, named by its
container, with no symbolic link on the way (anything else: exit 2, nothing copied)."""

EPILOG = exit_status_help(
    "a source did not verify (not a good replica; nothing was created for it); 0 also when a "
    "target already holds the source's replica, 2 when a copy could not be done (target "
    "exists with other data, lock held, unreadable or oversized source metadata, missing or "
    "linked volume directory)"
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "replicate",
        help="create a new replica from a good one",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="SOURCE TARGET")
    p.add_argument(
        "--report",
        metavar="PLAN.json",
        help="run the copy commands of a 'crcmerkle spark plan --json' plan",
    )
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(func=run)
    return p


def _plan_pairs(path: str) -> List[List[str]]:
    """[source, target] per copy command of a plan file: its digest, numbers and argv
    checked (plan_commands), then every command against the disk before any copy runs
    (check_copy_command); one refused command refuses the plan (exit 2, nothing copied)."""
    from merkle.replica.commandlist import read_json_file
    from merkle.replica.replicate import check_copy_command, plan_commands

    try:
        plan = read_json_file(path)
        commands = plan_commands(plan, path)
        for c in commands:
            check_copy_command(c, plan.get("scanned_roots"), path)
    except OSError as exc:
        raise CLIError(f"{exc.filename or path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CLIError(f"{path}: not a JSON plan ({exc})") from None
    except ReplicaError as exc:
        raise CLIError(f"{exc} (nothing was copied)") from None
    return [[c.source, c.target] for c in commands]


def run(args: argparse.Namespace) -> int:
    from merkle.replica.replicate import SourceNotGoodError, replicate

    if args.report:
        if args.paths:
            raise CLIError("--report takes no PATH")
        pairs = _plan_pairs(args.report)
    elif len(args.paths) == 2:
        pairs = [list(args.paths)]
    else:
        raise CLIError("give SOURCE and TARGET (or --report PLAN.json)")
    results, failed = [], []
    status = 0
    for s, t in pairs:
        try:
            r = replicate(s, t)
        except SourceNotGoodError as exc:
            failed.append({"source": s, "target": t, "error": str(exc), "source_good": False})
            status = max(status, EXIT_FINDINGS)
        except (ReplicaError, OSError) as exc:
            msg = (
                str(exc)
                if isinstance(exc, ReplicaError)
                else f"{exc.filename or t}: {exc.strerror or exc}"
            )
            failed.append({"source": s, "target": t, "error": msg, "source_good": None})
            status = EXIT_ERROR
        else:
            results.append(r)
            if not args.json:
                what = (
                    (
                        f"created: {r.blocks} block(s), {r.chunks} chunk(s), "
                        f"{r.bytes_copied} bytes verified and copied"
                    )
                    if r.status == "created"
                    else "already present"
                )
                print(one_line(f"{r.target} <- {r.source}: {what}"))
                for n in r.notes:
                    print(f"  {one_line(str(n))}")
            continue
        if not args.json:
            print_error(str(failed[-1]["error"]))
    if args.json:
        json.dump(
            redact_json({"results": [r.to_dict() for r in results], "failed": failed}),
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
    return status
