"""`crcmerkle checksum`: CRC-32C/CRC-32/CRC-64/NVME of files, whole or per fixed window,
streamed."""

from __future__ import annotations

import argparse
import base64
import json
import os
import stat
import sys
from typing import Any, BinaryIO, Dict, List, Optional

import merkle
from merkle.cli import (
    EXIT_ERROR,
    MAX_BUFFER_BYTES,
    exit_status_help,
    one_line,
    positive_size,
    print_error,
    size_up_to,
)
from merkle.cli.benchmarking import MiB

#: Read size; with --bytes-per-checksum it is rounded down to a multiple of N (at least N)
#: so that no window straddles two reads.
DEFAULT_BUFFER = 8 * MiB
#: Files at least this large get a progress bar (only when stderr is a terminal).
PROGRESS_MIN_BYTES = 256 * MiB

DESCRIPTION = """\
Print the CRC of each FILE (default algorithm CRC-32C, Castagnoli; also CRC-32 and
CRC-64/NVME, the checksum S3 computes for every new object). FILE '-' (or no FILE) reads
standard input. Files are streamed, never loaded whole."""

EPILOG = """\
output (text):
  without --bytes-per-checksum, one line per file, like cksum:
      <crc>  <size>  <name>
  <crc> is the checksum as 8 lowercase hex digits, i.e. format(value, '08x') of the
  unsigned 32-bit value that merkle.crc32c() (or merkle.crc32() / zlib.crc32()) returns;
  <size> is the byte count in decimal; <name> is the path as given ('-' for stdin).
  With -a crc64nvme the line is
      <crc>  <base64>  <size>  <name>
  <crc> as 16 hex digits (format(value, '016x') of merkle.crc64nvme()), <base64> the
  value as S3's x-amz-checksum-crc64nvme header carries it (base64 of the 8 big-endian
  bytes).

  with --bytes-per-checksum N, one line per file: the name, two spaces, then the checksum
  of each N-byte window (the last one may be short) as 8 hex digits (16 for crc64nvme)
  separated by single spaces, as merkle.checksum_windows() computes them. An empty file
  has no windows.

output (json):
  one JSON array with an object per file read:
      {"name", "algorithm", "size", "checksum" (hex), "value" (int), "base64" (S3's form:
       base64 of the big-endian bytes, for every algorithm)}
  or, with --bytes-per-checksum:
      {"name", "algorithm", "size", "bytes_per_checksum", "checksums" (list of hex)}

a file that cannot be read gets an error line, the others are still processed, and the
exit status is 2.

""" + exit_status_help("never (checksum has no findings: 0 or 2)")


#: bytes of each algorithm's value (its hex is twice as many digits)
_WIDTH = {"crc32c": 4, "crc32": 4, "crc64nvme": 8}


def s3_base64(value: int, algorithm: str) -> str:
    """`value` as S3's x-amz-checksum-<algorithm> carries it: base64 of its big-endian
    bytes."""
    return base64.b64encode(int(value).to_bytes(_WIDTH[algorithm], "big")).decode("ascii")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "checksum",
        help="CRC-32C/CRC-32/CRC-64/NVME of files (whole, or per fixed-size window)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="files to read ('-' = stdin)")
    p.add_argument(
        "-a",
        "--algorithm",
        choices=tuple(_WIDTH),
        default="crc32c",
        help="crc32c (Castagnoli, default), crc32 (IEEE, as zlib.crc32) or "
        "crc64nvme (CRC-64/NVME, as S3's x-amz-checksum-crc64nvme; its base64 "
        "form is printed too)",
    )
    p.add_argument(
        "-b",
        "--bytes-per-checksum",
        type=positive_size,
        metavar="N",
        help="print one checksum per N-byte window instead of one per file "
        "(suffixes KiB/MiB accepted)",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output format (default: text; see below)",
    )
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="never show a progress bar (one is shown on a terminal for large files)",
    )
    # Hidden: read size, for tests (small buffers exercise the chaining without big files).
    p.add_argument(
        "--buffer-size",
        type=size_up_to(MAX_BUFFER_BYTES),
        default=DEFAULT_BUFFER,
        help=argparse.SUPPRESS,
    )
    p.set_defaults(func=run)
    return p


def _fill(f: BinaryIO, view: memoryview) -> int:
    """readinto until view is full or EOF (pipes and stdin return short reads)."""
    got = 0
    total = len(view)
    while got < total:
        n = f.readinto(view[got:])  # type: ignore[attr-defined]  # typing.BinaryIO omits it
        if not n:  # 0 at EOF (None would mean non-blocking with nothing ready: treat as EOF)
            break
        got += n
    return got


def _progress(f: BinaryIO, name: str, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        st = os.fstat(f.fileno())
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size < PROGRESS_MIN_BYTES:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(
        total=st.st_size,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=name,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
    )


def checksum_stream(
    f: BinaryIO,
    algorithm: str = "crc32c",
    bytes_per_checksum: Optional[int] = None,
    buffer_size: int = DEFAULT_BUFFER,
    bar: Any = None,
):
    """Stream f through one reused buffer. Returns (crc, size) without bytes_per_checksum,
    else (numpy array of window checksums, size: uint32, or uint64 for crc64nvme)."""
    crc_fn = getattr(merkle, algorithm)  # merkle.crc32c, merkle.crc32, merkle.crc64nvme
    if bytes_per_checksum and bytes_per_checksum > buffer_size:
        # Windows larger than the buffer: chain the CRC across reads (memory is the buffer,
        # never the window size a user typed: `-b 2GiB` on a 10-byte file allocates 1 MiB).
        return _large_windows(f, crc_fn, bytes_per_checksum, buffer_size, bar, _dtype(algorithm))
    if bytes_per_checksum:
        buffer_size = buffer_size // bytes_per_checksum * bytes_per_checksum
    buf = bytearray(buffer_size)
    view = memoryview(buf)
    crc = 0
    size = 0
    parts: List[Any] = []
    while True:
        n = _fill(f, view)
        if n == 0:
            break
        chunk = view[:n]
        if bytes_per_checksum:
            parts.append(merkle.checksum_windows(chunk, bytes_per_checksum, algorithm=algorithm))
        else:
            crc = crc_fn(chunk, crc)
        chunk.release()
        size += n
        if bar is not None:
            bar.update(n)
        if n < buffer_size:  # _fill only returns short at EOF
            break
    if bytes_per_checksum:
        import numpy as np

        return (np.concatenate(parts) if parts else np.empty(0, dtype=_dtype(algorithm))), size
    return crc, size


def _dtype(algorithm: str) -> Any:
    import numpy as np

    return np.uint64 if _WIDTH[algorithm] == 8 else np.uint32


def _large_windows(
    f: BinaryIO, crc_fn: Any, bytes_per_checksum: int, buffer_size: int, bar: Any, dtype: Any = None
):
    """checksum_stream's window checksums when a window is larger than the buffer."""
    import numpy as np

    view = memoryview(bytearray(buffer_size))
    values: List[int] = []
    crc = fill = size = 0
    while True:
        n = _fill(f, view)
        pos = 0
        while pos < n:
            take = min(bytes_per_checksum - fill, n - pos)
            crc = crc_fn(view[pos : pos + take], crc)
            fill += take
            pos += take
            if fill == bytes_per_checksum:
                values.append(crc)
                crc = fill = 0
        size += n
        if bar is not None and n:
            bar.update(n)
        if n < buffer_size:
            break
    if fill:
        values.append(crc)
    return np.array(values, dtype=dtype or np.uint32), size


def _checksum_file(name: str, args: argparse.Namespace):
    if name == "-":
        f = sys.stdin.buffer
        close = False
    else:
        f = open(name, "rb", buffering=0)  # FileIO: readinto is one read(2), no extra copy
        close = True
    try:
        bar = _progress(f, name, not args.no_progress)
        try:
            return checksum_stream(
                f, args.algorithm, args.bytes_per_checksum, args.buffer_size, bar
            )
        finally:
            if bar is not None:
                bar.close()
    finally:
        if close:
            f.close()


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


def run(args: argparse.Namespace) -> int:
    files = args.files or ["-"]
    records: List[Dict[str, Any]] = []
    status = 0
    out = sys.stdout
    for name in files:
        try:
            value, size = _checksum_file(name, args)
        except OSError as exc:
            print_error(f"{name}: {_describe(exc)}")
            status = EXIT_ERROR
            continue
        digits = 2 * _WIDTH[args.algorithm]
        if args.bytes_per_checksum:
            hexes = [f"{v:0{digits}x}" for v in value.tolist()]
            if args.format == "json":
                records.append(
                    {
                        "name": name,
                        "algorithm": args.algorithm,
                        "size": size,
                        "bytes_per_checksum": args.bytes_per_checksum,
                        "checksums": hexes,
                    }
                )
            else:
                out.write(f"{one_line(name)}  {' '.join(hexes)}".rstrip() + "\n")
        else:
            if args.format == "json":
                records.append(
                    {
                        "name": name,
                        "algorithm": args.algorithm,
                        "size": size,
                        "checksum": f"{value:0{digits}x}",
                        "value": value,
                        "base64": s3_base64(value, args.algorithm),
                    }
                )
            elif args.algorithm == "crc64nvme":  # S3's form beside it: what a HEAD shows
                out.write(
                    f"{value:016x}  {s3_base64(value, args.algorithm)}  {size}  {one_line(name)}\n"
                )
            else:
                out.write(f"{value:08x}  {size}  {one_line(name)}\n")
        out.flush()
    if args.format == "json":
        json.dump(records, out)
        out.write("\n")
        out.flush()
    return status
