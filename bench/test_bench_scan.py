"""Replica scan throughput (issue 4): MB/s of `scan_container` on one replica, and its ratio to
reading the same block files without checksumming (target: scanning costs < 10% over the plain
read). See bench/conftest.py for the harness; speed is reported, never asserted.

Replica: Ozone's defaults (4 MiB chunks, 16 KiB windows, CRC32), 2 GiB in 256 MiB blocks
(BENCH_SHORT=1: 256 MiB in 64 MiB blocks; BENCH_SCAN_BYTES=SIZE overrides), written under
BENCH_SCAN_DIR (default: pytest's temporary directory, which must be on a real disk for the
cold case to mean anything).

Cases (each row: crcmerkle = the default scan, single thread, pread into a reused 1 MiB
buffer; the other columns are in the same run):
- hot page cache: the files were just read; "plain read" = preadv of the same files into the
  same 1 MiB buffer, nothing else; "2 workers" = two threads over the blocks. (The scanner no
  longer maps files: a mapping dies of SIGBUS when a block file shrinks mid-scan.)
- cold: every block file's pages are dropped with posix_fadvise(DONTNEED) before each pass
  (no root needed for clean pages); the drop itself (< 1 ms) is inside the timing of both
  sides. Skipped where posix_fadvise does not exist.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

import numpy as np
import pytest

from merkle.cli import benchmarking as bm
from merkle.replica.replicadir.writer import ContainerWriter
from merkle.replica.scan import DEFAULT_BUFFER_SIZE, scan_container

from conftest import SHORT

OURS = bm.OURS
CHUNK = 4 * bm.MiB
BPC = 16 * 1024


def _scan_bytes() -> int:
    env = os.environ.get("BENCH_SCAN_BYTES")
    if env:
        return bm.parse_size(env)
    return 256 * bm.MiB if SHORT else 2 * bm.GiB


@pytest.fixture(scope="module")
def replica(tmp_path_factory) -> Path:
    size = _scan_bytes()
    block = min(64 * bm.MiB if SHORT else 256 * bm.MiB, size)
    base = os.environ.get("BENCH_SCAN_DIR")
    root = (Path(base) if base else tmp_path_factory.mktemp("scan")) / "vol" / "1"
    data = np.random.default_rng(4).bytes(block)
    with ContainerWriter.create(
        root, algorithm="crc32", bytes_per_checksum=BPC, chunk_size=CHUNK
    ) as w:
        for b in range(-(-size // block)):
            n = min(block, size - b * block)
            w.write_block(b + 1, memoryview(data)[:n])
    return root


def _files(root: Path) -> List[str]:
    return sorted(os.fspath(p) for p in (root / "chunks").glob("*.block"))


def plain_read(files: List[str], buffer_size: int = DEFAULT_BUFFER_SIZE) -> int:
    """Read every file through one reused buffer, no checksums: the baseline."""
    view = memoryview(bytearray(buffer_size))
    total = 0
    for name in files:
        fd = os.open(name, os.O_RDONLY)
        try:
            off = 0
            while True:
                n = os.preadv(fd, [view], off)
                off += n
                if n < buffer_size:
                    break
            total += off
        finally:
            os.close(fd)
    return total


def drop_cache(files: List[str]) -> None:
    for name in files:
        fd = os.open(name, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _scan(root: Path, **kw) -> int:
    r = scan_container(root, write_tree=False, **kw)
    assert r.ok, r.errors
    return r.bytes_read


def _label() -> str:
    return bm.format_size(_scan_bytes())


def test_scan_hot_plain_read(bench, replica):
    files = _files(replica)
    plain_read(files)  # warm the page cache
    n = bench.measure(
        plain_read,
        args=(files,),
        case=f"replica scan {_label()}, hot cache",
        impl="plain read",
        nbytes=_scan_bytes(),
    )
    assert n == _scan_bytes()


@pytest.mark.parametrize("impl,kw", [(OURS, {}), ("2 workers", {"workers": 2})])
def test_scan_hot(bench, replica, impl, kw):
    plain_read(_files(replica))

    def run() -> int:
        return _scan(replica, **kw)

    n = bench.measure(
        run, case=f"replica scan {_label()}, hot cache", impl=impl, nbytes=_scan_bytes()
    )
    assert n == _scan_bytes()


needs_fadvise = pytest.mark.skipif(
    not hasattr(os, "posix_fadvise"), reason="posix_fadvise unavailable: no cold case here"
)


@needs_fadvise
def test_scan_cold_plain_read(bench, replica):
    files = _files(replica)

    def run() -> int:
        drop_cache(files)
        return plain_read(files)

    n = bench.measure(
        run,
        case=f"replica scan {_label()}, cold (fadvise DONTNEED)",
        impl="plain read",
        nbytes=_scan_bytes(),
        cold=True,
    )
    assert n == _scan_bytes()


@needs_fadvise
@pytest.mark.parametrize("impl,kw", [(OURS, {}), ("2 workers", {"workers": 2})])
def test_scan_cold(bench, replica, impl, kw):
    files = _files(replica)

    def run() -> int:
        drop_cache(files)
        return _scan(replica, **kw)

    n = bench.measure(
        run,
        case=f"replica scan {_label()}, cold (fadvise DONTNEED)",
        impl=impl,
        nbytes=_scan_bytes(),
        cold=True,
    )
    assert n == _scan_bytes()
