"""Rows of a partition clustered and sorted by a key, gathered into passes of whole groups:
Spark hands mapInArrow ~1,000-row batches (the session's maxRecordsPerBatch), converting
columns costs the same for 1,000 rows as for 64,000, and a group's rows may span batches.
"""

from __future__ import annotations

from typing import Iterator, List

import numpy as np
import pyarrow as pa

__all__ = ["MIN_ROWS_PER_PASS", "whole_groups"]

#: rows gathered before a pass
MIN_ROWS_PER_PASS = 1 << 16


def whole_groups(
    batches: Iterator[pa.RecordBatch], key: str, min_rows: int = MIN_ROWS_PER_PASS
) -> Iterator[pa.Table]:
    """Tables of at least `min_rows` rows (the last may be fewer) holding only whole groups of
    equal `key` (the batches' rows sorted by it): each pass ends before the last group seen,
    whose rows wait for the next one; a single group keeps gathering."""
    held: List[pa.RecordBatch] = []
    rows = 0
    for b in batches:
        if b.num_rows == 0:
            continue
        held.append(b)
        rows += b.num_rows
        if rows < min_rows:
            continue
        t = pa.Table.from_batches(held)
        k = t.column(key).to_numpy()
        if k[0] == k[-1]:
            continue  # one group so far: keep gathering
        last = int(np.flatnonzero(k[1:] != k[:-1])[-1]) + 1
        yield t.slice(0, last)
        rest = t.slice(last)
        held, rows = rest.to_batches(), rest.num_rows
    if rows:
        yield pa.Table.from_batches(held)
