"""What a reconcile run reports: the chunks it plans and copies, the problems it leaves, per peer
and per replica (the JSON of `crcmerkle reconcile --json`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from merkle.replica.scan import ScanResult
from merkle.trees.ozone import format_checksum

PathLike = Union[str, "os.PathLike[str]"]
#: Called after every write step with (step, detail): "chunk", "block", "metadata", "tree".
#: For instrumentation and crash-injection tests (raise from it to simulate a crash).
StepHook = Callable[[str, Any], None]


@dataclass(frozen=True)
class ChunkCopy:
    """One chunk to pull (or pulled) from a peer."""

    block_id: int
    offset: int
    length: int
    reason: str  # "missing_block" | "missing_chunk" | "corrupt_chunk"
    peer_value: int

    def to_dict(self) -> Dict[str, Any]:
        return {
            "block_id": self.block_id,
            "offset": self.offset,
            "length": self.length,
            "reason": self.reason,
            "data_checksum": format_checksum(self.peer_value),
        }


@dataclass(frozen=True)
class Problem:
    """Something no peer could repair, and why."""

    block_id: Optional[int]
    offset: Optional[int]
    reason: str

    def to_dict(self) -> Dict[str, Any]:
        return {"block_id": self.block_id, "offset": self.offset, "reason": self.reason}

    def __str__(self) -> str:
        where = (
            ""
            if self.block_id is None
            else f"block {self.block_id}"
            + ("" if self.offset is None else f" chunk @{self.offset}")
            + ": "
        )
        return where + self.reason


@dataclass
class PeerOutcome:
    """What happened with one peer."""

    peer: str
    status: str  # "in-sync", "repaired", "nothing-pulled", "skipped", "planned"
    reason: str = ""
    planned: List[ChunkCopy] = field(default_factory=list)
    copied: List[ChunkCopy] = field(default_factory=list)
    tombstones: List[int] = field(default_factory=list)
    failures: List[Problem] = field(default_factory=list)
    unrecoverable: List[Tuple[int, int]] = field(default_factory=list)
    counts: Dict[str, int] = field(default_factory=dict)

    @property
    def bytes_planned(self) -> int:
        return sum(c.length for c in self.planned)

    @property
    def bytes_copied(self) -> int:
        return sum(c.length for c in self.copied)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "peer": self.peer,
            "status": self.status,
            "reason": self.reason,
            "counts": self.counts,
            "planned": [c.to_dict() for c in self.planned],
            "bytes_planned": self.bytes_planned,
            "copied": [c.to_dict() for c in self.copied],
            "bytes_copied": self.bytes_copied,
            "tombstones_adopted": self.tombstones,
            "failures": [f.to_dict() for f in self.failures],
            "unrecoverable": [{"block_id": b, "offset": o} for b, o in self.unrecoverable],
        }


@dataclass
class ReconcileResult:
    """The outcome of reconciling one replica with its peers."""

    path: str
    container_id: int
    dry_run: bool
    before: Optional[int]
    after: Optional[int]
    scan: ScanResult
    peers: List[PeerOutcome]
    remaining: List[Problem]

    @property
    def changed(self) -> bool:
        return any(p.copied or p.tombstones for p in self.peers)

    def to_dict(self) -> Dict[str, Any]:
        def fmt(v: Optional[int]) -> Optional[str]:
            return None if v is None else format_checksum(v)

        return {
            "path": self.path,
            "container_id": self.container_id,
            "dry_run": self.dry_run,
            "before": fmt(self.before),
            "after": fmt(self.after),
            "scan_errors": [e.to_dict() for e in self.scan.errors],
            "peers": [p.to_dict() for p in self.peers],
            "remaining": [r.to_dict() for r in self.remaining],
        }
