"""What every target shares: the row schema, a column builder, strict decoders for the values
stores report (base64, hex, decimal sizes), and names relative to a root.

Everything here reads values an attacker may have written (a listing file, a server's
reply): a value that does not decode exactly is an error for that row, never a guess, and no
number read from one sizes memory.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Dict, List, Optional

import pyarrow as pa

TARGET_SCHEMA = pa.schema(
    [
        pa.field("name", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("crc32", pa.binary()),
        pa.field("crc32c", pa.binary()),
        pa.field("crc64nvme", pa.binary()),
        pa.field("composite_algorithm", pa.string()),
        pa.field("composite_crc", pa.binary()),
        pa.field("parts", pa.int32()),
        # each part's size, in order, when the store gave the sizes but not the parts' values
        # (the copy check then makes the composite from the key's windows)
        pa.field("part_sizes", pa.list_(pa.int64())),
        pa.field("other", pa.string()),
        pa.field("requests", pa.int32()),
        pa.field("bytes_read", pa.int64()),
        pa.field("error", pa.string()),
    ]
)
COLUMNS = TARGET_SCHEMA.names
#: bytes of each full-object CRC column
CRC_BYTES = {"crc32": 4, "crc32c": 4, "crc64nvme": 8}
#: the largest size anything here accepts (Java's long, as S3, GCS and HDFS use)
MAX_SIZE = (1 << 63) - 1
#: rows per batch that list() yields
BATCH_ROWS = 8192

_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
_DIGITS = re.compile(r"[0-9]{1,19}")


class Rows:
    """Columns of TARGET_SCHEMA built row by row; `batch()` makes the RecordBatch."""

    def __init__(self) -> None:
        self.cols: Dict[str, List[Any]] = {c: [] for c in COLUMNS}

    def __len__(self) -> int:
        return len(self.cols["name"])

    def add(self, name: str, **values: Any) -> None:
        self.cols["name"].append(name)
        for c in COLUMNS[1:]:
            self.cols[c].append(values.pop(c, None))
        if values:
            raise TypeError(f"unknown columns {sorted(values)}")

    def add_row(self, row: Dict[str, Any]) -> None:
        for c in COLUMNS:
            self.cols[c].append(row.get(c))

    def batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [pa.array(self.cols[f.name], type=f.type) for f in TARGET_SCHEMA], schema=TARGET_SCHEMA
        )

    def take(self) -> pa.RecordBatch:
        out = self.batch()
        self.cols = {c: [] for c in COLUMNS}
        return out


def empty_batch() -> pa.RecordBatch:
    return Rows().batch()


def conform(batch: pa.RecordBatch) -> List[Dict[str, Any]]:
    """The rows of a batch given to describe() as dicts of every TARGET_SCHEMA column (a
    column it lacks is null): the lead's job may hand over only name and size."""
    n = batch.num_rows
    data = {
        c: (batch.column(c).to_pylist() if c in batch.schema.names else [None] * n) for c in COLUMNS
    }
    return [{c: data[c][i] for c in COLUMNS} for i in range(n)]


def b64_exact(text: object, nbytes: int, what: str) -> bytes:
    """`text` as strict base64 of exactly `nbytes` bytes, or ValueError (one line)."""
    if not isinstance(text, str) or not _B64.fullmatch(text) or len(text) % 4:
        raise ValueError(f"{what}: not base64: {short(text)}")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what}: not base64: {short(text)}") from None
    if len(raw) != nbytes:
        raise ValueError(f"{what}: {len(raw)} bytes, not {nbytes}: {short(text)}")
    return raw


def hex_bytes(text: str, what: str, limit: int = 4096) -> bytes:
    """Even-length hex text as bytes (at most `limit` bytes), or ValueError."""
    if len(text) > 2 * limit or not _HEX.fullmatch(text):
        raise ValueError(f"{what}: not hex: {short(text)}")
    return bytes.fromhex(text)


def size_value(value: object, what: str = "size") -> int:
    """A size as a JSON number or a decimal string (GCS's JSON API writes sizes as strings),
    in 0..2**63-1; ValueError otherwise (negative, fractional, huge, boolean, text)."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: not a size: {short(value)}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        n = int(value)
    else:
        raise ValueError(f"{what}: not a size: {short(value)}")
    if not 0 <= n <= MAX_SIZE:
        raise ValueError(f"{what}: out of range: {short(value)}")
    return n


def short(value: object, limit: int = 60) -> str:
    """A value for a one-line message: repr'd (control characters escaped) and cut."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def under(name: str, prefix: str) -> Optional[str]:
    """`name` relative to `prefix` (a '/'-separated folder, '' for the whole store), or None
    when it lies outside. Names are data: '..' or '.' stay as they are."""
    if not prefix:
        return name or None
    if name.startswith(prefix + "/") and len(name) > len(prefix) + 1:
        return name[len(prefix) + 1 :]
    return None


class Skips:
    """Entries a listing holds that are not rows (outside the root, another bucket, not an
    object, no name): counted by reason, for the report."""

    def __init__(self) -> None:
        self.reasons: Dict[str, int] = {}

    def add(self, reason: str) -> None:
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.reasons.values())
