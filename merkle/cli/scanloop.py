"""`crcmerkle scan PATH... --state DIR --max-age DURATION --loop`: verification as a service.

Forever, until SIGTERM or SIGINT: one pass over every volume under the PATHs, one thread per
volume, each at the volume's byte rate (--bytes-per-second), each replica picked by the
periodic rule (merkle.replica.incremental: changed and never-verified first, then the oldest
verified; those verified within --max-age and unchanged not read), its result printed and
recorded as it completes; then a sleep until the first replica falls due again (at most an
hour, so that changed replicas are found), and the next pass. With --emit URI each pass is
the periodic emit (spark_udfs.tables.emit, its replicas not read replayed from their
records): each volume's tables written to URI whole, mid-pass at most every --emit-every
(EMIT_EVERY) and when the volume's pass completes.

SIGTERM (systemd's stop) and SIGINT: every volume thread stops at its next read (the read in
progress finishes; the replica it was reading is not recorded, so the next start reads it
again), the metrics are written, and the process exits 0. Each recorded replica is already on
disk (one transaction each), so a kill -9 loses no more than the replicas in flight.

Metrics (--metrics-file, --metrics-port): the pass in progress's figures (merkle.cli.metrics),
the file rewritten every METRICS_EVERY seconds and at each pass's end and at the stop, the
HTTP endpoint (127.0.0.1 unless --metrics-address says otherwise) computed at each scrape.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional

from merkle.cli import PROG, print_error
from merkle.messages import one_line
from merkle.replica.errors import ReplicaError
from merkle.replica.incremental import not_read

__all__ = ["Stopped", "run_beside", "run_loop", "serve_metrics", "stop_on_signals"]

#: how often the metrics file is rewritten while a pass runs (seconds)
METRICS_EVERY = 30.0
#: the longest sleep between passes: a changed replica waits at most this long
MAX_SLEEP = 3600.0
#: with --emit, the wait before a pass whose output could not be written is run again
EMIT_RETRY = 60.0
#: with --emit, how often a volume's tables are written mid-pass unless --emit-every says
EMIT_EVERY = 300.0


class Stopped(BaseException):
    """Raised in a volume thread at its next read once a stop was asked (not an Exception:
    no layout's error handling may take it for a replica's failure)."""


class _Pass:
    """What the metrics read of the pass in progress (replaced at each pass's start)."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.results: List[Any] = []
        self.failed: List[Dict[str, str]] = []
        self.lock = threading.Lock()

    def registry(self) -> Any:
        from merkle.cli.metrics import scan_registry

        with self.lock:
            results, failed = list(self.results), list(self.failed)
        return scan_registry(results, failed, self.tracker)


class _Collector:
    """A prometheus_client collector serving, at each scrape, the registry `current()` gives
    (the pass in progress's; None: nothing yet)."""

    def __init__(self, current: Callable[[], Any]) -> None:
        self.current = current

    def collect(self) -> Any:
        registry = self.current()
        if registry is None:
            return iter(())
        return registry.collect()


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An Event set by SIGTERM (systemd's stop) or SIGINT while the block runs; the previous
    handlers are put back at its end."""
    stop = threading.Event()

    def ask_stop(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, ask_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _volume_roots(paths: List[str]) -> List[str]:
    """Every volume root under the PATHs (each scanned by its own thread); a PATH that cannot
    be walked is given as it is (its pass reports why)."""
    from merkle.replica.layouts import layout_of

    roots: List[str] = []
    for p in paths:
        try:
            roots.extend(v.root for v in layout_of(p).volumes(p) if v.root not in roots)
        except (OSError, ValueError, ReplicaError):  # reported by the pass itself
            roots.append(p)
    return list(dict.fromkeys(roots))


def run_loop(args: argparse.Namespace, make_tracker: Any, print_result: Any) -> int:
    """The service (module docstring); `make_tracker()` gives a new StateTracker over the
    run's one ScanState for each pass, `print_result(result, strict)` prints a replica's
    lines (merkle.cli.scan's)."""
    with stop_on_signals() as stop:
        return _run_loop(args, make_tracker, print_result, stop)


def _run_loop(
    args: argparse.Namespace, make_tracker: Any, print_result: Any, stop: threading.Event
) -> int:
    holder: Dict[str, Optional[_Pass]] = {"pass": None}

    def registry() -> Any:
        current = holder["pass"]
        return None if current is None else current.registry()

    server = serve_metrics(args, registry)
    print_lock = threading.Lock()
    tracker = None
    try:
        while not stop.is_set():
            tracker = make_tracker()
            current = _Pass(tracker)
            holder["pass"] = current
            if args.emit:
                emitted = _one_emit_pass(args, current, stop, print_lock, print_result)
            else:
                _one_pass(args, current, stop, print_lock, print_result)
                emitted = True
            if stop.is_set():
                break
            if not emitted:  # the output could not be written: the pass again, soon
                _write_file(args, current)
                stop.wait(EMIT_RETRY)
                continue
            tracker.state.complete_pass()
            _write_file(args, current)
            with print_lock:
                print(_pass_line(current), flush=True)
            due = tracker.state.next_due(args.max_age)
            sleep = MAX_SLEEP if due is None else due - time.time()
            stop.wait(max(1.0, min(MAX_SLEEP, sleep)))
        if holder["pass"] is not None:
            _write_file(args, holder["pass"])
        print(f"{PROG}: stopped; the state is saved in {args.state}", file=sys.stderr, flush=True)
        return 0
    finally:
        if server is not None:
            server.shutdown()
        if tracker is not None:
            tracker.state.close()


def _one_pass(
    args: argparse.Namespace,
    current: _Pass,
    stop: threading.Event,
    print_lock: Any,
    print_result: Any,
) -> None:
    """One pass: a thread per volume, the main thread waiting (it keeps the signals) and
    rewriting the metrics file every METRICS_EVERY seconds."""
    from merkle.replica.scan import DEFAULT_BUFFER_SIZE, scan_paths

    seen: Dict[Any, Any] = {}  # a replica directory reached by two PATHs: scanned once

    def progress(_n: int) -> None:
        if stop.is_set():
            raise Stopped()

    def on_result(r: Any) -> None:
        with current.lock:
            current.results.append(r)
        with print_lock:
            print_result(r, args.strict)

    def on_error(loc: Any, exc: Exception) -> None:
        with current.lock:
            current.failed.append({"path": os.fspath(loc.root), "error": str(exc)})
        with print_lock:
            print_error(str(exc))

    def one_volume(root: str) -> None:
        try:
            scan_paths(
                [root],
                bytes_per_second=args.rate,
                workers=args.workers,
                write_tree=not args.no_write,
                on_result=on_result,
                on_error=on_error,
                progress=progress,
                ozone_scanned=seen,
                tracker=current.tracker,
                drop_cache=not args.keep_cache,
                buffer_size=args.buffer_size or DEFAULT_BUFFER_SIZE,
            )
        except Stopped:
            pass
        except (OSError, ReplicaError) as exc:  # a PATH that cannot be scanned
            on_error(argparse.Namespace(root=root), exc)

    roots = _volume_roots(list(args.paths))

    def every_volume() -> None:
        with ThreadPoolExecutor(max_workers=max(1, len(roots))) as pool:
            for _ in pool.map(one_volume, roots):  # a programming error in one is not silent
                pass

    run_beside(every_volume, lambda: _write_file(args, current))


def run_beside(work: Callable[[], Any], write_metrics: Callable[[], None]) -> Any:
    """`work()` run in a thread of its own while this (the main) thread keeps the signals
    and calls `write_metrics` every METRICS_EVERY seconds; its result, or its exception
    raised here (a programming error in it is not silent)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(work)
        t0 = time.monotonic()
        while not future.done():
            wait([future], timeout=1.0)
            if time.monotonic() - t0 >= METRICS_EVERY:
                write_metrics()
                t0 = time.monotonic()
        return future.result()


def _one_emit_pass(
    args: argparse.Namespace,
    current: _Pass,
    stop: threading.Event,
    print_lock: Any,
    print_result: Any,
) -> bool:
    """One pass of `--loop --emit URI`: the periodic emit (merkle.cli.emit's, its tracker
    replaying the replicas not read), a thread per volume; each replica printed and counted
    as it completes, each volume's tables written to URI whole at most every --emit-every
    and when its pass completes (spark_udfs.tables.emit's publish_every), this host's files
    of volumes gone removed at the pass's end. True when the pass was written whole; False
    when the output failed (said in one line: the pass is not complete, and the next one
    re-reads nothing this one recorded)."""
    from merkle.cli import CLIError
    from merkle.cli.emit import emit_host
    from merkle.replica.scan import DEFAULT_BUFFER_SIZE
    from merkle.replica.uri import display

    try:
        from spark_udfs.tables.emit import emit_scan
    except ImportError as exc:  # pyarrow missing: one line, and the service cannot work
        raise CLIError(f"--emit needs pyarrow ({exc})") from None
    host = emit_host(args)

    def progress(_n: int) -> None:
        if stop.is_set():
            raise Stopped()

    def on_replica(ref: Any, r: Any, exc: Optional[Exception]) -> None:
        if exc is not None:
            with current.lock:
                current.failed.append({"path": os.fspath(ref.path), "error": str(exc)})
            with print_lock:
                print_error(str(exc))
            return
        with current.lock:
            current.results.append(r)
        with print_lock:
            print_result(r, args.strict)

    def work() -> None:
        res = emit_scan(
            list(args.paths),
            args.emit,
            host,
            bytes_per_second=args.rate,
            drop_cache=not args.keep_cache,
            strict=args.strict,
            tracker=current.tracker,
            on_replica=on_replica,
            threads=max(1, len(_volume_roots(list(args.paths)))),
            publish_every=EMIT_EVERY if args.emit_every is None else args.emit_every,
            workers=args.workers,
            progress=progress,
            buffer_size=args.buffer_size or DEFAULT_BUFFER_SIZE,
        )
        with print_lock:
            for line in res.failures:
                print_error(line)
            print(
                f"emitted {res.replicas} replicas of {len(res.volumes)} volume(s) as host "
                f"{one_line(host)} to {one_line(display(args.emit))}: {len(res.written)} "
                f"file(s)"
                + (f", {len(res.removed)} earlier file(s) removed" if res.removed else ""),
                flush=True,
            )

    try:
        run_beside(work, lambda: _write_file(args, current))
    except Stopped:
        return True
    except (OSError, ValueError) as exc:
        print_error(one_line(f"--emit {display(args.emit)}: {exc}"))
        return False
    return True


def _pass_line(p: _Pass) -> str:
    read = sum(1 for r in p.results if not not_read(r))
    carried = len(p.results) - read
    nbytes = sum(r.bytes_read for r in p.results)
    bad = sum(1 for r in p.results if not r.ok)
    return (
        f"pass done: {read} replicas read ({nbytes} bytes), {carried} not read (unchanged, "
        f"verified within --max-age), {bad} with errors, {len(p.failed)} not scanned"
    )


def _write_file(args: argparse.Namespace, p: _Pass) -> None:
    if not args.metrics_file:
        return
    from merkle.cli import CLIError
    from merkle.cli.metrics import write_metrics_file

    try:
        write_metrics_file(args.metrics_file, p.registry())
    except CLIError as exc:  # the service goes on: the next write may succeed
        print_error(one_line(str(exc)))


def serve_metrics(args: argparse.Namespace, current: Callable[[], Any]) -> Any:
    """The HTTP endpoint of --metrics-port (None without): prometheus_client's server on
    --metrics-address (127.0.0.1 unless told), serving the registry `current()` gives at
    each scrape (the pass in progress's). Its shutdown() stops it."""
    if args.metrics_port is None:
        return None
    from prometheus_client import CollectorRegistry, start_http_server

    from merkle.cli import EXIT_ERROR, CLIError

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(current))
    try:
        started = start_http_server(args.metrics_port, addr=args.metrics_address, registry=registry)
    except OSError as exc:
        raise CLIError(
            f"--metrics-port {args.metrics_port} on {args.metrics_address}: {exc.strerror or exc}",
            EXIT_ERROR,
        ) from None
    # (server, thread) since prometheus_client 0.20; the server's shutdown() stops it
    return started[0] if started else None
