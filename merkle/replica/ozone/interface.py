"""The Layout interface (merkle.replica.layout) for a real Ozone datanode's volumes: hdds/VERSION, <clusterID>/current/containerDir<N>/<containerID>/, block metadata in the volume's RocksDB (merkle.replica.ozone.layout)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.layout import REPAIR_OFFLINE, ReplicaRef, Volume, WalkErrorFn

__all__ = ["LAYOUT", "OzoneLayout"]


class OzoneLayout:
    name = "ozone"
    repair = REPAIR_OFFLINE

    # ---- reading ---------------------------------------------------------------------------

    def recognises(self, root: str) -> bool:
        raise NotImplementedError

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

    # (writing ends here)


LAYOUT = OzoneLayout()
