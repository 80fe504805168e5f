"""A scan that resumes and a scan that reads only what is due (`crcmerkle scan --state DIR
[--max-age DURATION]`), over any layout, through merkle.replica.scan.scan_paths' `tracker`.

Per volume, before its data is read, the census (the layout's `metadata_only` scan: block
metadata, no data) gives each replica's block metadata, and with it and a stat of its files
its identity (merkle.replica.scanstate.replica_identity). A replica whose state record has
the same identity and was verified in the pass in progress, or within `max_age`, is not read
again: its last result is reported as a CarriedResult, marked not read and carrying the time
it was read. The others are read in the order of risk: changed and never-verified replicas
first, then the oldest verified. Each replica read is recorded as soon as its result is in
(one transaction), unless its result carries an I/O error (read again next time) or its data
was not read.

Within a replica, the tracker is the scan's BlockCheckpoint (merkle.replica.verify): the
blocks read so far are saved at most once per `checkpoint_seconds` (default 1: a transaction
a second costs nothing next to the reading, and a kill re-reads at most a second's worth and
the block in flight), those with an I/O error never, and a rerun takes the saved blocks of a
replica whose identity is unchanged instead of reading them again, under the same freshness
rule as a whole replica. The replica's record, once written, replaces them.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from merkle.replica.errors import ReplicaError
from merkle.replica.layout import Layout, ReplicaRef, Volume
from merkle.replica.levels import counts_as_failure
from merkle.replica.results import (
    METADATA_UNREADABLE,
    TREE_UNREADABLE,
    UNREADABLE_DATA_FILE,
    ScanError,
    VolumeFigures,
    utc,
)
from merkle.replica.scanstate import ReplicaRecord, ScanState, replica_identity
from merkle.replica.verify import (
    BlockObservation,
    block_from_record,
    block_record,
    replayed_result,
    scanned_from_record,
    scanned_record,
)

__all__ = [
    "DEFAULT_CHECKPOINT_SECONDS",
    "CarriedResult",
    "StateTracker",
    "VolumeFigures",
    "not_read",
    "tracked_scan",
    "utc",
]

#: how often, at most, the blocks read of a replica in flight are saved (seconds of reading)
DEFAULT_CHECKPOINT_SECONDS = 1.0

#: findings that are I/O errors, not the replica's state: a result holding one is not
#: recorded, so that the next run reads the replica again
_IO_ERRORS = frozenset({UNREADABLE_DATA_FILE, METADATA_UNREADABLE, TREE_UNREADABLE})


@dataclass
class _Value:
    data_checksum: Optional[int]


def not_read(result: Any) -> bool:
    """Whether a scan's result came from its record, not from a read by this run: a
    CarriedResult, or with `replay` a ScanResult replayed from its record; each carries the
    time its replica was verified (`verified_at`), which a result just read does not."""
    return getattr(result, "verified_at", None) is not None


@dataclass
class CarriedResult:
    """A replica not read by this run: unchanged since it was verified at `verified_at`, its
    findings those of that read. Speaks what the CLI reads of a ScanResult."""

    path: str
    container_id: int
    errors: List[ScanError]
    tree: _Value
    verified_at: float
    stored: Dict[str, Any]
    bytes_read: int = 0
    also: Dict[str, Any] = field(default_factory=dict)
    meta: Any = None
    read: bool = False

    @classmethod
    def from_record(cls, path: str, rec: ReplicaRecord) -> CarriedResult:
        d = rec.record
        errors = [
            ScanError(
                str(e.get("error", "")),
                e.get("block_id"),
                e.get("offset"),
                str(e.get("detail", "")),
                str(e.get("severity", "")),
            )
            for e in d.get("errors", ())
            if isinstance(e, dict)
        ]
        value = d.get("value")
        return cls(
            path=path,
            container_id=int(d.get("container_id", -1)),
            errors=errors,
            tree=_Value(value if isinstance(value, int) else None),
            verified_at=rec.verified_at,
            stored=d,
        )

    @property
    def warnings(self) -> List[ScanError]:
        return [e for e in self.errors if e.is_warning]

    @property
    def verified(self) -> bool:
        return bool(self.stored.get("verified", True))

    @property
    def ok(self) -> bool:
        return self.ok_at(False)

    def ok_at(self, strict: bool = False) -> bool:
        return not any(counts_as_failure(e.severity, strict) for e in self.errors)

    def to_dict(self, strict: bool = False) -> Dict[str, Any]:
        d = {k: v for k, v in self.stored.items() if k != "value"}
        d.update(
            path=self.path,
            ok=self.ok_at(strict),
            errors=[e.to_dict() for e in self.errors],
            warnings=len(self.warnings),
            bytes_read=0,
            seconds=0.0,
            tree_written=False,
            read=False,
            verified_at=utc(self.verified_at),
        )
        return d


def _carried_bytes(c: Any) -> int:
    """The data bytes a replica not read had when it was (a CarriedResult or a replayed
    ScanResult)."""
    if isinstance(c, CarriedResult):
        return int(c.stored.get("bytes_read") or 0)
    return int(c.resumed_bytes)


class StateTracker:
    """What scan_paths asks per volume (`select`) and per replica read (`record`), over one
    ScanState; `max_age` in seconds or None (then only the pass in progress is skipped)."""

    def __init__(
        self,
        state: ScanState,
        max_age: Optional[float] = None,
        checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS,
        replay: bool = False,
    ) -> None:
        self.state = state
        self.max_age = max_age
        #: the results of replicas not read are full ScanResults, trees and all (a Spark
        #: scan's tables, --emit): one whose record cannot give them is read again
        self.replay = replay
        self.checkpoint_seconds = checkpoint_seconds
        #: per replica in flight (its path): the blocks read and not yet saved, when the
        #: last save was (time.monotonic)
        self._pending: Dict[str, List[Tuple[int, float, Dict[str, Any]]]] = {}
        self._saved_at: Dict[str, float] = {}
        #: blocks taken from the state instead of read (this run)
        self.resumed_blocks = 0
        self.now = time.time()
        self.resumed = state.begin_pass(self.now)
        self._identity: Dict[str, Tuple[str, str]] = {}
        self._dirs: Set[Tuple[int, int]] = set()
        #: the replicas read by this run: path -> when
        self.read_at: Dict[str, float] = {}
        self.carried = 0
        self.recorded = 0
        self._lock = threading.Lock()  # the volume threads of `scan --loop`
        #: volume root -> its figures in this run
        self.volumes: Dict[str, VolumeFigures] = {}

    def _fresh(self, rec: ReplicaRecord) -> bool:
        return self._fresh_at(rec.verified_at)

    def _fresh_at(self, verified_at: float) -> bool:
        if verified_at >= self.state.pass_started:
            return True  # verified by the pass in progress (a resumed run)
        return self.max_age is not None and verified_at >= self.now - self.max_age

    # ---- BlockCheckpoint (merkle.replica.verify): progress within a replica ----------------

    def blocks_done(self, location: str) -> Dict[int, BlockObservation]:
        """The blocks of the replica at `location` saved by an interrupted run, identity
        unchanged and fresh; the replica's read starts now (its first save a
        `checkpoint_seconds` from now)."""
        entry = self._identity.get(location)
        with self._lock:
            self._saved_at[location] = time.monotonic()
            self._pending[location] = []
        if entry is None:
            return {}
        key, identity = entry
        out: Dict[int, BlockObservation] = {}
        for bid, at, data in self.state.blocks(key, identity):
            ob = block_from_record(data) if self._fresh_at(at) else None
            if ob is not None and ob.block_id == bid:
                out[bid] = ob
        with self._lock:
            self.resumed_blocks += len(out)
        return out

    def block_read(self, location: str, block: BlockObservation) -> None:
        """A block of the replica at `location` just read: saved with those before it once
        `checkpoint_seconds` have passed since the last save (never with an I/O error)."""
        entry = self._identity.get(location)
        if entry is None or any(e.kind in _IO_ERRORS for e in block.errors):
            return
        now = time.monotonic()
        with self._lock:
            pending = self._pending.setdefault(location, [])
            pending.append((block.block_id, time.time(), block_record(block)))
            if now - self._saved_at.get(location, 0.0) < self.checkpoint_seconds:
                return
            self._pending[location] = []
            self._saved_at[location] = now
        key, identity = entry
        self.state.put_blocks(key, identity, pending)

    def select(
        self, layout: Layout, volume: Volume, refs: List[ReplicaRef]
    ) -> Tuple[List[ReplicaRef], List[CarriedResult]]:
        """(the replicas to read, in the order of risk; the results of those not read)."""
        census: Dict[str, Any] = {}
        for ref, result, _exc in layout.scan(refs, metadata_only=True, seen={}):
            census[ref.path] = None if result is None else result.meta
        ranked: List[Tuple[Tuple[int, float, int], ReplicaRef]] = []
        carried: List[CarriedResult] = []
        for i, ref in enumerate(refs):
            key = ScanState.key(layout.name, ref.path)
            try:
                st = os.lstat(ref.path)
                identity = replica_identity(ref.path, census.get(ref.path))
            except OSError:
                ranked.append(((0, 0.0, i), ref))  # the data scan says what is wrong
                continue
            dup = (st.st_dev, st.st_ino) in self._dirs
            self._dirs.add((st.st_dev, st.st_ino))
            self._identity[ref.path] = (key, identity)
            rec = self.state.get(key)
            if rec is not None and rec.identity == identity and not dup and self._fresh(rec):
                done = CarriedResult.from_record(ref.path, rec)
                if not self.replay:
                    carried.append(done)
                    continue
                replayed = self._replayed(layout, ref, census.get(ref.path), done)
                if replayed is not None:
                    carried.append(replayed)
                    continue
            if rec is not None and rec.identity == identity:  # due: the oldest first
                ranked.append(((1, rec.verified_at, i), ref))
            else:  # changed or never verified: first
                ranked.append(((0, 0.0, i), ref))
        ranked.sort(key=lambda item: item[0])
        with self._lock:
            self.carried += len(carried)
        fig = self.volumes.setdefault(volume.root, VolumeFigures())
        for c in carried:
            fig.carried += 1
            fig.bytes_total += _carried_bytes(c)
            fig.verified(c.verified_at)
        return [ref for _, ref in ranked], carried

    def _replayed(self, layout: Layout, ref: ReplicaRef, meta: Any, done: CarriedResult) -> Any:
        """`done` as a full ScanResult (`replay`: its trees, for tables that compare chunks),
        or None when its record cannot give them (then it is read again)."""
        scanned = None if meta is None else scanned_from_record(done.stored, meta)
        if scanned is None:
            return None
        try:
            files = layout.open_files(ref)
        except (OSError, ReplicaError):
            return None
        try:
            r = replayed_result(
                files, meta, scanned, done.errors, int(done.stored.get("bytes_read") or 0)
            )
        except (OSError, ReplicaError):
            return None
        finally:
            close = getattr(files, "close", None)
            if close is not None:
                close()
        r.path = ref.path
        r.verified_at = done.verified_at
        return r

    def record(self, layout: Layout, volume: Volume, ref: ReplicaRef, result: Any) -> None:
        """Record a replica just read (see the module docstring for what is left out)."""
        now = time.time()
        self.read_at[result.path] = now
        fig = self.volumes.setdefault(volume.root, VolumeFigures())
        with self._lock:
            self._pending.pop(result.path, None)
            self._saved_at.pop(result.path, None)
        size = result.bytes_read + getattr(result, "resumed_bytes", 0)
        fig.read += 1
        fig.bytes_read += result.bytes_read
        fig.bytes_total += size
        fig.seconds += result.seconds
        if result.verified:
            fig.verified(now)
        entry = self._identity.get(ref.path)
        if entry is None or not result.verified:
            return
        if any(e.kind in _IO_ERRORS for e in result.errors):
            return
        record = result.to_dict(False)
        # kept small (a million replicas): what CarriedResult recomputes or the key holds, and
        # a whole disk's --also values, are left out
        for derived in ("also", "path", "ok", "warnings", "resumed_bytes"):
            record.pop(derived, None)
        record["value"] = result.tree.data_checksum
        record["bytes_read"] = size  # the replica's data, however many runs read it
        if result.meta is not None:
            record.update(scanned_record(result))  # its trees, again without a read
        key, identity = entry
        self.state.put(key, volume.root, identity, now, record)
        with self._lock:
            self.recorded += 1


def tracked_scan(
    tracker: Optional[StateTracker],
    layout: Layout,
    volume: Volume,
    refs: List[ReplicaRef],
    **options: Any,
) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
    """layout.scan(refs, **options) of one volume's replicas through `tracker` (None: the
    plain scan): the replicas not read first (their results: CarriedResult, or with
    `tracker.replay` full ScanResults), then those read in the order of risk, each recorded
    as it completes, with the tracker as their blocks' checkpoint."""
    if tracker is None:
        yield from layout.scan(refs, **options)
        return
    by_path = {r.path: r for r in refs}
    to_read, carried = tracker.select(layout, volume, refs)
    for done in carried:
        yield by_path[done.path], done, None
    for ref, result, exc in layout.scan(to_read, checkpoint=tracker, **options):
        if exc is None and result is not None:
            tracker.record(layout, volume, ref, result)
        yield ref, result, exc
