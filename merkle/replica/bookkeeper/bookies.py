"""Finding a bookie's ledger directories and reading their cookies.

A ledger directory D (BookKeeper's `ledgerDirectories` entry) holds `D/current/VERSION` (the
cookie) and the storage: entry logs `current/<hex>.log` with either DbLedgerStorage's
`current/ledgers` + `current/locations` RocksDBs or Interleaved/Sorted `.idx` directories. A
journal directory holds the same cookie and `*.txn` files only: not a ledger directory. A path
given may be a ledger directory, its `current/`, or any directory above ledger directories
(searched a few levels down, never through a link).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import List, Optional

from merkle.replica.bookkeeper.cookie import COOKIE_NAME, MAX_COOKIE_BYTES, Cookie, parse_cookie
from merkle.replica.safeopen import open_dir, read_regular

__all__ = ["LedgerDir", "dir_index_in_cookie", "find_ledger_dirs", "is_ledger_dir", "read_cookie"]

_SEARCH_DEPTH = 3
_ENTRY_LOG = re.compile(r"[0-9a-f]{1,16}\.log")
_IDX_DIR = re.compile(r"[0-9a-f]{1,2}")


@dataclass
class LedgerDir:
    """One ledger directory found: `path` as the user reached it (shown in findings)."""

    path: str
    cookie: Optional[Cookie] = None
    problem: Optional[str] = None
    #: where DbLedgerStorage keeps this directory's RocksDBs when the bookie has indexDirs
    #: (ledger dir i pairs with index dir i), else None: in the ledger directory itself
    index_path: Optional[str] = None

    @property
    def current(self) -> str:
        return os.path.join(self.path, "current")

    @property
    def index_current(self) -> str:
        return os.path.join(self.index_path or self.path, "current")


def _isdir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path, follow_symlinks=False).st_mode)
    except OSError:
        return False


def is_ledger_dir(path: str) -> bool:
    """True when `path/current/VERSION` exists and `current/` holds ledger storage (entry
    logs, the DbLedgerStorage DBs, `lastId` or `.idx` directories): cheap, never raises."""
    current = os.path.join(path, "current")
    if not _isdir(current) or not _isdir(path):
        return False
    try:
        names = os.listdir(current)
    except OSError:
        return False
    if COOKIE_NAME not in names:
        return False
    return any(
        n in ("ledgers", "locations", "lastId") or _ENTRY_LOG.fullmatch(n) or _IDX_DIR.fullmatch(n)
        for n in names
    )


def find_ledger_dirs(path: str, *, max_entries: Optional[int] = None) -> List[str]:
    """The ledger directories at or below `path` (see the module docstring), in path order;
    FileNotFoundError when `path` does not exist. `max_entries`: look at no more than this
    many entries of each directory searched (a cheap test: a bookie's root holds a few; a
    directory of thousands of container replicas or block files is no bookie's)."""
    os.stat(path)
    path = os.path.normpath(path)
    if os.path.basename(path) == "current" and is_ledger_dir(os.path.dirname(path)):
        return [os.path.dirname(path)]
    if is_ledger_dir(path):
        return [path]
    found: List[str] = []
    _search(path, 0, found, max_entries)
    return sorted(found)


def _search(path: str, depth: int, found: List[str], max_entries: Optional[int]) -> None:
    if depth >= _SEARCH_DEPTH:
        return
    subdirs: List[str] = []
    try:
        with os.scandir(path) as it:
            for seen, e in enumerate(it):
                if max_entries is not None and seen >= max_entries:
                    return  # too many entries for a bookie's directories: not one
                if e.is_dir(follow_symlinks=False):
                    subdirs.append(e.path)
    except OSError:
        return
    for sub in sorted(subdirs):
        if is_ledger_dir(sub):
            found.append(sub)
        elif os.path.basename(sub) != "current":
            _search(sub, depth + 1, found, max_entries)


def read_cookie(ledger_dir: LedgerDir) -> None:
    """Fill `ledger_dir.cookie`, or its `problem` (one line) when the cookie cannot be read."""
    from merkle.replica.bookkeeper.cookie import CookieError

    try:
        top = open_dir(ledger_dir.path, follow=True)
        try:
            fd = open_dir("current", top)
        finally:
            os.close(top)
    except OSError as exc:
        ledger_dir.problem = f"current/: {exc.strerror or exc}"
        return
    try:
        data = read_regular(
            fd, COOKIE_NAME, MAX_COOKIE_BYTES, display=os.path.join(ledger_dir.current, COOKIE_NAME)
        )
        ledger_dir.cookie = parse_cookie(data)
    except (OSError, CookieError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        ledger_dir.problem = f"current/VERSION: {why}"
    finally:
        os.close(fd)


def dir_index_in_cookie(path: str, cookie: Cookie, *, index: bool = False) -> Optional[int]:
    """The position of `path` among the cookie's ledgerDirs (`index`: its indexDirs),
    compared component by component from the end (cookies may hold relative paths), else
    None. The cookie's strings are only compared, never opened."""
    mine = [p for p in os.path.abspath(path).split("/") if p]
    for i, listed in enumerate(cookie.index_dirs if index else cookie.ledger_dirs):
        theirs = [p for p in os.path.normpath(listed).split("/") if p not in ("", ".")]
        if theirs and ".." not in theirs and mine[-len(theirs) :] == theirs:
            return i
    return None
