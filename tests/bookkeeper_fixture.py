"""Small bookies written by hand from BookKeeper's format (BOOKKEEPER.md), for tests: an
Interleaved/Sorted-storage ledger directory (cookie, entry log, `.idx` files) and ledger
metadata files (v1 lines, v2 text, v3 binary). The generator of real bookies is a later step;
these are the few bytes each test needs, written from the spec, not from BookKeeper's code."""

from __future__ import annotations

import hashlib
import hmac
import struct
import zlib
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import merkle

DIGEST_LENGTH = {"CRC32C": 4, "CRC32": 8, "HMAC": 20, "DUMMY": 0}
_DIGEST_ENUM = {"CRC32": 1, "HMAC": 2, "CRC32C": 3, "DUMMY": 4}
_STATE_ENUM = {"OPEN": 1, "IN_RECOVERY": 2, "CLOSED": 3}


def entry_bytes(
    ledger: int,
    entry: int,
    payload: bytes,
    digest_type: str = "CRC32C",
    password: bytes = b"",
    lac: int = -1,
    length: int = 0,
    bad_digest: bool = False,
) -> bytes:
    """One stored entry: header(32) ‖ digest ‖ payload (DigestManager's layout)."""
    header = struct.pack(">qqqq", ledger, entry, lac, length or len(payload))
    if digest_type == "CRC32C":
        digest = struct.pack(">I", merkle.crc32c(header + payload))
    elif digest_type == "CRC32":
        digest = struct.pack(">Q", zlib.crc32(header + payload))
    elif digest_type == "HMAC":
        key = hashlib.sha1(b"mac" + password).digest()
        digest = hmac.new(key, header + payload, hashlib.sha1).digest()
    else:
        digest = b""
    if bad_digest and digest:
        digest = bytes([digest[0] ^ 0x40]) + digest[1:]
    return header + digest + payload


def cookie(bookie_id: str, ledger_dirs: Sequence[str], instance_id: str = "cluster-1") -> bytes:
    dirs = "\\t".join([str(len(ledger_dirs)), *ledger_dirs])
    return (
        f'5\nbookieHost: "{bookie_id}"\njournalDir: "/journal"\nledgerDirs: "{dirs}"\n'
        f'instanceId: "{instance_id}"\n'
    ).encode()


def log_header(map_offset: int = 0, count: int = 0) -> bytes:
    return (b"BKLO" + struct.pack(">iqi", 1, map_offset, count)).ljust(1024, b"\0")


def idx_bytes(locations: Dict[int, int], master_key: bytes = b"k" * 20) -> bytes:
    head = (
        b"BKLE" + struct.pack(">ii", 1, len(master_key)) + master_key + struct.pack(">ii", 0, 0)
    ).ljust(1024, b"\0")
    top = max(locations, default=-1) + 1
    body = bytearray(8 * top)
    for e, loc in locations.items():
        body[8 * e : 8 * e + 8] = struct.pack(">Q", loc)
    return head + bytes(body)


def write_bookie(
    root: Path,
    bookie_id: str,
    entries: List[Tuple[int, int, bytes]],
    index: Optional[List[Tuple[int, int]]] = None,
    instance_id: str = "cluster-1",
    log_id: int = 0,
    passwords: Optional[Dict[int, bytes]] = None,
) -> Path:
    """A ledger directory `root` with one entry log holding `entries` ((ledger, entry,
    stored bytes) in order) and `.idx` files naming `index` ((ledger, entry), default: every
    entry) at their locations, each with the master key of the ledger's password in
    `passwords` (default b"pw"). Returns `root`."""
    current = root / "current"
    current.mkdir(parents=True)
    (current / "VERSION").write_bytes(cookie(bookie_id, [str(root)], instance_id))
    log = bytearray(log_header())
    where: Dict[Tuple[int, int], int] = {}
    for ledger, entry, data in entries:
        log += struct.pack(">i", len(data))
        where[(ledger, entry)] = len(log)
        log += data
    (current / f"{log_id:x}.log").write_bytes(bytes(log))
    per_ledger: Dict[int, Dict[int, int]] = {}
    for ledger, entry in index if index is not None else list(where):
        per_ledger.setdefault(ledger, {})[entry] = (log_id << 32) | where[(ledger, entry)]
    for ledger, locs in per_ledger.items():
        d = current / f"{(ledger >> 8) & 0xFF:x}" / f"{ledger & 0xFF:x}"
        d.mkdir(parents=True, exist_ok=True)
        password = (passwords or {}).get(ledger, b"pw")
        key = hashlib.sha1(b"ledger" + password).digest()
        (d / f"{ledger:x}.idx").write_bytes(idx_bytes(locs, key))
    return root


def positions(root: Path, log_id: int = 0) -> List[int]:
    """The positions of the records in a log written by write_bookie (after each size)."""
    data = (root / "current" / f"{log_id:x}.log").read_bytes()
    out, pos = [], 1024
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        out.append(pos + 4)
        pos += 4 + size
    return out


# ---- ledger metadata -------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: object) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value if isinstance(value, bytes) else str(value).encode()
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def metadata_v3(
    segments: Sequence[Tuple[int, Sequence[str]]],
    *,
    write: int,
    ack: int,
    state: str = "CLOSED",
    last: int = -1,
    length: int = 0,
    digest: str = "CRC32C",
    password: bytes = b"",
) -> bytes:
    body = (
        _field(1, write)
        + _field(2, len(segments[0][1]))
        + _field(3, length)
        + _field(4, last)
        + _field(5, _STATE_ENUM[state])
    )
    for first, bookies in segments:
        seg = b"".join(_field(1, b) for b in bookies) + _field(2, first)
        body += _field(6, seg)
    body += _field(7, _DIGEST_ENUM[digest]) + _field(8, password) + _field(9, ack)
    return b"BookieMetadataFormatVersion\t3\n" + _varint(len(body)) + body


def metadata_v2(
    segments: Sequence[Tuple[int, Sequence[str]]],
    *,
    write: int,
    ack: int,
    state: str = "CLOSED",
    last: int = -1,
    length: int = 0,
    digest: str = "CRC32C",
    password: bytes = b"",
) -> bytes:
    lines = [
        f"quorumSize: {write}",
        f"ensembleSize: {len(segments[0][1])}",
        f"length: {length}",
        f"lastEntryId: {last}",
        f"state: {state}",
    ]
    for first, bookies in segments:
        members = " ".join(f'ensembleMember: "{b}"' for b in bookies)
        lines.append(f"segment {{\n  {members}\n  firstEntryId: {first}\n}}")
    escaped = "".join(f"\\{c:03o}" for c in password)
    lines += [f"digestType: {digest}", f'password: "{escaped}"', f"ackQuorumSize: {ack}"]
    return b"BookieMetadataFormatVersion\t2\n" + "\n".join(lines).encode() + b"\n"


def metadata_v1(
    segments: Sequence[Tuple[int, Sequence[str]]],
    *,
    write: int,
    last: Optional[int] = None,
    length: int = 0,
) -> bytes:
    lines = [str(write), str(len(segments[0][1])), str(length)]
    lines += ["\t".join([str(first), *bookies]) for first, bookies in segments]
    if last is not None:
        lines.append(f"{last}\tCLOSE")
    return ("\n".join(lines) + "\n").encode()
