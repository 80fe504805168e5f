"""A bookie's cookie: `current/VERSION` in each of its journal, ledger and index directories.

BookKeeper's Cookie.toString: layout 5 is the line `5` then the protobuf text format of
CookieFormat (bookieHost, journalDir, ledgerDirs, instanceId, indexDirs); layout 3 (and 4) is
four plain lines: version, bookieHost, journalDir, ledgerDirs. Directory lists are
`"<count>\\t<dir>\\t<dir>..."` with the tab written as the two characters `\\t` in the text
format (the parsed string holds a real tab either way). Everything in a cookie is data: a
bookieHost or directory that looks like a path is shown, compared, never opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from merkle.replica.bookkeeper.textproto import TextProtoError, parse_text

__all__ = ["COOKIE_NAME", "Cookie", "CookieError", "MAX_COOKIE_BYTES", "parse_cookie"]

COOKIE_NAME = "VERSION"
#: a real cookie is a few hundred bytes; a larger VERSION file is not read
MAX_COOKIE_BYTES = 64 << 10
_MAX_DIRS = 1024


class CookieError(ValueError):
    """A VERSION file that is not a bookie cookie (one line)."""


@dataclass(frozen=True)
class Cookie:
    """A parsed cookie. `bookie_id` is bookieHost (the bookie's ID); `ledger_dirs` and
    `index_dirs` as listed (strings, never opened)."""

    layout_version: int
    bookie_id: str
    journal_dirs: Tuple[str, ...]
    ledger_dirs: Tuple[str, ...]
    instance_id: str = ""
    index_dirs: Tuple[str, ...] = ()


def _dirs(text: str, what: str) -> Tuple[str, ...]:
    """`<count>\\t<dir>...` (Cookie.decodeDirPaths), the count checked."""
    parts = text.split("\t")
    if not parts[0].strip().isdigit():
        raise CookieError(f"{what}: no directory count")
    count = int(parts[0])
    if count > _MAX_DIRS or count != len(parts) - 1:
        raise CookieError(
            f"{what}: the count {parts[0][:12]} does not match the "
            f"{len(parts) - 1} directories listed"
        )
    return tuple(parts[1:])


def _text(value: object) -> str:
    if not isinstance(value, bytes):
        raise CookieError("a cookie field is not a string")
    return value.decode("utf-8", "replace")


def parse_cookie(data: bytes) -> Cookie:
    """The cookie in `data` (a VERSION file's bytes); CookieError (one line) otherwise."""
    if len(data) > MAX_COOKIE_BYTES:
        raise CookieError(f"a VERSION of {len(data)} bytes is no cookie (not read)")
    first, _, rest = bytes(data).partition(b"\n")
    if not first.strip().isdigit():
        raise CookieError("the first line is not a cookie layout version")
    version = int(first)
    if version >= 5:
        return _from_text(version, rest)
    if version >= 3:
        return _from_lines(version, rest)
    raise CookieError(f"cookie layout version {version} (BookKeeper reads 3 and later)")


def _from_text(version: int, rest: bytes) -> Cookie:
    try:
        msg = parse_text(rest)
    except TextProtoError as exc:
        raise CookieError(f"the cookie does not parse: {exc}") from None

    def one(name: str, required: bool = True) -> str:
        values = msg.get(name)
        if not values:
            if required:
                raise CookieError(f"the cookie has no {name}")
            return ""
        return _text(values[-1])

    host = one("bookieHost")
    if not host:
        raise CookieError("the cookie's bookieHost is empty")
    index = one("indexDirs", required=False)
    return Cookie(
        version,
        host,
        tuple(one("journalDir").split(",")),
        _dirs(one("ledgerDirs"), "ledgerDirs"),
        one("instanceId", required=False),
        _dirs(index, "indexDirs") if index else (),
    )


def _from_lines(version: int, rest: bytes) -> Cookie:
    lines = rest.decode("utf-8", "replace").split("\n")
    if len(lines) < 3 or not lines[0]:
        raise CookieError(f"a layout-{version} cookie has four lines")
    return Cookie(version, lines[0], tuple(lines[1].split(",")), _dirs(lines[2], "ledgerDirs"))
