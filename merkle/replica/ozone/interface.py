"""The Layout interface (merkle.replica.layout) for a real Ozone datanode's volumes: hdds/VERSION, <clusterID>/current/containerDir<N>/<containerID>/, block metadata in the volume's RocksDB (merkle.replica.ozone.layout)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.errors import ReplicaError
from merkle.replica.layout import REPAIR_OFFLINE, ReplicaRef, Volume, WalkErrorFn
from merkle.replica.ozone.generate import (OZONE_FAULT_TYPES, check_available, convert_cluster,
                                           mount_paths)
from merkle.replica.ozone.layout import find_volumes, is_ozone_path

__all__ = ["LAYOUT", "OzoneLayout"]


class OzoneLayout:
    name = "ozone"
    repair = REPAIR_OFFLINE

    # ---- reading ---------------------------------------------------------------------------

    def recognises(self, root: str) -> bool:
        # (lwrite: the reading side's own version replaces this at the merge) a local path
        # that holds, or lies inside, an Ozone datanode volume
        return "://" not in root and os.path.exists(root) and is_ozone_path(root)

    def volumes(self, root: str, on_error: Optional[WalkErrorFn] = None) -> List[Volume]:
        raise NotImplementedError

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None
                 ) -> List[ReplicaRef]:
        raise NotImplementedError

    def open_files(self, replica: ReplicaRef) -> Any:
        raise NotImplementedError

    def scan(self, replicas: Iterable[ReplicaRef], *, trees_only: bool = False,
             **options: Any) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
        raise NotImplementedError

    # (reading ends here)






    # ---- writing and repairing -------------------------------------------------------------

    title = "Ozone"
    fault_types: Tuple[str, ...] = OZONE_FAULT_TYPES
    #: generated as crcmerkle-layout replicas first, then moved onto datanode volumes
    generated_in_place = False
    records_mount_paths = True

    def check_can_generate(self) -> None:
        check_available()

    def mount_paths(self, template: Optional[str], datanodes: int, volumes: int
                    ) -> Dict[Tuple[int, int], Optional[str]]:
        return mount_paths(template, datanodes, volumes)

    def finish_generation(self, staging: Path, out: Path, manifest: Dict[str, Any], cfg: Any,
                          faults: Dict[str, int]) -> Dict[str, Any]:
        return convert_cluster(staging, out, manifest, cfg, faults)

    def replicate_refusal(self, path: str, role: str) -> Optional[str]:
        # before any lock: nothing may be written into a datanode's volume (a target that
        # does not exist yet counts when a volume lies above it)
        if not is_ozone_path(path):
            return None
        return (f"the {role} is on an Ozone datanode volume: Ozone makes new replicas itself "
                "(its ReplicationManager, driven by `ozone admin datanode decommission` / "
                "`maintenance`); crcmerkle replicate copies crcmerkle-layout replicas only")

    def repair_refusal(self, path: str) -> str:
        # a datanode owns its files (RocksDB, .container, .tree) and reconciles its replicas
        # itself: touched only by an offline repair (reconcile(..., offline=True))
        name = os.path.basename(os.path.normpath(path))
        cid = name if name.isdigit() else "<containerID>"
        return (f"on an Ozone datanode volume: the datanode reconciles its own replicas; ask "
                f"it to with 'ozone admin container reconcile {cid}' (or stop the datanode "
                f"and use --offline)")

    def open_repair(self, path: str, *, dry_run: bool) -> Any:
        # the stopped datanode's volume DB locked (RocksDB's LOCK) from before the scan
        # until after the tree is written; a dry run checks that it is free
        from merkle.replica.ozone.offline import OfflineReplica
        return OfflineReplica(path, dry_run=dry_run)

    def load_peer(self, path: str, container_id: int) -> Tuple[Any, Any, Dict[int, bytes]]:
        from merkle.replica.ozone.offline import load_peer
        return load_peer(path, container_id)

    def replica_groups(self, path: str, on_error: Optional[WalkErrorFn] = None
                       ) -> Dict[int, List[Path]]:
        groups: Dict[int, List[Path]] = {}
        for volume, _ in find_volumes(path):
            if volume.problem is not None:
                problem = ReplicaError(volume.problem, os.fspath(volume.root))
                if on_error is None:
                    raise problem
                on_error(volume.root, problem)
                continue
            for replica in volume.replicas():
                groups.setdefault(replica.container_id, []).append(replica.root)
        return groups

    def datanode_of(self, path: str) -> str:
        # the volume's datanodeUuid, else the directory above the volume
        p = os.path.abspath(path)
        try:
            (volume, _), = find_volumes(p)
            return volume.datanode_uuid or os.fspath(volume.root.parent)
        except (OSError, ValueError, ReplicaError):
            return os.path.dirname(os.path.dirname(p))

    def cluster_of(self, root: str) -> str:
        # a volume's <volume>/hdds/<clusterID> is its clusterID; any other root (a
        # directory holding volumes) is itself
        parts = [c for c in os.path.abspath(root).split("/") if c]
        if len(parts) >= 2 and parts[-2] == "hdds":
            return "ozone:" + parts[-1]
        return "/" + "/".join(parts)

    def check_container_id(self, dir_fd: int, path: str, container_id: int) -> None:
        # the offline repair checks the replica's .container file itself (OfflineReplica)
        return None

    # (writing ends here)


LAYOUT = OzoneLayout()
