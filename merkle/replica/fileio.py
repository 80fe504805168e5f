"""Small file-I/O helpers the replica layer shares: atomic replace and full reads.

Metadata and tree files are replaced atomically (temp file in the same directory, fsync,
os.replace, fsync of the directory) so that a crash leaves the old file or the new one, never
a torn one; block data is read with readinto into caller-owned buffers, never copied.
"""

from __future__ import annotations

import os

# The atomic replace is the one `.tree` files use (the trees layer sits below this one).
from merkle.trees.treefile import fsync_dir, write_bytes_atomic as write_atomic

__all__ = ["fsync_dir", "pread_into", "write_atomic"]


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
