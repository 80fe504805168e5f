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
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from merkle.replica.bookkeeper.textproto import TextProtoError, wire_fields
from merkle.replica.safeopen import open_dir, open_regular

__all__ = [
    "IdxFile",
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


def db_indexes(current: str) -> Tuple[Dict[int, LedgerData], List[Tuple[int, int, int]], List[str]]:
    """(LedgerData by ledger ID, [(ledger, entry, location)] sorted, problems) of the
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
    entries: List[Tuple[int, int, int]] = []
    db, snap = _open_snapshot_db(os.path.join(current, "locations"))
    try:
        for key, value in _items(db):
            if len(key) != 16 or len(value) != 8:
                problems.append(f"locations DB: a key of {len(key)} / value of {len(value)} bytes")
                continue
            lid, eid = struct.unpack(">qq", key)
            (loc,) = struct.unpack(">Q", value)
            entries.append((lid, eid, loc))
    finally:
        db.close()  # type: ignore[attr-defined]
        shutil.rmtree(snap, ignore_errors=True)
    return ledgers, entries, problems[:20]


@dataclass(frozen=True)
class IdxFile:
    ledger_id: int
    master_key: bytes
    fenced: bool
    locations: List[Tuple[int, int]]  # (entry, location), location != 0
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
            return IdxFile(lid, b"", False, [], "no BKLE header")
        _version, klen = struct.unpack_from(">ii", head, 4)
        if not 0 <= klen <= _IDX_HEADER - 24:
            return IdxFile(lid, b"", False, [], f"masterKey length {klen} in a 1024-byte header")
        master = head[12 : 12 + klen]
        (bits,) = struct.unpack_from(">i", head, 12 + klen)
        fenced = bool(bits & 1)
        locs: List[Tuple[int, int]] = []
        pos = _IDX_HEADER
        while pos < size:
            chunk = os.pread(fd, min(_IDX_WINDOW, size - pos), pos)
            if not chunk:
                break
            usable = len(chunk) - len(chunk) % 8
            values = np.frombuffer(chunk[:usable], dtype=">u8")
            nz = np.nonzero(values)[0]
            first = (pos - _IDX_HEADER) // 8
            locs.extend(zip((nz + first).tolist(), values[nz].astype(np.uint64).tolist()))
            pos += len(chunk)
        return IdxFile(lid, master, fenced, locs, problem)
    finally:
        os.close(fd)
