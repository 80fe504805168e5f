"""The stored entry copies a bookie scan found, as columns.

A log of 1 KiB entries holds a million per GiB: the scan, the judge of each ledger and the
Spark job's rows all take the copies as Arrow record batches of COPY_ARROW's columns, built
from the native verifier's arrays in one step per batch (framed_batch), never an object per
entry. `Copy` is one row of them, for the few places that look at copies one by one (a
finding's copies, tests); `Copies` holds a scan's batches and gives both views.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from merkle.replica.also import ALSO_ALGORITHMS, WIDTHS

__all__ = [
    "ALSO_COLUMNS",
    "COPY_ARROW",
    "Copies",
    "Copy",
    "as_table",
    "bare_batch",
    "framed_batch",
]

#: one row per stored entry copy, as its index names it, and what verifying it found; the
#: `also_*` columns: the payload's --also CRCs (big-endian bytes, as the replicas' chunk
#: tables keep theirs), null when not asked for or the copy is not framed; `problem`: what
#: the digest check found when it failed, else null
COPY_ARROW = pa.schema(
    [
        ("bookie", pa.string()),
        ("ledger", pa.int64()),
        ("entry", pa.int64()),
        ("file", pa.string()),
        ("offset", pa.int64()),
        ("size", pa.int64()),
        ("frame_ok", pa.bool_()),
        ("digest_ok", pa.bool_()),
        ("verified", pa.bool_()),
        ("stored_digest", pa.string()),
        ("payload_crc32c", pa.int64()),
        ("last_add_confirmed", pa.int64()),
        ("problem", pa.string()),
        *((f"also_{a}", pa.binary()) for a in ALSO_ALGORITHMS),
        ("indexed", pa.bool_()),
    ]
)
#: column -> its --also algorithm
ALSO_COLUMNS = {f"also_{a}": a for a in ALSO_ALGORITHMS}
_SCALARS = [f.name for f in COPY_ARROW if f.name not in ALSO_COLUMNS]


@dataclass
class Copy:
    """One stored copy of an entry, as its index names it, and what verifying it found."""

    bookie: str
    ledger: int
    entry: int
    file: str
    offset: int
    size: int = 0
    frame_ok: bool = False
    digest_ok: bool = False
    verified: bool = False  # its digest was checked (the ledger's digest type known)
    stored_digest: str = ""
    payload_crc32c: int = 0
    last_add_confirmed: int = -1
    #: what the digest check found when it failed (stored and computed digests)
    problem: Optional[str] = None
    #: the --also CRCs of the payload (merkle.replica.also's names), of a framed copy
    also: Dict[str, int] = field(default_factory=dict)
    #: the census (metadata_only): the index names this copy at a location inside its
    #: log, which was not read (no frame, no digest checked: never good)
    indexed: bool = False

    @property
    def good(self) -> bool:
        """Framed and its digest checked and matching: a copy of a ledger whose metadata is
        missing (digest type unknown) is never counted good."""
        return self.frame_ok and self.digest_ok and self.verified

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Copy:
        """A COPY_ARROW row (a dict) as a Copy."""
        also = {a: int.from_bytes(row[c], "big") for c, a in ALSO_COLUMNS.items() if row.get(c)}
        return cls(**{n: row[n] for n in _SCALARS}, also=also)


def _rows_batch(rows: Sequence[Copy]) -> pa.RecordBatch:
    cols: Dict[str, List[Any]] = {n: [getattr(c, n) for c in rows] for n in _SCALARS}
    for col, a in ALSO_COLUMNS.items():
        cols[col] = [
            int(c.also[a]).to_bytes(WIDTHS[a], "big") if a in c.also else None for c in rows
        ]
    return pa.RecordBatch.from_pydict({f.name: cols[f.name] for f in COPY_ARROW}, COPY_ARROW)


class Copies:
    """A scan's copies: record batches of COPY_ARROW, in the order they were found. Single
    copies (`append`: a location outside its log, a log gone) wait in a list and become one
    batch before the next batch or when read."""

    def __init__(self) -> None:
        self._batches: List[pa.RecordBatch] = []
        self._rows: List[Copy] = []
        self._n = 0

    def append(self, copy: Copy) -> None:
        self._rows.append(copy)
        self._n += 1

    def add_batch(self, batch: pa.RecordBatch) -> None:
        self._flush()
        if batch.num_rows:
            self._batches.append(batch)
            self._n += batch.num_rows

    def extend(self, other: Copies) -> None:
        for b in other.batches():
            self.add_batch(b)

    def _flush(self) -> None:
        if self._rows:
            self._batches.append(_rows_batch(self._rows))
            self._rows = []

    def mark(self) -> int:
        """Where the copies added from now on start (for batches_since)."""
        self._flush()
        return len(self._batches)

    def batches_since(self, mark: int) -> List[pa.RecordBatch]:
        self._flush()
        return list(self._batches[mark:])

    def batches(self) -> List[pa.RecordBatch]:
        self._flush()
        return list(self._batches)

    def table(self) -> pa.Table:
        return pa.Table.from_batches(self.batches(), COPY_ARROW)

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Copy]:
        """Each copy as a Copy (an object per row: for small scans, findings and tests)."""
        for b in self.batches():
            for row in b.to_pylist():
                yield Copy.from_row(row)

    def count(self, column: str, ledgers: Optional[Iterable[int]] = None) -> int:
        """How many copies have the boolean `column` true (`good`: framed, verified and
        its digest matching), of `ledgers` only when given."""
        keep = None if ledgers is None else np.fromiter(ledgers, np.int64)
        total = 0
        for b in self.batches():
            mask = _bools(b, column)
            if keep is not None:
                mask &= np.isin(b.column("ledger").to_numpy(), keep)
            total += int(np.count_nonzero(mask))
        return total


def _bools(b: Union[pa.RecordBatch, pa.Table], column: str) -> np.ndarray:
    if column == "good":
        return _bools(b, "frame_ok") & _bools(b, "digest_ok") & _bools(b, "verified")
    col = b.column(column)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def as_table(copies: Union[pa.Table, pa.RecordBatch, Copies, Iterable[Copy]]) -> pa.Table:
    """The copies as one table of COPY_ARROW's columns (extra columns dropped)."""
    if isinstance(copies, Copies):
        return copies.table()
    if isinstance(copies, pa.RecordBatch):
        copies = pa.Table.from_batches([copies])
    if isinstance(copies, pa.Table):
        return copies.select(COPY_ARROW.names).cast(COPY_ARROW)
    rows = list(copies)
    return pa.Table.from_batches([_rows_batch(rows)] if rows else [], COPY_ARROW)


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def _gather(buf: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """(len(starts), width) bytes of `buf` at each start."""
    return buf[starts[:, None] + np.arange(width, dtype=np.int64)[None, :]]


def _validity(mask: np.ndarray) -> Optional[pa.Buffer]:
    return None if mask.all() else pa.py_buffer(np.packbits(mask, bitorder="little"))


def _variable(kind: pa.DataType, mask: np.ndarray, data: np.ndarray, width: int) -> pa.Array:
    """An Arrow string/binary array: row i holds `width` bytes of `data` (the masked rows'
    bytes, in order) where mask[i], else is empty (`kind` string) or null (binary)."""
    n = len(mask)
    lengths = np.where(mask, width, 0).astype(np.int32)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    validity = None if kind == pa.string() else _validity(mask)
    return pa.Array.from_buffers(
        kind, n, [validity, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


def framed_batch(
    window: Any,
    base: int,
    *,
    bookie: str,
    ledger: int,
    file: str,
    positions: np.ndarray,
    sizes: np.ndarray,
    entries: np.ndarray,
    frame_ok: np.ndarray,
    digest_ok: np.ndarray,
    verified: bool,
    digest_length: int,
    payload_crc32c: np.ndarray,
    last_add_confirmed: np.ndarray,
    problems: Optional[Dict[int, str]] = None,
    also: Optional[Dict[str, np.ndarray]] = None,
) -> pa.RecordBatch:
    """The COPY_ARROW rows of one ledger's copies verified in `window` (whose byte 0 is at
    log offset `base`): `positions` of each entry (after its size field), the verifier's
    columns, `frame_ok` the frame and IDs as the index says (the stored digest and --also
    CRCs are kept only then), `problems` by row for the copies whose digest failed."""
    n = len(positions)
    frame_ok = np.asarray(frame_ok, bool)
    buf = np.frombuffer(window, np.uint8)
    at = np.asarray(positions, np.int64)[frame_ok] - base + 32
    if digest_length:
        digest = _gather(buf, at, digest_length)
        text = np.empty((len(at), 2 * digest_length), np.uint8)
        text[:, 0::2] = _HEX[digest >> 4]
        text[:, 1::2] = _HEX[digest & 15]
    else:
        text = np.empty((0, 0), np.uint8)
    problem: List[Optional[str]] = [None] * n
    for row, why in (problems or {}).items():
        problem[row] = why
    cols: Dict[str, Any] = {
        "bookie": pa.repeat(pa.scalar(bookie, pa.string()), n),
        "ledger": pa.array(np.full(n, ledger, np.int64)),
        "entry": pa.array(np.asarray(entries, np.int64)),
        "file": pa.repeat(pa.scalar(file, pa.string()), n),
        "offset": pa.array(np.asarray(positions, np.int64)),
        "size": pa.array(np.asarray(sizes, np.int64)),
        "frame_ok": pa.array(frame_ok),
        "digest_ok": pa.array(np.asarray(digest_ok, bool) & frame_ok),
        "verified": pa.array(np.full(n, verified, bool)),
        "stored_digest": _variable(pa.string(), frame_ok, text, 2 * digest_length),
        "payload_crc32c": pa.array(np.asarray(payload_crc32c).astype(np.int64)),
        "last_add_confirmed": pa.array(np.asarray(last_add_confirmed, np.int64)),
        "problem": pa.array(problem, pa.string()),
        "indexed": pa.array(np.zeros(n, bool)),
    }
    for col, a in ALSO_COLUMNS.items():
        values = (also or {}).get(a)
        if values is None:
            cols[col] = pa.nulls(n, pa.binary())
            continue
        width = WIDTHS[a]
        big = np.asarray(values)[frame_ok].astype(f">u{width}").view(np.uint8)
        cols[col] = _variable(pa.binary(), frame_ok, big, width)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in COPY_ARROW], schema=COPY_ARROW)


def bare_batch(
    *,
    bookie: str,
    file: str,
    positions: np.ndarray,
    ledgers: np.ndarray,
    entries: np.ndarray,
    sizes: Optional[np.ndarray] = None,
    indexed: bool = False,
) -> pa.RecordBatch:
    """The COPY_ARROW rows of copies that were not read (their location, log or size field
    is bad; a census's, `indexed`, are never read): nothing framed, nothing verified."""
    n = len(positions)
    no = pa.array(np.zeros(n, bool))
    cols: Dict[str, Any] = {
        "bookie": pa.repeat(pa.scalar(bookie, pa.string()), n),
        "ledger": pa.array(np.asarray(ledgers, np.int64)),
        "entry": pa.array(np.asarray(entries, np.int64)),
        "file": pa.repeat(pa.scalar(file, pa.string()), n),
        "offset": pa.array(np.asarray(positions, np.int64)),
        "size": pa.array(np.zeros(n, np.int64) if sizes is None else np.asarray(sizes, np.int64)),
        "frame_ok": no,
        "digest_ok": no,
        "verified": no,
        "stored_digest": pa.repeat(pa.scalar("", pa.string()), n),
        "payload_crc32c": pa.array(np.zeros(n, np.int64)),
        "last_add_confirmed": pa.array(np.full(n, -1, np.int64)),
        "problem": pa.nulls(n, pa.string()),
        "indexed": pa.array(np.full(n, indexed, bool)),
    }
    for col in ALSO_COLUMNS:
        cols[col] = pa.nulls(n, pa.binary())
    return pa.RecordBatch.from_arrays([cols[f.name] for f in COPY_ARROW], schema=COPY_ARROW)
