"""The chunk-level table the jobs exchange, and its conversion to and from ContainerTree.
(The package of the tables the jobs exchange, without Spark: this module, and
spark_udfs.tables.emit, the scan's tables written by one host.)

One row per chunk of each replica (schema CHUNK_SCHEMA):
  datanode          who holds the replica (string; any stable name, e.g. "dn0")
  container         container ID
  block             local block ID
  offset, length    where the chunk is in its block file (length as observed by the scan)
  leaf              the chunk's tree value (unsigned 32-bit, in a long)
  checksum_matches  every window and the length matched the recorded checksums
  deleted           false for chunk rows
  replica           where the replica lives (path/URI; may be null): what `reconcile` needs
Rows with a null offset describe a whole block (a chunkless block has no other row):
  deleted=true  -> a tombstone; `leaf` holds the tombstone's block value (kept by Ozone)
  deleted=false -> a live block with no chunks (leaf null)
A row with a null block only says "this replica exists" (a replica with no blocks at all).

The chunks table as a scan writes it (CHUNK_TABLE_SCHEMA) adds one column per algorithm of
`--also` (ALSO_SCHEMA: crc64nvme, crc32c, crc32, each `binary`): on a chunk row, that CRC of
each window of the chunk (its own bytes_per_checksum) as read, packed big-endian (8 bytes
per window for crc64nvme, 4 for the others), as Ozone stores window checksums; null when
the algorithm was not asked for or the chunk was not read (type NONE, an I/O error). The
blocks table has the same columns: the whole block's value (8 or 4 bytes, big-endian: its
base64 is S3's `x-amz-checksum-<alg>` of an object made of that block), null unless the
block was read in full (merkle.replica.also).

After them, the chunks table carries the checksums the replica's metadata RECORDED for the
chunk (RECORDED_SCHEMA; merkle.replica.recorded): Ozone's ChunkInfo.checksumData from the
datanode's container.db, or the chunk record of crcmerkle's own `.blocks` file (which keeps
the same ChecksumData: type, bytes per checksum, the window checksums as Ozone stores them):
  checksum_type       Ozone's ChecksumType name as recorded: CRC32, CRC32C, SHA256, MD5,
                      NONE ("type number N" for a number Ozone does not define)
  bytes_per_checksum  as recorded
  checksums           the recorded window checksums concatenated exactly as stored: 4
                      big-endian bytes per window for CRC32/CRC32C, 32 for SHA256, 16 for
                      MD5, empty for NONE
All three are null on rows that are no chunk, and when the scan has no recorded metadata for
the chunk: a trees-only scan (it reads the stored `.tree` alone, no metadata), a chunk of a
block whose metadata row or record could not be decoded or failed the layout's checks (that
block is reported in the errors table, as before; its chunks then usually have no row at
all), two records of one (block, offset) (ambiguous), or a replica whose recorded checksums
together exceed 2 GiB. A full scan and a census (--metadata-only, which reads the same
metadata) fill them, on both shipped layouts. They are the values as RECORDED, whatever the
data: `checksum_matches` says whether the bytes read matched them (a full scan; a census reads
no data and its chunk rows say nothing about the bytes).

Tables written before the --also or the recorded columns read them as null (the readers pass
the schema: spark.read.schema(spark_udfs.jobs.scan.TABLE_SCHEMAS[...])).

Which replicas VERIFIED (what a job trusting the recorded checksums must filter on): the
containers table (spark_udfs.jobs.scan.REPLICA_SCHEMA, one row per replica, built by
spark_udfs.jobs.scan._replica_rows) has `verified` (spark_udfs.jobs.scan._verified: the scan
read the replica's block metadata and, if that lists any chunk, some bytes of its block files; for a
census: its metadata was read and it has a tree; for trees-only: its stored `.tree` was
read) and `ok` (no error-level finding, merkle.replica.levels; the findings themselves are
the errors table's rows, with their `severity`), with `bytes_read` (0 for a census or a
trees-only scan: nothing of the data was checked) and `unhealthy_chunks`. Per chunk,
`checksum_matches` is true when every window read and the length matched the recorded
checksums. A replica whose data was checked and found good is: verified, ok, bytes_read > 0
(or no chunk at all); a chunk of it with checksum_matches true was read and equals its
recorded checksums. The diff job (spark_udfs.jobs.diff) then compares the replicas of a container
(their trees) with each other; that per-container verdict is its output, not a scan column.
The container value is not a column: it follows from the rows (tree_from_rows), and the
diff job never needs it, comparing commutative digests instead.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from merkle.replica.also import ALSO_ALGORITHMS, WIDTHS, AlsoChecksums
from merkle.replica.recorded import RecordedChecksums, type_name
from merkle.trees.model import ContainerTree

__all__ = [
    "ALSO_COLUMNS",
    "ALSO_SCHEMA",
    "ARROW_BLOCK_SCHEMA",
    "ARROW_CHUNK_SCHEMA",
    "CHUNK_COLUMNS",
    "CHUNK_SCHEMA",
    "CHUNK_TABLE_COLUMNS",
    "CHUNK_TABLE_SCHEMA",
    "RECORDED_ARROW",
    "RECORDED_COLUMNS",
    "RECORDED_SCHEMA",
    "RowColumns",
    "also_block_columns",
    "also_chunk_columns",
    "block_rows",
    "column_values",
    "from_arrow",
    "recorded_chunk_columns",
    "to_arrow",
    "tree_from_rows",
    "tree_to_rows",
    "trees_from_table",
]

CHUNK_SCHEMA = (
    "datanode string, container long, block long, offset long, length long, "
    "leaf long, checksum_matches boolean, deleted boolean, replica string"
)
CHUNK_COLUMNS = [
    "datanode",
    "container",
    "block",
    "offset",
    "length",
    "leaf",
    "checksum_matches",
    "deleted",
    "replica",
]
ARROW_CHUNK_SCHEMA = pa.schema(
    [
        ("datanode", pa.string()),
        ("container", pa.int64()),
        ("block", pa.int64()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("leaf", pa.int64()),
        ("checksum_matches", pa.bool_()),
        ("deleted", pa.bool_()),
        ("replica", pa.string()),
    ]
)

#: the --also columns (see the module docstring), on the chunks and the blocks table
ALSO_COLUMNS: List[str] = list(ALSO_ALGORITHMS)
ALSO_SCHEMA = ", ".join(f"{a} binary" for a in ALSO_COLUMNS)
#: the recorded ChecksumData columns (see the module docstring), on the chunks table
RECORDED_COLUMNS: List[str] = ["checksum_type", "bytes_per_checksum", "checksums"]
RECORDED_SCHEMA = "checksum_type string, bytes_per_checksum long, checksums binary"
#: their Arrow types, in RECORDED_COLUMNS order
RECORDED_ARROW: List[Tuple[str, pa.DataType]] = [
    ("checksum_type", pa.string()),
    ("bytes_per_checksum", pa.int64()),
    ("checksums", pa.binary()),
]
#: the chunks table a scan writes: the chunk rows, the --also columns, the recorded columns
CHUNK_TABLE_SCHEMA = f"{CHUNK_SCHEMA}, {ALSO_SCHEMA}, {RECORDED_SCHEMA}"
CHUNK_TABLE_COLUMNS = CHUNK_COLUMNS + ALSO_COLUMNS + RECORDED_COLUMNS
#: the most bytes of a binary column (Arrow's 32-bit offsets)
_BINARY_LIMIT = (1 << 31) - 1


def _match(keys_b: np.ndarray, keys_o: np.ndarray, b: np.ndarray, o: np.ndarray) -> np.ndarray:
    """For each (b[i], o[i]) the index of the equal (keys_b[k], keys_o[k]), or -1 (the keys
    unique; vectorised: one sort of both sets together)."""
    nk = keys_b.shape[0]
    allb = np.concatenate((keys_b, b))
    allo = np.concatenate((keys_o, o))
    tag = np.concatenate((np.zeros(nk, np.int8), np.ones(b.shape[0], np.int8)))
    order = np.lexsort((tag, allo, allb))  # by block, offset, keys before queries
    out = np.full(b.shape[0], -1, dtype=np.int64)
    if order.shape[0] < 2:
        return out
    prev, cur = order[:-1], order[1:]
    hit = (tag[prev] == 0) & (tag[cur] == 1) & (allb[prev] == allb[cur]) & (allo[prev] == allo[cur])
    out[cur[hit] - nk] = prev[hit]
    return out


def _binary(data: np.ndarray, lengths: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A binary array of len(lengths) values cut from `data` (bytes, in order)."""
    offsets = np.concatenate((np.zeros(1, np.int64), np.cumsum(lengths)))
    if offsets[-1] >= 1 << 31:
        raise ValueError("--also values of one replica above 2 GiB")
    validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(
        pa.binary(),
        lengths.shape[0],
        [validity, pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(data.tobytes())],
    )


def also_chunk_columns(
    also: Dict[str, AlsoChecksums], block: Any, offset: Any
) -> Dict[str, pa.Array]:
    """The --also columns of chunk rows (Arrow `block` and `offset` columns, nulls where a
    row is no chunk): each asked algorithm's windows of the chunk, null where the scan has
    none; the algorithms not asked are all null."""
    b = np.asarray(block.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    o = np.asarray(offset.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    is_chunk = ~np.asarray(offset.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    n = b.shape[0]
    out: Dict[str, pa.Array] = {}
    for a in ALSO_COLUMNS:
        v = also.get(a)
        if v is None or v.chunk_block.shape[0] == 0:
            # not asked, or no chunk of the replica was read (all unreadable, or no chunks)
            out[a] = pa.nulls(n, type=pa.binary())
            continue
        idx = np.where(is_chunk, _match(v.chunk_block, v.chunk_offset, b, o), -1)
        valid = idx >= 0
        start = np.where(valid, v.window_start[np.maximum(idx, 0)], 0)
        count = np.where(valid, v.window_start[np.maximum(idx, 0) + 1] - start, 0)
        # the windows of the matched chunks, in row order (one gather, no loop per chunk)
        total = int(count.sum())
        first = np.repeat(start - (np.cumsum(count) - count), count)
        picked = v.windows[np.arange(total, dtype=np.int64) + first]
        be = picked.astype(">u8" if WIDTHS[a] == 8 else ">u4")
        out[a] = _binary(be.view(np.uint8), count * WIDTHS[a], valid)
    return out


def recorded_chunk_columns(
    recorded: Optional[RecordedChecksums], block: Any, offset: Any
) -> Dict[str, pa.Array]:
    """The recorded columns (RECORDED_COLUMNS) of chunk rows (Arrow `block` and `offset`
    columns, nulls where a row is no chunk): each chunk's recorded ChecksumData matched by
    (block, offset), null where `recorded` has none for it (or is None). Columnar: one
    sort to match, Arrow takes to gather (no Python per chunk or window)."""
    n = len(block)
    nulls = {c: pa.nulls(n, type=t) for c, t in RECORDED_ARROW}
    if recorded is None or len(recorded) == 0 or n == 0:
        return nulls
    b = np.asarray(block.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    o = np.asarray(offset.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    is_chunk = ~np.asarray(offset.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    idx = np.where(is_chunk, _match(recorded.chunk_block, recorded.chunk_offset, b, o), -1)
    valid = idx >= 0
    valid[valid] = recorded.unique[idx[valid]]  # an ambiguous (block, offset): no values
    if not valid.any():
        return nulls
    take = pa.array(np.where(valid, idx, 0), mask=~valid)
    types, inverse = np.unique(recorded.checksum_type, return_inverse=True)
    names = pa.DictionaryArray.from_arrays(
        pa.array(inverse.reshape(-1).astype(np.int32)),
        pa.array([type_name(t) for t in types.tolist()], type=pa.string()),
    )
    sums = pa.Array.from_buffers(
        pa.large_binary(),
        len(recorded),
        [
            None,
            pa.py_buffer(recorded.start.astype(np.int64).tobytes()),
            pa.py_buffer(recorded.data),
        ],
    ).take(take)
    picked = int(np.diff(recorded.start)[idx[valid]].sum())
    if picked > _BINARY_LIMIT:  # Arrow's binary (Spark's) cannot hold them in one batch
        return nulls
    return {
        "checksum_type": names.take(take).dictionary_decode(),
        "bytes_per_checksum": pa.array(recorded.bytes_per_checksum).take(take),
        "checksums": sums.cast(pa.binary()),
    }


def also_block_columns(also: Dict[str, AlsoChecksums], block: np.ndarray) -> Dict[str, pa.Array]:
    """The --also columns of block rows (block IDs): each block's whole-block value where
    the scan has one, else null."""
    n = block.shape[0]
    out: Dict[str, pa.Array] = {}
    for a in ALSO_COLUMNS:
        v = also.get(a)
        if v is None:
            out[a] = pa.nulls(n, type=pa.binary())
            continue
        idx = _match(
            v.block_id,
            np.zeros_like(v.block_id),
            np.asarray(block, np.int64),
            np.zeros(n, np.int64),
        )
        valid = idx >= 0
        values = (
            v.block_value[np.maximum(idx, 0)] if v.block_value.shape[0] else np.zeros(n, np.uint64)
        )
        be = values.astype(">u8" if WIDTHS[a] == 8 else ">u4")
        out[a] = _binary(
            be.view(np.uint8).reshape(n, WIDTHS[a])[valid].ravel(),
            np.where(valid, WIDTHS[a], 0),
            valid,
        )
    return out


def tree_to_rows(datanode: str, tree: ContainerTree, replica: Optional[str] = None) -> pa.Table:
    """The rows of one replica's tree (vectorised: no Python loop per chunk)."""
    nb = tree.block_id.shape[0]
    counts = np.diff(tree.block_chunk_start)
    chunk_block = np.repeat(tree.block_id, counts)
    lone = counts == 0  # tombstones (always chunkless) and empty live blocks
    lone_ids = tree.block_id[lone]
    lone_del = tree.block_deleted[lone]
    lone_leaf = np.where(lone_del, tree.block_value[lone], 0)
    nc = chunk_block.shape[0]
    nl = int(lone.sum())
    n = nc + nl + (1 if nb == 0 else 0)
    block = np.concatenate((chunk_block, lone_ids, np.zeros(n - nc - nl, dtype=np.int64)))
    offset = np.concatenate((tree.chunk_offset, np.zeros(n - nc, dtype=np.int64)))
    length = np.concatenate((tree.chunk_length, np.zeros(n - nc, dtype=np.int64)))
    leaf = np.concatenate((tree.chunk_value, lone_leaf, np.zeros(n - nc - nl, dtype=np.int64)))
    matches = np.concatenate((tree.chunk_matches, np.ones(n - nc, dtype=bool)))
    deleted = np.concatenate(
        (np.zeros(nc, dtype=bool), lone_del, np.zeros(n - nc - nl, dtype=bool))
    )
    no_offset = np.arange(n) >= nc
    no_leaf = np.concatenate(
        (np.zeros(nc, dtype=bool), ~lone_del, np.ones(n - nc - nl, dtype=bool))
    )
    no_block = np.arange(n) >= nc + nl
    return pa.table(
        {
            "datanode": pa.array([datanode] * n, type=pa.string()),
            "container": pa.array(np.full(n, tree.container_id, dtype=np.int64)),
            "block": pa.array(block, mask=no_block),
            "offset": pa.array(offset, mask=no_offset),
            "length": pa.array(length, mask=no_offset),
            "leaf": pa.array(leaf, mask=no_leaf),
            "checksum_matches": pa.array(matches, mask=no_offset),
            "deleted": pa.array(deleted),
            "replica": pa.array([replica] * n, type=pa.string()),
        },
        schema=ARROW_CHUNK_SCHEMA,
    )


#: the blocks table (spark_udfs.jobs.scan.BLOCK_SCHEMA): one row per block of each replica, with
#: its chunks as arrays in offset order, as Ozone's BlockMerkleTree holds them
ARROW_BLOCK_SCHEMA = pa.schema(
    [
        ("datanode", pa.string()),
        ("replica", pa.string()),
        ("container", pa.int64()),
        ("block", pa.int64()),
        ("block_value", pa.int64()),
        ("deleted", pa.bool_()),
        ("chunks", pa.int64()),
        ("bytes", pa.int64()),
        ("checksum_matches", pa.bool_()),
        ("chunk_offsets", pa.list_(pa.int64())),
        ("chunk_lengths", pa.list_(pa.int64())),
        ("chunk_leaves", pa.list_(pa.int64())),
        ("chunk_matches", pa.list_(pa.bool_())),
    ]
)


def block_rows(datanode: str, tree: ContainerTree, replica: Optional[str] = None) -> pa.Table:
    """The blocks-table rows of one replica's tree: each block's Ozone value, chunk count,
    bytes, health (every chunk matches), and its chunks as arrays (no Python loop)."""
    nb = tree.block_id.shape[0]
    start = tree.block_chunk_start
    counts = np.diff(start)
    which = np.repeat(np.arange(nb), counts)  # the block of each chunk row
    nbytes = np.bincount(which, weights=tree.chunk_length, minlength=nb).astype(np.int64)
    unhealthy = np.bincount(which, weights=~tree.chunk_matches, minlength=nb)
    offsets = pa.array(start.astype(np.int32))

    def per_block(values: np.ndarray) -> pa.Array:
        return pa.ListArray.from_arrays(offsets, pa.array(values))

    return pa.table(
        {
            "datanode": pa.array([datanode] * nb, type=pa.string()),
            "replica": pa.array([replica] * nb, type=pa.string()),
            "container": pa.array(np.full(nb, tree.container_id, dtype=np.int64)),
            "block": pa.array(tree.block_id),
            "block_value": pa.array(tree.block_value),
            "deleted": pa.array(tree.block_deleted),
            "chunks": pa.array(counts.astype(np.int64)),
            "bytes": pa.array(nbytes),
            "checksum_matches": pa.array(unhealthy == 0),
            "chunk_offsets": per_block(tree.chunk_offset),
            "chunk_lengths": per_block(tree.chunk_length),
            "chunk_leaves": per_block(tree.chunk_value),
            "chunk_matches": per_block(tree.chunk_matches),
        },
        schema=ARROW_BLOCK_SCHEMA,
    )


def column_values(t: Any, name: str, fill: Any = 0) -> Tuple[np.ndarray, np.ndarray]:
    """(values with nulls filled, null mask) of a column of an Arrow table or batch."""
    c = t.column(name)
    nulls = c.is_null().to_numpy(zero_copy_only=False).astype(bool)
    dtype = bool if pa.types.is_boolean(c.type) else np.int64
    # explicit dtype: an empty ChunkedArray (no chunks) converts to float64 otherwise
    return np.asarray(c.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype), nulls


class RowColumns:
    """The chunk-table columns of an Arrow table or batch as numpy arrays with null masks,
    converted once, so that trees of many replicas can be cut from them by row masks."""

    _FIELDS = (
        "block",
        "no_block",
        "offset",
        "no_offset",
        "leaf",
        "no_leaf",
        "length",
        "matches",
        "deleted",
    )

    def __init__(self, rows: Any) -> None:
        self.block, self.no_block = column_values(rows, "block")
        self.offset, self.no_offset = column_values(rows, "offset")
        self.leaf, self.no_leaf = column_values(rows, "leaf")
        self.length, _ = column_values(rows, "length")
        self.matches, _ = column_values(rows, "checksum_matches", True)
        self.deleted, _ = column_values(rows, "deleted", False)

    def slice(self, start: int, stop: int) -> RowColumns:
        """Rows start..stop (numpy views, no copy)."""
        out = object.__new__(RowColumns)
        for f in self._FIELDS:
            setattr(out, f, getattr(self, f)[start:stop])
        return out

    def tree(self, container_id: int, keep: Optional[np.ndarray] = None) -> ContainerTree:
        """The tree of the rows selected by `keep` (all rows if None), which must be the rows
        of ONE replica. Chunk rows whose leaf is null are skipped (a missing chunk has no
        leaf); a row with a null block is only a replica marker."""
        has = ~self.no_block if keep is None else keep & ~self.no_block
        is_chunk = has & ~self.no_offset & ~self.no_leaf & ~self.deleted
        tomb = has & self.no_offset & self.deleted
        empty = has & self.no_offset & ~self.deleted
        tombstones: Dict[int, int] = dict(zip(self.block[tomb].tolist(), self.leaf[tomb].tolist()))
        return ContainerTree.from_columns(
            int(container_id),
            self.block[is_chunk],
            self.offset[is_chunk],
            self.length[is_chunk],
            leaf=self.leaf[is_chunk],
            checksum_matches=self.matches[is_chunk],
            deleted_blocks=tombstones or None,
            empty_blocks=np.unique(self.block[empty]).tolist() or None,
        )


def tree_from_rows(
    container_id: int, rows: pa.Table, only_blocks: Optional[Iterable[int]] = None
) -> ContainerTree:
    """The tree of ONE replica from its rows (any order). Chunk rows whose leaf is null are
    skipped (a missing chunk has no leaf). `only_blocks` restricts the tree to those IDs."""
    cols = RowColumns(rows)
    keep = None
    if only_blocks is not None:
        keep = np.isin(cols.block, np.fromiter(only_blocks, dtype=np.int64))
    return cols.tree(container_id, keep)


def trees_from_table(table: pa.Table) -> Dict[Tuple[str, int], ContainerTree]:
    """{(datanode, container): tree} of every replica in a chunk table (driver-side helper
    for tests and small tables)."""
    out: Dict[Tuple[str, int], ContainerTree] = {}
    dn = table.column("datanode").to_numpy(zero_copy_only=False)
    cid = table.column("container").to_numpy()
    keys: List[Tuple[str, int]] = sorted(set(zip(dn.tolist(), cid.tolist())))
    for d, c in keys:
        mask = (dn == d) & (cid == c)
        out[(d, c)] = tree_from_rows(c, table.filter(pa.array(mask)))
    return out


def from_arrow(spark: Any, table: pa.Table) -> Any:
    """A DataFrame from an Arrow chunk table without loss: plain pandas would turn nullable
    64-bit IDs into float64 and round them (pyspark >= 4 takes Arrow directly)."""
    schema = CHUNK_SCHEMA if table.schema.equals(ARROW_CHUNK_SCHEMA) else None
    try:
        return spark.createDataFrame(table, schema)
    except (TypeError, ValueError):  # pyspark 3.5: no Arrow input; nullable pandas dtypes
        import pandas as pd

        pdf = table.to_pandas(
            types_mapper={pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}.get
        )
        return spark.createDataFrame(pdf, schema)


def to_arrow(df: Any) -> pa.Table:
    """Collect a DataFrame as Arrow (exact 64-bit values; pyspark >= 4 has toArrow)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    # pyspark 3.5: toPandas() would turn nullable 64-bit columns into float64 and round them
    batches = df._collect_as_arrow()
    if not batches:
        return pa.Table.from_pandas(df.limit(0).toPandas(), preserve_index=False)
    return pa.Table.from_batches(batches)
