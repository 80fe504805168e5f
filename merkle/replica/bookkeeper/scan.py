"""Scan bookies: every stored entry copy verified, and placed against the ledger metadata.

`scan_bookies(paths, metadata)` reads each ledger directory found under `paths` (cookie, index,
entry logs), verifies every entry its index names (frame, IDs, digest by the ledger's digest
type, payload CRC-32C), lists entries no index names, then checks every ledger of the metadata
against the copies found: which bookie of each entry's write set holds a good copy. Everything
is read-only; a bookie is live: a log gone between listing and reading is a finding.
Findings carry the bookie (its cookie's bookieHost), ledger, entry, file and offset; their
levels are merkle.replica.levels'.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from merkle.replica import politeio
from merkle.replica.bookkeeper.bookies import (
    LedgerDir,
    dir_index_in_cookie,
    find_ledger_dirs,
    read_cookie,
)
from merkle.replica.bookkeeper.copies import Copies, Copy, bare_batch, framed_batch
from merkle.replica.bookkeeper.digest import DIGEST_LENGTHS, verify_entries
from merkle.replica.bookkeeper.entrylog import (
    COMPACTION_LEFTOVER,
    HEADER_SIZE,
    WindowReader,
    log_id_of,
    pread_exact,
    read_header,
    scan_records,
)
from merkle.replica.bookkeeper.findings import (
    BOOKIE_HOLDS_NOTHING,
    COOKIE_INVALID,
    COOKIE_MISMATCH,
    COPIES_DIFFER,
    CORRUPT_ENTRY,
    DIGEST_MISMATCH_ALL_COPIES,
    ENTRY_FRAME_INVALID,
    ENTRY_LOG_MISSING,
    ENTRY_OF_OPEN_LEDGER,
    ENTRY_PAST_LAST_ENTRY,
    INDEX_UNREADABLE,
    LEDGER_IN_WRONG_DIR,
    LEDGER_METADATA_UNREAD,
    LEDGER_NOT_IN_METADATA,
    MASTER_KEY_MISMATCH,
    MISSING_ENTRY,
    NOT_A_REGULAR_FILE,
    UNINDEXED_ENTRY,
    Finding,
)
from merkle.replica.bookkeeper.index import (
    IndexEntries,
    IndexError_,
    db_indexes,
    idx_files,
    read_idx,
)
from merkle.replica.bookkeeper.judge import (
    Coverage,
    LedgerVerdict,
    copy_order,
    holds_nothing,
    judge_ledger,
    judge_unknown_ledger,
)
from merkle.replica.bookkeeper.metadata import LedgerMetadata
from merkle.replica.bookkeeper.state import LogStates, log_identity, stat_key
from merkle.replica.safeopen import NotRegularFileError, open_dir, open_regular

__all__ = [
    "BOOKIE_HOLDS_NOTHING",
    "COOKIE_INVALID",
    "COOKIE_MISMATCH",
    "COPIES_DIFFER",
    "CORRUPT_ENTRY",
    "Copies",
    "Copy",
    "DIGEST_MISMATCH_ALL_COPIES",
    "ENTRY_FRAME_INVALID",
    "ENTRY_LOG_MISSING",
    "ENTRY_OF_OPEN_LEDGER",
    "ENTRY_PAST_LAST_ENTRY",
    "Finding",
    "INDEX_UNREADABLE",
    "LEDGER_IN_WRONG_DIR",
    "LEDGER_METADATA_UNREAD",
    "LEDGER_NOT_IN_METADATA",
    "MASTER_KEY_MISMATCH",
    "MISSING_ENTRY",
    "Coverage",
    "LedgerVerdict",
    "Listing",
    "ScanReport",
    "StorageScan",
    "UNINDEXED_ENTRY",
    "copy_order",
    "coverage_of",
    "holds_nothing",
    "judge_ledger",
    "judge_unknown_ledger",
    "list_bookies",
    "scan_bookies",
    "scan_storage",
]

#: one read of an entry log takes at most this many bytes (plus one entry larger than it)
READ_WINDOW = 16 << 20
#: entry logs at least this large are read past the page cache (politeio.direct_twin);
#: smaller ones buffered: little to save, and an O_DIRECT read first writes back the range's
#: dirty pages, which a small, just-written log is mostly made of (a bookie's full logs are
#: 1 GiB, entryLogSizeLimit's default)
DIRECT_MIN_BYTES = 64 << 20
#: the largest entry read at all (BookKeeper's nettyMaxFrameSizeBytes default is 5 MiB); a
#: larger size field is a finding, never an allocation
MAX_ENTRY_BYTES = 64 << 20
_MIN_SANE_ENTRY = 16
_SHOWN = 20  # entries listed in one finding's detail


@dataclass
class ScanReport:
    findings: List[Finding] = field(default_factory=list)
    copies: Copies = field(default_factory=Copies)
    failed: List[Dict[str, str]] = field(default_factory=list)
    ledgers: List[Dict[str, Any]] = field(default_factory=list)
    bookies: Dict[str, List[str]] = field(default_factory=dict)
    bytes_read: int = 0
    #: the --also CRCs to compute over each framed copy's payload (the scan's setting)
    also: Tuple[str, ...] = ()
    #: the census (metadata_only): the indexes and the logs' sizes read, no entry
    census: bool = False
    #: --state: the logs' records (a log unchanged and fresh is not read again)
    states: Optional[LogStates] = None
    #: called with (ledger directory, bytes) after each read of an entry log: the byte rate
    #: (--bytes-per-second) and the --loop service's stop (it raises there: the read in
    #: progress is done, the log in flight is not recorded and is read again next time)
    pace: Optional[Callable[[str, int], None]] = None

    def add(self, kind: str, detail: str, **where: Any) -> None:
        self.findings.append(Finding(kind, detail, **where))


# ---- one ledger directory -----------------------------------------------------------------


@dataclass
class _DirIndex:
    entries: IndexEntries  # sorted by (ledger, entry, location)
    ledgers: Set[int]
    storage: str  # "DbLedgerStorage" or "InterleavedLedgerStorage"
    #: the master key the bookie keeps per ledger (LedgerData.masterKey, the .idx header)
    master_keys: Dict[int, bytes] = field(default_factory=dict)

    def names(self, lid: int, eid: int) -> bool:
        """Whether the index names entry `eid` of ledger `lid` (at any location): a
        bisection in the sorted columns, asked only of records no run of indexed ones
        covers."""
        e = self.entries
        lo = int(np.searchsorted(e.ledger, lid, "left"))
        hi = int(np.searchsorted(e.ledger, lid, "right"))
        at = lo + int(np.searchsorted(e.entry[lo:hi], eid, "left"))
        return at < hi and int(e.entry[at]) == eid


def _read_index(
    d: LedgerDir, current_fd: int, report: ScanReport, bookie: str
) -> Optional[_DirIndex]:
    names = set(os.listdir(current_fd if d.index_path is None else d.index_current))
    if "locations" in names or "ledgers" in names:
        try:
            ledger_data, db_entries, problems = db_indexes(d.index_current)
        except IndexError_ as exc:
            report.add(INDEX_UNREADABLE, str(exc), bookie=bookie, file=d.index_current)
            return None
        for p in problems:
            report.add(INDEX_UNREADABLE, p, bookie=bookie, file=d.index_current)
        return _DirIndex(
            db_entries.sorted(),
            set(ledger_data) | set(np.unique(db_entries.ledger).tolist()),
            "DbLedgerStorage",
            {lid: v.master_key for lid, v in ledger_data.items() if v.master_key},
        )
    parts: List[IndexEntries] = []
    ledgers: Set[int] = set()
    keys: Dict[int, bytes] = {}
    for a, b, name in idx_files(current_fd):
        shown = os.path.join(d.current, a, b, name)
        try:
            idx = read_idx(current_fd, a, b, name)
        except NotRegularFileError as exc:
            report.add(NOT_A_REGULAR_FILE, f"{exc.strerror}: never read", bookie=bookie, file=shown)
            continue
        except OSError as exc:
            report.add(INDEX_UNREADABLE, f"{exc.strerror or exc}", bookie=bookie, file=shown)
            continue
        if idx.problem:
            report.add(
                INDEX_UNREADABLE, idx.problem, bookie=bookie, ledger=idx.ledger_id, file=shown
            )
            if not len(idx.locations):
                continue
        ledgers.add(idx.ledger_id)
        parts.append(
            IndexEntries(
                np.full(len(idx.entries), idx.ledger_id, np.int64), idx.entries, idx.locations
            )
        )
        if idx.master_key:
            keys[idx.ledger_id] = idx.master_key
    return _DirIndex(IndexEntries.concat(parts).sorted(), ledgers, "InterleavedLedgerStorage", keys)


def _digest_of(meta: Optional[LedgerMetadata]) -> Tuple[str, bytes, bool]:
    """(digest type to verify with, password, whether the digest is checked): a ledger
    without metadata or digest type gets its frame checked only."""
    if meta is None or meta.digest_type is None:
        return "DUMMY", b"", False
    return meta.digest_type, meta.password, True


@dataclass
class _Todo:
    """The index entries of one log, sorted by position (after each entry's size field)."""

    pos: np.ndarray
    ledger: np.ndarray
    entry: np.ndarray

    def __len__(self) -> int:
        return len(self.pos)

    def take(self, rows: Any) -> _Todo:
        return _Todo(self.pos[rows], self.ledger[rows], self.entry[rows])


def _bare(report: ScanReport, bookie: str, shown: str, todo: _Todo, **fields: Any) -> None:
    """Copies of `todo` that were not read (their location, log or size field is bad)."""
    report.copies.add_batch(
        bare_batch(
            bookie=bookie,
            file=shown,
            positions=todo.pos,
            ledgers=todo.ledger,
            entries=todo.entry,
            **fields,
        )
    )


def _outside(todo: _Todo, file_size: int, bookie: str, shown: str, report: ScanReport) -> _Todo:
    """The index locations that cannot hold an entry of a log of `file_size` bytes (before
    the log's header and its size field, or without room for the smallest frame): one
    finding and a bare copy each; returns the others."""
    bad = (todo.pos < HEADER_SIZE + 4) | (todo.pos + _MIN_SANE_ENTRY > file_size)
    if bad.any():
        out = todo.take(bad)
        for pos, lid, eid in zip(out.pos.tolist(), out.ledger.tolist(), out.entry.tolist()):
            report.add(
                ENTRY_FRAME_INVALID,
                f"the index location {pos} lies outside the "
                f"log's entries (log of {file_size} bytes): the entry is gone",
                bookie=bookie,
                ledger=lid,
                entry=eid,
                file=shown,
                offset=pos,
            )
        _bare(report, bookie, shown, out)
        todo = todo.take(~bad)
    return todo


def _size_fields(window: Any, at: np.ndarray) -> np.ndarray:
    """The big-endian int32 size field at each offset `at` of `window`."""
    b = np.frombuffer(window, np.uint8)
    v = (
        (b[at].astype(np.uint32) << 24)
        | (b[at + 1].astype(np.uint32) << 16)
        | (b[at + 2].astype(np.uint32) << 8)
        | b[at + 3].astype(np.uint32)
    )
    return v.view(np.int32).astype(np.int64)


def _verify_log(
    fd: int,
    file_size: int,
    shown: str,
    bookie: str,
    todo: _Todo,
    metadata: Dict[int, LedgerMetadata],
    report: ScanReport,
    pace: Optional[Callable[[int], None]] = None,
    direct: Optional[int] = None,
) -> Dict[int, int]:
    """Verify the index entries `todo` of one log, a window of READ_WINDOW bytes at a time
    (through `direct`, the log's O_DIRECT twin, where there is one: WindowReader):
    each window's entries are found, size-checked and verified by columns, none by a Python
    step of its own. Returns the runs of back-to-back records whose size fields it read (the
    start of a run's first size field -> the end of its last record), for the walk of
    unindexed records."""
    todo = _outside(todo, file_size, bookie, shown, report)
    framed_pos: List[np.ndarray] = []
    framed_size: List[np.ndarray] = []
    i = 0
    n = len(todo)
    reader = WindowReader(min(READ_WINDOW, file_size), direct)
    while i < n:
        base = int(todo.pos[i]) - 4
        window = reader.read(fd, min(READ_WINDOW, file_size - base), base)
        report.bytes_read += len(window)
        if pace is not None:
            pace(len(window))
        # the entries whose size field lies inside the window
        j = i + int(np.searchsorted(todo.pos[i:], base + len(window) - 4 + 4, "right"))
        j = max(j, i)
        at = todo.pos[i:j] - 4 - base
        sizes = _size_fields(window, at)
        pos = todo.pos[i:j]
        bad = (sizes <= 0) | (pos + sizes > file_size) | (sizes > MAX_ENTRY_BYTES)
        fits = at + 4 + sizes <= len(window)
        stop = np.flatnonzero(~bad & ~fits)
        k = int(stop[0]) if len(stop) else j - i  # the first good entry past the window
        rows = np.arange(i, i + k)
        if k:
            ok, broken = rows[~bad[:k]], rows[bad[:k]]
            for r in broken.tolist():
                size = int(sizes[r - i])
                report.add(
                    ENTRY_FRAME_INVALID,
                    f"size field {size & 0xFFFFFFFF} at offset "
                    f"{int(todo.pos[r]) - 4}: past the end of the {file_size}-byte log or "
                    f"not a size (never read)",
                    bookie=bookie,
                    ledger=int(todo.ledger[r]),
                    entry=int(todo.entry[r]),
                    file=shown,
                    offset=int(todo.pos[r]),
                )
            if len(broken):
                _bare(report, bookie, shown, todo.take(broken), sizes=sizes[broken - i])
            if len(ok):
                _check_batch(
                    window, base, todo.take(ok), sizes[ok - i], shown, bookie, metadata, report
                )
                framed_pos.append(todo.pos[ok])
                framed_size.append(sizes[ok - i])
            i += k
            continue
        # the window's first entry does not fit in it (or the window holds not even its size)
        size = int(sizes[0]) if len(sizes) else 0
        if size > READ_WINDOW - 4:  # one entry larger than a window
            big = pread_exact(fd, size + 4, base)
            report.bytes_read += len(big)
            if pace is not None:
                pace(len(big))
            if len(big) == size + 4:  # else the log shrank: reported below
                one = todo.take(slice(i, i + 1))
                _check_batch(big, base, one, np.array([size]), shown, bookie, metadata, report)
                framed_pos.append(one.pos)
                framed_size.append(np.array([size], np.int64))
                i += 1
                continue
        # nothing could be read at this entry: the log shrank under the scan
        report.add(
            ENTRY_FRAME_INVALID,
            f"the log ends before the entry (it shrank while "
            f"being read: now {os.fstat(fd).st_size} bytes)",
            bookie=bookie,
            ledger=int(todo.ledger[i]),
            entry=int(todo.entry[i]),
            file=shown,
            offset=int(todo.pos[i]),
        )
        _bare(report, bookie, shown, todo.take(slice(i, i + 1)))
        i += 1
    if not framed_pos:
        return {}
    return _runs(np.concatenate(framed_pos), np.concatenate(framed_size))


def _runs(pos: np.ndarray, size: np.ndarray) -> Dict[int, int]:
    """Records (pos of the entry, after its size field; size) as runs of back-to-back
    records: the start of a run's first size field -> the end of its last record."""
    pos, first = np.unique(np.asarray(pos, np.int64), return_index=True)
    if not len(pos):
        return {}
    size = np.asarray(size, np.int64)[first]
    starts, ends = pos - 4, pos + size
    new = np.ones(len(pos), bool)
    new[1:] = starts[1:] != ends[:-1]
    last = np.ones(len(pos), bool)
    last[:-1] = new[1:]
    return dict(zip(starts[new].tolist(), ends[last].tolist()))


def _check_batch(
    window: Union[bytes, memoryview],
    base: int,
    todo: _Todo,
    sizes: np.ndarray,
    shown: str,
    bookie: str,
    metadata: Dict[int, LedgerMetadata],
    report: ScanReport,
) -> None:
    """Verify the entries `todo` (with their `sizes`) inside `window`, whose byte 0 is at
    log offset `base`: one native call per ledger among them, the copies as one batch."""
    ledgers = todo.ledger
    for lid in (np.unique(ledgers) if (ledgers != ledgers[0]).any() else ledgers[:1]).tolist():
        rows = np.flatnonzero(ledgers == lid) if len(ledgers) > 1 else slice(None)
        pos, size, eid = todo.pos[rows], sizes[rows], todo.entry[rows]
        digest_type, password, checked = _digest_of(metadata.get(lid))
        r = verify_entries(window, pos - base, size, digest_type, password, also=report.also)
        n = DIGEST_LENGTHS[digest_type]
        ids_ok = (r["ledger_id"] == lid) & (r["entry_id"] == eid)
        frame_ok = r["frame_ok"] & ids_ok
        problems: Dict[int, str] = {}
        for k in np.flatnonzero(~frame_ok).tolist():
            if not r["frame_ok"][k]:
                why = (
                    f"an entry of {int(size[k])} bytes, shorter than its "
                    f"32-byte header and {n}-byte {digest_type} digest"
                )
            else:
                why = (
                    f"the index names ledger {lid} entry {int(eid[k])}, the log holds "
                    f"ledger {int(r['ledger_id'][k])} entry {int(r['entry_id'][k])} there"
                )
            report.add(
                ENTRY_FRAME_INVALID,
                why,
                bookie=bookie,
                ledger=lid,
                entry=int(eid[k]),
                file=shown,
                offset=int(pos[k]),
            )
        for k in np.flatnonzero(frame_ok & ~r["digest_ok"]).tolist():
            at = int(pos[k]) - base + 32
            stored = bytes(window[at : at + n]).hex()
            problems[k] = (
                f"stored {digest_type} digest {stored}, computed "
                f"{int(r['computed_digest'][k]):0{2 * n}x}"
                if digest_type != "HMAC"
                else f"stored HMAC-SHA1 {stored} does not match"
            )
        report.copies.add_batch(
            framed_batch(
                window,
                base,
                bookie=bookie,
                ledger=lid,
                file=shown,
                positions=pos,
                sizes=size,
                entries=eid,
                frame_ok=frame_ok,
                digest_ok=r["digest_ok"],
                verified=checked,
                digest_length=n,
                payload_crc32c=r["payload_crc32c"],
                last_add_confirmed=r["last_add_confirmed"],
                problems=problems,
                also={a: r[f"payload_{a}"] for a in report.also},
            )
        )


def _check_master_keys(
    d: LedgerDir,
    bookie: str,
    index: _DirIndex,
    metadata: Dict[int, LedgerMetadata],
    report: ScanReport,
) -> None:
    """The master key a bookie keeps for a ledger is SHA-1("ledger" + password)
    (DigestManager.generateMasterKey): another one means the metadata's password is not the
    one the ledger was written with (every HMAC digest would fail identically, which is then
    no client bug), or the data is of another ledger that had this ID."""
    for lid, key in sorted(index.master_keys.items()):
        meta = metadata.get(lid)
        if meta is None or meta.digest_type is None:
            continue  # no password known (v1 metadata) or no metadata: nothing to compare
        want = hashlib.sha1(b"ledger" + meta.password).digest()
        if key != want:
            report.add(
                MASTER_KEY_MISMATCH,
                f"the bookie's master key {key.hex()[:40]} is not "
                f'SHA-1("ledger" + the metadata\'s password) {want.hex()}: the '
                f"password is not the ledger's, or the data is another ledger's",
                bookie=bookie,
                ledger=lid,
                file=d.current,
            )


def _is_db_storage(d: LedgerDir) -> bool:
    """Whether the directory holds DbLedgerStorage's RocksDBs (in it, or in its index
    directory); else it is Interleaved/Sorted storage's (`.idx` files)."""
    try:
        names = set(os.listdir(d.index_current))
    except OSError:
        return False
    return "locations" in names or "ledgers" in names


def _storages(ds: List[LedgerDir]) -> List[List[LedgerDir]]:
    """A bookie's ledger storages: each DbLedgerStorage directory is one (a
    SingleDirectoryDbLedgerStorage with its own entry logger and indexes); all its
    Interleaved/Sorted directories are one: a single entry logger puts each new log in any of
    them and each ledger's `.idx` lands in any of them (DefaultEntryLogger.findFile and
    IndexPersistenceMgr.findIndexFile search every ledger directory)."""
    db = [[d] for d in ds if _is_db_storage(d)]
    interleaved = [d for d in ds if not _is_db_storage(d)]
    return db + ([interleaved] if interleaved else [])


def _pooled(parts: List[_DirIndex]) -> _DirIndex:
    """The index of a storage over several directories: every directory's `.idx` entries."""
    if len(parts) == 1:
        return parts[0]
    keys: Dict[int, bytes] = {}
    for part in parts:
        keys.update(part.master_keys)
    return _DirIndex(
        IndexEntries.concat(part.entries for part in parts).sorted(),
        set().union(*(part.ledgers for part in parts)),
        parts[0].storage,
        keys,
    )


def _scan_storage(
    ds: List[LedgerDir], bookie: str, metadata: Dict[int, LedgerMetadata], report: ScanReport
) -> Dict[str, _DirIndex]:
    """Verify one ledger storage of a bookie (see _storages): its index, then every entry
    log of its directories against it. Returns the index by directory path (the directories
    whose index was read)."""
    fds: Dict[str, int] = {}
    try:
        for d in ds:
            try:
                top = open_dir(d.path, follow=True)
                try:
                    fds[d.path] = open_dir("current", top)
                finally:
                    os.close(top)
            except OSError as exc:
                report.failed.append({"path": d.path, "error": f"{d.path}: {exc.strerror or exc}"})
        read = [(d, _read_index(d, fds[d.path], report, bookie)) for d in ds if d.path in fds]
        parts = [(d, index) for d, index in read if index is not None]
        if not parts:
            return {}
        index = _pooled([i for _, i in parts])
        _check_master_keys(parts[0][0], bookie, index, metadata, report)
        by_log = _by_log(index.entries)
        logs: Dict[int, Tuple[LedgerDir, str]] = {}
        for d, _ in parts:
            for name in sorted(os.listdir(fds[d.path])):
                if COMPACTION_LEFTOVER.fullmatch(name):
                    report.add(
                        UNINDEXED_ENTRY,
                        "a compaction's leftover file (a compaction was "
                        "interrupted; BookKeeper finishes or removes it at start-up): its "
                        "entries are not read",
                        bookie=bookie,
                        file=os.path.join(d.current, name),
                    )
                listed = log_id_of(name)
                if listed is not None:
                    logs.setdefault(listed, (d, name))  # the first directory, as findFile
        ids = sorted(set(by_log) | set(logs))
        where = {i: logs.get(i, (parts[0][0], f"{i:x}.log")) for i in ids}
        states = None if report.census else report.states
        found: Dict[int, List[Finding]] = {}
        order: List[int] = ids
        known: Dict[int, Tuple[Tuple[int, ...], str]] = {}
        if states is not None:  # a periodic pass: what is most at risk first
            order, known = _by_risk(ids, where, fds, bookie, by_log, metadata, states)
        for log_id in order:
            d, name = where[log_id]
            todo = by_log.get(log_id, _NO_TODO)
            start = len(report.findings)
            if report.census:
                _census_log(fds[d.path], d, name, bookie, todo, report)
            else:
                _one_log(
                    fds[d.path], d, name, bookie, todo, index, metadata, report, known.get(log_id)
                )
            found[log_id] = report.findings[start:]
            del report.findings[start:]
        for log_id in ids:  # in the logs' order whatever order they were read in
            report.findings.extend(found.get(log_id, ()))
        return {d.path: index for d, _ in parts}
    finally:
        for fd in fds.values():
            os.close(fd)


_NO_TODO = _Todo(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))


def _by_risk(
    ids: List[int],
    where: Dict[int, Tuple[LedgerDir, str]],
    fds: Dict[str, int],
    bookie: str,
    by_log: Dict[int, _Todo],
    metadata: Dict[int, LedgerMetadata],
    states: LogStates,
) -> Tuple[List[int], Dict[int, Tuple[Tuple[int, ...], str]]]:
    """The logs `ids` in the order a periodic pass reads them (LogStates.risk): changed and
    never-verified first, then the oldest verified, the fresh ones (not read) last; each by
    its file as it is now (lstat: a log that is gone or not a regular file goes first, and
    its read says what is wrong). Also each ranked log's identity with the stat it was taken
    from (state.stat_key): the read takes its identity again from the file it opens, and reuses
    this one only when that file's stat is the same (the index digest is not computed twice)."""
    ranked = []
    known: Dict[int, Tuple[Tuple[int, ...], str]] = {}
    for log_id in ids:
        d, name = where[log_id]
        rank: Tuple[int, float] = (0, 0.0)
        try:
            st = os.stat(name, dir_fd=fds[d.path], follow_symlinks=False)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            todo = by_log.get(log_id, _NO_TODO)
            identity = log_identity(st, todo.pos, todo.ledger, todo.entry, metadata)
            known[log_id] = (stat_key(st), identity)
            rank = states.risk(states.key(bookie, os.path.join(d.current, name)), identity)
        ranked.append((rank, log_id))
    return [log_id for _, log_id in sorted(ranked)], known


def _by_log(entries: IndexEntries) -> Dict[int, _Todo]:
    """The index entries of each log (the location's high 32 bits), sorted by position."""
    loc = entries.location.astype(np.uint64)
    log_ids = (loc >> np.uint64(32)).astype(np.int64)
    pos = (loc & np.uint64(0xFFFFFFFF)).astype(np.int64)
    order = np.lexsort((entries.entry, entries.ledger, pos, log_ids))
    log_ids, pos = log_ids[order], pos[order]
    ledger, entry = entries.ledger[order], entries.entry[order]
    if not len(order):
        return {}
    cuts = np.flatnonzero(log_ids[1:] != log_ids[:-1]) + 1
    out = {}
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)]):
        out[int(log_ids[a])] = _Todo(pos[a:b], ledger[a:b], entry[a:b])
    return out


def _one_log(
    current_fd: int,
    d: LedgerDir,
    name: str,
    bookie: str,
    todo: _Todo,
    index: _DirIndex,
    metadata: Dict[int, LedgerMetadata],
    report: ScanReport,
    known: Optional[Tuple[Tuple[int, ...], str]] = None,
) -> None:
    """Verify one entry log (or carry its record). `known`: (stat_key, identity) the pass's
    order took of it (_by_risk), used when the opened file's stat is the same."""
    shown = os.path.join(d.current, name)
    try:
        fd = open_regular(current_fd, name)
    except FileNotFoundError:
        if len(todo):
            _log_gone(todo, shown, bookie, _GONE, report)
        return
    except NotRegularFileError as exc:
        report.add(NOT_A_REGULAR_FILE, f"{exc.strerror}: never read", bookie=bookie, file=shown)
        _log_gone(todo, shown, bookie, "the entry log is not a regular file", report)
        return
    try:
        st = os.fstat(fd)
        size = st.st_size
        states, key, identity = report.states, "", ""
        if states is not None:
            key = states.key(bookie, shown)
            if known is not None and known[0] == stat_key(st):
                identity = known[1]
            else:
                identity = log_identity(st, todo.pos, todo.ledger, todo.entry, metadata)
            carried = states.carried(key, identity, d.path)
            if carried is not None:  # unchanged and fresh: not read again
                report.findings.extend(carried.findings)
                for b in carried.copies:
                    report.copies.add_batch(b)
                _unindexed_findings(carried.unindexed, shown, bookie, index, report)
                return
        found, mark, read = len(report.findings), report.copies.mark(), report.bytes_read
        read_at, t0 = time.time(), time.monotonic()
        pace = None if report.pace is None else functools.partial(report.pace, d.path)
        if hasattr(os, "posix_fadvise"):  # a hint (read-ahead), no write: the walk is in order
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        header = read_header(fd, size)
        if header.problem and len(todo):
            report.add(
                ENTRY_FRAME_INVALID,
                f"entry log header: {header.problem}",
                bookie=bookie,
                file=shown,
            )
        runs: Dict[int, int] = {}
        if len(todo):
            # past the page cache: a scan reads each log once, and a buffered cold read
            # costs the kernel more CPU than verifying the bytes (politeio.direct_twin)
            direct = politeio.direct_twin(fd) if size >= DIRECT_MIN_BYTES else None
            try:
                runs = _verify_log(fd, size, shown, bookie, todo, metadata, report, pace, direct)
            finally:
                if direct is not None:
                    os.close(direct)
        unindexed = _unindexed_records(fd, size, todo, runs)
        if states is not None:
            states.save(
                key,
                identity,
                read_at,
                report.findings[found:],
                report.copies.batches_since(mark),
                unindexed,
                report.bytes_read - read,
                volume=d.path,
                seconds=time.monotonic() - t0,
            )
        _unindexed_findings(unindexed, shown, bookie, index, report)
    finally:
        os.close(fd)


def _census_log(
    current_fd: int,
    d: LedgerDir,
    name: str,
    bookie: str,
    todo: _Todo,
    report: ScanReport,
) -> None:
    """The census of one entry log: its type and size from the directory (`fstatat`, no
    link followed, the file never opened) and each index location checked against that
    size; what the index names inside the log is an indexed copy (Copy.indexed), not a
    verified one. Records no index names are not looked for (that needs the log's bytes)."""
    shown = os.path.join(d.current, name)
    try:
        st = os.stat(name, dir_fd=current_fd, follow_symlinks=False)
    except FileNotFoundError:
        if len(todo):
            _log_gone(todo, shown, bookie, _GONE, report)
        return
    except OSError as exc:
        report.failed.append({"path": shown, "error": f"{shown}: {exc.strerror or exc}"})
        return
    if not stat.S_ISREG(st.st_mode):
        report.add(NOT_A_REGULAR_FILE, "not a regular file: never read", bookie=bookie, file=shown)
        _log_gone(todo, shown, bookie, "the entry log is not a regular file", report)
        return
    inside = _outside(todo, st.st_size, bookie, shown, report)
    _bare(report, bookie, shown, inside, indexed=True)


#: why a log the index points into cannot be opened: the bookie is live
_GONE = (
    "the entry log is gone (deleted by garbage collection or compaction since the index was "
    "read, or lost)"
)


def _log_gone(todo: _Todo, shown: str, bookie: str, why: str, report: ScanReport) -> None:
    ledgers = np.unique(todo.ledger).tolist()
    report.add(
        ENTRY_LOG_MISSING,
        f"{why}: {len(todo)} index entries point into it "
        f"(ledgers {', '.join(map(str, ledgers[:_SHOWN]))})",
        bookie=bookie,
        ledger=ledgers[0] if len(ledgers) == 1 else None,
        file=shown,
    )
    _bare(report, bookie, shown, todo)


def _unindexed_records(
    fd: int, size: int, todo: _Todo, runs: Optional[Dict[int, int]] = None
) -> List[Tuple[int, int, int]]:
    """(ledger, entry, pos) of the records in the log that no index entry of it names:
    _verify_log's runs of indexed records are stepped over whole."""
    here = todo.pos  # sorted
    out = []
    for rec in scan_records(fd, size, runs):
        at = int(np.searchsorted(here, rec.pos))
        if at < len(here) and int(here[at]) == rec.pos:
            continue
        out.append((rec.ledger_id, rec.entry_id, rec.pos))
    return out


def _unindexed_findings(
    records: List[Tuple[int, int, int]],
    shown: str,
    bookie: str,
    index: _DirIndex,
    report: ScanReport,
) -> None:
    """Records of the log that no index entry names at any location: one finding per
    ledger and log (a compaction's copy of an indexed entry elsewhere is expected)."""
    extra: Dict[int, List[Tuple[int, int]]] = defaultdict(list)
    for lid, eid, pos in records:
        if not index.names(lid, eid):
            extra[lid].append((eid, pos))
    for lid, items in sorted(extra.items()):
        ids = ", ".join(str(e) for e, _ in items[:_SHOWN])
        report.add(
            UNINDEXED_ENTRY,
            f"{len(items)} entr{'y' if len(items) == 1 else 'ies'} "
            f"({ids}{' ...' if len(items) > _SHOWN else ''}) in the log that no index "
            f"names: a compaction's or deleted ledger's leftover, or an add whose "
            f"index was lost; BookKeeper never reads them",
            bookie=bookie,
            ledger=lid,
            entry=items[0][0],
            file=shown,
            offset=items[0][1],
        )


# ---- bookies and their cookies ------------------------------------------------------------


def _check_cookies(
    dirs: List[LedgerDir],
    instance_id: Optional[str],
    registered: Optional[Dict[str, bytes]],
    report: ScanReport,
    vote: bool = True,
) -> Dict[str, List[LedgerDir]]:
    """The readable ledger directories grouped by bookie ID, cookie disagreements reported:
    between one bookie's directories, between bookies' instanceIds, with the metadata's
    INSTANCEID and registered cookies, and a directory its own cookie does not list.
    Without an INSTANCEID the bookies' majority is the cluster's, unless `vote` is False
    (a data-local task sees one host's bookies: the driver votes over all of them)."""
    by_bookie: Dict[str, List[LedgerDir]] = defaultdict(list)
    for d in dirs:
        read_cookie(d)
        if d.cookie is None:
            report.add(COOKIE_INVALID, f"{d.problem}: the directory is not read", file=d.current)
            continue
        by_bookie[d.cookie.bookie_id].append(d)
    for bookie, ds in by_bookie.items():
        first = ds[0].cookie
        for d in ds[1:]:
            if d.cookie != first:
                report.add(
                    COOKIE_MISMATCH,
                    f"the cookie differs from {ds[0].path}'s "
                    f"(BookKeeper refuses to start: Cookie.verify)",
                    bookie=bookie,
                    file=os.path.join(d.current, "VERSION"),
                )
        if registered is not None:
            _against_registered(bookie, ds[0], registered.get(bookie), report)
        for d in ds:
            assert d.cookie is not None
            if (
                dir_index_in_cookie(d.path, d.cookie) is None
                and dir_index_in_cookie(d.path, d.cookie, index=True) is None
            ):
                report.add(
                    COOKIE_MISMATCH,
                    "the cookie does not list this directory among "
                    "its ledgerDirs (a directory moved or from another bookie)",
                    bookie=bookie,
                    file=os.path.join(d.current, "VERSION"),
                )
    ids = {
        b: ds[0].cookie.instance_id  # type: ignore[union-attr]
        for b, ds in by_bookie.items()
        if ds[0].cookie.instance_id  # type: ignore[union-attr]
    }
    expected = instance_id
    if expected is None and not vote:
        return by_bookie
    if expected is None and ids:
        counts: Dict[str, int] = defaultdict(int)
        for v in ids.values():
            counts[v] += 1
        expected = max(sorted(counts), key=lambda v: counts[v])
    for bookie, value in sorted(ids.items()):
        if expected is not None and value != expected:
            report.add(
                COOKIE_MISMATCH,
                f"instanceId {value[:64]} is not the cluster's "
                f"{expected[:64]} (a bookie of another cluster)",
                bookie=bookie,
                file=os.path.join(by_bookie[bookie][0].current, "VERSION"),
            )
    return by_bookie


def _against_registered(
    bookie: str, d: LedgerDir, raw: Optional[bytes], report: ScanReport
) -> None:
    """The bookie's cookie against the one the metadata store registers for its ID
    (`cookies/<bookieId>`; Cookie.verify compares them at every start)."""
    from merkle.replica.bookkeeper.cookie import CookieError, parse_cookie

    where = dict(bookie=bookie, file=os.path.join(d.current, "VERSION"))
    if raw is None:
        report.add(
            COOKIE_MISMATCH,
            "the metadata store registers no cookie for this bookie "
            "ID (a bookie of another cluster, or its registration was removed)",
            **where,
        )
        return
    try:
        theirs = parse_cookie(raw)
    except CookieError as exc:
        report.add(COOKIE_MISMATCH, f"the registered cookie does not parse: {exc}", **where)
        return
    if theirs != d.cookie:
        report.add(
            COOKIE_MISMATCH,
            "the cookie differs from the one the metadata store "
            "registers for this bookie ID (BookKeeper refuses to start: "
            "Cookie.verify)",
            **where,
        )


def _pair_index_dirs(by_bookie: Dict[str, List[LedgerDir]], report: ScanReport) -> None:
    """With `indexDirs` in a bookie's cookie, DbLedgerStorage keeps ledger dir i's RocksDBs
    in index dir i: each ledger directory gets its partner (`index_path`), and the index
    directories are no ledger directories of their own. A ledger directory whose index
    directory was not given is one finding and is not read (its entries have no index)."""
    for bookie, ds in by_bookie.items():
        cookie = ds[0].cookie
        if cookie is None or not cookie.index_dirs:
            continue
        index_at = {}
        for d in ds:
            pos = dir_index_in_cookie(d.path, cookie, index=True)
            if pos is not None:
                index_at[pos] = d
        kept = []
        for d in ds:
            pos = dir_index_in_cookie(d.path, cookie)
            if pos is None:
                if d not in index_at.values():
                    kept.append(d)  # listed nowhere: COOKIE_MISMATCH said so; read as is
                continue
            if pos < len(cookie.index_dirs) and cookie.index_dirs[pos] != cookie.ledger_dirs[pos]:
                partner = index_at.get(pos)
                if partner is None:
                    report.add(
                        INDEX_UNREADABLE,
                        f"its index directory "
                        f"{cookie.index_dirs[pos][:200]!r} (the cookie's indexDirs) "
                        f"was not given: the directory is not read",
                        bookie=bookie,
                        file=d.current,
                    )
                    continue
                d.index_path = partner.path
            kept.append(d)
        by_bookie[bookie] = kept


# ---- placement ----------------------------------------------------------------------------


def coverage_of(by_bookie: Dict[str, List[LedgerDir]], read: Dict[str, str]) -> Coverage:
    """The Coverage of a scan: `read` maps each directory whose index was read to its
    storage kind ("DbLedgerStorage" or "InterleavedLedgerStorage")."""
    cov = Coverage()
    for bookie, ds in by_bookie.items():
        if not any(d.path in read for d in ds):
            continue
        cookie = ds[0].cookie
        assert cookie is not None
        positions = {dir_index_in_cookie(d.path, cookie) for d in ds if d.path in read}
        db = any(read[d.path] == "DbLedgerStorage" for d in ds if d.path in read)
        cov.scanned[bookie] = (
            len(cookie.ledger_dirs),
            tuple(sorted(p for p in positions if p is not None)),
            db,
        )
    return cov


def _place(
    metadata: Dict[int, LedgerMetadata],
    coverage: Coverage,
    report: ScanReport,
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
) -> None:
    """Every ledger judged (judge_ledger, judge_unknown_ledger), then the bookie-wide check
    (holds_nothing), all over the copies of one process's scan (a census's when
    report.census)."""
    by_ledger = _by_ledger(report.copies.table())
    empty = report.copies.table().slice(0, 0)
    expected: Dict[str, int] = defaultdict(int)
    held: Dict[str, int] = defaultdict(int)
    missing: Dict[str, List[Finding]] = defaultdict(list)
    for lid in sorted(metadata):
        verdict = judge_ledger(
            lid, metadata[lid], by_ledger.get(lid, empty), coverage, census=report.census
        )
        report.findings.extend(verdict.findings)
        report.ledgers.append(verdict.summary)
        for bookie, n in verdict.expected.items():
            expected[bookie] += n
        for bookie, n in verdict.held.items():
            held[bookie] += n
        for bookie, found in verdict.missing.items():
            missing[bookie].extend(found)
    nothing = holds_nothing(expected, held)
    for bookie, found in sorted(missing.items()):
        report.findings.extend([nothing[bookie]] if bookie in nothing else found)
    # ledgers the metadata no longer has: garbage not yet collected
    gone = [
        f
        for lid in sorted(set(by_ledger) - set(metadata))
        for f in judge_unknown_ledger(lid, by_ledger[lid], unread, metadata_complete)
    ]
    report.findings.extend(sorted(gone, key=lambda f: (f.bookie or "", f.ledger or 0)))


def _by_ledger(table: pa.Table) -> Dict[int, pa.Table]:
    """The copies of each ledger (slices of `table` sorted by ledger: no copy per row)."""
    if not table.num_rows:
        return {}
    table = table.take(pc.sort_indices(table, sort_keys=[("ledger", "ascending")]))
    ledgers = table["ledger"].to_numpy()
    cuts = np.flatnonzero(ledgers[1:] != ledgers[:-1]) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(ledgers)]
    return {int(ledgers[a]): table.slice(a, b - a) for a, b in zip(starts, ends)}


def _wrong_dir(ds: List[LedgerDir], bookie: str, indexes: Dict[str, _DirIndex]) -> List[Finding]:
    """DbLedgerStorage keeps ledger L only in ledger dir L mod numDirs: a ledger's data in
    another dir is invisible to its bookie."""
    found = []
    for d in ds:
        index = indexes.get(d.path)
        if index is None or index.storage != "DbLedgerStorage" or d.cookie is None:
            continue
        pos = dir_index_in_cookie(d.path, d.cookie)
        num = len(d.cookie.ledger_dirs)
        if pos is None:
            continue
        for lid in sorted(index.ledgers):
            if lid % num != pos:
                found.append(
                    Finding(
                        LEDGER_IN_WRONG_DIR,
                        f"DbLedgerStorage keeps ledger {lid} in "
                        f"ledger dir {lid % num} of {num}, this is dir {pos}: the "
                        f"bookie never reads it here",
                        bookie=bookie,
                        ledger=lid,
                        file=d.current,
                    )
                )
    return found


@dataclass
class StorageScan:
    """What verifying one ledger storage of a bookie found (`report`: its findings, copies,
    failed directories and bytes read), the storage kind of each directory whose index was
    read (`read`: what Coverage is made of) and its ledgers kept in the wrong directory."""

    bookie: str
    report: ScanReport
    read: Dict[str, str]
    wrong_dir: List[Finding]


def scan_storage(
    ds: List[LedgerDir],
    bookie: str,
    metadata: Dict[int, LedgerMetadata],
    also: Sequence[str] = (),
    metadata_only: bool = False,
    states: Optional[LogStates] = None,
    pace: Optional[Callable[[str, int], None]] = None,
) -> StorageScan:
    """Verify one ledger storage (Listing.storages: a DbLedgerStorage directory, or all of a
    bookie's Interleaved/Sorted directories): the unit of work of the local scan's loop and
    of the Spark job's tasks alike. `also`: CRCs (merkle.replica.also.ALSO_ALGORITHMS) each
    framed copy's payload gets besides its CRC-32C (Copy.also), compared across copies.
    `metadata_only`: the census (_census_log): the indexes and the logs' sizes, no entry
    read, nothing verified. `states` (--state): a log whose record is unchanged and fresh is
    not read again (merkle.replica.bookkeeper.state); every log read is recorded. `pace`:
    ScanReport.pace."""
    if also and metadata_only:
        raise ValueError("--also computes its CRCs from the entries read: not in a census")
    if states is not None and (also or metadata_only):
        raise ValueError("--state records verified data: not with --also or a census")
    report = ScanReport(also=tuple(also), census=metadata_only, states=states, pace=pace)
    indexes = _scan_storage(ds, bookie, metadata, report)
    read = {path: index.storage for path, index in indexes.items()}
    return StorageScan(bookie, report, read, _wrong_dir(ds, bookie, indexes))


@dataclass
class Listing:
    """The bookies found under the paths given, before any storage is read: the cookie
    findings and the paths that hold no ledger directory (`report`), and each bookie's
    readable ledger directories (index directories paired). Cheap: cookies and listings."""

    report: ScanReport
    by_bookie: Dict[str, List[LedgerDir]]

    def storages(self) -> List[Tuple[str, List[LedgerDir]]]:
        """(bookie, its directories) of every ledger storage, bookies in order."""
        return [
            (bookie, storage)
            for bookie, ds in sorted(self.by_bookie.items())
            for storage in _storages(ds)
        ]


def list_bookies(
    paths: Iterable[str],
    *,
    instance_id: Optional[str] = None,
    registered_cookies: Optional[Dict[str, bytes]] = None,
    instance_vote: bool = True,
) -> Listing:
    """Find the ledger directories at or under `paths`, read and check their cookies (see
    scan_bookies), and pair DbLedgerStorage's index directories. `instance_vote` False: no
    majority vote on instanceIds when `instance_id` is None (the caller votes)."""
    report = ScanReport()
    dirs: List[LedgerDir] = []
    for p in paths:
        try:
            found = find_ledger_dirs(p)
        except OSError as exc:
            report.failed.append({"path": p, "error": f"{p}: {exc.strerror or exc}"})
            continue
        if not found:
            report.failed.append(
                {
                    "path": p,
                    "error": f"{p}: no bookie ledger directory found "
                    f"(a directory with current/VERSION and entry logs)",
                }
            )
        dirs.extend(LedgerDir(f) for f in found if f not in {d.path for d in dirs})
    by_bookie = _check_cookies(dirs, instance_id, registered_cookies, report, instance_vote)
    _pair_index_dirs(by_bookie, report)
    for bookie, ds in sorted(by_bookie.items()):
        report.bookies[bookie] = [d.path for d in ds]
    return Listing(report, dict(by_bookie))


def scan_bookies(
    paths: Iterable[str],
    metadata: Dict[int, LedgerMetadata],
    *,
    instance_id: Optional[str] = None,
    registered_cookies: Optional[Dict[str, bytes]] = None,
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
    also: Sequence[str] = (),
    metadata_only: bool = False,
    states: Optional[LogStates] = None,
    pace: Optional[Callable[[str, int], None]] = None,
    threads: int = 1,
) -> ScanReport:
    """Scan the bookies' ledger directories at or under `paths` against `metadata` (ledger
    ID -> LedgerMetadata); `instance_id`: the cluster's INSTANCEID, `registered_cookies`:
    the cookies the metadata store registers (raw bytes by bookie ID), when the metadata
    source has them; `unread`: ledgers the store lists but whose metadata could not be read
    (ID -> why), and `metadata_complete` False when the store could not be listed whole: the
    stored entries of a ledger missing from `metadata` are then not called garbage. A path
    that holds no ledger directory goes to `failed`. The steps (list_bookies, scan_storage,
    judge_ledger, holds_nothing) are the ones spark_udfs.jobs.bookkeeper distributes.
    `metadata_only`: the census: every index entry placed against the ledger metadata (its
    log present, its location inside the log), the cookies and master keys checked, no entry
    read and none verified (Copy.indexed; judge_ledger's `census`). `states` (--state): see
    scan_storage; the pass is complete when every storage was visited. `pace`: ScanReport.pace
    (an exception it raises stops the scan there: the pass stays incomplete). `threads`: the
    storages verified at once (the --loop service's one thread per ledger storage, each disk
    at its own rate); their parts are joined in the storages' order, so the report is the
    same."""
    listing = list_bookies(paths, instance_id=instance_id, registered_cookies=registered_cookies)
    report = listing.report
    report.census = metadata_only
    read: Dict[str, str] = {}
    wrong: Dict[str, List[Finding]] = defaultdict(list)
    storages = listing.storages()

    def one(item: Tuple[str, List[LedgerDir]]) -> StorageScan:
        return scan_storage(item[1], item[0], metadata, also, metadata_only, states, pace)

    if threads > 1 and len(storages) > 1:
        with ThreadPoolExecutor(max_workers=min(threads, len(storages))) as pool:
            parts = list(pool.map(one, storages))  # the first exception raised goes on
    else:
        parts = [one(item) for item in storages]
    for (bookie, _), part in zip(storages, parts):
        report.findings.extend(part.report.findings)
        report.copies.extend(part.report.copies)
        report.failed.extend(part.report.failed)
        report.bytes_read += part.report.bytes_read
        read.update(part.read)
        wrong[bookie].extend(part.wrong_dir)
    for bookie in listing.by_bookie:
        report.findings.extend(wrong.get(bookie, []))
    if states is not None:
        states.complete()
    _place(metadata, coverage_of(listing.by_bookie, read), report, unread, metadata_complete)
    return report
