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

Trust (a peer may lie, be corrupt or be hostile; the client's checksums are the ground truth):
  - when our `.blocks` holds a record for a chunk, a peer's copy is pulled only if it has the
    same length and the same value as our record, and the bytes are verified against *our*
    window checksums; our record is kept (never replaced by the peer's, so never by NONE);
  - a pulled chunk never overlaps another chunk we hold a record for: a pull never writes
    outside the byte range of the chunk it repairs;
  - for a chunk we hold no record of, the healthy peers vote by (length, chunk value): only
    the version more than half of the voters holding a healthy copy agree on is pulled; with
    no majority the chunk is reported and left alone. Voters are distinct replicas, not
    paths: a peer that is the same directory as another peer or as the target (same
    st_dev/st_ino: a repeated path, a link to it) is skipped. With `datanodes` (the CLI's
    --all and --report give it) each datanode votes once: Ozone places at most one replica
    of a container on a datanode, so two copies on one datanode (dn1/vol1/7, dn1/vol2/7)
    count as one vote when they agree and as none when they disagree; an attacker holding
    one datanode never outvotes another;
  - our replica is not repaired at all when its `.tree` or `.blocks` is unreadable, not a
    regular file, or of a format this version does not fully understand (ReplicaError): an
    I/O error is not corruption and a rewrite would lose what we cannot read;
  - every file is opened through directory descriptors without following links, and a peer
    chunk is read through a buffer bounded by configuration (COPY_BUFFER_SIZE): a larger
    chunk is verified piecewise first, then copied and verified again.

Crash safety: data is written before the metadata that describes it and the metadata before
the tree, each replaced atomically, and every run starts from a fresh scan. A crash after a
data write leaves bytes no metadata claims yet (a re-run rewrites the same verified bytes);
after the metadata, a stale tree (the re-run's scan rebuilds it). The flock-based replica
lock dies with its process, so a re-run never waits on a dead holder.

A replica on an Ozone datanode volume is refused unless `offline=True` (the datanode
reconciles itself); then merkle.replica.ozone.offline locks the stopped datanode's volume DB,
supplies the replica's records from `block_data` and stores them back there (the store).

`dry_run=True` takes no lock (offline: checks that the volume's is free), writes nothing and
returns the plan (what, from where, how many bytes), simulating each peer's repair so later
peers are not asked for the same chunk.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from merkle import _native
from merkle.replica.crcmerkle.blockmeta import (CRC32, CRC32C, NONE, SHA256, ChunkMeta,
                                                ContainerMeta, decode_blockmeta)
from merkle.trees.ozone import format_checksum
from merkle.replica.commandlist import MAX_CONTAINER_ID, MAX_ROUND, command_int
from merkle.replica.errors import BlockMetaError, ReplicaError
from merkle.replica.fileio import pread_into
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.crcmerkle.layout import (META_SUFFIX, TREE_SUFFIX, ContainerPaths,
                                             container_paths, find_containers, refuse_link)
from merkle.replica.lock import ReplicaLock
from merkle.replica.scan import (NOT_A_REGULAR_FILE, TREE_UNREADABLE, ScanResult, _scan,
                                 read_tree_state)
from merkle.trees.model import ContainerTree
from merkle.trees.diff import DiffReport, diff
from merkle.trees.merge import chunk_follows
from merkle.trees.treefile import tree_to_bytes

__all__ = ["ChunkCopy", "LoadedReport", "PeerOutcome", "Problem", "ReconcileResult",
           "ReportJob", "check_report_job", "datanode_of", "jobs_from_report", "load_report",
           "load_report_jobs", "reconcile", "reconcile_round", "report_commands",
           "report_jobs"]

PathLike = Union[str, "os.PathLike[str]"]
#: Called after every write step with (step, detail): "chunk", "block", "metadata", "tree".
#: For instrumentation and crash-injection tests (raise from it to simulate a crash).
StepHook = Callable[[str, Any], None]

#: The largest peer chunk read into memory whole; larger ones are verified piecewise through
#: a buffer of this size (memory is bounded by this, never by a length a peer declares).
COPY_BUFFER_SIZE = 16 * 1024 * 1024


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

@dataclass
class _Peer:
    name: str
    files: Any  # LocalReplicaFiles, or an Ozone replica's files (with .paths and close())
    meta: ContainerMeta
    tree: ContainerTree
    #: an Ozone peer's raw block_data values by localID (copied into new rows, offline)
    values: Dict[int, bytes] = field(default_factory=dict)
    #: who casts this peer's vote (its datanode, or the replica itself): see _majority
    voter: str = ""


def _peer_tree(files: Any) -> ContainerTree:
    """The peer's stored tree, or what a read-only scan observes when it has none; raises
    ReplicaError when its `.tree` is unreadable or not a regular file (its tombstones would
    be unknown)."""
    state = read_tree_state(files)
    if state.error is not None and state.error.kind in (TREE_UNREADABLE, NOT_A_REGULAR_FILE):
        raise ReplicaError(f"{state.error.kind}: {state.error.detail}", files.location)
    tree = state.tree
    if tree is None or tree.data_checksum is None:
        # No usable tree: what a scan observes (read-only; the peer's own scanner owns it).
        tree = _scan(files, False, 1, None, None, 1 << 20).tree
    return tree


def _load_ozone_peer(path: PathLike, container_id: int) -> _Peer:
    """An Ozone replica as a peer of an offline repair (merkle.replica.ozone.offline)."""
    from merkle.replica.ozone.offline import load_peer
    files, meta, values = load_peer(path, container_id)
    try:
        tree = _peer_tree(files)
    except BaseException:
        files.close()
        raise
    return _Peer(os.fspath(path), files, meta, tree, values)


def _load_peer(path: PathLike, container_id: int) -> _Peer:
    """A peer's metadata and tree; raises ReplicaError/OSError when it cannot serve (its
    `.blocks` unreadable, corrupt, newer or not a regular file; its `.tree` unreadable or
    not a regular file: its tombstones would be unknown)."""
    paths = container_paths(path)
    if not paths.root.is_dir():
        raise ReplicaError("peer replica does not exist", os.fspath(path))
    if paths.container_id != container_id:
        raise ReplicaError(f"peer is container {paths.container_id}, not {container_id}",
                           os.fspath(path))
    files = LocalReplicaFiles(paths)
    try:
        name = f"{paths.root}/metadata/{container_id}{META_SUFFIX}"
        try:
            raw = files.read_blockmeta()
        except FileNotFoundError:
            raise BlockMetaError("block-metadata file is missing", name, missing=True) from None
        meta = decode_blockmeta(raw, name, container_id)
        tree = _peer_tree(files)
    except BaseException:
        files.close()
        raise
    return _Peer(os.fspath(path), files, meta, tree)


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


def _runs(copies: List[ChunkCopy]) -> List[List[ChunkCopy]]:
    """A block's copies as Ozone pulls them: its missing-block or missing-chunk list, then its
    corrupt-chunk list, each in offset order and each stopping at its own first gap."""
    first = [c for c in copies if c.reason != "corrupt_chunk"]
    corrupt = [c for c in copies if c.reason == "corrupt_chunk"]
    return [run for run in (first, corrupt) if run]


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
    rebuilt = ContainerTree.from_columns(
        ours.container_id, bids, offs, lens, leaf=np.array(vals, dtype=np.int64),
        checksum_matches=np.array(matches, dtype=bool), deleted_blocks=tomb or None,
        empty_blocks=sorted(set(live)) or None)
    rebuilt.unknown_fields = ours.unknown_fields  # kept on every rewrite, as Ozone does
    return rebuilt


# ---- copying -----------------------------------------------------------------------------

class _Verifier:
    """Feeds a chunk's bytes piece by piece (any piece sizes) and tells whether they match
    the recorded window checksums; windows are chained across pieces, so memory does not
    depend on the window size."""

    def __init__(self, c: ChunkMeta) -> None:
        self.c = c
        self.bpc = c.bytes_per_checksum
        self.crc_fn = {CRC32: _native.crc32, CRC32C: _native.crc32c}.get(c.checksum_type)
        self.algo = "sha256" if c.checksum_type == SHA256 else "md5"
        self.parts: List[bytes] = []
        self.values: List[int] = []
        self.fill = 0
        self.crc = 0
        self.h: Any = None

    def feed(self, view: memoryview) -> None:
        if self.c.checksum_type == NONE:
            return
        pos = 0
        n = len(view)
        while pos < n:
            take = min(self.bpc - self.fill, n - pos)
            if self.fill == 0 and take == self.bpc and self.crc_fn is not None:
                whole = (n - pos) // self.bpc * self.bpc  # whole windows: one native call
                w = _native.checksum_windows(view[pos:pos + whole], self.bpc,
                                             algorithm="crc32" if self.c.checksum_type == CRC32
                                             else "crc32c")
                self.values.extend(int(x) for x in w.tolist())
                pos += whole
                continue
            piece = view[pos:pos + take]
            if self.crc_fn is not None:
                self.crc = self.crc_fn(piece, self.crc)
            else:
                if self.h is None:
                    self.h = hashlib.new(self.algo)
                self.h.update(piece)
            self.fill += take
            pos += take
            if self.fill == self.bpc:
                self._close_window()

    def _close_window(self) -> None:
        if self.crc_fn is not None:
            self.values.append(self.crc)
        else:
            self.parts.append(self.h.digest() if self.h is not None else b"")
        self.fill = 0
        self.crc = 0
        self.h = None

    def matches(self) -> bool:
        if self.c.checksum_type == NONE:
            return True  # nothing recorded to verify against (Ozone's NONE)
        if self.fill:
            self._close_window()
        if self.crc_fn is not None:
            return bool(np.array_equal(np.array(self.values, dtype=np.uint32),
                                       self.c.window_values()))
        return b"".join(self.parts) == self.c.checksums


def _verify(view: memoryview, c: ChunkMeta) -> bool:
    """Do these bytes match the chunk's recorded window checksums?"""
    v = _Verifier(c)
    v.feed(view)
    return v.matches()


def _overlaps(a_off: int, a_len: int, b_off: int, b_len: int) -> bool:
    return a_off < b_off + b_len and b_off < a_off + a_len


class _Copier:
    """Copies verified chunks from one peer into our block files."""

    def __init__(self, ours: LocalReplicaFiles, peer: _Peer, our_meta: Optional[ContainerMeta],
                 vote: Callable[[int, int], Optional[Tuple[int, int]]],
                 sizes: Dict[int, int], on_step: Optional[StepHook], dry_run: bool,
                 held: Optional[ContainerMeta] = None) -> None:
        self.ours = ours
        #: our current records (our_meta plus what earlier peers supplied): the chunks held
        self.held = held if held is not None else our_meta
        self.peer = peer
        self.peer_meta = peer.meta
        self.our_meta = our_meta
        self.vote = vote
        self.sizes = sizes  # local block file sizes as the writes go (simulated in dry-run)
        #: our chunks per block {offset: length}: recorded, then pulled (Ozone's contiguity)
        self.local: Dict[int, Dict[int, int]] = {}
        self.on_step = on_step
        self.dry_run = dry_run
        self.buffer = bytearray(0)

    def _size(self, block_id: int) -> int:
        if block_id not in self.sizes:
            self.sizes[block_id] = self.ours.block_size(block_id)
        return self.sizes[block_id]

    def _step(self, step: str, detail: Any) -> None:
        if self.on_step is not None:
            self.on_step(step, detail)

    def _trust(self, block_id: int, c: ChunkCopy, cm: ChunkMeta) -> Optional[str]:
        """Why this peer copy must not be pulled (None: it may, once verified)."""
        ours = self.our_meta.blocks.get(block_id) if self.our_meta is not None else None
        mine = ours.chunk_at(c.offset) if ours is not None else None
        if mine is not None:
            if cm.length != mine.length:
                return (f"refused: the peer's chunk is {cm.length} bytes, our record says "
                        f"{mine.length} (a pull never writes outside the chunk)")
            if mine.checksum_type != NONE:
                if cm.checksum_type == NONE:
                    return "refused: the peer records type NONE over our verifiable chunk"
                if cm.leaf != mine.leaf:
                    return ("refused: the peer's copy differs from our recorded window "
                            "checksums (the client's)")
                return None
        elif ours is not None:
            for o in ours.chunks:
                if o.length and _overlaps(c.offset, c.length, o.offset, o.length):
                    return (f"refused: the peer's chunk would overwrite our recorded chunk "
                            f"@{o.offset}")
        winner = self.vote(block_id, c.offset)
        if winner is None:
            return "left alone: healthy peers disagree and no version has a majority"
        if winner != (c.length, c.peer_value):
            return "refused: the peer's version is not the one the majority of peers hold"
        return None

    def _record(self, block_id: int, offset: int) -> Optional[ChunkMeta]:
        ours = self.our_meta.blocks.get(block_id) if self.our_meta is not None else None
        return ours.chunk_at(offset) if ours is not None else None

    def _local(self, block_id: int) -> Dict[int, int]:
        if block_id not in self.local:
            block = self.held.blocks.get(block_id) if self.held is not None else None
            self.local[block_id] = {c.offset: c.length for c in block.chunks} if block else {}
        return self.local[block_id]

    def record(self, block_id: int, done: Sequence[ChunkCopy]) -> None:
        """Chunks now held locally (written, or simulated in a dry run)."""
        local = self._local(block_id)
        for c in done:
            local[c.offset] = c.length

    def plan_block(self, block_id: int, copies: List[ChunkCopy]
                   ) -> Tuple[List[Tuple[ChunkCopy, ChunkMeta]], List[Problem]]:
        """The copies of one run that can be attempted (in order), and why others are not.
        Ozone's contiguity rule stops the run at the first chunk whose offset is not 0 and not
        where the previous local chunk (recorded, or pulled before it) ends exactly."""
        problems: List[Problem] = []
        try:
            size = self._size(block_id)
        except OSError as exc:
            return [], [Problem(block_id, copies[0].offset if copies else None,
                                f"stopped: our block file: {exc.strerror or exc}")]
        pmeta = self.peer_meta.blocks.get(block_id)
        local = dict(self._local(block_id))  # what we would hold as the run goes
        out: List[Tuple[ChunkCopy, ChunkMeta]] = []
        for c in copies:
            if not chunk_follows(local, c.offset):
                problems.append(Problem(block_id, c.offset, f"stopped: chunk at {c.offset} "
                                        f"does not follow a local chunk ending there "
                                        f"(no holes)"))
                break
            cm = pmeta.chunk_at(c.offset) if pmeta is not None else None
            if cm is None or cm.length != c.length or cm.leaf != c.peer_value:
                problems.append(Problem(block_id, c.offset, "stopped: the peer's metadata does "
                                        "not match its tree for this chunk"))
                break
            why = self._trust(block_id, c, cm)
            if why is not None:
                problems.append(Problem(block_id, c.offset, why))
                continue  # not held: a later chunk that needs it stops the run
            out.append((c, cm))
            local[c.offset] = c.length
            size = max(size, c.offset + c.length)
        return out, problems

    def _read_verified(self, pfd: int, c: ChunkCopy, check: ChunkMeta, whose: str
                       ) -> Tuple[Optional[memoryview], Optional[str]]:
        """The chunk's bytes in the buffer when they fit (else None: stream), or a reason."""
        if c.length > COPY_BUFFER_SIZE:
            # verify piecewise first; the copy itself re-verifies while writing
            if len(self.buffer) < COPY_BUFFER_SIZE:
                self.buffer = bytearray(COPY_BUFFER_SIZE)
            v = _Verifier(check)
            got = 0
            while got < c.length:
                view = memoryview(self.buffer)[:min(COPY_BUFFER_SIZE, c.length - got)]
                n = pread_into(pfd, view, c.offset + got)
                v.feed(view[:n])
                got += n
                if n < len(view):
                    return None, f"stopped: peer chunk is short ({got} of {c.length} bytes)"
            return None, (None if v.matches() else f"stopped: peer data does not match "
                          f"{whose} recorded window checksums")
        if len(self.buffer) < c.length:
            self.buffer = bytearray(c.length)
        view = memoryview(self.buffer)[:c.length]
        got = pread_into(pfd, view, c.offset)
        if got < c.length:
            return None, f"stopped: peer chunk is short ({got} of {c.length} bytes)"
        if not _verify(view, check):
            return None, f"stopped: peer data does not match {whose} recorded window checksums"
        return view, None

    def _stream_copy(self, pfd: int, fd: int, c: ChunkCopy, check: ChunkMeta) -> Optional[str]:
        v = _Verifier(check)
        got = 0
        while got < c.length:
            view = memoryview(self.buffer)[:min(COPY_BUFFER_SIZE, c.length - got)]
            n = pread_into(pfd, view, c.offset + got)
            if n < len(view):
                return f"stopped: peer chunk shrank while copied ({got + n} of {c.length})"
            v.feed(view)
            written = 0
            while written < n:
                written += os.pwrite(fd, view[written:], c.offset + got + written)
            got += n
        return None if v.matches() else ("stopped: peer data changed while copied (no longer "
                                          "matches the recorded window checksums)")

    def copy_block(self, block_id: int, items: List[Tuple[ChunkCopy, ChunkMeta]]
                   ) -> Tuple[List[ChunkCopy], List[ChunkMeta], Optional[Problem]]:
        """Read, verify and write the planned chunks of one block, stopping at a failure.
        Returns the copies done, the records to add (only for chunks we had none of) and
        the problem that stopped the block."""
        done: List[ChunkCopy] = []
        metas: List[ChunkMeta] = []
        if not items:
            return done, metas, None
        try:
            pf = self.peer.files.open_block(block_id)
        except OSError as exc:
            return done, metas, Problem(block_id, items[0][0].offset,
                                        f"peer block file unreadable: {exc.strerror or exc}")
        pfd = pf.fileno()
        assert pfd is not None
        fd = -1
        problem: Optional[Problem] = None
        try:
            try:
                fd = self.ours.open_block_rw(block_id, create=True)
            except OSError as exc:
                problem = Problem(block_id, items[0][0].offset,
                                  f"stopped: our block file: {exc.strerror or exc}")
                return done, metas, problem
            size = os.fstat(fd).st_size
            peer_size = os.fstat(pfd).st_size
            for c, cm in items:
                if c.offset + c.length > peer_size:
                    problem = Problem(block_id, c.offset, f"stopped: peer chunk is short "
                                      f"(its file has {peer_size} bytes)")
                    break
                mine = self._record(block_id, c.offset)
                check = mine if mine is not None and mine.checksum_type != NONE else cm
                try:
                    view, why = self._read_verified(pfd, c, check,
                                                    "its" if check is cm else "our")
                    if why is None and view is None:
                        why = self._stream_copy(pfd, fd, c, check)
                    elif why is None and view is not None:
                        written = 0
                        while written < c.length:
                            written += os.pwrite(fd, view[written:], c.offset + written)
                except OSError as exc:
                    why = f"stopped: peer read or local write failed: {exc.strerror or exc}"
                if why is not None:
                    problem = Problem(block_id, c.offset, why)
                    break
                size = max(size, c.offset + c.length)
                self.sizes[block_id] = size
                done.append(c)
                if mine is None:
                    metas.append(cm)
                self._step("chunk", c)
            os.fsync(fd)
            self.ours.fsync_chunks()
        finally:
            pf.close()
            if fd >= 0:
                os.close(fd)
        self._step("block", block_id)
        return done, metas, problem


def _handed_to_another_user(ours_root: PathLike, peer_root: PathLike) -> str:
    """Why the peer at `peer_root` must not serve the replica at `ours_root`, or "": what a
    repair writes gets this replica's owner, so a replica owned by a user other than root
    and the peer's owner would be handed the peer's data (a root-only replica read by a
    user), as replicate refuses. (Both directories are already open: neither is a link.)"""
    ours = os.stat(ours_root).st_uid
    theirs = os.stat(peer_root).st_uid
    if ours in (0, theirs):
        return ""
    return (f"the peer belongs to uid {theirs} and this replica to uid {ours}: its data "
            f"would be handed to another user (refused)")


def _identity(path: PathLike) -> Optional[Tuple[int, int]]:
    """(st_dev, st_ino) of a replica directory (links followed: a link to a replica is that
    replica), None if it cannot be stat'ed (the peer is then reported unreadable)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _majority(peers: Sequence[_Peer]) -> Callable[[int, int], Optional[Tuple[int, int]]]:
    """vote(block, offset): the (length, value) more than half of the voters holding a
    healthy copy of that chunk agree on, or None. A voter is a peer's `voter` (its datanode
    under --all/--report, else the replica): several peers of one voter cast one vote when
    their copies agree and none when they disagree (module docstring, "Trust")."""
    cache: Dict[Tuple[int, int], Optional[Tuple[int, int]]] = {}

    def vote(block_id: int, offset: int) -> Optional[Tuple[int, int]]:
        key = (block_id, offset)
        if key in cache:
            return cache[key]
        ballots: Dict[str, set] = {}
        for p in peers:
            t = p.tree
            i = t.block_index(block_id)
            if i < 0 or bool(t.block_deleted[i]):
                continue
            a, b = int(t.block_chunk_start[i]), int(t.block_chunk_start[i + 1])
            offs = t.chunk_offset[a:b]
            j = int(np.searchsorted(offs, offset))
            if j < b - a and int(offs[j]) == offset and bool(t.chunk_matches[a + j]):
                ballots.setdefault(p.voter or p.name, set()).add(
                    (int(t.chunk_length[a + j]), int(t.chunk_value[a + j])))
        votes: Counter = Counter(next(iter(v)) for v in ballots.values() if len(v) == 1)
        abstained = sum(1 for v in ballots.values() if len(v) > 1)
        winner: Optional[Tuple[int, int]] = None
        if votes:
            (best, n), = votes.most_common(1)
            if 2 * n > sum(votes.values()) + abstained:
                winner = best
        cache[key] = winner
        return winner

    return vote


# ---- reconcile ---------------------------------------------------------------------------

def refuse_ozone(path: PathLike) -> None:
    """ReplicaError when `path` is on an Ozone datanode volume: a datanode owns its files
    (RocksDB, `.container`, `.tree`) and reconciles its replicas itself, so this reconciler
    touches one only when asked for an offline repair (reconcile(..., offline=True))."""
    if _is_ozone(path):
        name = os.path.basename(os.path.normpath(os.fspath(path)))
        cid = name if name.isdigit() else "<containerID>"
        raise ReplicaError(f"on an Ozone datanode volume: the datanode reconciles its own "
                           f"replicas; ask it to with 'ozone admin container reconcile {cid}' "
                           f"(or stop the datanode and use --offline)", os.fspath(path))


def _is_ozone(path: PathLike) -> bool:
    from merkle.replica.ozone.layout import is_ozone_path
    return os.path.exists(path) and is_ozone_path(path)


class _CrcmerkleStore:
    """Where a crcmerkle-layout replica keeps its block metadata and tree."""

    def __init__(self, files: LocalReplicaFiles) -> None:
        self.files = files

    def save_blocks(self, meta: ContainerMeta, peer_values: Dict[int, bytes],
                    block_ids: Sequence[int], tree: ContainerTree) -> None:
        self.files.write_metadata(META_SUFFIX, meta.to_bytes())

    def save_tree(self, tree: ContainerTree) -> None:
        # the tree carries the stored tree's unknown top-level fields (written after field 2)
        self.files.write_metadata(TREE_SUFFIX, tree_to_bytes(tree))


def reconcile(container_path: PathLike, peer_paths: Sequence[PathLike], dry_run: bool = False,
              *, workers: int = 1, on_step: Optional[StepHook] = None,
              offline: bool = False,
              datanodes: Optional[Mapping[str, str]] = None) -> ReconcileResult:
    """Repair the replica at `container_path` from each peer in turn (module docstring).

    Returns a ReconcileResult: the container value before and after, per peer what was
    planned, copied, adopted, skipped (with reasons), and what remains unrepaired and why.
    Raises ReplicaLockedError if another process holds the replica, ReplicaError/OSError if
    the replica itself cannot be read or written (or must not be: see "Trust" above).

    A replica on an Ozone datanode volume is refused unless `offline`: then its volume must
    be offline (the DB's LOCK free; it is held for the whole repair), its peers are Ozone
    replicas, and the block metadata goes to the volume's `block_data`
    (merkle.replica.ozone.offline).

    `datanodes` maps a peer path (as given) to its datanode: each datanode then casts one
    vote (see "Trust" above); without it each distinct replica votes.
    """
    if offline and _is_ozone(container_path):
        return _reconcile_ozone(container_path, peer_paths, dry_run, workers, on_step,
                                datanodes)
    for p in (container_path, *peer_paths):
        refuse_ozone(p)
    paths = container_paths(container_path)
    refuse_link(container_path)  # never locked or written through a link
    if not paths.root.is_dir():
        raise ReplicaError("replica does not exist", os.fspath(container_path))
    lock = None if dry_run else ReplicaLock(paths).acquire()
    try:
        files = LocalReplicaFiles(paths)
        try:
            return _reconcile(paths, files, peer_paths, dry_run, workers, on_step,
                              _CrcmerkleStore(files), _load_peer, datanodes)
        finally:
            files.close()
    finally:
        if lock is not None:
            lock.release()


def _reconcile_ozone(container_path: PathLike, peer_paths: Sequence[PathLike], dry_run: bool,
                     workers: int, on_step: Optional[StepHook],
                     datanodes: Optional[Mapping[str, str]] = None) -> ReconcileResult:
    """reconcile(..., offline=True) of a replica on an Ozone volume: the volume's DB is
    locked (RocksDB's LOCK) from before the scan until after the tree is written."""
    from merkle.replica.ozone.offline import OfflineReplica

    for p in peer_paths:
        if os.path.exists(p) and not _is_ozone(p):
            raise ReplicaError("an Ozone replica is repaired from Ozone replicas only",
                               os.fspath(p))
    target = OfflineReplica(container_path, dry_run=dry_run)
    try:
        return _reconcile(target.paths, target.files, peer_paths, dry_run, workers, on_step,
                          target, _load_ozone_peer, datanodes)
    finally:
        target.close()


def _reconcile(paths: ContainerPaths, files: LocalReplicaFiles,
               peer_paths: Sequence[PathLike], dry_run: bool, workers: int,
               on_step: Optional[StepHook], store: Any,
               load_peer: Callable[[PathLike, int], _Peer],
               datanodes: Optional[Mapping[str, str]] = None) -> ReconcileResult:
    scan = _scan(files, not dry_run, max(1, workers), None, None, 1 << 20)
    if scan.protected:
        why = "; ".join(str(e) for e in scan.errors if e.block_id is None)
        raise ReplicaError(f"not repaired: {why}", os.fspath(paths.root))
    if on_step is not None and scan.tree_written:
        on_step("tree", "scan")
    ours = scan.tree
    before = ours.data_checksum
    meta = scan.meta.copy() if scan.meta is not None else ContainerMeta(paths.container_id)
    sizes: Dict[int, int] = {}
    outcomes: List[PeerOutcome] = []
    unrecoverable: Dict[Tuple[int, int], List[str]] = {}
    failed: Dict[Tuple[int, int], str] = {}
    loaded: List[Tuple[str, Optional[_Peer], str]] = []
    # one replica, one voice: a peer named twice (or through a link) or that is the target
    # itself is skipped before it is read
    seen: Dict[Tuple[int, int], str] = {}
    mine = _identity(paths.root)
    if mine is not None:
        seen[mine] = ""
    for peer_path in peer_paths:
        name = os.fspath(peer_path)
        ident = _identity(peer_path)
        if ident is not None and ident in seen:
            loaded.append((name, None, "the peer is this replica" if not seen[ident] else
                           f"the same replica as peer {seen[ident]} (counted once)"))
            continue
        try:
            peer = load_peer(peer_path, paths.container_id)
        except (ReplicaError, OSError) as exc:
            loaded.append((name, None, f"unreadable peer: {exc}"))
            continue
        if os.path.realpath(peer.files.paths.root) == os.path.realpath(paths.root):
            peer.files.close()
            loaded.append((name, None, "the peer is this replica"))
            continue
        handed = _handed_to_another_user(paths.root, peer.files.paths.root)
        if handed:
            peer.files.close()
            loaded.append((name, None, handed))
            continue
        if ident is not None:
            seen[ident] = name
        peer.voter = (f"datanode:{datanodes[name]}" if datanodes and name in datanodes
                      else f"replica:{ident or name}")
        loaded.append((name, peer, ""))
    vote = _majority([p for _, p, _ in loaded if p is not None])
    try:
        for name, peer, why in loaded:
            if peer is None:
                outcomes.append(PeerOutcome(name, "skipped", why))
                continue
            ours = _one_peer(paths, files, peer, ours, scan, meta, vote, sizes, outcomes,
                             unrecoverable, failed, dry_run, on_step, store)
    finally:
        for _, peer, _ in loaded:
            if peer is not None:
                peer.files.close()
    remaining = _remaining(ours, scan.meta, unrecoverable, failed)
    return ReconcileResult(os.fspath(paths.root), paths.container_id, dry_run, before,
                           ours.data_checksum, scan, outcomes, remaining)


def _one_peer(paths: ContainerPaths, files: LocalReplicaFiles, peer: _Peer,
              ours: ContainerTree, scan: ScanResult, meta: ContainerMeta,
              vote: Callable[[int, int], Optional[Tuple[int, int]]], sizes: Dict[int, int],
              outcomes: List[PeerOutcome], unrecoverable: Dict[Tuple[int, int], List[str]],
              failed: Dict[Tuple[int, int], str], dry_run: bool,
              on_step: Optional[StepHook], store: Any) -> ContainerTree:
    """Repair from one peer; returns our tree afterwards."""
    name = peer.name
    report = diff(ours, peer.tree)
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
        return ours
    copier = _Copier(files, peer, scan.meta, vote, sizes, on_step, dry_run, meta)
    written: List[ChunkCopy] = []
    created: List[int] = []
    for block_id, copies in ((b, run) for b, cs in _selected(report).items()
                             for run in _runs(cs)):
        items, stops = copier.plan_block(block_id, copies)
        out.planned.extend(c for c, _ in items)
        out.failures.extend(stops)
        for stop in stops:
            failed[(block_id, stop.offset or 0)] = stop.reason
        if dry_run:
            copier.record(block_id, [c for c, _ in items])
            written.extend(c for c, _ in items)
            for c, _ in items:
                sizes[block_id] = max(sizes.get(block_id, 0), c.offset + c.length)
            continue
        done, metas, problem = copier.copy_block(block_id, items)
        copier.record(block_id, done)
        if problem is not None:
            out.failures.append(problem)
            failed[(block_id, problem.offset or 0)] = problem.reason
        if metas:
            meta.put_chunks(block_id, metas)
        written.extend(done)
    for b in _empty_missing_blocks(report):
        if not dry_run:
            try:
                os.close(files.open_block_rw(b, create=True))
            except OSError as exc:
                out.failures.append(Problem(b, None, f"stopped: our block file: "
                                            f"{exc.strerror or exc}"))
                continue
            meta.put_chunks(b, [])
        created.append(b)
    adopted = {int(report.peer.block_id[r]): int(report.peer.block_value[r])
               for r in report.deleted_block_rows}
    out.copied = written
    out.tombstones = sorted(adopted)
    if not (written or created or adopted):
        out.status = "nothing-pulled"
        return ours
    out.status = "planned" if dry_run else "repaired"
    ours = _rebuilt_tree(ours, written, created, adopted)
    if not dry_run and (written or created):
        # data files are durable (fsynced per block); the metadata before the tree
        store.save_blocks(meta, peer.values, sorted({c.block_id for c in written}
                                                    | set(created)), ours)
        if on_step is not None:
            on_step("metadata", name)
    if not dry_run:
        store.save_tree(ours)
        if on_step is not None:
            on_step("tree", name)
    return ours


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
    for (b, o), why in sorted(failed.items()):  # pulls refused or failed, never repaired
        if (b, o) not in seen and not rows.get((b, o), False):
            out.append(Problem(b, o, f"not repaired: {why}"))
            seen.add((b, o))
    if meta is not None:
        for block in meta.sorted_blocks():
            i = tree.block_index(block.block_id)
            if i >= 0 and bool(tree.block_deleted[i]):
                continue
            for c in block.chunks:
                if c.checksum_type == NONE:
                    continue  # never in the scanner's tree (Ozone skips them)
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


def replica_groups(path: PathLike, on_error: Optional[Callable[[Path, Exception], Any]] = None
                   ) -> Dict[int, List[Path]]:
    """Replicas under a cluster directory grouped by container ID ({ID: [paths]}); entries
    the walk cannot use go to `on_error` when given (else raise)."""
    refuse_ozone(path)
    groups: Dict[int, List[Path]] = {}
    for loc in find_containers(path, on_error):
        groups.setdefault(loc.container_id, []).append(loc.root)
    return groups


#: the "format" of the JSON that `crcmerkle spark report --json` writes
SPARK_REPORT_FORMAT = "crcmerkle-spark-report"


def datanode_of(path: PathLike) -> str:
    """The datanode a replica lives on, for the vote: an Ozone volume's datanodeUuid (else
    the directory above the volume), or for the crcmerkle layout the directory above the
    replica's volume (<datanode>/<volume>/<containerID>, as the Spark scan names it)."""
    p = os.path.abspath(os.fspath(path))
    if _is_ozone(p):
        try:
            from merkle.replica.ozone.layout import find_volumes
            (volume, _), = find_volumes(p)
            return volume.datanode_uuid or os.fspath(volume.root.parent)
        except (OSError, ValueError, ReplicaError):
            pass
    return os.path.dirname(os.path.dirname(p))


def _report_int(e: Dict[str, Any], key: str, high: int, source: str, *,
                required: bool = False) -> Optional[int]:
    return command_int(e, key, high, source, "reconcile command", required=required)


def _inline_commands(report: Any, source: str) -> List[Dict[str, Any]]:
    """The "reconcile" list of a Spark report (dicts), after checking it is one."""
    if not isinstance(report, dict) or report.get("format") != SPARK_REPORT_FORMAT:
        raise ReplicaError(f"not a crcmerkle spark report (no \"format\": "
                           f"\"{SPARK_REPORT_FORMAT}\")", source)
    entries = report.get("reconcile")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ReplicaError("the report has no \"reconcile\" list of commands", source)
    return entries


def report_jobs(report: Any, source: str = "report"
                ) -> List[Tuple[List[str], Dict[str, str]]]:
    """([target replica, peer...], {peer: its datanode}) for every repair command of a Spark
    report, in round order (see jobs_from_report); the datanodes let each cast one vote.
    Only the inline "reconcile" list: load_report_jobs reads a report file's full list."""
    entries = _inline_commands(report, source)
    keyed = []
    for i, e in enumerate(entries):
        rnd = _report_int(e, "round", MAX_ROUND, source) or 0
        _report_int(e, "container_id", MAX_CONTAINER_ID, source)
        keyed.append((rnd, i, e))
    jobs: List[Tuple[List[str], Dict[str, str]]] = []
    for _, _, e in sorted(keyed, key=lambda k: (k[0], k[1])):
        target, peers = e.get("replica"), e.get("peers")
        if not isinstance(target, str) or not target or not isinstance(peers, list) \
                or not peers or not all(isinstance(p, str) and p for p in peers):
            raise ReplicaError(f"container {e.get('container_id')} on "
                               f"{str(e.get('datanode'))[:80]}: the command lacks replica "
                               f"paths (the Spark scan records them)", source)
        _check_argv(e, target, peers, source)
        names = e.get("peer_datanodes")
        if not (isinstance(names, list) and len(names) == len(peers)
                and all(isinstance(n, str) and n for n in names)):
            names = [datanode_of(p) for p in peers]
        jobs.append(([target, *peers], dict(zip(peers, names))))
    return jobs


def _check_argv(e: Dict[str, Any], target: str, peers: List[str], source: str) -> None:
    """A command's `argv` (what an operator reads, not what runs: reconcile runs replica and
    peers itself, never a shell) must be absent or exactly `crcmerkle reconcile TARGET
    PEER...`: an edited argv that says something else is refused, not silently ignored."""
    if "argv" not in e or e["argv"] is None:
        return
    argv = e["argv"]
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)) or \
            argv != ["crcmerkle", "reconcile", target, *peers]:
        raise ReplicaError(f"container {e.get('container_id')}: its \"argv\" is not "
                           f"'crcmerkle reconcile' with its replica and peers", source)


#: bounds of a report's "reconcile_commands" count
_MAX_COMMANDS = (1 << 40)


def report_commands(report: Any, report_path: PathLike) -> List[Dict[str, Any]]:
    """Every reconcile command of a Spark report read from `report_path`, as dicts, after
    checking them against the report's digest (merkle.replica.commandlist).

    The rule: the report's "reconcile_commands" says how many commands there are ("total")
    and carries a SHA-256 digest of them all ("sha256"). With a "path" the full list is read
    from there (relative to the report file's directory, or absolute: a local path; a
    directory of JSON-lines part files as Spark writes them, or one JSON-lines file): it
    must hold exactly "total" commands, its parts must be the report's "parts" (name, bytes,
    SHA-256) whose digest is "sha256", and the inline "reconcile" list must be its first
    commands. Without a path the inline list must be the whole list, with "sha256" its
    canonical digest. A report without a digest, a list that is missing, unreadable, of
    another length or another digest is a ReplicaError: never a part, never another list."""
    return _report_commands(report, report_path)[0]


def _report_commands(report: Any, report_path: PathLike
                     ) -> Tuple[List[Dict[str, Any]], List[Tuple[List[str], Dict[str, str]]]]:
    """(the commands, their jobs) of report_commands, validated (numbers, paths, argv)."""
    from merkle.replica import commandlist as cl

    source = os.fspath(report_path)
    inline = _inline_commands(report, source)
    report_jobs(report, source)  # the inline commands' numbers, paths and argv first
    rc = report.get("reconcile_commands")
    if rc is not None and not isinstance(rc, dict):
        raise ReplicaError("bad \"reconcile_commands\" (an object with total and path)",
                           source)
    rc = rc or {}
    total = _report_int(rc, "total", _MAX_COMMANDS, source)
    total = len(inline) if total is None else total
    where = rc.get("path")
    if total != len(inline) and where is None:
        raise ReplicaError(f"the report lists only {len(inline)} of its {total} reconcile "
                           f"commands and names no full list (write the report with "
                           f"--report FILE: the full list goes next to it)", source)
    digest = cl.check_digest_field(rc.get("sha256"), "the report", source)
    if where is None:
        jobs = report_jobs(report, source)
        if cl.lines_digest(inline) != digest:
            raise ReplicaError("the report's commands do not match its digest (edited, or "
                               "not this report's)", source)
        return inline, jobs
    if not isinstance(where, str) or not where or "\0" in where:
        raise ReplicaError("bad \"path\" in \"reconcile_commands\"", source)
    if "://" in where:
        raise ReplicaError(f"the full command list is at {where}: copy it next to the report "
                           f"(reconcile reads local files)", source)
    full = os.path.join(os.path.dirname(os.path.abspath(source)), where)
    try:
        entries, parts = cl.read_command_list(full)
    except OSError as exc:
        raise ReplicaError(f"cannot read the report's command list: "
                           f"{exc.strerror or exc}", full) from None
    if len(entries) != total:
        raise ReplicaError(f"the command list holds {len(entries)} command(s), the report "
                           f"says {total}: incomplete or not this report's", full)
    jobs = report_jobs(dict(report, reconcile=entries), full)
    _check_parts(rc.get("parts"), parts, digest, full)
    if entries[:len(inline)] != inline:
        raise ReplicaError("the report's inline commands are not the first ones of its full "
                           "list (edited, or not this report's)", source)
    return entries, jobs


def _check_parts(listed: Any, read: List[Any], digest: str, where: str) -> None:
    """The parts read are exactly the report's listed parts, whose digest is `digest`."""
    from merkle.replica import commandlist as cl

    if not (isinstance(listed, list) and all(
            isinstance(p, dict) and isinstance(p.get("name"), str)
            and type(p.get("bytes")) is int and isinstance(p.get("sha256"), str)
            for p in listed)):
        raise ReplicaError("the report lists no parts of its command list (\"parts\": name, "
                           "bytes, sha256 each): written by an older crcmerkle, or edited",
                           where)
    if cl.parts_digest(listed) != digest:
        raise ReplicaError("the report's part list does not match its digest (edited)", where)
    names = [p["name"] for p in listed]
    if names != [p.name for p in read]:
        raise ReplicaError(f"the command list's files ({', '.join(p.name for p in read)[:200]})"
                           f" are not the report's parts (missing, extra or renamed)", where)
    for want, got in zip(listed, read):
        if (want["bytes"], want["sha256"]) != (got.size, got.sha256):
            raise ReplicaError(f"{got.name}: does not match the report's digest of it "
                               f"(swapped, edited or not this report's)", where)


@dataclass
class ReportJob:
    """One reconcile command of a report, as run: its container, target, peers and the
    peers' datanodes (each casts one vote)."""

    container_id: int
    replicas: List[str]
    datanodes: Dict[str, str]


@dataclass
class LoadedReport:
    """A Spark report's commands (all of them, digest-checked) and what checks them."""

    jobs: List[ReportJob]
    #: the roots the scan read: every replica a command names lies under one
    roots: Optional[List[str]]
    #: on Ozone volumes: `ozone admin container reconcile` commands (the datanodes repair)
    ozone: List[List[str]]
    #: how many containers are mismatched in all (the report lists the first ones)
    mismatched: int = 0


def load_report(path: PathLike) -> LoadedReport:
    """A report file's commands (report_commands), validated, in round order; its scanned
    roots and, for replicas on Ozone volumes, the commands that ask the datanodes to
    reconcile. ReplicaError (or OSError / ValueError reading the report itself)."""
    from merkle.replica import commandlist as cl

    report = cl.read_json_file(path)
    source = os.fspath(path)
    ozone = _ozone_commands(report, source)
    entries, jobs = _report_commands(report, path)
    # report_jobs orders by (round, position): the same order gives each job its entry
    ordered = sorted(range(len(entries)), key=lambda i: (entries[i].get("round") or 0, i))
    out = []
    for i, (replicas, datanodes) in zip(ordered, jobs):
        cid = entries[i].get("container_id")
        out.append(ReportJob(-1 if cid is None else int(cid), replicas, datanodes))
    roots = report.get("scanned_roots")
    summary = report.get("summary")
    mismatched = _report_int(summary if isinstance(summary, dict) else {}, "MISMATCHED",
                             _MAX_COMMANDS, source)
    return LoadedReport(out, roots if roots is None else
                        cl.check_roots_field(roots, "the report", source), ozone,
                        max(mismatched or 0, len(ozone)))


def _ozone_commands(report: Any, source: str) -> List[List[str]]:
    """The report's "ozone_reconcile" commands (argv lists), validated: exactly
    `ozone admin container reconcile <containerID>`."""
    entries = report.get("ozone_reconcile") if isinstance(report, dict) else None
    if not entries:
        return []
    if not isinstance(entries, list):
        raise ReplicaError("bad \"ozone_reconcile\" (a list of commands)", source)
    out = []
    for e in entries:
        cid = _report_int(e if isinstance(e, dict) else {}, "containerID", MAX_CONTAINER_ID,
                          source, required=True)
        argv = ["ozone", "admin", "container", "reconcile", str(cid)]
        if e.get("argv") not in (None, argv):
            raise ReplicaError(f"container {cid}: its \"argv\" is not '{' '.join(argv)}'",
                               source)
        out.append(argv)
    return out


def check_report_job(job: ReportJob, roots: Optional[List[str]], source: str
                     ) -> Dict[str, str]:
    """Before a command runs: its target and peers are replicas of its container (their own
    metadata says so), under the roots the scan read, on volumes of one cluster, reached
    without links (merkle.replica.commandlist). ReplicaError naming what is wrong.

    Returns each peer's datanode as the disk says (datanode_of), for the vote: the
    command's "peer_datanodes" are what the report claims, and two copies on one datanode
    named as two datanodes would cast two votes."""
    from merkle.replica import commandlist as cl

    if roots is None:
        raise ReplicaError("the report names no scanned roots (\"scanned_roots\"): its "
                           "commands cannot be checked against the disk; write it again",
                           source)
    cid = job.container_id
    if cid < 0:
        raise ReplicaError("a command names no \"container_id\" (refused)", source)
    clusters = set()
    for p in job.replicas:
        root = cl.check_replica_path(p, cid, roots, source)
        clusters.add(cl.cluster_of(root))
    if len(clusters) > 1:
        raise ReplicaError(f"container {cid}: the command's replicas are on volumes of "
                           f"different clusters ({', '.join(sorted(clusters))})", source)
    for p in job.replicas:
        cl.check_replica_metadata(p, cid)
    return {p: datanode_of(p) for p in job.replicas[1:]}


def load_report_jobs(path: PathLike) -> List[Tuple[List[str], Dict[str, str]]]:
    """report_jobs for a report file: ALL its commands (report_commands), validated, in
    round order. ReplicaError (or OSError / ValueError reading the report itself)."""
    return [(j.replicas, j.datanodes) for j in load_report(path).jobs]


def jobs_from_report(report: Any, source: str = "report") -> List[List[str]]:
    """[target replica, peer...] for every repair command of a Spark report (the dict of
    `crcmerkle spark report --json`), in the report's round order. ReplicaError when it is
    not such a report, a command lacks replica paths, or a number in it is not an integer
    in range (a round of 1e400 or [1] is refused, not a crash)."""
    return [job for job, _ in report_jobs(report, source)]
