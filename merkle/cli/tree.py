"""`crcmerkle tree show|diff|build|merge`: Ozone container checksum trees (`.tree` files)."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any, Dict, List

import numpy as np

from merkle.cli import EXIT_ERROR, INT64_MAX, CLIError, exit_status_help, int_in_range

DESCRIPTION = """\
Inspect, compare, build and merge Apache Ozone container checksum trees: the
<containerID>.tree files (ContainerChecksumInfo protobuf) datanodes keep per replica."""

BUILD_EPILOG = """\
input table (CSV with a header row, or Parquet), one row per chunk:
  block_id          local block ID (signed 64-bit integer)
  offset            chunk offset in the block file
  length            chunk length in bytes
  checksums         the chunk's stored window checksums, in order. CSV: hex, one token per
                    window separated by spaces (8 hex digits for CRC32/CRC32C windows; any
                    even length for SHA256/MD5). Parquet: list<uint32> (CRC values), list<binary>
                    (stored bytes) or the CSV string form. Empty = checksum type NONE.
  leaf              instead of checksums: the chunk's tree value (CSV: hex; Parquet: integer)
  checksum_matches  optional, true/false (default true)
  deleted           optional, true/false: the row's block is a tombstone (its value is kept,
                    computed from its rows, and its chunks are dropped)
Rows may come in any order; a later row replaces an earlier one at the same (block, offset)."""

DIFF_EPILOG = """\
Unrecoverable chunks (both replicas healthy but different) are listed but need no repair
from this peer. Unhealthy peer chunks that cannot be pulled are counted
(unhealthy_chunks_filtered, Ozone's numUnhealthyChunksFiltered): when it is not 0 this peer
cannot make the replica whole.

""" + exit_status_help(
    "OURS must pull something from PEER (2: unreadable or corrupt tree, "
    "trees of different containers)"
)
OTHER_EPILOG = exit_status_help("never (0 done, 2 could not)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "tree",
        help="Ozone container checksum trees (.tree files)",
        description=DESCRIPTION,
        epilog=exit_status_help("diff: OURS must pull something from PEER"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="tree_command", metavar="ACTION", parser_class=type(p))
    show = sub.add_parser(
        "show",
        help="summarise a .tree file",
        epilog=OTHER_EPILOG,
        description="Summarise one <containerID>.tree file: its container, "
        "data checksum, blocks and chunks (--blocks: each of them).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("file", help="a <containerID>.tree file")
    show.add_argument(
        "--json", action="store_true", help="the whole tree as JSON (checksums in Ozone's hex)"
    )
    show.add_argument("--blocks", action="store_true", help="list every block and chunk")
    show.set_defaults(func=_show)

    d = sub.add_parser(
        "diff",
        help="what OURS must pull from PEER",
        epilog=DIFF_EPILOG,
        description="Compare two .tree files of one container, as Ozone's "
        "reconciliation does: the blocks and chunks OURS lacks or holds "
        "corrupt that PEER holds healthy.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("ours", help="the .tree of the replica to repair")
    d.add_argument("peer", help="the .tree of the replica to pull from")
    d.add_argument("--json", action="store_true", help="the report as JSON")
    d.set_defaults(func=_diff)

    b = sub.add_parser(
        "build",
        help="build a .tree from a chunk-metadata table",
        description="Build a container's .tree file from a table of its chunks "
        "and their stored window checksums (the format is below).",
        epilog=BUILD_EPILOG + "\n\n" + OTHER_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("table", help="CSV or Parquet file ('-' = CSV on stdin)")
    b.add_argument("-o", "--output", required=True, help="the .tree file to write (atomically)")
    b.add_argument(
        "--container-id",
        type=int_in_range(0, INT64_MAX),
        required=True,
        help="the container's ID (0 to 2^63-1, a Java long)",
    )
    b.add_argument("--format", choices=["csv", "parquet"], help="default: from the extension")
    b.set_defaults(func=_build)

    m = sub.add_parser(
        "merge",
        help="merge a scanned tree into the stored one",
        description="Merge a freshly scanned tree into the stored one as Ozone "
        "does after a scan, and write the result.",
        epilog=OTHER_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    m.add_argument("stored", help="stored tree (missing, empty or corrupt = no tree, as Ozone)")
    m.add_argument("scanned", help="the tree a scan just computed")
    m.add_argument(
        "-o", "--output", required=True, help="the merged .tree file to write (atomically)"
    )
    m.set_defaults(func=_merge)
    p.set_defaults(func=lambda args: _usage(p))
    return p


def _usage(p: argparse.ArgumentParser) -> int:
    raise CLIError(
        "tree needs an action: show, diff, build or merge; see 'crcmerkle tree --help'", EXIT_ERROR
    )


def _read(path: str, **kw: Any):
    return _read_with_raw(path, **kw)[0]


def _read_with_raw(path: str, **kw: Any):
    """(the tree of the .tree file `path`, its raw bytes); (None, None) when missing_ok and
    it is missing, (None, raw) when corrupt_ok and it is corrupt."""
    from merkle.replica.safeopen import read_named
    from merkle.trees.treefile import TreeFileError, tree_from_bytes

    try:
        try:
            data = read_named(path)  # size-capped and fstat-checked before reading
        except FileNotFoundError:
            if kw.get("missing_ok"):
                return None, None
            raise
        try:
            return tree_from_bytes(data, source=path), data
        except TreeFileError:
            if kw.get("corrupt_ok"):
                return None, data
            raise
    except TreeFileError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    except OSError as exc:
        raise CLIError(f"{path}: {exc.strerror or exc}", EXIT_ERROR) from None


def _show(args: argparse.Namespace) -> int:
    from merkle.trees.ozone import format_checksum

    tree = _read(args.file)
    if args.json:
        json.dump(tree.to_dict(), sys.stdout)
        sys.stdout.write("\n")
        return 0
    s = tree.summary()
    checksum = s["data_checksum"] or "none (tree not generated)"
    print(f"container {s['container_id']}  data checksum {checksum}")
    print(
        f"  {s['blocks']} blocks ({s['live_blocks']} live, {s['deleted_blocks']} deleted), "
        f"{s['chunks']} chunks, {s['unhealthy_chunks']} unhealthy, {s['bytes']} bytes"
    )
    for problem in tree.inconsistencies():
        print(f"  inconsistent: {problem}")
    if args.blocks:
        for blk in tree.blocks():
            state = "deleted" if blk.deleted else f"{len(blk.chunks)} chunks"
            print(f"  block {blk.block_id}  {format_checksum(blk.value)}  {state}")
            for c in blk.chunks:
                flag = "" if c.checksum_matches else "  UNHEALTHY"
                print(f"    @{c.offset} +{c.length}  {format_checksum(c.value)}{flag}")
    return 0


def _fmt_chunks(d: Dict[int, np.ndarray]) -> List[str]:
    return [
        f"    block {b}: offsets {', '.join(str(int(o)) for o in offs)}" for b, offs in d.items()
    ]


def _diff(args: argparse.Namespace) -> int:
    from merkle.trees.diff import ContainerIDMismatchError, diff

    ours, peer = _read(args.ours), _read(args.peer)
    try:
        report = diff(ours, peer)
    except ContainerIDMismatchError as exc:
        # Ozone refuses such a diff (CONTAINER_ID_MISMATCH): the work cannot be done.
        raise CLIError(
            f"{args.ours} is container {exc.ours} but {args.peer} is container "
            f"{exc.peer}: only replicas of one container can be diffed",
            EXIT_ERROR,
        ) from None
    if args.json:
        json.dump(report.to_dict(), sys.stdout)
        sys.stdout.write("\n")
        return 1 if report.needs_repair else 0
    d = report.to_dict()
    print(f"container {d['container_id']}: ours {d['ours']}, peer {d['peer']}")
    if report.roots_equal:
        print("  container checksums match: nothing to repair")
        return 0
    c = report.counts()
    if report.needs_repair:
        print("  repair needed from this peer:")
    else:
        print("  nothing to repair from this peer")
    if c["missing_blocks"]:
        print(
            f"  missing blocks ({c['missing_blocks']}): "
            + ", ".join(str(b) for b in d["missing_blocks"])
        )
    if c["missing_chunks"]:
        print(f"  missing chunks ({c['missing_chunks']}):")
        print("\n".join(_fmt_chunks(report.missing_chunks)))
    if c["corrupt_chunks"]:
        print(f"  corrupt chunks ({c['corrupt_chunks']}):")
        print("\n".join(_fmt_chunks(report.corrupt_chunks)))
    if c["diverged_deleted_blocks"]:
        print(
            f"  deleted blocks to adopt ({c['diverged_deleted_blocks']}): "
            + ", ".join(str(b) for b in d["diverged_deleted_blocks"])
        )
    if c["unhealthy_chunks_filtered"]:
        print(f"  unhealthy peer chunks skipped: {c['unhealthy_chunks_filtered']}")
    if c["unrecoverable_chunks"]:
        print(
            f"  UNRECOVERABLE: {c['unrecoverable_chunks']} chunks healthy on both "
            "replicas but different (write-path divergence; no automatic repair):"
        )
        print("\n".join(_fmt_chunks(report.unrecoverable_chunks)))
    return 1 if report.needs_repair else 0


def _merge(args: argparse.Namespace) -> int:
    from merkle.trees.merge import merge
    from merkle.trees.treefile import write_tree

    stored, stored_raw = _read_with_raw(args.stored, corrupt_ok=True, missing_ok=True)
    scanned, scanned_raw = _read_with_raw(args.scanned)
    for path, tree, raw in (
        (args.stored, stored, stored_raw),
        (args.scanned, scanned, scanned_raw),
    ):
        _check_nothing_lost(path, tree, raw)
    try:
        merged = merge(stored, scanned)
    except ValueError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None
    write_tree(merged, args.output)
    print(f"{args.output}: {merged!r}")
    return 0


def _check_nothing_lost(path: str, tree: Any, raw: Any) -> None:
    """CLIError (nothing written) when rewriting the tree read from `path` would drop
    fields this crcmerkle does not understand inside the fields it does (a newer Ozone's);
    unknown top-level fields are carried by the tree itself. The scan refuses the same
    rewrite (TREE_UNSUPPORTED, merkle.replica.protokeep.rewritable)."""
    if tree is None or raw is None:
        return
    from merkle.replica.protokeep import rewritable
    from merkle.trees.treefile import tree_from_bytes, tree_to_bytes

    ok, _ = rewritable(raw, lambda known: tree_to_bytes(tree_from_bytes(known)))
    if not ok:
        raise CLIError(
            f"{path}: holds fields this crcmerkle does not understand: merging "
            "would drop them (nothing written)",
            EXIT_ERROR,
        )


# ---- build ---------------------------------------------------------------------------------

_TRUE = {"1", "true", "t", "yes", "y"}
_FALSE = {"0", "false", "f", "no", "n", ""}


def _bool(text: str, where: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise CLIError(f"{where}: not a boolean: {text!r}")


def _hex_windows(text: str, where: str) -> bytes:
    out = bytearray()
    for tok in text.split():
        tok = tok[2:] if tok.lower().startswith("0x") else tok
        if len(tok) % 2:
            tok = "0" + tok
        try:
            out += bytes.fromhex(tok)
        except ValueError:
            raise CLIError(f"{where}: not a hex checksum: {tok!r}") from None
    return bytes(out)


def _read_csv(path: str) -> Dict[str, List[Any]]:
    """The table's columns. A row with fewer or more fields than the header is refused: a
    truncated last row would otherwise be a chunk without checksums (a wrong tree, exit 0)."""
    f = sys.stdin if path == "-" else open(path, newline="", encoding="utf-8")
    try:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise CLIError(f"{path}: empty table")
        names = [name.strip() for name in header]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise CLIError(f"{path}: the header names {', '.join(map(repr, twice))} twice")
        cols: Dict[str, List[Any]] = {name: [] for name in names}
        for i, row in enumerate(reader):
            if not row:
                continue  # a blank line, as csv.DictReader skips it
            if len(row) != len(names):
                raise CLIError(
                    f"{path}: row {i + 1}: {len(row)} fields, the header has "
                    f"{len(names)} (a truncated or malformed row)"
                )
            for name, v in zip(names, row):
                cols[name].append(v)
        return cols
    except UnicodeDecodeError:
        raise CLIError(f"{path}: not UTF-8 text (a CSV table is expected)") from None
    except csv.Error as exc:
        raise CLIError(f"{path}: line {reader.line_num}: not a valid CSV table: {exc}") from None
    finally:
        if f is not sys.stdin:
            f.close()


def _read_parquet(path: str) -> Dict[str, List[Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise CLIError("reading Parquet needs pyarrow (pip install pyarrow)") from None
    import pyarrow as pa

    try:
        return pq.read_table(path).to_pydict()
    except pa.ArrowException as exc:
        raise CLIError(f"{path}: not a readable Parquet table: {exc}") from None


def _table_columns(cols: Dict[str, List[Any]], path: str) -> Dict[str, Any]:
    for need in ("block_id", "offset", "length"):
        if need not in cols:
            raise CLIError(f"{path}: missing column {need!r} (have: {', '.join(cols)})")
    if ("checksums" in cols) == ("leaf" in cols):
        raise CLIError(f"{path}: give exactly one of the columns 'checksums' and 'leaf'")
    n = len(cols["block_id"])

    def ints(name: str) -> np.ndarray:
        try:
            values = [int(v) for v in cols[name]]
        except (TypeError, ValueError) as exc:
            raise CLIError(f"{path}: column {name!r}: {exc}") from None
        low = -(1 << 63) if name == "block_id" else 0
        for i, v in enumerate(values):
            if not low <= v < 1 << 63:
                raise CLIError(
                    f"{path}: row {i + 1}: {name} {v} is out of range ({low} to 2**63-1)"
                )
        return np.array(values, dtype=np.int64)

    out: Dict[str, Any] = {
        "block_id": ints("block_id"),
        "offset": ints("offset"),
        "length": ints("length"),
    }
    if "leaf" in cols:
        vals = []
        for i, v in enumerate(cols["leaf"]):
            try:
                vals.append(int(v, 16) if isinstance(v, str) else int(v))
            except (TypeError, ValueError):
                raise CLIError(f"{path}: row {i + 1}: leaf {v!r} is not a hex value") from None
            if not 0 <= vals[-1] <= 0xFFFFFFFF:
                raise CLIError(
                    f"{path}: row {i + 1}: leaf {v!r} is not an unsigned 32-bit "
                    f"value (0 to ffffffff)"
                )
        out["leaf"] = np.array(vals, dtype=np.int64)
    else:
        parts, counts = [], []
        for i, v in enumerate(cols["checksums"]):
            where = f"{path}: row {i + 1}"
            if v is None:
                b = b""
            elif isinstance(v, str):
                b = _hex_windows(v, where)
            elif isinstance(v, (bytes, bytearray)):
                b = bytes(v)
            else:  # a list from Parquet
                b = b"".join(x.to_bytes(4, "big") if isinstance(x, int) else bytes(x) for x in v)
            parts.append(b)
            counts.append(len(b))
        out["window_bytes"] = b"".join(parts)
        out["window_byte_counts"] = np.array(counts, dtype=np.int64)
    if "checksum_matches" in cols:
        out["checksum_matches"] = np.array(
            [
                v if isinstance(v, bool) else _bool(str(v), f"{path}: row {i + 1}")
                for i, v in enumerate(cols["checksum_matches"])
            ],
            dtype=bool,
        )
    if "deleted" in cols:
        flags = [
            v if isinstance(v, bool) else _bool(str(v), f"{path}: row {i + 1}")
            for i, v in enumerate(cols["deleted"])
        ]
        out["deleted_blocks"] = sorted({int(b) for b, f in zip(out["block_id"], flags) if f})
    if n == 0:
        out["block_id"] = np.zeros(0, dtype=np.int64)
    return out


def _build(args: argparse.Namespace) -> int:
    from merkle.trees.model import ContainerTree
    from merkle.trees.treefile import write_tree

    fmt = args.format or ("parquet" if args.table.lower().endswith((".parquet", ".pq")) else "csv")
    try:
        cols = _read_parquet(args.table) if fmt == "parquet" else _read_csv(args.table)
    except OSError as exc:
        raise CLIError(f"{args.table}: {exc.strerror or exc}") from None
    spec = _table_columns(cols, args.table)
    try:
        tree = ContainerTree.from_columns(
            args.container_id, spec.pop("block_id"), spec.pop("offset"), spec.pop("length"), **spec
        )
    except (TypeError, ValueError) as exc:
        raise CLIError(f"{args.table}: {exc}") from None
    write_tree(tree, args.output)
    print(f"{args.output}: {tree!r}")
    return 0
