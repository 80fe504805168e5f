"""`crcmerkle scan VOLUME... --emit URI`: the Spark scan's tables, written by one host without
Spark (pyarrow only: no pyspark is imported here).

For operators who cannot run Spark workers on their datanodes: each host scans its own volumes
(through their layout, as a Spark task would: merkle.replica.layouts.layout_of, one rate limiter
per volume, the page cache dropped) and writes the rows the Spark scan would write for them,
built by the Spark scan's own row builders (spark_udfs.jobs.scan._result_rows, _one_per_datanode),
as Parquet under the same table layout:

    <URI>/<table>/datanode=<id>/emit-<host>_<volume>.parquet

for every table of spark_udfs.jobs.scan.TABLE_SCHEMAS (chunks, blocks, containers, errors,
volumes), with the column types Spark's reader is given (TABLE_SCHEMAS; the partition column
`datanode` is not in the files, its directory value escaped as Spark escapes partition
values), so that `crcmerkle spark diff/report/plan URI` reads many hosts' emitted tables as one
scan. Each scanned volume writes one file per table (an empty one when it has no such row, so
every table exists), named by the host and the volume: hosts never touch each other's files,
and a re-run of one host replaces that host's files (written under a hidden temporary name and
renamed where the filesystem can; on an object store the final name is written in one upload,
which appears only when complete) and then removes that host's older files that the run did
not write again (a volume gone, a datanode identity changed). In a local directory every file
is reached from the directory's descriptor (_LocalOut): no symbolic link inside it is ever
written, renamed or deleted through, and no file of another user is removed.

The readers (`crcmerkle spark diff|report|plan|copycheck`) apply the data-local scan's checks
to these tables (spark_udfs.cluster.vouch): a volume the inventory does not give its host, a
datanode on two hosts, a host naming two datanodes leave the comparison there.

Memory: rows go to one ParquetWriter per (table, datanode) of the volume being scanned, a row
group at a time (ROW_GROUP_BYTES): a volume's chunk rows are never held whole.

An inventory host that emitted nothing is found by spark_udfs.cluster.hosts.unscanned_hosts when the
tables are read (`spark report --datanodes FILE`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import socket
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from merkle.replica.errors import ReplicaError, VolumeError
from merkle.replica.incremental import tracked_scan
from merkle.replica.layout import UNKNOWN_DATANODE, Layout, ReplicaRef, Volume
from merkle.replica.layouts import layout_of
from merkle.replica.results import RateLimiter
from merkle.replica.safeopen import check_component, open_dir, open_regular
from merkle.replica.uri import Location, redact
from spark_udfs.jobs.scan import (
    SCANNED,
    TABLE_SCHEMAS,
    VOLUME_FAILED,
    _one_per_datanode,
    _result_rows,
    volume_figures,
)
from spark_udfs.tables.spool import Spool

__all__ = [
    "EmitResult",
    "FILE_PREFIX",
    "PARTITION",
    "ROW_GROUP_BYTES",
    "TABLE_ARROW",
    "default_host",
    "emit_scan",
    "escape_partition_value",
    "file_name",
    "host_key",
]

#: the partition column (a directory level, never a column of the files)
PARTITION = "datanode"
#: every emitted file's name starts with it (a host's files: FILE_PREFIX + host_key + "_")
FILE_PREFIX = "emit-"
#: rows are buffered up to about this many bytes (Arrow) per table before a row group is
#: written: bounded memory, whatever a volume holds
ROW_GROUP_BYTES = 32 << 20

_ARROW_TYPES = {
    "string": pa.string(),
    "long": pa.int64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "double": pa.float64(),
    "array<bigint>": pa.list_(pa.int64()),
    "array<boolean>": pa.list_(pa.bool_()),
}


def _arrow_schema(spark_schema: str) -> pa.Schema:
    """The Arrow schema of a Spark DDL schema string of TABLE_SCHEMAS ("name type, ...")."""
    fields = []
    for col in spark_schema.split(", "):
        name, _, kind = col.strip().partition(" ")
        fields.append(pa.field(name, _ARROW_TYPES[kind.strip()]))
    return pa.schema(fields)


#: each table's columns as Spark reads them (TABLE_SCHEMAS), partition column included
TABLE_ARROW: Dict[str, pa.Schema] = {n: _arrow_schema(s) for n, s in TABLE_SCHEMAS.items()}
#: what a file holds: the table's columns without the partition column
_FILE_ARROW: Dict[str, pa.Schema] = {
    n: pa.schema([f for f in s if f.name != PARTITION]) for n, s in TABLE_ARROW.items()
}

#: the output rows of spark_udfs.jobs.scan (_OUT_ARROW, by `kind`) as each table's columns
#: (the renames of scan_replicas: a BLOCK row's data_checksum is block_value, length bytes)
_TABLE_OF_KIND = {"CHUNK": "chunks", "BLOCK": "blocks", "REPLICA": "containers", "ERROR": "errors"}
_RENAMES = {"blocks": {"block_value": "data_checksum", "bytes": "length"}}

# Spark's ExternalCatalogUtils.escapePathName: these characters become %XX (upper-case hex)
# in a partition directory's value; every other character is kept as it is
_SPARK_ESCAPED = frozenset([chr(c) for c in range(1, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


#: the partition directory value Spark (and Hive) read back as null (ExternalCatalogUtils.
#: DEFAULT_PARTITION_NAME): a datanode of that name is written escaped
SPARK_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def escape_partition_value(value: str) -> str:
    """`value` as Spark writes it in a partition directory name (`datanode=<this>`), so that
    Spark's partition discovery reads `value` back exactly (the one value Spark reads back as
    null, SPARK_NULL_PARTITION, with its first character escaped). An empty value has no such form
    (Spark writes null there): refused."""
    if not value:
        raise ValueError("an empty datanode identity cannot name a partition")
    if value == SPARK_NULL_PARTITION:  # Spark reads that directory name as null: its first
        return "%5F" + value[1:]  # character escaped, Spark unescapes it back to itself
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPED else c for c in value)


_PLAIN_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,99}")


def host_key(host: str) -> str:
    """The host as it is written in file names: a plain host name as it is; anything else
    (characters a file name or a URI should not carry, or too long) as a digest."""
    if _PLAIN_HOST.fullmatch(host):
        return host
    return "h" + hashlib.sha256(host.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def file_name(host: str, volume: Volume) -> str:
    """The name of one host's file of one volume (in every table): unique per host and volume
    (the volume's root and, when only part of it was asked for, that part)."""
    key = f"{volume.root}\0{volume.inner or ''}".encode("utf-8", "surrogateescape")
    return f"{FILE_PREFIX}{host_key(host)}_{hashlib.sha256(key).hexdigest()[:16]}.parquet"


def default_host() -> str:
    """This machine's fully qualified name (what the host columns say without --host)."""
    return socket.getfqdn() or socket.gethostname()


# ---- writing -----------------------------------------------------------------------------


class _Out:
    """The output location opened once: its filesystem, and how files are committed (an
    object store or HDFS, through pyarrow.fs: no symbolic links there). A file is named by
    (table, partition directory, name)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.loc = Location.parse(uri)
        self.fs = self.loc.filesystem
        self.base = self.loc.path.rstrip("/")
        # a rename is atomic on HDFS; on an object store it is a copy: there the final name
        # is written in one upload (visible only once complete)
        self.renames = self.fs.type_name == "hdfs"
        self.made: Set[str] = set()

    def path(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def show(self, path: str) -> str:
        return self.loc.show(path)

    def create(self, table: str, part: str, name: str) -> Any:
        """A new file's output stream (its directories made as needed)."""
        d = self.path(table, part)
        if d not in self.made:
            self.fs.create_dir(d, recursive=True)  # idempotent: two threads may both make it
            self.made.add(d)
        return self.fs.open_output_stream(f"{d}/{name}")

    def commit(self, table: str, part: str, tmp: str, final: str) -> None:
        if tmp == final:
            return
        src, dst = self.path(table, part, tmp), self.path(table, part, final)
        if self.fs.type_name == "hdfs":  # HDFS refuses to rename onto an existing file
            if self.fs.get_file_info(dst).type != pafs.FileType.NotFound:
                self.fs.delete_file(dst)
        self.fs.move(src, dst)

    def delete(self, table: str, part: str, name: str) -> None:
        self.fs.delete_file(self.path(table, part, name))

    def open_input(self, table: str, part: str, name: str) -> Any:
        """A file written before (a volume's file of the pass before), to read; None when
        there is none. OSError when it cannot be read."""
        path = self.path(table, part, name)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        return self.fs.open_input_file(path)

    def listing(self, table: str) -> Iterable[Tuple[str, str]]:
        """(partition directory, file name) of every file of `table`, one level down."""
        sel = pafs.FileSelector(self.path(table), recursive=True, allow_not_found=True)
        for info in self.fs.get_file_info(sel):
            if info.type != pafs.FileType.File:
                continue
            rel = info.path[len(self.path(table)) + 1 :].split("/")
            if len(rel) == 2:
                yield rel[0], rel[1]

    def close(self) -> None:
        pass


class _LocalOut(_Out):
    """A local output directory, every file reached from the directory's descriptor as a
    replica's files are (merkle.replica.safeopen): each table and partition directory opened
    with O_NOFOLLOW (made where missing), files created O_EXCL|O_NOFOLLOW, renamed and
    removed relative to their directory's descriptor. A symbolic link inside the directory
    is never written, renamed or deleted through (an OSError naming it); the directory
    itself is the operator's to name, link or not. Only regular files owned by this user
    (or by their directory's owner, to whom a created file is given) are ever removed."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.renames = True  # atomic on a local filesystem
        os.makedirs(self.base or "/", exist_ok=True)
        self._root = open_dir(self.base or "/", follow=True)
        self._dirs: Dict[Tuple[str, ...], int] = {}
        self._lock = threading.RLock()  # the volume threads of an emit share the directories

    def _dir(self, *names: str, create: bool = True) -> int:
        """The descriptor of base/names... (opened once, never through a link)."""
        with self._lock:
            fd = self._dirs.get(names)
            if fd is None:
                parent = self._dir(*names[:-1], create=create) if len(names) > 1 else self._root
                check_component(names[-1], self.path(*names))
                fd = open_dir(names[-1], parent, create=create, display=self.path(*names))
                self._dirs[names] = fd
            return fd

    def create(self, table: str, part: str, name: str) -> Any:
        d = self._dir(table, part)
        shown = self.path(table, part, name)
        fd = open_regular(d, name, os.O_WRONLY, create=True, exclusive=True, display=shown)
        return os.fdopen(fd, "wb")

    def commit(self, table: str, part: str, tmp: str, final: str) -> None:
        d = self._dir(table, part)
        os.rename(tmp, final, src_dir_fd=d, dst_dir_fd=d)  # replaces a link, never follows

    def delete(self, table: str, part: str, name: str) -> None:
        os.unlink(name, dir_fd=self._dir(table, part))

    def open_input(self, table: str, part: str, name: str) -> Any:
        """As _Out's, never through a link, and only a regular file this user (or the
        directory's owner) wrote: what another user put under this name is not carried."""
        try:
            d = self._dir(table, part, create=False)
            fd = open_regular(d, name, display=self.path(table, part, name))
        except FileNotFoundError:
            return None
        if os.fstat(fd).st_uid not in {os.geteuid(), os.fstat(d).st_uid}:
            os.close(fd)
            return None
        return os.fdopen(fd, "rb")

    def listing(self, table: str) -> Iterable[Tuple[str, str]]:
        """Only this user's regular files in real directories: a link, or what another user
        put there, is never listed (so never removed)."""
        try:
            tfd = self._dir(table, create=False)
        except FileNotFoundError:
            return
        with os.scandir(tfd) as parts:
            dirs = [e.name for e in parts if e.is_dir(follow_symlinks=False)]
        for part in sorted(dirs):
            try:
                pfd = self._dir(table, part, create=False)
            except OSError:  # replaced by a link since: not ours to walk
                continue
            # a file this run creates belongs to this user or, given away, to the
            # directory's owner (safeopen): anyone else's was not written here
            owners = {os.geteuid(), os.fstat(pfd).st_uid}
            with os.scandir(pfd) as files:
                for e in files:
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and st.st_uid in owners:
                        yield part, e.name

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()
        os.close(self._root)


def _output(uri: str) -> _Out:
    """The output at `uri`: a local directory (descriptor-relative) or a pyarrow filesystem."""
    out = _Out(uri)
    return _LocalOut(uri) if out.fs.type_name == "local" else out


class _TableFile:
    """One table's file of one (volume, datanode): rows buffered, written a row group at a
    time, committed under its final name by `close`."""

    def __init__(
        self,
        out: _Out,
        table: str,
        datanode: str,
        name: str,
        *,
        schema: Optional[pa.Schema] = None,
        partition: str = PARTITION,
    ) -> None:
        self.out = out
        self.table = table
        self.schema = _FILE_ARROW[table] if schema is None else schema
        self.part = f"{partition}={escape_partition_value(datanode)}"
        self.name = name
        self.final = out.path(table, self.part, name)
        # hidden (a leading dot): Spark's and pyarrow's readers skip it while it is written
        self.tmp = f".{name}.{os.getpid()}.tmp" if out.renames else name
        self._stream = out.create(table, self.part, self.tmp)
        self._writer = pq.ParquetWriter(self._stream, self.schema)
        self._pending: List[pa.Table] = []
        self._bytes = 0
        self.rows = 0

    def add(self, t: pa.Table) -> None:
        if t.num_rows == 0:
            return
        self._pending.append(t.select(self.schema.names).cast(self.schema))
        self._bytes += t.nbytes
        self.rows += t.num_rows
        if self._bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(pa.concat_tables(self._pending))
        self._pending, self._bytes = [], 0

    def close(self) -> str:
        self._flush()
        self._writer.close()
        self._stream.close()
        self.out.commit(self.table, self.part, self.tmp, self.name)
        return self.final

    def abandon(self) -> None:
        """Close without committing (the run failed): the temporary file is removed."""
        try:
            self._writer.close()
            self._stream.close()
        finally:
            if self.tmp != self.name:
                try:
                    self.out.delete(self.table, self.part, self.tmp)
                except OSError:
                    pass


def _by_datanode(t: pa.Table) -> Iterator[Tuple[str, pa.Table]]:
    """(datanode, its rows) of rows that carry the partition column: one, unless a layout
    mixes datanodes."""
    if t.num_rows == 0:
        return
    dn = t.column(PARTITION)
    values = dn.unique().to_pylist()
    for datanode in values:
        yield (
            datanode,
            t if len(values) == 1 else t.filter(pc.equal(dn, pa.scalar(datanode, pa.string()))),
        )


class _VolumeFiles:
    """A volume's files: one per table and datanode its rows name (the volume's own datanode
    first, every table, so that each table exists even when it has no row)."""

    def __init__(self, out: _Out, name: str) -> None:
        self.out = out
        self.name = name
        self.files: Dict[Tuple[str, str], _TableFile] = {}

    def open_all(self, datanode: str, tables: Iterable[str]) -> None:
        for t in tables:
            self._file(t, datanode)

    def _file(self, table: str, datanode: str) -> _TableFile:
        f = self.files.get((table, datanode))
        if f is None:
            f = self.files[(table, datanode)] = _TableFile(self.out, table, datanode, self.name)
        return f

    def add(self, table: str, t: pa.Table) -> None:
        """Rows of `table` (its columns, the partition column included)."""
        for datanode, part in _by_datanode(t):
            self._file(table, datanode).add(part)

    def close(self) -> List[str]:
        written = []
        try:
            for f in list(self.files.values()):
                written.append(f.close())
        except BaseException:
            self.abandon()
            raise
        return written

    def abandon(self) -> None:
        for f in self.files.values():
            try:
                f.abandon()
            except Exception:  # noqa: BLE001 - cleaning up after the error being reported
                pass


class _SpooledVolumeFiles(_VolumeFiles):
    """A volume's files in a pass of `scan --loop --emit URI`: its rows spooled on local disk
    (spark_udfs.tables.spool) and its files written whole at each `publish`, so that URI
    holds the volume whole at every moment: mid-pass, each table's file is the rows of the
    replicas this pass has read so far, then the rows of the file written before (the pass
    before's) of every other replica; at the pass's end (`close`), this pass's rows alone."""

    def __init__(self, out: _Out, name: str) -> None:
        super().__init__(out, name)
        self.spool = Spool(ROW_GROUP_BYTES)
        self.opened: Set[Tuple[str, str]] = set()

    def open_all(self, datanode: str, tables: Iterable[str]) -> None:
        for t in tables:
            self.opened.add((t, datanode))

    def add(self, table: str, t: pa.Table) -> None:
        for datanode, part in _by_datanode(t):
            self.opened.add((table, datanode))
            self.spool.add(table, datanode, part)

    def publish(self, volume_row: Optional[pa.Table] = None) -> Optional[List[str]]:
        """Mid-pass (`volume_row`: the volumes table's row as of now): every file written
        again, this pass's rows and the earlier file's rows of the replicas not reached
        yet. None, nothing written, when an earlier file is missing or unreadable (the
        first pass, or a file of another version): a volume is never written in part."""
        keys = sorted(self.opened)
        earlier: Dict[Tuple[str, str], Any] = {}
        try:
            for table, dn in keys:
                part = f"{PARTITION}={escape_partition_value(dn)}"
                f = self.out.open_input(table, part, self.name)
                if f is None:
                    return None
                earlier[(table, dn)] = f
            readers = {k: pq.ParquetFile(f) for k, f in earlier.items()}
            for (table, _), r in readers.items():  # a file of another version: not carried
                if not set(_FILE_ARROW[table].names) <= set(r.schema_arrow.names):
                    return None
        except (OSError, pa.ArrowException):
            return None
        try:
            return self._write(keys, readers, volume_row)
        except pa.ArrowException:  # its rows do not convert: the volume waits for its end
            return None
        finally:
            for f in earlier.values():
                f.close()

    def _write(
        self,
        keys: List[Tuple[str, str]],
        readers: Optional[Dict[Tuple[str, str], Any]],
        volume_row: Optional[pa.Table],
    ) -> List[str]:
        done = pa.array(sorted(self.spool.replicas), pa.string())
        files = [_TableFile(self.out, table, dn, self.name) for table, dn in keys]
        try:
            for (table, dn), f in zip(keys, files):
                if table == "volumes" and volume_row is not None:
                    f.add(volume_row)
                    continue
                for t in self.spool.tables(table, dn):
                    f.add(t)
                if readers is None:
                    continue
                for batch in readers[(table, dn)].iter_batches():
                    t = pa.Table.from_batches([batch])
                    if "replica" in t.column_names:
                        t = t.filter(pc.invert(pc.is_in(t.column("replica"), value_set=done)))
                    f.add(t)
            return [f.close() for f in files]
        except BaseException:
            for f in files:
                try:
                    f.abandon()
                except Exception:  # noqa: BLE001 - cleaning up after the error being raised
                    pass
            raise

    def close(self) -> List[str]:
        try:
            return self._write(sorted(self.opened), None, None)
        finally:
            self.spool.close()

    def abandon(self) -> None:
        self.spool.close()


def _tables_of(results: List[pa.Table]) -> Iterable[Tuple[str, pa.Table]]:
    """(table name, rows in that table's columns) of spark_udfs.jobs.scan output rows (each
    pa.Table of _result_rows holds one kind)."""
    for t in results:
        if t.num_rows == 0:
            continue
        name = _TABLE_OF_KIND[t.column("kind")[0].as_py()]
        rename = _RENAMES.get(name, {})
        cols = TABLE_ARROW[name].names
        yield name, pa.table({c: t.column(rename.get(c, c)) for c in cols})


# ---- the scan ----------------------------------------------------------------------------


@dataclass
class EmitResult:
    """What a host's emit did: its volumes-table rows (VOLUME_SCHEMA order), the files it
    wrote (as they may be shown), the stale files of earlier runs it removed, and what the
    exit status needs."""

    volumes: List[Dict[str, Any]] = field(default_factory=list)
    written: List[str] = field(default_factory=list)
    #: the same, as paths inside the output's filesystem
    _paths: List[str] = field(default_factory=list, repr=False)
    removed: List[str] = field(default_factory=list)
    replicas: int = 0
    with_errors: int = 0
    #: replicas that could not be scanned at all (SCAN_FAILED rows)
    scan_failed: int = 0
    #: one-line problems that stopped part of the work (a PATH, an entry of a walk)
    failures: List[str] = field(default_factory=list)
    duplicates: int = 0
    bytes_read: int = 0


def emit_scan(
    paths: List[str],
    uri: str,
    host: str,
    *,
    trees_only: bool = False,
    metadata_only: bool = False,
    bytes_per_second: Optional[float] = None,
    drop_cache: bool = True,
    strict: bool = False,
    on_volume: Optional[Callable[[Dict[str, Any]], None]] = None,
    tracker: Any = None,
    on_replica: Optional[Callable[[ReplicaRef, Any, Optional[Exception]], None]] = None,
    threads: int = 1,
    publish_every: Optional[float] = None,
    **options: Any,
) -> EmitResult:
    """Scan the volumes under `paths` (this host's) and write their scan tables under `uri`
    (see the module docstring). `options`: the verifier's (workers, buffer_size). A PATH or
    walk entry that cannot be used is one line in `failures` and the rest goes on; an error
    writing the output raises OSError (nothing of the failed volume is left behind).
    `tracker` (merkle.replica.incremental.StateTracker with `replay`, `--state`): a replica
    verified in the pass in progress or within its max age, unchanged, is emitted from its
    record (its findings and trees, no data read); the others are read and recorded.
    `on_replica(replica, result, error)`: called as each replica completes, from its
    volume's thread (`scan --loop --emit` prints and counts it). `threads`: the volumes
    scanned at once, each at its own rate (the loop's one thread per volume); their rows go
    to their own files either way, and the result lists them in the volumes' order. An
    exception in one volume's thread (an output error; the loop's stop) lets the others end
    as they would, then is raised: the volumes that completed are written, the others' files
    left as they were, and no earlier file of this host is removed. `publish_every`
    (seconds, `scan --loop --emit`): each volume's files are also written mid-pass, after a
    replica, once that long has passed since they were last: the rows of the replicas read so
    far and the earlier file's rows of the others (_SpooledVolumeFiles), so that URI holds
    every volume whole at every moment and a finding reaches it within that time."""
    res = EmitResult()
    out = _output(uri)
    try:
        return _emit_to(
            out,
            res,
            paths,
            host,
            trees_only=trees_only,
            metadata_only=metadata_only,
            bytes_per_second=bytes_per_second,
            drop_cache=drop_cache,
            strict=strict,
            on_volume=on_volume,
            options=options,
            tracker=tracker,
            on_replica=on_replica,
            threads=threads,
            publish_every=publish_every,
        )
    finally:
        out.close()


def _emit_to(
    out: _Out,
    res: EmitResult,
    paths: List[str],
    host: str,
    *,
    trees_only: bool,
    metadata_only: bool,
    bytes_per_second: Optional[float],
    drop_cache: bool,
    strict: bool,
    on_volume: Optional[Callable[[Dict[str, Any]], None]],
    options: Dict[str, Any],
    tracker: Any = None,
    on_replica: Optional[Callable[[ReplicaRef, Any, Optional[Exception]], None]] = None,
    threads: int = 1,
    publish_every: Optional[float] = None,
) -> EmitResult:
    volumes: List[Tuple[Layout, Volume]] = []
    seen: Set[Tuple[str, str, Optional[str]]] = set()

    def walk_error(where: Any, exc: Exception) -> None:
        res.failures.append(redact(f"{os.fspath(getattr(where, 'root', where))}: {exc}"))

    for p in paths:
        try:
            layout = layout_of(p)
            found = layout.volumes(p, walk_error)
        except FileNotFoundError as exc:
            res.failures.append(redact(f"{p}: {exc.strerror or exc}"))
            continue
        except (ReplicaError, OSError, ValueError) as exc:
            res.failures.append(redact(f"{p}: {exc}"))
            continue
        for v in found:
            if (layout.name, v.root, v.inner) not in seen:
                seen.add((layout.name, v.root, v.inner))
                volumes.append((layout, v))
    # every volume's replicas first: the duplicate rule looks across the host's volumes
    listed: List[Tuple[Layout, Volume, List[ReplicaRef]]] = []
    for layout, v in volumes:
        refs: List[ReplicaRef] = []
        if v.problem is None:
            try:
                refs = layout.replicas(v, walk_error)
            except (ReplicaError, OSError, ValueError) as exc:
                walk_error(v, exc)
                # its replicas unknown: VOLUME_FAILED, never a volume that holds none
                v = dataclasses.replace(v, problem=f"its replicas could not be listed: {exc}")
        listed.append((layout, v, refs))
    kept, duplicates = _one_per_datanode([r for _, _, refs in listed for r in refs])
    keep = {id(r) for r in kept}
    dup_by_path = {d[1]: d for d in duplicates}
    res.duplicates = len(duplicates)
    tables = list(TABLE_SCHEMAS)
    lock = threading.Lock()

    def one(item: Tuple[Layout, Volume, List[ReplicaRef]]) -> Tuple[Dict[str, Any], EmitResult]:
        layout, v, refs = item
        part = EmitResult()  # this volume's counts, joined with the others' in their order
        name = file_name(host, v)
        vf = _VolumeFiles(out, name) if publish_every is None else _SpooledVolumeFiles(out, name)
        try:
            row = _emit_volume(
                layout,
                v,
                refs,
                keep,
                dup_by_path,
                vf,
                host,
                part,
                tables,
                trees_only=trees_only,
                metadata_only=metadata_only,
                bytes_per_second=bytes_per_second,
                drop_cache=drop_cache,
                strict=strict,
                options=options,
                tracker=tracker,
                on_replica=on_replica,
                publish_every=publish_every,
            )
            part._paths = vf.close()
        except BaseException:
            vf.abandon()
            raise
        if on_volume is not None:
            with lock:
                on_volume(row)
        return row, part

    done: List[Optional[Tuple[Dict[str, Any], EmitResult]]] = []
    first: Optional[BaseException] = None
    if threads <= 1 or len(listed) <= 1:
        for item in listed:
            done.append(one(item))  # an exception ends the emit here, as it always did
    else:
        with ThreadPoolExecutor(max_workers=min(threads, len(listed))) as pool:
            futures = [pool.submit(one, item) for item in listed]
            for f in futures:
                try:
                    done.append(f.result())
                except BaseException as exc:  # noqa: BLE001 - raised once all have ended
                    first = first or exc
                    done.append(None)
    for got in done:
        if got is None:
            continue
        row, part = got
        res._paths.extend(part._paths)
        res.written.extend(out.show(p) for p in part._paths)
        res.volumes.append(row)
        res.replicas += part.replicas
        res.with_errors += part.with_errors
        res.scan_failed += part.scan_failed
        res.bytes_read += part.bytes_read
    if first is not None:
        raise first
    res.removed = [out.show(p) for p in _remove_stale(out, host, res._paths, tables)]
    return res


def _emit_volume(
    layout: Layout,
    v: Volume,
    refs: List[ReplicaRef],
    keep: Set[int],
    dup_by_path: Dict[str, Tuple],
    vf: _VolumeFiles,
    host: str,
    res: EmitResult,
    tables: List[str],
    *,
    trees_only: bool,
    metadata_only: bool,
    bytes_per_second: Optional[float],
    drop_cache: bool,
    strict: bool,
    options: Dict[str, Any],
    tracker: Any = None,
    on_replica: Optional[Callable[[ReplicaRef, Any, Optional[Exception]], None]] = None,
    publish_every: Optional[float] = None,
) -> Dict[str, Any]:
    """Scan one volume into its files; its volumes-table row. `publish_every` (seconds; `vf`
    a _SpooledVolumeFiles): the volume's files written again mid-pass, after a replica,
    once that long has passed since they were last written."""
    datanode = v.datanode or UNKNOWN_DATANODE
    vf.open_all(datanode, tables)
    t0 = time.perf_counter()
    status, detail = SCANNED, None
    if v.problem is not None:
        status, detail = VOLUME_FAILED, redact(v.problem)
    nbytes, scanned, read_seconds, started = 0, 0, 0.0, time.time()
    scan_refs = [r for r in refs if id(r) in keep]
    dups = [
        dup_by_path[redact(r.path)]
        for r in refs
        if id(r) not in keep and redact(r.path) in dup_by_path
    ]
    if dups:  # DUPLICATE_REPLICA rows (listed, never scanned), with this host
        names = TABLE_ARROW["errors"].names
        vf.add(
            "errors",
            pa.Table.from_pylist(
                [dict(zip(names, d[:-1] + (host,))) for d in dups], schema=TABLE_ARROW["errors"]
            ),
        )

    def volume_row() -> Dict[str, Any]:
        return {
            "datanode": datanode,
            "host": host,
            "volume": redact(v.root),
            "cluster_id": v.cluster_id,
            "status": status,
            "detail": detail,
            "replicas": len(refs),
            "bytes_read": nbytes,
            "seconds": round(time.perf_counter() - t0, 6),
            "ran_on": host,
            **volume_figures(tracker, v.root, scanned, nbytes, read_seconds, started),
        }

    spooled = vf if isinstance(vf, _SpooledVolumeFiles) and publish_every is not None else None
    published = time.monotonic()
    if scan_refs:
        limiter = RateLimiter(bytes_per_second) if bytes_per_second else None
        for rep, r, exc in tracked_scan(
            tracker,
            layout,
            v,
            scan_refs,
            trees_only=trees_only,
            metadata_only=metadata_only,
            limiter=limiter,
            drop_cache=drop_cache,
            **options,
        ):
            if exc is not None:
                res.scan_failed += 1
                if isinstance(exc, VolumeError) and status == SCANNED:
                    status, detail = VOLUME_FAILED, redact(str(exc))
            else:
                nbytes += r.bytes_read
                if tracker is None and r.verified:  # read by this run (none is carried)
                    scanned += 1
                    read_seconds += float(r.seconds or 0.0)
                if not r.ok_at(strict):
                    res.with_errors += 1
            res.replicas += 1
            rows = _result_rows(rep, r, exc, trees_only, host, metadata_only=metadata_only)
            for name, t in _tables_of(rows):
                vf.add(name, t)
            if on_replica is not None:
                on_replica(rep, r, exc)
            if spooled is not None and time.monotonic() - published >= (publish_every or 0.0):
                now = pa.Table.from_pylist([volume_row()], schema=TABLE_ARROW["volumes"])
                spooled.publish(now)  # None (not written) in a first pass: no earlier file
                published = time.monotonic()
    res.bytes_read += nbytes
    row = volume_row()
    vf.add("volumes", pa.Table.from_pylist([row], schema=TABLE_ARROW["volumes"]))
    return row


def _remove_stale(out: _Out, host: str, written: List[str], tables: List[str]) -> List[str]:
    """Remove this host's files that this run did not write (an earlier run's: a volume no
    longer given, a datanode identity that changed) and its leftover temporary files; other
    hosts' files are never touched (their names carry their own host), nor, locally, a link
    or another user's file (_LocalOut.listing)."""
    mine = FILE_PREFIX + host_key(host) + "_"
    keep = set(written)
    removed = []
    for t in tables:
        for part, name in list(out.listing(t)):
            path = out.path(t, part, name)
            stale = name.startswith(mine) and name.endswith(".parquet") and path not in keep
            leftover = (
                name.startswith("." + mine)
                and name.endswith(".tmp")
                and name.rsplit(".", 2)[-2] != str(os.getpid())
            )
            if stale or leftover:
                out.delete(t, part, name)
                removed.append(path)
    return removed


# ---- hosts that emitted nothing -------------------------------------------------------------
