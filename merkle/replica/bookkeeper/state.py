"""`--state DIR` on a bookie scan (issue 34): each entry log's verification kept in the scan
state (merkle.replica.scanstate, its `entry_logs` table), so that a rerun after `kill -9`, a
reboot or a lost executor re-reads at most the log in flight, and a periodic run
(`--max-age`) reads only the logs that changed or are due.

The unit is one entry log of one ledger storage: BookKeeper appends to its newest log and
never rewrites a rotated one (compaction writes new logs and moves index entries there). A
log's record holds what its read found: the copies of the entries its index names (the copies
table's rows: they are judged with the other bookies' copies, so a log not read gives them
from the record), the findings of its frames and header, and the records no run of indexed
entries covered (re-checked against the index of the day: an entry compaction moved is no
longer unindexed). A record is used only while `log_identity` is unchanged: the log's file
(device, inode, size, modification and change times), the index entries pointing into it
(positions, ledgers, entries) and the digest type and password of each of their ledgers by
the metadata; and only while fresh: read by the pass in progress, or within `max_age`.
About 25 bytes per stored 1 KiB entry (an Arrow stream, zstd).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from merkle.replica.bookkeeper.copies import COPY_ARROW
from merkle.replica.bookkeeper.findings import Finding
from merkle.replica.bookkeeper.metadata import LedgerMetadata
from merkle.replica.results import VolumeFigures
from merkle.replica.scanstate import ScanState

__all__ = ["LAYOUT", "CarriedLog", "LogStates", "log_identity", "stat_key"]

LAYOUT = "bookkeeper"
_IDENTITY_VERSION = "bookkeeper-log/1"


def stat_key(st: os.stat_result) -> Tuple[int, ...]:
    """What a log's identity takes of its file's stat (device, inode, size, times)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def log_identity(
    st: os.stat_result,
    pos: np.ndarray,
    ledgers: np.ndarray,
    entries: np.ndarray,
    metadata: Dict[int, LedgerMetadata],
) -> str:
    """What a log's record stands for (see the module docstring), as a digest."""
    h = hashlib.sha256(_IDENTITY_VERSION.encode())
    h.update(repr(stat_key(st)).encode())
    for a in (pos, ledgers, entries):
        h.update(np.ascontiguousarray(a, np.int64).tobytes())
        h.update(b"|")
    for lid in np.unique(ledgers).tolist():
        meta = metadata.get(lid)
        digest = (
            ("", b"")
            if meta is None
            else (meta.digest_type or "", hashlib.sha256(meta.password).digest())
        )
        h.update(repr((lid, digest[0])).encode() + digest[1])
    return h.hexdigest()


@dataclass
class CarriedLog:
    """A log not read: its record's findings (each with the time the log was read), copies
    and unindexed records, and when it was read."""

    verified_at: float
    findings: List[Finding]
    copies: List[pa.RecordBatch]
    unindexed: List[Tuple[int, int, int]]  # (ledger, entry, pos)
    bytes_read: int


@dataclass
class LogStates:
    """The bookie scan's side of one ScanState (a pass begun when made): `carried` asks for
    a log's record, `save` writes one. Counts what this run read and carried, in all and per
    ledger directory (`volumes`: the figures of the metrics, merkle.cli.metrics)."""

    state: ScanState
    max_age: Optional[float] = None
    now: float = field(default_factory=time.time)
    read: int = 0
    carried_logs: int = 0
    carried_bytes: int = 0
    volumes: Dict[str, VolumeFigures] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()  # the --loop service's storages record in threads
        self.resumed = self.state.begin_pass(self.now)

    @staticmethod
    def key(bookie: str, shown: str) -> str:
        return ScanState.key(LAYOUT, f"{bookie}\0{shown}")

    def _fresh(self, verified_at: float) -> bool:
        if verified_at >= self.state.pass_started:
            return True
        return self.max_age is not None and verified_at >= self.now - self.max_age

    def risk(self, key: str, identity: str) -> Tuple[int, float]:
        """Where the log `key` (as `identity` says it is now) goes in a pass: (0, 0) changed
        or never verified, first; (1, when) verified and due, the oldest first; (2, 0) fresh
        and unchanged, not read (its record is used)."""
        got = self.state.log_verified(key)
        if got is None or got[0] != identity:
            return 0, 0.0
        return (2, 0.0) if self._fresh(got[1]) else (1, got[1])

    def carried(self, key: str, identity: str, volume: str = "") -> Optional[CarriedLog]:
        """The record of the log `key` when it stands for `identity` and is fresh (then
        counted as carried in `volume`, its ledger directory), else None: read it."""
        got = self.state.get_log(key)
        if got is None:
            return None
        rec, blob = got
        if rec.identity != identity or not self._fresh(rec.verified_at):
            return None
        try:
            copies = _batches(blob)
            findings = [
                Finding(**{k: f[k] for k in _FINDING_FIELDS}, read_at=rec.verified_at)
                for f in rec.record["findings"]
            ]
            unindexed = [tuple(int(v) for v in u) for u in rec.record["unindexed"]]
            bytes_read = int(rec.record["bytes_read"])
        except (KeyError, TypeError, ValueError, pa.ArrowException):
            return None  # never trusted: the log is read again
        with self._lock:
            self.carried_logs += 1
            self.carried_bytes += bytes_read
            fig = self.volumes.setdefault(volume, VolumeFigures())
            fig.carried += 1
            fig.bytes_total += bytes_read
            fig.verified(rec.verified_at)
        return CarriedLog(rec.verified_at, findings, copies, unindexed, bytes_read)  # type: ignore[arg-type]

    def save(
        self,
        key: str,
        identity: str,
        verified_at: float,
        findings: Sequence[Finding],
        copies: Sequence[pa.RecordBatch],
        unindexed: Sequence[Tuple[int, int, int]],
        bytes_read: int,
        volume: str = "",
        seconds: float = 0.0,
    ) -> None:
        """Record a log just read (`seconds` it took) in `volume`, its ledger directory."""
        record: Dict[str, Any] = {
            "findings": [{k: getattr(f, k) for k in _FINDING_FIELDS} for f in findings],
            "unindexed": [list(u) for u in unindexed],
            "bytes_read": bytes_read,
        }
        self.state.put_log(key, identity, verified_at, record, _blob(copies))
        with self._lock:
            self.read += 1
            fig = self.volumes.setdefault(volume, VolumeFigures())
            fig.read += 1
            fig.bytes_read += bytes_read
            fig.bytes_total += bytes_read
            fig.seconds += seconds
            fig.verified(verified_at)

    def complete(self) -> None:
        """Every log of the pass was visited: the next run starts a new pass."""
        self.state.complete_pass()


_FINDING_FIELDS = ("kind", "detail", "bookie", "ledger", "entry", "file", "offset")


def _blob(batches: Sequence[pa.RecordBatch]) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, COPY_ARROW, options=options) as writer:
        for b in batches:
            writer.write_batch(b)
    return sink.getvalue().to_pybytes()


def _batches(blob: bytes) -> List[pa.RecordBatch]:
    reader = pa.ipc.open_stream(pa.py_buffer(blob))
    if not reader.schema.equals(COPY_ARROW):
        raise ValueError("a record of another copies schema")
    return list(reader)
