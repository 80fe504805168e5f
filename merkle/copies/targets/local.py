"""A local directory as a copy (`file:///abs/dir` or a plain path): the only target that
reads data. list() walks it without following links; describe() reads each regular file
once, in bounded buffers, computing its CRC-32C, CRC-32 and CRC-64/NVME, and counts the
bytes it read.

crcmerkle may run as root: below the root (the operator's path, whose own links are
followed) every directory is opened with O_NOFOLLOW relative to its parent's descriptor and
every file with O_NOFOLLOW|O_NONBLOCK then fstat-checked regular (safeopen), so a link or a
FIFO planted in the tree is a row with `error`, never followed, never blocking. A name
handed to describe() is split on '/' and each part must be one plain entry.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any, Dict, Iterator, List, Optional
from urllib.parse import unquote

import pyarrow as pa

import merkle
from merkle.copies.targets._rows import BATCH_ROWS, Rows, conform
from merkle.copies.targets.base import Target, TargetError
from merkle.replica.safeopen import (
    NotRegularFileError,
    UnsafeNameError,
    open_dir,
    open_dir_chain,
    open_regular,
)

#: bytes read per call: 8 MiB keeps the three CRC passes in cache and memory bounded
BUFFER = 8 << 20

_KINDS = [
    (stat.S_ISLNK, "a symbolic link (not followed)"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
]


def _kind(mode: int) -> str:
    for test, what in _KINDS:
        if test(mode):
            return what
    return "not a regular file"


class LocalTarget(Target):
    kind = "local"
    reads_data = True
    needs_describe = True
    _transient = ("_buffer",)

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        if "://" in uri:
            scheme, _, rest = uri.partition("://")
            host, slash, path = rest.partition("/")
            if host not in ("", "localhost"):
                raise ValueError(f"target {self.display}: a file:// URI names no host")
            path = "/" + unquote(path.partition("?")[0].partition("#")[0])
        else:
            path = uri
        self.root = os.path.abspath(path)
        self._buffer: Optional[bytearray] = None

    def preflight(self) -> None:
        os.close(self._open_root())

    def _open_root(self) -> int:
        try:
            return open_dir(self.root, follow=True)
        except OSError as exc:
            raise TargetError(
                f"target {self.display}: cannot open the directory: {exc.strerror or exc}"
            ) from None

    # -- list ---------------------------------------------------------------------------------
    def list(self) -> Iterator[pa.RecordBatch]:
        root = self._open_root()
        rows = Rows()
        try:
            pending: List[str] = [""]
            while pending:
                rel = pending.pop()
                try:
                    fd = open_dir_chain(root, rel.split("/") if rel else [], start=self.root)
                except OSError as exc:
                    rows.add(rel, requests=0, bytes_read=0, error=_oserror(exc))
                    continue
                try:
                    with os.scandir(fd) as it:
                        entries = sorted(it, key=lambda e: e.name)
                    for entry in entries:
                        name = f"{rel}/{entry.name}" if rel else entry.name
                        self._entry(rows, fd, entry, name, pending)
                        if len(rows) >= BATCH_ROWS:
                            yield rows.take()
                finally:
                    os.close(fd)
        finally:
            os.close(root)
        if len(rows):
            yield rows.take()

    def _entry(self, rows: Rows, fd: int, entry: Any, name: str, pending: List[str]) -> None:
        try:
            st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return  # removed while listed: it is not there
        except OSError as exc:
            rows.add(name, requests=0, bytes_read=0, error=_oserror(exc))
            return
        if stat.S_ISDIR(st.st_mode):
            pending.append(name)
        elif stat.S_ISREG(st.st_mode):
            rows.add(name, size=st.st_size, requests=0, bytes_read=0)
        else:
            rows.add(name, requests=0, bytes_read=0, error=f"{_kind(st.st_mode)}: not read")

    # -- describe -----------------------------------------------------------------------------
    def describe(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        root = self._open_root()
        out = Rows()
        try:
            for row in conform(batch):
                out.add_row(self._describe_one(root, row))
        finally:
            os.close(root)
        return out.batch()

    def _describe_one(self, root: int, row: Dict[str, Any]) -> Dict[str, Any]:
        row = dict(row, requests=0, bytes_read=row.get("bytes_read") or 0)
        name = row.get("name")
        if row.get("error") or not name:
            return row
        parts = name.split("/")
        try:
            dfd = open_dir_chain(root, parts[:-1], start=self.root)
            try:
                fd = open_regular(dfd, parts[-1], display=name)
            finally:
                os.close(dfd)
        except FileNotFoundError:
            row["error"] = "gone"
            return row
        except (NotRegularFileError, UnsafeNameError, OSError) as exc:
            row["error"] = _oserror(exc)
            return row
        try:
            size, c32c, c32, c64 = self._checksum(fd)
        except OSError as exc:
            row["error"] = _oserror(exc)
            return row
        finally:
            os.close(fd)
        row.update(
            size=size,
            bytes_read=size,
            crc32c=c32c.to_bytes(4, "big"),
            crc32=c32.to_bytes(4, "big"),
            crc64nvme=c64.to_bytes(8, "big"),
        )
        return row

    def _checksum(self, fd: int) -> tuple:
        """(bytes read, crc32c, crc32, crc64nvme) of the file from its start to its end as
        read now (a file that grows or shrinks meanwhile is described as read)."""
        if self._buffer is None:
            self._buffer = bytearray(BUFFER)
        view = memoryview(self._buffer)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        except (AttributeError, OSError):
            pass
        c32c = c32 = c64 = 0
        total = 0
        while True:
            n = os.readv(fd, [view])
            if n <= 0:
                break
            chunk = view[:n]
            # three passes over a cache-resident buffer: each CRC runs at ~40 GB/s, faster
            # than the two-at-once kernel (measured; see docs/performance/)
            c32c = merkle.crc32c(chunk, c32c)
            c32 = merkle.crc32(chunk, c32)
            c64 = merkle.crc64nvme(chunk, c64)
            total += n
        return total, c32c, c32, c64


def _oserror(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        text = exc.strerror or str(exc)
        if exc.errno == errno.ELOOP:
            text = "a symbolic link (not followed)"
        return " ".join(str(text).split())
    return " ".join(str(exc).split())
