"""`crcmerkle scan BOOKIE_DIR... --ledger-metadata PATH | --zookeeper HOST:PORT --state DIR
--max-age DURATION --loop`: the periodic validator BP-31 asks for, as a service.

Forever, until SIGTERM or SIGINT: one pass over every bookie under the BOOKIE_DIRs (the
ledger metadata read again at each pass's start: ledgers come and go), one thread per
ledger storage, each disk at --bytes-per-second; an entry log verified within --max-age
and unchanged is not read again (merkle.replica.bookkeeper.state). Each storage's logs are
read by risk (LogStates.risk): changed and never-verified first, then the oldest verified,
as the datanode loop reads replicas. A pass ends with
the copies of every bookie judged together (under-replication and differing copies need
them all), its findings printed and the metrics written; then a sleep until the first log
falls due again (at most an hour), and the next pass. With --emit URI a pass writes this
host's stage-1 rows to URI at its end instead of judging them here (spark_udfs.jobs.bookkeeper.
emit: `spark report` judges every host's together); its lines give this host's findings.

SIGTERM (systemd's stop) and SIGINT: every storage thread stops at its next read (the read
in progress finishes; the log it was reading is not recorded, so the next start reads it
again), the metrics are written, and the process exits 0. Each log's record is on disk
when the log is done (one transaction each): a kill -9 loses at most the logs in flight.

Metrics (--metrics-file, --metrics-port: merkle.cli.metrics): the per-directory figures of
the pass in progress (logs and bytes read and not read, rate, oldest verification, time a
full pass takes), and the findings and unscanned paths of the last pass that completed
(a bookie's findings are judged only at a pass's end); the file rewritten every
scanloop.METRICS_EVERY seconds, at each pass's end and at the stop.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any, List, Optional

from merkle.cli import PROG, CLIError, print_error
from merkle.cli.bookkeeper import (
    MetadataSource,
    bookie_source,
    log_states,
    pacer,
    print_finding_lines,
)
from merkle.cli.scanloop import (
    EMIT_RETRY,
    MAX_SLEEP,
    Stopped,
    run_beside,
    serve_metrics,
    stop_on_signals,
)
from merkle.messages import one_line

__all__ = ["run_bookie_loop"]

#: the most ledger storages verified at once (one thread each; a host has one per disk)
MAX_THREADS = 64
#: the wait before the ledger metadata is read again when it could not be
METADATA_RETRY = 60.0


class _Figures:
    """What the metrics read: the pass in progress's LogStates, the last complete pass's
    findings and unscanned paths."""

    def __init__(self) -> None:
        self.states: Any = None
        self.findings: List[Any] = []
        self.failed = 0
        self.lock = threading.Lock()

    def registry(self) -> Any:
        from merkle.cli.metrics import findings_registry

        with self.lock:
            if self.states is None:
                return None
            return findings_registry(list(self.findings), self.failed, self.states)


def run_bookie_loop(args: argparse.Namespace) -> int:
    """The service (module docstring). Exit 0 when stopped; options a bookie scan does not
    take, ledger metadata, a state or a metrics port that cannot be used: CLIError (exit 2)
    before the first pass."""
    from merkle.replica.bookkeeper.state import LogStates

    source = bookie_source(args)
    first = log_states(args)  # the state checked and opened once, for every pass
    state = first.state
    figures = _Figures()
    with stop_on_signals() as stop:
        server = serve_metrics(args, figures.registry)
        try:
            states = first
            while not stop.is_set():
                with figures.lock:
                    figures.states = states
                report = _one_pass(args, source, states, figures, stop)
                if report is None:  # stopped mid-pass: the logs done are recorded
                    break
                if args.emit:
                    emitted = _print_emit(args, report, states)
                    with figures.lock:
                        figures.findings, figures.failed = list(report.found), len(report.failed)
                else:
                    emitted = True
                    _print_pass(report, states)
                    with figures.lock:
                        figures.findings = list(report.findings)
                        figures.failed = len(report.failed)
                _write_file(args, figures)
                due = state.next_due(args.max_age)
                wait = MAX_SLEEP if due is None else due - time.time()
                if not emitted:  # the logs are recorded: the next pass writes them, soon
                    wait = min(wait, EMIT_RETRY)
                stop.wait(max(1.0, min(MAX_SLEEP, wait)))
                fresh = _next_source(args, stop)
                if fresh is None:
                    break
                source = fresh
                states = LogStates(state, args.max_age)
            _write_file(args, figures)
            print(
                f"{PROG}: stopped; the state is saved in {args.state}", file=sys.stderr, flush=True
            )
            return 0
        finally:
            if server is not None:
                server.shutdown()
            state.close()


def _one_pass(
    args: argparse.Namespace,
    source: MetadataSource,
    states: Any,
    figures: _Figures,
    stop: threading.Event,
) -> Optional[Any]:
    """One pass over the bookies in a thread of its own (the main thread keeps the signals
    and rewrites the metrics file every METRICS_EVERY seconds): the ScanReport, or None
    when stopped before its end."""
    from merkle.replica.bookkeeper.scan import scan_bookies

    def scan() -> Any:
        if args.emit:
            return _emit_pass(args, source, states, stop)
        return scan_bookies(
            args.paths,
            source.ledgers,
            instance_id=source.instance_id,
            registered_cookies=source.cookies,
            unread=source.unread,
            metadata_complete=source.complete,
            states=states,
            pace=pacer(args.rate, stop),
            threads=MAX_THREADS,
        )

    try:
        return run_beside(scan, lambda: _write_file(args, figures))
    except Stopped:
        return None


def _emit_pass(
    args: argparse.Namespace, source: MetadataSource, states: Any, stop: threading.Event
) -> Any:
    """A pass of `--loop --emit URI`: this host's stage-1 rows written to URI at the pass's
    end (spark_udfs.jobs.bookkeeper.emit, replacing this host's file of the pass before), for
    `spark report` to judge with the other hosts'. The BookieEmit, or an _EmitFailed when the
    output could not be written (the logs read are recorded all the same: the next pass,
    EMIT_RETRY later, writes them from their records without reading them again)."""
    try:
        from spark_udfs.jobs.bookkeeper.emit import emit_bookies
    except ImportError as exc:  # pyarrow missing: one line, and the service cannot work
        raise CLIError(f"--emit needs pyarrow ({exc})") from None
    from merkle.cli.emit import emit_host

    try:
        return emit_bookies(
            args.paths,
            args.emit,
            emit_host(args),
            source.ledgers,
            instance_id=source.instance_id,
            registered_cookies=source.cookies,
            states=states,
            pace=pacer(args.rate, stop),
            threads=MAX_THREADS,
        )
    except (OSError, ValueError) as exc:
        return _EmitFailed(str(exc))


class _EmitFailed:
    """A pass whose output could not be written: its one line, nothing found."""

    def __init__(self, why: str) -> None:
        self.why = why
        self.found: List[Any] = []
        self.failed: List[str] = []


def _print_emit(args: argparse.Namespace, res: Any, states: Any) -> bool:
    """A `--loop --emit` pass's lines: its findings so far (this host's; the copies are
    judged with the other hosts' by `spark report`) and what it wrote. False when the output
    could not be written."""
    from merkle.replica.uri import display

    where = display(args.emit)
    if isinstance(res, _EmitFailed):
        print_error(one_line(f"--emit {where}: {res.why}; the pass again in {EMIT_RETRY:.0f} s"))
        return False
    print_finding_lines(res.found)
    for line in res.failed:
        print_error(one_line(line))
    print(
        f"pass done: {states.read} entry logs read ({res.bytes_read} bytes), "
        f"{states.carried_logs} not read (unchanged, verified within --max-age); emitted "
        f"{len(set(res.bookies))} bookies, {res.copies} entry copies ({res.good_copies} good), "
        f"{len(res.found)} findings so far, to {one_line(where)}",
        flush=True,
    )
    return True


def _next_source(args: argparse.Namespace, stop: threading.Event) -> Optional[MetadataSource]:
    """The ledger metadata for the next pass, read again (None: stopped while waiting for
    a store that could not be read, retried every METADATA_RETRY seconds)."""
    while not stop.is_set():
        try:
            return bookie_source(args)
        except CLIError as exc:
            print_error(one_line(f"{exc}; read again in {METADATA_RETRY:.0f} s"))
            stop.wait(METADATA_RETRY)
    return None


def _print_pass(report: Any, states: Any) -> None:
    """A pass's finding lines (as the one-shot scan prints them) and its summary line."""
    print_finding_lines(report.findings)
    for failure in report.failed:
        print_error(one_line(failure["error"]))
    warnings = sum(1 for f in report.findings if f.severity == "warning")
    errors = len(report.findings) - warnings
    print(
        f"pass done: {states.read} entry logs read ({report.bytes_read} bytes), "
        f"{states.carried_logs} not read (unchanged, verified within --max-age), "
        f"{errors} errors, {warnings} warnings, {len(report.failed)} paths not scanned",
        flush=True,
    )


def _write_file(args: argparse.Namespace, figures: _Figures) -> None:
    if not args.metrics_file:
        return
    registry = figures.registry()
    if registry is None:
        return
    from merkle.cli.metrics import write_metrics_file

    try:
        write_metrics_file(args.metrics_file, registry)
    except CLIError as exc:  # the service goes on: the next write may succeed
        print_error(one_line(str(exc)))
