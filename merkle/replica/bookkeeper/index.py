"""A bookie's entry indexes: DbLedgerStorage's RocksDBs and Interleaved/Sorted `.idx` files.

DbLedgerStorage (one per ledger directory): `current/locations` maps a 16-byte key (ledgerId,
entryId, big-endian) to an 8-byte big-endian location; `current/ledgers` maps an 8-byte
ledgerId to a LedgerData protobuf (exists=1, fenced=2, masterKey=3, explicitLac=4, limbo=5);
the negative key -0xeefd holds the storage flags, not a ledger. Both are opened through the
Ozone layout's RocksDB helpers: a private snapshot (the DB's files linked or copied, bounded)
opened read-only, which replays the WAL (a small DB lives only in `000004.log`) and never
writes into the bookie's directory (rocksdict writes a config file into whatever it opens).

Interleaved/Sorted storage: `current/<hex((L>>8)&0xff)>/<hex(L&0xff)>/<hex L>.idx`, a 1024-byte
header (`BKLE`, version, masterKey, state bits, explicit LAC), then entry E's location at
1024 + 8E (0: absent).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import tempfile
from dataclasses import dataclass
from itertools import islice
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from merkle.replica.bookkeeper.textproto import TextProtoError, wire_fields
from merkle.replica.safeopen import open_dir, open_regular

__all__ = [
    "IdxFile",
    "IndexEntries",
    "IndexError_",
    "LedgerData",
    "STORAGE_FLAGS_KEY",
    "db_indexes",
    "idx_files",
    "read_idx",
    "parse_ledger_data",
]

STORAGE_FLAGS_KEY = -0xEEFD
_IDX_HEADER = 1024
_IDX_MAGIC = b"BKLE"
_IDX_WINDOW = 8 << 20
_HEX = re.compile(r"[0-9a-f]{1,16}")


class IndexError_(Exception):
    """An index that cannot be read (one line)."""


#: index rows read from a RocksDB per step (bounded memory: a bookie can index 100 million)
_DB_ROWS_PER_STEP = 1 << 16


@dataclass(frozen=True, eq=False)
class IndexEntries:
    """Index entries as columns (int64 ledger and entry IDs, uint64 locations), in the
    order read: a bookie indexes millions, one Python tuple each would be the scan's cost."""

    ledger: np.ndarray
    entry: np.ndarray
    location: np.ndarray

    @classmethod
    def empty(cls) -> IndexEntries:
        z = np.empty(0, np.int64)
        return cls(z, z, np.empty(0, np.uint64))

    @classmethod
    def concat(cls, parts: Iterable[IndexEntries]) -> IndexEntries:
        parts = list(parts)
        if not parts:
            return cls.empty()
        return cls(
            np.concatenate([p.ledger for p in parts]).astype(np.int64, copy=False),
            np.concatenate([p.entry for p in parts]).astype(np.int64, copy=False),
            np.concatenate([p.location for p in parts]).astype(np.uint64, copy=False),
        )

    def sorted(self) -> IndexEntries:
        """By (ledger, entry, location)."""
        order = np.lexsort((self.location, self.entry, self.ledger))
        return IndexEntries(self.ledger[order], self.entry[order], self.location[order])

    def __len__(self) -> int:
        return len(self.ledger)

    def __iter__(self) -> Iterator[Tuple[int, int, int]]:
        return zip(self.ledger.tolist(), self.entry.tolist(), self.location.tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexEntries):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, n), getattr(other, n))
            for n in ("ledger", "entry", "location")
        )


@dataclass(frozen=True)
class LedgerData:
    exists: bool = False
    fenced: bool = False
    master_key: bytes = b""
    explicit_lac: bytes = b""
    limbo: bool = False


def parse_ledger_data(raw: bytes) -> LedgerData:
    """A `ledgers` DB value (DbLedgerStorageDataFormats.proto LedgerData)."""
    flags: Dict[int, bool] = {}
    blobs: Dict[int, bytes] = {}
    for number, _wire, value in wire_fields(raw):
        if isinstance(value, bytes):
            blobs[number] = value
        else:
            flags[number] = bool(value)
    return LedgerData(
        flags.get(1, False),
        flags.get(2, False),
        blobs.get(3, b""),
        blobs.get(4, b""),
        flags.get(5, False),
    )


def _open_snapshot_db(db_dir: str) -> Tuple[object, str]:
    """(a read-only rocksdict DB, its snapshot directory) of the RocksDB in `db_dir`."""
    from merkle.replica.rocksdb import (
        VolumeDBError,
        load_rocksdict,
        refuse_non_directory,
        take_snapshot,
    )

    try:
        rd = load_rocksdict()
        refuse_non_directory(db_dir)
        snap = tempfile.mkdtemp(prefix="crcmerkle-bk-db-")
    except VolumeDBError as exc:
        raise IndexError_(str(exc)) from None
    try:
        take_snapshot(db_dir, snap)
        db = rd.Rdict(
            snap, options=rd.Options(raw_mode=True), access_type=rd.AccessType.read_only()
        )
    except VolumeDBError as exc:
        shutil.rmtree(snap, ignore_errors=True)
        raise IndexError_(str(exc)) from None
    except Exception as exc:  # noqa: BLE001  rocksdict raises plain Exception; a link, FIFO
        shutil.rmtree(snap, ignore_errors=True)
        msg = (str(exc).splitlines() or ["unknown"])[0]
        raise IndexError_(f"{db_dir}: cannot open the RocksDB: {msg}") from None
    return db, snap


def _items(db: object) -> Iterator[Tuple[bytes, bytes]]:
    it = db.iter()  # type: ignore[attr-defined]
    it.seek_to_first()
    while it.valid():
        yield it.key(), it.value()
        it.next()


def _locations(items: Iterator[Tuple[bytes, bytes]], problems: List[str]) -> IndexEntries:
    """The `locations` DB's rows (key order: sorted by ledger and entry) as columns, read a
    step of rows at a time: the keys and values of a step joined and read by numpy, a row of
    the wrong shape dropped and named in `problems`."""
    parts: List[IndexEntries] = []
    while True:
        step = list(islice(items, _DB_ROWS_PER_STEP))
        if not step:
            break
        keys = [k for k, _ in step]
        values = [v for _, v in step]
        if sum(map(len, keys)) != 16 * len(step) or sum(map(len, values)) != 8 * len(step):
            kept = [(k, v) for k, v in step if len(k) == 16 and len(v) == 8]
            for k, v in step:
                if (len(k) != 16 or len(v) != 8) and len(problems) < 20:
                    problems.append(f"locations DB: a key of {len(k)} / value of {len(v)} bytes")
            keys = [k for k, _ in kept]
            values = [v for _, v in kept]
        ids = np.frombuffer(b"".join(keys), ">i8").reshape(-1, 2).astype(np.int64)
        locs = np.frombuffer(b"".join(values), ">u8").astype(np.uint64)
        parts.append(IndexEntries(ids[:, 0].copy(), ids[:, 1].copy(), locs))
    return IndexEntries.concat(parts)


def db_indexes(current: str) -> Tuple[Dict[int, LedgerData], IndexEntries, List[str]]:
    """(LedgerData by ledger ID, the index entries sorted by ledger and entry, problems) of the
    DbLedgerStorage in the ledger directory's `current`. A key or value of the wrong shape is
    a problem (one line each, at most a few), not a crash. IndexError_ when a DB cannot be
    opened."""
    ledgers: Dict[int, LedgerData] = {}
    problems: List[str] = []
    db, snap = _open_snapshot_db(os.path.join(current, "ledgers"))
    try:
        for key, value in _items(db):
            if len(key) != 8:
                problems.append(f"ledgers DB: a key of {len(key)} bytes")
                continue
            (lid,) = struct.unpack(">q", key)
            if lid < 0:
                continue  # STORAGE_FLAGS_KEY and other negative keys are not ledgers
            try:
                ledgers[lid] = parse_ledger_data(value)
            except TextProtoError as exc:
                problems.append(f"ledgers DB: ledger {lid}: LedgerData does not parse: {exc}")
    finally:
        db.close()  # type: ignore[attr-defined]
        shutil.rmtree(snap, ignore_errors=True)
    db, snap = _open_snapshot_db(os.path.join(current, "locations"))
    try:
        entries = _locations(db.items(), problems)  # type: ignore[attr-defined]
    finally:
        db.close()  # type: ignore[attr-defined]
        shutil.rmtree(snap, ignore_errors=True)
    return ledgers, entries, problems[:20]


_NONE = np.empty(0, np.int64)
_NOLOC = np.empty(0, np.uint64)


@dataclass(frozen=True)
class IdxFile:
    ledger_id: int
    master_key: bytes
    fenced: bool
    #: (entry IDs int64, locations uint64) of the non-zero locations
    entries: np.ndarray
    locations: np.ndarray
    problem: Optional[str] = None


def idx_files(current_fd: int) -> Iterator[Tuple[str, str, str]]:
    """(first-level dir, second-level dir, file name) of every `<hex>.idx` under `current/`
    at the place IndexPersistenceMgr.getLedgerName puts it; links are never followed."""
    for a in sorted(os.listdir(current_fd)):
        if not re.fullmatch(r"[0-9a-f]{1,2}", a):
            continue
        if not stat.S_ISDIR(os.stat(a, dir_fd=current_fd, follow_symlinks=False).st_mode):
            continue
        afd = open_dir(a, current_fd)
        try:
            for b in sorted(os.listdir(afd)):
                if not re.fullmatch(r"[0-9a-f]{1,2}", b):
                    continue
                if not stat.S_ISDIR(os.stat(b, dir_fd=afd, follow_symlinks=False).st_mode):
                    continue
                bfd = open_dir(b, afd)
                try:
                    for name in sorted(os.listdir(bfd)):
                        if name.endswith(".idx") and _HEX.fullmatch(name[:-4]):
                            yield a, b, name
                finally:
                    os.close(bfd)
        finally:
            os.close(afd)


def read_idx(current_fd: int, a: str, b: str, name: str) -> IdxFile:
    """One `.idx` file (FileInfo): its header and every non-zero location. A file in the
    wrong place for its ledger, or with a bad header, has its `problem`; a link, FIFO or
    other non-regular file raises NotRegularFileError (safeopen)."""
    lid = int(name[:-4], 16)
    problem = None
    if (a, b) != (f"{(lid >> 8) & 0xFF:x}", f"{lid & 0xFF:x}"):
        problem = f"{a}/{b}/{name} is not where BookKeeper keeps ledger {lid}'s index"
    afd = open_dir(a, current_fd)
    try:
        bfd = open_dir(b, afd)
    finally:
        os.close(afd)
    try:
        fd = open_regular(bfd, name)
    finally:
        os.close(bfd)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, _IDX_HEADER, 0)
        master, fenced = b"", False
        if len(head) < 16 or head[:4] != _IDX_MAGIC:
            return IdxFile(lid, b"", False, _NONE, _NOLOC, "no BKLE header")
        _version, klen = struct.unpack_from(">ii", head, 4)
        if not 0 <= klen <= _IDX_HEADER - 24:
            return IdxFile(
                lid, b"", False, _NONE, _NOLOC, f"masterKey length {klen} in a 1024-byte header"
            )
        master = head[12 : 12 + klen]
        (bits,) = struct.unpack_from(">i", head, 12 + klen)
        fenced = bool(bits & 1)
        eids: List[np.ndarray] = []
        locs: List[np.ndarray] = []
        pos = _IDX_HEADER
        while pos < size:
            chunk = os.pread(fd, min(_IDX_WINDOW, size - pos), pos)
            if not chunk:
                break
            usable = len(chunk) - len(chunk) % 8
            values = np.frombuffer(chunk[:usable], dtype=">u8")
            nz = np.nonzero(values)[0]
            first = (pos - _IDX_HEADER) // 8
            eids.append((nz + first).astype(np.int64))
            locs.append(values[nz].astype(np.uint64))
            pos += len(chunk)
        return IdxFile(
            lid,
            master,
            fenced,
            np.concatenate(eids) if eids else _NONE,
            np.concatenate(locs) if locs else _NOLOC,
            problem,
        )
    finally:
        os.close(fd)
