"""Layer 4, the `crcmerkle` command line: this router (main, CLIError, exit codes, argument
types) and one module per verb (checksum, bench, tree, generate, scan, reconcile, replicate, spark,
soak).
May import every lower layer (merkle core, merkle.trees, merkle.replica) and spark_udfs.

Each module listed in COMMAND_MODULES provides `add_parser(subparsers)`, which adds one
subcommand and sets its handler with `parser.set_defaults(func=handler)`; the handler takes
the parsed namespace and returns an exit status. To add a command, write
`merkle/cli/<name>.py` with that function and list it here (or call `register()` before
`main()`). Handlers report failures by raising `CLIError`; `main()` turns it, and any OSError,
into one line `crcmerkle: error: ...` on stderr, never a traceback (`crcmerkle --debug ...` or
CRCMERKLE_DEBUG=1 shows the tracebacks).

Exit status, one rule for every verb (EXIT_STATUS_HELP, in each --help): 0 clean or nothing to
do, 1 findings (corruption, mismatch, repairs pending or left undone; warnings only with
--strict), 2 the work could not be done (bad arguments, unreadable input, no usable peer), 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Callable, List, NoReturn, Optional, Sequence

from merkle.messages import one_line  # noqa: F401  (re-exported: the verbs import it from here)

PROG = "crcmerkle"

#: Modules that each contribute one subcommand, in the order `--help` lists them.
COMMAND_MODULES: List[str] = [
    "merkle.cli.checksum",
    "merkle.cli.bench",
    "merkle.cli.tree",
    "merkle.cli.generate",
    "merkle.cli.scan",
    "merkle.cli.reconcile",
    "merkle.cli.replicate",
    "merkle.cli.spark",
    "merkle.cli.soak",
]

#: Exit status: clean, or nothing to do.
EXIT_OK = 0
#: Exit status: findings (corruption, mismatch, repairs pending or left undone).
EXIT_FINDINGS = 1
#: Exit status: the work could not be done (bad arguments, unreadable input, no usable peer).
EXIT_ERROR = 2
#: Exit status after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
#: main() said "interrupted" in this process (crcmerkle_cli then stays silent on the next Ctrl-C)
interrupted_reported = False
#: Exit status when the reader of the output went away (`crcmerkle ... | head`): 128 +
#: SIGPIPE, what a shell reports for a program that the closed pipe stopped (as coreutils)
EXIT_BROKEN_PIPE = 141
#: Older names: EXIT_USAGE is EXIT_ERROR; EXIT_FAILURE is EXIT_FINDINGS (a finding, never an
#: error: an input that could not be read is EXIT_ERROR).
EXIT_USAGE = EXIT_ERROR
EXIT_FAILURE = EXIT_FINDINGS

#: The rule every verb follows, for the --help epilogs (a verb adds what its 1 means).
EXIT_STATUS_HELP = """\
exit status (every crcmerkle verb):
  0    clean, or nothing to do
  1    findings: corruption, mismatch, repairs pending or left undone (a scan finding
       of level warning counts only with --strict: scan, spark scan/report/run); spark
       plan: a listed datanode may not stop yet; spark copycheck: a key's copy is not
       proved (a verdict other than MATCH that --allow does not name)
  2    the work could not be done: bad arguments, unreadable input, no usable peer
  130  interrupted (Ctrl-C), wherever it lands: start-up and shutdown too
  141  the reader of the output went away (`... | head`), quietly
errors are one line 'crcmerkle: error: ...'; --debug or CRCMERKLE_DEBUG=1 shows tracebacks"""


def exit_status_help(findings: str) -> str:
    """EXIT_STATUS_HELP with what 1 means for one verb (e.g. 'a replica has errors')."""
    import textwrap

    return (
        EXIT_STATUS_HELP
        + "\n"
        + textwrap.fill(f"here 1 means: {findings}", 88, subsequent_indent="  ")
    )


def debug_enabled() -> bool:
    """True with --debug or CRCMERKLE_DEBUG=1: show tracebacks and Spark's own logging."""
    return os.environ.get("CRCMERKLE_DEBUG", "") not in ("", "0")


class CLIError(Exception):
    """A user-facing error: printed as one line, exits with `status`."""

    def __init__(self, message: str, status: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.status = status


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line `crcmerkle: error: ...`, exit 2."""

    def error(self, message: str) -> NoReturn:
        raise CLIError(message, EXIT_USAGE)


#: largest count an option takes (a Java int: Spark's limit(), its IntegerType columns and
#: Ozone's int fields take nothing larger; a larger count would only fail later, unnamed)
INT32_MAX = 2**31 - 1
#: largest byte count or ID an option takes (a signed 64-bit integer, as C and Java hold it)
INT64_MAX = 2**63 - 1
#: largest buffer or generated block/chunk an option may ask for (allocated at once)
MAX_BUFFER_BYTES = 1 << 30


def int_in_range(low: int, high: int) -> Callable[[str], int]:
    """argparse type: a decimal integer from `low` to `high` (a bad value is a one-line usage
    error naming the option: "argument --x: must be an integer from 1 to ...")."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10) if len(text) <= 40 else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {low} to {high}, not {text[:60]!r}"
            )
        return value

    return parse


def positive_int(text: str) -> int:
    """argparse type: an integer from 1 to INT32_MAX (a bad value is a one-line usage
    error)."""
    try:
        value = int(text, 10) if len(text) <= 40 else 0
    except ValueError:
        value = 0
    if not 0 < value <= INT32_MAX:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer up to {INT32_MAX}, not {text[:60]!r}"
        )
    return value


def duration_arg(text: str) -> float:
    """argparse type: a positive duration, 7d, 12h, 30m, 90s, 2w or seconds (--max-age)."""
    from merkle.replica.scanstate import parse_duration

    try:
        return parse_duration(text[:60])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_arg(text: str) -> float:
    """argparse type: 0 or a positive, finite number of seconds."""
    try:
        value = float(text) if len(text) <= 40 else -1.0
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"not 0 or a positive number of seconds: {text[:60]!r}")
    return value


def size_up_to(high: int) -> Callable[[str], int]:
    """argparse type: a byte count from 1 to `high`, with an optional unit (512, 16KiB)."""

    def parse(text: str) -> int:
        from merkle.cli.benchmarking import parse_size

        try:
            value = parse_size(text) if len(text) <= 40 else 0
        except (ValueError, OverflowError):
            value = 0
        if not 0 < value <= high:
            raise argparse.ArgumentTypeError(
                f"must be a positive number of bytes up to {high} (e.g. 512, 16KiB), "
                f"not {text[:60]!r}"
            )
        return value

    return parse


#: argparse type: a byte count from 1 to INT64_MAX, with an optional unit (512, 16KiB, 5MiB)
positive_size = size_up_to(INT64_MAX)


def byte_rate(text: str) -> Optional[int]:
    """argparse type of --bytes-per-second (scan and spark scan alike): a byte rate with an
    optional unit (16MiB), or 0 for unlimited (None: no limiter at all)."""
    if text.strip() == "0":
        return None
    return positive_size(text)


def refuse_also_without_data(args: argparse.Namespace) -> None:
    """`--also` computes CRCs from the bytes a scan reads: refused with the modes that read
    no data (`--trees-only`, `--metadata-only`), on every layout and in both CLIs."""
    if getattr(args, "also", None) and (
        getattr(args, "trees_only", False) or getattr(args, "metadata_only", False)
    ):
        raise CLIError(
            "--also computes its CRCs from the data read: not with --trees-only or --metadata-only",
            EXIT_ERROR,
        )


def redact_json(value: Any) -> Any:
    """A JSON document (dicts, lists, scalars) with every string's URI credentials removed
    (merkle.replica.uri.redact), for what a verb prints with --json."""
    from merkle.replica.uri import redact

    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_json(k): redact_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(v) for v in value]
    return value


def error_line(message: str) -> str:
    """The one error line of every verb: a URI's credentials removed (merkle.replica.uri.redact:
    a message may quote a URI a user typed, secret and all), control characters escaped."""
    from merkle.replica.uri import redact

    return f"{PROG}: error: {one_line(redact(message))}"


def print_error(message: str) -> None:
    """One error line on stderr (also used by handlers for per-file errors)."""
    print(error_line(message), file=sys.stderr, flush=True)


def register(module_name: str) -> None:
    """Add a subcommand module (one with `add_parser(subparsers)`) to the command line."""
    if module_name not in COMMAND_MODULES:
        COMMAND_MODULES.append(module_name)


def build_parser() -> ArgumentParser:
    from merkle import __version__

    parser = ArgumentParser(
        prog=PROG,
        description="Fast CRC-32C / CRC-32 checksums and container Merkle trees.",
        epilog=f"Run '{PROG} COMMAND --help' for the options of one command.\n\n"
        + EXIT_STATUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    add_debug_flag(parser)
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=ArgumentParser
    )
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(subparsers)
    return parser


def command_names(parser: argparse.ArgumentParser) -> List[str]:
    """The verbs a parser's subcommands answer to, in --help's order (checksum, bench, ...):
    what a user types, not the modules that provide them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """--debug on a parser (the top level and each Spark action); SUPPRESS keeps a
    subparser's default from overwriting the top level's value."""
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks and Spark's own log (also CRCMERKLE_DEBUG=1)",
    )


def first_line(text: str, limit: int = 400) -> str:
    """The first non-empty line of a (possibly multi-line) message, shortened to `limit`."""
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def _os_error_message(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return first_line(exc.strerror or str(exc))


class ReaderGone(BaseException):
    """The reader of stdout went away (`crcmerkle ... | head`). Not an OSError, so that no
    verb's `except OSError` takes it for an I/O error of its own work (and goes on, or
    prints "Broken pipe"); it reaches main, which stops quietly."""


class _StdoutGuard:
    """sys.stdout during main: a BrokenPipeError of a write or flush becomes ReaderGone."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            raise ReaderGone from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise ReaderGone from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _stdout_to_devnull() -> None:
    """After the reader went away: what is still buffered goes nowhere, quietly (else the
    interpreter's final flush prints "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the `crcmerkle` console script; returns the exit status."""
    guard = _StdoutGuard(sys.stdout)
    sys.stdout = guard
    try:
        return _main(argv)
    except (ReaderGone, BrokenPipeError):
        sys.stdout = guard.stream
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    finally:
        if sys.stdout is guard:
            sys.stdout = guard.stream


def _main(argv: Optional[Sequence[str]]) -> int:
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help / --version
            return exc.code if isinstance(exc.code, int) else 0
        if getattr(args, "debug", False):
            os.environ["CRCMERKLE_DEBUG"] = "1"  # also for the Spark workers it starts
        func = getattr(args, "func", None)
        if func is None:
            raise CLIError(
                f"a command is required ({', '.join(command_names(parser))}); see '{PROG} --help'"
            )
        return int(func(args) or 0)
    except CLIError as exc:
        print_error(str(exc))
        return exc.status
    except KeyboardInterrupt:
        if debug_enabled():
            raise
        global interrupted_reported
        # set before the line: a second Ctrl-C on the way out (the launcher's crcmerkle_cli
        # reads this) is never a second line, at worst none
        interrupted_reported = True
        print_error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # the reader went away: main stops quietly (ReaderGone)
    except OSError as exc:
        if debug_enabled():
            raise
        print_error(_os_error_message(exc))
        return EXIT_ERROR
    except Exception as exc:  # never a traceback for users
        if debug_enabled():
            raise
        print_error(
            f"unexpected {type(exc).__name__}: {first_line(str(exc))} (--debug for a traceback)"
        )
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
