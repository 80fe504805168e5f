"""The BookKeeper scan job: verify bookies' ledger storages on executors, then judge every
ledger on executors grouped by ledger, with the rules of the local scan.

The driver only lists the bookies (merkle.replica.bookkeeper.scan.list_bookies: their cookies
and directory listings, which is where the cookie findings come from) and hands out one work
item per ledger storage (a DbLedgerStorage directory, or all of a bookie's Interleaved/Sorted
directories: one entry logger spreads its logs over them, so they cannot be read apart). Stage
1, one task per storage, runs scan_storage: the index, then every entry log verified natively;
it returns one row per stored entry copy (COPY), its findings (FINDING), one row per ledger
directory (VOLUME) and the paths it could not read (FAILED), as Arrow batches.

Stage 2 judges the ledgers: the copies, plus one marker row per ledger of the metadata (a
ledger no bookie holds is judged too: every copy MISSING), grouped by ledger (repartitioned
by ledger and sorted, then mapInArrow over each ledger's run of rows: what
groupBy("ledger").applyInArrow does, which PySpark 3.5 lacks), each group calling
judge_ledger (or judge_unknown_ledger for a ledger the metadata lacks) with the metadata and
the Coverage broadcast. The bookie-wide check needs every ledger: each group returns
per-bookie counts (COUNT) and its MISSING_ENTRY findings held back (MISSING); the driver
sums the counts (one row per bookie) and holds_nothing picks the bookies whose MISSING_ENTRY
findings become one BOOKIE_HOLDS_NOTHING.

The rules are the local scan's functions, called by both: the two cannot disagree. Entry
copies never reach the driver, only findings, counts and one row per directory and bookie.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from merkle.replica.bookkeeper.bookies import LedgerDir
from merkle.replica.bookkeeper.copies import COPY_ARROW
from merkle.replica.bookkeeper.metadata import LedgerMetadata
from merkle.replica.bookkeeper.scan import (
    MISSING_ENTRY,
    Finding,
    Listing,
    StorageScan,
)
from merkle.replica.levels import WARNING, severity_of
from merkle.replica.uri import join

__all__ = [
    "COPY_SCHEMA",
    "ENTRY_SCHEMA",
    "FINDING_SCHEMA",
    "LEDGER_SCHEMA",
    "BookieTables",
    "LISTING_SCHEMA",
    "META_FILE",
    "SCAN_FORMAT",
    "VOLUME_SCHEMA",
    "Stage1View",
    "judge_stage1",
    "scan_bookkeeper",
    "storage_batches",
]

#: one row per stored entry copy, as its index names it, and what verifying it found
#: (merkle.replica.bookkeeper.copies.COPY_ARROW, which the scan builds its batches in)
COPY_SCHEMA = (
    "bookie string, ledger long, entry long, file string, offset long, size long, "
    "frame_ok boolean, digest_ok boolean, verified boolean, stored_digest string, "
    "payload_crc32c long, last_add_confirmed long, problem string, "
    "also_crc64nvme binary, also_crc32c binary, also_crc32 binary, indexed boolean"
)
#: every finding, with the local scan's fields (its JSON's `error` is the kind; `read_at`:
#: when its data was read, for one a --state record gave, else null)
FINDING_SCHEMA = (
    "error string, severity string, bookie string, ledger long, entry long, file string, "
    "offset long, detail string, read_at double"
)
#: one row per ledger directory: its bookie, its index directory when apart, its storage
#: kind when its index was read, `status` SCANNED (its index read) or VOLUME_FAILED
#: (`detail` says why), the entry copies it holds (and how many are good), and the bytes the
#: storage's task read with its seconds and the CPU seconds of its scan (its Python worker's;
#: in a data-local task, the thread's that verified it) (on the storage's first directory;
#: an Interleaved storage's task reads all of its bookie's directories: 0 on the others),
#: and the host a data-local scan read it on
VOLUME_SCHEMA = (
    "bookie string, directory string, index_directory string, storage string, "
    "status string, detail string, copies long, good_copies long, bytes_read long, "
    "seconds double, host string, cpu_seconds double"
)
#: one row per ledger of the metadata: the local scan's ledger summary (good_copies: how
#: many entries have each count of good copies); a census's (`census` true) counts indexed
#: copies instead (indexed_copies, without_indexed_copy; good_copies and without_good_copy
#: null: no copy was verified)
LEDGER_SCHEMA = (
    "ledger long, state string, digest_type string, last_entry_id long, checked_up_to long, "
    "ensemble_size long, write_quorum long, ack_quorum long, "
    "good_copies map<string,bigint>, below_ack_quorum array<bigint>, "
    "without_good_copy array<bigint>, census boolean, indexed_copies map<string,bigint>, "
    "without_indexed_copy array<bigint>"
)
#: one row per entry of a ledger of the metadata (0 to the last it was checked up to): its
#: write set and the bookies of it that hold a good copy; what `spark plan --decommission`
#: counts (spark_udfs.jobs.bookkeeper.plan)
ENTRY_SCHEMA = "ledger long, entry long, write_set array<string>, good array<string>"

#: a data-local task's one row per bookie it listed (spark_udfs.jobs.bookkeeper.hosts): where it
#: ran, what Coverage needs of it (numDirs by its cookie, the cookie positions of the
#: directories whose index was read, whether its storage is DbLedgerStorage; `covered` False
#: when no index of it was read) and its cookie's instanceId, for the driver's checks across
#: hosts
LISTING_SCHEMA = (
    "bookie string, host string, num_dirs long, positions array<bigint>, db boolean, "
    "covered boolean, instance_id string, cookie_file string"
)

#: the scan's summary beside its tables (what the driver knows whole): its presence makes a
#: directory a bookie scan (`spark report`, `spark plan`)
META_FILE = "bookkeeper.json"
SCAN_FORMAT = "crcmerkle-bookkeeper-scan/1"

#: copy rows per Arrow batch a stage-1 task yields: a storage of millions of entries goes out
#: in bounded batches, not as one table built from millions of rows at once
COPIES_PER_BATCH = 65536

SCANNED = "SCANNED"
VOLUME_FAILED = "VOLUME_FAILED"

_SPARK_TYPES = {
    "string": pa.string(),
    "long": pa.int64(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
    "map<string,bigint>": pa.map_(pa.string(), pa.int64()),
    "array<bigint>": pa.list_(pa.int64()),
    "array<string>": pa.list_(pa.string()),
    "binary": pa.binary(),
}


def _fields(schema: str) -> List[Tuple[str, str]]:
    out = []
    for part in schema.split(", "):
        name, kind = part.strip().split(" ", 1)
        out.append((name, kind))
    return out


def _union(*schemas: str) -> str:
    """`kind string` and every column of `schemas` once (the first type wins)."""
    seen: Dict[str, str] = {"kind": "string"}
    for schema in schemas:
        for name, kind in _fields(schema):
            seen.setdefault(name, kind)
    return ", ".join(f"{n} {k}" for n, k in seen.items())


#: each task's counts (TALLY): its findings and warnings (and stage 1's verified copies, stage
#: 2's copies a census placed: the summary's indexed_copies, a name the ledgers' map column
#: has in the same union schema), so that the summary comes with the collects the job makes
#: anyway, not from extra jobs
_TALLY = "findings long, warnings long, verified_copies long, placed_copies long"
#: stage 1's rows (COPY, FINDING, VOLUME, FAILED, TALLY) and stage 2's (FINDING, MISSING,
#: LEDGER, TALLY, and COUNT: per bookie, the entry copies its write sets give it, those it
#: holds and its MISSING rows), told apart by `kind`
_STAGE1 = _union(COPY_SCHEMA, FINDING_SCHEMA, VOLUME_SCHEMA, _TALLY, LISTING_SCHEMA)
_STAGE2 = _union(
    FINDING_SCHEMA, LEDGER_SCHEMA, ENTRY_SCHEMA, _TALLY, "expected long, held long, missing long"
)


def _arrow(schema: str) -> pa.Schema:
    return pa.schema([(n, _SPARK_TYPES[k]) for n, k in _fields(schema)])


def _names(schema: str) -> List[str]:
    return [n for n, _ in _fields(schema)]


def _table(schema: pa.Schema, kind: str, rows: List[Dict[str, Any]]) -> pa.Table:
    """Rows of one kind (dicts of some columns) as a table of the whole stage's schema."""
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema if f.name != "kind"}
    cols["kind"] = [kind] * len(rows)
    return pa.Table.from_pydict({f.name: cols[f.name] for f in schema}, schema=schema)


def _finding_row(f: Finding) -> Dict[str, Any]:
    return f.to_dict()  # error, severity, bookie, ledger, entry, file, offset, detail


def _tally(found: List[Finding], **more: int) -> Dict[str, int]:
    return dict(findings=len(found), warnings=sum(f.severity == WARNING for f in found), **more)


def _volume_rows(
    ds: List[LedgerDir],
    part: StorageScan,
    seconds: float,
    host: Optional[str] = None,
    cpu_seconds: float = 0.0,
    note: Optional[str] = None,
) -> List[Dict[str, Any]]:
    failed = {f["path"]: f["error"] for f in part.report.failed}
    copies = part.report.copies.table()
    good = pc.and_(pc.and_(copies["frame_ok"], copies["digest_ok"]), copies["verified"])
    rows = []
    for i, d in enumerate(ds):
        mine = pc.starts_with(copies["file"], d.current + "/")
        rows.append(
            {
                "bookie": part.bookie,
                "directory": d.path,
                "index_directory": d.index_path,
                "storage": part.read.get(d.path),
                "status": SCANNED if d.path in part.read else VOLUME_FAILED,
                "detail": failed.get(d.path)
                or (note if d.path in part.read else "its index could not be read"),
                "copies": _count(mine),
                "good_copies": _count(pc.and_(mine, good)),
                "bytes_read": part.report.bytes_read if i == 0 else 0,
                "seconds": seconds if i == 0 else 0.0,
                "host": host,
                "cpu_seconds": cpu_seconds if i == 0 else 0.0,
            }
        )
    return rows


def _count(mask: Any) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def _stage_batch(schema: pa.Schema, kind: str, batch: Any, **values: Any) -> pa.RecordBatch:
    """Rows of one kind (`batch`: a table or batch of some of the stage's columns) as a
    batch of the whole stage's schema: the other columns null, or `values` on every row."""
    n = batch.num_rows
    arrays = []
    for f in schema:
        if f.name == "kind":
            arrays.append(pa.repeat(pa.scalar(kind, pa.string()), n))
        elif f.name in batch.column_names:
            col = batch.column(f.name)
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            arrays.append(col.cast(f.type))
        elif values.get(f.name) is not None:
            arrays.append(pa.repeat(pa.scalar(values[f.name], f.type), n))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _storage_fn(
    storages: Any,
    metadata: Any,
    per_batch: int = COPIES_PER_BATCH,
    also: Sequence[str] = (),
    metadata_only: bool = False,
    bytes_per_second: Optional[float] = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Stage 1's mapInArrow function: each work item (an index into the broadcast list of
    storages) verified by scan_storage (its census with `metadata_only`), its results as rows
    (copies `per_batch` a batch); `bytes_per_second`: each ledger directory's read rate in
    its task."""
    schema = _arrow(_STAGE1)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from merkle.replica.bookkeeper.scan import scan_storage
        from merkle.replica.results import volume_pace

        pace = None if metadata_only or not bytes_per_second else volume_pace(bytes_per_second)
        for batch in batches:
            for i in batch.column(0).to_pylist():
                bookie, ds = storages.value[i]
                t0, c0 = time.perf_counter(), time.process_time()
                part = scan_storage(ds, bookie, metadata.value, also, metadata_only, pace=pace)
                yield from storage_batches(
                    schema,
                    ds,
                    part,
                    time.perf_counter() - t0,
                    per_batch,
                    cpu_seconds=time.process_time() - c0,
                )

    return run


def storage_batches(
    schema: pa.Schema,
    ds: List[LedgerDir],
    part: StorageScan,
    seconds: float,
    per_batch: int = COPIES_PER_BATCH,
    host: Optional[str] = None,
    cpu_seconds: float = 0.0,
    note: Optional[str] = None,
) -> Iterator[pa.RecordBatch]:
    """Stage 1's rows of one verified storage (`part`, of directories `ds`): its copies
    `per_batch` a batch, its tally, findings, directories and the paths it could not read;
    every row with `host` when a data-local task read it."""
    found = part.report.findings + part.wrong_dir
    verified = part.report.copies.count("verified")
    copies = part.report.copies.table()
    for start in range(0, copies.num_rows, per_batch):
        yield _stage_batch(schema, "COPY", copies.slice(start, per_batch), host=host)
    for kind, rows in (
        ("TALLY", [_tally(found, verified_copies=verified)]),
        ("FINDING", [_finding_row(f) for f in found]),
        ("VOLUME", _volume_rows(ds, part, seconds, host, cpu_seconds, note)),
        ("FAILED", [{"file": f["path"], "detail": f["error"]} for f in part.report.failed]),
    ):
        if rows:
            yield from _table(schema, kind, rows).to_batches()


def _ledger_fn(
    metadata: Any, coverage: Any, unread: Dict[int, str], complete: bool, census: bool = False
) -> Callable[[pa.Table], pa.Table]:
    """Stage 2's per-ledger function (`_per_ledger` feeds it): one ledger's copies (from
    every bookie) judged by judge_ledger / judge_unknown_ledger (a census's with `census`)."""
    schema = _arrow(_STAGE2)

    def run(group: pa.Table) -> pa.Table:
        from merkle.replica.bookkeeper.scan import judge_ledger, judge_unknown_ledger

        lid = int(group.column("ledger")[0].as_py())
        copies = group.filter(pc.is_valid(group.column("bookie"))).select(COPY_ARROW.names)
        meta: Optional[LedgerMetadata] = metadata.value.get(lid)
        if meta is None:
            found = judge_unknown_ledger(lid, copies, unread, complete)
            return pa.concat_tables(
                [
                    _table(schema, "FINDING", [_finding_row(f) for f in found]),
                    _table(schema, "TALLY", [_tally(found)]),
                ]
            )
        verdict = judge_ledger(lid, meta, copies, coverage.value, entries=True, census=census)
        summary = dict(verdict.summary)
        counted = "indexed_copies" if census else "good_copies"
        summary[counted] = list(summary[counted].items())
        counts = [
            {
                "bookie": b,
                "expected": n,
                "held": verdict.held.get(b, 0),
                "missing": len(verdict.missing.get(b, [])),
            }
            for b, n in sorted(verdict.expected.items())
        ]
        missing = [f for b in sorted(verdict.missing) for f in verdict.missing[b]]
        return pa.concat_tables(
            [
                _table(schema, "FINDING", [_finding_row(f) for f in verdict.findings]),
                _table(schema, "MISSING", [_finding_row(f) for f in missing]),
                _table(schema, "LEDGER", [summary]),
                _entry_table(schema, lid, verdict.entries),
                _table(schema, "COUNT", counts),
                _table(
                    schema,
                    "TALLY",
                    # a census's copies of the ledgers the metadata has: what it placed
                    [_tally(verdict.findings, placed_copies=_count(copies["indexed"]))],
                ),
            ]
        )

    return run


def _entry_table(schema: pa.Schema, lid: int, entries: Optional[pa.Table]) -> pa.Table:
    """A ledger's ENTRY rows (judge_ledger's columns: a ledger may have millions)."""
    assert entries is not None
    return pa.Table.from_batches(
        [_stage_batch(schema, "ENTRY", b, ledger=lid) for b in entries.to_batches()], schema
    )


def _per_ledger(
    judge: Callable[[pa.Table], pa.Table],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A mapInArrow function over a partition sorted by ledger: each ledger's rows, which may
    span batches, are given to `judge` as one table (groupBy().applyInArrow is PySpark 4's;
    this is the same on 3.5). One ledger's rows are held at a time, as applyInArrow holds a
    group."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: List[pa.RecordBatch] = []
        current: Optional[int] = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ledgers = batch.column("ledger").to_numpy(zero_copy_only=False)
            cuts = (np.flatnonzero(ledgers[1:] != ledgers[:-1]) + 1).tolist()
            for start, end in zip([0, *cuts], [*cuts, len(ledgers)]):
                lid = int(ledgers[start])
                if current is not None and lid != current:
                    yield from judge(pa.Table.from_batches(pending)).to_batches()
                    pending = []
                current = lid
                pending.append(batch.slice(start, end - start))
        if pending:
            yield from judge(pa.Table.from_batches(pending)).to_batches()

    return run


@dataclass
class BookieTables:
    """The job's outputs: `copies`, `findings`, `volumes` and `ledgers` DataFrames (the
    schemas above), and what the driver knows whole (small): the bookies and their
    directories, the paths not read, and the counts of the summary."""

    copies: Any
    findings: Any
    volumes: Any
    ledgers: Any
    entries: Any
    bookies: Dict[str, List[str]]
    failed: List[Dict[str, str]]
    summary: Dict[str, Any]
    #: bookie ID -> the inventory host it was read on (a data-local scan), else empty
    hosts: Dict[str, str] = field(default_factory=dict)

    TABLES = ("copies", "findings", "volumes", "ledgers", "entries")

    def document(self, paths: List[str], problems: List[str]) -> Dict[str, Any]:
        """META_FILE's document: the scanned `paths`, the bookies and their directories,
        the paths not read, the metadata's `problems` and the summary counts."""
        return {
            "format": SCAN_FORMAT,
            "paths": list(paths),
            "bookies": self.bookies,
            "hosts": self.hosts,
            "failed": self.failed,
            "metadata_problems": list(problems),
            "summary": self.summary,
        }

    def write(self, out: str) -> Dict[str, str]:
        """Each table as Parquet under `out` (few files: the rows of a table are few, but
        for copies and entries, whose files follow the tasks)."""
        paths = {n: join(out, n) for n in self.TABLES}
        for n in self.TABLES:
            df = getattr(self, n)
            if n not in ("copies", "entries"):
                df = df.coalesce(1)
            df.write.mode("overwrite").parquet(paths[n])
        return paths


def _select(df: Any, schema: str) -> Any:
    return df.select(*_names(schema))


def scan_bookkeeper(
    spark: Any,
    listing: Listing,
    metadata: Dict[int, LedgerMetadata],
    *,
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
    also: Sequence[str] = (),
    metadata_only: bool = False,
    bytes_per_second: Optional[float] = None,
) -> BookieTables:
    """Scan the bookies of `listing` (list_bookies, on the driver) against `metadata`: the
    two stages of the module's docstring. Returns the tables (lazy, but the stages' outputs
    cached) and the summary counts. `also`: the payload CRCs the copies carry besides
    CRC-32C (the copies table's also_* columns, compared across copies). `metadata_only`:
    the census (merkle.replica.bookkeeper.scan.scan_bookies'), no entry read.
    `bytes_per_second`: each ledger directory's read rate (--bytes-per-second)."""
    from pyspark.sql import functions as F

    from merkle.replica.bookkeeper.scan import coverage_of

    t0 = time.perf_counter()
    sc = spark.sparkContext
    storages = listing.storages()
    meta_bc = sc.broadcast(metadata)
    stage1 = (
        spark.range(0, len(storages), numPartitions=max(1, len(storages)))
        .mapInArrow(
            _storage_fn(
                sc.broadcast(storages),
                meta_bc,
                also=tuple(also),
                metadata_only=metadata_only,
                bytes_per_second=bytes_per_second,
            ),
            _STAGE1,
        )
        .cache()
    )
    small = stage1.filter(F.col("kind").isin("VOLUME", "FAILED", "TALLY")).collect()
    read = {r["directory"]: r["storage"] for r in small if r["status"] == SCANNED}
    return judge_stage1(
        spark,
        stage1,
        small,
        metadata,
        meta_bc,
        Stage1View(
            coverage=coverage_of(listing.by_bookie, read),
            findings=list(listing.report.findings),
            failed=list(listing.report.failed),
            bookies=dict(listing.report.bookies),
            tasks=len(storages),
        ),
        unread=unread,
        metadata_complete=metadata_complete,
        t0=t0,
        census=metadata_only,
    )


@dataclass
class Stage1View:
    """What the driver knows of stage 1 besides its rows: the Coverage of the directories
    whose index was read, the findings and unread paths it made itself (the listing's, or a
    data-local scan's checks across hosts), the bookies with their directories, the tasks
    run, and the (host, bookie) pairs whose copies must not be compared (`excluded`: a
    bookie ID claimed on two hosts)."""

    coverage: Any
    findings: List[Finding]
    failed: List[Dict[str, str]]
    bookies: Dict[str, List[str]]
    tasks: int
    excluded: List[Tuple[str, str]] = field(default_factory=list)
    #: a data-local scan's (host, bookie) pairs as "host NUL bookie" whose copy rows count
    #: (each bookie as its own host listed it); None: every row not `excluded` (listed paths)
    counted: Optional[List[str]] = None
    #: bookie ID -> host, for a data-local scan (META_FILE's `hosts`)
    hosts: Dict[str, str] = field(default_factory=dict)
    #: volume rows the driver made (hosts without an executor...), VOLUME_SCHEMA dicts
    volumes: List[Dict[str, Any]] = field(default_factory=list)


def judge_stage1(
    spark: Any,
    stage1: Any,
    small: List[Any],
    metadata: Dict[int, LedgerMetadata],
    meta_bc: Any,
    view: Stage1View,
    *,
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
    t0: Optional[float] = None,
    census: bool = False,
) -> BookieTables:
    """Stage 2 and the summary over a stage 1 (`stage1`, cached, with `small` its VOLUME,
    FAILED and TALLY rows collected): the ledgers judged grouped by ledger, the bookie-wide
    check, the findings and tables. Shared by the scan of listed paths and the data-local
    scan of an inventory's hosts (spark_udfs.jobs.bookkeeper.hosts). `census`: stage 1 is a
    census's (Copy.indexed), judged as one."""
    from pyspark.sql import functions as F

    from merkle.replica.bookkeeper.scan import holds_nothing

    t0 = time.perf_counter() if t0 is None else t0
    sc = spark.sparkContext
    failed = list(view.failed) + [
        {"path": r["file"], "error": r["detail"]} for r in small if r["kind"] == "FAILED"
    ]
    kind = F.col("kind")
    copy_rows = stage1.filter(kind == "COPY")
    pair = F.concat_ws("\0", F.col("host"), F.col("bookie"))
    if view.excluded:
        copy_rows = copy_rows.filter(~pair.isin(sorted("\0".join(k) for k in view.excluded)))
    if view.counted is not None:
        copy_rows = copy_rows.filter(pair.isin(view.counted))
    copies = _select(copy_rows, COPY_SCHEMA)
    markers = spark.createDataFrame([(int(lid),) for lid in sorted(metadata)], "ledger long")
    stage2 = (
        copies.unionByName(markers, allowMissingColumns=True)
        .repartition("ledger")
        .sortWithinPartitions("ledger", "bookie", "file", "offset")
        .mapInArrow(
            _per_ledger(
                _ledger_fn(
                    meta_bc,
                    sc.broadcast(view.coverage),
                    dict(unread or {}),
                    metadata_complete,
                    census,
                )
            ),
            _STAGE2,
        )
        .cache()
    )
    counts = (
        stage2.filter(kind.isin("COUNT", "TALLY"))
        .groupBy("kind", "bookie")
        .agg(*(F.sum(c).alias(c) for c in ("expected", "held", "missing", *_names(_TALLY))))
        .collect()
    )
    per_bookie = [r for r in counts if r["kind"] == "COUNT"]
    nothing = holds_nothing(
        {r["bookie"]: int(r["expected"]) for r in per_bookie},
        {r["bookie"]: int(r["held"]) for r in per_bookie},
    )
    driver_found = list(view.findings) + list(nothing.values())
    findings = (
        spark.createDataFrame(
            [tuple(_finding_row(f).values()) for f in driver_found], FINDING_SCHEMA
        )
        .unionByName(_select(stage1.filter(kind == "FINDING"), FINDING_SCHEMA))
        .unionByName(
            _select(
                stage2.filter(
                    (kind == "FINDING") | ((kind == "MISSING") & ~F.col("bookie").isin(*nothing))
                ),
                FINDING_SCHEMA,
            )
        )
    )
    tallies = [r for r in small if r["kind"] == "TALLY"] + [
        r for r in counts if r["kind"] == "TALLY"
    ]
    missing = sum(int(r["missing"]) for r in per_bookie if r["bookie"] not in nothing)
    missing_warns = missing if severity_of(MISSING_ENTRY) == WARNING else 0
    vols = [r for r in small if r["kind"] == "VOLUME"]
    n_found = len(driver_found) + missing + sum(int(r["findings"] or 0) for r in tallies)
    warnings = (
        sum(f.severity == WARNING for f in driver_found)
        + missing_warns
        + sum(int(r["warnings"] or 0) for r in tallies)
    )
    summary = {
        "bookies": len(view.bookies),
        "ledger_dirs": sum(len(v) for v in view.bookies.values()),
        "ledgers": len(metadata),
        "copies": sum(int(r["copies"] or 0) for r in vols),
        "good_copies": sum(int(r["good_copies"] or 0) for r in vols),
        "verified_copies": sum(
            int(r["verified_copies"] or 0) for r in small if r["kind"] == "TALLY"
        ),
        "census": census,
        # of the ledgers the metadata has (stage 2's tallies): what a census placed
        "indexed_copies": sum(int(r["placed_copies"] or 0) for r in counts if r["kind"] == "TALLY"),
        "findings": n_found,
        "errors": n_found - warnings,
        "warnings": warnings,
        "failed": len(failed),
        "bytes_read": sum(int(r["bytes_read"] or 0) for r in vols),
        "seconds": round(time.perf_counter() - t0, 6),
        "tasks": view.tasks,
    }
    volumes = _select(stage1.filter(kind == "VOLUME"), VOLUME_SCHEMA)
    if view.volumes:
        names = _names(VOLUME_SCHEMA)
        volumes = volumes.unionByName(
            spark.createDataFrame(
                [tuple(v.get(n) for n in names) for v in view.volumes], VOLUME_SCHEMA
            )
        )
    return BookieTables(
        copies=copies,
        findings=findings,
        volumes=volumes,
        ledgers=_select(stage2.filter(kind == "LEDGER"), LEDGER_SCHEMA),
        entries=_select(stage2.filter(kind == "ENTRY"), ENTRY_SCHEMA),
        bookies=dict(view.bookies),
        failed=failed,
        summary=summary,
        hosts=dict(view.hosts),
    )
