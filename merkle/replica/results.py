"""What a scan finds: the finding kinds (ScanError.kind), one finding (ScanError), one
replica's result (ScanResult), and the per-volume read pacing (RateLimiter) that every
layout's scanner shares. The kinds are described in merkle.replica.scan; their levels in
merkle.replica.levels.

Layout-neutral: imported by the verifier (merkle.replica.verify), the layouts' scanners and
the jobs; it imports nothing of a layout.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from merkle.replica.also import AlsoChecksums
from merkle.replica.blocks import ContainerMeta
from merkle.replica.levels import WARNING, counts_as_failure, severity_of
from merkle.replica.recorded import RecordedChecksums
from merkle.replica.safeopen import NOT_A_REGULAR_FILE
from merkle.trees.model import ContainerTree
from merkle.trees.ozone import format_checksum

__all__ = [
    "CORRUPT_CHUNK",
    "INCONSISTENT_CHUNK_LENGTH",
    "METADATA_CORRUPT",
    "METADATA_MISSING",
    "METADATA_UNREADABLE",
    "METADATA_UNSUPPORTED",
    "MISSING_CHUNK",
    "MISSING_DATA_FILE",
    "NOT_A_REGULAR_FILE",
    "PROTECTED_ERRORS",
    "RateLimiter",
    "ReplicateResult",
    "ScanError",
    "ScanResult",
    "TREE_CORRUPT",
    "TREE_FROM_METADATA",
    "TREE_MISSING",
    "TREE_STALE",
    "TREE_UNREADABLE",
    "TREE_UNSUPPORTED",
    "UNREADABLE_DATA_FILE",
    "VolumeFigures",
    "tree_result",
    "volume_pace",
]

CORRUPT_CHUNK = "CORRUPT_CHUNK"
MISSING_CHUNK = "MISSING_CHUNK"
INCONSISTENT_CHUNK_LENGTH = "INCONSISTENT_CHUNK_LENGTH"
MISSING_DATA_FILE = "MISSING_DATA_FILE"
UNREADABLE_DATA_FILE = "UNREADABLE_DATA_FILE"
METADATA_MISSING = "METADATA_MISSING"
METADATA_CORRUPT = "METADATA_CORRUPT"
TREE_MISSING = "TREE_MISSING"
TREE_CORRUPT = "TREE_CORRUPT"
METADATA_UNREADABLE = "METADATA_UNREADABLE"
METADATA_UNSUPPORTED = "METADATA_UNSUPPORTED"
TREE_UNREADABLE = "TREE_UNREADABLE"
TREE_UNSUPPORTED = "TREE_UNSUPPORTED"
#: a census (metadata_only): the stored `.tree` does not describe the block metadata
TREE_STALE = "TREE_STALE"
#: a census (metadata_only): the tree was built from the recorded checksums, no data read
TREE_FROM_METADATA = "TREE_FROM_METADATA"
#: container-level errors after which nothing is written (merkle.replica.scan's docstring)
PROTECTED_ERRORS = frozenset(
    {
        METADATA_UNREADABLE,
        METADATA_UNSUPPORTED,
        TREE_UNREADABLE,
        TREE_UNSUPPORTED,
        NOT_A_REGULAR_FILE,
    }
)


@dataclass(frozen=True)
class ScanError:
    """One problem found by the scanner. `block_id`/`offset` are None for container-level
    (metadata, tree) errors; `offset` is the chunk's offset for chunk errors. `severity` is
    `error` or `warning` (merkle.replica.levels: the kind's level unless given, e.g. for a
    case of the kind the table lists apart); a warning leaves the replica ok."""

    kind: str
    block_id: Optional[int] = None
    offset: Optional[int] = None
    detail: str = ""
    severity: str = ""

    def __post_init__(self) -> None:
        if not self.severity:
            object.__setattr__(self, "severity", severity_of(self.kind))

    @property
    def is_warning(self) -> bool:
        return self.severity == WARNING

    @property
    def key(self) -> Tuple[str, Optional[int], Optional[int]]:
        """What identifies the finding (compared with a generator manifest)."""
        return (self.kind, self.block_id, self.offset)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "error": self.kind,
            "block_id": self.block_id,
            "offset": self.offset,
            "detail": self.detail,
            "severity": self.severity,
        }

    def __str__(self) -> str:
        where = ""
        if self.block_id is not None:
            where = f" block {self.block_id}"
            if self.offset is not None:
                where += f" chunk @{self.offset}"
        return f"{self.kind}{where}{': ' + self.detail if self.detail else ''}"


def utc(t: float) -> str:
    """`t` (Unix time) as ISO 8601 UTC to the second, as outputs show verification times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass
class ScanResult:
    """What one scan of one replica found and produced."""

    path: str
    container_id: int
    errors: List[ScanError]
    #: the tree built from the observed data alone
    scanned: ContainerTree
    #: scanned merged into the stored tree: what is (or, without writing, would be) stored
    tree: ContainerTree
    meta: Optional[ContainerMeta]
    bytes_read: int = 0
    blocks: int = 0
    chunks: int = 0
    seconds: float = 0.0
    tree_written: bool = False
    #: the bytes of the blocks an interrupted run had verified (`--state`), not read again
    #: by this one (bytes_read counts this run's reads only)
    resumed_bytes: int = 0
    #: a replica not read by this run (`--state`: verified then, Unix time, identity
    #: unchanged): its findings and trees are that read's; None: read by this run
    verified_at: Optional[float] = None
    #: `also` (crcmerkle scan --also): each asked algorithm's values of what was read
    also: Dict[str, AlsoChecksums] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No error-level finding (warnings leave a replica ok; see merkle.replica.levels)."""
        return not any(counts_as_failure(e.severity) for e in self.errors)

    @property
    def warnings(self) -> List[ScanError]:
        """The warning-level findings (reported; they do not make the replica bad)."""
        return [e for e in self.errors if e.is_warning]

    @property
    def verified(self) -> bool:
        """Whether the scan read this replica: its block metadata was loaded and, when that
        lists any chunk, some bytes of its block files were read. A replica whose metadata
        could not be used (missing or corrupt; on Ozone volumes a `.container` missing,
        corrupt or of a state Ozone never data-scans) was not, whatever its stored tree says;
        nor was one of a census or a trees-only pass that lists chunks (no data read)."""
        return self.meta is not None and (
            self.bytes_read + self.resumed_bytes > 0 or self.chunks == 0
        )

    def ok_at(self, strict: bool = False) -> bool:
        """`ok`, or with `strict` (--strict) no finding at all, warnings included."""
        return not any(counts_as_failure(e.severity, strict) for e in self.errors)

    @property
    def protected(self) -> bool:
        """A container-level error after which nothing may be written to this replica."""
        return any(e.kind in PROTECTED_ERRORS and e.block_id is None for e in self.errors)

    def error_keys(self) -> List[Tuple[str, Optional[int], Optional[int]]]:
        return sorted((e.key for e in self.errors), key=lambda k: (k[0], k[1] or 0, k[2] or 0))

    def to_dict(self, strict: bool = False) -> Dict[str, Any]:
        """JSON-ready; `errors` lists every finding, each with its `severity`; `ok` follows
        `strict` (ok_at), `warnings` counts the warning-level findings."""
        value = self.tree.data_checksum
        return {
            "path": self.path,
            "container_id": self.container_id,
            "ok": self.ok_at(strict),
            "data_checksum": None if value is None else format_checksum(value),
            "errors": [e.to_dict() for e in self.errors],
            "warnings": len(self.warnings),
            "blocks": self.blocks,
            "chunks": self.chunks,
            "bytes_read": self.bytes_read,
            **({"resumed_bytes": self.resumed_bytes} if self.resumed_bytes else {}),
            **(
                {"read": False, "verified_at": utc(self.verified_at)}
                if self.verified_at is not None
                else {}
            ),
            "seconds": round(self.seconds, 6),
            "tree_written": self.tree_written,
            "verified": self.verified,
            "unhealthy_chunks": int((~self.tree.chunk_matches).sum()),
            **({"also": self._also_dict()} if self.also else {}),
        }

    def _also_dict(self) -> Dict[str, Any]:
        """The --also values, each chunk with the checksums the metadata recorded for it
        (merkle.replica.recorded: the chunks table's recorded columns, checksums in hex)."""
        recorded = RecordedChecksums.from_meta(self.meta)
        return {a: v.to_dict(recorded) for a, v in self.also.items()}


class RateLimiter:
    """Paces reads to `bytes_per_second` (shared by every scan of one volume, thread-safe).

    Each read is granted a start time right after the previous grant's share of the budget,
    so the long-run rate is the limit and no thread busy-waits.
    """

    def __init__(self, bytes_per_second: float) -> None:
        if bytes_per_second <= 0:
            raise ValueError("bytes_per_second must be > 0")
        self.rate = float(bytes_per_second)
        self._lock = threading.Lock()
        self._next = time.monotonic()

    def acquire(self, nbytes: int) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + nbytes / self.rate
        if start > now:
            time.sleep(start - now)


def volume_pace(bytes_per_second: float) -> Callable[[str, int], None]:
    """A pace(volume, nbytes) called after each read: a RateLimiter per volume (each disk
    at the rate, as Ozone's scanner paces each volume), made when the volume is first met;
    thread-safe."""
    limiters: Dict[str, RateLimiter] = {}
    lock = threading.Lock()

    def pace(volume: str, nbytes: int) -> None:
        with lock:
            limiter = limiters.get(volume)
            if limiter is None:
                limiter = limiters[volume] = RateLimiter(bytes_per_second)
        limiter.acquire(nbytes)

    return pace


def tree_result(
    path: str, container_id: int, tree: Optional[ContainerTree], error: Optional[ScanError]
) -> ScanResult:
    """The result of reading a replica's stored `.tree` alone (a scan with trees_only): its
    tree (an empty one when it could not be read) and the error that stopped the read."""
    t = tree if tree is not None else ContainerTree.empty(container_id)
    return ScanResult(
        path=path,
        container_id=container_id,
        errors=[error] if error is not None else [],
        scanned=t,
        tree=t,
        meta=None,
        blocks=int(t.n_blocks),
        chunks=int(t.n_chunks),
    )


@dataclass
class ReplicateResult:
    """What a replica copy did (merkle.replica.replicate)."""

    source: str
    target: str
    container_id: int
    status: str  # "created" | "present"
    blocks: int = 0
    chunks: int = 0
    bytes_copied: int = 0
    data_checksum: Optional[int] = None
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "container_id": self.container_id,
            "status": self.status,
            "blocks": self.blocks,
            "chunks": self.chunks,
            "bytes_copied": self.bytes_copied,
            "data_checksum": None
            if self.data_checksum is None
            else format_checksum(self.data_checksum),
            "notes": self.notes,
        }


@dataclass
class VolumeFigures:
    """One volume's figures in a run (the metrics: merkle.cli.metrics)."""

    read: int = 0
    carried: int = 0
    bytes_read: int = 0
    #: the scan seconds of the replicas read (their rate's denominator)
    seconds: float = 0.0
    #: the data bytes of every replica visited (read now, or as last read): a full pass
    bytes_total: int = 0
    #: the oldest verification among the volume's replicas (Unix time), None: none verified
    oldest: Optional[float] = None

    def verified(self, at: float) -> None:
        self.oldest = at if self.oldest is None else min(self.oldest, at)
