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

import hashlib
import os
import stat
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from merkle.replica.bookkeeper.bookies import (
    LedgerDir,
    dir_index_in_cookie,
    find_ledger_dirs,
    read_cookie,
)
from merkle.replica.bookkeeper.digest import DIGEST_LENGTHS, verify_entries
from merkle.replica.bookkeeper.entrylog import (
    COMPACTION_LEFTOVER,
    HEADER_SIZE,
    WindowReader,
    log_id_of,
    pread_exact,
    read_header,
    scan_records,
    split_location,
)
from merkle.replica.bookkeeper.index import IndexError_, db_indexes, idx_files, read_idx
from merkle.replica.bookkeeper.metadata import CLOSED, LedgerMetadata
from merkle.replica.levels import severity_of
from merkle.replica.safeopen import NotRegularFileError, open_dir, open_regular

__all__ = [
    "BOOKIE_HOLDS_NOTHING",
    "COOKIE_INVALID",
    "COOKIE_MISMATCH",
    "COPIES_DIFFER",
    "CORRUPT_ENTRY",
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

CORRUPT_ENTRY = "CORRUPT_ENTRY"
DIGEST_MISMATCH_ALL_COPIES = "DIGEST_MISMATCH_ALL_COPIES"
COPIES_DIFFER = "COPIES_DIFFER"
MISSING_ENTRY = "MISSING_ENTRY"
ENTRY_FRAME_INVALID = "ENTRY_FRAME_INVALID"
ENTRY_LOG_MISSING = "ENTRY_LOG_MISSING"
UNINDEXED_ENTRY = "UNINDEXED_ENTRY"
ENTRY_PAST_LAST_ENTRY = "ENTRY_PAST_LAST_ENTRY"
ENTRY_OF_OPEN_LEDGER = "ENTRY_OF_OPEN_LEDGER"
LEDGER_NOT_IN_METADATA = "LEDGER_NOT_IN_METADATA"
LEDGER_METADATA_UNREAD = "LEDGER_METADATA_UNREAD"
LEDGER_IN_WRONG_DIR = "LEDGER_IN_WRONG_DIR"
COOKIE_MISMATCH = "COOKIE_MISMATCH"
COOKIE_INVALID = "COOKIE_INVALID"
INDEX_UNREADABLE = "INDEX_UNREADABLE"
BOOKIE_HOLDS_NOTHING = "BOOKIE_HOLDS_NOTHING"
MASTER_KEY_MISMATCH = "MASTER_KEY_MISMATCH"
NOT_A_REGULAR_FILE = "NOT_A_REGULAR_FILE"

#: one read of an entry log takes at most this many bytes (plus one entry larger than it)
READ_WINDOW = 16 << 20
#: the largest entry read at all (BookKeeper's nettyMaxFrameSizeBytes default is 5 MiB); a
#: larger size field is a finding, never an allocation
MAX_ENTRY_BYTES = 64 << 20
_MIN_SANE_ENTRY = 16
_SHOWN = 20  # entries listed in one finding's detail


@dataclass
class Finding:
    kind: str
    detail: str
    bookie: Optional[str] = None
    ledger: Optional[int] = None
    entry: Optional[int] = None
    file: Optional[str] = None
    offset: Optional[int] = None

    @property
    def severity(self) -> str:
        return severity_of(self.kind)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "error": self.kind,
            "severity": self.severity,
            "bookie": self.bookie,
            "ledger": self.ledger,
            "entry": self.entry,
            "file": self.file,
            "offset": self.offset,
            "detail": self.detail,
        }

    def line(self) -> str:
        where = [
            f"bookie {self.bookie}" if self.bookie else "",
            f"ledger {self.ledger}" if self.ledger is not None else "",
            f"entry {self.entry}" if self.entry is not None else "",
            (f"{self.file}" + (f" @{self.offset}" if self.offset is not None else ""))
            if self.file
            else "",
        ]
        return f"{self.kind} {' '.join(w for w in where if w)}: {self.detail}"


@dataclass
class Copy:
    """One stored copy of an entry, as its index names it, and what verifying it found."""

    bookie: str
    ledger: int
    entry: int
    file: str
    offset: int
    size: int = 0
    frame_ok: bool = False
    digest_ok: bool = False
    verified: bool = False  # its digest was checked (the ledger's digest type known)
    stored_digest: str = ""
    payload_crc32c: int = 0
    last_add_confirmed: int = -1
    #: what the digest check found when it failed (stored and computed digests)
    problem: str = ""
    #: the --also CRCs of the payload (merkle.replica.also's names), of a framed copy
    also: Dict[str, int] = field(default_factory=dict)
    #: the census (metadata_only): the index names this copy at a location inside its
    #: log, which was not read (no frame, no digest checked: never good)
    indexed: bool = False

    @property
    def good(self) -> bool:
        """Framed and its digest checked and matching: a copy of a ledger whose metadata is
        missing (digest type unknown) is never counted good."""
        return self.frame_ok and self.digest_ok and self.verified


@dataclass
class ScanReport:
    findings: List[Finding] = field(default_factory=list)
    copies: List[Copy] = field(default_factory=list)
    failed: List[Dict[str, str]] = field(default_factory=list)
    ledgers: List[Dict[str, Any]] = field(default_factory=list)
    bookies: Dict[str, List[str]] = field(default_factory=dict)
    bytes_read: int = 0
    #: the --also CRCs to compute over each framed copy's payload (the scan's setting)
    also: Tuple[str, ...] = ()
    #: the census (metadata_only): the indexes and the logs' sizes read, no entry
    census: bool = False

    def add(self, kind: str, detail: str, **where: Any) -> None:
        self.findings.append(Finding(kind, detail, **where))


# ---- one ledger directory -----------------------------------------------------------------


@dataclass
class _DirIndex:
    entries: List[Tuple[int, int, int]]  # (ledger, entry, location)
    ledgers: Set[int]
    storage: str  # "DbLedgerStorage" or "InterleavedLedgerStorage"
    #: the master key the bookie keeps per ledger (LedgerData.masterKey, the .idx header)
    master_keys: Dict[int, bytes] = field(default_factory=dict)

    @property
    def keys(self) -> Set[Tuple[int, int]]:
        """(ledger, entry) of every index entry (made once: every log of the dir asks)."""
        if self._keys is None:
            self._keys = {(lid, eid) for lid, eid, _ in self.entries}
        return self._keys

    _keys: Optional[Set[Tuple[int, int]]] = None


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
            sorted(db_entries),
            set(ledger_data) | {e[0] for e in db_entries},
            "DbLedgerStorage",
            {lid: v.master_key for lid, v in ledger_data.items() if v.master_key},
        )
    entries: List[Tuple[int, int, int]] = []
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
            if not idx.locations:
                continue
        ledgers.add(idx.ledger_id)
        entries.extend((idx.ledger_id, e, loc) for e, loc in idx.locations)
        if idx.master_key:
            keys[idx.ledger_id] = idx.master_key
    return _DirIndex(sorted(entries), ledgers, "InterleavedLedgerStorage", keys)


def _digest_of(meta: Optional[LedgerMetadata]) -> Tuple[str, bytes, bool]:
    """(digest type to verify with, password, whether the digest is checked): a ledger
    without metadata or digest type gets its frame checked only."""
    if meta is None or meta.digest_type is None:
        return "DUMMY", b"", False
    return meta.digest_type, meta.password, True


def _location_in_log(
    pos: int, file_size: int, bookie: str, lid: int, eid: int, shown: str, report: ScanReport
) -> bool:
    """Whether an index location can hold an entry of a log of `file_size` bytes (past the
    log's header and its size field, room for the smallest frame); if not, the finding."""
    if HEADER_SIZE + 4 <= pos and pos + _MIN_SANE_ENTRY <= file_size:
        return True
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
    return False


def _verify_log(
    fd: int,
    file_size: int,
    shown: str,
    bookie: str,
    todo: List[Tuple[int, int, int]],
    metadata: Dict[int, LedgerMetadata],
    report: ScanReport,
) -> Dict[int, int]:
    """Verify the index entries `todo` ((pos, ledger, entry) sorted by pos) of one log.
    Returns the runs of back-to-back records whose size fields it read (the start of a run's
    first size field -> the end of its last record), for the walk of unindexed records."""
    framed: List[Tuple[int, int]] = []  # (pos, size) of each record whose size was read
    i = 0
    reader = WindowReader(min(READ_WINDOW, file_size))
    while i < len(todo):
        pos, lid, eid = todo[i]
        if not _location_in_log(pos, file_size, bookie, lid, eid, shown, report):
            report.copies.append(Copy(bookie, lid, eid, shown, pos))
            i += 1
            continue
        base = pos - 4
        window = reader.read(fd, min(READ_WINDOW, file_size - base), base)
        report.bytes_read += len(window)
        batch: List[Tuple[int, int, int, int]] = []  # (pos, size, ledger, entry)
        start = i
        while i < len(todo):
            pos, lid, eid = todo[i]
            at = pos - 4 - base
            if pos < HEADER_SIZE + 4 or at + 4 > len(window):
                break
            (size,) = struct.unpack_from(">i", window, at)
            if size <= 0 or pos + size > file_size or size > MAX_ENTRY_BYTES:
                report.add(
                    ENTRY_FRAME_INVALID,
                    f"size field {size & 0xFFFFFFFF} at offset "
                    f"{pos - 4}: past the end of the {file_size}-byte log or not a "
                    f"size (never read)",
                    bookie=bookie,
                    ledger=lid,
                    entry=eid,
                    file=shown,
                    offset=pos,
                )
                report.copies.append(Copy(bookie, lid, eid, shown, pos, size))
                i += 1
                continue
            if at + 4 + size > len(window):
                if not batch and size > READ_WINDOW - 4:  # one entry larger than a window
                    big = pread_exact(fd, size + 4, base)
                    report.bytes_read += len(big)
                    if len(big) == size + 4:  # else the log shrank: reported below
                        _check_batch(
                            big, base, [(pos, size, lid, eid)], shown, bookie, metadata, report
                        )
                        framed.append((pos, size))
                        i += 1
                break
            batch.append((pos, size, lid, eid))
            framed.append((pos, size))
            i += 1
        if batch:
            _check_batch(window, base, batch, shown, bookie, metadata, report)
        if i == start:  # nothing could be read at this entry: the log shrank under the scan
            pos, lid, eid = todo[i]
            report.add(
                ENTRY_FRAME_INVALID,
                f"the log ends before the entry (it shrank while "
                f"being read: now {os.fstat(fd).st_size} bytes)",
                bookie=bookie,
                ledger=lid,
                entry=eid,
                file=shown,
                offset=pos,
            )
            report.copies.append(Copy(bookie, lid, eid, shown, pos))
            i += 1
    return _runs(framed)


def _runs(framed: List[Tuple[int, int]]) -> Dict[int, int]:
    """Records (pos of the entry, after its size field; size) as runs of back-to-back
    records: the start of a run's first size field -> the end of its last record."""
    runs: Dict[int, int] = {}
    start = end = -1
    for pos, size in sorted(set(framed)):
        if pos - 4 != end:
            if start >= 0:
                runs[start] = end
            start = pos - 4
        end = pos + size
    if start >= 0:
        runs[start] = end
    return runs


def _check_batch(
    window: Union[bytes, memoryview],
    base: int,
    batch: List[Tuple[int, int, int, int]],
    shown: str,
    bookie: str,
    metadata: Dict[int, LedgerMetadata],
    report: ScanReport,
) -> None:
    groups: Dict[int, List[Tuple[int, int, int, int]]] = defaultdict(list)
    for item in batch:
        groups[item[2]].append(item)
    for lid, items in groups.items():
        digest_type, password, checked = _digest_of(metadata.get(lid))
        offs = np.array([p - base for p, _, _, _ in items], np.int64)
        sizes = np.array([s for _, s, _, _ in items], np.int64)
        r = verify_entries(window, offs, sizes, digest_type, password, also=report.also)
        n = DIGEST_LENGTHS[digest_type]
        # the per-entry loop reads Python lists (one conversion per column, not a numpy
        # scalar per field): a log of 1 KiB entries holds a million per GiB
        frame_ok = r["frame_ok"].tolist()
        digest_ok = r["digest_ok"].tolist()
        payload_crc = r["payload_crc32c"].tolist()
        lac = r["last_add_confirmed"].tolist()
        ledger_ids, entry_ids = r["ledger_id"].tolist(), r["entry_id"].tolist()
        also_crcs = {a: r[f"payload_{a}"].tolist() for a in report.also}
        for k, (pos, size, _lid, eid) in enumerate(items):
            copy = Copy(
                bookie,
                lid,
                eid,
                shown,
                pos,
                size,
                verified=checked,
                payload_crc32c=payload_crc[k],
                last_add_confirmed=lac[k],
            )
            report.copies.append(copy)
            if not frame_ok[k]:
                report.add(
                    ENTRY_FRAME_INVALID,
                    f"an entry of {size} bytes, shorter than its "
                    f"32-byte header and {n}-byte {digest_type} digest",
                    bookie=bookie,
                    ledger=lid,
                    entry=eid,
                    file=shown,
                    offset=pos,
                )
                continue
            got = (ledger_ids[k], entry_ids[k])
            if got != (lid, eid):
                report.add(
                    ENTRY_FRAME_INVALID,
                    f"the index names ledger {lid} entry {eid}, "
                    f"the log holds ledger {got[0]} entry {got[1]} there",
                    bookie=bookie,
                    ledger=lid,
                    entry=eid,
                    file=shown,
                    offset=pos,
                )
                continue
            copy.frame_ok = True
            for a, crcs in also_crcs.items():
                copy.also[a] = crcs[k]
            copy.digest_ok = digest_ok[k]
            start = pos - base + 32
            copy.stored_digest = window[start : start + n].hex()
            if not copy.digest_ok:
                computed = int(r["computed_digest"][k])
                copy.problem = (
                    f"stored {digest_type} digest {copy.stored_digest}, computed "
                    f"{computed:0{2 * n}x}"
                    if digest_type != "HMAC"
                    else f"stored HMAC-SHA1 {copy.stored_digest} does not match"
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
        sorted(e for part in parts for e in part.entries),
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
        by_log: Dict[int, List[Tuple[int, int, int]]] = defaultdict(list)
        for lid, eid, loc in index.entries:
            log_id, pos = split_location(loc)
            by_log[log_id].append((pos, lid, eid))
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
        for log_id in sorted(set(by_log) | set(logs)):
            d, name = logs.get(log_id, (parts[0][0], f"{log_id:x}.log"))
            todo = sorted(by_log.get(log_id, []))
            if report.census:
                _census_log(fds[d.path], d, name, bookie, todo, report)
            else:
                _one_log(fds[d.path], d, name, bookie, todo, index, metadata, report)
        return {d.path: index for d, _ in parts}
    finally:
        for fd in fds.values():
            os.close(fd)


def _one_log(
    current_fd: int,
    d: LedgerDir,
    name: str,
    bookie: str,
    todo: List[Tuple[int, int, int]],
    index: _DirIndex,
    metadata: Dict[int, LedgerMetadata],
    report: ScanReport,
) -> None:
    shown = os.path.join(d.current, name)
    try:
        fd = open_regular(current_fd, name)
    except FileNotFoundError:
        if todo:
            _log_gone(todo, shown, bookie, _GONE, report)
        return
    except NotRegularFileError as exc:
        report.add(NOT_A_REGULAR_FILE, f"{exc.strerror}: never read", bookie=bookie, file=shown)
        _log_gone(todo, shown, bookie, "the entry log is not a regular file", report)
        return
    try:
        size = os.fstat(fd).st_size
        if hasattr(os, "posix_fadvise"):  # a hint (read-ahead), no write: the walk is in order
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        header = read_header(fd, size)
        if header.problem and todo:
            report.add(
                ENTRY_FRAME_INVALID,
                f"entry log header: {header.problem}",
                bookie=bookie,
                file=shown,
            )
        runs = _verify_log(fd, size, shown, bookie, todo, metadata, report) if todo else {}
        _unindexed(fd, size, shown, bookie, todo, index, report, runs)
    finally:
        os.close(fd)


def _census_log(
    current_fd: int,
    d: LedgerDir,
    name: str,
    bookie: str,
    todo: List[Tuple[int, int, int]],
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
        if todo:
            _log_gone(todo, shown, bookie, _GONE, report)
        return
    except OSError as exc:
        report.failed.append({"path": shown, "error": f"{shown}: {exc.strerror or exc}"})
        return
    if not stat.S_ISREG(st.st_mode):
        report.add(NOT_A_REGULAR_FILE, "not a regular file: never read", bookie=bookie, file=shown)
        _log_gone(todo, shown, bookie, "the entry log is not a regular file", report)
        return
    size = st.st_size
    for pos, lid, eid in todo:
        copy = Copy(bookie, lid, eid, shown, pos)
        copy.indexed = _location_in_log(pos, size, bookie, lid, eid, shown, report)
        report.copies.append(copy)


#: why a log the index points into cannot be opened: the bookie is live
_GONE = (
    "the entry log is gone (deleted by garbage collection or compaction since the index was "
    "read, or lost)"
)


def _log_gone(
    todo: List[Tuple[int, int, int]], shown: str, bookie: str, why: str, report: ScanReport
) -> None:
    ledgers = sorted({lid for _, lid, _ in todo})
    report.add(
        ENTRY_LOG_MISSING,
        f"{why}: {len(todo)} index entries point into it "
        f"(ledgers {', '.join(map(str, ledgers[:_SHOWN]))})",
        bookie=bookie,
        ledger=ledgers[0] if len(ledgers) == 1 else None,
        file=shown,
    )
    for pos, lid, eid in todo:
        report.copies.append(Copy(bookie, lid, eid, shown, pos))


def _unindexed(
    fd: int,
    size: int,
    shown: str,
    bookie: str,
    todo: List[Tuple[int, int, int]],
    index: _DirIndex,
    report: ScanReport,
    runs: Optional[Dict[int, int]] = None,
) -> None:
    """Records in the log that no index entry names at any location: one finding per
    ledger and log (a compaction's copy of an indexed entry elsewhere is expected). `runs`:
    _verify_log's runs of indexed records, which the walk steps over whole."""
    indexed_here = {pos for pos, _, _ in todo}
    indexed = index.keys
    extra: Dict[int, List[Tuple[int, int]]] = defaultdict(list)
    for rec in scan_records(fd, size, runs):
        if rec.pos in indexed_here or (rec.ledger_id, rec.entry_id) in indexed:
            continue
        extra[rec.ledger_id].append((rec.entry_id, rec.pos))
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


@dataclass
class Coverage:
    """Which directories of each bookie the scan read: `scanned[bookie]` = (numDirs by its
    cookie, the cookie positions of the directories whose index was read, whether its storage
    maps a ledger to one directory (DbLedgerStorage)). Small (one entry per bookie): the Spark
    job broadcasts it to the tasks that judge the ledgers."""

    scanned: Dict[str, Tuple[int, Tuple[int, ...], bool]] = field(default_factory=dict)

    def covers(self, bookie: str, lid: int) -> bool:
        """Whether the scan read the directory where `bookie` keeps ledger `lid`: a copy the
        write set puts on a directory that was not read is no MISSING_ENTRY."""
        if bookie not in self.scanned:
            return False
        num, positions, db = self.scanned[bookie]
        return lid % max(num, 1) in positions if db else len(positions) == num


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


def copy_order(c: Copy) -> Tuple[str, str, int]:
    """The order a ledger's copies are judged in (which copy a finding names first): the
    same whether the copies come from one process's scan or from a Spark group."""
    return (c.bookie, c.file, c.offset)


@dataclass
class LedgerVerdict:
    """What judging one ledger of the metadata found: its findings (past its last entry,
    copies compared), the MISSING_ENTRY findings by bookie (held back until the bookie-wide
    count says whether the bookie holds nothing at all), the entry copies its write sets give
    each bookie (`expected`) and those the bookie holds (`held`), and the ledger's summary."""

    findings: List[Finding] = field(default_factory=list)
    missing: Dict[str, List[Finding]] = field(default_factory=dict)
    expected: Dict[str, int] = field(default_factory=dict)
    held: Dict[str, int] = field(default_factory=dict)
    summary: Dict[str, Any] = field(default_factory=dict)
    #: with judge_ledger(..., entries=True): per entry of the ledger (0 to its last, and
    #: an unclosed ledger's stored entries past it), its write set and the bookies of it
    #: that hold a good copy (what `spark plan` counts: a good copy outside the write set
    #: is never read by BookKeeper's clients)
    entries: List[Tuple[int, List[str], List[str]]] = field(default_factory=list)


def judge_ledger(
    lid: int,
    meta: LedgerMetadata,
    ledger_copies: Iterable[Copy],
    coverage: Coverage,
    *,
    entries: bool = False,
    census: bool = False,
) -> LedgerVerdict:
    """Every copy of ledger `lid` (from every bookie) against its metadata: entries past its
    last entry, each entry's copies compared, and each write set's bookies checked for a
    copy. The local scan and the Spark job (grouped by ledger) both call this; the job asks
    for the per-entry good copies too (`entries`).

    `census` (the copies of a metadata-only scan: Copy.indexed, nothing verified): each
    entry's copies are counted as indexed, not good (the summary's `indexed_copies` and
    `without_indexed_copy` instead of `good_copies` and `without_good_copy`), and an unclosed
    ledger's placement is checked only up to its metadata's lastEntryId: the last entry its
    writer confirmed is in the entries' headers, which a census does not read."""
    verdict = LedgerVerdict()
    report = ScanReport()
    copies: Dict[int, List[Copy]] = defaultdict(list)
    for c in sorted(ledger_copies, key=copy_order):
        copies[c.entry].append(c)
    seen = sorted(copies)
    last = (
        meta.last_entry_id
        if meta.state == CLOSED or census
        else max(
            [c.last_add_confirmed for e in seen for c in copies[e] if c.frame_ok],
            default=-1,
        )
    )
    _past_last(lid, meta, seen, copies, report)
    good_counts = []
    below, none = [], []
    expected: Dict[str, int] = defaultdict(int)
    held: Dict[str, int] = defaultdict(int)
    missing: Dict[str, List[Finding]] = defaultdict(list)
    write_set = meta.write_sets()
    covered: Dict[str, bool] = {}  # coverage.covers(bookie, lid), asked once per bookie
    for eid in range(0, last + 1):
        here = copies.get(eid, [])
        _compare_copies(lid, eid, here, report)
        good = {c.bookie for c in here if (c.indexed if census else c.good)}
        holders = {c.bookie for c in here}
        ws = write_set(eid)
        if entries:
            verdict.entries.append(_entry_row(eid, ws, good))
        for bookie in ws:
            cov = covered.get(bookie)
            if cov is None:
                cov = covered[bookie] = coverage.covers(bookie, lid)
            if not cov:
                continue
            expected[bookie] += 1
            if bookie in holders:
                held[bookie] += 1
            else:
                missing[bookie].append(
                    Finding(
                        MISSING_ENTRY,
                        f"the write set {', '.join(ws)} puts "
                        f"a copy here and the bookie holds none (under-replicated)",
                        bookie=bookie,
                        ledger=lid,
                        entry=eid,
                    )
                )
        good_counts.append(len(good))
        if len(good) < meta.ack_quorum:
            below.append(eid)
        if not good:
            none.append(eid)
    for eid in seen:
        if eid > last:
            _compare_copies(lid, eid, copies[eid], report)
            if entries and meta.state != CLOSED:
                # an unclosed ledger's entries past the last confirmed one may still be part
                # of it (the writer's last acknowledged add is confirmed by no stored header:
                # recovery decides), so the plan counts their copies too; a CLOSED ledger's
                # are never read
                ws = write_set(eid)
                good = {c.bookie for c in copies[eid] if c.good}  # never a census's
                verdict.entries.append(_entry_row(eid, ws, good))
    verdict.findings = report.findings
    verdict.missing, verdict.expected, verdict.held = dict(missing), dict(expected), dict(held)
    verdict.summary = {
        "ledger": lid,
        "state": meta.state,
        "digest_type": meta.digest_type,
        "last_entry_id": meta.last_entry_id,
        "checked_up_to": last,
        "ensemble_size": meta.ensemble_size,
        "write_quorum": meta.write_quorum,
        "ack_quorum": meta.ack_quorum,
        "good_copies": {str(k): good_counts.count(k) for k in sorted(set(good_counts))},
        "below_ack_quorum": below,
        "without_good_copy": none,
    }
    if census:  # counted from the indexes: no copy was verified, none is good
        summary = verdict.summary
        summary["census"] = True
        summary["indexed_copies"] = summary.pop("good_copies")
        summary["without_indexed_copy"] = summary.pop("without_good_copy")
    return verdict


def _entry_row(
    eid: int, write_set: Iterable[str], good: Set[str]
) -> Tuple[int, List[str], List[str]]:
    """An entry's row of LedgerVerdict.entries: its write set (each bookie once, even when
    a hostile ensemble names one twice) and the bookies of it holding a good copy."""
    ws = list(dict.fromkeys(write_set))
    return eid, ws, [b for b in ws if b in good]


def judge_unknown_ledger(
    lid: int,
    ledger_copies: Iterable[Copy],
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
) -> List[Finding]:
    """The stored copies of a ledger the metadata does not have, one finding per bookie:
    garbage not yet collected, or (its metadata unread, the store not listed whole) copies
    that were not verified, never called garbage."""
    counts: Dict[str, int] = defaultdict(int)
    for c in ledger_copies:
        counts[c.bookie] += 1
    found = []
    for bookie, n in sorted(counts.items()):
        entries = f"{n} stored entr{'y' if n == 1 else 'ies'}"
        why = unread.get(lid) if unread else None
        if why is None and not metadata_complete:
            why = "the metadata store could not be listed whole"
        if why is not None:  # its metadata may exist: never call it garbage
            found.append(
                Finding(
                    LEDGER_METADATA_UNREAD,
                    f"{entries} of a ledger whose metadata was not "
                    f"read ({why}): not verified, only their frames were checked",
                    bookie=bookie,
                    ledger=lid,
                )
            )
            continue
        found.append(
            Finding(
                LEDGER_NOT_IN_METADATA,
                f"{entries} of a ledger the metadata does not have "
                f"(deleted: garbage BookKeeper has not collected yet; only their frames "
                f"were checked)",
                bookie=bookie,
                ledger=lid,
            )
        )
    return found


def holds_nothing(expected: Dict[str, int], held: Dict[str, int]) -> Dict[str, Finding]:
    """The bookies that hold none of the entry copies their ensemble segments give them
    (counts summed over every ledger), each with its one BOOKIE_HOLDS_NOTHING finding, which
    stands for all its MISSING_ENTRY findings."""
    return {
        bookie: Finding(
            BOOKIE_HOLDS_NOTHING,
            f"holds none of the {n} entry "
            f"copies its ensemble segments give it: a re-formatted or replaced "
            f"bookie (BP-31's incarnation case; the cookie alone cannot tell)",
            bookie=bookie,
        )
        for bookie, n in sorted(expected.items())
        if n and not held.get(bookie)
    }


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
    by_ledger: Dict[int, List[Copy]] = defaultdict(list)
    for c in report.copies:
        by_ledger[c.ledger].append(c)
    expected: Dict[str, int] = defaultdict(int)
    held: Dict[str, int] = defaultdict(int)
    missing: Dict[str, List[Finding]] = defaultdict(list)
    for lid in sorted(metadata):
        verdict = judge_ledger(
            lid, metadata[lid], by_ledger.get(lid, []), coverage, census=report.census
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


def _past_last(
    lid: int,
    meta: LedgerMetadata,
    seen: List[int],
    copies: Dict[int, List[Copy]],
    report: ScanReport,
) -> None:
    past = [e for e in seen if e > meta.last_entry_id]
    if not past:
        return
    holders = sorted({c.bookie for e in past for c in copies[e]})
    span = f"{past[0]}..{past[-1]}" if len(past) > 1 else str(past[0])
    if meta.state == CLOSED:
        report.add(
            ENTRY_PAST_LAST_ENTRY,
            f"entries {span} stored past the CLOSED ledger's "
            f"lastEntryId {meta.last_entry_id} on {', '.join(holders)}: never read "
            f"(an add that lost the close race, or leftovers of recovery)",
            ledger=lid,
            entry=past[0],
        )
    else:
        report.add(
            ENTRY_OF_OPEN_LEDGER,
            f"entries {span} stored while the metadata says "
            f"{meta.state} (lastEntryId {meta.last_entry_id}): the ledger is still "
            f"being written or its writer died before closing it; recovery decides "
            f"which become part of it; checked for placement up to the last entry "
            f"confirmed in their headers",
            ledger=lid,
            entry=past[0],
        )


def _compare_copies(lid: int, eid: int, here: List[Copy], report: ScanReport) -> None:
    """Per entry: bit rot on some copies, a digest failing identically everywhere (a client
    digest bug), copies that differ although each digest holds."""
    if len(here) < 2 and not any(c.frame_ok and c.verified and not c.digest_ok for c in here):
        return  # no copy, or one that is not bad: nothing to compare, nothing rotted
    framed = [c for c in here if c.frame_ok and c.verified]
    bad = [c for c in framed if not c.digest_ok]
    if (
        len(bad) >= 2
        and len(bad) == len(framed)
        and len({(c.payload_crc32c, c.stored_digest) for c in bad}) == 1
    ):
        report.add(
            DIGEST_MISMATCH_ALL_COPIES,
            f"the digest fails identically on all "
            f"{len(bad)} copies ({', '.join(c.bookie for c in bad)}): the client "
            f"computed it wrongly when writing (a client digest bug, such as "
            f"BookKeeper PR #4140/#4196), not a disk",
            ledger=lid,
            entry=eid,
            bookie=bad[0].bookie,
            file=bad[0].file,
            offset=bad[0].offset,
        )
    else:
        for c in bad:
            others = [o.bookie for o in framed if o.digest_ok]
            report.add(
                CORRUPT_ENTRY,
                f"{c.problem} (bit rot: "
                f"{'good copies on ' + ', '.join(others) if others else 'no good copy'}"
                f"; BookKeeper's clients skip this copy and never repair it)",
                bookie=c.bookie,
                ledger=lid,
                entry=eid,
                file=c.file,
                offset=c.offset,
            )
    good = [c for c in framed if c.digest_ok]
    # the --also CRCs too, where the scan computed them: one more check that two copies whose
    # CRC-32C and digest agree hold the same bytes
    if len({(c.payload_crc32c, c.stored_digest, tuple(sorted(c.also.items()))) for c in good}) > 1:
        report.add(
            COPIES_DIFFER,
            "copies hold different bytes although each digest holds: "
            + "; ".join(
                f"{c.bookie} payload crc32c {c.payload_crc32c:08x}"
                + "".join(f" {a} {v:x}" for a, v in sorted(c.also.items()))
                for c in good[:_SHOWN]
            )
            + " (the client wrote different bytes: a writer or recovery bug, not a "
            "disk)",
            ledger=lid,
            entry=eid,
        )


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
) -> StorageScan:
    """Verify one ledger storage (Listing.storages: a DbLedgerStorage directory, or all of a
    bookie's Interleaved/Sorted directories): the unit of work of the local scan's loop and
    of the Spark job's tasks alike. `also`: CRCs (merkle.replica.also.ALSO_ALGORITHMS) each
    framed copy's payload gets besides its CRC-32C (Copy.also), compared across copies.
    `metadata_only`: the census (_census_log): the indexes and the logs' sizes, no entry
    read, nothing verified."""
    if also and metadata_only:
        raise ValueError("--also computes its CRCs from the entries read: not in a census")
    report = ScanReport(also=tuple(also), census=metadata_only)
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
    read and none verified (Copy.indexed; judge_ledger's `census`)."""
    listing = list_bookies(paths, instance_id=instance_id, registered_cookies=registered_cookies)
    report = listing.report
    report.census = metadata_only
    read: Dict[str, str] = {}
    wrong: Dict[str, List[Finding]] = defaultdict(list)
    for bookie, storage in listing.storages():
        part = scan_storage(storage, bookie, metadata, also, metadata_only)
        report.findings.extend(part.report.findings)
        report.copies.extend(part.report.copies)
        report.failed.extend(part.report.failed)
        report.bytes_read += part.report.bytes_read
        read.update(part.read)
        wrong[bookie].extend(part.wrong_dir)
    for bookie in listing.by_bookie:
        report.findings.extend(wrong.get(bookie, []))
    _place(metadata, coverage_of(listing.by_bookie, read), report, unread, metadata_complete)
    return report
