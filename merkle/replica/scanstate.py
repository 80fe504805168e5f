"""Progress that outlives the process: what a scan verified, when, and the identity it
verified (`crcmerkle scan --state DIR`), so that a rerun after `kill -9`, a reboot or an OOM
kill continues where the last one stopped, and a periodic run (`--max-age`) reads only what
changed or is due.

The state is one SQLite database in a private directory of this host (SQLite: atomic,
crash-safe transactions, a well-kept library in every CPython). One transaction per replica
verified, in WAL mode with `synchronous=FULL`: a replica's record is on disk before the next
replica is read, so a kill, a crash or a power loss loses at most the replica in flight; and
within a replica, the blocks verified so far (at most one transaction per `checkpoint_seconds`
of reading, merkle.replica.incremental), so that a large replica is not read again from its
first byte either.

A *pass* is one run over every replica: it starts when a run finds no pass in progress and
ends when a run has been through every replica of its PATHs. A rerun while a pass is in
progress skips what that pass already verified (identity unchanged); with `max_age` it also
skips what any pass verified within that age. Bit rot changes no metadata, so a replica is
still read at least once per `max_age`.

Trust: the directory and the database are refused unless this user owns them and nobody else
may write them (a link, a FIFO, another owner, a group- or world-writable mode: one line,
never opened); a database written by a newer format version is refused and left as it is;
one that is not a crcmerkle scan state or is corrupt is moved aside (never deleted) and a
new one started, with a warning. A replica's record is only used when the identity it
recorded equals the identity computed now (`replica_identity`: its directory, the names,
sizes, inodes and times of its files, and every chunk its block metadata records).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from merkle.replica.errors import ReplicaError

__all__ = [
    "DB_NAME",
    "FORMAT",
    "FORMAT_VERSION",
    "ReplicaRecord",
    "ScanState",
    "StateError",
    "parse_duration",
    "replica_identity",
    "volume_state_dir",
]

DB_NAME = "crcmerkle-scan-state.sqlite"
#: what the database's meta table says it is, and its schema's version
FORMAT = "crcmerkle-scan-state"
FORMAT_VERSION = 1

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE replicas (
    key TEXT PRIMARY KEY,          -- layout NUL replica path
    volume TEXT NOT NULL,          -- the volume root it was found on
    identity TEXT NOT NULL,        -- replica_identity when it was verified
    verified_at REAL NOT NULL,     -- Unix time its data was read
    record TEXT NOT NULL           -- the result as JSON (ScanResult.to_dict + value)
);
"""
#: progress within a replica in flight: the blocks verified so far, dropped when its record
#: is written. Part of version 1 without a new version number: a database written before it
#: gains the table when opened, and a crcmerkle without it never reads it.
_BLOCKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS blocks (
    key TEXT NOT NULL,             -- the replica's key, as in replicas
    identity TEXT NOT NULL,        -- the replica's identity when the block was read
    block_id INTEGER NOT NULL,
    verified_at REAL NOT NULL,     -- Unix time its data was read
    observation TEXT NOT NULL,     -- merkle.replica.verify.block_record as JSON
    PRIMARY KEY (key, block_id)
)
"""
#: a BookKeeper entry log verified (merkle.replica.bookkeeper.state): its copies can only be
#: judged with the other bookies', so the state keeps them (`copies`: an Arrow IPC stream of
#: the copies table's rows, compressed) beside its findings. Part of version 1 as `blocks`.
_LOGS_SCHEMA = """
CREATE TABLE IF NOT EXISTS entry_logs (
    key TEXT PRIMARY KEY,          -- layout NUL bookie NUL the log's path
    identity TEXT NOT NULL,        -- merkle.replica.bookkeeper.state.log_identity
    verified_at REAL NOT NULL,     -- Unix time its data was read
    record TEXT NOT NULL,          -- findings, bytes read, unindexed records (JSON)
    copies BLOB NOT NULL
)
"""


class StateError(ReplicaError):
    """The state directory or database cannot be used (one line; the scan does not start)."""


@dataclass(frozen=True)
class ReplicaRecord:
    """What the state holds of one replica."""

    identity: str
    verified_at: float
    record: Dict[str, Any]


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in a duration such as `7d`, `12h`, `30m`, `90s`, `2w` or a plain number of
    seconds; ValueError otherwise (zero and negative durations included)."""
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:], None)
    number = t[:-1] if unit is not None else t
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (e.g. 7d, 12h, 30m, 90s)") from None
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"not a positive duration: {text!r}")
    return value


def _check_private(st: os.stat_result, what: str, kind: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise StateError(f"{what}: a symbolic link, never followed: refused")
    want = stat.S_ISDIR if kind == "directory" else stat.S_ISREG
    if not want(st.st_mode):
        raise StateError(f"{what}: not a {kind}: refused")
    if st.st_uid != os.geteuid():
        raise StateError(
            f"{what}: owned by uid {st.st_uid}, not by this user ({os.geteuid()}): refused"
        )
    if st.st_mode & 0o022:
        raise StateError(
            f"{what}: writable by others (mode {stat.S_IMODE(st.st_mode):o}): refused "
            f"(the state decides what is not read again)"
        )


def _inside(path: str, roots: List[str]) -> Optional[str]:
    real = os.path.realpath(path)
    for r in roots:
        rr = os.path.realpath(r)
        if real == rr or real.startswith(rr.rstrip(os.sep) + os.sep):
            return r
    return None


def volume_state_dir(directory: str, volume: str) -> str:
    """The state directory of one volume under `directory` (a data-local Spark scan keeps a
    database per volume on the volume's host: its tasks are per volume and may run at once):
    `directory` created private when missing and refused like a state directory (StateError),
    the volume's one named by a digest of its path (a path is never a file name here)."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StateError(f"--state {directory}: cannot create it: {exc.strerror or exc}") from None
    _check_private(os.lstat(directory), f"--state {directory}", "directory")
    digest = hashlib.sha256(os.path.normpath(volume).encode("utf-8", "surrogateescape"))
    return os.path.join(directory, "volume-" + digest.hexdigest()[:32])


class ScanState:
    """The state database of one directory (see the module docstring). `scanned`: the PATHs
    the scan reads (the state may not lie under one: whoever can write a volume could plant
    it). `warn(line)` is told when a database is moved aside and a new one started."""

    def __init__(self, directory: str, scanned: List[str], warn: Any = None) -> None:
        self.directory = directory
        under = _inside(directory, scanned)
        if under is not None:
            raise StateError(
                f"--state {directory}: inside the scanned path {under} (whoever can write "
                f"the volume could plant it): give a directory off the volumes"
            )
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            try:
                os.mkdir(directory, 0o700)
            except OSError as exc:
                raise StateError(
                    f"--state {directory}: cannot create it: {exc.strerror or exc}"
                ) from None
            st = os.lstat(directory)
        _check_private(st, f"--state {directory}", "directory")
        self.path = os.path.join(directory, DB_NAME)
        self._lock = threading.Lock()
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                _check_private(os.lstat(self.path + suffix), self.path + suffix, "file")
            except FileNotFoundError:
                pass
        self.db = self._open(warn)
        self.pass_started = float(self._meta("pass_started") or 0.0)
        self.pass_completed = self._meta("pass_completed") == "1"

    # ---- opening ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # a private file: created 0600 whatever the umask
        old = os.umask(0o077)
        try:
            # one connection shared by the volume threads of `scan --loop`, behind self._lock
            db = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
        finally:
            os.umask(old)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def _open(self, warn: Any) -> sqlite3.Connection:
        fresh = not os.path.exists(self.path)
        try:
            db = self._connect()
            if fresh:
                self._create(db)
                return db
            problem = self._problem(db)
        except sqlite3.DatabaseError as exc:
            problem, db = f"not a readable SQLite database ({exc})", None
        if problem is None:
            assert db is not None
            db.execute(_BLOCKS_SCHEMA)
            db.execute(_LOGS_SCHEMA)
            return db
        if db is not None:
            db.close()
        aside = f"{self.path}.unusable-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
        for suffix in ("", "-wal", "-shm"):
            try:
                os.rename(self.path + suffix, aside + suffix)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StateError(
                    f"{self.path}: {problem}, and it cannot be moved aside: {exc.strerror or exc}"
                ) from None
        if warn is not None:
            warn(f"{self.path}: {problem}: moved to {aside}; starting afresh (every replica read)")
        db = self._connect()
        self._create(db)
        return db

    def _create(self, db: sqlite3.Connection) -> None:
        with db:
            db.execute("BEGIN")
            for statement in (*_SCHEMA.split(";"), _BLOCKS_SCHEMA, _LOGS_SCHEMA):
                if statement.strip():
                    db.execute(statement)
            db.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("format", FORMAT), ("version", str(FORMAT_VERSION)), ("pass_completed", "1")],
            )

    def _problem(self, db: sqlite3.Connection) -> Optional[str]:
        """Why an existing database is not this format (None when it is); StateError for a
        newer version (refused, left as it is)."""
        try:
            rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            return f"not a crcmerkle scan state ({exc})"
        if rows.get("format") != FORMAT:
            return "not a crcmerkle scan state (no format mark)"
        try:
            version = int(rows.get("version", ""))
        except ValueError:
            return "not a crcmerkle scan state (no version)"
        if version > FORMAT_VERSION:
            db.close()
            raise StateError(
                f"{self.path}: written by a newer crcmerkle (state version {version}, this "
                f"one reads {FORMAT_VERSION}): not read, not changed"
            )
        if version != FORMAT_VERSION:
            return f"state version {version}, not {FORMAT_VERSION}"
        check = db.execute("PRAGMA quick_check").fetchone()
        if not check or check[0] != "ok":
            return f"corrupt ({check[0] if check else 'no answer'})"
        return None

    def _meta(self, key: str) -> Optional[str]:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, **values: str) -> None:
        with self._lock, self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(values.items()))

    # ---- passes ----------------------------------------------------------------------------

    def begin_pass(self, now: Optional[float] = None) -> bool:
        """Start a pass unless one is in progress; True when an interrupted pass resumes."""
        if not self.pass_completed and self.pass_started > 0:
            return True
        self.pass_started = time.time() if now is None else now
        self.pass_completed = False
        self._set_meta(pass_started=repr(self.pass_started), pass_completed="0")
        return False

    def complete_pass(self) -> None:
        """Every replica of the pass was visited: the next run starts a new pass."""
        self.pass_completed = True
        self._set_meta(pass_completed="1", pass_ended=repr(time.time()))

    # ---- replicas --------------------------------------------------------------------------

    @staticmethod
    def key(layout: str, path: str) -> str:
        return f"{layout}\0{path}"

    def get(self, key: str) -> Optional[ReplicaRecord]:
        with self._lock:
            row = self.db.execute(
                "SELECT identity, verified_at, record FROM replicas WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        try:
            record = json.loads(row[2])
        except ValueError:
            return None  # never trusted: the replica is read again
        if not isinstance(record, dict):
            return None
        return ReplicaRecord(str(row[0]), float(row[1]), record)

    def put(
        self, key: str, volume: str, identity: str, verified_at: float, record: Dict[str, Any]
    ) -> None:
        """Record one verified replica, dropping its blocks' progress (one transaction, on
        disk when this returns)."""
        with self._lock, self.db:
            self.db.execute("BEGIN")
            self.db.execute(
                "INSERT OR REPLACE INTO replicas VALUES (?, ?, ?, ?, ?)",
                (key, volume, identity, verified_at, json.dumps(record, separators=(",", ":"))),
            )
            self.db.execute("DELETE FROM blocks WHERE key = ?", (key,))

    def put_log(
        self, key: str, identity: str, verified_at: float, record: Dict[str, Any], copies: bytes
    ) -> None:
        """Record one verified entry log (one transaction, on disk when this returns)."""
        with self._lock, self.db:
            self.db.execute("BEGIN")
            self.db.execute(
                "INSERT OR REPLACE INTO entry_logs VALUES (?, ?, ?, ?, ?)",
                (key, identity, verified_at, json.dumps(record, separators=(",", ":")), copies),
            )

    def get_log(self, key: str) -> Optional[Tuple[ReplicaRecord, bytes]]:
        """The entry log `key`'s record and copies, or None (none, or not readable)."""
        with self._lock:
            row = self.db.execute(
                "SELECT identity, verified_at, record, copies FROM entry_logs WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        try:
            record = json.loads(row[2])
        except ValueError:
            return None
        if not isinstance(record, dict) or not isinstance(row[3], bytes):
            return None
        return ReplicaRecord(str(row[0]), float(row[1]), record), row[3]

    def log_verified(self, key: str) -> Optional[Tuple[str, float]]:
        """The entry log `key`'s recorded (identity, verified_at), or None: what the order of
        a pass needs, without its record or copies."""
        with self._lock:
            row = self.db.execute(
                "SELECT identity, verified_at FROM entry_logs WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else (str(row[0]), float(row[1]))

    def put_blocks(
        self, key: str, identity: str, blocks: List[Tuple[int, float, Dict[str, Any]]]
    ) -> None:
        """Record blocks verified of a replica in flight, (block ID, when, observation) each
        (one transaction, on disk when this returns); the rows of an earlier identity go."""
        with self._lock, self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM blocks WHERE key = ? AND identity != ?", (key, identity))
            self.db.executemany(
                "INSERT OR REPLACE INTO blocks VALUES (?, ?, ?, ?, ?)",
                [
                    (key, identity, bid, at, json.dumps(ob, separators=(",", ":")))
                    for bid, at, ob in blocks
                ],
            )

    def blocks(self, key: str, identity: str) -> List[Tuple[int, float, Any]]:
        """The blocks recorded of the replica `key` at `identity`: (block ID, when, the
        observation's JSON data, or None when it does not parse)."""
        with self._lock:
            rows = self.db.execute(
                "SELECT block_id, verified_at, observation FROM blocks "
                "WHERE key = ? AND identity = ?",
                (key, identity),
            ).fetchall()
        out: List[Tuple[int, float, Any]] = []
        for bid, at, text in rows:
            try:
                data = json.loads(text)
            except (TypeError, ValueError):
                data = None
            out.append((int(bid), float(at), data))
        return out

    def count(self) -> int:
        with self._lock:
            return int(self.db.execute("SELECT COUNT(*) FROM replicas").fetchone()[0])

    def next_due(self, max_age: float) -> Optional[float]:
        """When the first recorded replica or entry log falls due again (its verification
        plus `max_age`, Unix time), None with nothing recorded."""
        with self._lock:
            rows = [
                self.db.execute(f"SELECT MIN(verified_at) FROM {table}").fetchone()
                for table in ("replicas", "entry_logs")
            ]
        times = [float(r[0]) for r in rows if r is not None and r[0] is not None]
        return min(times) + max_age if times else None

    def close(self) -> None:
        self.db.close()


# ---- identity ------------------------------------------------------------------------------


def _entries(dir_fd: int) -> Iterator[str]:
    for name in sorted(os.listdir(dir_fd)):
        if not name.startswith("."):  # temporaries of an atomic write (safeopen)
            yield name


def replica_identity(path: str, meta: Any, derived: tuple = (".tree",)) -> str:
    """What a replica is, told without reading its data (a hex SHA-256): its directory's
    device and inode, each entry of its `metadata/` and `chunks/` (name, type, size, inode,
    modification and change times; never through a link) except the derived files a scan
    writes (names ending in `derived`: the `.tree`) and temporaries, and every block and chunk
    its block metadata `meta` (a merkle.replica.blocks.ContainerMeta, or None) records, with
    their checksums. A write, an append, a replaced file or rewritten metadata changes it; bit
    rot does not (hence `--max-age`). OSError when the directory cannot be read."""
    h = hashlib.sha256()
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    root = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(root)
        h.update(f"dir {st.st_dev} {st.st_ino}\n".encode())
        for sub in ("metadata", "chunks"):
            try:
                fd = os.open(sub, flags, dir_fd=root)
            except FileNotFoundError:
                h.update(f"{sub} missing\n".encode())
                continue
            except OSError as exc:  # a link or a file where the directory should be
                h.update(f"{sub} unusable {exc.errno}\n".encode())
                continue
            try:
                for name in _entries(fd):
                    if name.endswith(derived):
                        continue
                    try:
                        e = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    h.update(
                        f"{sub}/{name!r} {e.st_mode:o} {e.st_size} {e.st_ino} "
                        f"{e.st_mtime_ns} {e.st_ctime_ns}\n".encode()
                    )
            finally:
                os.close(fd)
    finally:
        os.close(root)
    if meta is not None:
        h.update(f"meta {meta.container_id}\n".encode())
        for b in meta.sorted_blocks():
            h.update(f"block {b.block_id} {len(b.chunks)}\n".encode())
            for c in b.chunks:
                head = f"chunk {c.offset} {c.length} {c.checksum_type} {c.bytes_per_checksum} "
                h.update(head.encode())
                h.update(bytes(c.checksums))
    else:
        h.update(b"meta none\n")
    return h.hexdigest()
