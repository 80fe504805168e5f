"""`crcmerkle spark scan|diff|report|run|plan|copycheck|demo` (also `python -m spark_udfs ...`).

  scan PATH... -o OUT      verify replicas on Spark; Parquet tables
                           OUT/{chunks,blocks,containers,errors}
  diff SCAN -o OUT         hierarchical diff of a scan (or a chunk table); OUT/{containers,
                           pulls,unrecoverable,pending_deletions,plan} Parquet +
                           OUT/plan.json (counts, first commands)
  report SCAN [--json]     health summary + repair plan (diff computed on the fly)
  run PATH... -o OUT       scan, diff and report in one Spark session (with --decommission
                           or --maintenance: the plan instead of the report)
  plan SCAN --decommission DN,... --maintenance DN,...
                           can these datanodes stop? checksum-aware replica counts, what
                           holds each back, the copies that make it safe (spark_udfs.jobs.plan)
  copycheck --om-db CHECKPOINT --scan SCAN --target URI [--map SRC=DST] -o OUT
                           Ozone keys against their copies (S3, GCS, HDFS listings, a
                           directory) from stored checksums: MATCH, MISMATCH, MISSING,
                           EXTRA, SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED
                           (spark_udfs.jobs.copycheck)
  demo                     generate a faulty cluster, scan/diff/report it, check the
                           findings against the ground truth; then, for the crcmerkle
                           layout, repair and re-scan (Ozone's: its reconcile commands)
Repair with `crcmerkle reconcile --report REPORT.json` (the JSON of report/run; the full
command list is written by the executors next to it, REPORT.json.commands/).
Spark runs embedded (local[*]) unless --master or spark-submit says otherwise. On a terminal
each command shows its running Spark stages (tasks done/total) on one line of stderr.
Errors are one line `crcmerkle: error: ...`; --debug (or CRCMERKLE_DEBUG=1) shows Spark's log
and the full stack traces. A container no replica of which could be read is UNVERIFIED (exit
1); a run that read no replica, or less than --min-read-fraction of them, exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from merkle.cli import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    INT64_MAX,
    CLIError,
    add_debug_flag,
    debug_enabled,
    exit_status_help,
    int_in_range,
    positive_int,
    positive_size,
)
from merkle.replica.fileio import write_atomic
from merkle.replica.layout import REPAIR_IN_PLACE
from merkle.replica.layouts import layout_named
from merkle.replica.levels import WARNING
from spark_udfs.uri import child, display

__all__ = ["add_parser", "run"]

DESCRIPTION = __doc__.split("\n\n")[0] + """

Verify and diff the replicas of every container of a cluster with Apache Spark: executors read
block files themselves and checksum them natively; the diff goes container -> block -> chunk
and only shuffles what diverges."""

EPILOG = exit_status_help(
    "scan: a replica has errors, or with --strict warnings (2 if some replica could not be "
    "read at all); diff: a container's replicas differ or a chunk is unrecoverable "
    "(repairs pending); report, run: the same, or a replica has errors (UNHEALTHY; with "
    "--strict warnings too); run --decommission/--maintenance, plan: some listed datanode "
    "may not stop yet (copies or repairs are needed first); copycheck: some key's verdict "
    "is not MATCH (MISMATCH, MISSING, SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED; EXTRA too), "
    "unless --allow names it; demo: the findings differ from the injected faults")

SCAN_DESCRIPTION = """\
Verify container replicas on Spark: each executor reads the block files of the replicas it is
given (a path, or with --datanodes the volumes of its own host) and checksums them natively.
Writes Parquet tables under OUTPUT: chunks (one row per chunk: its recorded and computed
checksums), blocks, containers (each replica's status and container value) and errors (every
finding). 'crcmerkle spark diff' and 'report' read them; nothing is repaired here."""

DIFF_DESCRIPTION = """\
Compare the replicas of each container in a scan's tables, container -> block -> chunk
(only what diverges is shuffled). Writes Parquet tables under OUTPUT: containers (the verdict
of each), pulls (which replica takes which block from which peer), unrecoverable (chunks no
replica holds good), pending_deletions, plan; and OUTPUT/plan.json (counts, first commands)."""

REPORT_DESCRIPTION = """\
The health summary of a scan: how many containers are HEALTHY, UNHEALTHY, UNVERIFIED, ...,
the first container IDs of each state, and the repair plan (the diff is computed on the fly,
nothing is written but --report FILE). Repair with 'crcmerkle reconcile --report FILE'."""

RUN_DESCRIPTION = """\
scan, diff and report in one Spark session: the scan's and the diff's tables under OUTPUT,
the report on stdout (and --report FILE), the full repair command list under
OUTPUT/reconcile/. With --decommission or --maintenance: the decommission plan (as 'crcmerkle
spark plan') instead of the report."""

#: Marker file of a demo directory: a later demo may reuse a directory holding only this run.
DEMO_MARKER = ".crcmerkle-demo"
#: What a demo writes into its directory (anything else there is not ours: refuse it).
DEMO_ENTRIES = {DEMO_MARKER, "cluster", "scan", "rescan", "report.json",
                "report-after-repair.json",
                # the reports' full command lists (spark_udfs.jobs.report)
                "report.json.commands", "report-after-repair.json.commands",
                # the decommission step (spark_udfs.demo.decommission)
                "plan-cluster", "plan-scan", "plan-scan-after", "plan.json",
                # the copy-check step (spark_udfs.demo.copies)
                "copies", "copycheck", "copycheck.json",
                # --hosts: the inventory of the simulated hosts (spark_udfs.rehearsal.demo)
                "datanodes.json"}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="Spark master (default: local[*], or spark-submit's)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark setting (repeatable)")
    add_debug_flag(p)
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter


def _fraction(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, not {text!r}")
    return v


def _strict_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict", action="store_true",
                   help="count scan findings of level warning as errors (exit 1; in the "
                        "report, a container with warnings is UNHEALTHY; not used by the "
                        "decommission plan, which judges good copies by its own rule)")


def _read_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-read-fraction", type=_fraction, default=0.0, metavar="F",
                   help="fail (exit 2) unless at least this fraction of the replicas was "
                        "read (default 0: fail only when none was)")


def _report_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("--limit", type=positive_int, default=20,
                   help="repair commands per datanode per round (default 20, like Ozone)")
    p.add_argument("--replication", type=positive_int, default=3,
                   help="expected replicas per container (default 3)")
    p.add_argument("--first", type=positive_int, default=100,
                   help="container IDs listed per state (default 100)")
    p.add_argument("--report", metavar="FILE", help="also write the JSON report to FILE")
    _read_opt(p)


def _names(text: str) -> List[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"want DN[,DN...], not {text!r}")
    return names


def _plan_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--decommission", type=_names, action="extend", default=[],
                   metavar="DN[,DN...]", help="datanodes to decommission (leave for good): "
                   "each its UUID or its host name")
    p.add_argument("--maintenance", type=_names, action="extend", default=[],
                   metavar="DN[,DN...]", help="datanodes to put into maintenance (UUID or "
                   "host name)")
    p.add_argument("--min-healthy", type=positive_int, default=1,
                   help="good in-service copies a decommission keeps (default 1)")
    p.add_argument("--min-replicas", type=positive_int, default=None,
                   help="good in-service + maintenance copies a decommission needs "
                        "(default: --replication)")
    p.add_argument("--maintenance-min", type=positive_int, default=1,
                   help="good in-service copies maintenance keeps (default 1)")


def _rate(text: str) -> int:
    """argparse type: a byte rate (5MiB), or 0 for unlimited."""
    return 0 if text.strip() == "0" else positive_size(text)


def _scan_opts(p: argparse.ArgumentParser) -> None:
    """What scan and run share: the pass (data, trees, metadata), the data-local cluster
    scan's inventory, and the politeness on a live datanode."""
    # light modules only: the parser is built before the command checks for pyarrow
    from merkle.replica.politeio import DEFAULT_BYTES_PER_SECOND
    from spark_udfs.cluster.locality import DEFAULT_EXECUTOR_WAIT

    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--trees-only", action="store_true",
                      help="read the stored .tree files instead of the data (no data read)")
    mode.add_argument("--metadata-only", action="store_true",
                      help="the census: each replica's tree from its stored .tree where that "
                           "still describes its block metadata, else from the checksums the "
                           "client recorded (container.db); no data read")
    p.add_argument("--datanodes", metavar="FILE",
                   help="scan a cluster where its disks are: one task per (host, volume) of "
                        "this inventory, run on that host (the output of 'ozone admin "
                        "datanode list --json', or a JSON list of {host, uuid, volumes}); no "
                        "PATH then")
    p.add_argument("--ozone-conf", metavar="FILE",
                   help="an ozone-site.xml whose hdds.datanode.dir gives each host's volumes "
                        "(when the inventory lists none)")
    p.add_argument("--bytes-per-second", type=_rate, metavar="RATE", default=None,
                   help="read at most this many bytes per second per volume (e.g. 50MiB); "
                        f"with --datanodes the default is {DEFAULT_BYTES_PER_SECOND // 2**20} "
                        "MiB/s, safe on a live datanode (a 16 TB disk in 11 days), else "
                        "unlimited; 0: unlimited (as in 'crcmerkle scan')")
    p.add_argument("--no-idle-io", action="store_true",
                   help="with --datanodes: read in the normal I/O class (default: the idle "
                        "class, where the kernel's scheduler honours it)")
    p.add_argument("--keep-cache", action="store_true",
                   help="with --datanodes: leave what the scan read in the page cache "
                        "(default: dropped, the datanode's cache is left as it was)")
    p.add_argument("--also", action="append", type=str.lower,
                   choices=("crc64nvme", "crc32c", "crc32"), metavar="ALG",
                   help="also compute this CRC (crc64nvme, crc32c or crc32; repeatable) of "
                        "every window of each chunk and of each block read in full, from the "
                        "bytes the scan reads anyway: the chunks and blocks tables' column of "
                        "that name (binary, big-endian; a block's is S3's full-object "
                        "checksum of an object made of that block)")
    p.add_argument("--executor-wait", type=float, default=DEFAULT_EXECUTOR_WAIT,
                   metavar="SECONDS",
                   help="with --datanodes: how long to wait for every host's executor "
                        f"before the hosts without one are reported (default "
                        f"{DEFAULT_EXECUTOR_WAIT:g})")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("spark", help="scan, diff and report whole clusters on Spark",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="spark_command", metavar="ACTION", parser_class=type(p))
    s = sub.add_parser("scan", help="verify replicas; write chunk/block/container/error tables",
                       description=SCAN_DESCRIPTION)
    s.add_argument("paths", nargs="*", metavar="PATH",
                   help="replica, volume, datanode or cluster directory (or URI); none with "
                        "--datanodes")
    s.add_argument("-o", "--output", required=True, help="output directory (Parquet)")
    _scan_opts(s)
    _read_opt(s)
    _strict_opt(s)
    _common(s)
    s.set_defaults(func=_guarded(_scan))
    d = sub.add_parser("diff", help="compare replicas; write containers/pulls/plan",
                       description=DIFF_DESCRIPTION)
    d.add_argument("input", help="a scan output directory, or a chunk-table Parquet path")
    d.add_argument("-o", "--output", required=True,
                   help="output directory (Parquet tables and plan.json)")
    d.add_argument("--limit", type=positive_int, default=20,
                   help="repair commands per datanode per round (default 20)")
    _read_opt(d)
    _inventory_opt(d)
    _common(d)
    d.set_defaults(func=_guarded(_not_scanned(_diff)))
    r = sub.add_parser("report", help="health summary and repair plan of a scan",
                       description=REPORT_DESCRIPTION)
    r.add_argument("input", help="a scan output directory, or a chunk-table Parquet path")
    _report_opts(r)
    _strict_opt(r)
    _inventory_opt(r)
    _common(r)
    r.set_defaults(func=_guarded(_not_scanned(_report)))
    a = sub.add_parser("run", help="scan + diff + report in one session",
                       description=RUN_DESCRIPTION)
    a.add_argument("paths", nargs="*", metavar="PATH",
                   help="replica, volume, datanode or cluster directory (or URI); none with "
                        "--datanodes")
    a.add_argument("-o", "--output", required=True,
                   help="output directory: the scan's Parquet tables, the diff's, and "
                        "reconcile/ (the full command list)")
    _scan_opts(a)
    _report_opts(a)
    _strict_opt(a)
    _plan_opts(a)
    _common(a)
    a.set_defaults(func=_guarded(_run))
    pl = sub.add_parser("plan", help="can these datanodes be decommissioned / enter "
                        "maintenance? checksum-aware counts and a copy plan",
                        description="Ozone's decommission/maintenance replica counts "
                        "(HDDS-1881), counting only good replicas: clean and in the largest "
                        "group of equal container values. Exit 0: every listed datanode may "
                        "stop now; 1: copies (or repairs) are needed first; 2: bad input.")
    pl.add_argument("input", help="a scan output directory, or a chunk-table Parquet path")
    _report_opts(pl)
    _plan_opts(pl)
    _inventory_opt(pl)
    _common(pl)
    pl.set_defaults(func=_guarded(_not_scanned(_plan)))
    c = sub.add_parser("copycheck", help="prove Ozone keys' copies in S3, GCS, HDFS or a "
                       "directory from stored checksums (no data read)",
                       description=COPYCHECK_DESCRIPTION)
    c.add_argument("--om-db", required=True, metavar="CHECKPOINT",
                   help="a copy or checkpoint of the OM's om.db (opened read-only through a "
                        "private snapshot)")
    c.add_argument("--scan", required=True, metavar="SCAN_OUTPUT",
                   help="the output directory of 'crcmerkle spark scan' of the datanodes "
                        "(its chunks, blocks and containers tables)")
    c.add_argument("--target", required=True, metavar="URI",
                   help="s3://bucket/prefix[?endpoint_override=HOST:PORT&scheme=http&region=R], "
                        "gs://bucket/prefix?listing=FILE, hdfs://nn/path?listing=FILE, or a "
                        "local directory (the only target whose data is read: each copy whose key "
                        "has its name and size, in full)")
    c.add_argument("--map", action="append", default=[], metavar="SOURCE_PREFIX=TARGET_PREFIX",
                   help="name the copy of /volume/bucket/key: the longest matching source "
                        "prefix replaced by the target prefix (repeatable; with --map, keys "
                        "and objects under none of the prefixes are not compared; default: a "
                        "key's copy is named volume/bucket/key under the target)")
    c.add_argument("-o", "--output", required=True,
                   help="a new directory: keys/, key_blocks/, target_listing/, verdicts/ "
                        "(Parquet) and report.json")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument("--first", type=positive_int, default=20,
                   help="names listed per verdict (default 20)")
    c.add_argument("--allow", default="", metavar="VERDICT[,VERDICT...]",
                   help="verdicts that do not count as findings for the exit status (e.g. "
                        "EXTRA when the target holds more than the keys checked)")
    c.add_argument("--datanodes", metavar="FILE",
                   help="the inventory of hosts (`ozone admin datanode list --json`, or a JSON "
                        "list of {host, uuid, volumes}): only a replica on a volume it gives "
                        "the replica's host vouches for a block")
    c.add_argument("--ozone-conf", metavar="FILE",
                   help="with --datanodes: an ozone-site.xml whose hdds.datanode.dir gives "
                        "the hosts' volumes")
    _common(c)
    c.set_defaults(func=_guarded(_not_scanned(_copycheck)))
    m = sub.add_parser("demo", help="generate a faulty cluster, find the faults, repair",
                       description="Generate a small cluster with injected faults, run scan, "
                       "diff and report on Spark and check that exactly the injected faults were "
                       "found. With --layout crcmerkle it then repairs from the report "
                       "('crcmerkle reconcile') and scans again; with the Ozone layout (the "
                       "default) the repair is the datanodes' own, and the demo lists the "
                       "Ozone reconcile commands instead.")
    m.add_argument("--dir", default="crcmerkle-demo",
                   help="working directory: new, empty, or holding only an earlier demo "
                        "(which is replaced) (default ./crcmerkle-demo)")
    m.add_argument("--containers", type=positive_int, default=12,
                   help="containers (default 12)")
    m.add_argument("--seed", type=int_in_range(-INT64_MAX - 1, INT64_MAX), default=7,
                   help="generator seed (default 7)")
    m.add_argument("--faults", default="default",
                   help="fault mix as for 'crcmerkle generate --faults' (default: one or two "
                        "of every type)")
    m.add_argument("--no-repair", action="store_true",
                   help="stop after the check (--layout crcmerkle: no repair and re-scan)")
    m.add_argument("--layout", choices=("ozone", "crcmerkle"), default="ozone",
                   help="replica layout to generate, as 'crcmerkle generate --layout' (default "
                        "ozone: the repair is the datanodes' own, its commands are listed; "
                        "crcmerkle: the demo also repairs with 'crcmerkle reconcile' and "
                        "scans again)")
    m.add_argument("--hosts", type=positive_int, metavar="N",
                   help="rehearse the data-local path (root, Linux): a Spark standalone "
                        "master and N workers on 127.0.0.2.., each in its own mount "
                        "namespace seeing only its datanode's disks at /srv/ozone/disk0,1; "
                        "the inventory, the data-local scan, the report naming hosts and a "
                        "decommission plan for one host; everything is stopped and removed "
                        "afterwards (N: 3 to 7)")
    _common(m)
    m.set_defaults(func=_guarded(_demo))
    p.set_defaults(func=lambda args: _usage())
    return p


def _usage() -> int:
    raise CLIError("spark needs an action: scan, diff, report, run, plan, copycheck or demo; see "
                   "'crcmerkle spark --help'", EXIT_ERROR)


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
            raise CLIError(f"-o {display(output)}: the output overlaps the input {display(p)} "
                           f"(the same directory, or one inside the other): give -o a "
                           f"directory apart from what is read", EXIT_ERROR)


def _inventory_opt(p: argparse.ArgumentParser) -> None:
    """--datanodes FILE (and --ozone-conf) on the verbs that read scan tables: an inventory
    host with no volume in the tables is reported NOT_SCANNED (the --emit route: the host
    emitted nothing)."""
    p.add_argument("--datanodes", metavar="FILE",
                   help="the inventory of hosts (`ozone admin datanode list --json`, or a JSON "
                        "list of {host, uuid, volumes}): a host of which the tables hold no "
                        "volume is reported NOT_SCANNED (exit 1 at least)")
    p.add_argument("--ozone-conf", metavar="FILE",
                   help="with --datanodes: an ozone-site.xml whose hdds.datanode.dir gives "
                        "the hosts' volumes")


def _not_scanned(handler: Callable[[argparse.Namespace], int]
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
            print(f"{PROG}: NOT_SCANNED: host {one_line(host)}: {one_line(detail)}",
                  file=sys.stderr, flush=True)
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
        from spark_udfs.jobs.scan import VOLUME_SCHEMA

        volumes = out.get("volumes")
        rows = unscanned_hosts(volumes if volumes is not None else [], inventory)
        _LOAD_STATE["missing"] = rows
        if rows:
            extra = spark.createDataFrame(rows, VOLUME_SCHEMA)
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
    elif os.path.isdir(base) and not glob.glob(os.path.join(base, "*.parquet")) \
            and not glob.glob(os.path.join(base, "*", "*.parquet")):
        raise CLIError(f"{path}: not a scan's output (no chunks/ table) nor a chunk table (no "
                       "Parquet files): give the -o directory of 'crcmerkle spark scan'")
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
        raise CLIError(f"{args.datanodes}: {strerror}" if strerror else str(exc),
                       EXIT_ERROR) from None


def _scan_and_write(args: argparse.Namespace) -> Tuple[Any, Any]:
    """(session, ScanTables) after scanning args.paths, or every volume of the --datanodes
    inventory on its own host, into args.output (scan and run)."""
    from spark_udfs.jobs.scan import scan_replicas

    inventory = _inventory(args)
    if inventory is not None and args.paths:
        raise CLIError("give PATHs or --datanodes, not both (with an inventory every host's "
                       "volumes are scanned where they are)")
    if inventory is None and not args.paths:
        raise CLIError("nothing to scan: give PATHs, or --datanodes FILE for a whole cluster")
    if inventory is None and (args.no_idle_io or args.keep_cache):
        raise CLIError("--no-idle-io and --keep-cache go with --datanodes")
    if args.also and (args.trees_only or args.metadata_only):
        raise CLIError("--also computes its CRCs from the data read: not with --trees-only "
                       "or --metadata-only")
    if inventory is None:
        _check_paths(args.paths)
        _check_output(args.output, args.paths)
    else:  # the volumes of every host (a local -o inside one is on that host's disk too)
        _check_output(args.output, sorted({v for h in inventory.hosts for v in h.volumes}))
    spark = _session(args, locality=inventory is not None)
    with _progress(args, spark, "scan"):
        try:
            if inventory is not None:
                tables = _scan_hosts(args, spark, inventory)
            else:
                tables = scan_replicas(spark, args.paths, trees_only=args.trees_only,
                                       metadata_only=args.metadata_only,
                                       bytes_per_second=args.bytes_per_second or None,
                                       also=tuple(args.also or ()))
        except ValueError as exc:
            raise CLIError(str(exc), EXIT_ERROR) from None
        tables.write(args.output)
    return spark, tables


def _scan_hosts(args: argparse.Namespace, spark: Any, inventory: Any) -> Any:
    """The data-local scan of every (host, volume) of `inventory` (spark_udfs.jobs.hostscan)."""
    from merkle.replica.politeio import DEFAULT_BYTES_PER_SECOND
    from spark_udfs.jobs.hostscan import scan_datanodes

    rate = DEFAULT_BYTES_PER_SECOND if args.bytes_per_second is None else args.bytes_per_second
    return scan_datanodes(spark, inventory, trees_only=args.trees_only,
                          metadata_only=args.metadata_only, bytes_per_second=rate or None,
                          idle_io=not args.no_idle_io, drop_cache=not args.keep_cache,
                          executor_wait=max(0.0, args.executor_wait),
                          also=tuple(args.also or ()))


def _check_read(read: Dict[str, Any], min_fraction: float) -> None:
    """Exit 2 with why when the run read nothing, or less than --min-read-fraction."""
    from spark_udfs.jobs.report import NothingVerifiedError, check_read

    try:
        check_read(read, min_fraction)
    except NothingVerifiedError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def _scan(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from spark_udfs.jobs.report import read_summary

    spark, tables = _scan_and_write(args)
    with _progress(args, spark, "scan"):
        row = tables.replicas.agg(F.count(F.lit(1)).alias("n"), F.sum(
            F.col("verified").cast("int")).alias("read")).collect()[0]
        counts = tables.errors.agg(
            F.count(F.lit(1)).alias("all"),
            F.sum((F.col("severity") == WARNING).cast("int")).alias("warnings"),
            F.sum((F.col("error") == "SCAN_FAILED").cast("int")).alias("failed")).collect()[0]
    warns = int(counts["warnings"] or 0)
    errs, failed = int(counts["all"]) - warns, int(counts["failed"] or 0)
    read = read_summary(int(row["n"]), int(row["read"] or 0))
    # a census or trees-only pass reads recorded checksums alone: it never says "read"
    done = ("with recorded checksums read (no data read)" if args.trees_only
            or args.metadata_only else "read")
    print(f"scanned {read['replicas']} replica(s), {read['read']} {done}: {errs} error(s)"
          + (f", {warns} warning(s)" if warns else "")
          + (f", {failed} replica(s) could not be read" if failed else "")
          + f"; tables in {_dir_display(args.output)}/{{{','.join(tables.TABLES)}}}")
    _check_read(read, args.min_read_fraction)
    if failed:
        return EXIT_ERROR
    return EXIT_FINDINGS if errs or (args.strict and warns) else 0


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
    from spark_udfs.fs import open_fs

    try:
        if "://" not in location:
            write_atomic(location, data)
            return
        filesystem, path = open_fs(location)
        with filesystem.open_output_stream(path) as f:
            f.write(data)
    except OSError as exc:
        raise CLIError(f"{label}{display(location)}: {exc.strerror or exc}",
                       EXIT_ERROR) from None


#: repair commands listed in plan.json (the whole plan is the OUT/plan table)
PLAN_FIRST = 100
#: the "format" of the diff's plan.json: the repair plan (pulls between replicas), not the
#: decommission copy plan of `spark plan` ("crcmerkle-spark-plan", `replicate --report`)
REPAIR_PLAN_FORMAT = "crcmerkle-spark-repair-plan"


def _write_plan(res: Any, output: str, limit: int) -> Dict[str, Any]:
    """The plan written by the executors as OUT/plan (Parquet, spark_udfs.jobs.diff.plan_commands);
    only its counts and first commands come to the driver, for OUT/plan.json."""
    from pyspark.sql import functions as F

    from spark_udfs.jobs.diff import plan_commands

    cmds = plan_commands(res.pulls, limit)
    out = output.rstrip("/")
    cmds.write.mode("overwrite").parquet(out + "/plan")
    cmds = cmds.sparkSession.read.parquet(out + "/plan")
    row = cmds.agg(F.count(F.lit(1)).alias("n"), F.max("round").alias("last"),
                   F.sum("bytes").alias("bytes")).collect()[0]
    first = [r.asDict(recursive=True) for r in cmds.orderBy(
        "round", "container", "target", "source").limit(PLAN_FIRST).collect()]
    plan = {"format": REPAIR_PLAN_FORMAT, "version": 1, "datanode_limit": limit,
            "commands": int(row["n"]), "rounds": 0 if row["last"] is None
            else int(row["last"]) + 1, "bytes": int(row["bytes"] or 0), "table": "plan",
            "first": first}
    _write_file(child(output, "plan.json"), (json.dumps(plan, indent=1) + "\n").encode())
    return plan


def _diff(args: argparse.Namespace) -> int:
    _check_paths([args.input])  # before the JVM starts: a missing path costs nothing
    _check_output(args.output, [args.input])
    inventory = _LOAD_STATE.get("inventory")  # --datanodes (_not_scanned loaded it)
    spark = _session(args)
    t = _load_chunks(spark, args.input)
    out = args.output.rstrip("/")
    from pyspark.sql import functions as F

    from spark_udfs.jobs.report import read_summary

    with _progress(args, spark, "diff"):
        res = _diff_tables(t)
        res.containers.write.mode("overwrite").parquet(out + "/containers")
        res.pulls.write.mode("overwrite").parquet(out + "/pulls")
        res.unrecoverable.write.mode("overwrite").parquet(out + "/unrecoverable")
        res.pending_deletions.write.mode("overwrite").parquet(out + "/pending_deletions")
        plan = _write_plan(res, args.output, args.limit)
        row = res.containers.agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col("n_replicas")).alias("replicas"),
            F.sum(F.col("read_replicas")).alias("read"),
            F.sum((F.col("state") == "MISMATCH").cast("int")).alias("mism"),
            F.sum((F.col("state") == "UNVERIFIED").cast("int")).alias("unver")).collect()[0]
        n_unrec = res.unrecoverable.count()
        idx = _volumes_out(spark, t, inventory, out)
    mism, unver = int(row["mism"] or 0), int(row["unver"] or 0)
    print(f"{row['n']} container(s), {mism} mismatched, {unver} unverified, "
          f"{plan['commands']} repair command(s) in {plan['rounds']} round(s), {n_unrec} "
          f"unrecoverable chunk(s); tables in {_dir_display(out)}/")
    if idx is not None and idx.degraded:
        print(f"{idx.volumes_unverified} volume(s) not verified ("
              + ", ".join(f"{s} {n}" for s, n in sorted(idx.counts.items()) if s != "SCANNED")
              + f"), {len(idx.hosts_unverified)} host(s) with none verified: their replicas "
                "were not read ('spark report' lists them)")
    _check_read(read_summary(int(row["replicas"] or 0), int(row["read"] or 0)),
                args.min_read_fraction)
    return EXIT_FINDINGS if (mism or n_unrec or unver
                             or (idx is not None and idx.degraded)) else 0


def _volumes_out(spark: Any, t: Dict[str, Any], inventory: Any, out: str) -> Any:
    """The diff's OUT/volumes: the scan's volumes table with the inventory's hosts named and
    its hosts without a volume added as NOT_SCANNED; and their HostIndex (None without a
    volumes table or an inventory)."""
    from spark_udfs.cluster.hosts import host_index, volumes_with_inventory

    vols = t.get("volumes")
    if vols is None and inventory is None:
        return None
    if vols is not None:
        vols = volumes_with_inventory(spark, vols, inventory)
        vols.write.mode("overwrite").parquet(out + "/volumes")
    return host_index(spark, replicas=t.get("containers"), volumes=vols, inventory=inventory)


def _emit_report(args: argparse.Namespace, spark: Any, diff: Any, t: Dict[str, Any]) -> int:
    from spark_udfs.jobs.report import build_report, format_text, report_has_findings, to_json

    to, ref = _commands_location(args)
    with _progress(args, spark, "report"):
        rep = build_report(diff, replicas=t.get("containers"), errors=t.get("errors"),
                           replication=args.replication, first=args.first, limit=args.limit,
                           commands_to=to, commands_ref=ref,
                           strict=getattr(args, "strict", False), volumes=t.get("volumes"),
                           inventory=t.get("inventory"))
    if args.report:
        _write_file(args.report, to_json(rep).encode(), label="--report ")
    sys.stdout.write(to_json(rep) if args.json else format_text(rep))
    sys.stdout.flush()
    _check_read(rep["read"], args.min_read_fraction)
    return EXIT_FINDINGS if report_has_findings(rep) else 0


#: suffix of the full command list next to a --report FILE (FILE.commands/)
COMMANDS_SUFFIX = ".commands"


def _commands_location(args: argparse.Namespace) -> Tuple[Optional[str], Optional[str]]:
    """(where the executors write the report's full command list, how the JSON names it).
    Next to --report FILE as FILE.commands/, named relative to the report (the two move
    together); else, for `run`, OUT/reconcile/ named absolutely (the JSON goes to stdout);
    else nowhere (`report` without --report: only the first --first commands exist)."""
    if args.report:
        uri = "://" in args.report
        base, sep, query = args.report.partition("?") if uri else (args.report, "", "")
        base = base.rstrip("/")
        if not uri and os.path.isdir(base):
            raise CLIError(f"--report {args.report}: is a directory (give a file name)",
                           EXIT_ERROR)
        name = base.rsplit("/", 1)[-1] if uri else os.path.basename(base)
        return base + COMMANDS_SUFFIX + sep + query, name + COMMANDS_SUFFIX
    output = getattr(args, "output", None)
    if output:
        out = child(output, "reconcile")
        return out, display(out) if "://" in out else os.path.abspath(out)
    return None, None


def _report(args: argparse.Namespace) -> int:
    _check_paths([args.input])  # before the JVM starts
    spark = _session(args)
    t = _load_chunks(spark, args.input)
    t["inventory"] = _LOAD_STATE.get("inventory")  # --datanodes (_not_scanned loaded it)
    return _emit_report(args, spark, _diff_tables(t), t)


def _run(args: argparse.Namespace) -> int:
    spark, _ = _scan_and_write(args)
    t = _load_chunks(spark, args.output)
    t["inventory"] = _inventory(args)
    if args.decommission or args.maintenance:
        return _emit_plan(args, _diff_tables(t), t)
    return _emit_report(args, spark, _diff_tables(t), t)


def check_demo_dir(work: str) -> None:
    """CLIError unless `work` is absent, empty, or holds only an earlier demo (its marker
    file and the entries a demo writes), and is a directory only this user (or root) can
    change: a directory another user prepared, or a link, is refused (they could swap its
    entries for links to root's files while the demo writes). Changes nothing."""
    try:
        st = os.lstat(work)
    except FileNotFoundError:
        _check_trusted_parents(work)
        return
    if stat.S_ISLNK(st.st_mode):
        raise CLIError(f"{work}: is a symbolic link (give --dir a real directory)")
    if not stat.S_ISDIR(st.st_mode):
        raise CLIError(f"{work}: exists and is not a directory (give --dir a new directory)")
    _check_trusted(work, st)
    _check_trusted_parents(work)
    entries = set(os.listdir(work))
    if entries and (DEMO_MARKER not in entries or not entries <= DEMO_ENTRIES):
        raise CLIError(f"{work}: exists and is not empty, and is not an earlier demo's "
                       "directory (give --dir a new directory)")


def _check_trusted(path: str, st: os.stat_result) -> None:
    """CLIError unless `path` (its lstat `st`) is owned by this user or root, and writable by
    nobody else unless sticky (as /tmp: others cannot rename or remove what is ours)."""
    if st.st_uid not in (os.geteuid(), 0):
        raise CLIError(f"{path}: --dir is owned by another user (uid {st.st_uid}); give "
                       "--dir a directory of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise CLIError(f"{path}: --dir is writable by other users; give --dir a directory "
                       "of your own")


def _check_trusted_parents(work: str) -> None:
    """The directories above `work` (as given, links resolved) must be owned by this user or
    root, and writable by nobody else unless sticky: whoever can rename an entry there can
    put a link where the demo writes."""
    parent = Path(os.path.abspath(work)).parent.resolve()
    for d in [parent, *parent.parents]:
        try:
            st = os.stat(d)
        except FileNotFoundError:
            continue  # made by this demo (mkdir -p)
        if st.st_uid not in (os.geteuid(), 0) or (
                st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX):
            raise CLIError(f"{work}: its parent {d} can be changed by another user "
                           f"(uid {st.st_uid}, mode {stat.filemode(st.st_mode)}); give --dir "
                           "a directory of your own")


def _open_demo_dir(work: str) -> int:
    """A descriptor of the demo directory, opened without following a link, and checked
    again on the descriptor (the path may have changed since check_demo_dir)."""
    try:
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise CLIError(f"{work}: {exc.strerror or exc} (give --dir a real directory)") \
            from None
    try:
        _check_trusted(work, os.fstat(fd))
    except CLIError:
        os.close(fd)
        raise
    return fd


def _remove_at(dir_fd: int, name: str) -> None:
    """Remove the entry `name` of the directory `dir_fd`, a directory with its contents; a
    link is removed itself, never followed (each level is opened with O_NOFOLLOW)."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                 dir_fd=dir_fd)
    try:
        for entry in os.listdir(fd):
            _remove_at(fd, entry)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def _write_marker(dir_fd: int) -> None:
    """The marker, created new (O_CREAT|O_EXCL|O_NOFOLLOW): never written through a link."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(DEMO_MARKER, dir_fd=dir_fd)
    fd = os.open(DEMO_MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    with os.fdopen(fd, "w") as f:
        f.write("written by 'crcmerkle spark demo'; a later demo may replace this "
                "directory\n")


def prepare_demo_dir(work: str) -> bool:
    """Make `work` ready for a demo (see check_demo_dir): create it, or clear an earlier
    demo from it, and write the marker, all through a descriptor of the directory: no link
    is followed. Returns True when this call created the directory (so a failed run may
    remove it)."""
    check_demo_dir(work)
    created = False
    if not os.path.lexists(work):
        os.makedirs(os.path.dirname(os.path.abspath(work)), exist_ok=True)
        try:
            os.mkdir(work, 0o755)
            created = True
        except FileExistsError:
            check_demo_dir(work)  # appeared meanwhile: judge it as any existing directory
    fd = _open_demo_dir(work)
    try:
        entries = set(os.listdir(fd))
        if entries and (DEMO_MARKER not in entries or not entries <= DEMO_ENTRIES):
            raise CLIError(f"{work}: exists and is not empty, and is not an earlier demo's "
                           "directory (give --dir a new directory)")
        for name in entries - {DEMO_MARKER}:  # an earlier demo: replace it
            _remove_at(fd, name)
        _write_marker(fd)
    except OSError as exc:
        raise CLIError(f"{work}: cannot prepare the demo directory: "
                       f"{exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return created


def _clean_failed_demo(work: str, created: bool) -> None:
    """After a failed or interrupted demo: remove what it wrote (keep the marker, so the
    next run accepts the directory; remove the directory itself if this run created it).
    Through a descriptor of the directory: a link put in its place is removed, not followed."""
    try:
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # gone, or replaced by a link: nothing of ours to remove through it
    try:
        for name in sorted(DEMO_ENTRIES - {DEMO_MARKER} if not created
                           else set(os.listdir(fd))):
            with contextlib.suppress(FileNotFoundError):
                _remove_at(fd, name)
    except OSError:
        pass  # best effort: the run's own error is what is reported
    finally:
        os.close(fd)
    if created:
        with contextlib.suppress(OSError):
            os.rmdir(work)


def _plan(args: argparse.Namespace) -> int:
    if not (args.decommission or args.maintenance):
        raise CLIError("plan needs --decommission DN[,DN...] and/or --maintenance DN[,DN...]")
    _check_paths([args.input])  # before the JVM starts
    _check_leaving_known(args, _LOAD_STATE.get("inventory"))
    spark = _session(args)
    t = _load_chunks(spark, args.input)
    t["inventory"] = _LOAD_STATE.get("inventory")  # --datanodes (_not_scanned loaded it)
    return _emit_plan(args, _diff_tables(t), t)


def _check_leaving_known(args: argparse.Namespace, inventory: Any) -> None:
    """With an inventory, every --decommission/--maintenance name is one of its hosts (a
    name, an address or a datanode UUID): a mistyped host is one line before the JVM starts,
    never a plan for a datanode nobody has."""
    if inventory is None:
        return
    uuids = {u.lower() for u in inventory.by_uuid()}
    for option, names in (("--decommission", args.decommission or ()),
                          ("--maintenance", args.maintenance or ())):
        for name in names:
            if inventory.host_named(name) is None and name.lower() not in uuids:
                raise CLIError(f"{option} {name}: not a host, address or datanode UUID of the "
                               f"inventory (--datanodes {args.datanodes})", EXIT_ERROR)


def _emit_plan(args: argparse.Namespace, diff: Any, t: Dict[str, Any]) -> int:
    from spark_udfs.jobs.plan import build_plan, format_text, plan_read, to_json

    # a scan that read nothing (or too little) cannot say which copies are good: exit 2
    read = plan_read(diff)
    _check_read(read, args.min_read_fraction)
    try:
        plan = build_plan(diff, decommission=args.decommission, maintenance=args.maintenance,
                          errors=t.get("errors"), blocks=t.get("blocks"), chunks=t["chunks"],
                          replication=args.replication, min_healthy=args.min_healthy,
                          min_replicas=args.min_replicas, maintenance_min=args.maintenance_min,
                          limit=args.limit, first=args.first, read=read,
                          replicas=t.get("containers"), volumes=t.get("volumes"),
                          inventory=t.get("inventory"))
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if args.report:
        _write_file(args.report, to_json(plan).encode(), label="--report ")
    sys.stdout.write(to_json(plan) if args.json else format_text(plan))
    return 0 if plan["summary"]["held_back"] == 0 else EXIT_FINDINGS


COPYCHECK_DESCRIPTION = (
    "Every key of an OM DB checkpoint against its copy in a target, by name, proved from the "
    "checksums both sides already store: the key's full-object CRC is composed from the "
    "window checksums its datanodes recorded (taken from a replica the scan verified), the "
    "copy's from what the store keeps (S3 CRC32/CRC32C/CRC64NVME, full-object or composite "
    "with its parts; GCS crc32c; HDFS COMPOSITE-CRC). Verdicts: MATCH, MISMATCH, MISSING, "
    "EXTRA, SIZE_DIFFERS, NOT_COMPARABLE (no algorithm in common: which, and why) and "
    "UNVERIFIED (the source cannot be vouched for: why). Ozone CRC32 keys compare with CRC32 "
    "copies, CRC32C keys with CRC32C ones; any other algorithm needs the scan to have "
    "recorded it (crcmerkle spark scan --also crc64nvme|crc32c|crc32). Exit 0: every key "
    "MATCHes (and nothing is EXTRA, unless --allow); 1: findings; 2: bad input.")


def _copycheck(args: argparse.Namespace) -> int:
    from merkle.cli import one_line
    from merkle.copies.keymap import parse_map
    from merkle.copies.verdicts import VERDICTS

    allowed = tuple(v.strip().upper() for v in args.allow.split(",") if v.strip())
    bad = [v for v in allowed if v not in VERDICTS]
    if bad:
        raise CLIError(f"--allow {bad[0]}: one of {', '.join(VERDICTS)}", EXIT_ERROR)
    try:
        names = parse_map(args.map)
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    _check_paths([args.om_db, args.scan])
    out = args.output
    if os.path.lexists(out) and (not os.path.isdir(out) or os.path.islink(out) or os.listdir(out)):
        raise CLIError(f"{out}: exists and is not an empty directory (give -o a new one)",
                       EXIT_ERROR)
    # what a user can get wrong is found before the JVM starts: each costs nothing
    try:  # the target's URI, and that it is there (directory, listing file, boto3)
        from merkle.copies.targets import TargetError, open_target

        open_target(args.target).preflight()
    except (ValueError, TargetError) as exc:
        raise CLIError(f"--target: {one_line(str(exc))}", EXIT_ERROR) from None
    _check_scan_output(args.scan)
    inventory = _read_inventory(args)
    created = not os.path.lexists(out)
    ok = False
    try:
        rc = _copycheck_into(args, out, names, allowed, inventory)
        ok = True
        return rc
    finally:
        if not ok:  # a failed check leaves no partial output (a later run may reuse -o)
            _remove_output(out, created)


def _check_scan_output(scan: str) -> None:
    """--scan names a scan's output holding at least one replica (a local directory; a URI
    is read by Spark as it is): one line, before the JVM starts, when it does not."""
    if "://" in scan:
        return
    tables = ("chunks", "blocks", "containers")
    missing = [n for n in tables if not os.path.isdir(os.path.join(scan, n))]
    if not os.path.isdir(scan) or missing:
        raise CLIError(f"{scan}: not a scan's output (no {', '.join(missing or tables)} "
                       "table): give the -o directory of 'crcmerkle spark scan'", EXIT_ERROR)
    if not _has_rows(os.path.join(scan, "containers")):
        raise CLIError(f"{scan}: the scan's output holds no replica (an empty scan: nothing "
                       "can vouch for a key)", EXIT_ERROR)


def _has_rows(table: str, limit: int = 100_000) -> bool:
    """Whether a Parquet table directory (partitioned or not) holds a row: file footers
    only, stopping at the first file with rows; at most `limit` entries are looked at."""
    import pyarrow.parquet as pq

    seen = 0
    for where, dirs, files in os.walk(table):
        dirs.sort()
        for f in sorted(files):
            seen += 1
            if seen > limit:
                return True  # too many to look at: let the job read them
            if not f.endswith(".parquet"):
                continue
            try:
                if pq.ParquetFile(os.path.join(where, f)).metadata.num_rows > 0:
                    return True
            except Exception as exc:  # noqa: BLE001  pyarrow raises several kinds
                from merkle.cli import one_line

                raise CLIError(f"{os.path.join(where, f)}: not a Parquet file of a scan "
                               f"({one_line(str(exc))[:200]})", EXIT_ERROR) from None
    return False


def _remove_output(out: str, created: bool) -> None:
    """Remove what a failed copy check wrote in `out` (the directory itself if it made it)."""
    import shutil

    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    try:
        entries = os.listdir(out)
    except OSError:
        return
    for name in entries:
        path = os.path.join(out, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _copycheck_into(args: argparse.Namespace, out: str, names: Any, allowed: Tuple[str, ...],
                    inventory: Any) -> int:
    """The copy check proper, writing into `out`: the key map (before the JVM starts: a
    --map that names no key costs nothing), then the job and the report."""
    from merkle.cli import one_line
    from merkle.copies.omdb import OmDBError
    from merkle.copies.report import format_text, to_json
    from merkle.copies.targets import TargetError
    from merkle.replica.uri import display as show_uri
    from spark_udfs.jobs.copycheck import write_key_map

    os.makedirs(out, exist_ok=True)
    try:
        key_map = write_key_map(args.om_db, out, names)
    except OmDBError as exc:
        raise CLIError(f"--om-db: {one_line(str(exc))}", EXIT_ERROR) from None
    problem = key_map.stats.problem()
    if problem is not None:
        raise CLIError(problem, EXIT_ERROR)
    spark = _session(args)
    t = _load_chunks(spark, args.scan)
    missing = [n for n in ("chunks", "blocks", "containers") if t.get(n) is None]
    if missing:
        raise CLIError(f"{args.scan}: not a scan output directory (no {', '.join(missing)} "
                       "table)", EXIT_ERROR)
    from spark_udfs.jobs.copycheck import copycheck

    # what it is doing, on a terminal only (as the stage display): never mixed into an error
    say = (lambda m: print(f"crcmerkle: {m}", file=sys.stderr)) \
        if not args.json and sys.stderr.isatty() else (lambda m: None)
    try:
        with _progress(args, spark, "copycheck"):
            res = copycheck(spark, args.om_db, t, args.target, out, names=names,
                            first=args.first, say=say, key_map=key_map, inventory=inventory)
    except (OmDBError, TargetError, ValueError) as exc:
        raise CLIError(one_line(str(exc)), EXIT_ERROR) from None
    objects = max(res.objects, 1)
    report = {
        "om_db": os.path.abspath(args.om_db), "scan": show_uri(args.scan),
        "target": res.target, "keys": res.keys, "out_of_scope_keys": res.out_of_scope_keys,
        "objects": res.objects, "out_of_scope_objects": res.out_of_scope_objects,
        "counts": res.counts, "findings": res.findings(allowed), "allowed": list(allowed),
        "reads_data": res.reads_data,
        "inventory": os.path.abspath(args.datanodes) if args.datanodes else None,
        "cost": {"bytes_read": res.bytes_read, "list_requests": res.list_requests,
                 "object_requests": res.object_requests,
                 "max_requests_per_object": res.max_requests_per_object,
                 "requests_per_object": (res.object_requests + res.list_requests) / objects},
        "om_problem_count": res.om_problem_count, "om_problems": res.om_problems,
        "first": res.first, "verdicts": os.path.abspath(os.path.join(out, "verdicts")),
        "block_sources": os.path.abspath(os.path.join(out, "block_sources")),
    }
    _write_file(os.path.join(out, "report.json"), to_json(report).encode())
    sys.stdout.write(to_json(report) if args.json else format_text(report))
    sys.stdout.flush()
    return EXIT_FINDINGS if report["findings"] else 0


def _demo(args: argparse.Namespace) -> int:
    from merkle.replica.errors import ReplicaError
    from spark_udfs.demo import run_demo

    if args.hosts is not None:
        return _demo_hosts(args)
    work = args.dir
    check_demo_dir(work)  # before Spark starts: a refused directory costs nothing
    spark = _session(args)  # the demo reuses this session (getOrCreate), with --conf applied
    created = prepare_demo_dir(work)
    ok = False
    try:
        with _progress(args, spark, "demo"):
            res = run_demo(work, containers=args.containers, seed=args.seed,
                           faults=args.faults, master=args.master, repair=not args.no_repair,
                           layout=args.layout, say=_say_between_stages)
        ok = True
    except ReplicaError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    finally:
        if not ok:
            _clean_failed_demo(work, created)
    if res.ok:
        # the demo repairs a layout it may repair in place (an Ozone datanode repairs its own)
        repaired = not args.no_repair and layout_named(args.layout).repair == REPAIR_IN_PLACE
        print(f"OK: the jobs found exactly the {len(res.findings.faults)} injected faults"
              + (", and the repair left only the unrecoverable chunks" if repaired else "")
              + ("" if not res.copies_ok else
                 "; the copy check found exactly the injected differences between the keys "
                 "and their copies")
              + ("" if not res.plan_ok else
                 "; the decommission plan kept the only good copy that Ozone's count "
                 "would have let go")
              + f"; everything is in {_dir_display(work)}/")
        return 0
    print(f"FAILED: the findings differ from the ground truth (see above); files in "
          f"{_dir_display(work)}/")
    return EXIT_FINDINGS


def _demo_hosts(args: argparse.Namespace) -> int:
    """`demo --hosts N`: the rehearsal of the data-local path (spark_udfs.rehearsal.demo).
    What it needs and lacks is one line, exit 2, before anything is started."""
    from merkle.replica.errors import ReplicaError
    from spark_udfs.rehearsal.demo import check_requirements, run_hosts_demo, simulated_cluster
    from spark_udfs.rehearsal.simhosts import SimHostsUnavailable

    if args.master:
        raise CLIError("demo --hosts starts its own Spark master: not with --master",
                       EXIT_ERROR)
    if args.layout != "ozone":
        raise CLIError("demo --hosts generates Ozone datanode volumes: not with --layout "
                       f"{args.layout}", EXIT_ERROR)
    work = args.dir
    check_demo_dir(work)
    try:
        check_requirements(args.hosts)
    except SimHostsUnavailable as exc:
        raise CLIError(f"demo --hosts: {exc}", EXIT_ERROR) from None
    created = prepare_demo_dir(work)
    ok = False
    try:
        _say_between_stages(f"[1/6] generating {args.containers} containers x 3 replicas on "
                            f"{args.hosts} datanodes x 2 volumes with injected faults, and "
                            f"starting the simulated hosts")
        with simulated_cluster(Path(work), args.hosts, containers=args.containers,
                               seed=args.seed, faults=args.faults,
                               say=_say_between_stages) as sim:
            args.master = sim.master_url
            args.conf = [f"{k}={v}" for k, v in sim.executor_conf().items()] + args.conf
            spark = _session(args, locality=True)
            try:
                with _progress(args, spark, "demo"):
                    res = run_hosts_demo(Path(work), sim, spark, say=_say_between_stages)
            finally:
                spark.stop()  # before its executors' workers go
        ok = True
    except SimHostsUnavailable as exc:
        raise CLIError(f"demo --hosts: {exc}", EXIT_ERROR) from None
    except ReplicaError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    finally:
        if not ok:
            _clean_failed_demo(work, created)
    if res.ok:
        print(f"OK: the data-local scan of {args.hosts} hosts found exactly the "
              f"{len(res.findings.faults)} injected faults, the report names each replica's "
              f"host, and the decommission plan for {res.leaving} names it and its datanode; "
              f"everything is in {_dir_display(work)}/")
        return 0
    why = "; ".join(w for w, bad in (
        ("the findings differ from the ground truth", not res.findings.exact),
        ("the report does not name every mismatched replica's host", not res.hosts_named),
        (f"the plan does not name {res.leaving}", not res.plan_ok)) if bad)
    print(f"FAILED: {why} (see above); files in {_dir_display(work)}/")
    return EXIT_FINDINGS


def _say_between_stages(text: str) -> None:
    """The demo's step lines: erase a progress line first (stderr) so they start clean."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
    print(text, flush=True)


def run(argv: Optional[List[str]] = None) -> int:
    """`python -m spark_udfs ...`: the same commands without the `crcmerkle spark` prefix."""
    from merkle import cli

    cli.register("merkle.cli.spark")
    return cli.main(["spark", *(sys.argv[1:] if argv is None else argv)])
