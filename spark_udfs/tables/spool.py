"""A volume's emitted rows of the pass in progress, kept on local disk until they are written.

`crcmerkle scan --loop --emit URI` writes a volume's tables to URI several times in one pass
(spark_udfs.tables.emit: each time the rows of the replicas read so far, and the rows of the
pass before for the others), so its rows cannot go straight into the one file a one-shot emit
streams them to. They go here instead: a private directory (`tempfile.mkdtemp`, mode 0700,
never a shared one reused), a Parquet file per row group of each (table, datanode), read back
as often as the volume is written, removed when the pass of the volume ends or fails. Memory
stays bounded as in the one-shot emit: a row group (ROW_GROUP_BYTES) per table at a time.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Dict, Iterator, List, Set, Tuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["Spool"]


class Spool:
    """Rows by (table, datanode), each with a `replica` column where the table has one; the
    replicas named by any row so far are in `replicas`."""

    def __init__(self, row_group_bytes: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="crcmerkle-emit-")
        self.row_group_bytes = row_group_bytes
        self._pending: Dict[Tuple[str, str], List[pa.Table]] = {}
        self._bytes: Dict[Tuple[str, str], int] = {}
        self._files: Dict[Tuple[str, str], List[str]] = {}
        self._index: Dict[Tuple[str, str], int] = {}
        self.replicas: Set[str] = set()

    def add(self, table: str, datanode: str, t: pa.Table) -> None:
        if t.num_rows == 0:
            return
        key = (table, datanode)
        self._pending.setdefault(key, []).append(t)
        self._bytes[key] = self._bytes.get(key, 0) + t.nbytes
        if "replica" in t.column_names:
            self.replicas.update(
                v for v in pc.unique(t.column("replica")).to_pylist() if v is not None
            )
        if self._bytes[key] >= self.row_group_bytes:
            self._flush(key)

    def _flush(self, key: Tuple[str, str]) -> None:
        pending = self._pending.pop(key, [])
        self._bytes.pop(key, None)
        if not pending:
            return
        files = self._files.setdefault(key, [])
        path = f"{self.dir}/{self._index.setdefault(key, len(self._index))}-{len(files)}.parquet"
        pq.write_table(pa.concat_tables(pending), path)
        files.append(path)

    def keys(self) -> List[Tuple[str, str]]:
        return sorted(set(self._files) | set(self._pending))

    def tables(self, table: str, datanode: str) -> Iterator[pa.Table]:
        """The rows of (table, datanode) so far, a row group at a time, in the order added."""
        key = (table, datanode)
        self._flush(key)
        for path in self._files.get(key, []):
            yield pq.read_table(path)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
