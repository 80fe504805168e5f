"""Offline repair of a replica on an Ozone datanode volume (`crcmerkle reconcile --offline`).

A datanode owns its volume: while it runs, only Ozone may change a replica (it reconciles
itself). When the datanode is stopped, the volume's RocksDB LOCK is free; this module then
takes it (merkle.replica.ozone.rocks.LockedVolumeDB: RocksDB holds it until the repair ends,
so a datanode cannot start meanwhile) and gives the reconciler (merkle.replica.reconcile) what
it needs of the replica:

  - the files (`OfflineFiles`): the `.tree` and the FILE_PER_BLOCK `chunks/<localID>.block`
    files through the same directory-descriptor, no-link code as the crcmerkle layout (the
    container directory has the same shape), the block metadata from the locked DB;
  - the store (`OfflineStore`): after the data files of a peer's pulls are durable, one
    RocksDB WriteBatch per container puts the `block_data` values of the blocks that gained
    chunks (ours parsed, the peer's ChunkInfo messages added, re-serialized by the protobuf
    runtime: unknown fields at every level are kept) with the `#BLOCKCOUNT` / `#BYTESUSED`
    counters and `#DATACHECKSUM`; then the `.tree`, atomically, last.

Peers are read like the scanner reads them (`load_peer`): their volume's DB through a private
snapshot, so a peer's datanode may be running.

Refused with one line (ReplicaError, nothing written): a volume whose DB is locked
(VolumeInUseError), a `.container` file that is missing, corrupt or of another container, a
container not CLOSED / QUASI_CLOSED / UNHEALTHY or not schema V3, FILE_PER_CHUNK replicas
(layOutVersion 1), and block metadata that does not decode (rows we cannot parse would be
rewritten blind).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Dict, Iterable, Optional, Tuple, Union

from merkle.replica.blocks import ContainerMeta
from merkle.replica.crcmerkle.layout import ContainerPaths
from merkle.replica.errors import BlockMetaError, ReplicaError
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.ozone import datanode_pb2 as pb
from merkle.replica.ozone.blockdata import chunk_name, encode_block
from merkle.replica.ozone.containerfile import (
    SCANNED_STATES,
    ContainerFile,
    ContainerFileError,
    parse_container_file,
)
from merkle.replica.ozone.layout import OzoneReplica, find_volumes
from merkle.replica.ozone.rocks import (
    LockedVolumeDB,
    VolumeDB,
    VolumeDBError,
    container_prefix,
    lock_is_free,
)
from merkle.replica.ozone.scan import OzoneReplicaFiles
from merkle.replica.replicadir.blockmeta import BlockMeta
from merkle.trees.model import ContainerTree
from merkle.trees.treefile import tree_to_bytes

__all__ = ["OfflineReplica", "load_peer", "replica_at"]

PathLike = Union[str, "os.PathLike[str]"]


def replica_at(path: PathLike) -> OzoneReplica:
    """The replica whose container directory `path` is (ReplicaError otherwise)."""
    where = os.fspath(path)
    if os.path.islink(where.rstrip("/") or where):
        raise ReplicaError("is a symbolic link: a replica directory is never followed", where)
    p = Path(os.path.realpath(where))
    try:
        found = find_volumes(p)
    except (OSError, ValueError) as exc:
        raise ReplicaError(f"not an Ozone volume: {exc}", where) from None
    for volume, _inner in found:
        if volume.problem is not None:
            raise ReplicaError(volume.problem, where)
        for r in volume.replicas():
            if r.root == p:
                return r
    raise ReplicaError(
        "not a container directory of an Ozone volume "
        "(<volume>/hdds/<clusterID>/current/containerDir<N>/<containerID>)",
        where,
    )


def _container_file(replica: OzoneReplica, where: str) -> ContainerFile:
    try:
        cfile = parse_container_file(replica.read_file(replica.container_file))
    except FileNotFoundError:
        raise ReplicaError(f"{replica.container_file.name} does not exist", where) from None
    except OSError as exc:
        raise ReplicaError(f"{replica.container_file.name}: {exc.strerror or exc}", where) from None
    except ContainerFileError as exc:
        raise ReplicaError(f"{replica.container_file.name}: {exc}", where) from None
    if not cfile.checksum_ok:
        raise ReplicaError(f"{replica.container_file.name}: checksum mismatch", where)
    if cfile.container_id != replica.container_id:
        raise ReplicaError(
            f"{replica.container_file.name} describes container {cfile.container_id}", where
        )
    if cfile.schema_version != "3":
        raise ReplicaError(f"schema version {cfile.schema_version} (only schema V3)", where)
    if cfile.state not in SCANNED_STATES:
        raise ReplicaError(
            f"state {cfile.state}: only CLOSED, QUASI_CLOSED and UNHEALTHY "
            f"containers are reconciled",
            where,
        )
    if not cfile.file_per_block:
        raise ReplicaError(
            "FILE_PER_CHUNK (layOutVersion 1) replicas are not repaired offline", where
        )
    return cfile


def _values(db: VolumeDB, cid: int) -> Dict[int, bytes]:
    return {int(k): v for k, v in db.block_values(cid)}


class OfflineFiles(LocalReplicaFiles):
    """The replica's files (crcmerkle's local reader and writer: same directory shape and
    `<localID>.block` names), its block metadata from the locked volume DB."""

    def __init__(self, paths: ContainerPaths, inner: OzoneReplicaFiles) -> None:
        super().__init__(paths)
        self._inner = inner

    def load_meta(self) -> ContainerMeta:
        return self._inner.load_meta()

    def read_blockmeta(self) -> bytes:
        raise BlockMetaError(
            "an Ozone replica's block metadata is in the volume's RocksDB", self.location
        )


class _PeerFiles(OzoneReplicaFiles):
    """A peer replica read through a snapshot of its volume's DB (closed with the peer)."""

    def __init__(self, replica: OzoneReplica, db: VolumeDB, cfile: ContainerFile) -> None:
        super().__init__(replica, db, cfile)
        self.paths = ContainerPaths(replica.root, replica.container_id)

    def close(self) -> None:
        self._db.close()


def load_peer(
    path: PathLike, container_id: int
) -> Tuple[_PeerFiles, ContainerMeta, Dict[int, bytes]]:
    """(files, block metadata, raw block_data values by localID) of an Ozone peer replica;
    ReplicaError/OSError when it cannot serve."""
    where = os.fspath(path)
    replica = replica_at(path)
    if replica.container_id != container_id:
        raise ReplicaError(f"peer is container {replica.container_id}, not {container_id}", where)
    cfile = _container_file(replica, where)
    if replica.volume.db_dir is None:
        raise ReplicaError("its volume's VERSION names no storageID", where)
    try:
        db = VolumeDB(replica.volume.db_dir)
    except VolumeDBError as exc:
        raise ReplicaError(str(exc), where) from None
    files = _PeerFiles(replica, db, cfile)
    try:
        meta = files.load_meta()
        values = _values(db, container_id)
    except BaseException:
        files.close()
        raise
    return files, meta, values


def _be64(v: int) -> bytes:
    return struct.pack(">q", int(v))


#: a counter is a Java long
_LONG_MAX = (1 << 63) - 1


def _counter(value: int, delta: int) -> int:
    """A usage counter after adding `delta`, kept within 0..2**63-1: a saturated (or
    negative) counter read from the DB must not make the repair fail after its data was
    written, on every run. It is a usage figure, not data: the datanode recomputes it
    (KeyValueContainerMetadataInspector repairs #BYTESUSED from the block rows)."""
    return max(0, min(_LONG_MAX, int(value) + int(delta)))


class OfflineReplica:
    """The target of an offline repair: its volume's DB locked for as long as this is open
    (see the module docstring). close() releases the lock."""

    def __init__(self, path: PathLike, *, dry_run: bool = False) -> None:
        where = os.fspath(path)
        self.replica = replica_at(path)
        self.container_id = self.replica.container_id
        cfile = _container_file(self.replica, where)
        if self.replica.volume.db_dir is None:
            raise ReplicaError("its volume's VERSION names no storageID", where)
        try:
            if dry_run:  # the plan only: the volume must be offline, nothing is written
                lock_is_free(os.fspath(self.replica.volume.db_dir))
                self.db: VolumeDB = VolumeDB(self.replica.volume.db_dir)
            else:
                self.db = LockedVolumeDB(self.replica.volume.db_dir)
        except VolumeDBError as exc:
            raise ReplicaError(
                f"{exc}; stop the datanode first, or let it reconcile "
                f"('ozone admin container reconcile {self.container_id}')",
                where,
            ) from None
        try:
            inner = OzoneReplicaFiles(self.replica, self.db, cfile)
            bad = inner.decoded().bad
            if bad:  # a repair must not rewrite rows it cannot read
                raise ReplicaError(
                    f"not repaired: its block_data rows do not decode "
                    f"({bad[0].kind}: {bad[0].summary})",
                    where,
                )
            if inner.decoded().too_large is not None:
                raise ReplicaError(f"not repaired: {inner.decoded().too_large}", where)
            self.paths = ContainerPaths(self.replica.root, self.container_id)
            self.files = OfflineFiles(self.paths, inner)
            self.values = _values(self.db, self.container_id)
        except BaseException:
            self.db.close()
            raise

    # ---- the reconciler's store ---------------------------------------------------------

    @property
    def _locked(self) -> LockedVolumeDB:
        if not isinstance(self.db, LockedVolumeDB):
            raise RuntimeError("a dry run writes nothing")
        return self.db

    def save_blocks(
        self,
        meta: ContainerMeta,
        peer_values: Dict[int, bytes],
        block_ids: Iterable[int],
        tree: ContainerTree,
    ) -> None:
        """One WriteBatch: the block_data values of `block_ids` as `meta` now records them,
        the counters, `#DATACHECKSUM` (the tree about to be written). Data files first."""
        self._own_new_files(block_ids)
        self.files.fsync_chunks()
        cid = self.container_id
        prefix = container_prefix(cid)
        rows: Dict[bytes, bytes] = {}
        new_blocks = 0
        delta = 0
        for b in sorted(set(block_ids)):
            block = meta.blocks.get(b, BlockMeta(b))
            value, old_size, is_new = self._value(block, peer_values.get(b))
            if value == self.values.get(b):
                continue
            rows[prefix + str(b).encode("ascii")] = value
            new_blocks += is_new
            delta += sum(c.length for c in block.chunks) - old_size
        if not rows:
            return
        counters = self.db.metadata(cid)
        meta_rows: Dict[bytes, bytes] = {}
        if "#BLOCKCOUNT" in counters and new_blocks:
            meta_rows[prefix + b"#BLOCKCOUNT"] = _be64(
                _counter(counters["#BLOCKCOUNT"], new_blocks)
            )
        if "#BYTESUSED" in counters and delta:
            meta_rows[prefix + b"#BYTESUSED"] = _be64(_counter(counters["#BYTESUSED"], delta))
        if "#DATACHECKSUM" in counters and tree.data_checksum is not None:
            meta_rows[prefix + b"#DATACHECKSUM"] = _be64(tree.data_checksum)
        self._locked.write_batch(rows, meta_rows)
        for k, v in rows.items():
            self.values[int(k[len(prefix) :])] = v

    def _value(self, block: BlockMeta, peer_raw: Optional[bytes]) -> Tuple[bytes, int, bool]:
        """(the new BlockData bytes, the block's size before, whether the row is new).
        Our row is the base (its fields, unknown ones included, are kept); a new row starts
        from the peer's (its block commit sequence ID, metadata); chunks are ours, then the
        peer's ChunkInfo at that offset, as stored."""
        cid = self.container_id
        ours_raw = self.values.get(block.block_id)
        msg = pb.BlockData()
        peer = pb.BlockData()
        if peer_raw is not None:
            peer.ParseFromString(peer_raw)
        if ours_raw is not None:
            msg.ParseFromString(ours_raw)
            old_size = sum(c.len for c in msg.chunks)
        elif peer_raw is not None:
            msg.CopyFrom(peer)
            old_size = 0
        else:
            msg.ParseFromString(encode_block(cid, BlockMeta(block.block_id)))
            old_size = 0
        have: Dict[int, pb.ChunkInfo] = {}
        for c in peer.chunks:
            have[int(c.offset)] = c
        for c in msg.chunks:
            have[int(c.offset)] = c  # ours win: our record is never replaced
        chunks = []
        for i, c in enumerate(block.chunks):
            ci = pb.ChunkInfo()
            found = have.get(c.offset)
            if found is not None and int(found.len) == c.length:
                ci.CopyFrom(found)
            else:  # a peer of the crcmerkle layout: the chunk as a client names it
                one = pb.BlockData()
                one.ParseFromString(
                    encode_block(
                        cid,
                        BlockMeta(block.block_id, (c,)),
                        names=[chunk_name(block.block_id, i + 1)],
                    )
                )
                ci.CopyFrom(one.chunks[0])
            chunks.append(ci)
        del msg.chunks[:]
        msg.chunks.extend(chunks)
        msg.size = sum(c.length for c in block.chunks)
        return msg.SerializeToString(), old_size, ours_raw is None

    def _own_new_files(self, block_ids: Iterable[int]) -> None:
        """Files this process created belong to the volume's owner, as the datanode's own do
        (best effort: only root may give a file away)."""
        try:
            dst = os.stat(self.paths.chunks_dir, follow_symlinks=False)
        except OSError:
            return
        me = os.geteuid()
        if dst.st_uid == me:
            return
        for b in block_ids:
            try:
                fd = self.files.open_block_rw(b)
            except OSError:
                continue
            try:
                if os.fstat(fd).st_uid == me:
                    os.fchown(fd, dst.st_uid, dst.st_gid)
            except OSError:
                pass
            finally:
                os.close(fd)

    def save_tree(self, tree: ContainerTree) -> None:
        self.files.write_metadata(".tree", tree_to_bytes(tree))

    def close(self) -> None:
        try:
            self.files.close()
        finally:
            self.db.close()
