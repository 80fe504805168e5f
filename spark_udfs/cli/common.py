"""What every `crcmerkle spark` verb's handler shares: failures as one line (_guarded), Ctrl-C
known whichever handler ran (_InterruptLatch), the session start (_session), the stage display
(_progress), the input and output checks made before the JVM starts (_check_paths,
_check_output), reading a scan's tables (_read_tables, _load_chunks; emitted tables vetted by
spark_udfs.cluster.vouch) and the --datanodes inventory (_not_scanned, _inventory), the
read-fraction check (_check_read), and writing a file next to Spark's tables (_write_file).
The verbs call the session start as `common._session(...)`: a test replaces it here to prove
that a refused input never starts the JVM.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Tuple

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, CLIError, debug_enabled
from merkle.replica.fileio import write_atomic
from spark_udfs.uri import display


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a command with Spark's, py4j's and pyarrow's failures turned into one line
    (spark_udfs.cluster.errors.describe), unless --debug asks for everything."""

    @functools.wraps(handler)
    def run_guarded(args: argparse.Namespace) -> int:
        _INTERRUPTS.arm()
        try:
            status = handler(args)
            if _INTERRUPTS.seen:
                # A Ctrl-C can also vanish: the KeyboardInterrupt is dropped when it lands in
                # a finalizer (py4j frees Java objects from weakref callbacks). Never let a
                # stop request end as a silent success.
                raise KeyboardInterrupt
            return status
        except (CLIError, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            if _INTERRUPTS.seen:
                # The Ctrl-C came in the middle of a py4j call: pyspark's own SIGINT handler
                # cancels jobs over the same, busy connection, and what reaches us is py4j's
                # broken call, not the KeyboardInterrupt. The user asked to stop; say so.
                raise KeyboardInterrupt from None
            if debug_enabled():
                raise
            from spark_udfs.cluster.errors import describe

            line = describe(exc)
            if line is None:
                raise
            raise CLIError(f"{line} (--debug for details)", EXIT_ERROR) from None

    return run_guarded


class _InterruptLatch:
    """Knows whether SIGINT arrived, whichever Python handler then ran: SparkContext replaces
    the handler while it starts, and its handler's failure, not a KeyboardInterrupt, is what
    can reach us. CPython's C-level handler writes every signal's number to the wakeup fd
    before any Python handler runs, so that pipe is the record."""

    def __init__(self) -> None:
        self._seen = False
        self._read_fd = -1

    def arm(self) -> None:
        import signal
        import threading

        if self._read_fd >= 0 or threading.current_thread() is not threading.main_thread():
            return  # the wakeup fd can only be set from the main thread
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        try:
            signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:
            os.close(r)
            os.close(w)
            return
        self._read_fd = r

    @property
    def seen(self) -> bool:
        import signal

        while not self._seen and self._read_fd >= 0:
            try:
                got = os.read(self._read_fd, 512)
            except BlockingIOError:
                break
            if not got:
                break
            self._seen = signal.SIGINT in got
        return self._seen


_INTERRUPTS = _InterruptLatch()


def _session(args: argparse.Namespace, locality: bool = False) -> Any:
    """The job's session; `locality`: a data-local scan's (spark_udfs.jobs.hostscan.LOCALITY_CONF
    unless --conf says otherwise)."""
    from spark_udfs.cluster.errors import MasterError, check_master
    from spark_udfs.cluster.session import JavaNotFoundError, get_session

    conf: Dict[str, str] = {}
    if locality:
        from spark_udfs.jobs.hostscan import LOCALITY_CONF

        conf.update(LOCALITY_CONF)
    for kv in args.conf:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise CLIError(f"--conf wants KEY=VALUE, not {kv!r}")
        conf[k.strip()] = v.strip()
    if not debug_enabled():
        # py4j reports a Ctrl-C inside a gateway call with logging.exception() on the root
        # logger, which prints a traceback through logging's default set-up; the command says
        # "interrupted" in one line itself (--debug keeps py4j's report).
        import logging

        root = logging.getLogger()
        if not root.handlers:
            root.addHandler(logging.NullHandler())
    try:
        check_master(args.master)
        spark = get_session(args.master, conf=conf, quiet=not debug_enabled())
        if not debug_enabled():
            # A failed task is logged at ERROR with its Java stack by the executor and the
            # scheduler; the command reports it in one line itself (--debug shows the log).
            spark.sparkContext.setLogLevel("FATAL")
        return spark
    except (JavaNotFoundError, MasterError) as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    except KeyboardInterrupt:
        # Ctrl-C while the JVM starts: pyspark has no handle on it yet and the JVM ignores
        # SIGINT (pyspark's choice), so it would outlive us; stop it, then report.
        _stop_child_processes()
        raise
    except Exception:
        if not _INTERRUPTS.seen:
            raise
        _stop_child_processes()  # as above, when the Ctrl-C broke a py4j call instead
        raise KeyboardInterrupt from None


def _stop_child_processes() -> None:
    """SIGTERM this process's children (during session start-up: the JVM being launched).
    Linux /proc only; elsewhere nothing is done."""
    import signal

    me = os.getpid()
    for stat_file in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat_file, encoding="ascii", errors="replace") as f:
                fields = f.read().rpartition(")")[2].split()
            if int(fields[1]) == me:
                os.kill(int(stat_file.split("/")[2]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue


@contextlib.contextmanager
def _progress(args: argparse.Namespace, spark: Any, label: str) -> Iterator[None]:
    """The one-line stage display on stderr while Spark works (terminal only, not --json)."""
    from spark_udfs.cluster.progress import SparkProgress

    with SparkProgress.for_session(spark, label, enabled=not getattr(args, "json", False)):
        yield


def _check_paths(paths: List[str]) -> None:
    for p in paths:
        if "://" not in p and not os.path.exists(p):
            raise CLIError(f"{p}: No such file or directory", EXIT_ERROR)


def _check_output(output: str, inputs: List[str]) -> None:
    """Exit 2 before anything is written when -o is an input, lies inside one or holds one:
    the tables are written with Spark's mode overwrite (it deletes first), so the job would
    destroy what it reads (a scan's tables, a replica's chunks/ directory)."""
    from merkle.replica.uri import overlaps

    for p in inputs:
        if overlaps(output, p):
            raise CLIError(
                f"-o {display(output)}: the output overlaps the input {display(p)} "
                f"(the same directory, or one inside the other): give -o a "
                f"directory apart from what is read",
                EXIT_ERROR,
            )


def _not_scanned(
    handler: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """`handler`, then, with --datanodes, each inventory host that has no row in the
    volumes table reported NOT_SCANNED on stderr in one line (exit 1 at least). The rows
    (spark_udfs.cluster.hosts.unscanned_hosts, VOLUME_SCHEMA) are added to the loaded volumes table
    (_load_chunks) for the report to show."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        if getattr(args, "datanodes", None) is None:
            if getattr(args, "ozone_conf", None) is not None:
                raise CLIError("--ozone-conf goes with --datanodes", EXIT_ERROR)
            return handler(args)
        from merkle.replica.errors import ReplicaError
        from merkle.replica.inventory import load_inventory

        try:  # before the JVM starts: a bad inventory costs nothing
            _LOAD_STATE["inventory"] = load_inventory(args.datanodes, args.ozone_conf)
        except (ReplicaError, OSError, ValueError) as exc:
            raise CLIError(str(exc), EXIT_ERROR) from None
        _LOAD_STATE["missing"] = []
        try:
            rc = handler(args)
        finally:
            _LOAD_STATE.pop("inventory", None)
        missing = _LOAD_STATE.pop("missing", [])
        hosts: Dict[Tuple[str, str], None] = {}  # a line per host, or per volume it lacks
        for row in missing:
            hosts.setdefault((row[1], row[5]))
        from merkle.cli import PROG, one_line

        for host, detail in hosts:
            print(
                f"{PROG}: NOT_SCANNED: host {one_line(host)}: {one_line(detail)}",
                file=sys.stderr,
                flush=True,
            )
        return max(rc, EXIT_FINDINGS) if hosts and rc != EXIT_ERROR else rc

    return run


#: the --datanodes inventory of the running verb (_not_scanned) and the NOT_SCANNED rows
#: _load_chunks found with it
_LOAD_STATE: Dict[str, Any] = {}


def _load_chunks(spark: Any, path: str) -> Dict[str, Any]:
    """_read_tables, and with a --datanodes inventory (_not_scanned) the NOT_SCANNED rows of
    its hosts that have no volume in the tables added to the volumes table."""
    out = _read_tables(spark, path)
    inventory = _LOAD_STATE.get("inventory")
    if inventory is not None:
        from spark_udfs.cluster.hosts import unscanned_hosts
        from spark_udfs.jobs.scan import volume_frame

        volumes = out.get("volumes")
        rows = unscanned_hosts(volumes if volumes is not None else [], inventory)
        _LOAD_STATE["missing"] = rows
        if rows:
            extra = volume_frame(spark, rows)
            out["volumes"] = extra if volumes is None else volumes.unionByName(extra)
    return out


def _read_tables(spark: Any, path: str) -> Dict[str, Any]:
    """{chunks, blocks?, containers?, errors?} DataFrames of a scan directory or a chunk table."""
    _check_paths([path])
    from spark_udfs.jobs.scan import TABLE_SCHEMAS
    from spark_udfs.tables import CHUNK_COLUMNS

    out: Dict[str, Any] = {}
    base = path.rstrip("/")
    if "://" in base or os.path.isdir(os.path.join(base, "chunks")):
        for name, schema in TABLE_SCHEMAS.items():
            p = base + "/" + name
            if "://" in base and name == "volumes":
                out[name] = _read_optional(spark, p, schema)
            elif "://" in base or os.path.exists(p):
                # the schema, never inferred: a table partitioned by datanode may hold no
                # file at all (no errors), and a datanode named "7" is not a number; a scan
                # written before a column existed reads it as null
                out[name] = spark.read.schema(schema).parquet(p)
        if out.get("volumes") is None:
            out.pop("volumes", None)
    elif (
        os.path.isdir(base)
        and not glob.glob(os.path.join(base, "*.parquet"))
        and not glob.glob(os.path.join(base, "*", "*.parquet"))
    ):
        raise CLIError(
            f"{path}: not a scan's output (no chunks/ table) nor a chunk table (no "
            "Parquet files): give the -o directory of 'crcmerkle spark scan'"
        )
    else:
        out["chunks"] = spark.read.parquet(base)
    if "chunks" not in out:
        raise CLIError(f"{path}: neither a scan output directory nor a chunk table")
    missing = [c for c in CHUNK_COLUMNS if c != "replica" and c not in out["chunks"].columns]
    if missing:
        raise CLIError(f"{path}: not a chunk table (missing column(s) {', '.join(missing)})")
    from spark_udfs.cluster.vouch import vet_emitted

    # emitted tables were checked by no driver: the data-local scan's checks, here
    return vet_emitted(spark, out, _LOAD_STATE.get("inventory"))


def _read_optional(spark: Any, location: str, schema: str) -> Any:
    """The table at `location` (a URI), or None when it does not exist (a scan written
    before that table was)."""
    from pyspark.errors import AnalysisException

    try:
        return spark.read.schema(schema).parquet(location)
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc):
            return None
        raise


def _diff_tables(t: Dict[str, Any]) -> Any:
    """The diff of loaded tables: a scan's three levels, or a bare chunk table."""
    from spark_udfs.jobs.diff import diff_chunks

    try:
        return diff_chunks(t["chunks"], t.get("blocks"), t.get("containers"))
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def _inventory(args: argparse.Namespace) -> Any:
    """The inventory of --datanodes (with --ozone-conf), or None; one line when bad. Read
    once per command and kept on `args`: `spark run` scans with it and then reports with it,
    and a file changed in between must not give the report other hosts than the scan."""
    if "_inventory" in vars(args):
        return vars(args)["_inventory"]
    vars(args)["_inventory"] = inv = _read_inventory(args)
    return inv


def _read_inventory(args: argparse.Namespace) -> Any:
    if not getattr(args, "datanodes", None):
        if getattr(args, "ozone_conf", None):
            raise CLIError("--ozone-conf goes with --datanodes (it gives the hosts' volumes)")
        return None
    from merkle.replica.inventory import InventoryError, load_inventory

    try:
        return load_inventory(args.datanodes, args.ozone_conf)
    except (InventoryError, OSError) as exc:
        strerror = getattr(exc, "strerror", None)
        raise CLIError(
            f"{args.datanodes}: {strerror}" if strerror else str(exc), EXIT_ERROR
        ) from None


def _check_read(read: Dict[str, Any], min_fraction: float) -> None:
    """Exit 2 with why when the run read nothing, or less than --min-read-fraction."""
    from spark_udfs.jobs.report import NothingVerifiedError, check_read

    try:
        check_read(read, min_fraction)
    except NothingVerifiedError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def _dir_display(location: str) -> str:
    """A directory as printed before "/NAME": without its trailing slashes (`-o scan/` is
    `scan/chunks`, not `scan//chunks`), a URI without its credentials, on one line."""
    from merkle.cli import one_line

    shown = display(location)
    return one_line(shown.rstrip("/") or shown)


def _write_file(location: str, data: bytes, label: str = "") -> None:
    """Write one file next to Spark's tables: atomically for a local path, through
    pyarrow.fs for a URI (an object store's PUT is atomic too). `label` starts the error
    line (e.g. the option that named the file)."""
    from merkle.replica.uri import open_fs

    try:
        if "://" not in location:
            write_atomic(location, data)
            return
        filesystem, path = open_fs(location)
        with filesystem.open_output_stream(path) as f:
            f.write(data)
    except OSError as exc:
        raise CLIError(f"{label}{display(location)}: {exc.strerror or exc}", EXIT_ERROR) from None
