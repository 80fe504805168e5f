"""`crcmerkle spark demo`: generate a faulty cluster, find the faults with the jobs, check them
against the ground truth, repair (spark_udfs.demo); with --hosts N the rehearsal of the
data-local path on simulated hosts (spark_udfs.rehearsal). Its directory's checks are
spark_udfs.cli.demodir's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

from merkle.cli import EXIT_ERROR, EXIT_FINDINGS, INT64_MAX, CLIError, int_in_range, positive_int
from merkle.replica.layout import REPAIR_IN_PLACE
from merkle.replica.layouts import layout_named
from spark_udfs.cli import common
from spark_udfs.cli.common import _dir_display, _guarded, _progress
from spark_udfs.cli.demodir import _clean_failed_demo, check_demo_dir, prepare_demo_dir
from spark_udfs.cli.options import _common

R = TypeVar("R")


def add_parser(sub: Any) -> None:
    """`crcmerkle spark demo`, added to `crcmerkle spark`'s subcommands."""
    m = sub.add_parser(
        "demo",
        help="generate a faulty cluster, find the faults, repair",
        description="Generate a small cluster with injected faults, run scan, "
        "diff and report on Spark and check that exactly the injected faults were "
        "found. With --layout crcmerkle it then repairs from the report "
        "('crcmerkle reconcile') and scans again; with the Ozone layout (the "
        "default) the repair is the datanodes' own, and the demo lists the "
        "Ozone reconcile commands instead.",
    )
    m.add_argument(
        "--dir",
        default="crcmerkle-demo",
        help="working directory: new, empty, or holding only an earlier demo "
        "(which is replaced) (default ./crcmerkle-demo)",
    )
    m.add_argument("--containers", type=positive_int, default=12, help="containers (default 12)")
    m.add_argument(
        "--seed",
        type=int_in_range(-INT64_MAX - 1, INT64_MAX),
        default=7,
        help="generator seed (default 7)",
    )
    m.add_argument(
        "--faults",
        default="default",
        help="fault mix as for 'crcmerkle generate --faults' (default: one or two of every type)",
    )
    m.add_argument(
        "--no-repair",
        action="store_true",
        help="stop after the check (--layout crcmerkle: no repair and re-scan)",
    )
    m.add_argument(
        "--layout",
        choices=("ozone", "crcmerkle", "bookkeeper"),
        default="ozone",
        help="replica layout to generate, as 'crcmerkle generate --layout' (default "
        "ozone: the repair is the datanodes' own, its commands are listed; "
        "crcmerkle: the demo also repairs with 'crcmerkle reconcile' and "
        "scans again; bookkeeper: four bookies, their scan and a decommission "
        "plan held back by a last good copy)",
    )
    m.add_argument(
        "--hosts",
        type=positive_int,
        metavar="N",
        help="rehearse the data-local path (root, Linux): a Spark standalone "
        "master and N workers on 127.0.0.2.., each in its own mount "
        "namespace seeing only its datanode's disks at /srv/ozone/disk0,1; "
        "the inventory, the data-local scan, the report naming hosts and a "
        "decommission plan for one host; everything is stopped and removed "
        "afterwards (N: 3 to 7)",
    )
    _common(m)
    m.set_defaults(func=_guarded(_demo))


def _demo(args: argparse.Namespace) -> int:
    from spark_udfs.demo import run_demo

    if args.hosts is not None:
        return _demo_hosts(args)
    if args.layout == "bookkeeper":
        return _demo_bookkeeper(args)
    work = args.dir
    res = _in_demo_dir(
        args,
        lambda spark: run_demo(
            work,
            containers=args.containers,
            seed=args.seed,
            faults=args.faults,
            master=args.master,
            repair=not args.no_repair,
            layout=args.layout,
            say=_say_between_stages,
        ),
    )
    if res.ok:
        # the demo repairs a layout it may repair in place (an Ozone datanode repairs its own)
        repaired = not args.no_repair and layout_named(args.layout).repair == REPAIR_IN_PLACE
        print(
            f"OK: the jobs found exactly the {len(res.findings.faults)} injected faults"
            + (", and the repair left only the unrecoverable chunks" if repaired else "")
            + (
                ""
                if not res.copies_ok
                else "; the copy check found exactly the injected differences between the keys "
                "and their copies"
            )
            + (
                ""
                if not res.plan_ok
                else "; the decommission plan kept the only good copy that Ozone's count "
                "would have let go"
            )
            + f"; everything is in {_dir_display(work)}/"
        )
        return 0
    print(
        f"FAILED: the findings differ from the ground truth (see above); files in "
        f"{_dir_display(work)}/"
    )
    return EXIT_FINDINGS


def _in_demo_dir(args: argparse.Namespace, step: Callable[[Any], R]) -> R:
    """step(spark) in the demo's directory: the directory checked before Spark starts (a
    refused one costs nothing), the session started (the demo reuses it, --conf applied),
    the directory prepared, the step run under the progress line; a failed run's files
    are removed, and a ReplicaError is one line, exit 2."""
    from merkle.replica.errors import ReplicaError

    work = args.dir
    check_demo_dir(work)
    spark = common._session(args)
    created = prepare_demo_dir(work)
    ok = False
    try:
        with _progress(args, spark, "demo"):
            res = step(spark)
        ok = True
    except ReplicaError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    finally:
        if not ok:
            _clean_failed_demo(work, created)
    return res


def _demo_bookkeeper(args: argparse.Namespace) -> int:
    """`demo --layout bookkeeper` (spark_udfs.demo.bookkeeper): bookies, not containers."""
    from spark_udfs.demo.bookkeeper import run_demo

    if args.containers != 12:
        raise CLIError(
            "--containers is for datanodes: the bookkeeper demo generates ledgers", EXIT_ERROR
        )
    work = args.dir
    res = _in_demo_dir(
        args,
        lambda spark: run_demo(
            work, spark, seed=args.seed, faults=args.faults, say=_say_between_stages
        ),
    )
    if res.ok:
        print(
            f"OK: the jobs found exactly the {res.expected} findings of the injected faults on "
            "the bookies"
            + (
                f"; the decommission plan held {res.leaving} back: it holds the only good copy "
                f"of ledger {res.entry[0]} entry {res.entry[1]}, which BookKeeper's own "
                "decommission would have lost"
                if res.leaving and res.entry
                else ""
            )
            + f"; everything is in {_dir_display(work)}/"
        )
        return 0
    why = "; ".join(
        w
        for w, bad in (
            ("the findings differ from the ground truth", not res.exact),
            (f"the plan did not hold {res.leaving} back", not res.plan_ok),
        )
        if bad
    )
    print(f"FAILED: {why} (see above); files in {_dir_display(work)}/")
    return EXIT_FINDINGS


def _demo_hosts(args: argparse.Namespace) -> int:
    """`demo --hosts N`: the rehearsal of the data-local path (spark_udfs.rehearsal.demo).
    What it needs and lacks is one line, exit 2, before anything is started."""
    from merkle.replica.errors import ReplicaError
    from spark_udfs.rehearsal.demo import check_requirements, run_hosts_demo, simulated_cluster
    from spark_udfs.rehearsal.simhosts import SimHostsUnavailable

    if args.master:
        raise CLIError("demo --hosts starts its own Spark master: not with --master", EXIT_ERROR)
    if args.layout != "ozone":
        raise CLIError(
            f"demo --hosts generates Ozone datanode volumes: not with --layout {args.layout}",
            EXIT_ERROR,
        )
    work = args.dir
    check_demo_dir(work)
    try:
        check_requirements(args.hosts)
    except SimHostsUnavailable as exc:
        raise CLIError(f"demo --hosts: {exc}", EXIT_ERROR) from None
    created = prepare_demo_dir(work)
    ok = False
    try:
        _say_between_stages(
            f"[1/6] generating {args.containers} containers x 3 replicas on "
            f"{args.hosts} datanodes x 2 volumes with injected faults, and "
            f"starting the simulated hosts"
        )
        with simulated_cluster(
            Path(work),
            args.hosts,
            containers=args.containers,
            seed=args.seed,
            faults=args.faults,
            say=_say_between_stages,
        ) as sim:
            args.master = sim.master_url
            args.conf = [f"{k}={v}" for k, v in sim.executor_conf().items()] + args.conf
            spark = common._session(args, locality=True)
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
        print(
            f"OK: the data-local scan of {args.hosts} hosts found exactly the "
            f"{len(res.findings.faults)} injected faults, the report names each replica's "
            f"host, and the decommission plan for {res.leaving} names it and its datanode; "
            f"everything is in {_dir_display(work)}/"
        )
        return 0
    why = "; ".join(
        w
        for w, bad in (
            ("the findings differ from the ground truth", not res.findings.exact),
            ("the report does not name every mismatched replica's host", not res.hosts_named),
            (f"the plan does not name {res.leaving}", not res.plan_ok),
        )
        if bad
    )
    print(f"FAILED: {why} (see above); files in {_dir_display(work)}/")
    return EXIT_FINDINGS


def _say_between_stages(text: str) -> None:
    """The demo's step lines: erase a progress line first (stderr) so they start clean."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
    print(text, flush=True)
