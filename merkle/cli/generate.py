"""`crcmerkle generate`: a synthetic cluster of replicas with injected faults and a manifest."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Tuple

from merkle.cli import (
    INT64_MAX,
    MAX_BUFFER_BYTES,
    PROG,
    CLIError,
    exit_status_help,
    int_in_range,
    positive_int,
    size_up_to,
)

DESCRIPTION = """\
Write a synthetic cluster OUT/dn<d>/vol<v>/... of container replicas (random data,
Ozone-style blocks and chunks scaled down), inject faults on chosen replicas, and write the
ground truth OUT/manifest.json: every fault and the exact errors 'crcmerkle scan' must
report for each replica. The same --seed gives the same bytes. With --layout bookkeeper:
BookKeeper bookies OUT/bookie-<n>/... instead, their ledger metadata, and the findings
'crcmerkle scan ... --ledger-metadata OUT/zookeeper' must report."""


def _epilog() -> str:
    from merkle.cli.bookkeeper import generator_fault_types
    from merkle.replica.generate import DEFAULT_FAULTS, FAULT_TYPES
    from merkle.replica.layout import GeneratedLayout
    from merkle.replica.layouts import layouts

    # the faults only one layout injects (Ozone's), each layout asked (a layout that
    # generates nothing, as a test's read-only one, has none)
    own = [
        (layout.name, tuple(layout.fault_types))
        for layout in layouts()
        if isinstance(layout, GeneratedLayout)
    ]
    own = [(name, kinds) for name, kinds in own if kinds]
    return (
        f"fault types: {', '.join(FAULT_TYPES)}\n"
        + "".join(f"--layout {name} only: {', '.join(kinds)}\n" for name, kinds in own)
        + f"--faults default = {DEFAULT_FAULTS}"
        + "".join(f" (+ one of each {name}-only fault with --layout {name})" for name, _ in own)
        + "\n"
        "see merkle/replica/generate.py for what each one does and reports\n"
        "--layout bookkeeper (bookies, their ledger metadata; merkle/replica/bookkeeper/"
        "generate.py):\n  "
        + ", ".join(generator_fault_types())
        + "\n  --faults default = one of each\n\n"
        "OUT must be new or empty, or hold only an earlier generate run (its marker file "
        ".crcmerkle-generate), which is replaced; a failed run removes what it wrote.\n\n"
        + exit_status_help("never (0 written, 2 could not)")
    )


#: most blocks per container --blocks takes (each is a file written in full)
MAX_BLOCKS = 100_000


def _range(text: str) -> Tuple[int, int]:
    lo, _, hi = text.partition("-")
    try:
        a, b = (int(lo), int(hi or lo)) if len(text) <= 40 else (0, 0)
    except ValueError:
        a = b = 0
    if not 1 <= a <= b <= MAX_BLOCKS:
        raise argparse.ArgumentTypeError(
            f"must be N or MIN-MAX with 1 <= MIN <= MAX <= {MAX_BLOCKS}, not {text[:60]!r}"
        )
    return a, b


class _DeprecatedDatanodes(argparse.Action):
    """generate's old --datanodes N: stored as --datanode-count, with a warning. Every other
    verb's --datanodes is an inventory FILE, so a count under that name misleads."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: Any = None,
    ) -> None:
        print(
            f"{PROG}: warning: generate --datanodes is deprecated: use --datanode-count "
            f"{values} (--datanodes names an inventory FILE in the other verbs)",
            file=sys.stderr,
            flush=True,
        )
        setattr(namespace, self.dest, values)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "generate",
        help="write a synthetic cluster of replicas with injected faults",
        description=DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "out",
        metavar="OUT",
        help="output directory: new, empty, or an earlier generate run (replaced)",
    )
    p.add_argument(
        "--datanode-count",
        dest="datanode_count",
        type=positive_int,
        default=3,
        metavar="N",
        help="datanodes to generate (default 3)",
    )
    p.add_argument(
        "--datanodes",
        dest="datanode_count",
        type=positive_int,
        metavar="N",
        action=_DeprecatedDatanodes,
        help="deprecated spelling of --datanode-count (it warns): elsewhere "
        "--datanodes names an inventory FILE",
    )
    p.add_argument("--volumes", type=positive_int, default=2, metavar="N", help="per datanode")
    p.add_argument(
        "--containers",
        type=positive_int,
        default=None,
        metavar="N",
        help="default: 12 with --layout ozone (room for its default fault mix, "
        "which adds the layout's own faults), 4 with --layout crcmerkle",
    )
    p.add_argument(
        "--replicas",
        type=positive_int,
        default=3,
        metavar="N",
        help="replicas of each container, on distinct datanodes (default 3)",
    )
    p.add_argument(
        "--blocks",
        type=_range,
        default=(2, 6),
        metavar="MIN-MAX",
        help="blocks per container (default 2-6)",
    )
    p.add_argument(
        "--block-size",
        type=size_up_to(MAX_BUFFER_BYTES),
        default=256 * 1024,
        metavar="SIZE",
        help="largest block (default 256KiB; Ozone: 256MB)",
    )
    p.add_argument(
        "--chunk-size",
        type=size_up_to(MAX_BUFFER_BYTES),
        default=64 * 1024,
        metavar="SIZE",
        help="chunk size (default 64KiB; Ozone: 4MB)",
    )
    p.add_argument(
        "--bytes-per-checksum",
        type=size_up_to(MAX_BUFFER_BYTES),
        default=4 * 1024,
        metavar="SIZE",
        help="window size (default 4KiB; Ozone: 16KiB)",
    )
    p.add_argument(
        "--algorithm",
        choices=("crc32", "crc32c", "mixed"),
        default="crc32",
        help="data checksum type (default crc32, Ozone's; mixed: per container)",
    )
    p.add_argument(
        "--faults",
        default="default",
        metavar="SPEC",
        help="TYPE[=COUNT],... or 'none' or 'default' (see below)",
    )
    p.add_argument(
        "--layout",
        choices=("ozone", "crcmerkle", "bookkeeper"),
        default="ozone",
        help="ozone (default): real datanode volumes (OUT/dn<d>/vol<v>/hdds/..., "
        "RocksDB container.db, .container files; the ozone extra), with the "
        "Ozone-only faults too; crcmerkle: OUT/dn<d>/vol<v>/<containerID> with "
        "block metadata in .blocks files (what 'crcmerkle reconcile' repairs); "
        "bookkeeper: BookKeeper bookies OUT/bookie-<n>/... and their ledger "
        "metadata (OUT/zookeeper/, OUT/ledger-metadata/), options below",
    )
    p.add_argument(
        "--mount-path",
        metavar="TEMPLATE",
        default=None,
        help="--layout ozone: the absolute path each volume will be mounted at, "
        "recorded as metadataPath/chunksPath in its .container files (Ozone "
        "reads there); {datanode} and {volume} are replaced by the indexes, "
        "e.g. '/data/disk{volume}' (default: where the volume is written)",
    )
    p.add_argument(
        "--om-db",
        action="store_true",
        help="--layout ozone: also write OUT/om.db, an Ozone Manager DB (RocksDB) "
        "whose keys are made of the generated blocks (object-store and "
        "file-system-optimised buckets, keys spanning containers), and each "
        "key's true size, blocks and CRCs in the manifest's 'keys'",
    )
    p.add_argument(
        "--seed",
        type=int_in_range(-INT64_MAX - 1, INT64_MAX),
        default=0,
        help="random seed: the same seed gives the same bytes (default 0)",
    )
    p.add_argument("--json", action="store_true", help="print the manifest")
    _add_bookkeeper_options(p)
    p.set_defaults(func=run)
    return p


def _quorum(text: str) -> Tuple[int, int, int]:
    parts = text.split("/") if len(text) <= 40 else []
    if len(parts) != 3 or not all(x.isdigit() for x in parts):
        raise argparse.ArgumentTypeError(f"must be E/W/A, such as 3/2/2, not {text[:40]!r}")
    e, w, a = map(int, parts)
    return e, w, a


def _size_range(text: str) -> Tuple[int, int]:
    lo, _, hi = text.partition("-")
    try:
        a, b = (int(lo), int(hi or lo)) if len(text) <= 40 else (-1, -1)
    except ValueError:
        a = b = -1
    if not 0 <= a <= b <= MAX_BUFFER_BYTES:
        raise argparse.ArgumentTypeError(
            f"must be N or MIN-MAX bytes with 0 <= MIN <= MAX, not {text[:60]!r}"
        )
    return a, b


def _add_bookkeeper_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--layout bookkeeper")
    g.add_argument("--bookies", type=positive_int, default=4, metavar="N", help="default 4")
    g.add_argument(
        "--ledger-dirs",
        type=positive_int,
        default=2,
        metavar="N",
        help="ledger directories per bookie (default 2)",
    )
    g.add_argument(
        "--storage",
        choices=("db", "interleaved", "sorted", "mixed"),
        default="db",
        help="db (default): DbLedgerStorage (RocksDB indexes); interleaved: "
        "InterleavedLedgerStorage (.idx files, entries in arrival order); sorted: "
        "SortedLedgerStorage, BookKeeper's default (.idx files, each flush sorted); "
        "mixed: the three in turn, bookie by bookie",
    )
    g.add_argument("--ledgers", type=positive_int, default=6, metavar="N", help="default 6")
    g.add_argument(
        "--entries",
        type=_range,
        default=(10, 30),
        metavar="MIN-MAX",
        help="entries per ledger (default 10-30)",
    )
    g.add_argument(
        "--entry-size",
        type=_size_range,
        default=(0, 512),
        metavar="MIN-MAX",
        help="payload bytes per entry (default 0-512)",
    )
    g.add_argument(
        "--quorum",
        type=_quorum,
        default=(3, 2, 2),
        metavar="E/W/A",
        help="ensemble size, write quorum, ack quorum (default 3/2/2)",
    )
    g.add_argument(
        "--log-size",
        type=size_up_to(1 << 30),
        default=6144,
        metavar="SIZE",
        help="entry-log size limit (logSizeLimit; default 6144, the golden cluster's, so "
        "that logs rotate; BookKeeper: 1GiB)",
    )


def default_containers(layout: str) -> int:
    """4, or 12 for a layout that injects faults of its own besides the common ones (Ozone's:
    the default mix of both does not fit in 4)."""
    from merkle.replica.layout import GeneratedLayout
    from merkle.replica.layouts import LayoutError, layout_named

    try:
        named = layout_named(layout)
    except LayoutError:  # an unknown name: the generator says so in one line
        return 4
    # a layout the generator does not write has no faults (the generator refuses it)
    return 12 if isinstance(named, GeneratedLayout) and named.fault_types else 4


def run(args: argparse.Namespace) -> int:
    if args.layout == "bookkeeper":
        from merkle.cli.bookkeeper import run_generate

        return run_generate(args)
    from merkle.replica.generate import (
        GeneratorConfig,
        GeneratorError,
        generate_cluster,
        parse_faults,
    )

    try:
        cfg = GeneratorConfig(
            datanodes=args.datanode_count,
            volumes=args.volumes,
            containers=(
                args.containers if args.containers is not None else default_containers(args.layout)
            ),
            replicas=args.replicas,
            min_blocks=args.blocks[0],
            max_blocks=args.blocks[1],
            block_size=args.block_size,
            chunk_size=args.chunk_size,
            bytes_per_checksum=args.bytes_per_checksum,
            algorithm=args.algorithm,
            faults=parse_faults(args.faults, args.layout),
            seed=args.seed,
            layout=args.layout,
            mount_path=args.mount_path,
            om_db=args.om_db,
        )
        manifest = generate_cluster(args.out, cfg)
    except GeneratorError as exc:
        raise CLIError(str(exc)) from None
    if args.json:
        json.dump(manifest, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
    else:
        reps = sum(len(c["replicas"]) for c in manifest["containers"].values())
        errs = sum(len(v) for v in manifest["expected_errors"].values())
        print(
            f"wrote {args.out}: {args.datanode_count} datanodes, {len(manifest['containers'])} "
            f"containers, {reps} replicas; {len(manifest['faults'])} faults "
            f"({errs} expected scan errors); manifest {args.out}/manifest.json"
            + (
                f"; OM DB {args.out}/om.db with {len(manifest['keys'])} keys"
                if "keys" in manifest
                else ""
            )
        )
    return 0
