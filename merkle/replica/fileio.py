"""Small file-I/O helpers the replica layer shares: atomic replace and full reads.

Metadata and tree files are replaced atomically (temp file in the same directory, fsync,
os.replace, fsync of the directory) so that a crash leaves the old file or the new one, never
a torn one; block data is read with readinto into caller-owned buffers, never copied.
"""

from __future__ import annotations

import os
import tempfile
from typing import Union

__all__ = ["fsync_dir", "pread_into", "write_atomic"]

PathLike = Union[str, "os.PathLike[str]"]


def fsync_dir(directory: PathLike) -> None:
    """fsync a directory so a rename or a new file in it survives a power cut (best effort
    where directories cannot be opened)."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: PathLike, data: bytes) -> None:
    """Replace `path` by `data` atomically: temp file beside it, fsync, rename, fsync dir."""
    name = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(name))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(name) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def pread_into(fd: int, view: memoryview, offset: int) -> int:
    """Fill `view` from file offset `offset`; returns the bytes read (short only at EOF).

    os.preadv reads straight into the caller's buffer (no copy, no shared file position, so
    worker threads may share nothing but the descriptor).
    """
    got = 0
    total = len(view)
    while got < total:
        n = os.preadv(fd, [view[got:]], offset + got)
        if n <= 0:
            break
        got += n
    return got
