"""The Layout interface (merkle.replica.layout) for a real Ozone datanode's volumes: hdds/VERSION,
<clusterID>/current/containerDir<N>/<containerID>/, block metadata in the volume's RocksDB
(merkle.replica.ozone.layout).

Reading delegates to the layout's modules: `find_volumes`/`replicas_under` list, the scanner
(merkle.replica.ozone.scan: `scan_volume_items`, one RocksDB open per run of a volume's
replicas) verifies, read-only. The scanner's modules (RocksDB, protobuf) are imported when a
scan starts, so that a machine without the `ozone` extra still finds its volumes and gets one
line saying what is missing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.errors import ReplicaError
from merkle.replica.layout import (
    REPAIR_OFFLINE,
    UNKNOWN_DATANODE,
    ReplicaRef,
    Volume,
    WalkErrorFn,
    datanode_identity,
)
from merkle.replica.ozone.generate import (
    OZONE_FAULT_TYPES,
    check_available,
    convert_cluster,
    mount_paths,
)
from merkle.replica.ozone.layout import (
    OzoneReplica,
    OzoneVolume,
    find_volumes,
    is_ozone_path,
    replicas_under,
)
from merkle.replica.uri import is_uri

__all__ = ["LAYOUT", "OzoneLayout"]


def _scanner() -> Any:
    """merkle.replica.ozone.scan, or one line naming the extra it needs."""
    try:
        from merkle.replica.ozone import scan
    except ImportError as exc:
        raise ReplicaError(
            f"reading Ozone volumes needs {exc.name or 'its extra'}: pip install 'crcmerkle[ozone]'"
        ) from None
    return scan


class OzoneLayout:
    name = "ozone"
    repair = REPAIR_OFFLINE

    # ---- reading ---------------------------------------------------------------------------

    def recognises(self, root: str) -> bool:
        """An existing local path at, inside or above Ozone volumes (is_ozone_path); never a
        URI."""
        return not is_uri(root) and os.path.exists(root) and is_ozone_path(root)

    def volumes(self, root: str, on_error: Optional[WalkErrorFn] = None) -> List[Volume]:
        """find_volumes: each volume with its VERSION's datanodeUuid and clusterID, its
        problem (a volume Ozone would refuse, or one whose VERSION cannot be used: none of its
        replicas listed), and its replicas under the path given (replicas_under)."""
        return [self._volume(v, inner) for v, inner in find_volumes(root)]

    def _volume(self, volume: OzoneVolume, inner: Optional[Path]) -> Volume:
        problem = volume.problem
        if problem is None and volume.db_dir is None:
            problem = "VERSION names no storageID"
        # a datanode is its identity (VERSION's datanodeUuid), never its path: every host
        # mounts its volumes at the same paths (/data/disk1 ... on all of them)
        datanode = datanode_identity(volume.datanode_uuid)
        listed = (
            ()
            if problem is not None
            else tuple(
                ReplicaRef(
                    self.name, datanode, os.fspath(r.root), r.container_id, os.fspath(volume.root)
                )
                for r in replicas_under(volume, inner)
            )
        )
        return Volume(
            self.name,
            os.fspath(volume.root),
            datanode,
            datanode_uuid=volume.datanode_uuid or None,
            cluster_id=volume.properties.get("clusterID") or None,
            inner=None if inner is None else os.fspath(inner),
            problem=problem,
            listed=listed,
        )

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None) -> List[ReplicaRef]:
        if volume.listed is not None:
            return list(volume.listed)
        return [r for v in self.volumes(volume.inner or volume.root) for r in v.listed or ()]

    def open_files(self, replica: ReplicaRef) -> Any:
        """The replica's OzoneReplicaFiles: its `.container` parsed, the volume's DB opened
        for it alone (closed by the files' close())."""
        scanner = _scanner()
        ((volume, _),) = find_volumes(replica.fs_root or replica.path)
        if volume.problem is not None or volume.db_dir is None:
            raise scanner.VolumeScanError(
                volume.problem or "VERSION names no storageID", os.fspath(volume.root)
            )
        return scanner.open_replica_files(
            OzoneReplica(volume, int(replica.container), Path(replica.path))
        )

    def data_bytes(self, replica: ReplicaRef) -> Optional[int]:
        """None: the sizes are in the volume's RocksDB, which only the scan opens."""
        return None

    def scan(
        self,
        replicas: Iterable[ReplicaRef],
        *,
        trees_only: bool = False,
        metadata_only: bool = False,
        **options: Any,
    ) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
        """Read-only whatever `write_tree` says (the datanode owns its files): each run of one
        volume's replicas shares one DB open (scan_volume_items; metadata_only too: the block
        metadata is in the DB). With `seen`, a replica directory already scanned (the same
        device and inode: a bind mount, a volume named by two paths) gives a
        DuplicateReplicaError and is scanned once."""
        if trees_only and metadata_only:
            raise ValueError("trees_only and metadata_only are mutually exclusive")
        scanner = _scanner()
        for key in ("write_tree", "lock", "use_mmap"):
            options.pop(key, None)  # read-only by construction; mmap would SIGBUS on a live file
        seen: Optional[Dict[Tuple[int, int], Path]] = options.pop("seen", None)
        fresh = []
        for ref in replicas:
            duplicate = None if seen is None else scanner.claim_replica(seen, Path(ref.path))
            if duplicate is not None:
                yield ref, None, duplicate
            else:
                fresh.append(ref)
        for ref, result, exc in scanner.scan_volume_items(
            fresh, trees_only=trees_only, metadata_only=metadata_only, **options
        ):
            yield ref, result, scanner.volume_error(exc, ref.fs_root)

    title = "Ozone"

    def recorded_here(self, path: str) -> bool:
        # <volume>/hdds/<clusterID>/current/containerDir<N>/<containerID> (or a volume's
        # path under it), as the scan recorded it
        return "/hdds/" in path and "/current/containerDir" in path

    def datanode_of(self, path: str) -> str:
        # the volume's datanodeUuid; a path whose VERSION cannot be read names no datanode
        p = os.path.abspath(path)
        try:
            ((volume, _),) = find_volumes(p)
            return datanode_identity(volume.datanode_uuid)
        except (OSError, ValueError, ReplicaError):
            return UNKNOWN_DATANODE

    def cluster_of(self, root: str) -> str:
        # a volume's <volume>/hdds/<clusterID> is its clusterID; any other root (a
        # directory holding volumes) is itself
        parts = [c for c in os.path.abspath(root).split("/") if c]
        if len(parts) >= 2 and parts[-2] == "hdds":
            return "ozone:" + parts[-1]
        return "/" + "/".join(parts)

    # ---- generating (GeneratedLayout) ------------------------------------------------------

    fault_types: Tuple[str, ...] = OZONE_FAULT_TYPES
    #: generated as crcmerkle-layout replicas first, then moved onto datanode volumes
    generated_in_place = False
    records_mount_paths = True
    #: `generate --om-db` (GeneratorConfig.om_db): an OM DB of keys made of the generated
    #: blocks (ozone.omkeys), written by finish_generation
    generator_options: Tuple[str, ...] = ("om_db",)

    def check_can_generate(self) -> None:
        check_available()

    def mount_paths(
        self, template: Optional[str], datanodes: int, volumes: int
    ) -> Dict[Tuple[int, int], Optional[str]]:
        return mount_paths(template, datanodes, volumes)

    def finish_generation(
        self, staging: Path, out: Path, manifest: Dict[str, Any], cfg: Any, faults: Dict[str, int]
    ) -> Dict[str, Any]:
        manifest = convert_cluster(staging, out, manifest, cfg, faults)
        if getattr(cfg, "om_db", False):
            # the OM DB's keys are made of the blocks now on the datanode volumes
            from merkle.replica.ozone.omkeys import write_generated_om_db

            manifest = write_generated_om_db(out, manifest, cfg)
        return manifest

    # ---- the owner's commands (OwnerCommands): a datanode repairs and copies its replicas --

    def owner_repair_argv(self, container_id: int) -> List[str]:
        return ["ozone", "admin", "container", "reconcile", str(int(container_id))]

    def owner_leave_argv(self, host: str, maintenance: bool) -> List[str]:
        # DecommissionSubCommand / MaintenanceSubCommand take host names (HostNameParameters)
        return [
            "ozone",
            "admin",
            "datanode",
            "maintenance" if maintenance else "decommission",
            host,
        ]

    owner_copies_note = (
        "crcmerkle replicate handles the crcmerkle layout only: on Ozone the datanodes' "
        "ReplicationManager makes the copies while the nodes are decommissioning or entering "
        "maintenance, choosing source and target itself (the commands' source/target are "
        "information) and counting every replica as healthy: for the containers its count "
        "would let go (OZONE_WOULD_ALLOW) it copies nothing, so reconcile them first while the "
        "leaving nodes still run, then scan and plan again"
    )

    def repair_refusal(self, path: str) -> str:
        # a datanode owns its files (RocksDB, .container, .tree) and reconciles its replicas
        # itself: touched only by an offline repair (reconcile(..., offline=True))
        name = os.path.basename(os.path.normpath(path))
        cid = name if name.isdigit() else "<containerID>"
        return (
            f"on an Ozone datanode volume: the datanode reconciles its own replicas; ask "
            f"it to with 'ozone admin container reconcile {cid}' (or stop the datanode "
            f"and use --offline)"
        )

    # ---- repairing and replicating (RepairableLayout): offline repair; replicate refused ----

    def replicate_refusal(self, path: str, role: str) -> Optional[str]:
        # before any lock: nothing may be written into a datanode's volume (a target that
        # does not exist yet counts when a volume lies above it)
        if not is_ozone_path(path):
            return None
        return (
            f"the {role} is on an Ozone datanode volume: Ozone makes new replicas itself "
            "(its ReplicationManager, driven by `ozone admin datanode decommission` / "
            "`maintenance`); crcmerkle replicate copies crcmerkle-layout replicas only"
        )

    def copy_replica(self, source: Any, target: Any, *, on_step: Any = None) -> Any:
        # replicate_refusal has refused already (an Ozone replica is never a copy's source)
        raise ReplicaError(
            self.replicate_refusal(os.fspath(source), "source")
            or "Ozone makes its replicas itself",
            os.fspath(source),
        )

    def open_repair(self, path: str, *, dry_run: bool) -> Any:
        # the stopped datanode's volume DB locked (RocksDB's LOCK) from before the scan
        # until after the tree is written; a dry run checks that it is free
        from merkle.replica.ozone.offline import OfflineReplica

        return OfflineReplica(path, dry_run=dry_run)

    def load_peer(self, path: str, container_id: int) -> Tuple[Any, Any, Dict[int, bytes]]:
        from merkle.replica.ozone.offline import load_peer

        return load_peer(path, container_id)

    def replica_groups(
        self, path: str, on_error: Optional[WalkErrorFn] = None
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

    def check_container_id(self, dir_fd: int, path: str, container_id: int) -> None:
        # the offline repair checks the replica's .container file itself (OfflineReplica)
        return None


LAYOUT = OzoneLayout()
