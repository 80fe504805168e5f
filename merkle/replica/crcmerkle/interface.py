"""The Layout interface (merkle.replica.layout) for crcmerkle's own layout: <datanode>/<volume>/<containerID>/{chunks,metadata} (merkle.replica.crcmerkle.layout), locally or through pyarrow.fs (HDFS, S3, GCS, file://)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.crcmerkle.blockmeta import ContainerMeta
from merkle.replica.crcmerkle.repair import (CrcmerkleRepair, check_container_id, load_peer,
                                             replica_groups)
from merkle.replica.layout import REPAIR_IN_PLACE, ReplicaRef, Volume, WalkErrorFn

__all__ = ["LAYOUT", "CrcmerkleLayout"]


class CrcmerkleLayout:
    name = "crcmerkle"
    repair = REPAIR_IN_PLACE

    # ---- reading ---------------------------------------------------------------------------

    def recognises(self, root: str) -> bool:
        # (lwrite: the reading side's own version replaces this at the merge) crcmerkle's
        # layout is the registry's default: the layout of a path no other layout recognises
        return False

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

    title = "crcmerkle"
    #: the generator's common faults are this layout's: none of its own
    fault_types: Tuple[str, ...] = ()
    generated_in_place = True
    records_mount_paths = False

    def check_can_generate(self) -> None:
        """Nothing to check: the generator writes this layout with the core package."""

    def mount_paths(self, template: Optional[str], datanodes: int, volumes: int
                    ) -> Dict[Tuple[int, int], Optional[str]]:
        # a replica directory records no mount path: each volume is where it is written
        return {(d, v): None for d in range(datanodes) for v in range(volumes)}

    def finish_generation(self, staging: Path, out: Path, manifest: Dict[str, Any], cfg: Any,
                          faults: Dict[str, int]) -> Dict[str, Any]:
        return manifest  # generated in place: nothing to move

    def replicate_refusal(self, path: str, role: str) -> Optional[str]:
        return None  # replicate copies this layout's replicas

    def repair_refusal(self, path: str) -> str:
        return ""  # repaired in place (REPAIR_IN_PLACE)

    def open_repair(self, path: str, *, dry_run: bool) -> CrcmerkleRepair:
        return CrcmerkleRepair(path, dry_run=dry_run)

    def load_peer(self, path: str, container_id: int
                  ) -> Tuple[Any, ContainerMeta, Dict[int, bytes]]:
        return load_peer(path, container_id)

    def replica_groups(self, path: str, on_error: Optional[WalkErrorFn] = None
                       ) -> Dict[int, List[Path]]:
        return replica_groups(path, on_error)

    def datanode_of(self, path: str) -> str:
        # <datanode>/<volume>/<containerID>, as the Spark scan names it
        return os.path.dirname(os.path.dirname(os.path.abspath(path)))

    def cluster_of(self, root: str) -> str:
        # a crcmerkle-layout root is its cluster directory
        return "/" + "/".join(c for c in os.path.abspath(root).split("/") if c)

    def check_container_id(self, dir_fd: int, path: str, container_id: int) -> None:
        check_container_id(dir_fd, path, container_id)

    # (writing ends here)


LAYOUT = CrcmerkleLayout()
