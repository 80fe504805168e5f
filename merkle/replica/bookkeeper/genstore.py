"""A generated bookie's ledger storage, built in memory, then written: the entry loggers, the
indexes (DbLedgerStorage's RocksDBs or Interleaved's `.idx` files) and the small files of each
ledger directory (`lastId`, `lastMark`).

The generator (merkle.replica.bookkeeper.generate) feeds each bookie the entries of its write
sets in the order a client sends them; the storage lays them out as BookKeeper does:

- DbLedgerStorage: ledger L in ledger dir `L mod numDirs` (DbLedgerStorage.getLedgerStorage),
  one entry logger per directory, entries reaching the log at each write-cache flush sorted by
  (ledger, entry) (SingleDirectoryDbLedgerStorage.checkpoint, WriteCache.forEach);
- Interleaved: one entry logger for the bookie, entries in arrival order, each new log in a
  directory picked at random (EntryLogManagerForSingleEntryLog / pickRandomWritableDir), each
  ledger's `.idx` in a directory picked at random when the ledger is first written;
- Sorted (BookKeeper's default): Interleaved's files, the entries reaching the log at each
  memtable flush sorted by (ledger, entry) (EntryMemTable's snapshot).

A log rotates when the next record would pass the size limit (EntryLogManagerBase
.reachEntryLogLimit); a rotated log gets its ledgers map and header; the last written one keeps
both at 0; the next log is pre-allocated as a 0-byte file (what a clean shutdown leaves) and
`lastId` names it. Everything stays in memory until `write` so that the generator's faults can
change an index location or a log's bytes before anything reaches the disk.
"""

from __future__ import annotations

import os
import random
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from merkle.replica.bookkeeper.entrylog import HEADER_SIZE, location
from merkle.replica.bookkeeper.write import (
    idx_bytes,
    idx_relpath,
    ledger_data,
    ledgers_map,
    log_header,
    write_rocksdb,
)

__all__ = ["DB", "INTERLEAVED", "SORTED", "BookieStorage", "Log", "Record"]

DB, INTERLEAVED, SORTED = "DbLedgerStorage", "InterleavedLedgerStorage", "SortedLedgerStorage"
#: entries a DbLedgerStorage directory's write cache (SortedLedgerStorage's memtable) collects
#: before a flush sorts them
FLUSH_EVERY = 16


@dataclass
class Record:
    """A record written into a log: `pos` of the entry's first byte (after its size int)."""

    ledger: int
    entry: int
    pos: int
    size: int
    indexed: bool = True


@dataclass
class Log:
    log_id: int
    dir_index: int
    data: bytearray = field(default_factory=lambda: bytearray(log_header()))
    sizes: Dict[int, int] = field(default_factory=lambda: defaultdict(int))
    records: List[Record] = field(default_factory=list)
    #: the ledgers map was appended (a rotated log)
    has_map: bool = False

    @property
    def name(self) -> str:
        return f"{self.log_id:x}.log"

    def close_with_map(self) -> None:
        """BufferedLogChannel.appendLedgersMap: the map at the end, its offset and count in
        the header."""
        offset = len(self.data)
        self.data += ledgers_map(dict(self.sizes))
        self.data[:HEADER_SIZE] = log_header(offset, len(self.sizes))
        self.has_map = True


class _EntryLogger:
    """One entry logger: its logs, the current one, the log size limit."""

    def __init__(self, dirs: List[int], limit: int, rng: random.Random) -> None:
        self.dirs = dirs
        self.limit = limit
        self.rng = rng
        self.logs: List[Log] = []

    def _new_log(self) -> Log:
        d = self.dirs[0] if len(self.dirs) == 1 else self.rng.choice(self.dirs)
        log = Log(len(self.logs), d)
        self.logs.append(log)
        return log

    def add(self, ledger: int, entry: int, data: bytes, indexed: bool = True) -> Tuple[Log, int]:
        need = len(data) + 4
        if not self.logs:
            self._new_log()
        elif len(self.logs[-1].data) + need > self.limit and self.logs[-1].records:
            self.logs[-1].close_with_map()
            self._new_log()
        log = self.logs[-1]
        log.data += struct.pack(">i", len(data))
        pos = len(log.data)
        log.data += data
        log.sizes[ledger] += need
        log.records.append(Record(ledger, entry, pos, len(data), indexed))
        return log, pos

    def preallocated(self) -> Tuple[int, int]:
        """(ID, directory) of the pre-allocated next log, a 0-byte file after shutdown."""
        d = self.dirs[0] if len(self.dirs) == 1 else self.rng.choice(self.dirs)
        return len(self.logs), d


class BookieStorage:
    """One bookie's ledger storage over `num_dirs` ledger directories, in memory."""

    def __init__(self, kind: str, num_dirs: int, limit: int, rng: random.Random) -> None:
        self.kind = kind
        self.num_dirs = num_dirs
        self.rng = rng
        if kind == DB:
            self.loggers = [_EntryLogger([d], limit, rng) for d in range(num_dirs)]
        else:
            self.loggers = [_EntryLogger(list(range(num_dirs)), limit, rng)]
        self._cache: Dict[int, List[Tuple[int, int, bytes]]] = defaultdict(list)
        #: (ledger, entry) -> (logger, log, pos) of the indexed copy
        self.index: Dict[Tuple[int, int], Tuple[int, Log, int]] = {}
        self.master_keys: Dict[int, bytes] = {}
        #: Interleaved: the directory of each ledger's `.idx`
        self.idx_dir: Dict[int, int] = {}
        #: files beside the logs (a compaction's leftovers, `<hex id>.log...`): (dir, name) ->
        #: bytes
        self.extra_files: Dict[Tuple[int, str], bytes] = {}

    def logger_of(self, ledger: int) -> int:
        return ledger % self.num_dirs if self.kind == DB else 0

    def logger_of_dir(self, d: int) -> int:
        return d if self.kind == DB else 0

    def add(self, ledger: int, entry: int, data: bytes, key: bytes) -> None:
        """An add the bookie acknowledged (journalled; reaches the log at the next flush)."""
        self.master_keys.setdefault(ledger, key)
        n = self.logger_of(ledger)
        if self.kind != DB and ledger not in self.idx_dir:
            self.idx_dir[ledger] = self.rng.randrange(self.num_dirs)
        if self.kind == INTERLEAVED:
            log, pos = self.loggers[0].add(ledger, entry, data)
            self.index[(ledger, entry)] = (0, log, pos)
            return
        self._cache[n].append((ledger, entry, data))
        if len(self._cache[n]) >= FLUSH_EVERY:
            self._flush(n)

    def _flush(self, n: int) -> None:
        for ledger, entry, data in sorted(self._cache.pop(n, []), key=lambda t: t[:2]):
            log, pos = self.loggers[n].add(ledger, entry, data)
            self.index[(ledger, entry)] = (n, log, pos)

    def flush(self) -> None:
        """The checkpoint at shutdown: every cached entry reaches its log."""
        for n in sorted(self._cache):
            self._flush(n)

    def add_unindexed(self, ledger: int, entry: int, data: bytes) -> Tuple[Log, int]:
        """A record no index names (a compaction's second copy of an indexed entry)."""
        return self.loggers[self.logger_of(ledger)].add(ledger, entry, data, indexed=False)

    def locate(self, ledger: int, entry: int) -> Optional[Tuple[Log, int]]:
        got = self.index.get((ledger, entry))
        return (got[1], got[2]) if got else None

    def logs(self) -> List[Log]:
        return [log for logger in self.loggers for log in logger.logs]

    def last_logs(self) -> List[Log]:
        """The last written log of each entry logger (no ledgers map)."""
        return [logger.logs[-1] for logger in self.loggers if logger.logs]

    # ---- on disk ------------------------------------------------------------------------

    def write(self, currents: List[Path], last_mark: bytes) -> Dict[Tuple[int, int], str]:
        """Write the storage into the ledger directories' `current/` (created, with their
        cookie, by the caller); returns each log's file, relative to its `current/`, by
        (logger, log ID)."""
        files: Dict[Tuple[int, int], str] = {}
        last_id: Dict[int, int] = {}
        for n, logger in enumerate(self.loggers):
            for log in logger.logs:
                (currents[log.dir_index] / log.name).write_bytes(bytes(log.data))
                files[(n, log.log_id)] = log.name
            pre_id, pre_dir = logger.preallocated()
            (currents[pre_dir] / f"{pre_id:x}.log").write_bytes(b"")
            for d in logger.dirs:
                last_id[d] = max(last_id.get(d, 0), pre_id)
        for d, name in self.extra_files:  # a compaction log took an ID of the same allocator
            for other in self.loggers[self.logger_of_dir(d)].dirs:
                last_id[other] = max(last_id.get(other, 0), int(name.split(".")[0], 16))
        for d, current in enumerate(currents):
            (current / "lastId").write_text(f"{last_id.get(d, 0):x}\n")
            (current / "lastMark").write_bytes(last_mark)
        for (d, name), data in sorted(self.extra_files.items()):
            (currents[d] / name).write_bytes(data)
        if self.kind == DB:
            self._write_db(currents)
        else:
            self._write_idx(currents)
        return files

    def _write_db(self, currents: List[Path]) -> None:
        for d, current in enumerate(currents):
            ledgers = sorted({lid for (lid, _eid), (n, _l, _p) in self.index.items() if n == d})
            write_rocksdb(
                current / "ledgers",
                [(struct.pack(">q", lid), ledger_data(self.master_keys[lid])) for lid in ledgers],
            )
            write_rocksdb(
                current / "locations",
                [
                    (struct.pack(">qq", lid, eid), struct.pack(">Q", location(log.log_id, pos)))
                    for (lid, eid), (n, log, pos) in self.index.items()
                    if n == d
                ],
                lz4=True,
            )

    def _write_idx(self, currents: List[Path]) -> None:
        by_ledger: Dict[int, Dict[int, int]] = defaultdict(dict)
        for (lid, eid), (_n, log, pos) in self.index.items():
            by_ledger[lid][eid] = location(log.log_id, pos)
        for lid, locs in sorted(by_ledger.items()):
            a, b, name = idx_relpath(lid)
            where = currents[self.idx_dir[lid]] / a / b
            os.makedirs(where, exist_ok=True)
            (where / name).write_bytes(idx_bytes(self.master_keys[lid], locs))
