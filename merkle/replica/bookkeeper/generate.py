"""`crcmerkle generate --layout bookkeeper`: bookies in BookKeeper's on-disk format, their
ledger metadata, injected faults and the ground truth in a manifest.

`generate_bookies(out, BookKeeperGeneratorConfig(...))` writes

    <out>/bookie-<n>/journal/current/VERSION       the cookie (no journal files)
    <out>/bookie-<n>/ledgers-<d>/current/...       cookie, entry logs, lastId, lastMark and
                                                   DbLedgerStorage's `ledgers`/`locations`
                                                   RocksDBs or Interleaved's `.idx` files
    <out>/zookeeper/ledgers/...                    the znode tree BookKeeper keeps (each
                                                   znode's bytes in `<path>/_data`): LAYOUT,
                                                   INSTANCEID, cookies/<bookieId>, 00/0000/L....
    <out>/ledger-metadata/<ledgerId>               the same metadata as `bookkeeper shell
                                                   ledgermetadata -dumptofile` writes it
    <out>/manifest.json                            the cluster, every fault, every finding a
                                                   scan must report

Bookie n (from 1) is `127.0.0.<n+1>:3181` and lists its directories relative to <out>, as a
bookie started in <out> would (the golden cluster's cookies do the same). The ledgers cycle
through the digest types CRC32C, CRC32 (the second with an empty password), HMAC and DUMMY;
ensembles of `ensemble` bookies with write and ack quorums, every entry on its round-robin write
set (RoundRobinDistributionSchedule, 64-bit); the second ledger changes its ensemble half-way when
there is a bookie to spare; the fault ledgers (open, past-last, deleted) are CRC32C.
`storage`: `db` (DbLedgerStorage, what Pulsar runs), `interleaved` (InterleavedLedgerStorage's
`.idx` files), `sorted` (SortedLedgerStorage, BookKeeper's default: the same files, each
memtable flush sorted), or `mixed` (bookies 1, 4, 7... db, 2, 5, 8... sorted, 3, 6, 9...
interleaved).

Faults (FAULT_TYPES; each count is a number of events, `default` is one of each), with the
finding the scan reports (merkle.replica.bookkeeper.scan, levels in merkle.replica.levels):
  payload-flip        one bit of one copy's payload           -> CORRUPT_ENTRY
  header-flip         one bit of one copy's ledger or entry ID -> ENTRY_FRAME_INVALID
  digest-flip         one bit of one copy's stored digest     -> CORRUPT_ENTRY
  missing-copy        one bookie of an entry's write set never stored it -> MISSING_ENTRY
  truncated-log       a bookie's last entry log cut inside its second-last entry
                                                 -> ENTRY_FRAME_INVALID for the last two
  index-past-end      one index location past the end of its log -> ENTRY_FRAME_INVALID
  compaction-leftover an interrupted compaction's `.log.compacting` and `.log.<id>.compacted`
                      files (UNINDEXED_ENTRY each, a warning) and a second copy of an indexed
                      entry in a later log (no finding: the index location counts)
  open-ledger         a ledger the metadata says is OPEN (lastEntryId -1) whose entries
                      are on its bookies                    -> ENTRY_OF_OPEN_LEDGER (warning)
  past-last-entry     a CLOSED ledger with entries stored past its lastEntryId
                                                            -> ENTRY_PAST_LAST_ENTRY (warning)
  deleted-ledger      a ledger on the bookies that the metadata no longer has
                                      -> LEDGER_NOT_IN_METADATA per bookie (warning)
  reformatted-bookie  a bookie wiped and formatted again (the same cookie, empty storage):
                      it holds none of what its segments give it -> BOOKIE_HOLDS_NOTHING
  foreign-cookie      a bookie whose cookie names another cluster's instanceId
                                   -> COOKIE_MISMATCH x2 (vs INSTANCEID, vs its registration)

Placement keeps the ground truth exact: every fault has its own ledger entry (and bookie
where it needs one), data faults fall on CLOSED ledgers the metadata has, never on a bookie
that is reformatted, and damage one copy of an entry (its other copies stay intact). The same
seed gives the same bytes.
"""

from __future__ import annotations

import json
import os
import posixpath
import random
import re
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import numpy as np

from merkle.replica.bookkeeper.genstore import DB, INTERLEAVED, SORTED, BookieStorage, Log
from merkle.replica.bookkeeper.write import (
    cookie_text,
    entry_bytes,
    layout_znode,
    ledger_metadata_v3,
    ledger_znode,
    log_header,
    master_key,
    rocksdb_problem,
)
from merkle.replica.levels import severity_of
from merkle.replica.synth import (
    MARKER_NAME,
    GeneratorError,
    prepare_output,
    remove_run,
    write_new_file,
)

__all__ = [
    "BookKeeperGeneratorConfig",
    "DEFAULT_FAULTS",
    "FAULT_TYPES",
    "STORAGES",
    "generate_bookies",
    "parse_faults",
]

PathLike = Union[str, "os.PathLike[str]"]
MANIFEST_NAME = "manifest.json"
ZK_DIR = "zookeeper"
ZK_ROOT = "ledgers"
DUMPS_DIR = "ledger-metadata"

FAULT_TYPES = (
    "payload-flip",
    "header-flip",
    "digest-flip",
    "missing-copy",
    "truncated-log",
    "index-past-end",
    "compaction-leftover",
    "open-ledger",
    "past-last-entry",
    "deleted-ledger",
    "reformatted-bookie",
    "foreign-cookie",
)
DEFAULT_FAULTS = ",".join(FAULT_TYPES)
STORAGES = ("db", "interleaved", "sorted", "mixed")
DIGESTS = ("CRC32C", "CRC32", "HMAC", "DUMMY")
#: the most bookies: bookie n is 127.0.0.<n+1>
MAX_BOOKIES = 250
MAX_LEDGERS = 10_000
MAX_ENTRIES = 100_000
#: the generator builds every bookie in memory before writing it: at most this much
MAX_BYTES = 1 << 30
#: a compaction's second copy of an entry reaches the log this many adds after the entry
_COPY_AFTER = 8
#: what a fault ledger (open, past-last, deleted) holds
_FAULT_LEDGER_ENTRIES = 6


def parse_faults(spec: str) -> Dict[str, int]:
    """'payload-flip=2,truncated-log' -> {'payload-flip': 2, 'truncated-log': 1}; 'none' ->
    {}; 'default' -> one of each."""
    spec = spec.strip()
    if spec in ("", "none"):
        return {}
    if spec == "default":
        spec = DEFAULT_FAULTS
    out: Dict[str, int] = {}
    for part in spec.split(","):
        name, _, count = part.strip().partition("=")
        name = name.strip()
        if name not in FAULT_TYPES:
            raise GeneratorError(
                f"unknown fault type {name[:40]!r} for the bookkeeper layout "
                f"(known: {', '.join(FAULT_TYPES)})"
            )
        try:
            n = int(count) if count else 1
        except ValueError:
            raise GeneratorError(f"fault count must be an integer: {part[:40]!r}") from None
        if not 0 <= n <= 1000:
            raise GeneratorError(f"fault count must be 0..1000: {part[:40]!r}")
        out[name] = out.get(name, 0) + n
    return out


@dataclass
class BookKeeperGeneratorConfig:
    """The cluster's shape, sizes (payload bytes) and faults."""

    bookies: int = 4
    ledger_dirs: int = 2
    storage: str = "db"
    ledgers: int = 6
    min_entries: int = 10
    max_entries: int = 30
    min_entry_size: int = 0
    max_entry_size: int = 512
    ensemble: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    #: logSizeLimit (BookKeeper's default is 1 GiB; small here so that logs rotate)
    log_size_limit: int = 6144  # the golden cluster's
    faults: Dict[str, int] = field(default_factory=dict)
    seed: int = 0
    #: where each bookie's host mounts its ledger directories: ledger directory d is
    #: `mount_path.format(dir=d)` in the cookies (the same on every host, as
    #: ledgerDirectories is), the journal its sibling `journal`; "" names them as written
    #: under OUT (bookie-N/ledgers-d). The simulated hosts mount them there.
    mount_path: str = ""

    def validate(self) -> None:
        if not 1 <= self.bookies <= MAX_BOOKIES:
            raise GeneratorError(f"bookies must be 1..{MAX_BOOKIES}")
        if not 1 <= self.ledger_dirs <= 16:
            raise GeneratorError("ledger directories per bookie must be 1..16")
        if self.storage not in STORAGES:
            raise GeneratorError(f"storage must be one of {', '.join(STORAGES)}")
        if not 1 <= self.ledgers <= MAX_LEDGERS:
            raise GeneratorError(f"ledgers must be 1..{MAX_LEDGERS}")
        if not 1 <= self.min_entries <= self.max_entries <= MAX_ENTRIES:
            raise GeneratorError(f"entries per ledger: need 1 <= MIN <= MAX <= {MAX_ENTRIES}")
        if not 0 <= self.min_entry_size <= self.max_entry_size <= 4 << 20:
            raise GeneratorError("entry size: need 0 <= MIN <= MAX <= 4MiB")
        if not 1 <= self.ack_quorum <= self.write_quorum <= self.ensemble <= self.bookies:
            raise GeneratorError(
                f"need 1 <= ackQuorum <= writeQuorum <= ensemble <= bookies, not "
                f"{self.ack_quorum} <= {self.write_quorum} <= {self.ensemble} <= {self.bookies}"
            )
        if self.mount_path:
            if not self.mount_path.startswith("/") or "{dir}" not in self.mount_path:
                raise GeneratorError("mount_path must be an absolute path template with {dir}")
        if self.log_size_limit < 4096:
            raise GeneratorError("the entry-log size limit must be at least 4KiB")
        for kind in self.faults:
            if kind not in FAULT_TYPES:
                raise GeneratorError(f"unknown fault type {kind!r} for the bookkeeper layout")
        most = (self.ledgers + sum(self.faults.values())) * self.max_entries
        if most * (self.max_entry_size + 64) * (self.write_quorum + 1) > MAX_BYTES:
            raise GeneratorError(
                f"up to {self.ledgers} ledgers of {self.max_entries} entries of "
                f"{self.max_entry_size} bytes: more than the {MAX_BYTES >> 20} MiB the generator "
                f"builds in memory (fewer ledgers, entries or bytes)"
            )
        spare = self.bookies - self.ensemble
        if self.faults.get("reformatted-bookie", 0) > spare:
            raise GeneratorError(
                f"reformatted-bookie={self.faults['reformatted-bookie']}: needs as many "
                f"bookies beyond the ensemble of {self.ensemble} (there are {spare}), so that "
                f"every entry keeps a copy"
            )
        if self.faults.get("foreign-cookie", 0) > self.bookies:
            raise GeneratorError("foreign-cookie: more events than bookies")


# ---- the cluster in memory -------------------------------------------------------------------


@dataclass
class _Ledger:
    lid: int
    digest: str
    password: bytes
    segments: List[Tuple[int, List[str]]]
    payload_sizes: List[int]
    state: str = "CLOSED"
    #: the entries the metadata says the ledger has (CLOSED), else -1
    last_entry_id: int = -1
    in_metadata: bool = True
    role: str = ""
    stored: List[bytes] = field(default_factory=list)
    lengths: List[int] = field(default_factory=list)

    def write_set(self, eid: int, write_quorum: int) -> List[str]:
        ensemble = self.segments[0][1]
        for first, members in self.segments:
            if first <= eid:
                ensemble = members
        return [ensemble[(eid + i) % len(ensemble)] for i in range(write_quorum)]

    def bookies(self) -> List[str]:
        seen: Dict[str, None] = {}
        for _, members in self.segments:
            for b in members:
                seen.setdefault(b, None)
        return list(seen)


def _payload(seed: int, lid: int, eid: int, size: int) -> bytes:
    """A payload's bytes: depend only on (seed, ledger, entry)."""
    return np.random.default_rng([seed & 0xFFFFFFFF, lid, eid, 0xB00C]).bytes(size)


def _bookie_id(n: int) -> str:
    return f"127.0.0.{n + 1}:3181"


class _Cluster:
    def __init__(self, cfg: BookKeeperGeneratorConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(f"bookkeeper/{cfg.seed}")
        self.frng = random.Random(f"bookkeeper-faults/{cfg.seed}")
        self.names = [f"bookie-{n}" for n in range(1, cfg.bookies + 1)]
        self.ids = {name: _bookie_id(n) for n, name in enumerate(self.names, 1)}
        self.by_id = {v: k for k, v in self.ids.items()}
        self.instance_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        kinds = {"db": DB, "interleaved": INTERLEAVED, "sorted": SORTED}
        self.kind = {
            name: kinds.get(cfg.storage) or (DB, SORTED, INTERLEAVED)[(n - 1) % 3]
            for n, name in enumerate(self.names, 1)
        }
        self.dirs = {
            name: (
                [f"{name}/ledgers"]
                if cfg.ledger_dirs == 1
                else [f"{name}/ledgers-{d}" for d in range(cfg.ledger_dirs)]
            )
            for name in self.names
        }
        self.storage = {
            name: BookieStorage(
                self.kind[name],
                cfg.ledger_dirs,
                cfg.log_size_limit,
                random.Random(f"bookkeeper/{cfg.seed}/{name}"),
            )
            for name in self.names
        }
        self.ledgers: List[_Ledger] = []
        self.faults: List[Dict[str, Any]] = []
        self.scenarios: List[Dict[str, Any]] = []
        #: (bookie, ledger, entry) copies not to store (missing-copy)
        self.skip: Set[Tuple[str, int, int]] = set()
        #: (ledger, entry) already given to a fault
        self.used: Set[Tuple[int, int]] = set()
        self.wiped: List[str] = []
        #: compaction-leftover: the copied entry -> (log, position) of its second copy
        self.copied: Dict[Tuple[str, int, int], Optional[Tuple[Log, int]]] = {}
        self.foreign: Dict[str, str] = {}

    # -- the plan ------------------------------------------------------------------------

    def plan(self) -> None:
        cfg, rng = self.cfg, self.rng
        n_wiped = cfg.faults.get("reformatted-bookie", 0)
        self.wiped = sorted(rng.sample(self.names, n_wiped), key=self.names.index)
        roles = (
            ["open-ledger"] * cfg.faults.get("open-ledger", 0)
            + ["past-last-entry"] * cfg.faults.get("past-last-entry", 0)
            + ["deleted-ledger"] * cfg.faults.get("deleted-ledger", 0)
        )
        # the fault ledgers' IDs among the others' (a flush sorts by ledger ID: the highest
        # IDs end every log), never 0 or 1 (the ensemble change's) when there is room
        total = cfg.ledgers + len(roles)
        low = 2 if total - 2 >= len(roles) else 0
        at = dict(zip(sorted(rng.sample(range(low, total), len(roles))), roles))
        base = 0
        for lid in range(total):
            self.ledgers.append(self._new_ledger(lid, at.get(lid, ""), base))
            base += lid not in at
        for wiped in self.wiped:
            wid = self.ids[wiped]
            if not any(wid in led.bookies() for led in self.ledgers if led.state == "CLOSED"):
                # the reformatted bookie must have been given something to lose
                led = next(led for led in self.ledgers if led.role in ("", "ensemble-change"))
                led.segments = [(0, [wid, *led.segments[0][1][1:]])]
                led.role = "" if led.role == "ensemble-change" else led.role

    def _new_ledger(self, lid: int, role: str, base: int) -> _Ledger:
        """Ledger `lid`, the `base`-th of the ledgers that are not a fault's: those cycle
        through the digest types (the fault ledgers are CRC32C)."""
        cfg, rng = self.cfg, self.rng
        digest = "CRC32C" if role else DIGESTS[base % len(DIGESTS)]
        password = b"" if digest == "CRC32" and base % 8 == 1 else f"gen-{lid}".encode()
        if role:
            n = _FAULT_LEDGER_ENTRIES
        else:
            n = rng.randint(cfg.min_entries, cfg.max_entries)
        sizes = [rng.randint(cfg.min_entry_size, cfg.max_entry_size) for _ in range(n)]
        ensemble = [self.ids[b] for b in rng.sample(self.names, cfg.ensemble)]
        segments: List[Tuple[int, List[str]]] = [(0, ensemble)]
        spare = [self.ids[b] for b in self.names if self.ids[b] not in ensemble]
        if base == 1 and not role and spare and n >= 2:
            # an ensemble change: one bookie replaced from the middle of the ledger on
            changed = list(ensemble)
            changed[rng.randrange(len(changed))] = rng.choice(spare)
            segments.append((n // 2, changed))
            role = "ensemble-change"
        led = _Ledger(lid, digest, password, segments, sizes, role=role)
        led.last_entry_id = n - 1
        if role == "open-ledger":
            led.state, led.last_entry_id = "OPEN", -1
        elif role == "past-last-entry":
            led.last_entry_id = n - 3  # two entries stored past it
        elif role == "deleted-ledger":
            led.in_metadata = False
        return led

    # -- writing the entries ---------------------------------------------------------------

    def build_entries(self) -> None:
        for led in self.ledgers:
            length = 0
            for eid, size in enumerate(led.payload_sizes):
                length += size
                payload = _payload(self.cfg.seed, led.lid, eid, size)
                led.stored.append(
                    entry_bytes(led.lid, eid, eid - 1, length, payload, led.digest, led.password)
                )
                led.lengths.append(length)

    def store(self) -> None:
        """Every add in the order the clients send them (the ledgers' adds interleaved), to
        every bookie of its write set, but a reformatted bookie (its data is gone) and the
        copies a missing-copy fault leaves out."""
        longest = max(len(led.stored) for led in self.ledgers)
        adds: Dict[str, int] = {name: 0 for name in self.names}
        due: Dict[Tuple[str, int, int], int] = {}  # a compaction's copy: after this many adds
        for eid in range(longest):
            for led in self.ledgers:
                if eid >= len(led.stored):
                    continue
                for bid in led.write_set(eid, self.cfg.write_quorum):
                    name = self.by_id[bid]
                    if name in self.wiped or (name, led.lid, eid) in self.skip:
                        continue
                    self.storage[name].add(led.lid, eid, led.stored[eid], master_key(led.password))
                    adds[name] += 1
                    if (name, led.lid, eid) in self.copied:
                        due[(name, led.lid, eid)] = adds[name] + _COPY_AFTER
                    for key in [k for k, at in due.items() if k[0] == name and at <= adds[name]]:
                        due.pop(key)
                        self._second_copy(key)
        for key in sorted(due):
            self._second_copy(key)
        for st in self.storage.values():
            st.flush()

    def _second_copy(self, key: Tuple[str, int, int]) -> None:
        """A compaction's copy of an indexed entry, written into the log as compaction
        writes (straight to the entry logger), never indexed."""
        name, lid, eid = key
        log, pos = self.storage[name].add_unindexed(lid, eid, self.ledgers[lid].stored[eid])
        self.copied[key] = (log, pos)

    # -- faults ----------------------------------------------------------------------------

    def expect(
        self,
        fault: Dict[str, Any],
        kind: str,
        *,
        bookie: Optional[str] = None,
        ledger: Optional[int] = None,
        entry: Optional[int] = None,
        file: Optional[str] = None,
        offset: Optional[int] = None,
    ) -> None:
        fault.setdefault("findings", []).append(
            {
                "kind": kind,
                "level": severity_of(kind),
                "bookie": self.ids[bookie] if bookie else None,
                "ledger": ledger,
                "entry": entry,
                "file": file,
                "offset": offset,
            }
        )

    def _fault(self, kind: str, **where: Any) -> Dict[str, Any]:
        fault: Dict[str, Any] = {"type": kind, **where}
        if "bookie" in where and where["bookie"]:
            fault["bookie_id"] = self.ids[where["bookie"]]
        self.faults.append(fault)
        return fault

    def _copies(
        self, *, digest_needed: bool = False, payload_needed: bool = False, peers: bool = True
    ) -> List[Tuple[str, int, int]]:
        """(bookie, ledger, entry) of every stored copy a data fault may take: of a CLOSED
        ledger the metadata has, up to its lastEntryId, on an intact bookie, of an entry no
        other fault took (one fault per entry: its other copies stay intact) and, with
        `peers`, whose write set holds no reformatted bookie (so that the entry keeps a good
        copy; a truncated log, which must take the entries its log ends with, does without)."""
        out: List[Tuple[str, int, int]] = []
        for led in self.ledgers:
            if led.role not in ("", "ensemble-change") or led.state != "CLOSED":
                continue
            if digest_needed and led.digest == "DUMMY":
                continue
            for eid in range(led.last_entry_id + 1):
                if (led.lid, eid) in self.used:
                    continue
                if payload_needed and not led.payload_sizes[eid]:
                    continue
                holders = [self.by_id[b] for b in led.write_set(eid, self.cfg.write_quorum)]
                if peers and any(name in self.wiped for name in holders):
                    continue  # a reformatted bookie lost its copy of the entry
                out.extend((name, led.lid, eid) for name in holders if name not in self.wiped)
        return out

    def _take(self, what: str, **need: bool) -> Tuple[str, int, int]:
        pool = self._copies(**need)
        if not pool:
            raise GeneratorError(
                f"{what}: no entry copy left to damage (more ledgers or entries, or fewer faults)"
            )
        name, lid, eid = self.frng.choice(pool)
        self.used.add((lid, eid))
        return name, lid, eid

    def plan_missing_copies(self) -> None:
        for _ in range(self.cfg.faults.get("missing-copy", 0)):
            name, lid, eid = self._take("missing-copy")
            self.skip.add((name, lid, eid))
            f = self._fault("missing-copy", bookie=name, ledger=lid, entry=eid)
            self.expect(f, "MISSING_ENTRY", bookie=name, ledger=lid, entry=eid)

    def file_of(self, name: str, log: Log) -> str:
        return f"{self.dirs[name][log.dir_index]}/current/{log.name}"

    def inject_after_store(self) -> None:
        """The faults on stored bytes and indexes, still in memory."""
        faults = self.cfg.faults
        # the leftover files first, then what cuts a log or points past its end
        for key in self.copied:
            self._compaction_leftover(key)
        for _ in range(faults.get("truncated-log", 0)):
            self._truncate()
        for _ in range(faults.get("index-past-end", 0)):
            self._index_past_end()
        for kind in ("payload-flip", "header-flip", "digest-flip"):
            for _ in range(faults.get(kind, 0)):
                self._flip(kind)

    def _truncate(self) -> None:
        """Cut the last written log of a bookie inside its second-last record (its last
        when that is the only one that may go): the entries cut are gone (their frames run
        past the end of the file)."""
        free = set(self._copies(peers=False))
        candidates = []
        for name in self.names:
            if name in self.wiped:
                continue
            for log in self.storage[name].last_logs():
                for k in (2, 1):
                    tail = log.records[-k:]
                    if len(tail) == k and all(
                        r.indexed and (name, r.ledger, r.entry) in free for r in tail
                    ):
                        candidates.append((name, log, tail))
                        break
        if not candidates:
            raise GeneratorError(
                "truncated-log: no bookie's last entry log ends in entries no other fault "
                "took (more ledgers or entries, or fewer faults)"
            )
        name, log, tail = self.frng.choice(candidates)
        cut = tail[0].pos + self.frng.randrange(max(1, tail[0].size))
        f = self._fault(
            "truncated-log",
            bookie=name,
            file=self.file_of(name, log),
            offset=cut,
            detail=f"cut from {len(log.data)} to {cut} bytes",
        )
        del log.data[cut:]
        for r in tail:
            self.used.add((r.ledger, r.entry))
            self.expect(
                f,
                "ENTRY_FRAME_INVALID",
                bookie=name,
                ledger=r.ledger,
                entry=r.entry,
                file=f["file"],
                offset=r.pos,
            )

    def _index_past_end(self) -> None:
        name, lid, eid = self._take("index-past-end")
        st = self.storage[name]
        n, log, pos = st.index[(lid, eid)]
        bogus = len(log.data) + 4096 + 4 * self.frng.randrange(256)
        st.index[(lid, eid)] = (n, log, bogus)
        file = self.file_of(name, log)
        f = self._fault(
            "index-past-end",
            bookie=name,
            ledger=lid,
            entry=eid,
            file=file,
            offset=bogus,
            detail=f"the index location moved from {pos} past the log's end",
        )
        self.expect(
            f, "ENTRY_FRAME_INVALID", bookie=name, ledger=lid, entry=eid, file=file, offset=bogus
        )

    def _flip(self, kind: str) -> None:
        name, lid, eid = self._take(
            kind, digest_needed=kind != "header-flip", payload_needed=kind == "payload-flip"
        )
        led = self.ledgers[lid]
        st = self.storage[name]
        _n, log, pos = st.index[(lid, eid)]
        n = {"CRC32C": 4, "CRC32": 8, "HMAC": 20, "DUMMY": 0}[led.digest]
        if kind == "payload-flip":
            at = pos + 32 + n + self.frng.randrange(led.payload_sizes[eid])
        elif kind == "digest-flip":
            lo = 4 if led.digest == "CRC32" else 0  # CRC32's upper 4 bytes are zeros
            at = pos + 32 + lo + self.frng.randrange(n - lo)
        else:  # the ledger ID (bytes 0..7) or the entry ID (8..15): their byte 6
            at = pos + self.frng.choice((0, 8)) + 6
        bit = self.frng.randrange(8)
        old = log.data[at]
        log.data[at] ^= 1 << bit
        file = self.file_of(name, log)
        f = self._fault(
            kind,
            bookie=name,
            ledger=lid,
            entry=eid,
            file=file,
            offset=at,
            detail=f"byte {old:#04x} -> {log.data[at]:#04x} (entry at {pos})",
        )
        found = "ENTRY_FRAME_INVALID" if kind == "header-flip" else "CORRUPT_ENTRY"
        self.expect(f, found, bookie=name, ledger=lid, entry=eid, file=file, offset=pos)

    def plan_compaction(self) -> None:
        """The entries an interrupted compaction copied (the copy is written by store)."""
        for _ in range(self.cfg.faults.get("compaction-leftover", 0)):
            self.copied[self._take("compaction-leftover")] = None

    def _compaction_leftover(self, key: Tuple[str, int, int]) -> None:
        """An interrupted transactional compaction: `<new>.log.compacting` and its hard-link
        name `<new>.log.<old>.compacted` holding a copy of an indexed entry, and that entry's
        second copy in the logs (store wrote it a few adds later: the copy a compaction
        wrote before the index moved; only the index location counts)."""
        name, lid, eid = key
        copy = self.copied[key]
        assert copy is not None
        dup_log, dup_pos = copy
        st = self.storage[name]
        n, log, pos = st.index[(lid, eid)]
        data = self.ledgers[lid].stored[eid]
        # a log ID past the pre-allocated one and past an earlier leftover's
        taken = [lg.log_id + 1 for lg in st.loggers[n].logs]
        taken += [int(leftover.split(".")[0], 16) for (_d, leftover) in st.extra_files]
        new_id = max(taken) + 1
        body = bytearray(log_header())
        body += len(data).to_bytes(4, "big") + data
        d = log.dir_index
        files = [f"{new_id:x}.log.compacting", f"{new_id:x}.log.{log.log_id:x}.compacted"]
        for leftover in files:
            st.extra_files[(d, leftover)] = bytes(body)
        f = self._fault(
            "compaction-leftover",
            bookie=name,
            ledger=lid,
            entry=eid,
            file=self.file_of(name, log),
            offset=pos,
            detail=f"second copy in {self.file_of(name, dup_log)} @{dup_pos} (not indexed); "
            f"leftover files {', '.join(files)}",
        )
        for leftover in files:
            self.expect(
                f, "UNINDEXED_ENTRY", bookie=name, file=f"{self.dirs[name][d]}/current/{leftover}"
            )

    def ledger_faults(self) -> None:
        """The faults that are whole ledgers or bookies (planned with the ledgers)."""
        for led in self.ledgers:
            holders = sorted(
                {
                    self.by_id[b]
                    for eid in range(len(led.stored))
                    for b in led.write_set(eid, self.cfg.write_quorum)
                }
                - set(self.wiped),
                key=self.names.index,
            )
            if led.role == "open-ledger":
                f = self._fault("open-ledger", ledger=led.lid, detail="state OPEN, lastEntryId -1")
                self.expect(f, "ENTRY_OF_OPEN_LEDGER", ledger=led.lid, entry=0)
            elif led.role == "past-last-entry":
                f = self._fault(
                    "past-last-entry",
                    ledger=led.lid,
                    detail=f"lastEntryId {led.last_entry_id}, entries stored up to "
                    f"{len(led.stored) - 1}",
                )
                self.expect(f, "ENTRY_PAST_LAST_ENTRY", ledger=led.lid, entry=led.last_entry_id + 1)
            elif led.role == "deleted-ledger":
                f = self._fault("deleted-ledger", ledger=led.lid, detail="no metadata")
                for name in holders:
                    self.expect(f, "LEDGER_NOT_IN_METADATA", bookie=name, ledger=led.lid)
            elif led.role == "ensemble-change":
                self.scenarios.append(
                    {"type": "ensemble-change", "ledger": led.lid, "findings": []}
                )
        for name in self.wiped:
            f = self._fault(
                "reformatted-bookie",
                bookie=name,
                detail="formatted again: the same cookie, empty storage",
            )
            self.expect(f, "BOOKIE_HOLDS_NOTHING", bookie=name)
        for _ in range(self.cfg.faults.get("foreign-cookie", 0)):
            free = [n for n in self.names if n not in self.foreign and n not in self.wiped]
            name = self.frng.choice(free or [n for n in self.names if n not in self.foreign])
            other = str(uuid.UUID(int=self.frng.getrandbits(128), version=4))
            self.foreign[name] = other
            file = f"{self.dirs[name][0]}/current/VERSION"
            f = self._fault("foreign-cookie", bookie=name, file=file, detail=f"instanceId {other}")
            self.expect(f, "COOKIE_MISMATCH", bookie=name, file=file)
            self.expect(f, "COOKIE_MISMATCH", bookie=name, file=file)
        for led in self.ledgers:
            if led.digest == "HMAC" and led.role == "":
                self.scenarios.append({"type": "hmac-ledger", "ledger": led.lid, "findings": []})
                break

    # -- on disk ---------------------------------------------------------------------------

    def cookie(self, name: str, instance_id: Optional[str] = None) -> bytes:
        journal, dirs = [f"{name}/journal"], self.dirs[name]
        if self.cfg.mount_path:  # as the bookie's host mounts them
            dirs = [self.cfg.mount_path.format(dir=d) for d in range(len(dirs))]
            journal = [posixpath.join(posixpath.dirname(dirs[0]), "journal")]
        return cookie_text(self.ids[name], journal, dirs, instance_id or self.instance_id)

    def write(self, root: Path) -> Dict[str, Any]:
        last_mark = (0x1A000000000 + (self.cfg.seed & 0xFFFFFF)).to_bytes(8, "big") + bytes(8)
        bookies: Dict[str, Any] = {}
        for name in self.names:
            cookie = self.cookie(name, self.foreign.get(name))
            journal = root / name / "journal" / "current"
            journal.mkdir(parents=True)
            (journal / "VERSION").write_bytes(cookie)
            currents = []
            for d in self.dirs[name]:
                current = root / d / "current"
                current.mkdir(parents=True)
                (current / "VERSION").write_bytes(cookie)
                currents.append(current)
            st = self.storage[name]
            if name in self.wiped:  # formatted again: empty storage
                st = BookieStorage(st.kind, len(currents), self.cfg.log_size_limit, st.rng)
            st.write(currents, last_mark)
            bookies[name] = {
                "id": self.ids[name],
                "storage": st.kind,
                "ledger_dirs": self.dirs[name],
                "journal_dir": f"{name}/journal",
                "copies": len(st.index),
            }
        self._write_metadata(root)
        return bookies

    def _write_metadata(self, root: Path) -> None:
        zk = root / ZK_DIR / ZK_ROOT
        dumps = root / DUMPS_DIR
        dumps.mkdir(parents=True)

        def znode(parts: List[str], data: bytes) -> None:
            where = zk.joinpath(*parts)
            where.mkdir(parents=True, exist_ok=True)
            (where / "_data").write_bytes(data)

        znode(["LAYOUT"], layout_znode())
        znode(["INSTANCEID"], self.instance_id.encode())
        for name in self.names:
            znode(["cookies", self.ids[name]], self.cookie(name))
        for led in self.ledgers:
            if not led.in_metadata:
                continue
            data = self.metadata_bytes(led)
            znode(ledger_znode(led.lid), data)
            (dumps / str(led.lid)).write_bytes(data)

    def metadata_bytes(self, led: _Ledger) -> bytes:
        closed = led.state == "CLOSED"
        return ledger_metadata_v3(
            ensemble_size=self.cfg.ensemble,
            write_quorum=self.cfg.write_quorum,
            ack_quorum=self.cfg.ack_quorum,
            state=led.state,
            last_entry_id=led.last_entry_id if closed else -1,
            length=led.lengths[led.last_entry_id] if closed and led.last_entry_id >= 0 else 0,
            segments=led.segments,
            digest_type=led.digest,
            password=led.password,
        )

    def manifest(self, bookies: Dict[str, Any]) -> Dict[str, Any]:
        findings = [dict(x, fault=f["type"]) for f in self.faults for x in f.get("findings", [])]
        findings.sort(
            key=lambda x: json.dumps([x[k] for k in ("kind", "bookie", "ledger", "entry")])
        )
        return {
            "layout": "bookkeeper",
            "config": asdict(self.cfg),
            "instance_id": self.instance_id,
            "metadata": {
                "znode_tree": ZK_DIR,
                "root": "/" + ZK_ROOT,
                "dumps": DUMPS_DIR,
            },
            "bookies": bookies,
            "ledgers": {
                str(led.lid): {
                    "in_metadata": led.in_metadata,
                    "role": led.role,
                    "state": led.state,
                    "digest_type": led.digest,
                    "password_hex": led.password.hex(),
                    "ensemble_size": self.cfg.ensemble,
                    "write_quorum": self.cfg.write_quorum,
                    "ack_quorum": self.cfg.ack_quorum,
                    "last_entry_id": led.last_entry_id,
                    "length": (
                        led.lengths[led.last_entry_id]
                        if led.state == "CLOSED" and led.last_entry_id >= 0
                        else 0
                    ),
                    "entries_stored": len(led.stored),
                    "segments": [[first, list(m)] for first, m in led.segments],
                }
                for led in self.ledgers
            },
            "copies": sum(b["copies"] for b in bookies.values()),
            "faults": self.faults,
            "scenarios": self.scenarios,
            "expected_findings": findings,
        }


_OWN = re.compile(r"bookie-\d+")


def _owns(name: str) -> bool:
    return name in (MARKER_NAME, MANIFEST_NAME, ZK_DIR, DUMPS_DIR) or bool(_OWN.fullmatch(name))


def generate_bookies(
    out: PathLike, config: Optional[BookKeeperGeneratorConfig] = None, **kwargs: Any
) -> Dict[str, Any]:
    """Write the bookies, their metadata and the manifest under `out` (new, empty or an
    earlier run, replaced) and return the manifest. kwargs override config fields."""
    cfg = config or BookKeeperGeneratorConfig()
    if kwargs:
        cfg = BookKeeperGeneratorConfig(**{**asdict(cfg), **kwargs})
    cfg.validate()
    problem = rocksdb_problem() if cfg.storage != "interleaved" else None
    if problem:
        raise GeneratorError(f"--storage {cfg.storage}: {problem}")
    cluster = _Cluster(cfg)
    cluster.plan()
    cluster.plan_missing_copies()
    cluster.plan_compaction()
    cluster.build_entries()
    cluster.store()
    cluster.inject_after_store()
    cluster.ledger_faults()
    root = Path(out)
    created = prepare_output(root, _owns)
    try:
        bookies = cluster.write(root)
        manifest = cluster.manifest(bookies)
        write_new_file(root, MANIFEST_NAME, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    except BaseException:  # also Ctrl-C: leave nothing half-written behind
        remove_run(root, _owns, keep_marker=not created)
        raise
    return manifest
