"""Ozone's key map, read from an OM DB checkpoint (`om.db`, RocksDB), never written.

`open_om_db(path)` takes a private snapshot of the checkpoint directory (hard links or bounded
copies, as the datanode's `container.db` is read: merkle.replica.rocksdb) and opens that
read-only with the column-family list; `OmDB.keys()` yields one `OmKey` per key:
object-store and legacy buckets from `keyTable` (DB key `/vol/bucket/key`), file-system-
optimised buckets from `fileTable` (DB key `/<volumeID>/<bucketID>/<parentObjectID>/<name>`)
with the path rebuilt from parent object IDs through `directoryTable` up to the bucket.

Everything read from the DB is data: names are never joined to a filesystem path, no memory is
sized from a number in a record, the directory walk is bounded. A record that does not parse is
one line in `OmDB.problems` and skipped; a key whose directory chain is broken (a cycle, a
missing parent, too deep, a name Ozone never writes) is yielded with `reason` set (the copy
check calls it UNVERIFIED) and the walk goes on.
"""

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from google.protobuf.message import DecodeError

from merkle.copies import om_pb2
from merkle.replica.rocksdb import (  # the snapshot rules the datanode DBs are read by
    SNAPSHOT_ENV,
    NotRegularFileError,
    VolumeDBError,
    load_rocksdict,
    refuse_non_directory,
    take_snapshot,
)

VOLUME_TABLE = "volumeTable"
BUCKET_TABLE = "bucketTable"
KEY_TABLE = "keyTable"
FILE_TABLE = "fileTable"
DIRECTORY_TABLE = "directoryTable"
REQUIRED_TABLES = (VOLUME_TABLE, BUCKET_TABLE, KEY_TABLE, FILE_TABLE, DIRECTORY_TABLE)
#: Every column family of an OM DB besides `default`: OMDBDefinition.COLUMN_FAMILIES (Ozone's
#: hadoop-ozone/ozone-manager .../om/codec/OMDBDefinition.java), the set the golden om.db holds.
#: Ozone's own tooling (DBStoreBuilder with OMDBDefinition, as `ozone debug om ...` opens an OM
#: DB) refuses a DB that lacks any of them ("Column family not found: deletedTable").
OM_COLUMN_FAMILIES = (
    BUCKET_TABLE,
    "compactionLogTable",
    "dTokenTable",
    "deletedDirectoryTable",
    "deletedTable",
    DIRECTORY_TABLE,
    FILE_TABLE,
    KEY_TABLE,
    "lifecycleConfigurationTable",
    "lifecycleScanStateTable",
    "metaTable",
    "multipartInfoTable",
    "multipartPartsTable",
    "openFileTable",
    "openKeyTable",
    "prefixTable",
    "principalToAccessIdsTable",
    "s3SecretTable",
    "snapshotInfoTable",
    "snapshotRenamedTable",
    "tenantAccessIdTable",
    "tenantStateTable",
    "transactionInfoTable",
    "userTable",
    VOLUME_TABLE,
)

_LONG = re.compile(r"-?[0-9]{1,19}")  # Long.toString's form (int() would also take "+1", " 1")
MAX_DEPTH = 4096  # directory levels walked up from a file before it is called too deep
MAX_PROBLEMS = 10000  # lines kept in OmDB.problems (problem_count counts them all)

# Ozone's enums (hdds.proto ReplicationType / ReplicationFactor, OmClientProtocol.proto
# BucketLayoutProto, FileChecksumTypeProto, ChecksumTypeProto), kept as int32 on the wire
REPLICATION_TYPES = {1: "RATIS", 2: "STAND_ALONE", 3: "CHAINED", 4: "EC", -1: "NONE"}
REPLICATION_FACTORS = {0: "ZERO", 1: "ONE", 3: "THREE"}
BUCKET_LAYOUTS = {1: "LEGACY", 2: "FILE_SYSTEM_OPTIMIZED", 3: "OBJECT_STORE"}
FILE_CHECKSUM_TYPES = {1: "MD5CRC", 2: "COMPOSITE_CRC"}
CRC_TYPES = {0: "NULL", 1: "CRC32", 2: "CRC32C"}


class OmDBError(Exception):
    """The OM DB could not be opened (one line)."""


def _signed(value: int) -> int:
    """A uint64 field as Java's long: OM object IDs carry the epoch in the top bits, so they
    are negative, and FSO keys print them that way."""
    return value - (1 << 64) if value >= (1 << 63) else value


@dataclass(frozen=True)
class OmBlock:
    container_id: int
    local_id: int
    offset: int
    length: int


@dataclass(frozen=True)
class OmReplication:
    type: str  # RATIS, STAND_ALONE, EC, ... (or UNKNOWN(n))
    factor: Optional[str] = None  # ONE / THREE for RATIS and STAND_ALONE
    ec_data: Optional[int] = None
    ec_parity: Optional[int] = None
    ec_codec: Optional[str] = None
    ec_chunk_size: Optional[int] = None

    def __str__(self) -> str:
        # Ozone's own forms: RatisReplicationConfig "RATIS/THREE", ECReplicationConfig
        # "EC{rs-3-2-1024k}"
        if self.type == "EC" and self.ec_data is not None:
            chunk = self.ec_chunk_size or 0
            return (
                f"EC{{{(self.ec_codec or '').lower()}-{self.ec_data}-{self.ec_parity}-"
                f"{chunk // 1024}k}}"
            )
        return f"{self.type}/{self.factor}" if self.factor else self.type


@dataclass(frozen=True)
class OmFileChecksum:
    kind: str  # COMPOSITE_CRC or MD5CRC (or UNKNOWN(n))
    algorithm: Optional[str] = None  # CRC32 / CRC32C for COMPOSITE_CRC
    bytes_per_crc: Optional[int] = None
    value: Optional[bytes] = None  # COMPOSITE_CRC: the CRC, 4 bytes big-endian

    def __str__(self) -> str:
        if self.kind == "COMPOSITE_CRC" and self.value is not None:
            return f"COMPOSITE-{self.algorithm}:0x{self.value.hex()}"
        return self.kind


@dataclass(frozen=True)
class OmKey:
    """One key of the OM DB. `path` is the key name inside the bucket (for FSO the rebuilt
    `dir/dir/file`, None when the chain is broken: see `reason`)."""

    table: str
    db_key: str
    volume: Optional[str]
    bucket: Optional[str]
    path: Optional[str]
    size: int
    replication: OmReplication
    version: Optional[int]  # of the latest location group (None: no location group)
    versions: int  # location groups stored (only the latest one's blocks are kept)
    blocks: Tuple[OmBlock, ...]
    file_checksum: Optional[OmFileChecksum]
    metadata: Tuple[Tuple[str, str], ...]
    object_id: int
    record: bytes  # the stored value as read (unknown fields intact)
    reason: Optional[str] = None  # why this key cannot be verified, one line
    # stored encrypted (fileEncryptionInfo, on the key or its latest location group): the
    # datanodes' checksums are of the ciphertext, so no copy of the plaintext compares with them
    encrypted: bool = False
    multipart: bool = False  # the latest location group is a multipart upload's

    @property
    def name(self) -> str:
        """`/volume/bucket/path` (as S3 and `ozone sh` name it), or the DB key."""
        if self.path is None or self.volume is None or self.bucket is None:
            return self.db_key
        return f"/{self.volume}/{self.bucket}/{self.path}"


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8") from None


def _replication(info: Any) -> OmReplication:
    typ = REPLICATION_TYPES.get(info.type, f"UNKNOWN({info.type})")
    if info.HasField("ecReplicationConfig"):
        ec = info.ecReplicationConfig
        return OmReplication(
            typ, None, ec.data, ec.parity, _text(ec.codec, "EC codec"), ec.ecChunkSize
        )
    factor = (
        REPLICATION_FACTORS.get(info.factor, f"UNKNOWN({info.factor})")
        if info.HasField("factor")
        else None
    )
    return OmReplication(typ, factor)


def _file_checksum(info: Any) -> Optional[OmFileChecksum]:
    if not info.HasField("fileChecksum"):
        return None
    fc = info.fileChecksum
    kind = FILE_CHECKSUM_TYPES.get(fc.checksumType, f"UNKNOWN({fc.checksumType})")
    if kind == "COMPOSITE_CRC" and fc.HasField("compositeCrc"):
        cc = fc.compositeCrc
        return OmFileChecksum(
            kind,
            CRC_TYPES.get(cc.checksumType, f"UNKNOWN({cc.checksumType})"),
            cc.bytesPerCrc,
            cc.crc.to_bytes(4, "big"),
        )
    return OmFileChecksum(kind)


def _pairs(kvs: Any, what: str) -> Tuple[Tuple[str, str], ...]:
    return tuple((_text(kv.key, what), _text(kv.value, what)) for kv in kvs)


def _latest(info: Any) -> Tuple[Optional[int], Tuple[OmBlock, ...]]:
    """The last location group (Ozone's getLatestVersionLocations) and its blocks, in order."""
    if not info.keyLocationList:
        return None, ()
    group = info.keyLocationList[-1]
    blocks = []
    for loc in group.keyLocations:
        cb = loc.blockID.containerBlockID
        if not (
            loc.HasField("blockID")
            and loc.blockID.HasField("containerBlockID")
            and cb.HasField("containerID")
            and cb.HasField("localID")
        ):
            raise ValueError("a block location has no container or local ID")
        blocks.append(OmBlock(cb.containerID, cb.localID, loc.offset, loc.length))
    return group.version, tuple(blocks)


def _key_info(value: bytes) -> Any:
    info = om_pb2.KeyInfo.FromString(value)
    for field in ("volumeName", "bucketName", "keyName", "dataSize", "type"):
        if not info.HasField(field):
            raise ValueError(f"the value has no {field}")
    return info


def _why(exc: Exception, message: str) -> str:
    """One line for a record that cannot be read: the protobuf runtime's words for a value that
    does not parse, ours (ValueError) for the rest."""
    if isinstance(exc, DecodeError):
        return f"the value does not parse as {message} ({str(exc).splitlines()[0][:200]})"
    return str(exc)


def _plain_name(name: str) -> bool:
    """A path component as Ozone writes one (never empty, `.`, `..`, nor holding `/`)."""
    return name not in ("", ".", "..") and "/" not in name and "\x00" not in name


class OmDB:
    """A read-only view of an OM DB checkpoint, through a private snapshot; close() (or a
    `with` block) closes it and removes the snapshot."""

    def __init__(
        self,
        path: "os.PathLike[str] | str",
        *,
        snapshot_dir: "Optional[os.PathLike[str] | str]" = None,
    ) -> None:
        self.path = os.fspath(path)
        self.problems: List[str] = []
        self.problem_count = 0
        rd = load_rocksdict()
        try:
            refuse_non_directory(self.path)
        except VolumeDBError as exc:
            raise OmDBError(str(exc)) from None
        # the temp directory unless told: CRCMERKLE_SNAPSHOT_DIR (or snapshot_dir) on the
        # checkpoint's filesystem makes every table file a hard link instead of a copy
        where = snapshot_dir if snapshot_dir is not None else os.environ.get(SNAPSHOT_ENV)
        try:
            self._snap = tempfile.mkdtemp(
                prefix="crcmerkle-omdb-", dir=None if not where else os.fspath(where)
            )
        except OSError as exc:
            raise OmDBError(f"cannot make a snapshot directory: {exc.strerror or exc}") from None
        self._db: Any = None
        try:
            try:
                take_snapshot(self.path, self._snap)
            except VolumeDBError as exc:
                raise OmDBError(str(exc)) from None
            except NotRegularFileError as exc:
                raise OmDBError(f"{self.path}: {exc.filename}: {exc.strerror}") from None
            except OSError as exc:
                raise OmDBError(
                    f"{self.path}: not a RocksDB directory: {exc.strerror or exc}"
                ) from None
            opts = rd.Options(raw_mode=True)
            try:
                names = rd.Rdict.list_cf(self._snap, opts)
                missing = [n for n in REQUIRED_TABLES if n not in names]
                if missing:
                    raise OmDBError(
                        f"{self.path}: no column family {', '.join(missing)} (not an OM DB)"
                    )
                self._db = rd.Rdict(
                    self._snap,
                    options=opts,
                    column_families={n: rd.Options(raw_mode=True) for n in names if n != "default"},
                    access_type=rd.AccessType.read_only(),
                )
            except OmDBError:
                raise
            except Exception as exc:  # noqa: BLE001  rocksdict raises plain Exception
                raise OmDBError(
                    f"{self.path}: cannot open the RocksDB: {self._line(exc)}"
                ) from None
        except BaseException:
            shutil.rmtree(self._snap, ignore_errors=True)
            raise

    def __enter__(self) -> "OmDB":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        shutil.rmtree(self._snap, ignore_errors=True)

    def _report(self, table: str, key: bytes, why: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            shown = key.decode("utf-8", "backslashreplace")[:200]
            self.problems.append(f"{table} {shown!r}: {why}; skipped")

    def rows(self, table: str) -> Iterator[Tuple[bytes, bytes]]:
        """(key, value) bytes of a column family, in key order."""
        try:
            it = self._db.get_column_family(table).iter()
            it.seek_to_first()
            while it.valid():
                key, value = it.key(), it.value()
                yield key, value
                it.next()
            it.status()  # an iterator stops early on a read error: say so, not "no more keys"
        except Exception as exc:  # noqa: BLE001  rocksdict raises plain Exception
            if isinstance(exc, OmDBError):
                raise
            raise OmDBError(f"{self.path}: {table}: {self._line(exc)}") from None

    def _line(self, exc: BaseException) -> str:
        """A RocksDB error's first line, naming the checkpoint rather than the snapshot."""
        line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return line.replace(self._snap, self.path)

    def _decoded(self, table: str, message: Any) -> Iterator[Tuple[str, bytes, Any]]:
        for key, value in self.rows(table):
            try:
                yield _text(key, "the DB key"), value, message.FromString(value)
            except (DecodeError, ValueError) as exc:
                self._report(table, key, _why(exc, message.DESCRIPTOR.name))

    def buckets(self) -> Dict[Tuple[int, int], Tuple[str, str, str]]:
        """{(volume objectID, bucket objectID): (volume, bucket, layout)}, signed IDs."""
        volumes: Dict[str, int] = {}
        for key, _, info in self._decoded(VOLUME_TABLE, om_pb2.VolumeInfo):
            try:
                volumes[_text(info.volume, "volume")] = _signed(info.objectID)
            except ValueError as exc:
                self._report(VOLUME_TABLE, key.encode(), str(exc))
        out: Dict[Tuple[int, int], Tuple[str, str, str]] = {}
        for key, _, info in self._decoded(BUCKET_TABLE, om_pb2.BucketInfo):
            try:
                volume = _text(info.volumeName, "volumeName")
                bucket = _text(info.bucketName, "bucketName")
            except ValueError as exc:
                self._report(BUCKET_TABLE, key.encode(), str(exc))
                continue
            if volume not in volumes:
                self._report(
                    BUCKET_TABLE, key.encode(), f"volume {volume!r} is not in {VOLUME_TABLE}"
                )
                continue
            layout = BUCKET_LAYOUTS.get(
                info.bucketLayout,
                "LEGACY" if not info.HasField("bucketLayout") else f"UNKNOWN({info.bucketLayout})",
            )
            out[(volumes[volume], _signed(info.objectID))] = (volume, bucket, layout)
        return out

    def keys(self) -> Iterator[OmKey]:
        """Every key of keyTable, then of fileTable (see the module docstring)."""
        yield from self._obs_keys()
        yield from self._fso_keys()

    def _make(
        self,
        table: str,
        db_key: str,
        value: bytes,
        info: Any,
        volume: Optional[str],
        bucket: Optional[str],
        path: Optional[str],
        reason: Optional[str],
    ) -> OmKey:
        version, blocks = _latest(info)
        if reason is None:
            total = sum(b.length for b in blocks)
            if total != info.dataSize:
                reason = (
                    f"dataSize {info.dataSize} is not the {total} bytes of the latest "
                    f"version's blocks"
                )
        return OmKey(
            table,
            db_key,
            volume,
            bucket,
            path,
            info.dataSize,
            _replication(info),
            version,
            len(info.keyLocationList),
            blocks,
            _file_checksum(info),
            _pairs(info.metadata, "metadata"),
            _signed(info.objectID),
            value,
            reason,
            encrypted=info.HasField("fileEncryptionInfo")
            or bool(
                info.keyLocationList and info.keyLocationList[-1].HasField("fileEncryptionInfo")
            ),
            multipart=bool(info.keyLocationList and info.keyLocationList[-1].isMultipartKey),
        )

    def _obs_keys(self) -> Iterator[OmKey]:
        for raw_key, value in self.rows(KEY_TABLE):
            try:
                db_key = _text(raw_key, "the DB key")
                info = _key_info(value)
                volume = _text(info.volumeName, "volumeName")
                bucket = _text(info.bucketName, "bucketName")
                path: Optional[str] = _text(info.keyName, "keyName")
                reason = None
                if not path or db_key != ozone_key(volume, bucket, path):
                    reason = "the DB key is not /volumeName/bucketName/keyName of its record"
                    path = None
                yield self._make(KEY_TABLE, db_key, value, info, volume, bucket, path, reason)
            except (DecodeError, ValueError) as exc:
                self._report(KEY_TABLE, raw_key, _why(exc, "KeyInfo"))

    def _directories(self) -> Dict[int, Tuple[int, int, int, str]]:
        """{objectID: (volumeID, bucketID, parentID, name)} of directoryTable (signed IDs)."""
        out: Dict[int, Tuple[int, int, int, str]] = {}
        clashes = set()
        for db_key, _, info in self._decoded(DIRECTORY_TABLE, om_pb2.DirectoryInfo):
            parsed = _fso_key(db_key)
            if parsed is None:
                self._report(
                    DIRECTORY_TABLE,
                    db_key.encode(),
                    "the DB key is not /volumeID/bucketID/parentID/name",
                )
                continue
            vol_id, bucket_id, parent_id, name = parsed
            oid = _signed(info.objectID)
            # a directory whose key and record disagree, or two with one objectID, would make
            # the paths under it ambiguous: left out, so those files report a missing parent
            if not info.HasField("objectID") or (
                info.HasField("parentID") and _signed(info.parentID) != parent_id
            ):
                self._report(
                    DIRECTORY_TABLE,
                    db_key.encode(),
                    "the record's objectID is missing or its parentID is not the DB key's",
                )
            elif oid in out or oid in clashes:
                clashes.add(oid)
                first = out.pop(oid, None)
                also = (
                    f"that of {ozone_path_key(*first)[:200]!r} (both left out)"
                    if first
                    else "that of an earlier directory"
                )
                self._report(DIRECTORY_TABLE, db_key.encode(), f"objectID {oid} is also {also}")
            else:
                out[oid] = (vol_id, bucket_id, parent_id, name)
        return out

    def _fso_keys(self) -> Iterator[OmKey]:
        buckets = self.buckets()
        dirs = self._directories()
        # dir: (path, reason, depth): a memo, so each directory is walked once; the depth
        # travels with it, so the bound holds across memoised walks too
        resolved: Dict[int, Tuple[Optional[str], Optional[str], int]] = {}

        def dir_path(
            vol_id: int, bucket_id: int, start: int
        ) -> Tuple[Optional[str], Optional[str]]:
            """The path of directory `start` inside its bucket ("" for the bucket itself)."""
            names: List[str] = []  # from `start` upwards
            seen: Set[int] = set()
            node = start
            below = 0  # levels of a memoised ancestor's path

            def joined(prefix: str) -> str:
                return "/".join(([prefix] if prefix else []) + names[::-1])

            result: Tuple[Optional[str], Optional[str]]
            while True:
                if node == bucket_id:
                    result = (joined(""), None)
                    break
                if node in resolved:
                    done, why, depth = resolved[node]
                    if done is None:
                        result = (None, why)
                    elif depth + len(names) > MAX_DEPTH:
                        result = (None, f"more than {MAX_DEPTH} directory levels")
                    else:
                        result = (joined(done), None)
                        below = depth
                    break
                if node in seen:
                    result = (None, f"a cycle in directoryTable at object {node}")
                    break
                if len(seen) >= MAX_DEPTH:
                    result = (None, f"more than {MAX_DEPTH} directory levels")
                    break
                seen.add(node)
                entry = dirs.get(node)
                if entry is None or entry[:2] != (vol_id, bucket_id):
                    result = (None, f"parent directory {node} is not in directoryTable")
                    break
                if not _plain_name(entry[3]):
                    result = (
                        None,
                        f"directory {node} has the name {entry[3][:100]!r}, not a path component",
                    )
                    break
                names.append(entry[3])
                node = entry[2]
            resolved[start] = (result[0], result[1], len(names) + below)
            return result

        for raw_key, value in self.rows(FILE_TABLE):
            try:
                db_key = _text(raw_key, "the DB key")
                parsed = _fso_key(db_key)
                if parsed is None:
                    raise ValueError("the DB key is not /volumeID/bucketID/parentID/name")
                vol_id, bucket_id, parent_id, name = parsed
                info = _key_info(value)
            except (DecodeError, ValueError) as exc:
                self._report(FILE_TABLE, raw_key, _why(exc, "KeyInfo"))
                continue
            owner = buckets.get((vol_id, bucket_id))
            volume, bucket = (owner[0], owner[1]) if owner else (None, None)
            path: Optional[str] = None
            reason: Optional[str] = None
            if owner is None:
                reason = f"bucket {vol_id}/{bucket_id} is not in bucketTable"
            elif not _plain_name(name):
                reason = f"the file name {name[:100]!r} is not a path component"
            elif info.HasField("parentID") and _signed(info.parentID) != parent_id:
                reason = "the record's parentID is not the DB key's"
            else:
                where, reason = dir_path(vol_id, bucket_id, parent_id)
                if reason is None:
                    path = f"{where}/{name}" if where else name
            try:
                yield self._make(FILE_TABLE, db_key, value, info, volume, bucket, path, reason)
            except ValueError as exc:
                self._report(FILE_TABLE, raw_key, _why(exc, "KeyInfo"))


def _fso_key(db_key: str) -> Optional[Tuple[int, int, int, str]]:
    """`/<volumeID>/<bucketID>/<parentObjectID>/<name>` (OmMetadataManagerImpl.getOzonePathKey)
    as signed IDs and the name, or None."""
    parts = db_key.split("/", 4)
    if len(parts) != 5 or parts[0] or not all(_LONG.fullmatch(p) for p in parts[1:4]):
        return None
    ids = [int(p) for p in parts[1:4]]
    if any(not -(1 << 63) <= i < (1 << 63) for i in ids):
        return None
    return ids[0], ids[1], ids[2], parts[4]


def ozone_key(volume: str, bucket: str, key: Optional[str]) -> str:
    """keyTable's DB key (OmMetadataManagerImpl.getOzoneKey): `/vol/bucket`, then `/key` when
    the key is neither None nor empty (`/` alone for the key `/`)."""
    return f"/{volume}/{bucket}" + ("" if not key else "/" if key == "/" else f"/{key}")


def bucket_key(volume: str, bucket: str) -> str:
    """bucketTable's DB key (getBucketKey): `/vol`, then `/bucket` unless it is empty."""
    return f"/{volume}" + (f"/{bucket}" if bucket else "")


def ozone_path_key(volume_id: int, bucket_id: int, parent_id: int, name: str) -> str:
    """fileTable/directoryTable's DB key (getOzonePathKey), IDs as Java longs."""
    return f"/{volume_id}/{bucket_id}/{parent_id}/{name}"


def open_om_db(
    path: "os.PathLike[str] | str", *, snapshot_dir: "Optional[os.PathLike[str] | str]" = None
) -> OmDB:
    """Open the OM DB checkpoint at `path` read-only (through a private snapshot, see OmDB);
    OmDBError (one line) when it is missing, not a RocksDB or not an OM DB."""
    return OmDB(path, snapshot_dir=snapshot_dir)


def write_om_db(db_dir: "os.PathLike[str] | str", tables: Dict[str, Dict[bytes, bytes]]) -> None:
    """Create an OM DB at `db_dir` holding `tables` ({column family: {key: value}}), with every
    column family an OM has (OM_COLUMN_FAMILIES, empty unless `tables` fills them, so that
    Ozone's own tooling opens it), flushed to SST files (tests and generated data)."""
    rd = load_rocksdict()
    names = sorted(set(OM_COLUMN_FAMILIES) | set(tables))
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    db = rd.Rdict(
        os.fspath(db_dir),
        options=opts,
        column_families={n: rd.Options(raw_mode=True) for n in names},
    )
    try:
        for name in names:
            cf = db.get_column_family(name)
            for k in sorted(tables.get(name, {})):
                cf[k] = tables[name][k]
            cf.flush()
        db.flush()
    finally:
        db.close()
    try:  # the binding's own file is no part of an OM DB
        os.unlink(os.path.join(os.fspath(db_dir), "rocksdict-config.json"))
    except FileNotFoundError:
        pass
