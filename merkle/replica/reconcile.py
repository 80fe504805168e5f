"""The reconciler: repair a replica from its peers so that all replicas converge, without
ever losing data (Ozone's container reconciliation, HDDS-10239).

`reconcile(container, peers)` holds the replica lock, scans the replica (fresh tree, merged
into the stored one), then for each peer in turn:
  1. loads the peer's block metadata and tree (the stored `.tree`; when that is missing or
     corrupt, a read-only scan of the peer); an unreadable peer is skipped with its reason;
  2. diffs (merkle.trees.diff.diff: what must *we* pull from *this peer*) and plans, block by
     block in offset order, the healthy peer chunks selected as missing blocks, missing
     chunks and corrupt chunks; a block stops at the first chunk that would start beyond the
     local file's end (block files have no holes);
  3. reads each chunk from the peer into a reused buffer and verifies its window checksums
     against the peer's *recorded* ones (and the recorded checksums against the peer tree's
     leaf), writes it at its offset with pwrite (never truncating), fsyncs the block file; a
     chunk that fails stops its block, the other blocks go on;
  4. records the written chunks in the block metadata (atomic replace), adopts the peer's
     tombstones in the tree only (no data deleted), and writes the rebuilt tree atomically.
Local data is never deleted, truncated or shortened: only pwrite at chunk offsets.

Crash safety: data is written before the metadata that describes it and the metadata before
the tree, each replaced atomically, and every run starts from a fresh scan. A crash after a
data write leaves bytes no metadata claims yet (a re-run rewrites the same verified bytes);
after the metadata, a stale tree (the re-run's scan rebuilds it). The flock-based replica
lock dies with its process, so a re-run never waits on a dead holder.

`dry_run=True` takes no lock, writes nothing and returns the plan (what, from where, how
many bytes), simulating each peer's repair so later peers are not asked for the same chunk.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from merkle import _native
from merkle.replica.crcmerkle.blockmeta import (CRC32, CRC32C, NONE, SHA256, ChunkMeta,
                                                ContainerMeta, read_blockmeta, write_blockmeta)
from merkle.trees.ozone import format_checksum
from merkle.replica.errors import ReplicaError
from merkle.replica.fileio import fsync_dir, pread_into
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.crcmerkle.layout import ContainerPaths, container_paths, find_containers
from merkle.replica.lock import ReplicaLock
from merkle.replica.scan import ScanResult, _scan, read_stored_tree
from merkle.trees.model import ContainerTree
from merkle.trees.diff import DiffReport, diff
from merkle.trees.treefile import write_tree

__all__ = ["ChunkCopy", "PeerOutcome", "Problem", "ReconcileResult", "jobs_from_report",
           "reconcile", "reconcile_round"]

PathLike = Union[str, "os.PathLike[str]"]
#: Called after every write step with (step, detail): "chunk", "block", "metadata", "tree".
#: For instrumentation and crash-injection tests (raise from it to simulate a crash).
StepHook = Callable[[str, Any], None]


@dataclass(frozen=True)
class ChunkCopy:
    """One chunk to pull (or pulled) from a peer."""

    block_id: int
    offset: int
    length: int
    reason: str  # "missing_block" | "missing_chunk" | "corrupt_chunk"
    peer_value: int

    def to_dict(self) -> Dict[str, Any]:
        return {"block_id": self.block_id, "offset": self.offset, "length": self.length,
                "reason": self.reason, "data_checksum": format_checksum(self.peer_value)}


@dataclass(frozen=True)
class Problem:
    """Something no peer could repair, and why."""

    block_id: Optional[int]
    offset: Optional[int]
    reason: str

    def to_dict(self) -> Dict[str, Any]:
        return {"block_id": self.block_id, "offset": self.offset, "reason": self.reason}

    def __str__(self) -> str:
        where = "" if self.block_id is None else f"block {self.block_id}" + (
            "" if self.offset is None else f" chunk @{self.offset}") + ": "
        return where + self.reason


@dataclass
class PeerOutcome:
    """What happened with one peer."""

    peer: str
    status: str  # "in-sync", "repaired", "nothing-pulled", "skipped", "planned"
    reason: str = ""
    planned: List[ChunkCopy] = field(default_factory=list)
    copied: List[ChunkCopy] = field(default_factory=list)
    tombstones: List[int] = field(default_factory=list)
    failures: List[Problem] = field(default_factory=list)
    unrecoverable: List[Tuple[int, int]] = field(default_factory=list)
    counts: Dict[str, int] = field(default_factory=dict)

    @property
    def bytes_planned(self) -> int:
        return sum(c.length for c in self.planned)

    @property
    def bytes_copied(self) -> int:
        return sum(c.length for c in self.copied)

    def to_dict(self) -> Dict[str, Any]:
        return {"peer": self.peer, "status": self.status, "reason": self.reason,
                "counts": self.counts,
                "planned": [c.to_dict() for c in self.planned],
                "bytes_planned": self.bytes_planned,
                "copied": [c.to_dict() for c in self.copied],
                "bytes_copied": self.bytes_copied,
                "tombstones_adopted": self.tombstones,
                "failures": [f.to_dict() for f in self.failures],
                "unrecoverable": [{"block_id": b, "offset": o} for b, o in self.unrecoverable]}


@dataclass
class ReconcileResult:
    """The outcome of reconciling one replica with its peers."""

    path: str
    container_id: int
    dry_run: bool
    before: Optional[int]
    after: Optional[int]
    scan: ScanResult
    peers: List[PeerOutcome]
    remaining: List[Problem]

    @property
    def changed(self) -> bool:
        return any(p.copied or p.tombstones for p in self.peers)

    def to_dict(self) -> Dict[str, Any]:
        fmt = (lambda v: None if v is None else format_checksum(v))
        return {"path": self.path, "container_id": self.container_id, "dry_run": self.dry_run,
                "before": fmt(self.before), "after": fmt(self.after),
                "scan_errors": [e.to_dict() for e in self.scan.errors],
                "peers": [p.to_dict() for p in self.peers],
                "remaining": [r.to_dict() for r in self.remaining]}


# ---- peers -------------------------------------------------------------------------------

def _load_peer(path: PathLike, container_id: int) -> Tuple[ContainerPaths, ContainerMeta,
                                                            ContainerTree]:
    """A peer's metadata and tree; raises ReplicaError/OSError when it cannot serve."""
    paths = container_paths(path)
    if not paths.root.is_dir():
        raise ReplicaError("peer replica does not exist", os.fspath(path))
    if paths.container_id != container_id:
        raise ReplicaError(f"peer is container {paths.container_id}, not {container_id}",
                           os.fspath(path))
    meta = read_blockmeta(paths.blockmeta, container_id)
    tree, _raw, _problem = read_stored_tree(LocalReplicaFiles(paths))
    if tree is None or tree.data_checksum is None:
        # No usable tree: what a scan observes (read-only; the peer's own scanner owns it).
        tree = _scan(paths, False, 1, None, None, 1 << 20).tree
    return paths, meta, tree


# ---- planning ----------------------------------------------------------------------------

def _rows_of_block(tree: ContainerTree, row: int) -> range:
    return range(int(tree.block_chunk_start[row]), int(tree.block_chunk_start[row + 1]))


def _selected(report: DiffReport) -> Dict[int, List[ChunkCopy]]:
    """Healthy peer chunks the diff selected, {block: [copies by offset]}."""
    peer = report.peer
    out: Dict[int, Dict[int, ChunkCopy]] = {}
    cbid = peer.chunk_block_id

    def add(row: int, reason: str) -> None:
        if not bool(peer.chunk_matches[row]):
            return  # only healthy copies are pulled (the diff drops unhealthy ones too)
        b = int(cbid[row])
        off = int(peer.chunk_offset[row])
        out.setdefault(b, {})[off] = ChunkCopy(b, off, int(peer.chunk_length[row]), reason,
                                               int(peer.chunk_value[row]))

    for brow in report.missing_block_rows:
        for r in _rows_of_block(peer, int(brow)):
            add(r, "missing_block")
    for r in report.missing_chunk_rows:
        add(int(r), "missing_chunk")
    for r in report.corrupt_chunk_rows:
        add(int(r), "corrupt_chunk")
    return {b: [d[o] for o in sorted(d)] for b, d in sorted(out.items())}


def _empty_missing_blocks(report: DiffReport) -> List[int]:
    peer = report.peer
    cs = peer.block_chunk_start
    return [int(peer.block_id[r]) for r in report.missing_block_rows if cs[r + 1] == cs[r]]


# ---- the tree after a repair -------------------------------------------------------------

def _rebuilt_tree(ours: ContainerTree, written: Sequence[ChunkCopy],
                  created: Sequence[int], adopted: Dict[int, int]) -> ContainerTree:
    """`ours` with the written chunks (healthy, replacing what they overlap), created empty
    blocks and adopted tombstones: what a fresh scan + merge would give afterwards."""
    by_block: Dict[int, List[Tuple[int, int, int, bool]]] = {}
    tomb: Dict[int, int] = {}
    live: List[int] = []
    cbid = ours.chunk_block_id
    for i in range(ours.n_blocks):
        b = int(ours.block_id[i])
        if bool(ours.block_deleted[i]):
            tomb[b] = int(ours.block_value[i])
        else:
            live.append(b)
    for b, o, n, v, m in zip(cbid.tolist(), ours.chunk_offset.tolist(),
                             ours.chunk_length.tolist(), ours.chunk_value.tolist(),
                             ours.chunk_matches.tolist()):
        by_block.setdefault(b, []).append((o, n, v, m))
    for c in written:
        rows = by_block.setdefault(c.block_id, [])
        end = c.offset + c.length
        rows[:] = [r for r in rows
                   if not (r[0] == c.offset or (r[0] < end and c.offset < r[0] + r[1]))]
        rows.append((c.offset, c.length, c.peer_value, True))
        live.append(c.block_id)
    live.extend(created)
    tomb.update(adopted)
    bids: List[int] = []
    offs: List[int] = []
    lens: List[int] = []
    vals: List[int] = []
    matches: List[bool] = []
    for b, rows in by_block.items():
        for o, n, v, m in rows:
            bids.append(b)
            offs.append(o)
            lens.append(n)
            vals.append(v)
            matches.append(m)
    return ContainerTree.from_columns(
        ours.container_id, bids, offs, lens, leaf=np.array(vals, dtype=np.int64),
        checksum_matches=np.array(matches, dtype=bool), deleted_blocks=tomb or None,
        empty_blocks=sorted(set(live)) or None)


# ---- copying -----------------------------------------------------------------------------

def _verify(view: memoryview, c: ChunkMeta) -> bool:
    """Do these bytes match the chunk's recorded window checksums?"""
    if c.checksum_type == NONE:
        return True  # nothing recorded to verify against (Ozone's NONE)
    if c.checksum_type in (CRC32, CRC32C):
        alg = "crc32" if c.checksum_type == CRC32 else "crc32c"
        w = _native.checksum_windows(view, c.bytes_per_checksum, algorithm=alg)
        return bool(np.array_equal(w, c.window_values()))
    algo = "sha256" if c.checksum_type == SHA256 else "md5"
    bpc = c.bytes_per_checksum
    got = b"".join(hashlib.new(algo, view[s:s + bpc]).digest()
                   for s in range(0, len(view), bpc))
    return got == c.checksums


class _Copier:
    """Copies verified chunks from one peer into our block files."""

    def __init__(self, ours: ContainerPaths, peer: ContainerPaths, peer_meta: ContainerMeta,
                 sizes: Dict[int, int], on_step: Optional[StepHook], dry_run: bool) -> None:
        self.ours = ours
        self.peer = peer
        self.peer_meta = peer_meta
        self.sizes = sizes  # local block file sizes as the writes go (simulated in dry-run)
        self.on_step = on_step
        self.dry_run = dry_run
        self.buffer = bytearray(0)

    def _size(self, block_id: int) -> int:
        if block_id not in self.sizes:
            try:
                self.sizes[block_id] = os.stat(self.ours.block_file(block_id)).st_size
            except FileNotFoundError:
                self.sizes[block_id] = 0
        return self.sizes[block_id]

    def _step(self, step: str, detail: Any) -> None:
        if self.on_step is not None:
            self.on_step(step, detail)

    def plan_block(self, block_id: int, copies: List[ChunkCopy]
                   ) -> Tuple[List[Tuple[ChunkCopy, ChunkMeta]], Optional[Problem]]:
        """The copies that can be attempted (in order, no gap), and why the block stops."""
        size = self._size(block_id)
        pmeta = self.peer_meta.blocks.get(block_id)
        out: List[Tuple[ChunkCopy, ChunkMeta]] = []
        for c in copies:
            if c.offset > size:
                return out, Problem(block_id, c.offset, f"stopped: chunk starts at {c.offset}, "
                                    f"beyond the block file's end {size} (no holes)")
            cm = pmeta.chunk_at(c.offset) if pmeta is not None else None
            if cm is None or cm.length != c.length or cm.leaf != c.peer_value:
                return out, Problem(block_id, c.offset, "stopped: the peer's metadata does not "
                                    "match its tree for this chunk")
            out.append((c, cm))
            size = max(size, c.offset + c.length)
        return out, None

    def copy_block(self, block_id: int, items: List[Tuple[ChunkCopy, ChunkMeta]]
                   ) -> Tuple[List[ChunkCopy], List[ChunkMeta], Optional[Problem]]:
        """Read, verify and write the planned chunks of one block, stopping at a failure."""
        done: List[ChunkCopy] = []
        metas: List[ChunkMeta] = []
        if not items:
            return done, metas, None
        try:
            pfd = os.open(self.peer.block_file(block_id), os.O_RDONLY)
        except OSError as exc:
            return done, metas, Problem(block_id, items[0][0].offset,
                                        f"peer block file unreadable: {exc.strerror or exc}")
        local = self.ours.block_file(block_id)
        created = not local.exists()
        fd = -1
        problem: Optional[Problem] = None
        try:
            self.ours.chunks_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(local, os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(fd).st_size
            for c, cm in items:
                if c.offset > size:  # re-checked against the real file
                    problem = Problem(block_id, c.offset, f"stopped: chunk starts beyond the "
                                      f"block file's end {size} (no holes)")
                    break
                if len(self.buffer) < c.length:
                    self.buffer = bytearray(c.length)
                view = memoryview(self.buffer)[:c.length]
                try:
                    got = pread_into(pfd, view, c.offset)
                except OSError as exc:
                    problem = Problem(block_id, c.offset, f"stopped: peer read failed: "
                                      f"{exc.strerror or exc}")
                    break
                if got < c.length:
                    problem = Problem(block_id, c.offset, f"stopped: peer chunk is short "
                                      f"({got} of {c.length} bytes)")
                    break
                if not _verify(view, cm):
                    problem = Problem(block_id, c.offset, "stopped: peer data does not match "
                                      "its recorded window checksums")
                    break
                written = 0
                while written < c.length:
                    written += os.pwrite(fd, view[written:], c.offset + written)
                size = max(size, c.offset + c.length)
                self.sizes[block_id] = size
                done.append(c)
                metas.append(cm)
                self._step("chunk", c)
            os.fsync(fd)
            if created:
                fsync_dir(self.ours.chunks_dir)
        finally:
            os.close(pfd)
            if fd >= 0:
                os.close(fd)
        self._step("block", block_id)
        return done, metas, problem


# ---- reconcile ---------------------------------------------------------------------------

def refuse_ozone(path: PathLike) -> None:
    """ReplicaError when `path` is on an Ozone datanode volume: a datanode owns its files
    (RocksDB, `.container`, `.tree`) and reconciles its replicas itself, so this reconciler
    (which writes the crcmerkle layout) never touches one."""
    from merkle.replica.ozone.layout import is_ozone_path
    if os.path.exists(path) and is_ozone_path(path):
        name = os.path.basename(os.path.normpath(os.fspath(path)))
        cid = name if name.isdigit() else "<containerID>"
        raise ReplicaError(f"on an Ozone datanode volume: the datanode reconciles its own "
                           f"replicas; ask it to with 'ozone admin container reconcile {cid}'",
                           os.fspath(path))


def reconcile(container_path: PathLike, peer_paths: Sequence[PathLike], dry_run: bool = False,
              *, workers: int = 1, on_step: Optional[StepHook] = None) -> ReconcileResult:
    """Repair the replica at `container_path` from each peer in turn (module docstring).

    Returns a ReconcileResult: the container value before and after, per peer what was
    planned, copied, adopted, skipped (with reasons), and what remains unrepaired and why.
    Raises ReplicaLockedError if another process holds the replica, ReplicaError/OSError if
    the replica itself cannot be read or written.
    """
    for p in (container_path, *peer_paths):
        refuse_ozone(p)
    paths = container_paths(container_path)
    if not paths.root.is_dir():
        raise ReplicaError("replica does not exist", os.fspath(container_path))
    lock = None if dry_run else ReplicaLock(paths).acquire()
    try:
        return _reconcile(paths, peer_paths, dry_run, workers, on_step)
    finally:
        if lock is not None:
            lock.release()


def _reconcile(paths: ContainerPaths, peer_paths: Sequence[PathLike], dry_run: bool,
               workers: int, on_step: Optional[StepHook]) -> ReconcileResult:
    scan = _scan(paths, not dry_run, max(1, workers), None, None, 1 << 20)
    if on_step is not None and scan.tree_written:
        on_step("tree", "scan")
    ours = scan.tree
    before = ours.data_checksum
    meta = scan.meta.copy() if scan.meta is not None else ContainerMeta(paths.container_id)
    sizes: Dict[int, int] = {}
    outcomes: List[PeerOutcome] = []
    unrecoverable: Dict[Tuple[int, int], List[str]] = {}
    failed: Dict[Tuple[int, int], str] = {}
    for peer_path in peer_paths:
        name = os.fspath(peer_path)
        try:
            ppaths, pmeta, ptree = _load_peer(peer_path, paths.container_id)
        except (ReplicaError, OSError) as exc:
            outcomes.append(PeerOutcome(name, "skipped", f"unreadable peer: {exc}"))
            continue
        if os.path.realpath(ppaths.root) == os.path.realpath(paths.root):
            outcomes.append(PeerOutcome(name, "skipped", "the peer is this replica"))
            continue
        report = diff(ours, ptree)
        out = PeerOutcome(name, "in-sync" if report.roots_equal else "planned",
                          counts=report.counts())
        outcomes.append(out)
        for b, offs in report.unrecoverable_chunks.items():
            for o in offs:
                unrecoverable.setdefault((b, int(o)), []).append(name)
                out.unrecoverable.append((b, int(o)))
        if not report.needs_repair:
            if not report.roots_equal:
                out.status = "nothing-pulled"
            continue
        copier = _Copier(paths, ppaths, pmeta, sizes, on_step, dry_run)
        written: List[ChunkCopy] = []
        created: List[int] = []
        for block_id, copies in _selected(report).items():
            items, stop = copier.plan_block(block_id, copies)
            out.planned.extend(c for c, _ in items)
            if stop is not None:
                out.failures.append(stop)
            if dry_run:
                written.extend(c for c, _ in items)
                for c, _ in items:
                    sizes[block_id] = max(sizes[block_id], c.offset + c.length)
                continue
            done, metas, problem = copier.copy_block(block_id, items)
            if problem is not None:
                out.failures.append(problem)
                failed[(block_id, problem.offset or 0)] = problem.reason
            if metas:
                meta.put_chunks(block_id, metas)
            written.extend(done)
        for b in _empty_missing_blocks(report):
            if not dry_run:
                paths.chunks_dir.mkdir(parents=True, exist_ok=True)
                os.close(os.open(paths.block_file(b), os.O_RDWR | os.O_CREAT, 0o644))
                meta.put_chunks(b, [])
            created.append(b)
        adopted = {int(report.peer.block_id[r]): int(report.peer.block_value[r])
                   for r in report.deleted_block_rows}
        out.copied = written
        out.tombstones = sorted(adopted)
        if not (written or created or adopted):
            out.status = "nothing-pulled"
            continue
        out.status = "planned" if dry_run else "repaired"
        if not dry_run and (written or created):
            paths.metadata_dir.mkdir(parents=True, exist_ok=True)
            write_blockmeta(meta, paths.blockmeta)
            if on_step is not None:
                on_step("metadata", name)
        ours = _rebuilt_tree(ours, written, created, adopted)
        if not dry_run:
            paths.metadata_dir.mkdir(parents=True, exist_ok=True)
            write_tree(ours, paths.tree)
            if on_step is not None:
                on_step("tree", name)
    remaining = _remaining(ours, scan.meta, unrecoverable, failed)
    return ReconcileResult(os.fspath(paths.root), paths.container_id, dry_run, before,
                           ours.data_checksum, scan, outcomes, remaining)


def _remaining(tree: ContainerTree, meta: Optional[ContainerMeta],
               unrecoverable: Dict[Tuple[int, int], List[str]],
               failed: Dict[Tuple[int, int], str]) -> List[Problem]:
    """What is still wrong after every peer: recorded chunks absent or unhealthy in the
    tree, and chunks whose healthy copies differ."""
    out: List[Problem] = []
    seen = set()
    for (b, o), peers in sorted(unrecoverable.items()):
        out.append(Problem(b, o, "healthy copies differ (write-path divergence): "
                           + ", ".join(peers)))
        seen.add((b, o))
    cbid = tree.chunk_block_id
    rows = {(int(b), int(o)): bool(m) for b, o, m in zip(cbid, tree.chunk_offset,
                                                         tree.chunk_matches)}
    for b, o, m in zip(cbid.tolist(), tree.chunk_offset.tolist(), tree.chunk_matches.tolist()):
        if not m and (b, o) not in seen:
            why = failed.get((b, o))
            out.append(Problem(b, o, "unhealthy and no readable peer has a healthy copy"
                               + (f" ({why})" if why else "")))
            seen.add((b, o))
    if meta is not None:
        for block in meta.sorted_blocks():
            i = tree.block_index(block.block_id)
            if i >= 0 and bool(tree.block_deleted[i]):
                continue
            for c in block.chunks:
                key = (block.block_id, c.offset)
                if key not in rows and key not in seen and c.length:
                    out.append(Problem(block.block_id, c.offset,
                                       "recorded chunk still missing: no readable peer "
                                       "supplied it" + (f" ({failed[key]})" if key in failed
                                                        else "")))
                    seen.add(key)
    return out


def reconcile_round(replicas: Sequence[PathLike], *, dry_run: bool = False,
                    on_step: Optional[StepHook] = None) -> List[ReconcileResult]:
    """One round: every replica reconciles with all the others, in the order given."""
    results = []
    for i, r in enumerate(replicas):
        peers = [p for j, p in enumerate(replicas) if j != i]
        results.append(reconcile(r, peers, dry_run=dry_run, on_step=on_step))
    return results


def replica_groups(path: PathLike) -> Dict[int, List[Path]]:
    """Replicas under a cluster directory grouped by container ID ({ID: [paths]})."""
    refuse_ozone(path)
    groups: Dict[int, List[Path]] = {}
    for loc in find_containers(path):
        groups.setdefault(loc.container_id, []).append(loc.root)
    return groups


#: the "format" of the JSON that `crcmerkle spark report --json` writes
SPARK_REPORT_FORMAT = "crcmerkle-spark-report"


def jobs_from_report(report: Any, source: str = "report") -> List[List[str]]:
    """[target replica, peer...] for every repair command of a Spark report (the dict of
    `crcmerkle spark report --json`), in the report's round order. ReplicaError when it is
    not such a report or a command lacks replica paths."""
    if not isinstance(report, dict) or report.get("format") != SPARK_REPORT_FORMAT:
        raise ReplicaError(f"not a crcmerkle spark report (no \"format\": "
                           f"\"{SPARK_REPORT_FORMAT}\")", source)
    entries = report.get("reconcile")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ReplicaError("the report has no \"reconcile\" list of commands", source)
    jobs: List[List[str]] = []
    for e in sorted(entries, key=lambda e: int(e.get("round") or 0)):
        target, peers = e.get("replica"), e.get("peers")
        if not isinstance(target, str) or not target or not isinstance(peers, list) \
                or not peers or not all(isinstance(p, str) and p for p in peers):
            raise ReplicaError(f"container {e.get('container_id')} on {e.get('datanode')}: "
                               f"the command lacks replica paths (the Spark scan records "
                               f"them)", source)
        jobs.append([target, *peers])
    return jobs
