"""Opening a replica's files safely: crcmerkle runs as root on datanodes, so a planted link,
FIFO or hard link inside a replica must never make it read, write or create a file elsewhere,
block forever, or size memory from a number it has not checked.

Every replica file is opened relative to a directory descriptor: the replica directory (the
path the operator or the discovery walk named), then its `chunks/` and `metadata/`
subdirectories opened with O_DIRECTORY|O_NOFOLLOW, then the file with
O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC (a FIFO opens without waiting for a writer) and `fstat`-checked
to be a regular file. Anything else raises NotRegularFileError (an OSError, so callers that
report I/O errors keep working; the scanner reports it as NOT_A_REGULAR_FILE). A file that is
about to be *written* must also have a single link: a hard link planted in a replica (to
/etc/shadow, say) is refused, as a symbolic one is.

Nothing is created through a link: O_CREAT|O_NOFOLLOW fails on a dangling link, and atomic
rewrites create their temp file with O_EXCL under a random name, then rename it over the
target inside the same directory descriptor. A rewrite keeps the old file's owner, group and
mode (a scan run as root must not leave the datanode user's `.tree` as root:root 0600), less
the setuid, setgid and sticky bits: no file crcmerkle writes ever carries them.

What crcmerkle *creates* (the lock file, a block file a repair pulls, every file and directory
`replicate` makes, a `chunks/` or `metadata/` directory) goes through `open_regular(...,
create=True)`, `make_dir` or `replace_atomic`, which give it the owner and group of the
directory it is created in (best effort: only root may give a file away) and a plain mode
(0644 for files unless the caller names another, 0755 for directories; never 0o7000): run as
root, crcmerkle must not lock the datanode's own user out of its replicas.

A name opened in a directory is one plain entry: `open_regular` refuses `..`, `.`, an empty
name and one holding `/` or NUL (UnsafeNameError), so a name read from metadata can never
reach outside the directory it is opened in.

Metadata files (`.tree`, `.blocks`) are size-checked against `fstat` before one byte is read:
`max_metadata_bytes()` (CRCMERKLE_MAX_METADATA_BYTES, 64 MiB by default: a 5 GB container
with 16 KiB windows has ~1.3 MB of window checksums) bounds what a sparse or hostile file can
make us allocate. The same cap bounds the `block_data` rows of one Ozone container together,
and `max_row_bytes()` (CRCMERKLE_MAX_ROW_BYTES, 4 MiB by default) one row.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
from pathlib import Path
from types import TracebackType
from typing import Dict, Optional, Sequence, Type, Union

__all__ = [
    "DEFAULT_MAX_METADATA_BYTES",
    "DEFAULT_MAX_ROW_BYTES",
    "FileTooLargeError",
    "NOT_A_REGULAR_FILE",
    "NotRegularFileError",
    "ReplicaDir",
    "UnsafeNameError",
    "check_component",
    "make_dir",
    "max_metadata_bytes",
    "max_row_bytes",
    "open_dir",
    "open_dir_chain",
    "open_dir_nofollow_path",
    "open_regular",
    "read_named",
    "read_regular",
    "replace_atomic",
]

PathLike = Union[str, "os.PathLike[str]"]

NOT_A_REGULAR_FILE = "NOT_A_REGULAR_FILE"

#: Default cap on a `.tree` / `.blocks` file read into memory, and on the `block_data` rows
#: of one Ozone container together.
DEFAULT_MAX_METADATA_BYTES = 64 * 1024 * 1024
#: Default cap on one Ozone `block_data` value: a 256 MiB block of 4 MiB chunks with 16 KiB
#: windows takes ~100 KB; decoding a row costs ~30 times its size in memory.
DEFAULT_MAX_ROW_BYTES = 4 * 1024 * 1024

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
#: setuid, setgid, sticky: never on a file or directory crcmerkle creates or rewrites
_SPECIAL_BITS = 0o7000


def max_metadata_bytes() -> int:
    """The configured cap on metadata files (CRCMERKLE_MAX_METADATA_BYTES, bytes)."""
    text = os.environ.get("CRCMERKLE_MAX_METADATA_BYTES")
    if text:
        try:
            value = int(text)
            if value > 0:
                return value
        except ValueError:
            pass
    return DEFAULT_MAX_METADATA_BYTES


def max_row_bytes() -> int:
    """The cap on one Ozone `block_data` value (CRCMERKLE_MAX_ROW_BYTES, bytes; never above
    max_metadata_bytes(), the cap on a container's rows together)."""
    text = os.environ.get("CRCMERKLE_MAX_ROW_BYTES")
    value = DEFAULT_MAX_ROW_BYTES
    if text:
        try:
            value = int(text) if int(text) > 0 else value
        except ValueError:
            pass
    return min(value, max_metadata_bytes())


class UnsafeNameError(OSError):
    """A name that is not one plain directory entry (empty, `.`, `..`, or holding `/` or
    NUL): never opened, whatever it would reach."""


def check_component(name: str, display: Optional[str] = None) -> None:
    """UnsafeNameError unless `name` is one plain entry of a directory: a name read from
    metadata is data, never a path that could leave the directory it is opened in."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise UnsafeNameError(
            errno.EINVAL, "not a plain file name (never opened)", display or repr(name)
        )


class NotRegularFileError(OSError):
    """A replica file that is a link, directory, FIFO, socket or device (never opened for
    data, never written), or a hard-linked file about to be written."""

    kind = NOT_A_REGULAR_FILE


class FileTooLargeError(OSError):
    """A metadata file larger than the configured cap (not read)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(what: str, name: str) -> NotRegularFileError:
    return NotRegularFileError(errno.EINVAL, f"not a regular file ({what})", name)


def open_dir(
    name: PathLike,
    dir_fd: Optional[int] = None,
    *,
    follow: bool = False,
    create: bool = False,
    display: Optional[str] = None,
) -> int:
    """Open a directory (relative to `dir_fd` if given) for use as a dir_fd. Without `follow`
    a symbolic link is refused (NotRegularFileError). `create` makes it first (mode 0755)."""
    shown = display or os.fspath(name)
    flags = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC | (0 if follow else _O_NOFOLLOW)
    if create:
        try:
            return make_dir(name, dir_fd, display=shown)
        except FileExistsError:
            pass
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                raise exc from None
            kind = _kind(st.st_mode)
            if kind == "a regular file":  # where a directory was expected
                raise NotRegularFileError(
                    errno.ENOTDIR, f"not a directory ({kind})", shown
                ) from None
            raise _not_regular(kind, shown) from None
        raise


def _give_away(fd: int, parent: os.stat_result, mode: int) -> None:
    """A file or directory this process has just created (`fd`) gets `mode` (less 0o7000)
    and the owner and group of `parent`, the directory it was created in. The owner is
    changed only while the file is still ours (best effort: only root may give a file
    away, so an unprivileged run keeps its own files, as any program's)."""
    os.fchmod(fd, mode & 0o777)
    st = os.fstat(fd)
    if (
        hasattr(os, "fchown")
        and st.st_uid == os.geteuid()
        and (st.st_uid, st.st_gid) != (parent.st_uid, parent.st_gid)
    ):
        try:
            os.fchown(fd, parent.st_uid, parent.st_gid)
        except PermissionError:
            pass


def make_dir(
    name: PathLike,
    dir_fd: Optional[int] = None,
    mode: int = 0o755,
    *,
    display: Optional[str] = None,
) -> int:
    """Create the directory `name` (relative to `dir_fd` if given; FileExistsError if
    anything is there) and open it without following a link: the descriptor. It gets the
    owner and group of its parent directory and `mode` less 0o7000 (see `_give_away`)."""
    shown = display or os.fspath(name)
    os.mkdir(name, 0o700, dir_fd=dir_fd)
    try:
        fd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC | _O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # replaced under us: not ours
            raise _not_regular("not the directory just made", shown) from None
        raise
    try:
        _give_away(fd, os.stat("..", dir_fd=fd), mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir_nofollow_path(path: PathLike, *, display: Optional[str] = None) -> int:
    """Open the directory `path` component by component from `/`, following no symbolic
    link anywhere in it (NotRegularFileError naming the first link met; FileNotFoundError
    when a component is missing): nothing reached through it can be elsewhere."""
    shown = display or os.fspath(path)
    full = os.path.abspath(os.fspath(path))
    root = os.open("/", os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    try:
        return open_dir_chain(root, [p for p in full.split("/") if p], start="/", display=shown)
    finally:
        os.close(root)


def open_regular(
    dir_fd: int,
    name: str,
    flags: int = os.O_RDONLY,
    *,
    create: bool = False,
    mode: int = 0o644,
    single_link: bool = False,
    exclusive: bool = False,
    display: Optional[str] = None,
) -> int:
    """Open `name` in `dir_fd` without following a link or blocking; fstat-check it is a
    regular file (and, with `single_link`, not hard-linked elsewhere). Returns the fd, in
    blocking mode again. `create` creates it when absent (never through a link; with
    `exclusive`, FileExistsError when anything is there): a file created here gets the
    owner and group of the directory and `mode` less 0o7000. `name` must be one plain
    entry (UnsafeNameError for `..`, `.`, an empty name, or one holding `/` or NUL)."""
    shown = display or name
    check_component(name, display)
    oflags = flags | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
    created = False
    fd = -1
    if create:
        for _ in range(100):
            try:
                fd = _open_checked(dir_fd, name, oflags | os.O_CREAT | os.O_EXCL, 0o600, shown)
                created = True
                break
            except FileExistsError:
                if exclusive:
                    raise
            try:  # someone's file (or a link, refused below): open it as it is
                fd = _open_checked(dir_fd, name, oflags, 0, shown)
                break
            except FileNotFoundError:
                continue  # removed meanwhile: create it again
        if fd < 0:
            raise FileExistsError(errno.EEXIST, "created and removed repeatedly", shown)
    else:
        fd = _open_checked(dir_fd, name, oflags, 0, shown)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(_kind(st.st_mode), shown)
        if single_link and st.st_nlink > 1:
            raise NotRegularFileError(
                errno.EMLINK, f"refusing to write a file with {st.st_nlink} hard links", shown
            )
        if created:
            _give_away(fd, os.fstat(dir_fd), mode)
        if _O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_checked(dir_fd: int, name: str, oflags: int, mode: int, shown: str) -> int:
    """os.open, a link or other non-regular file raised as NotRegularFileError."""
    try:
        return os.open(name, oflags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _not_regular("a symbolic link", shown) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV):
            # ENXIO: a FIFO with no reader opened for writing, a socket; EISDIR: a directory
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                what = _kind(st.st_mode)
            except OSError:
                what = "not a regular file"
            raise _not_regular(what, shown) from None
        if exc.filename is None:
            exc.filename = shown
        raise


def read_regular(
    dir_fd: int, name: str, limit: Optional[int] = None, *, display: Optional[str] = None
) -> bytes:
    """The whole of a regular file, refused (FileTooLargeError) when fstat says it is larger
    than `limit` (default max_metadata_bytes()) or it grows past it while being read."""
    shown = display or name
    cap = max_metadata_bytes() if limit is None else int(limit)
    fd = open_regular(dir_fd, name, display=shown)
    try:
        size = os.fstat(fd).st_size
        if size > cap:
            raise FileTooLargeError(
                errno.EFBIG,
                f"file of {size} bytes exceeds the {cap}-byte limit for metadata (not read)",
                shown,
            )
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = os.preadv(fd, [view[got:]], got)
            if n <= 0:
                break
            got += n
        if got == size and os.pread(fd, 1, size):
            raise FileTooLargeError(errno.EFBIG, "file grew while being read", shown)
        return bytes(view[:got])
    finally:
        os.close(fd)


def read_named(path: PathLike, limit: Optional[int] = None) -> bytes:
    """A metadata file the user named (its last component may be a link the user chose):
    refused unless regular and within `limit` bytes (see read_regular); never blocks."""
    name = os.fspath(path)
    directory, base = os.path.split(os.path.abspath(name))
    try:
        target = os.path.realpath(name)
        directory, base = os.path.split(target)
    except OSError:
        pass
    dfd = open_dir(directory, follow=True)
    try:
        return read_regular(dfd, base, limit, display=name)
    finally:
        os.close(dfd)


def replace_atomic(dir_fd: int, name: str, data: bytes, *, display: Optional[str] = None) -> None:
    """Replace `name` in `dir_fd` by `data` atomically (temp file, fsync, rename, fsync of
    the directory), keeping the old file's owner, group and mode (less setuid, setgid and
    sticky); a new file gets the directory's owner and group and mode 0644. Refuses
    (NotRegularFileError) to replace a link, FIFO, directory or other non-regular file."""
    shown = display or name
    try:
        old: Optional[os.stat_result] = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise _not_regular(_kind(old.st_mode), shown)
    if old is not None:
        uid, gid, mode = old.st_uid, old.st_gid, stat.S_IMODE(old.st_mode) & ~_SPECIAL_BITS
    else:
        dst = os.fstat(dir_fd)
        uid, gid, mode = dst.st_uid, dst.st_gid, 0o644
    fd = -1
    tmp = ""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                0o600,
                dir_fd=dir_fd,
            )
            break
        except FileExistsError:
            continue
    if fd < 0:
        raise FileExistsError(errno.EEXIST, "cannot create a temporary file", shown)
    try:
        try:
            view = memoryview(data)
            done = 0
            while done < len(view):
                done += os.write(fd, view[done:])
            if hasattr(os, "fchown"):
                try:
                    os.fchown(fd, uid, gid)
                except PermissionError:
                    pass  # not root: the file is ours, as any file we create
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    try:
        os.fsync(dir_fd)
    except OSError:
        pass


class ReplicaDir:
    """Descriptors of one replica's directory and its `chunks/` and `metadata/`.

    The replica directory itself is opened once (a link there is refused, as everywhere); its
    subdirectories are opened without following links, lazily, and cached. Close it (or use
    it as a context manager) when done.
    """

    def __init__(self, root: PathLike) -> None:
        self.root = Path(root)
        self._fd: Optional[int] = open_dir(os.fspath(root))
        self._subs: Dict[str, int] = {}
        self._lock = threading.Lock()  # worker threads open blocks concurrently

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise ValueError("replica directory is closed")
        return self._fd

    def sub(self, name: str, *, create: bool = False) -> int:
        """The descriptor of `chunks` or `metadata` (FileNotFoundError if absent and not
        `create`; NotRegularFileError if it is a link or not a directory)."""
        with self._lock:
            fd = self._subs.get(name)
            if fd is None:
                fd = open_dir(name, self.fd, create=create, display=os.fspath(self.root / name))
                self._subs[name] = fd
            return fd

    def show(self, *parts: str) -> str:
        return os.fspath(self.root.joinpath(*parts))

    def close(self) -> None:
        for fd in self._subs.values():
            os.close(fd)
        self._subs.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> ReplicaDir:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


# ---- walking down a chain of directories (issue 24: the one walk every layout and job uses) --


def open_dir_chain(
    dir_fd: int, names: Sequence[str], *, start: PathLike = "", display: Optional[str] = None
) -> int:
    """A new descriptor of dir_fd/names[0]/names[1]/..., each name one plain entry
    (UnsafeNameError otherwise) opened with O_DIRECTORY|O_NOFOLLOW relative to the one
    before: a symbolic link anywhere on the way is NotRegularFileError naming where it was
    met (`start` is the path of `dir_fd`, for messages), a missing component
    FileNotFoundError naming it. `dir_fd` itself stays open (the caller's); with no names,
    a duplicate of it."""
    shown = display or os.fspath(start)
    fd = os.dup(dir_fd)
    here = os.fspath(start)
    try:
        for part in names:
            check_component(part, display)
            here = os.path.join(here, part)
            try:
                nfd = os.open(
                    part, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC | _O_NOFOLLOW, dir_fd=fd
                )
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    try:
                        kind = _kind(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                    except OSError:
                        raise exc from None
                    raise NotRegularFileError(
                        exc.errno,
                        f"{here} is {kind}, not a directory (no link is followed here)",
                        shown,
                    ) from None
                if exc.filename is None or exc.filename == part:
                    exc.filename = here
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd
