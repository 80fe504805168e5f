"""Ozone's per-volume RocksDB (`container.db`, schema V3): keys, a read-only view, a writer.

Binding: rocksdict (PyPI; Rust rust-rocksdb with RocksDB bundled, wheels for CPython 3.9-3.13
on Linux x86_64/aarch64, macOS and Windows). It is the only maintained binding with such
wheels; it reads raw bytes with `Options(raw_mode=True)`. It writes `rocksdict-config.json`
into the DB directory on *every* open, read-only and secondary opens included, so a live
datanode's DB is never opened in place: `VolumeDB` opens a private snapshot instead. SST files
are immutable, so the snapshot hard-links them (copies them when the snapshot directory is on
another filesystem) and copies the few small mutable files RocksDB reads: CURRENT, the
MANIFEST that CURRENT names, the WAL `<number>.log` files and IDENTITY. Nothing else in the
directory is taken (a stray file of any size is ignored), and every copy is bounded: a file
larger than CRCMERKLE_MAX_DB_FILE_BYTES (default 1 GiB) or than the free space of the snapshot
directory makes the volume unreadable with one reason (VolumeDBError) instead of filling the
temporary filesystem. The snapshot directory is private (mkdtemp, mode 0700). The OPTIONS
file is left out on purpose: an OPTIONS file written by a newer
RocksDB may name options this RocksDB does not know and fail the open; default options read
any Ozone DB (Ozone's own `ldb` tool opens it that way). If the live DB replaced its MANIFEST
or compacted an SST away while the snapshot was taken, the snapshot is taken again.

Keys (DatanodeSchemaThreeDBDefinition): 8-byte big-endian container ID, the separator `|`,
then ASCII text: the decimal localID in `block_data`, `#BLOCKCOUNT` etc. in `metadata`
(values 8-byte big-endian longs).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import struct
import tempfile
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from merkle.replica.safeopen import NotRegularFileError, open_dir, open_regular

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "BLOCK_DATA",
    "COLUMN_FAMILIES",
    "METADATA",
    "LockedVolumeDB",
    "VolumeDB",
    "VolumeDBError",
    "VolumeInUseError",
    "block_key",
    "cf_options",
    "container_prefix",
    "load_rocksdict",
    "lock_is_free",
    "refuse_non_directory",
    "take_snapshot",
    "write_volume_db",
]

PathLike = Union[str, "os.PathLike[str]"]

BLOCK_DATA = "block_data"
METADATA = "metadata"
#: the column families of a schema-V2/V3 datanode DB (besides `default`)
COLUMN_FAMILIES = (BLOCK_DATA, METADATA, "delete_txns", "finalize_blocks", "last_chunk_info")
SEPARATOR = b"|"
#: immutable table and blob files: hard-linked into the snapshot
_IMMUTABLE = re.compile(r"[0-9]+\.(sst|blob)")
#: the mutable files RocksDB reads at open, besides the MANIFEST that CURRENT names: copied
_WAL = re.compile(r"[0-9]+\.log")
_MANIFEST = re.compile(r"MANIFEST-[0-9]+")
_IDENTITY = "IDENTITY"
_SNAPSHOT_ATTEMPTS = 5
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


def container_prefix(container_id: int) -> bytes:
    return struct.pack(">q", int(container_id)) + SEPARATOR


def block_key(container_id: int, local_id: int) -> bytes:
    return container_prefix(container_id) + str(int(local_id)).encode("ascii")


def load_rocksdict() -> Any:
    """The rocksdict module, or VolumeDBError (one line) naming the extra that installs it."""
    try:
        import rocksdict
    except ImportError:
        raise VolumeDBError(
            "reading Ozone volumes needs rocksdict: pip install 'crcmerkle[ozone]'"
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


class VolumeDB:
    """A read-only view of one volume's `container.db`, through a private snapshot.

    Open it once per volume and read every container of that volume from it; close() (or a
    `with` block) closes the DB and removes the snapshot. Nothing is written in `db_dir`.
    """

    def __init__(self, db_dir: PathLike, *, snapshot_dir: Optional[PathLike] = None) -> None:
        self.path = os.fspath(db_dir)
        rd = load_rocksdict()
        refuse_non_directory(self.path)
        # the temp directory unless told: CRCMERKLE_SNAPSHOT_DIR on the volume's filesystem
        # (outside the volume) makes every table file a hard link instead of a copy
        where = snapshot_dir if snapshot_dir is not None else os.environ.get(SNAPSHOT_ENV)
        try:
            self._snap = tempfile.mkdtemp(
                prefix="crcmerkle-db-", dir=None if not where else os.fspath(where)
            )
        except OSError as exc:
            raise VolumeDBError(
                f"cannot make a snapshot directory in {where}: {exc.strerror or exc}"
            ) from None
        self._db: Any = None
        try:
            last: Optional[BaseException] = None
            for _ in range(_SNAPSHOT_ATTEMPTS):
                try:
                    take_snapshot(self.path, self._snap)
                    self._db = self._open(rd)
                    break
                except VolumeDBError:
                    raise
                except NotRegularFileError as exc:  # a planted link/FIFO: not a moving DB
                    raise VolumeDBError(f"{self.path}: {exc.filename}: {exc.strerror}") from None
                except Exception as exc:  # noqa: BLE001  a moving live DB: snapshot again
                    # (rocksdict raises plain Exception for RocksDB errors)
                    last = exc
                    for e in os.scandir(self._snap):
                        os.unlink(e.path)
            if self._db is None:
                msg = str(last).splitlines()[0] if last is not None and str(last) else "unknown"
                raise VolumeDBError(f"{self.path}: cannot open the RocksDB: {msg}")
        except BaseException:
            shutil.rmtree(self._snap, ignore_errors=True)
            raise
        self._block_cf = self._db.get_column_family(BLOCK_DATA)
        self._meta_cf = self._db.get_column_family(METADATA)

    def _open(self, rd: Any) -> Any:
        names = rd.Rdict.list_cf(self._snap, rd.Options(raw_mode=True))
        missing = [n for n in (BLOCK_DATA, METADATA) if n not in names]
        if missing:
            raise VolumeDBError(
                f"{self.path}: no column family {', '.join(missing)} (not a schema-V3 datanode DB)"
            )
        return rd.Rdict(
            self._snap,
            options=rd.Options(raw_mode=True),
            column_families={n: rd.Options(raw_mode=True) for n in names if n != "default"},
            access_type=rd.AccessType.read_only(),
        )

    def _prefixed(self, cf: Any, container_id: int) -> Iterator[Tuple[bytes, bytes]]:
        prefix = container_prefix(container_id)
        it = cf.iter()
        it.seek(prefix)
        while it.valid():
            key = it.key()
            if not key.startswith(prefix):
                break
            yield key[len(prefix) :], it.value()
            it.next()

    def block_values(self, container_id: int) -> Iterator[Tuple[bytes, bytes]]:
        """(key after the prefix, BlockData bytes) of every block of the container, in key
        order, `#`-prefixed keys skipped (Ozone's unprefixed-key filter)."""
        for rest, value in self._prefixed(self._block_cf, container_id):
            if not rest.startswith(b"#"):
                yield rest, value

    def metadata(self, container_id: int) -> Dict[str, int]:
        """The container's `metadata` counters (`#BLOCKCOUNT`, `#BCSID`, ...)."""
        out: Dict[str, int] = {}
        for rest, value in self._prefixed(self._meta_cf, container_id):
            if len(value) == 8:
                out[rest.decode("latin-1")] = struct.unpack(">q", value)[0]
        return out

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._snap is not None:
            shutil.rmtree(self._snap, ignore_errors=True)

    def __enter__(self) -> VolumeDB:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def cf_options(rd: Any) -> Any:
    """Ozone's column-family options (DatanodeDBProfile): 9-byte fixed prefix extractor (the
    container prefix), Bloom filter, block-based table format_version 5, Snappy."""
    o = rd.Options(raw_mode=True)
    t = rd.BlockBasedOptions()
    t.set_format_version(5)
    t.set_block_size(16 * 1024)
    t.set_bloom_filter(10, False)
    o.set_block_based_table_factory(t)
    o.set_prefix_extractor(rd.SliceTransform.create_fixed_prefix(9))
    o.set_compression_type(rd.DBCompressionType.snappy())
    return o


def write_volume_db(
    db_dir: PathLike, block_data: Dict[bytes, bytes], metadata: Dict[bytes, bytes]
) -> None:
    """Create a schema-V3 `container.db` holding `block_data` and `metadata` (full keys),
    with Ozone's column families and table options (9-byte fixed prefix extractor, Bloom
    filter, block-based format_version 5, Snappy), flushed to SST files."""
    rd = load_rocksdict()
    opts = cf_options(rd)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    db = rd.Rdict(
        os.fspath(db_dir),
        options=opts,
        column_families={n: cf_options(rd) for n in COLUMN_FAMILIES},
    )
    try:
        for name, rows in ((BLOCK_DATA, block_data), (METADATA, metadata)):
            cf = db.get_column_family(name)
            for k in sorted(rows):
                cf[k] = rows[k]
        for name in COLUMN_FAMILIES:
            db.get_column_family(name).flush()
        db.flush()
    finally:
        db.close()
    try:  # the binding's own file is no part of an Ozone DB
        os.unlink(os.path.join(os.fspath(db_dir), "rocksdict-config.json"))
    except FileNotFoundError:
        pass


_CONFIG_FILE = "rocksdict-config.json"


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


def _only_regular_files(db_dir: str) -> None:
    """VolumeDBError unless every entry RocksDB may open in place is a regular file: a FIFO
    or link planted as CURRENT, a MANIFEST or a table would hang or redirect the open."""
    dfd = _open_db_dir(db_dir)
    try:
        for entry in os.scandir(dfd):
            if entry.name == _CONFIG_FILE or entry.is_dir(follow_symlinks=False):
                continue
            if not entry.is_file(follow_symlinks=False):
                raise VolumeDBError(
                    f"{os.path.join(db_dir, entry.name)}: not a regular file (never opened)"
                )
    finally:
        os.close(dfd)


class LockedVolumeDB(VolumeDB):
    """A volume's `container.db` opened in place, read-write, for an offline repair.

    RocksDB takes the DB's LOCK at open and holds it until close(), so a datanode cannot
    start on the volume meanwhile (it would fail to open its DB) and a second repair is
    refused (VolumeInUseError). Every column family is opened with Ozone's options, so what
    RocksDB flushes is what a datanode would write. Writes go through write_batch: one atomic,
    synced WriteBatch. close() removes the config file our binding leaves in the directory.
    """

    def __init__(self, db_dir: PathLike) -> None:  # noqa: D107 (no snapshot: in place)
        self.path = os.fspath(db_dir)
        self._snap = None  # type: ignore[assignment]  # no snapshot: the DB is read in place
        self._db = None
        rd = load_rocksdict()
        refuse_non_directory(self.path)
        if not os.path.isfile(os.path.join(self.path, "CURRENT")):
            raise VolumeDBError(f"{self.path}: not a RocksDB directory")
        _only_regular_files(self.path)
        lock_is_free(self.path)
        self._had_config = os.path.lexists(os.path.join(self.path, _CONFIG_FILE))
        try:
            names = rd.Rdict.list_cf(self.path, rd.Options(raw_mode=True))
            missing = [n for n in (BLOCK_DATA, METADATA) if n not in names]
            if missing:
                raise VolumeDBError(
                    f"{self.path}: no column family {', '.join(missing)} "
                    f"(not a schema-V3 datanode DB)"
                )
            # every column family must be opened to write; unknown ones get Ozone's options
            self._db = rd.Rdict(
                self.path,
                options=cf_options(rd),
                column_families={n: cf_options(rd) for n in names if n != "default"},
            )
        except VolumeDBError:
            self._drop_config()
            raise
        except Exception as exc:  # noqa: BLE001  rocksdict raises plain Exception
            self._drop_config()
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "lock" in msg.lower():
                raise VolumeInUseError(f"{self.path}: the volume is online ({msg})") from None
            raise VolumeDBError(f"{self.path}: cannot open the RocksDB: {msg}") from None
        self._rd = rd
        self._block_cf = self._db.get_column_family(BLOCK_DATA)
        self._meta_cf = self._db.get_column_family(METADATA)

    def _drop_config(self) -> None:
        if not self._had_config:
            try:
                os.unlink(os.path.join(self.path, _CONFIG_FILE))
            except FileNotFoundError:
                pass

    def write_batch(
        self, block_data: Mapping[bytes, bytes], metadata: Mapping[bytes, bytes]
    ) -> None:
        """Put these full keys in one atomic WriteBatch, synced to the WAL before returning."""
        rd = self._rd
        wb = rd.WriteBatch(raw_mode=True)
        for name, rows in ((BLOCK_DATA, block_data), (METADATA, metadata)):
            handle = self._db.get_column_family_handle(name)
            for k in sorted(rows):
                wb.put(k, rows[k], handle)
        if wb.is_empty():
            return
        opts = rd.WriteOptions()
        opts.sync = True
        try:
            self._db.write(wb, opts)
        except Exception as exc:  # noqa: BLE001  an I/O error of the DB, not corruption
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise OSError(errno.EIO, f"writing block_data: {msg}", self.path) from None

    def close(self) -> None:
        try:
            if self._db is not None:
                # the column-family handles keep the DB (and its LOCK) alive: drop them first
                self._block_cf = self._meta_cf = None
                self._db.close()  # the WAL is synced already; RocksDB releases the LOCK
                self._db = None
        finally:
            self._drop_config()
