"""Writing Ozone datanode volumes (schema V3), as a datanode leaves them for closed containers.

`VolumeWriter` creates `<R>/hdds/VERSION`, the cluster directory, one container directory per
replica (`current/containerDir<N>/<id>/{metadata,chunks}`), its `.container` file (fields as a
datanode writes them, with the checksum Ozone computes), the `.tree`, the data files
(FILE_PER_BLOCK `<localID>.block` or FILE_PER_CHUNK `<localID>_chunk_<n>`) and, at close, the
volume's `container.db` with Ozone's column families, keys and values: `block_data` (BlockData
per block) and `metadata` (`#BLOCKCOUNT`, `#BYTESUSED`, `#BCSID`, `#PENDINGDELETEBLOCKCOUNT`
with `#PENDINGDELETEBLOCKBYTES` (a current datanode expects both and logs a warning per
container when one is missing), `#delTX`, and `#DATACHECKSUM` when a tree is given). VERSION
holds what StorageVolume writes: storageID, clusterID, datanodeUuid, ctime and
layOutVersion=1 (the only value HDDSVolumeLayoutVersion accepts). The `.container` paths
(`metadataPath`, `chunksPath`) name where the volume will be mounted (`mount_path`, default:
where it is written), as Ozone reads and writes there. Used by the generator and the tests;
it writes new volumes only (a live datanode's volume is never written).
"""

from __future__ import annotations

import os
import shutil
import struct
import time
import uuid
from pathlib import Path
from typing import Dict, Mapping, Optional, Union

from merkle.replica.blocks import ContainerMeta
from merkle.replica.ozone.blockdata import chunk_name, encode_block
from merkle.replica.ozone.containerfile import render_container_file
from merkle.replica.ozone.layout import (
    BLOCK_SUFFIX,
    HDDS,
    VERSION,
    VOLUME_LAYOUT_VERSION,
    OzoneReplica,
    OzoneVolume,
    container_dir_index,
)
from merkle.replica.ozone.rocks import block_key, container_prefix, write_volume_db

__all__ = ["VolumeWriter", "MAX_SIZE"]

PathLike = Union[str, "os.PathLike[str]"]
#: ozone.scm.container.size default, recorded as maxSize
MAX_SIZE = 5 * 1024**3


def _be64(v: int) -> bytes:
    return struct.pack(">q", int(v))


class VolumeWriter:
    """A new datanode volume at `root` (see the module docstring)."""

    def __init__(
        self,
        root: PathLike,
        *,
        cluster_id: str,
        storage_id: str,
        datanode_uuid: str,
        ctime_ms: Optional[int] = None,
        mount_path: Optional[PathLike] = None,
    ) -> None:
        self.root = Path(root)
        #: the absolute path the volume will be mounted at (recorded in `.container` files)
        self.mount_path = Path(
            os.path.abspath(os.fspath(root if mount_path is None else mount_path))
        )
        self.cluster_id = cluster_id
        self.storage_id = storage_id
        self.datanode_uuid = datanode_uuid
        hdds = self.root / HDDS
        (hdds / cluster_id / "current").mkdir(parents=True, exist_ok=True)
        (hdds / cluster_id / "tmp").mkdir(exist_ok=True)
        props = {
            "storageID": storage_id,
            "clusterID": cluster_id,
            "datanodeUuid": datanode_uuid,
            "ctime": str(int(time.time() * 1000) if ctime_ms is None else ctime_ms),
            "layOutVersion": str(VOLUME_LAYOUT_VERSION),
        }
        (hdds / VERSION).write_text(
            "#"
            + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(0))
            + "\n"
            + "".join(f"{k}={v}\n" for k, v in props.items())
        )
        self.volume = OzoneVolume(self.root, props, hdds / cluster_id)
        self.block_rows: Dict[bytes, bytes] = {}
        self.meta_rows: Dict[bytes, bytes] = {}

    def replica(self, container_id: int) -> OzoneReplica:
        assert self.volume.id_dir is not None
        root = (
            self.volume.id_dir
            / "current"
            / f"containerDir{container_dir_index(container_id)}"
            / str(int(container_id))
        )
        return OzoneReplica(self.volume, int(container_id), root)

    def add_container(
        self,
        meta: ContainerMeta,
        *,
        block_files: Mapping[int, PathLike],
        tree: Optional[bytes] = None,
        data_checksum: Optional[int] = None,
        state: str = "CLOSED",
        layout_version: int = 2,
        pipeline_id: str = "",
        move: bool = True,
    ) -> OzoneReplica:
        """Add one closed replica: `block_files` maps block IDs to files holding the block's
        bytes at their offsets (moved, or copied with move=False; FILE_PER_CHUNK splits them)."""
        cid = meta.container_id
        rep = self.replica(cid)
        rep.metadata_dir.mkdir(parents=True, exist_ok=True)
        rep.chunks_dir.mkdir(exist_ok=True)
        for bid, src in block_files.items():
            if layout_version == 2:
                dst = rep.chunks_dir / f"{int(bid)}{BLOCK_SUFFIX}"
                (os.replace if move else shutil.copyfile)(os.fspath(src), os.fspath(dst))
                continue
            block = meta.blocks.get(int(bid))
            with open(src, "rb") as f:
                for i, c in enumerate(block.chunks if block is not None else ()):
                    f.seek(c.offset)
                    data = f.read(c.length)
                    if data:
                        (rep.chunks_dir / chunk_name(bid, i + 1)).write_bytes(data)
            if move:
                os.unlink(src)
        if tree is not None:
            rep.tree.write_bytes(tree)
        mounted = self.mount_path / rep.root.relative_to(self.root)
        fields = {
            "chunksPath": os.fspath(mounted / "chunks"),
            "containerDBType": "RocksDB",
            "containerID": cid,
            "containerType": "KeyValueContainer",
            "layOutVersion": layout_version,
            "maxSize": MAX_SIZE,
            "metadata": {},
            "metadataPath": os.fspath(mounted / "metadata"),
            "originNodeId": self.datanode_uuid,
            "originPipelineId": pipeline_id or str(uuid.UUID(int=cid, version=4)),
            "schemaVersion": "3",
            "state": state,
        }
        rep.container_file.write_bytes(render_container_file(fields))
        self.put_blocks(meta)
        self.put_counters(meta)
        prefix = container_prefix(cid)
        # no deletion pending: the two pending-delete keys are written together, as a
        # datanode past STORAGE_SPACE_DISTRIBUTION finalization keeps them
        self.meta_rows[prefix + b"#PENDINGDELETEBLOCKCOUNT"] = _be64(0)
        self.meta_rows[prefix + b"#PENDINGDELETEBLOCKBYTES"] = _be64(0)
        self.meta_rows[prefix + b"#delTX"] = _be64(0)
        if data_checksum is not None:
            self.meta_rows[prefix + b"#DATACHECKSUM"] = _be64(data_checksum)
        return rep

    def put_counters(self, meta: ContainerMeta) -> None:
        """`#BLOCKCOUNT`, `#BYTESUSED` and `#BCSID` of `meta`'s blocks, as the PutBlocks that
        committed them leave them (the last block's commit sequence ID is their count)."""
        prefix = container_prefix(meta.container_id)
        n = len(meta.blocks)
        self.meta_rows[prefix + b"#BLOCKCOUNT"] = _be64(n)
        self.meta_rows[prefix + b"#BYTESUSED"] = _be64(meta.data_bytes)
        self.meta_rows[prefix + b"#BCSID"] = _be64(n)

    def put_blocks(self, meta: ContainerMeta) -> None:
        """block_data rows of `meta` (the block commit sequence ID is the block's rank:
        ascending, as Ratis log indexes are)."""
        for rank, block in enumerate(meta.sorted_blocks(), 1):
            self.block_rows[block_key(meta.container_id, block.block_id)] = encode_block(
                meta.container_id, block, bcsid=rank
            )

    def close(self) -> Path:
        """Write the volume's container.db; its path."""
        assert self.volume.db_dir is not None
        self.volume.db_dir.parent.mkdir(parents=True, exist_ok=True)
        write_volume_db(self.volume.db_dir, self.block_rows, self.meta_rows)
        return self.volume.db_dir
