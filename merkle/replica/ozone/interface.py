"""The Layout interface (merkle.replica.layout) for a real Ozone datanode's volumes: hdds/VERSION, <clusterID>/current/containerDir<N>/<containerID>/, block metadata in the volume's RocksDB (merkle.replica.ozone.layout).

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
from merkle.replica.layout import REPAIR_OFFLINE, ReplicaRef, Volume, WalkErrorFn
from merkle.replica.ozone.layout import (OzoneReplica, OzoneVolume, find_volumes, is_ozone_path,
                                         replicas_under)
from merkle.replica.results import RateLimiter
from merkle.replica.uri import is_uri

__all__ = ["LAYOUT", "OzoneLayout"]


def _scanner() -> Any:
    """merkle.replica.ozone.scan, or one line naming the extra it needs."""
    try:
        from merkle.replica.ozone import scan
    except ImportError as exc:
        raise ReplicaError(f"reading Ozone volumes needs {exc.name or 'its extra'}: "
                           f"pip install 'crcmerkle[ozone]'") from None
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
        datanode = volume.root.parent.name
        listed = () if problem is not None else tuple(
            ReplicaRef(self.name, datanode, os.fspath(r.root), r.container_id,
                       os.fspath(volume.root)) for r in replicas_under(volume, inner))
        return Volume(self.name, os.fspath(volume.root), datanode,
                      datanode_uuid=volume.datanode_uuid or None,
                      cluster_id=volume.properties.get("clusterID") or None,
                      inner=None if inner is None else os.fspath(inner), problem=problem,
                      listed=listed)

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None
                 ) -> List[ReplicaRef]:
        if volume.listed is not None:
            return list(volume.listed)
        return [r for v in self.volumes(volume.inner or volume.root) for r in v.listed or ()]

    def open_files(self, replica: ReplicaRef) -> Any:
        """The replica's OzoneReplicaFiles: its `.container` parsed, the volume's DB opened
        for it alone (closed by the files' close())."""
        scanner = _scanner()
        (volume, _), = find_volumes(replica.fs_root or replica.path)
        if volume.problem is not None or volume.db_dir is None:
            raise scanner.VolumeScanError(volume.problem or "VERSION names no storageID",
                                          os.fspath(volume.root))
        return scanner.open_replica_files(OzoneReplica(volume, int(replica.container),
                                                       Path(replica.path)))

    def data_bytes(self, replica: ReplicaRef) -> Optional[int]:
        """None: the sizes are in the volume's RocksDB, which only the scan opens."""
        return None

    def scan(self, replicas: Iterable[ReplicaRef], *, trees_only: bool = False,
             **options: Any) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
        """Read-only whatever `write_tree` says (the datanode owns its files): each run of one
        volume's replicas shares one DB open (scan_volume_items). With `seen`, a replica
        directory already scanned (the same device and inode: a bind mount, a volume named
        by two paths) gives a DuplicateReplicaError and is scanned once."""
        scanner = _scanner()
        for key in ("write_tree", "lock", "use_mmap"):
            options.pop(key, None)  # read-only by construction; mmap would SIGBUS on a live file
        seen: Optional[Dict[Tuple[int, int], Path]] = options.pop("seen", None)
        rate = options.pop("bytes_per_second", None)
        if rate and options.get("limiter") is None:
            options["limiter"] = RateLimiter(rate)
        fresh = []
        for ref in replicas:
            duplicate = None if seen is None else scanner.claim_replica(seen, Path(ref.path))
            if duplicate is not None:
                yield ref, None, duplicate
            else:
                fresh.append(ref)
        for ref, result, exc in scanner.scan_volume_items(fresh, trees_only=trees_only,
                                                          **options):
            yield ref, result, scanner.volume_error(exc, ref.fs_root)

    # (reading ends here)






    # ---- writing and repairing -------------------------------------------------------------

    # (writing ends here)


LAYOUT = OzoneLayout()
