"""`crcmerkle bench`: throughput of crcmerkle vs the installed peer packages, in one run."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from typing import Any, Dict, List

import merkle
from merkle.cli import (
    MAX_BUFFER_BYTES,
    CLIError,
    benchmarking as bm,
    exit_status_help,
    positive_int,
)

DESCRIPTION = """\
Measure checksum throughput (GB/s = 1e9 B/s) of crcmerkle and of every installed peer
package in the same run: crc32c vs google-crc32c, crc32c (ICRAR), awscrt and fastcrc; crc32 vs
zlib, isal (ISA-L), zlib-ng and awscrt; crc64nvme vs awscrt and crc64fast. Data is hot: one
buffer checksummed repeatedly, timed with perf_counter_ns, best of --runs runs. The windows
case checksums a large buffer in fixed windows: merkle.checksum_windows (one call) vs a Python
loop of one peer call per window. The last column is crcmerkle / the best peer. Peers that are
not installed are left out, with a note (pip install 'crcmerkle[peers]')."""


def _size(text: str) -> int:
    try:
        value = bm.parse_size(text) if len(text) <= 40 else 0
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < value <= MAX_BUFFER_BYTES:  # a buffer of this size is allocated at once
        raise argparse.ArgumentTypeError(
            f"size must be from 1 to {MAX_BUFFER_BYTES} bytes, not {text[:60]!r}"
        )
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0, not {text!r}")
    return value


def _runs(text: str) -> int:
    return positive_int(text)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench",
        help="throughput table of crcmerkle vs the installed peer packages",
        description=DESCRIPTION,
        epilog=exit_status_help("never (0 measured, 2 could not)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--sizes",
        nargs="+",
        type=_size,
        metavar="SIZE",
        default=list(bm.DEFAULT_SIZES),
        help="buffer sizes of the one-shot table (default: 64 512 4KiB 16KiB 256KiB 4MiB)",
    )
    p.add_argument(
        "--seconds",
        type=_seconds,
        default=0.2,
        metavar="S",
        help="time spent measuring each (implementation, size) (default: 0.2)",
    )
    p.add_argument(
        "--runs", type=_runs, default=5, help="runs per measurement; the best is kept (default: 5)"
    )
    p.add_argument(
        "--windows-bytes",
        type=_size,
        default=bm.DEFAULT_WINDOWS_BYTES,
        metavar="SIZE",
        help="buffer of the windows case (default: 256MiB)",
    )
    p.add_argument(
        "--window",
        type=_size,
        default=bm.DEFAULT_WINDOW,
        metavar="SIZE",
        help="window of the windows case (default: 16KiB)",
    )
    p.add_argument("--no-windows", action="store_true", help="skip the windows case")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="also save a plot of GB/s vs buffer size (needs matplotlib: the 'plot' extra)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the results as JSON instead of tables"
    )
    p.set_defaults(func=run)
    return p


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for dist in ("google-crc32c", "crc32c", "awscrt", "fastcrc", "isal", "zlib-ng", "crc64fast"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def run(args: argparse.Namespace) -> int:
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise CLIError("--plot needs matplotlib: pip install 'crcmerkle[plot]'")
    sizes: List[int] = sorted(set(args.sizes))
    show = sys.stderr.isatty() and not args.json

    def progress(label: str) -> None:
        if show:
            sys.stderr.write(f"\r\x1b[Kmeasuring {label} ...")
            sys.stderr.flush()

    results = []
    results += bm.bench_one_shot("crc32c", sizes, args.seconds, args.runs, progress=progress)
    results += bm.bench_one_shot("crc32", sizes, args.seconds, args.runs, progress=progress)
    if bm.implementations("crc64nvme"):  # crcmerkle's own, or only the peers on an older build
        results += bm.bench_one_shot("crc64nvme", sizes, args.seconds, args.runs, progress=progress)
    if not args.no_windows:
        # Each window timing repeats the whole buffer at least once per run.
        results += bm.bench_windows(
            args.windows_bytes, args.window, args.seconds, min(args.runs, 3), progress=progress
        )
    if show:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()

    if args.plot:
        try:
            bm.plot(
                results,
                args.plot,
                title=f"crcmerkle {merkle.__version__} ({merkle.backend()}) vs peers",
            )
        except ImportError as exc:
            raise CLIError(str(exc)) from None

    if args.json:
        doc = {
            "backend": merkle.backend(),
            "version": merkle.__version__,
            "peers": _versions(),
            "missing_peers": bm.missing_peers(),
            "results": [r.as_dict() for r in results],
        }
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0

    out = sys.stdout
    peers = ", ".join(f"{k} {v}" for k, v in _versions().items()) or "none"
    out.write(f"crcmerkle {merkle.__version__}, backend {merkle.backend()}; peers: {peers}\n")
    out.write(
        f"GB/s = 1e9 bytes/s, data hot in cache, best of {args.runs} runs of {args.seconds:g} s\n\n"
    )
    by_case: Dict[str, List[Any]] = {}
    for r in results:
        by_case.setdefault(r.case, []).append(r)
    titles = {
        "crc32c": "CRC-32C, one call per buffer (GB/s)",
        "crc32": "CRC-32 (IEEE), one call per buffer (GB/s)",
        "crc64nvme": "CRC-64/NVME, one call per buffer (GB/s; crc64fast: a new hasher per call)",
        "windows": (
            f"CRC-32C of {bm.format_size(args.windows_bytes)} in "
            f"{bm.format_size(args.window)} windows (GB/s): crcmerkle = "
            "checksum_windows, peers = Python loop over slices"
        ),
    }
    for case in ("crc32c", "crc32", "crc64nvme", "windows"):
        if case in by_case:
            out.write(bm.format_table(by_case[case], titles[case]) + "\n\n")
    note = bm.peer_note()
    if note:
        out.write(f"note: {note}\n")
    if args.plot:
        out.write(f"plot saved to {args.plot}\n")
    return 0
