"""Scanning replicas on Ozone datanode volumes, read-only, with Ozone's rules.

Per volume, the RocksDB is opened once (through a private snapshot: merkle.replica.ozone.rocks)
and every container of the volume is read from it. Per replica:

1. `metadata/<id>.container` must exist (CONTAINER_FILE_MISSING), parse, name this container
   and carry a checksum equal to the one Ozone computes (CONTAINER_FILE_CORRUPT): otherwise
   nothing of the replica is verified, as Ozone does not load it. Its `metadataPath` and
   `chunksPath` must be this replica's own directories on this volume's mount
   (CONTAINER_PATH_MISMATCH, merkle.replica.ozone.paths); they are never followed.
2. Only CLOSED, QUASI_CLOSED and UNHEALTHY containers have their data verified (Ozone's data
   scanner); any other state is reported as CONTAINER_NOT_SCANNED with the state (a warning:
   Ozone never data-scans them; schema V1/V2, which Ozone scans, is an error).
3. The blocks are the container's `block_data` rows (`#`-prefixed keys skipped), read one by
   one (merkle.replica.ozone.blockdata.read_blocks): a row that is not a valid BlockData of
   this container is METADATA_CORRUPT for its block alone, with what Ozone's own datanode
   does with that row in the detail (it skips an undecodable row silently and calls the
   replica healthy); the other blocks are still verified, as Ozone does. A row above
   CRCMERKLE_MAX_ROW_BYTES is METADATA_UNREADABLE for its block; rows above
   CRCMERKLE_MAX_METADATA_BYTES together make the replica's metadata METADATA_UNREADABLE
   (nothing verified). A FILE_PER_CHUNK chunk name is opened only when it is the block's own
   `<localID>_chunk_<n>`.
4. The layout-neutral scanner (merkle.replica.scan.scan_files) verifies every chunk against
   the stored window checksums and builds the scanned tree; a missing block file whose first
   chunk has length 0 is no error (Ozone's rule for EC padding blocks).
5. Files in `chunks/` that no `block_data` row names are reported (UNREFERENCED_DATA_FILE,
   a warning: an uncommitted write or a half-finished delete, invisible to Ozone's scanner).
   `chunks/` is listed through a descriptor opened without following a link: a link there
   is reported (NOT_A_REGULAR_FILE), never listed.

The census (`metadata_only`) runs steps 1-3 and 5 as they are, and in step 4 opens no block
file: the tree is the stored `.tree` where it still describes the block_data rows, else the
scanner's tree if every chunk matched (merkle.replica.census).

Nothing is written: not the `.tree` (the datanode owns it and updates it itself), not a lock
file, nothing in the DB directory. A volume whose DB cannot be opened is reported once
(VolumeScanError) and the other volumes are scanned. A replica directory reached twice in one
scan (the same device and inode: a bind mount, a volume named by two paths) is scanned once
and its second sighting reported as a problem (DuplicateReplicaError).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from merkle.replica.blocks import ContainerMeta
from merkle.replica.errors import BlockMetaError, ReplicaError, VolumeError
from merkle.replica.fileio import pread_into
from merkle.replica.files import BlockFile, LocalBlockFile
from merkle.replica.levels import severity_of
from merkle.replica.ozone.blockdata import ChunkName, DecodedBlocks, read_blocks
from merkle.replica.ozone.containerfile import (
    SCANNED_STATES,
    ContainerFile,
    ContainerFileError,
    parse_container_file,
)
from merkle.replica.ozone.layout import BLOCK_SUFFIX, OzoneReplica, OzoneVolume, find_volumes
from merkle.replica.ozone.paths import CONTAINER_PATH_MISMATCH, accepted_mounts, path_mismatch
from merkle.replica.ozone.rocks import VolumeDB, VolumeDBError
from merkle.replica.politeio import drop_cached
from merkle.replica.results import (
    METADATA_UNREADABLE,
    UNREADABLE_DATA_FILE,
    ScanError,
    ScanResult,
    tree_result,
)
from merkle.replica.safeopen import (
    NOT_A_REGULAR_FILE,
    NotRegularFileError,
    check_component,
    max_metadata_bytes,
    max_row_bytes,
    open_dir,
)
from merkle.replica.verify import read_stored_tree, scan_files

__all__ = [
    "CONTAINER_FILE_CORRUPT",
    "CONTAINER_FILE_MISSING",
    "CONTAINER_NOT_SCANNED",
    "CONTAINER_PATH_MISMATCH",
    "DuplicateReplicaError",
    "OzoneReplicaFiles",
    "UNREFERENCED_DATA_FILE",
    "VolumeScanError",
    "claim_replica",
    "open_replica_files",
    "scan_volume_items",
    "volume_error",
]


CONTAINER_FILE_MISSING = "CONTAINER_FILE_MISSING"
CONTAINER_FILE_CORRUPT = "CONTAINER_FILE_CORRUPT"
CONTAINER_NOT_SCANNED = "CONTAINER_NOT_SCANNED"
UNREFERENCED_DATA_FILE = "UNREFERENCED_DATA_FILE"


class VolumeScanError(VolumeError):
    """A whole volume could not be scanned (its DB cannot be opened, no cluster dir)."""


class DuplicateReplicaError(ReplicaError):
    """A replica directory already scanned, reached again by another path."""


class _ChunkFiles:
    """FILE_PER_CHUNK: one block read as its chunk files, each chunk's bytes starting at 0
    of its own file; a read never crosses a chunk (the scanner reads within one chunk)."""

    def __init__(self, replica: OzoneReplica, names: List[ChunkName]) -> None:
        self._replica = replica
        self._dir = replica.chunks_dir
        self._chunks = sorted(names)
        self._fds: Dict[str, Optional[int]] = {}

    def _fd(self, name: str) -> Optional[int]:
        if name not in self._fds:
            # names come from the DB: read_blocks admits only `<localID>_chunk_<n>`; this
            # refuses anything that could leave chunks/ whoever calls it
            check_component(name, os.fspath(self._dir) + "/" + repr(name))
            try:
                self._fds[name] = self._replica.open_file(self._dir / name)
            except FileNotFoundError:
                self._fds[name] = None
        return self._fds[name]

    def pread_into(self, view: memoryview, offset: int) -> int:
        for start, length, name in self._chunks:
            if start <= offset < start + max(length, 1):
                fd = self._fd(name)
                return 0 if fd is None else pread_into(fd, view, offset - start)
        return 0

    def fileno(self) -> Optional[int]:
        return None

    def drop_cached(self, offset: int, length: int) -> None:
        """Drop the block's range [offset, offset + length) from the page cache of each chunk
        file it covers (only files already open: the ones read)."""
        end = offset + length
        for start, clen, name in self._chunks:
            lo, hi = max(offset, start), min(end, start + clen)
            fd = self._fds.get(name)
            if lo < hi and fd is not None:
                drop_cached(fd, lo - start, hi - lo)

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds.clear()


class OzoneReplicaFiles:
    """merkle.replica.files.ReplicaFiles of one Ozone replica: the block metadata comes from
    the volume's DB (`load_meta`), the tree and block files from the container directory."""

    def __init__(
        self, replica: OzoneReplica, db: VolumeDB, cfile: ContainerFile, *, owns_db: bool = False
    ) -> None:
        self.replica = replica
        self.container_id = replica.container_id
        self.location = os.fspath(replica.root)
        self._db = db
        self._owns_db = owns_db
        self._per_block = cfile.file_per_block
        self._decoded: Optional[DecodedBlocks] = None

    def decoded(self) -> DecodedBlocks:
        if self._decoded is None:
            self._decoded = read_blocks(
                self.container_id,
                self._db.block_values(self.container_id),
                file_per_chunk=not self._per_block,
                row_limit=max_row_bytes(),
                total_limit=max_metadata_bytes(),
            )
        return self._decoded

    def load_meta(self) -> ContainerMeta:
        return self.decoded().meta

    def read_blockmeta(self) -> bytes:
        raise BlockMetaError(
            "an Ozone replica's block metadata is in the volume's RocksDB", self.location
        )

    def read_tree(self) -> bytes:
        return self.replica.read_tree()

    def open_block(self, block_id: int) -> BlockFile:
        if self._per_block:
            return LocalBlockFile(self.replica.open_file(self.replica.block_file(block_id)))
        names = self.decoded().names.get(block_id, [])
        files = _ChunkFiles(self.replica, names)
        if not any(files._fd(n) is not None for _, _, n in names):
            files.close()
            raise FileNotFoundError(
                2,
                "No such file or directory",
                os.fspath(self.replica.chunks_dir / f"{block_id}_chunk_*"),
            )
        return files

    def block_name(self, block_id: int) -> str:
        if self._per_block:
            return self.replica.block_file(block_id).name
        return f"{block_id}_chunk_*"

    def close(self) -> None:
        """Close the volume's DB when these files opened it (open_replica_files)."""
        if self._owns_db:
            self._db.close()
            self._owns_db = False

    def data_files(self) -> List[str]:
        """Names of the files the block metadata refers to."""
        d = self.decoded()
        if self._per_block:
            return [f"{b}{BLOCK_SUFFIX}" for b in d.meta.blocks]
        return [n for names in d.names.values() for _, _, n in names]


def _chunks_entries(replica: OzoneReplica) -> List[str]:
    """Names of the regular files in the replica's `chunks/`, listed through descriptors
    opened without following a link (NotRegularFileError when the replica directory or
    `chunks/` is a link or not a directory: a linked directory's names are never listed)."""
    root = open_dir(os.fspath(replica.root))
    try:
        chunks = open_dir("chunks", root, display=os.fspath(replica.chunks_dir))
    finally:
        os.close(root)
    try:
        with os.scandir(chunks) as entries:
            return [e.name for e in entries if e.is_file(follow_symlinks=False)]
    finally:
        os.close(chunks)


def _unreferenced(files: OzoneReplicaFiles, present: List[str]) -> List[str]:
    known = set(files.data_files())
    # a file of a block whose row crcmerkle reported is that finding's, not a leftover
    reported = {b.block_id for b in files.decoded().bad if b.block_id is not None}
    # FILE_PER_CHUNK temp files of a write in progress are not leftovers
    return sorted(
        n
        for n in present
        if n not in known and ".tmp." not in n and _file_block_id(n) not in reported
    )


def _file_block_id(name: str) -> Optional[int]:
    stem = name[: -len(BLOCK_SUFFIX)] if name.endswith(BLOCK_SUFFIX) else name.split("_chunk_")[0]
    try:
        return int(stem)
    except ValueError:
        return None


def scan_replica(
    replica: OzoneReplica, db: VolumeDB, mounts: Optional[Set[str]] = None, **kwargs: Any
) -> Any:
    """Scan one replica read-only (see the module docstring); a ScanResult. `mounts`: the
    mounts its `.container` may record (paths.accepted_mounts; default: those of the
    replica's own volume, computed here)."""

    class _Unusable:
        """A replica whose metadata cannot be used: nothing is verified (empty block list)."""

        def __init__(self) -> None:
            self.container_id = replica.container_id
            self.location = os.fspath(replica.root)

        def load_meta(self) -> ContainerMeta:
            return ContainerMeta(replica.container_id)

        def read_tree(self) -> bytes:
            return replica.read_tree()

        def open_block(self, block_id: int) -> BlockFile:
            raise FileNotFoundError(2, "No such file or directory")

        def block_name(self, block_id: int) -> str:
            return f"{block_id}{BLOCK_SUFFIX}"

    def unusable(kind: str, detail: str, case: str = "") -> Any:
        # nothing verified, as by the data scan (a census too: its tree is not rebuilt from
        # block metadata that was not read)
        plain = {k: v for k, v in kwargs.items() if k != "metadata_only"}
        r = scan_files(_Unusable(), **plain)  # type: ignore[arg-type]
        r.errors.insert(0, ScanError(kind, detail=detail, severity=severity_of(kind, case)))
        # no block metadata was loaded: the empty list above stands for "not read", not for
        # an empty container, so the replica is never `verified` (0 chunks, 0 bytes read);
        # its tree is the stored `.tree`, which no scan checked
        r.meta = None
        return r

    try:
        cfile = parse_container_file(replica.read_file(replica.container_file))
    except FileNotFoundError:
        return unusable(CONTAINER_FILE_MISSING, f"{replica.container_file.name} does not exist")
    except NotRegularFileError as exc:  # a link, FIFO, directory...: never followed or read
        return unusable(NOT_A_REGULAR_FILE, f"{exc.filename}: {exc.strerror}")
    except OSError as exc:
        return unusable(CONTAINER_FILE_CORRUPT, exc.strerror or str(exc))
    except ContainerFileError as exc:
        return unusable(CONTAINER_FILE_CORRUPT, str(exc))
    if not cfile.checksum_ok:
        return unusable(
            CONTAINER_FILE_CORRUPT,
            "checksum mismatch (the file changed after the datanode wrote it)",
        )
    if cfile.container_id != replica.container_id:
        return unusable(CONTAINER_FILE_CORRUPT, f"describes container {cfile.container_id}")
    if mounts is None:
        mounts = accepted_mounts(replica.volume, replica.volume.replicas())
    mismatch = path_mismatch(replica, cfile.fields, mounts)
    result = _scan_loaded(replica, db, cfile, unusable, **kwargs)
    if mismatch is not None:
        result.errors.insert(0, ScanError(CONTAINER_PATH_MISMATCH, detail=mismatch))
    return result


def _scan_loaded(
    replica: OzoneReplica,
    db: VolumeDB,
    cfile: ContainerFile,
    unusable: Callable[..., Any],
    **kwargs: Any,
) -> Any:
    """The rest of scan_replica, once the `.container` is loaded and describes the replica:
    state and schema checks, then the data."""
    if cfile.schema_version != "3":
        # an error, unlike a state Ozone never scans: Ozone verifies these replicas
        return unusable(
            CONTAINER_NOT_SCANNED,
            f"schema version {cfile.schema_version} (only schema V3 is read)",
            case="schema",
        )
    if cfile.state not in SCANNED_STATES:
        return unusable(
            CONTAINER_NOT_SCANNED,
            f"state {cfile.state} (Ozone verifies data of "
            f"CLOSED, QUASI_CLOSED and UNHEALTHY containers)",
        )
    files = OzoneReplicaFiles(replica, db, cfile)
    decoded = files.decoded()
    if decoded.too_large is not None:
        return unusable(METADATA_UNREADABLE, f"{db.path}: {decoded.too_large}")
    result = scan_files(files, **kwargs)
    result.errors[:0] = [ScanError(b.kind, b.block_id, None, b.detail) for b in decoded.bad]
    if result.meta is not None:
        try:
            present = _chunks_entries(replica)
        except FileNotFoundError:
            present = []
        except NotRegularFileError as exc:
            result.errors.append(
                ScanError(
                    NOT_A_REGULAR_FILE,
                    detail=(f"{exc.filename}: {exc.strerror} (never followed or listed)"),
                )
            )
            present = []
        except OSError as exc:  # EACCES, EIO: an I/O error, reported; the walk goes on
            result.errors.append(
                ScanError(
                    UNREADABLE_DATA_FILE,
                    detail=(f"{replica.chunks_dir}: cannot be listed ({exc.strerror or exc})"),
                )
            )
            present = []
        for name in _unreferenced(files, present):
            result.errors.append(
                ScanError(
                    UNREFERENCED_DATA_FILE,
                    _file_block_id(name),
                    None,
                    f"chunks/{name} is named by no block_data entry",
                )
            )
    return result


def claim_replica(
    scanned: Dict[Tuple[int, int], Path], root: Path
) -> Optional[DuplicateReplicaError]:
    """Record the replica directory `root` in `scanned` ((st_dev, st_ino) of the directory
    itself, never through a link -> the path it was scanned at) and return None; or, when
    that directory was already scanned, the DuplicateReplicaError saying so. A directory
    that cannot be stat'ed is not recorded (its scan reports why)."""
    try:
        st = os.lstat(root)
    except OSError:
        return None
    ident = (st.st_dev, st.st_ino)
    if ident in scanned:
        return DuplicateReplicaError(
            f"the same directory as {scanned[ident]} (same device and inode: a bind mount or "
            f"a volume reached by two paths); scanned once",
            os.fspath(root),
        )
    scanned[ident] = root
    return None


def volume_error(exc: Optional[Exception], volume_root: Optional[str]) -> Optional[Exception]:
    """`exc` as the layout interface reports it: a DB that cannot be opened is the volume's
    VolumeScanError (a merkle.replica.errors.VolumeError, reported once per volume), the
    others as they are."""
    if isinstance(exc, VolumeDBError):
        return VolumeScanError(str(exc), volume_root)
    return exc


def open_replica_files(replica: OzoneReplica) -> OzoneReplicaFiles:
    """The files of one replica read on their own (not in a volume's scan): its `.container`
    parsed (ContainerFileError when unusable) and the volume's DB opened for these files
    alone, closed by their close()."""
    cfile = parse_container_file(replica.read_file(replica.container_file))
    if replica.volume.db_dir is None:
        raise VolumeScanError("VERSION names no storageID", os.fspath(replica.volume.root))
    try:
        db = VolumeDB(replica.volume.db_dir)
    except VolumeDBError as exc:
        raise VolumeScanError(str(exc), os.fspath(replica.volume.root)) from None
    return OzoneReplicaFiles(replica, db, cfile, owns_db=True)


def scan_volume_items(
    items: Iterable[Any], *, trees_only: bool = False, metadata_only: bool = False, **kwargs: Any
) -> Iterator[Tuple[Any, Any, Optional[Exception]]]:
    """For work items with `path` (the replica directory), `container` and `fs_root` (its
    volume root), in volume order: (item, ScanResult or None, exception or None). Each run of
    items of one volume shares one open DB; a volume that cannot be read gives its exception
    for each of its items, and the others go on. trees_only reads the stored trees alone (no
    DB); metadata_only is the census (merkle.replica.census): the scan's checks of the
    `.container` and the block_data rows, no block file opened."""
    if trees_only and metadata_only:
        raise ValueError("trees_only and metadata_only are mutually exclusive")
    if metadata_only:
        kwargs["metadata_only"] = True

    current: Optional[str] = None
    db: Optional[VolumeDB] = None
    volume: Optional[OzoneVolume] = None
    mounts: Set[str] = set()
    failure: Optional[Exception] = None
    try:
        for item in items:
            if item.fs_root != current:
                if db is not None:
                    db.close()
                db, failure, current = None, None, item.fs_root
                try:
                    ((volume, _),) = find_volumes(item.fs_root)
                    if not trees_only:
                        if volume.problem is not None or volume.db_dir is None:
                            raise VolumeScanError(
                                volume.problem or "VERSION names no storageID",
                                os.fspath(volume.root),
                            )
                        db = VolumeDB(volume.db_dir)
                        mounts = accepted_mounts(volume, volume.replicas())
                except (OSError, ValueError, ReplicaError, VolumeDBError) as exc:
                    failure = exc
            if failure is not None:
                yield item, None, failure
                continue
            assert volume is not None
            replica = OzoneReplica(volume, int(item.container), Path(item.path))
            try:
                if trees_only:
                    # _TreeOnly has what read_stored_tree reads: container_id, read_tree
                    stored, _raw, err = read_stored_tree(_TreeOnly(replica))  # type: ignore[arg-type]
                    yield item, _tree_result(replica, stored, err), None
                else:
                    assert db is not None
                    yield item, scan_replica(replica, db, mounts, **kwargs), None
            except (OSError, ReplicaError) as exc:
                yield item, None, exc
    finally:
        if db is not None:
            db.close()


class _TreeOnly:
    def __init__(self, replica: OzoneReplica) -> None:
        self.container_id = replica.container_id
        self.location = os.fspath(replica.root)
        self._replica = replica

    def read_tree(self) -> bytes:
        return self._replica.read_tree()


def _tree_result(replica: OzoneReplica, tree: Any, err: Any) -> ScanResult:
    return tree_result(os.fspath(replica.root), replica.container_id, tree, err)
