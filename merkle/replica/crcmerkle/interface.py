"""The Layout interface (merkle.replica.layout) for crcmerkle's own layout: <datanode>/<volume>/<containerID>/{chunks,metadata} (merkle.replica.crcmerkle.layout), locally or through pyarrow.fs (HDFS, S3, GCS, file://)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.layout import REPAIR_IN_PLACE, ReplicaRef, Volume, WalkErrorFn

__all__ = ["LAYOUT", "CrcmerkleLayout"]


class CrcmerkleLayout:
    name = "crcmerkle"
    repair = REPAIR_IN_PLACE

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


LAYOUT = CrcmerkleLayout()
