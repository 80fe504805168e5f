"""Entry logs (`current/<hex logId>.log`, DefaultEntryLogger) and where an index points in them.

Header: 1024 bytes, `BKLO`, int version, long ledgersMapOffset @8, int ledgersCount @16 (both
0 until the ledgers map is appended; a pre-allocated log closed before its header was flushed
is a 0-byte file). Records from byte 1024: int size (big-endian), then `size` bytes; the
scanner's rule (scanEntryLog): size <= 0 is padding and advances ONE byte; a record whose
ledgerId is -1 is (part of) the ledgers map; a short read ends the scan. An index location is
`(logId << 32) | pos`, pos the entry's first byte (after its size int).

Only `<hex>.log` files directly in `current/` are entry logs (RocksDB's WAL `*.log` files live
in `ledgers/` and `locations/`). `.log.compacting` and `.log.<hex>.compacted` files are a
compaction's leftovers: listed, never taken for entry logs. Every file is opened relative to
`current/`'s descriptor without following a link (safeopen); nothing is ever written or
locked; no size read from a file sizes memory (reads are bounded by the file's own size and a
window).
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import struct
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from merkle.replica.politeio import DIRECT_ALIGN

__all__ = [
    "COMPACTION_LEFTOVER",
    "HEADER_SIZE",
    "LogHeader",
    "LOG_NAME",
    "ScannedRecord",
    "log_id_of",
    "location",
    "WindowReader",
    "pread_exact",
    "read_header",
    "scan_records",
    "split_location",
]

HEADER_SIZE = 1024
LOG_NAME = re.compile(r"([0-9a-f]{1,16})\.log")
COMPACTION_LEFTOVER = re.compile(r"[0-9a-f]{1,16}\.log(\.compacting|\.[0-9a-f]{1,16}\.compacted)")
_MAGIC = b"BKLO"
#: how much of a log one read takes while scanning records
SCAN_WINDOW = 8 << 20
#: after a record this large the walk reads only the next record's first page
_LARGE_RECORD = 32 << 10
_HEADER_PEEK = 4096
#: bytes per read call of a window (WindowReader)
_READ_PIECE = 1 << 20
_NONZERO = re.compile(rb"[^\x00]")


def log_id_of(name: str) -> Optional[int]:
    """The log ID of an entry-log file name (`<hex>.log`), else None."""
    m = LOG_NAME.fullmatch(name)
    return int(m.group(1), 16) if m else None


def split_location(loc: int) -> Tuple[int, int]:
    """(log ID, position) of an index location."""
    loc &= 0xFFFFFFFFFFFFFFFF
    return loc >> 32, loc & 0xFFFFFFFF


def location(log_id: int, pos: int) -> int:
    return (log_id << 32) | pos


@dataclass(frozen=True)
class LogHeader:
    """An entry log's header: `problem` says why it is not one (else None); an empty
    (0-byte, pre-allocated) log has `empty`."""

    empty: bool
    version: int = 0
    ledgers_map_offset: int = 0
    ledgers_count: int = 0
    problem: Optional[str] = None


def pread_exact(fd: int, size: int, offset: int) -> bytes:
    """Up to `size` bytes at `offset` (fewer at the end of the file)."""
    parts: List[bytes] = []
    got = 0
    while got < size:
        chunk = os.pread(fd, size - got, offset + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class WindowReader:
    """Windows of a file read into one buffer, reused: no allocation and no fresh pages per
    window (a window of new `bytes` costs the kernel a page fault per 4 KiB, which cost more
    CPU than the verification itself). A window is valid until the next read.

    With `direct` (politeio.direct_twin of the file read), windows are read past the page
    cache: each read widened to DIRECT_ALIGN on both sides into the page-aligned buffer, one
    call per window (the kernel queues the whole window to the disk at once), and the view
    returned starts at the byte asked for. A file system that refuses an aligned O_DIRECT read
    (EINVAL) gets buffered reads from then on; any other error is the read's error."""

    def __init__(self, capacity: int, direct: Optional[int] = None) -> None:
        self._direct = direct
        self._buf = self._new(capacity)

    def _new(self, size: int) -> mmap.mmap:
        # an anonymous map is page-aligned, as O_DIRECT needs; 2 extra blocks for the widening
        return mmap.mmap(-1, size + 2 * DIRECT_ALIGN)

    def _fit(self, size: int) -> memoryview:
        if size + 2 * DIRECT_ALIGN > len(self._buf):
            self._buf.close()
            self._buf = self._new(size)
        return memoryview(self._buf)

    def read(self, fd: int, size: int, offset: int) -> memoryview:
        """Up to `size` bytes at `offset` (fewer at the end of the file). `size` is the
        caller's bound (a window, or an entry's size checked against MAX_ENTRY_BYTES)."""
        view = self._fit(size)
        if self._direct is not None:
            try:
                return self._read_direct(view, size, offset)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._direct = None
        got = 0
        while got < size:  # 1 MiB a call: larger cold reads cost the kernel more (measured)
            n = os.preadv(fd, [view[got : min(size, got + _READ_PIECE)]], offset + got)
            if n == 0:
                break
            got += n
        return view[:got]

    def _read_direct(self, view: memoryview, size: int, offset: int) -> memoryview:
        assert self._direct is not None
        skip = offset % DIRECT_ALIGN
        start = offset - skip
        want = -(-(skip + size) // DIRECT_ALIGN) * DIRECT_ALIGN
        got = 0
        while got < want:
            n = os.preadv(self._direct, [view[got:want]], start + got)
            if n == 0:
                break
            got += n
            if got % DIRECT_ALIGN:  # a partial block: the file ends there
                break
        return view[skip : max(skip, min(skip + size, got))]


def read_header(fd: int, file_size: int) -> LogHeader:
    if file_size == 0:
        return LogHeader(empty=True)
    raw = pread_exact(fd, 20, 0)
    if len(raw) < 20 or raw[:4] != _MAGIC:
        return LogHeader(empty=False, problem="no BKLO header")
    version, offset, count = struct.unpack(">iqi", raw[4:20])
    problem = None
    if offset and not HEADER_SIZE <= offset <= file_size:
        problem = f"ledgersMapOffset {offset} outside the log's {file_size} bytes"
    return LogHeader(False, version, offset, count, problem)


@dataclass(frozen=True)
class ScannedRecord:
    """A data record the scanner meets: `pos` of its first byte (after the size int)."""

    pos: int
    size: int
    ledger_id: int
    entry_id: int


def scan_records(
    fd: int, file_size: int, skip: Optional[Dict[int, int]] = None
) -> Iterator[ScannedRecord]:
    """The data records of an entry log by BookKeeper's scanner rule (ledgers-map records
    skipped, padding stepped over a byte at a time, a record running past the end stops the
    scan). Reads windows of SCAN_WINDOW bytes into one buffer; a record's size only moves
    the position, and after a large record only the next header's page is read (the walk
    needs 20 bytes of each record, not its payload).

    `skip` (record start -> end: runs of back-to-back records whose sizes the caller read
    from these same bytes): the walk jumps from a run's start to its end and yields none of
    its records, exactly as if it had stepped through them one by one. The scan passes the
    runs it verified, so the walk for records no index names costs a step per gap, not one
    per entry (a log of 1 KiB entries holds a million per GiB)."""
    pos = HEADER_SIZE
    reader = WindowReader(SCAN_WINDOW)
    base, window = pos, memoryview(b"")
    want = SCAN_WINDOW
    while pos + 4 <= file_size:
        if skip:
            end = skip.get(pos)
            if end is not None:
                pos = end
                continue
        if pos + 20 > base + len(window):
            base, window = pos, reader.read(fd, want, pos)
            if len(window) < 4:
                return
        at = pos - base
        (size,) = struct.unpack_from(">i", window, at)
        if size <= 0:
            m = _NONZERO.search(window, at)
            if m is None:  # zeros to the end of the window
                pos = max(pos + 1, base + len(window) - 3)
            else:
                pos = max(pos + 1, base + m.start() - 3)
            continue
        if pos + 4 + size > file_size:
            return  # a short read ends the scan silently, as BookKeeper's does
        if size >= 16:
            if at + 20 > len(window):
                base, window = pos, reader.read(fd, want, pos)
                at = 0
                if len(window) < 20:
                    return
            ledger_id, entry_id = struct.unpack_from(">qq", window, at + 4)
            if ledger_id != -1:
                yield ScannedRecord(pos + 4, size, ledger_id, entry_id)
        pos += 4 + size
        want = SCAN_WINDOW if size < _LARGE_RECORD else _HEADER_PEEK
