"""`crcmerkle scan BOOKIE_DIR... --ledger-metadata PATH --emit URI`: one bookie host's part of
the BookKeeper scan, written by that host without Spark (pyarrow only), for operators who
cannot run Spark workers on their bookies; `crcmerkle spark report URI --ledger-metadata
PATH` then judges every host's rows together.

A bookie's copies can only be judged with the other bookies' (an entry's write set spans
hosts), so what a host emits is the data-local task's stage-1 rows (host_batches: every
stored copy verified, the listing and cookie findings, one row per ledger directory and per
bookie), as Parquet under

    <URI>/bookkeeper/emitted_by=<host>/emit-<host>_bookies.parquet

one file per host, in the stage's union schema (a `kind` column tells the rows apart),
written as spark_udfs.tables.emit writes the datanodes' files: under a hidden temporary name
and renamed (one upload on an object store), every local file reached from its directory's
descriptor, a re-run replacing that host's file and removing its older ones, other hosts'
files never touched. The reader (read_emitted + judge_hosts) applies the checks across hosts
of the data-local scan, and those of the inventory when one is given: a host that emitted
nothing is NOT_SCANNED, a bookie the inventory does not put on its host is WRONG_BOOKIE.

Memory: rows go to the file a row group at a time (ROW_GROUP_BYTES).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from merkle.replica.bookkeeper.findings import Finding
from merkle.replica.bookkeeper.metadata import LedgerMetadata
from spark_udfs.jobs.bookkeeper import _STAGE1, _arrow
from spark_udfs.jobs.bookkeeper.hosts import host_batches
from spark_udfs.tables.emit import (
    FILE_PREFIX,
    _output,
    _remove_stale,
    _TableFile,
    host_key,
)

__all__ = ["EMIT_TABLE", "PARTITION", "BookieEmit", "emit_bookies", "read_emitted"]

#: the table directory under URI, and its partition column (the emitting host)
EMIT_TABLE = "bookkeeper"
PARTITION = "emitted_by"


@dataclass
class BookieEmit:
    """What a host's emit did: its file, the older files of this host it removed, and what
    the summary line and the exit status need (counted from the rows written)."""

    written: List[str] = field(default_factory=list)
    removed: List[str] = field(default_factory=list)
    bookies: List[str] = field(default_factory=list)
    directories: int = 0
    failed_directories: int = 0
    copies: int = 0
    #: copies whose digest was checked (their ledger's metadata known): what proves anything
    verified: int = 0
    good_copies: int = 0
    findings: int = 0
    failed: List[str] = field(default_factory=list)
    bytes_read: int = 0
    #: this host's findings as written (its copies not yet judged with the other hosts')
    found: List[Finding] = field(default_factory=list)


def _count(res: BookieEmit, t: pa.Table) -> None:
    kind = t.column("kind")
    for k in pc.unique(kind).to_pylist():
        part = t.filter(pc.equal(kind, k))
        if k == "COPY":
            res.copies += part.num_rows
            res.verified += int(pc.sum(pc.cast(part.column("verified"), pa.int64())).as_py() or 0)
            good = pc.and_(
                pc.and_(part.column("frame_ok"), part.column("digest_ok")),
                part.column("verified"),
            )
            res.good_copies += int(
                pc.sum(pc.cast(pc.fill_null(good, False), pa.int64())).as_py() or 0
            )
        elif k == "TALLY":
            res.findings += int(pc.sum(part.column("findings")).as_py() or 0)
        elif k == "VOLUME":
            res.directories += part.num_rows
            res.failed_directories += sum(s != "SCANNED" for s in part.column("status").to_pylist())
            res.bytes_read += int(pc.sum(part.column("bytes_read")).as_py() or 0)
        elif k == "FAILED":
            res.failed += [str(x) for x in part.column("detail").to_pylist()]
        elif k == "LISTING":
            res.bookies += part.column("bookie").to_pylist()
        elif k == "FINDING":
            cols = ("error", "detail", "bookie", "ledger", "entry", "file", "offset", "read_at")
            for r in part.select(list(cols)).to_pylist():
                res.found.append(Finding(r.pop("error"), r.pop("detail") or "", **r))


def emit_bookies(
    paths: Sequence[str],
    uri: str,
    host: str,
    metadata: Dict[int, LedgerMetadata],
    *,
    instance_id: Optional[str] = None,
    registered_cookies: Optional[Dict[str, bytes]] = None,
    also: Sequence[str] = (),
    states: Optional[Any] = None,
    pace: Optional[Any] = None,
    threads: int = 1,
) -> BookieEmit:
    """Verify this host's bookies under `paths` and write their stage-1 rows under `uri`
    (see the module docstring). An error writing the output raises OSError (the temporary
    file removed: nothing of this run is left behind). `states` (--state): the entry logs'
    records (merkle.replica.bookkeeper.state): a log unchanged and fresh is not read again.
    `pace`: ScanReport.pace (--bytes-per-second); `threads`: the storages verified at once
    (host_batches)."""
    res = BookieEmit()
    out = _output(uri)
    try:
        name = f"{FILE_PREFIX}{host_key(host)}_bookies.parquet"
        f = _TableFile(out, EMIT_TABLE, host, name, schema=_arrow(_STAGE1), partition=PARTITION)
        try:
            for b in host_batches(
                host,
                list(paths),
                None,
                metadata,
                instance_id,
                registered_cookies,
                also=also,
                states=states,
                pace=pace,
                threads=threads,
            ):
                t = pa.Table.from_batches([b])
                _count(res, t)
                f.add(t)
            res.written.append(f.close())
        except BaseException:
            f.abandon()
            raise
        res.removed = _remove_stale(out, host, res.written, [EMIT_TABLE])
        res.written = [out.show(p) for p in res.written]
        res.removed = [out.show(p) for p in res.removed]
    finally:
        out.close()
    return res


def read_emitted(spark: Any, location: str) -> Any:
    """Every host's emitted rows under `location` as one DataFrame of the stage's schema
    (the partition directories are not read as a column: the rows carry their host)."""
    from spark_udfs.uri import child

    return (
        spark.read.option("recursiveFileLookup", "true")
        .schema(_STAGE1)
        .parquet(child(location, EMIT_TABLE))
    )
