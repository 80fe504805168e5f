"""Ozone's per-volume RocksDB (`container.db`, schema V3): keys, a read-only view, a writer.

The DB is read through a private snapshot, never in place (merkle.replica.rocksdb: the
binding, the bounded snapshot, the LOCK probe).

Keys (DatanodeSchemaThreeDBDefinition): 8-byte big-endian container ID, the separator `|`,
then ASCII text: the decimal localID in `block_data`, `#BLOCKCOUNT` etc. in `metadata`
(values 8-byte big-endian longs).
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import tempfile
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from merkle.replica.rocksdb import (
    CONFIG_FILE,
    SNAPSHOT_ATTEMPTS,
    SNAPSHOT_ENV,
    VolumeDBError,
    VolumeInUseError,
    load_rocksdict,
    lock_is_free,
    only_regular_files,
    refuse_non_directory,
    take_snapshot,
)
from merkle.replica.safeopen import NotRegularFileError

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


def container_prefix(container_id: int) -> bytes:
    return struct.pack(">q", int(container_id)) + SEPARATOR


def block_key(container_id: int, local_id: int) -> bytes:
    return container_prefix(container_id) + str(int(local_id)).encode("ascii")


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
            for _ in range(SNAPSHOT_ATTEMPTS):
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
        only_regular_files(self.path)
        lock_is_free(self.path)
        self._had_config = os.path.lexists(os.path.join(self.path, CONFIG_FILE))
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
                os.unlink(os.path.join(self.path, CONFIG_FILE))
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
