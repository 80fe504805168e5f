"""RocksDB read safely beside a live writer: the binding, private snapshots, the LOCK probe.

Ozone's datanodes (`container.db`), Ozone's Manager (`om.db`) and BookKeeper's
DbLedgerStorage (`locations`, `ledgers`) keep RocksDBs that crcmerkle reads while their owner
runs. Binding: rocksdict (PyPI; Rust rust-rocksdb with RocksDB bundled, wheels for CPython
3.9-3.13 on Linux x86_64/aarch64, macOS and Windows), the only maintained binding with such
wheels; it reads raw bytes with `Options(raw_mode=True)`. It writes `rocksdict-config.json`
into the DB directory on *every* open, read-only and secondary opens included, so a live DB
is never opened in place: `take_snapshot` makes a private copy to open instead. SST files are
immutable, so the snapshot hard-links them (copies them when the snapshot directory is on
another filesystem) and copies the few small mutable files RocksDB reads: CURRENT, the
MANIFEST that CURRENT names, the WAL `<number>.log` files and IDENTITY. Nothing else in the
directory is taken (a stray file of any size is ignored), and every copy is bounded: a file
larger than CRCMERKLE_MAX_DB_FILE_BYTES (default 1 GiB) or than the free space of the
snapshot directory makes the DB unreadable with one reason (VolumeDBError) instead of filling
the temporary filesystem. The OPTIONS file is left out on purpose: one written by a newer
RocksDB may name options this RocksDB does not know and fail the open.

Each system's keys and column families are its layout's (merkle.replica.ozone.rocks,
merkle.replica.bookkeeper.index, merkle.copies.omdb).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any

from merkle.replica.safeopen import NotRegularFileError, open_dir, open_regular

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_MAX_DB_FILE",
    "MAX_DB_FILE_ENV",
    "NotRegularFileError",
    "SNAPSHOT_ATTEMPTS",
    "SNAPSHOT_ENV",
    "VolumeDBError",
    "VolumeInUseError",
    "load_rocksdict",
    "lock_is_free",
    "max_db_file_bytes",
    "only_regular_files",
    "refuse_non_directory",
    "take_snapshot",
]

#: immutable table and blob files: hard-linked into the snapshot
_IMMUTABLE = re.compile(r"[0-9]+\.(sst|blob)")
#: the mutable files RocksDB reads at open, besides the MANIFEST that CURRENT names: copied
_WAL = re.compile(r"[0-9]+\.log")
_MANIFEST = re.compile(r"MANIFEST-[0-9]+")
_IDENTITY = "IDENTITY"
SNAPSHOT_ATTEMPTS = 5
#: where DB snapshots are made (default: the temp directory)
SNAPSHOT_ENV = "CRCMERKLE_SNAPSHOT_DIR"
#: the largest DB file a snapshot copies (bytes); a larger one makes the volume unreadable
MAX_DB_FILE_ENV = "CRCMERKLE_MAX_DB_FILE_BYTES"
DEFAULT_MAX_DB_FILE = 1 << 30
#: free space left in the snapshot directory's filesystem after each copy
_HEADROOM = 64 << 20


class VolumeDBError(Exception):
    """The volume's DB cannot be opened or read (one line, names the DB)."""


class VolumeInUseError(VolumeDBError):
    """The volume's DB is locked by another process: a datanode (or another repair) runs."""


def load_rocksdict() -> Any:
    """The rocksdict module, or VolumeDBError (one line) naming the extra that installs it."""
    try:
        import rocksdict
    except ImportError:
        raise VolumeDBError(
            "reading RocksDB (an Ozone volume's container.db, a bookie's DbLedgerStorage indexes) "
            "needs rocksdict: pip install 'crcmerkle[ozone]' or 'crcmerkle[bookkeeper]'"
        ) from None
    return rocksdict


def max_db_file_bytes() -> int:
    """CRCMERKLE_MAX_DB_FILE_BYTES (a positive integer), else DEFAULT_MAX_DB_FILE."""
    raw = os.environ.get(MAX_DB_FILE_ENV, "")
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_MAX_DB_FILE
    return value if value > 0 else DEFAULT_MAX_DB_FILE


class _Budget:
    """What a snapshot may still copy: each file at most `per_file` bytes, and no copy may
    leave less than _HEADROOM bytes free where the snapshot is made."""

    def __init__(self, db_dir: str, dest: str) -> None:
        self.db_dir = db_dir
        self.dest = dest
        self.per_file = max_db_file_bytes()

    def check(self, name: str, size: int) -> None:
        if size > self.per_file:
            raise VolumeDBError(
                f"{self.db_dir}: {name} holds {size} bytes, more than the "
                f"{self.per_file} bytes a snapshot copies ({MAX_DB_FILE_ENV}); "
                f"the volume is not read"
            )
        st = os.statvfs(self.dest)
        free = st.f_bavail * st.f_frsize
        if size + _HEADROOM > free:
            raise VolumeDBError(
                f"{self.db_dir}: {name} ({size} bytes) does not fit in the "
                f"snapshot directory {self.dest} ({free} bytes free); the "
                f"volume is not read (set {SNAPSHOT_ENV} to a directory on "
                f"the volume's filesystem: tables are linked there, not copied)"
            )


def _copy_regular(dfd: int, name: str, dst: str, budget: _Budget) -> None:
    """Copy the regular file `name` of the directory `dfd` to `dst` (never a link or FIFO:
    safeopen.open_regular), within `budget`: its size is checked before the copy and the
    copy stops at the limit even when the file grows meanwhile (a live WAL)."""
    src = open_regular(dfd, name)
    try:
        size = os.fstat(src).st_size
        budget.check(name, size)
        limit = max(size, 0) + (1 << 20)  # room for a live WAL to grow while copied
        out = os.open(
            dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600
        )
        try:
            copied = 0
            while copied < limit:
                data = os.read(src, min(1 << 20, limit - copied))
                if not data:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
                copied += len(data)
        finally:
            os.close(out)
        if copied >= limit and os.read(src, 1):
            budget.check(name, copied + 1)  # grew past its size and the allowance
            raise FileNotFoundError(f"{name} grew while the snapshot was taken")
    finally:
        os.close(src)


def _link_or_copy(dfd: int, name: str, dst: str, budget: _Budget) -> None:
    try:
        os.link(name, dst, src_dir_fd=dfd, follow_symlinks=False)
    except OSError:
        _copy_regular(dfd, name, dst, budget)
        return
    if not stat.S_ISREG(os.lstat(dst).st_mode):  # replaced between the listing and the link
        os.unlink(dst)
        raise NotRegularFileError(errno.EINVAL, "not a regular file", name)


def _read_current(dfd: int) -> bytes:
    fd = open_regular(dfd, "CURRENT")
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _manifest_named(db_dir: str, current: bytes) -> str:
    """The MANIFEST file CURRENT names (one plain `MANIFEST-<number>`), else VolumeDBError."""
    name = current.decode("ascii", "replace").rstrip("\n")
    if not _MANIFEST.fullmatch(name):
        raise VolumeDBError(f"{db_dir}: CURRENT does not name a MANIFEST file")
    return name


def _open_db_dir(db_dir: str) -> int:
    """The DB directory's descriptor, refusing a link (VolumeDBError: one line per volume)."""
    try:
        return open_dir(db_dir)
    except NotRegularFileError as exc:
        raise VolumeDBError(
            f"{db_dir}: {exc.strerror} (a DB directory is never followed)"
        ) from None
    except OSError as exc:
        raise VolumeDBError(f"{db_dir}: {exc.strerror or exc}") from None


def take_snapshot(db_dir: str, dest: str) -> None:
    """Hard-link/copy a consistent view of `db_dir` into the empty directory `dest`: only
    the files RocksDB reads (see the module docstring), each copy bounded (_Budget). Every
    file is opened relative to the DB directory's descriptor, never through a link, never
    blocking (a FIFO in place of CURRENT or a table raises NotRegularFileError)."""
    dfd = _open_db_dir(db_dir)
    budget = _Budget(db_dir, dest)
    try:
        current = _read_current(dfd)
        manifest = _manifest_named(db_dir, current)
        copied_manifest = False
        for entry in os.scandir(dfd):
            name = entry.name
            if not entry.is_file(follow_symlinks=False):
                continue  # links, directories, FIFOs: never part of the snapshot
            dst = os.path.join(dest, name)
            if _IMMUTABLE.fullmatch(name):
                _link_or_copy(dfd, name, dst, budget)
            elif name == manifest or _WAL.fullmatch(name) or name == _IDENTITY:
                _copy_regular(dfd, name, dst, budget)
                copied_manifest = copied_manifest or name == manifest
        if not copied_manifest:
            try:
                st = os.stat(manifest, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):  # a link, FIFO, directory
                raise NotRegularFileError(errno.EINVAL, "not a regular file", manifest)
            raise FileNotFoundError(f"{manifest} changed while taking the snapshot")
        with open(os.path.join(dest, "CURRENT"), "xb") as out:
            out.write(current)
        if _read_current(dfd) != current:
            raise FileNotFoundError("CURRENT changed while taking the snapshot")
    finally:
        os.close(dfd)


def refuse_non_directory(db_dir: str) -> None:
    """VolumeDBError unless `db_dir` is a directory itself (a link to one is never followed)."""
    try:
        st = os.stat(db_dir, follow_symlinks=False)
    except OSError as exc:
        raise VolumeDBError(f"{db_dir}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise VolumeDBError(f"{db_dir}: is a symbolic link (a DB directory is never followed)")
    if not stat.S_ISDIR(st.st_mode):
        raise VolumeDBError(f"{db_dir}: not a RocksDB directory")


CONFIG_FILE = "rocksdict-config.json"


def lock_is_free(db_dir: str) -> None:
    """VolumeInUseError when another process holds the DB's LOCK. RocksDB locks it with
    fcntl(F_SETLK, F_WRLCK) over the whole file, which is what lockf() takes too; the probe is
    released at once (the open that follows takes the lock for good). Checked before any
    open because a failed open still writes into the directory (a LOG rotation, our binding's
    config file): a live datanode's DB directory is left untouched."""
    if fcntl is None:  # pragma: no cover
        raise VolumeDBError(f"{db_dir}: offline repair needs POSIX record locks")
    path = os.path.join(db_dir, "LOCK")
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return  # never opened by RocksDB: nothing holds it
    except OSError as exc:
        raise VolumeDBError(f"{path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise VolumeDBError(f"{path}: not a regular file")
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise VolumeInUseError(
                    f"{db_dir}: the volume is online (its RocksDB LOCK is "
                    f"held: a datanode or another repair is running)"
                ) from None
            raise VolumeDBError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)  # drops the probe lock


def only_regular_files(db_dir: str) -> None:
    """VolumeDBError unless every entry RocksDB may open in place is a regular file: a FIFO
    or link planted as CURRENT, a MANIFEST or a table would hang or redirect the open."""
    dfd = _open_db_dir(db_dir)
    try:
        for entry in os.scandir(dfd):
            if entry.name == CONFIG_FILE or entry.is_dir(follow_symlinks=False):
                continue
            if not entry.is_file(follow_symlinks=False):
                raise VolumeDBError(
                    f"{os.path.join(db_dir, entry.name)}: not a regular file (never opened)"
                )
    finally:
        os.close(dfd)
