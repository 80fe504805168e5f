"""Scan HDFS datanode storage directories: every replica's every chunk verified, the
replicas of each block compared, and (with the NameNode's view, `--fsck FILE`) each block's
expected replicas checked.

`scan_datanodes(paths, fsck=None)` reads each storage directory found under `paths`
(merkle.replica.hdfs.storage), walks its block pools (.blocks), checks every replica's chunks
(.verify), then judges the replicas together:

- a bad chunk is named by what the other replicas of the block (same ID and genstamp) say:
  its data equal to theirs under a stored CRC that differs is META_ROT (the data is good; a
  file checksum computed from this replica's CRCs lies), its stored CRC equal to theirs over
  data that differs is DATA_ROT, and with no replica to compare it is CORRUPT_CHUNK;
- a replica with a genstamp below the block's newest (or fsck's) is STALE_REPLICA: it passes
  its own CRCs and is still wrong (it missed an append or a recovery);
- replicas that each verify but whose stored CRCs differ hold different bytes
  (REPLICAS_DIFFER), as do finalized ones of one genstamp with different lengths;
- an open replica (`rbw/`) is REPLICA_OPEN, verified up to its last complete chunk;
- with fsck: a replica fsck places on a scanned volume that lacks it (REPLICA_MISSING), a
  replica no file owns (REPLICA_NOT_IN_FSCK), a block with fewer verified replicas of its
  genstamp than its replication (UNDER_REPLICATED, counting only replicas this scan
  verified; BLOCK_UNVERIFIED while some of its locations were not scanned).

Everything is read-only; findings carry the datanode, the volume's storage ID, the block
pool, block, genstamp, file, chunk and byte offset, and (with fsck) the HDFS path.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from merkle.replica.hdfs.blocks import FINALIZED, RBW, BlockFinding, Replica, walk_block_pool
from merkle.replica.hdfs.fsck import FsckView
from merkle.replica.hdfs.storage import DataDir, find_data_dirs, read_data_dir
from merkle.replica.hdfs.verify import WINDOW_BYTES, ChunkCheck, chunk_crcs, verify_replica
from merkle.replica.levels import severity_of
from merkle.replica.safeopen import open_dir, open_dir_chain

__all__ = [
    "HdfsFinding",
    "HdfsReport",
    "ScannedReplica",
    "scan_datanodes",
]

#: every kind of finding an HDFS scan makes (merkle.replica.levels gives each its level; the
#: walk and the chunk check name theirs by these same strings)
DATA_ROT = "DATA_ROT"
META_ROT = "META_ROT"
CORRUPT_CHUNK = "CORRUPT_CHUNK"
STALE_REPLICA = "STALE_REPLICA"
REPLICAS_DIFFER = "REPLICAS_DIFFER"
REPLICA_OPEN = "REPLICA_OPEN"
REPLICA_MISSING = "REPLICA_MISSING"
REPLICA_NOT_IN_FSCK = "REPLICA_NOT_IN_FSCK"
UNDER_REPLICATED = "UNDER_REPLICATED"
BLOCK_UNVERIFIED = "BLOCK_UNVERIFIED"
VOLUME_UNREADABLE = "VOLUME_UNREADABLE"
BLOCK_POOL_UNREADABLE = "BLOCK_POOL_UNREADABLE"
UNEXPECTED_ENTRY = "UNEXPECTED_ENTRY"
NOT_A_REGULAR_FILE = "NOT_A_REGULAR_FILE"
READ_ERROR = "READ_ERROR"
META_WITHOUT_BLOCK = "META_WITHOUT_BLOCK"
BLOCK_WITHOUT_META = "BLOCK_WITHOUT_META"
DUPLICATE_META = "DUPLICATE_META"
BLOCK_MISPLACED = "BLOCK_MISPLACED"
META_HEADER_INVALID = "META_HEADER_INVALID"
META_VERSION = "META_VERSION"
CHECKSUM_NULL = "CHECKSUM_NULL"
META_LENGTH_MISMATCH = "META_LENGTH_MISMATCH"

_SHOWN = 20


@dataclass
class HdfsFinding:
    kind: str
    detail: str
    datanode: Optional[str] = None
    storage: Optional[str] = None
    pool: Optional[str] = None
    block: Optional[int] = None
    genstamp: Optional[int] = None
    file: Optional[str] = None
    chunk: Optional[int] = None
    offset: Optional[int] = None
    #: the HDFS file the block belongs to (from --fsck)
    path: Optional[str] = None

    @property
    def severity(self) -> str:
        return severity_of(self.kind)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "error": self.kind,
            "severity": self.severity,
            "datanode": self.datanode,
            "storage": self.storage,
            "pool": self.pool,
            "block": self.block,
            "genstamp": self.genstamp,
            "file": self.file,
            "chunk": self.chunk,
            "offset": self.offset,
            "path": self.path,
            "detail": self.detail,
        }

    def line(self) -> str:
        where = [
            f"datanode {self.datanode}" if self.datanode else "",
            f"blk_{self.block}" + (f"_{self.genstamp}" if self.genstamp is not None else "")
            if self.block is not None
            else "",
            f"chunk {self.chunk}" if self.chunk is not None else "",
            (f"{self.file}" + (f" @{self.offset}" if self.offset is not None else ""))
            if self.file
            else "",
            f"({self.path})" if self.path else "",
        ]
        return f"{self.kind} {' '.join(w for w in where if w)}: {self.detail}"


@dataclass
class ScannedReplica:
    """One replica and what checking it found, with where it is."""

    replica: Replica
    volume: DataDir
    check: ChunkCheck
    block_file: str
    meta_file: str

    @property
    def key(self) -> Tuple[str, int]:
        return (self.replica.pool, self.replica.block_id)


@dataclass
class HdfsReport:
    findings: List[HdfsFinding] = field(default_factory=list)
    replicas: List[ScannedReplica] = field(default_factory=list)
    volumes: List[DataDir] = field(default_factory=list)
    failed: List[Dict[str, str]] = field(default_factory=list)
    bytes_read: int = 0
    chunks_verified: int = 0
    fsck_problems: List[str] = field(default_factory=list)


def scan_datanodes(paths: Iterable[str], fsck: Optional[FsckView] = None) -> HdfsReport:
    """Scan the datanode storage directories at or under `paths` (see the module
    docstring); a path that holds none goes to `failed`."""
    report = HdfsReport()
    seen: Dict[str, str] = {}
    for p in paths:
        found = find_data_dirs(p)
        if not found:
            report.failed.append(
                {"path": p, "error": f"{p}: no HDFS datanode storage directory found "
                                     f"(current/VERSION with storageType=DATA_NODE)"}
            )  # fmt: skip
        for d in found:
            real = os.path.realpath(d)
            if real in seen:
                continue
            seen[real] = d
            _scan_volume(read_data_dir(d), report)
    _compare(report)
    _stale(report, fsck)
    if fsck is not None:
        report.fsck_problems = list(fsck.problems)
        _against_fsck(report, fsck)
    _open(report)
    return report


# ---- one volume ---------------------------------------------------------------------------


def _where(v: DataDir) -> Dict[str, Any]:
    return {"datanode": v.datanode_uuid, "storage": v.storage_id}


def _scan_volume(v: DataDir, report: HdfsReport) -> None:
    report.volumes.append(v)
    if v.problem:
        report.findings.append(
            HdfsFinding("VOLUME_UNREADABLE", v.problem, file=os.path.join(v.path, "current"))
        )
        return
    buffer = bytearray(WINDOW_BYTES)
    for pool in v.block_pools:
        if pool.problem:
            report.findings.append(
                HdfsFinding(
                    "VOLUME_UNREADABLE", pool.problem, pool=pool.id, file=pool.path, **_where(v)
                )
            )
            continue
        try:
            pool_current = open_dir(os.path.join(pool.path, "current"), follow=True)
        except OSError as exc:
            report.findings.append(
                HdfsFinding(
                    "VOLUME_UNREADABLE",
                    f"{exc.strerror or exc}",
                    pool=pool.id,
                    file=pool.path,
                    **_where(v),
                )
            )
            continue
        try:
            dirs: Dict[str, int] = {}
            try:
                for item in walk_block_pool(pool.path, pool.id):
                    if isinstance(item, BlockFinding):
                        report.findings.append(_walk_finding(item, v, pool.path, pool.id))
                        continue
                    _check_one(item, v, pool.path, pool_current, dirs, buffer, report)
            finally:
                for fd in dirs.values():
                    os.close(fd)
        finally:
            os.close(pool_current)


def _walk_finding(item: BlockFinding, v: DataDir, pool_path: str, pool: str) -> HdfsFinding:
    shown = os.path.join(pool_path, "current", item.directory, *([item.name] if item.name else []))
    return HdfsFinding(
        item.kind, item.detail, pool=pool, block=item.block_id, genstamp=item.genstamp,
        file=shown, **_where(v),
    )  # fmt: skip


def _check_one(
    rep: Replica,
    v: DataDir,
    pool_path: str,
    pool_current: int,
    dirs: Dict[str, int],
    buffer: bytearray,
    report: HdfsReport,
) -> None:
    base = os.path.join(pool_path, "current", rep.directory)
    block_file, meta_file = os.path.join(base, rep.block_name), os.path.join(base, rep.meta_name)
    fd = dirs.get(rep.directory)
    if fd is None:
        for old in dirs.values():  # the walk gives a directory's replicas together
            os.close(old)
        dirs.clear()
        fd = dirs[rep.directory] = open_dir_chain(pool_current, rep.directory.split("/"))
    check = verify_replica(fd, rep, buffer)
    report.bytes_read += check.bytes_read
    report.chunks_verified += check.checked - len(check.bad)
    report.replicas.append(ScannedReplica(rep, v, check, block_file, meta_file))
    where = dict(pool=rep.pool, block=rep.block_id, genstamp=rep.genstamp, **_where(v))
    for kind, detail in check.problems:
        shown = meta_file if kind.startswith("META") or kind == "CHECKSUM_NULL" else block_file
        report.findings.append(HdfsFinding(kind, detail, file=shown, **where))


# ---- the replicas of a block together -----------------------------------------------------


def _runs(chunks: np.ndarray) -> List[Tuple[int, int]]:
    """(first index, count) of each run of consecutive positions in `chunks` (sorted)."""
    if not len(chunks):
        return []
    cuts = np.flatnonzero(np.diff(chunks) != 1) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(chunks)]
    return [(a, b - a) for a, b in zip(starts, ends)]


def _others_crcs(
    r: ScannedReplica, others: Sequence[ScannedReplica], bpc: int, algorithm: str
) -> List[Optional[np.ndarray]]:
    """For each other replica, the CRC of its data at each of `r`'s bad chunks where that
    chunk of it verifies (-1 where it does not, or cannot be read): one targeted read."""
    out: List[Optional[np.ndarray]] = []
    for o in others:
        try:
            fd = open_dir(os.path.dirname(o.block_file), follow=True)
        except OSError:
            out.append(None)
            continue
        try:
            inside = r.check.bad < o.check.checked
            chunks = r.check.bad[inside]
            stored, computed = chunk_crcs(fd, o.replica, bpc, chunks, algorithm)
            values = np.full(len(r.check.bad), -1, np.int64)
            good = stored == computed
            values[np.flatnonzero(inside)[good]] = computed[good]
            out.append(values)
        except OSError:
            out.append(None)
        finally:
            os.close(fd)
    return out


def _compare(report: HdfsReport) -> None:
    """Name each bad chunk by the other replicas of its block (module docstring), and find
    the replicas of one genstamp that each verify and still differ."""
    groups: Dict[Tuple[str, int, int], List[ScannedReplica]] = defaultdict(list)
    for r in report.replicas:
        groups[(r.replica.pool, r.replica.block_id, r.replica.genstamp)].append(r)
    for (_pool, _bid, _gs), members in sorted(groups.items()):
        for r in members:
            if len(r.check.bad):
                _name_bad_chunks(
                    r, [o for o in members if o is not r and _comparable(r, o)], report
                )
        _differ(members, report)


def _comparable(a: ScannedReplica, b: ScannedReplica) -> bool:
    return (
        a.check.checksum == b.check.checksum
        and a.check.bytes_per_checksum == b.check.bytes_per_checksum
        and a.check.checksum in ("CRC32", "CRC32C")
    )


def _name_bad_chunks(r: ScannedReplica, others: List[ScannedReplica], report: HdfsReport) -> None:
    bpc, algorithm = r.check.bytes_per_checksum, (r.check.checksum or "").lower()
    theirs = _others_crcs(r, others, bpc, algorithm)
    verdicts: List[Tuple[str, Optional[int]]] = []
    for k in range(len(r.check.bad)):
        values = {int(t[k]) for t in theirs if t is not None and t[k] >= 0}
        if len(values) != 1:
            verdicts.append(("CORRUPT_CHUNK", None))
            continue
        (v,) = values
        if int(r.check.computed[k]) == v:
            verdicts.append(("META_ROT", v))
        elif int(r.check.stored[k]) == v:
            verdicts.append(("DATA_ROT", v))
        else:
            verdicts.append(("CORRUPT_CHUNK", v))
    rep = r.replica
    where = dict(pool=rep.pool, block=rep.block_id, genstamp=rep.genstamp, **_where(r.volume))
    start = 0
    while start < len(verdicts):  # one finding per run of consecutive chunks of one verdict
        end = start + 1
        while (
            end < len(verdicts)
            and verdicts[end][0] == verdicts[start][0]
            and r.check.bad[end] == r.check.bad[end - 1] + 1
        ):
            end += 1
        kind = verdicts[start][0]
        first = int(r.check.bad[start])
        count = end - start
        chunks = (
            f"chunk {first}" if count == 1 else f"chunks {first}..{first + count - 1} ({count})"
        )
        stored, computed = int(r.check.stored[start]), int(r.check.computed[start])
        crcs = f"stored {r.check.checksum} {stored:08x}, computed {computed:08x}"
        if kind == "META_ROT":
            detail = (
                f"{chunks}: {crcs}; the data equals the other replicas' and the stored CRC does "
                f"not: the meta rotted, the data is good (a file checksum made from this "
                f"replica's CRCs differs from the file's)"
            )
            shown = r.meta_file
        elif kind == "DATA_ROT":
            detail = (
                f"{chunks}: {crcs}; the stored CRC is the other replicas' and the data differs: "
                f"the data rotted (a file checksum made from this replica's CRCs still says "
                f"the file is intact)"
            )
            shown = r.block_file
        else:
            why = (
                "no other replica of the block verifies this chunk"
                if verdicts[start][1] is None
                else "the other replicas agree with neither its data nor its CRC"
            )
            detail = f"{chunks}: {crcs}; {why}: data or meta, not told apart"
            shown = r.block_file
        report.findings.append(
            HdfsFinding(
                kind,
                detail,
                file=shown,
                chunk=first,
                offset=first * r.check.bytes_per_checksum,
                **where,
            )
        )
        start = end


def _differ(members: List[ScannedReplica], report: HdfsReport) -> None:
    final = [r for r in members if r.replica.state == FINALIZED and r.check.verified]
    if len(final) < 2:
        return
    lengths = {r.check.length for r in final}
    digests = {(r.check.length, r.check.crc_digest) for r in final}
    if len(digests) < 2:
        return
    kind_detail = (
        "finalized replicas of one genstamp with different lengths ("
        + ", ".join(str(n) for n in sorted(lengths))
        + "): the datanode's DirectoryScanner marks a length mismatch corrupt"
        if len(lengths) > 1
        else "replicas of one genstamp that each verify hold different bytes (their stored "
        "CRCs differ): a writer or recovery bug, not a disk"
    )
    for r in final:
        rep = r.replica
        report.findings.append(
            HdfsFinding(
                "REPLICAS_DIFFER",
                kind_detail,
                file=r.block_file,
                pool=rep.pool,
                block=rep.block_id,
                genstamp=rep.genstamp,
                **_where(r.volume),
            )  # fmt: skip
        )


def _stale(report: HdfsReport, fsck: Optional[FsckView]) -> None:
    """Replicas with a genstamp below the block's current one: the newest on disk, or the
    one fsck gives (the NameNode's)."""
    newest: Dict[Tuple[str, int], int] = {}
    for r in report.replicas:
        newest[r.key] = max(newest.get(r.key, 0), r.replica.genstamp)
    for r in report.replicas:
        current = newest[r.key]
        if fsck is not None and r.key in fsck.by_block:
            current = fsck.by_block[r.key][1].genstamp
        rep = r.replica
        if rep.genstamp < current:
            verdict = "passes its own CRCs" if r.check.verified else "fails its CRCs too"
            by = "by fsck" if fsck is not None and r.key in fsck.by_block else "on another replica"
            report.findings.append(
                HdfsFinding(
                    "STALE_REPLICA",
                    f"genstamp {rep.genstamp} below the block's {current} "
                    f"({by}): "
                    f"it {verdict} and is still wrong (it missed an append or a recovery; the "
                    f"NameNode marks it corrupt and deletes it)",
                    file=r.meta_file,
                    pool=rep.pool,
                    block=rep.block_id,
                    genstamp=rep.genstamp,
                    **_where(r.volume),
                )  # fmt: skip
            )


def _open(report: HdfsReport) -> None:
    for r in report.replicas:
        rep = r.replica
        if rep.state != RBW:
            continue
        report.findings.append(
            HdfsFinding(
                "REPLICA_OPEN",
                f"an open file's replica (rbw/: being written, or not yet recovered), "
                f"{r.check.length} bytes: its {r.check.checked} complete chunk(s) verified "
                f"({len(r.check.bad)} bad), the partial last chunk not; HDFS's scanner never "
                f"reads it",
                file=r.block_file,
                pool=rep.pool,
                block=rep.block_id,
                genstamp=rep.genstamp,
                **_where(r.volume),
            )  # fmt: skip
        )


def _against_fsck(report: HdfsReport, fsck: FsckView) -> None:
    scanned = {v.storage_id: v for v in report.volumes if v.storage_id and not v.problem}
    on_volume: Dict[Tuple[str, int, str], ScannedReplica] = {}
    for r in report.replicas:
        on_volume[(r.replica.pool, r.replica.block_id, r.volume.storage_id or "")] = r
    for r in report.replicas:
        if r.key not in fsck.by_block and r.replica.state != RBW:
            rep = r.replica
            report.findings.append(
                HdfsFinding(
                    "REPLICA_NOT_IN_FSCK",
                    "no file of the fsck output owns this block (deleted and not yet "
                    "invalidated, or outside the PATH fsck was run on)",
                    file=r.block_file,
                    pool=rep.pool,
                    block=rep.block_id,
                    genstamp=rep.genstamp,
                    **_where(r.volume),
                )  # fmt: skip
            )
    for f in fsck.files:
        for blk in f.blocks:
            good, unscanned = 0, 0
            for internal, addr, storage, _type in blk.locations:
                v = scanned.get(storage)
                if v is None:
                    unscanned += 1
                    continue
                held = on_volume.get((blk.pool, internal, storage))
                if held is None:
                    report.findings.append(
                        HdfsFinding(
                            "REPLICA_MISSING",
                            f"fsck places blk_{internal}_{blk.genstamp} on {addr} {storage}, "
                            f"which holds no replica of it",
                            pool=blk.pool,
                            block=internal,
                            genstamp=blk.genstamp,
                            path=f.path,
                            **_where(v),
                        )  # fmt: skip
                    )
                    continue
                if (
                    held.replica.genstamp == blk.genstamp
                    and held.replica.state == FINALIZED
                    and held.check.verified
                    and (blk.length == held.check.length or f.policy is not None)
                ):
                    good += 1
            want = f.replication if f.replication is not None else len(blk.locations)
            # replicas fsck does not list may still be good ones (a volume it forgot)
            extra = sum(
                1
                for r in report.replicas
                if r.key == (blk.pool, blk.block_id)
                and r.replica.genstamp == blk.genstamp
                and r.replica.state == FINALIZED
                and r.check.verified
                and r.volume.storage_id not in {s for _, _, s, _ in blk.locations}
            )
            good += extra
            if good >= want:
                continue
            kind = "UNDER_REPLICATED" if good + unscanned < want else "BLOCK_UNVERIFIED"
            report.findings.append(
                HdfsFinding(
                    kind,
                    f"{good} verified replica(s) of genstamp {blk.genstamp} for replication "
                    f"{want}"
                    + (f"; {unscanned} of its locations not scanned" if unscanned else "")
                    + f" (fsck counts {blk.live} live)",
                    pool=blk.pool,
                    block=blk.block_id,
                    genstamp=blk.genstamp,
                    path=f.path,
                )  # fmt: skip
            )
    # name each block finding's file
    for fnd in report.findings:
        if fnd.path is None and fnd.pool is not None and fnd.block is not None:
            owner = fsck.by_block.get((fnd.pool, fnd.block))
            if owner is not None:
                fnd.path = owner[0].path
