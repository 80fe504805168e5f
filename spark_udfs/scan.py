"""The scan job: verify the replicas of many datanodes in parallel, reading files on executors.

The driver only lists replicas (spark_udfs.fs.discover). Everything else runs on executors:
  1. per replica (mapInArrow): read the block metadata (`.blocks`, merkle.blockmeta) through
     the filesystem layer and emit one *work item* per chunk: (replica, block file, byte
     range, recorded window checksums), plus one row per block;
  2. per work item (mapInArrow, items repartitioned by block file and sorted by offset, so
     one task reads a block file sequentially): read the byte range itself, checksum its
     windows natively (merkle.checksum_windows, one call per range) and compare with the
     recorded checksums. Block bytes never enter the JVM or an Arrow batch; only work items
     (~4 bytes per 16 KiB window) and results travel;
  3. per replica (grouped by replica): build the scanned tree from the observed leaves, merge
     it into the stored `.tree` (merkle.merge: tombstones win) and emit the chunk table
     (spark_udfs.tables), the errors and one summary row per replica.
The rules are those of the local scanner (merkle.replica_scan.scan_container, write_tree=
False): same error kinds, same leaves, same merged trees; the tests check they agree. The job
never writes into the replicas (a scan that updates `.tree` files is the local scanner's job).

`trees_only=True` skips the data and reads the stored `.tree` files instead.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

import merkle
from merkle.blockmeta import CHECKSUM_SIZES, CRC32, CRC32C, NONE, SHA256, ContainerMeta
from merkle.replica_errors import BlockMetaError
from merkle.replica_scan import (CORRUPT_CHUNK, INCONSISTENT_CHUNK_LENGTH, METADATA_CORRUPT,
                                 METADATA_MISSING, MISSING_CHUNK, MISSING_DATA_FILE,
                                 TREE_CORRUPT, TREE_MISSING, UNREADABLE_DATA_FILE)
from merkle.treefile import TreeFileError, tree_from_bytes
from spark_udfs import fs
from spark_udfs.tables import CHUNK_COLUMNS, tree_to_rows

__all__ = ["BLOCK_SCHEMA", "ERROR_SCHEMA", "REPLICA_SCHEMA", "ScanTables", "scan_replicas",
           "work_items"]

ERROR_SCHEMA = ("datanode string, replica string, container long, error string, block long, "
                "offset long, detail string")
REPLICA_SCHEMA = ("datanode string, replica string, container long, data_checksum long, "
                  "ok boolean, errors long, blocks long, chunks long, bytes_read long")
BLOCK_SCHEMA = ("datanode string, replica string, container long, block long, "
                "block_value long, deleted boolean, chunks long, bytes long, "
                "checksum_matches boolean")

#: work items: kind ITEM (a chunk's byte range), BLOCK (a block file), ERROR (metadata)
_ITEM_SCHEMA = pa.schema([
    ("kind", pa.string()), ("datanode", pa.string()), ("replica", pa.string()),
    ("container", pa.int64()), ("block", pa.int64()), ("offset", pa.int64()),
    ("length", pa.int64()), ("checksum_type", pa.int32()), ("bytes_per_checksum", pa.int64()),
    ("checksums", pa.binary()), ("error", pa.string()), ("detail", pa.string())])
#: observations: kind CHUNK (observed chunk), BLOCK (present block file), ERROR
_OBS_SCHEMA = pa.schema([
    ("kind", pa.string()), ("datanode", pa.string()), ("replica", pa.string()),
    ("container", pa.int64()), ("block", pa.int64()), ("offset", pa.int64()),
    ("length", pa.int64()), ("leaf", pa.int64()), ("checksum_matches", pa.bool_()),
    ("bytes_read", pa.int64()), ("error", pa.string()), ("detail", pa.string())])
#: output of the per-replica stage: kind CHUNK / ERROR / REPLICA, all in one schema
_OUT_SCHEMA = ("kind string, datanode string, replica string, container long, block long, "
               "offset long, length long, leaf long, checksum_matches boolean, "
               "deleted boolean, error string, detail string, data_checksum long, "
               "ok boolean, errors long, blocks long, chunks long, bytes_read long")


def _spark_schema(schema: pa.Schema) -> str:
    names = {pa.string(): "string", pa.int64(): "long", pa.int32(): "int",
             pa.binary(): "binary", pa.bool_(): "boolean"}
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)


def _paths(replica: str, container: int) -> Dict[str, str]:
    meta = fs.join(replica, "metadata")
    return {"blocks": fs.join(meta, f"{container}.blocks"),
            "tree": fs.join(meta, f"{container}.tree"),
            "chunks": fs.join(replica, "chunks")}


def work_items(datanode: str, replica: str, container: int) -> List[Dict[str, Any]]:
    """The work items of one replica (read from its `.blocks` file): a BLOCK row per block
    and an ITEM row per chunk, or one ERROR row when the metadata is missing or corrupt."""
    p = _paths(replica, container)
    base = dict(datanode=datanode, replica=replica, container=container, block=None,
                offset=None, length=None, checksum_type=None, bytes_per_checksum=None,
                checksums=None, error=None, detail=None)
    # a REPLICA row always, so a replica with no blocks still reaches stage 3
    head = dict(base, kind="REPLICA")
    try:
        raw = fs.read_bytes(p["blocks"])
    except FileNotFoundError:
        return [head, dict(base, kind="ERROR", error=METADATA_MISSING,
                           detail="block-metadata file is missing")]
    try:
        meta = ContainerMeta.from_bytes(raw, p["blocks"])
        if meta.container_id != container:
            raise BlockMetaError(f"records container {meta.container_id}, expected "
                                 f"{container}", p["blocks"])
    except BlockMetaError as exc:
        reason = str(exc)[len(str(exc.path)) + 2:] if exc.path else str(exc)
        return [head, dict(base, kind="ERROR", error=METADATA_CORRUPT, detail=reason)]
    # the REPLICA row carries the recorded counts (block = blocks, offset = chunks), so
    # stage 3 needs no join for the summary
    out: List[Dict[str, Any]] = [dict(head, block=len(meta.blocks), offset=meta.n_chunks)]
    for b in meta.sorted_blocks():
        out.append(dict(base, kind="BLOCK", block=b.block_id))
        for c in b.chunks:
            out.append(dict(base, kind="ITEM", block=b.block_id, offset=c.offset,
                            length=c.length, checksum_type=c.checksum_type,
                            bytes_per_checksum=c.bytes_per_checksum, checksums=c.checksums))
    return out


def _items_fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in batches:
        rows: List[Dict[str, Any]] = []
        for dn, rep, cid in zip(b.column(0).to_pylist(), b.column(1).to_pylist(),
                                b.column(2).to_pylist()):
            rows.extend(work_items(dn, rep, cid))
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=_ITEM_SCHEMA)


@dataclass
class _Obs:
    length: int
    leaf: Optional[int]
    matches: bool
    error: Optional[str]
    detail: str = ""


def _verify(data: Any, got: int, length: int, ctype: int, bpc: int, stored: bytes) -> _Obs:
    """Check one chunk's bytes against its recorded window checksums (local scanner rules)."""
    if got == 0:
        return _Obs(0, None, False, MISSING_CHUNK,
                    f"no data (expected {length} bytes)")
    short = got < length
    if ctype == NONE or CHECKSUM_SIZES.get(ctype, 0) == 0:
        return _Obs(got, 0, not short, INCONSISTENT_CHUNK_LENGTH if short else None,
                    f"{got} of {length} bytes" if short else "")
    if ctype in (CRC32, CRC32C):
        alg = "crc32" if ctype == CRC32 else "crc32c"
        observed = merkle.checksum_windows(data, bpc, algorithm=alg)
        w = observed.shape[0]
        rec = np.frombuffer(stored, dtype=">u4", count=min(w, len(stored) // 4))
        mismatch = rec.shape[0] != w or bool(np.any(observed != rec))
        if not mismatch and not short:
            leaf = merkle.crc32c(stored)
        else:
            leaf = merkle.crc32c(observed.astype(">u4").tobytes())
    else:
        algo = "sha256" if ctype == SHA256 else "md5"
        mv = memoryview(data)
        obs = b"".join(hashlib.new(algo, mv[s:min(s + bpc, got)]).digest()
                       for s in range(0, got, bpc))
        mismatch = obs != stored[:len(obs)]
        leaf = merkle.crc32c(obs)
    if mismatch:
        return _Obs(got, leaf, False, CORRUPT_CHUNK, "window checksum mismatch" + (
            f" (short read: {got} of {length} bytes)" if short else ""))
    if short:
        return _Obs(got, leaf, False, INCONSISTENT_CHUNK_LENGTH, f"{got} of {length} bytes")
    return _Obs(got, leaf, True, None)


def _check_fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 2: read and verify work items; one open file per block file at a time."""
    cur_path: Optional[str] = None
    cur_file: Any = None
    cur_error: Optional[str] = None
    cur_detail = ""
    try:
        for b in batches:
            out: List[Dict[str, Any]] = []
            for r in b.to_pylist():
                base = dict(kind="CHUNK", datanode=r["datanode"], replica=r["replica"],
                            container=r["container"], block=r["block"], offset=r["offset"],
                            length=None, leaf=None, checksum_matches=None, bytes_read=0,
                            error=None, detail=None)
                if r["kind"] == "ERROR":
                    out.append(dict(base, kind="ERROR", error=r["error"], detail=r["detail"]))
                    continue
                if r["kind"] == "REPLICA":
                    out.append(dict(base, kind="REPLICA"))  # keeps block/offset = counts
                    continue
                path = fs.join(fs.join(r["replica"], "chunks"), f"{r['block']}.block")
                if path != cur_path:
                    if cur_file is not None:
                        cur_file.close()
                    cur_path, cur_file, cur_error = path, None, None
                    try:
                        filesystem, inner = fs.open_fs(path)
                        info = filesystem.get_file_info(inner)
                        if info.type.name == "NotFound":
                            cur_error = MISSING_DATA_FILE
                        else:
                            cur_file = filesystem.open_input_file(inner)
                    except OSError as exc:
                        cur_error = UNREADABLE_DATA_FILE
                        cur_detail = str(exc)
                if r["kind"] == "BLOCK":
                    if cur_error == MISSING_DATA_FILE:
                        out.append(dict(base, kind="ERROR", error=MISSING_DATA_FILE,
                                        offset=None,
                                        detail=f"{r['block']}.block does not exist"))
                    elif cur_error is not None:
                        out.append(dict(base, kind="ERROR", error=cur_error, offset=None,
                                        detail=cur_detail))
                    else:
                        out.append(dict(base, kind="BLOCK", offset=None))
                    continue
                if cur_error is not None:
                    continue  # the block is absent from the tree; its BLOCK row says why
                length = int(r["length"])
                if length == 0:
                    out.append(dict(base, length=0, leaf=merkle.crc32c(r["checksums"] or b""),
                                    checksum_matches=True))
                    continue
                try:
                    # read_buffer: bytes land in one Arrow buffer, checksummed in place
                    cur_file.seek(int(r["offset"]))
                    data = cur_file.read_buffer(length)
                except OSError as exc:
                    out.append(dict(base, kind="ERROR", error=UNREADABLE_DATA_FILE,
                                    detail=str(exc)))
                    continue
                got = data.size
                ob = _verify(data, got, length, int(r["checksum_type"]),
                             int(r["bytes_per_checksum"]), r["checksums"] or b"")
                if ob.error == MISSING_CHUNK:
                    ob.detail = f"no data at {r['offset']} (expected {length} bytes)"
                if ob.leaf is not None:
                    out.append(dict(base, length=ob.length, leaf=ob.leaf,
                                    checksum_matches=ob.matches, bytes_read=got))
                else:
                    out.append(dict(base, kind="READ", bytes_read=got))
                if ob.error:
                    out.append(dict(base, kind="ERROR", error=ob.error, detail=ob.detail))
            if out:
                yield pa.RecordBatch.from_pylist(out, schema=_OBS_SCHEMA)
    finally:
        if cur_file is not None:
            cur_file.close()


def _stored_tree(replica: str, container: int) -> Any:
    """(stored tree or None, error kind or None, detail) as the local scanner reads it."""
    p = _paths(replica, container)["tree"]
    try:
        raw = fs.read_bytes(p)
    except FileNotFoundError:
        return None, TREE_MISSING, f"{container}.tree does not exist"
    except OSError as exc:
        return None, TREE_CORRUPT, str(exc)
    try:
        tree = tree_from_bytes(raw, source=p)
    except TreeFileError as exc:
        return None, TREE_CORRUPT, exc.reason
    if tree.container_id != container:
        return None, TREE_CORRUPT, f"tree is of container {tree.container_id}"
    return tree, None, ""


def _obj_frame(rows: List[Dict[str, Any]], schema: str) -> pd.DataFrame:
    names = [c.split()[0] for c in schema.split(", ")]
    return pd.DataFrame({n: pd.Series([r.get(n) for r in rows], dtype=object) for n in names})


def _block_rows(datanode: str, replica: str, tree: Any) -> List[Dict[str, Any]]:
    """One row per block of a tree: its Ozone value, chunk count, bytes, health."""
    start = tree.block_chunk_start
    counts = np.diff(start)
    nbytes = np.add.reduceat(tree.chunk_length, start[:-1]) if tree.chunk_length.size else \
        np.zeros(counts.shape[0], dtype=np.int64)
    nbytes = np.where(counts > 0, nbytes, 0)  # reduceat repeats a value for empty segments
    bad = np.add.reduceat(~tree.chunk_matches, start[:-1]) if tree.chunk_matches.size else \
        np.zeros(counts.shape[0], dtype=np.int64)
    bad = np.where(counts > 0, bad, 0)
    return [dict(kind="BLOCKV", datanode=datanode, replica=replica,
                 container=tree.container_id, block=b, data_checksum=v, deleted=d,
                 chunks=n, length=nb, checksum_matches=not x)
            for b, v, d, n, nb, x in zip(tree.block_id.tolist(), tree.block_value.tolist(),
                                         tree.block_deleted.tolist(), counts.tolist(),
                                         nbytes.tolist(), bad.tolist())]


def _replica_rows(datanode: str, replica: str, container: int, tree: Any,
                  errors: List[Dict[str, Any]], blocks: int, chunks: int,
                  bytes_read: int) -> List[Dict[str, Any]]:
    rows: List[Dict[str, Any]] = []
    if tree is not None:
        t = tree_to_rows(datanode, tree, replica)
        rows.extend(dict(r, kind="CHUNK") for r in t.to_pylist())
        rows.extend(_block_rows(datanode, replica, tree))
    for e in errors:
        rows.append(dict(kind="ERROR", datanode=datanode, replica=replica, container=container,
                         block=e.get("block"), offset=e.get("offset"), error=e["error"],
                         detail=e.get("detail")))
    value = None if tree is None else tree.data_checksum
    rows.append(dict(kind="REPLICA", datanode=datanode, replica=replica, container=container,
                     data_checksum=value, ok=not errors, errors=len(errors), blocks=blocks,
                     chunks=chunks, bytes_read=bytes_read))
    return rows


def _merge_fn(pdf: pd.DataFrame) -> pd.DataFrame:
    """Stage 3 (one replica): scanned tree from observations, merged into the stored tree."""
    datanode = str(pdf["datanode"].iloc[0])
    replica = str(pdf["replica"].iloc[0])
    container = int(pdf["container"].iloc[0])
    kind = pdf["kind"].to_numpy(dtype=object)
    ch = pdf[kind == "CHUNK"]
    present = sorted(set(pdf.loc[kind == "BLOCK", "block"].astype(np.int64).tolist()))
    scanned = merkle.ContainerTree.from_columns(
        container, ch["block"].to_numpy(np.int64), ch["offset"].to_numpy(np.int64),
        ch["length"].to_numpy(np.int64), leaf=ch["leaf"].to_numpy(np.int64),
        checksum_matches=ch["checksum_matches"].to_numpy(bool), empty_blocks=present or None)
    stored, terr, tdetail = _stored_tree(replica, container)
    errors = []
    if terr:
        errors.append({"error": terr, "detail": tdetail})
    er = pdf[kind == "ERROR"]
    for _, e in er.iterrows():  # errors are few: one Python step each is fine
        errors.append({"error": e["error"], "detail": e["detail"],
                       "block": None if e["block_null"] else int(e["block"]),
                       "offset": None if e["offset_null"] else int(e["offset"])})
    merged = merkle.merge(stored, scanned)
    head = pdf[kind == "REPLICA"]
    n_blocks = int(head["block"].iloc[0]) if len(head) else 0
    n_chunks = int(head["offset"].iloc[0]) if len(head) else 0
    return _obj_frame(_replica_rows(datanode, replica, container, merged, errors,
                                    n_blocks, n_chunks, int(pdf["bytes_read"].sum())),
                      _OUT_SCHEMA)


def _trees_fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """trees_only: the stored `.tree` of each replica, no data read."""
    for b in batches:
        rows: List[Dict[str, Any]] = []
        for dn, rep, cid in zip(b.column(0).to_pylist(), b.column(1).to_pylist(),
                                b.column(2).to_pylist()):
            tree, err, detail = _stored_tree(rep, cid)
            errs = [{"error": err, "detail": detail}] if err else []
            rows.extend(_replica_rows(dn, rep, cid, tree, errs,
                                      0 if tree is None else int(tree.n_blocks),
                                      0 if tree is None else int(tree.n_chunks), 0))
        if rows:
            yield from pa.Table.from_pandas(_obj_frame(rows, _OUT_SCHEMA), preserve_index=False,
                                            schema=_OUT_ARROW).to_batches()


_OUT_ARROW = pa.schema([(c.split()[0], {"string": pa.string(), "long": pa.int64(),
                                        "boolean": pa.bool_()}[c.split()[1]])
                        for c in _OUT_SCHEMA.split(", ")])


@dataclass
class ScanTables:
    """The job's outputs as DataFrames, per replica: its chunks (spark_udfs.tables schema),
    its blocks (BLOCK_SCHEMA: Ozone block value, chunk count, health), the container
    (REPLICA_SCHEMA: container value, counts, bytes read, ok) and the scan errors."""

    chunks: Any
    blocks: Any
    containers: Any
    errors: Any

    #: the names of the Parquet tables `write` creates under its output directory
    TABLES = ("chunks", "blocks", "containers", "errors")

    @property
    def replicas(self) -> Any:
        """The per-replica container table (one row per replica)."""
        return self.containers

    def write(self, out: str, mode: str = "overwrite") -> Dict[str, str]:
        """Write the tables as Parquet under `out` (a local path or URI)."""
        paths = {n: fs.join(out, n) for n in self.TABLES}
        for n in self.TABLES:
            getattr(self, n).write.mode(mode).parquet(paths[n])
        return paths


def scan_replicas(spark: Any, roots: Sequence[str], trees_only: bool = False,
                  partitions: Optional[int] = None) -> ScanTables:
    """Plan the scan of every replica under `roots` (see the module docstring). Lazy apart
    from discovery; FileNotFoundError / ValueError for a bad root."""
    from pyspark.sql import functions as F

    replicas: List[fs.Replica] = []
    for r in roots:
        replicas.extend(fs.discover(r))
    seen = set()
    for r in replicas:
        if (r.datanode, r.container) in seen:
            raise ValueError(f"two replicas of container {r.container} on datanode "
                             f"{r.datanode!r} (a datanode holds one replica per container)")
        seen.add((r.datanode, r.container))
    n = partitions or max(1, min(len(replicas), spark.sparkContext.defaultParallelism * 4))
    rep_df = spark.createDataFrame([(r.datanode, r.path, r.container) for r in replicas],
                                   "datanode string, replica string, container long"
                                   ).repartition(n)
    if trees_only:
        out = rep_df.mapInArrow(_trees_fn, _OUT_SCHEMA)
    else:
        items = rep_df.mapInArrow(_items_fn, _spark_schema(_ITEM_SCHEMA))
        # one task reads a block file front to back (file state is kept per block file)
        # two tasks per core: enough to balance block files, few enough that per-task start-up
        # (a Python worker per task) stays small next to the reading
        n_read = partitions or max(1, spark.sparkContext.defaultParallelism * 2)
        ordered = items.repartition(n_read, "replica", "block").sortWithinPartitions(
            "replica", "block", "offset")
        obs = ordered.mapInArrow(_check_fn, _spark_schema(_OBS_SCHEMA))
        filled = obs.select(
            "kind", "datanode", "replica", "container",
            F.col("block").isNull().alias("block_null"),
            F.col("offset").isNull().alias("offset_null"),
            *[F.coalesce(F.col(c), F.lit(0)).alias(c)
              for c in ("block", "offset", "length", "leaf", "bytes_read")],
            F.coalesce(F.col("checksum_matches"), F.lit(False)).alias("checksum_matches"),
            "error", "detail")
        out = filled.groupBy("replica").applyInPandas(_merge_fn, _OUT_SCHEMA)
    out = out.cache()
    chunks = out.filter(F.col("kind") == "CHUNK").select(*CHUNK_COLUMNS)
    errors = out.filter(F.col("kind") == "ERROR").select(
        *[c.split()[0] for c in ERROR_SCHEMA.split(", ")])
    blocks = out.filter(F.col("kind") == "BLOCKV").select(
        "datanode", "replica", "container", "block",
        F.col("data_checksum").alias("block_value"), "deleted", "chunks",
        F.col("length").alias("bytes"), "checksum_matches")
    summary = out.filter(F.col("kind") == "REPLICA").select(
        *[c.split()[0] for c in REPLICA_SCHEMA.split(", ")])
    return ScanTables(chunks=chunks, blocks=blocks, containers=summary, errors=errors)

