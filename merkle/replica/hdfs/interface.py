"""The Layout interface (merkle.replica.layout) for Apache HDFS datanodes, read-only.

A volume is one datanode storage directory (a `dfs.datanode.data.dir` entry: its
`current/VERSION` names the datanode, `datanodeUuid`, the volume, `storageID`, and the
cluster, `clusterID`); a replica is one block stored there (container = block ID). A replica
is verified against its own meta file, and judged against the other replicas of its block
and the NameNode's view, so the data scan is `crcmerkle scan DATA_DIR... [--fsck FILE]`
(merkle.replica.hdfs.scan); the interface's `scan` says so in one line. A reader only
(REPAIR_NONE): no job writes into a datanode.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.errors import ReplicaError
from merkle.replica.hdfs.storage import find_data_dirs, is_data_dir, read_data_dir
from merkle.replica.layout import REPAIR_NONE, UNKNOWN_DATANODE, ReplicaRef, Volume, WalkErrorFn
from merkle.replica.uri import is_uri

__all__ = ["LAYOUT", "HdfsLayout"]

_SCAN_HINT = (
    "HDFS datanode replicas are verified by their meta files and judged with the other "
    "replicas of their blocks: crcmerkle scan DATA_DIR... [--fsck FILE]"
)


class HdfsLayout:
    """The reading role only (merkle.replica.layout.ReplicaReader)."""

    name = "hdfs"
    title = "HDFS"
    repair = REPAIR_NONE
    not_generated = "HDFS datanodes are read only: crcmerkle writes no replica into them"

    def recognises(self, root: str) -> bool:
        if is_uri(root):
            return False
        return is_data_dir(root)

    def volumes(self, root: str, on_error: Optional[WalkErrorFn] = None) -> List[Volume]:
        found = find_data_dirs(root)
        if not found:
            raise ReplicaError(f"{root}: no HDFS datanode storage directory here")
        out = []
        for path in found:
            d = read_data_dir(path)
            out.append(
                Volume(
                    self.name,
                    path,
                    d.datanode_uuid or UNKNOWN_DATANODE,
                    datanode_uuid=d.datanode_uuid,
                    cluster_id=d.cluster_id,
                    problem=d.problem,
                )
            )
        return out

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None) -> List[ReplicaRef]:
        """One ReplicaRef per block stored on the volume, every block pool's."""
        from merkle.replica.hdfs.blocks import Replica, walk_block_pool

        if volume.problem:
            return []
        ids = set()
        for pool in read_data_dir(volume.root).block_pools:
            for item in walk_block_pool(pool.path, pool.id):
                if isinstance(item, Replica):
                    ids.add(item.block_id)
        return [
            ReplicaRef(self.name, volume.datanode, volume.root, bid, fs_root=volume.root)
            for bid in sorted(ids)
        ]

    def open_files(self, replica: ReplicaRef) -> Any:
        raise ReplicaError(_SCAN_HINT, replica.path)

    def data_bytes(self, replica: ReplicaRef) -> Optional[int]:
        return None

    def scan(
        self,
        replicas: Iterable[ReplicaRef],
        *,
        trees_only: bool = False,
        metadata_only: bool = False,
        **options: Any,
    ) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
        for ref in replicas:
            yield ref, None, ReplicaError(_SCAN_HINT, ref.path)

    def recorded_here(self, path: str) -> bool:
        return False  # no owner command repairs a datanode: a report holds none for it

    def datanode_of(self, path: str) -> str:
        return read_data_dir(path).datanode_uuid or UNKNOWN_DATANODE

    def cluster_of(self, root: str) -> str:
        return read_data_dir(root).cluster_id or os.path.abspath(root)


LAYOUT = HdfsLayout()
