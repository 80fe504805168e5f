"""An exclusive advisory lock per replica, so two writers/scanners/reconcilers never race.

The lock is `flock(LOCK_EX | LOCK_NB)` on `<container>/.crcmerkle.lock`: the kernel drops it
when its holder dies, so a crash never leaves a stale lock behind (a re-run just proceeds),
and a second holder is refused at once (ReplicaLockedError naming the holder's PID) instead
of waiting behind a long repair. flock locks belong to an open file description, so a second
`ReplicaLock` on the same replica in the same process is refused too. The file itself is
never deleted (deleting it would let two processes lock two different inodes).

The lock file is opened relative to the replica directory without following a link or
blocking (merkle.replica.safeopen) and must be a regular file with one link: a planted link,
hard link, FIFO or directory is refused (ReplicaError), never written. It is never truncated;
the holder's PID is written over its first bytes only while the file is small enough to be
ours (a fixed-width record), so even a planted regular file loses nothing.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Optional, Type

from merkle.replica.errors import ReplicaError, ReplicaLockedError
from merkle.replica.replicadir.paths import LOCK_NAME, ContainerPaths
from merkle.replica.safeopen import NotRegularFileError, open_dir, open_regular

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["ReplicaLock"]

#: The PID record: fixed width, so rewriting it never needs a truncation.
_PID_WIDTH = 24


class ReplicaLock:
    """Context manager holding a replica's lock; see the module docstring."""

    def __init__(self, paths: ContainerPaths) -> None:
        self.paths = paths
        self._fd: Optional[int] = None

    def acquire(self) -> ReplicaLock:
        if fcntl is None:  # pragma: no cover
            raise ReplicaLockedError("replica locks need POSIX flock", str(self.paths.root))
        name = os.fspath(self.paths.lock)
        try:
            dfd = open_dir(os.fspath(self.paths.root))  # a linked replica: refused
        except NotADirectoryError:
            raise ReplicaError("not a directory", os.fspath(self.paths.root)) from None
        try:
            fd = open_regular(
                dfd, LOCK_NAME, os.O_RDWR, create=True, single_link=True, display=name
            )
        except NotRegularFileError as exc:
            raise ReplicaError(f"refusing the lock file: {exc.strerror}", name) from None
        finally:
            os.close(dfd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            try:
                text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                holder = f" (held by pid {text})" if text else ""
            except OSError:
                pass
            os.close(fd)
            raise ReplicaLockedError(
                f"replica is locked by another writer, scanner or reconciler{holder}",
                str(self.paths.root),
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            if os.fstat(fd).st_size <= _PID_WIDTH:
                os.pwrite(fd, f"{os.getpid():<{_PID_WIDTH - 1}}\n".encode(), 0)
        except OSError:
            pass  # the PID is only a hint for the error message
        except BaseException:
            os.close(fd)  # never leak a held lock
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> ReplicaLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()
