"""BookKeeper ledger metadata (what ZooKeeper keeps for each ledger), from bytes or files.

Serialised by BookKeeper's LedgerMetadataSerDe: `BookieMetadataFormatVersion\\t<v>\\n`, then
v3 (current since 4.9): a varint length and the binary `LedgerMetadataFormat` protobuf; v2:
the same message in protobuf text format; v1: lines (quorum, ensemble size, length, then
`<firstEntryId>\\t<bookie>...` segments and maybe `<lastEntryId>\\tCLOSE`). A missing version
line is v1, as BookKeeper reads it.

`parse_ledger_metadata(data)` reads one znode's bytes (`--zookeeper` reads them from a live
ZooKeeper); `load_ledger_metadata(path)` reads an operator's files: a directory of
`bookkeeper shell ledgermetadata -ledgerid N -dumptofile F` dumps, or a copy of the znode tree
(`ledgers/00/0000/L0000/_data`: hierarchical 2-4-4, long 3-4-4-4-4). Every size is bounded:
a znode larger than MAX_METADATA_BYTES, or more ensemble segments than entries they could
start, is one MetadataError line.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from merkle.replica.bookkeeper.textproto import (
    TextProtoError,
    parse_text,
    read_varint,
    signed64,
    wire_fields,
)
from merkle.replica.safeopen import open_dir, read_regular

__all__ = [
    "CLOSED",
    "CRC32",
    "CRC32C",
    "DIGEST_TYPES",
    "DUMMY",
    "HMAC",
    "IN_RECOVERY",
    "LedgerMetadata",
    "MAX_METADATA_BYTES",
    "MetadataError",
    "OPEN",
    "load_instance_id",
    "load_ledger_metadata",
    "load_registered_cookies",
    "parse_ledger_metadata",
]

#: a znode is at most 1 MiB by ZooKeeper's default jute.maxbuffer; a dump file beyond this is
#: not ledger metadata
MAX_METADATA_BYTES = 4 << 20
#: the most ledgers a metadata directory may list before the scan refuses it
MAX_LEDGERS = 10_000_000

OPEN, IN_RECOVERY, CLOSED = "OPEN", "IN_RECOVERY", "CLOSED"
_STATES = {1: OPEN, 2: IN_RECOVERY, 3: CLOSED}
CRC32, HMAC, CRC32C, DUMMY = "CRC32", "HMAC", "CRC32C", "DUMMY"
#: the stored enum (DataFormats.proto LedgerMetadataFormat.DigestType); the client API says MAC
DIGEST_TYPES = {1: CRC32, 2: HMAC, 3: CRC32C, 4: DUMMY}
_DIGEST_NAMES = {"CRC32": CRC32, "HMAC": HMAC, "MAC": HMAC, "CRC32C": CRC32C, "DUMMY": DUMMY}

_VERSION_KEY = b"BookieMetadataFormatVersion"
_V1_CLOSED = "CLOSE"
_V1_IN_RECOVERY = -100
_MAX_QUORUM = 1 << 16


class MetadataError(ValueError):
    """Ledger metadata that cannot be read (one line, naming where it came from)."""


@dataclass
class LedgerMetadata:
    """One ledger's metadata, as BookKeeper's client uses it. `segments`: (firstEntryId,
    bookie IDs) sorted by firstEntryId; `digest_type` one of DIGEST_TYPES' values, or None
    when the metadata does not say (v1, or no password stored)."""

    ledger_id: Optional[int]
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: str
    last_entry_id: int
    length: int
    segments: List[Tuple[int, Tuple[str, ...]]]
    digest_type: Optional[str] = None
    password: bytes = b""
    ctime: Optional[int] = None
    ctoken: Optional[int] = None
    custom: Dict[str, bytes] = field(default_factory=dict)
    format_version: int = 3

    def ensemble_at(self, entry_id: int) -> Tuple[str, ...]:
        """The ensemble of the segment with the greatest firstEntryId <= `entry_id`."""
        chosen = self.segments[0][1]
        for first, bookies in self.segments:
            if first > entry_id:
                break
            chosen = bookies
        return chosen

    def write_set(self, entry_id: int) -> Tuple[str, ...]:
        """The bookies that must hold `entry_id`: ensemble[(E + i) % ensembleSize] for
        i < writeQuorum, in 64-bit (Python int) arithmetic as RoundRobinDistributionSchedule
        does (not getWriteSetBookieIndex's int cast, wrong for E >= 2^31)."""
        ensemble = self.ensemble_at(entry_id)
        size = len(ensemble)
        return tuple(ensemble[(entry_id + i) % size] for i in range(min(self.write_quorum, size)))

    def write_sets(self) -> Callable[[int], Tuple[str, ...]]:
        """`write_set` for many entries of this ledger: the same answers, each write set
        made once per segment and position in its ensemble (a scan asks for every entry,
        and a ledger of 1 KiB entries has millions). The segment is found by bisection over
        the running maximum of the segments' firstEntryIds, which picks the segment
        `ensemble_at`'s walk picks even when a hostile metadata lists them out of order."""
        firsts = list(itertools.accumulate((first for first, _ in self.segments), max))
        made: Dict[Tuple[int, int], Tuple[str, ...]] = {}
        segments, quorum = self.segments, self.write_quorum

        def write_set(entry_id: int) -> Tuple[str, ...]:
            seg = max(bisect.bisect_right(firsts, entry_id) - 1, 0)
            ensemble = segments[seg][1]
            size = len(ensemble)
            if not size:
                return ()
            key = (seg, entry_id % size)
            got = made.get(key)
            if got is None:
                got = made[key] = tuple(
                    ensemble[(entry_id + i) % size] for i in range(min(quorum, size))
                )
            return got

        return write_set

    def bookies(self) -> List[str]:
        """Every bookie any segment names, in first-seen order."""
        seen: Dict[str, None] = {}
        for _, bookies in self.segments:
            for b in bookies:
                seen.setdefault(b, None)
        return list(seen)


def _header(data: bytes) -> Tuple[int, bytes]:
    """(format version, the bytes after the version line); no version line is v1."""
    if not data.startswith(_VERSION_KEY):
        return 1, data
    nl = data.find(b"\n", 0, 64)
    if nl < 0:
        raise MetadataError("the BookieMetadataFormatVersion line does not end")
    parts = data[:nl].split(b"\t")
    if len(parts) != 2 or not parts[1].strip().isdigit():
        raise MetadataError("a malformed BookieMetadataFormatVersion line")
    return int(parts[1]), data[nl + 1 :]


def parse_ledger_metadata(data: bytes, ledger_id: Optional[int] = None) -> LedgerMetadata:
    """One ledger's metadata from its serialised bytes (a znode's data or a dump file):
    v1, v2 or v3. MetadataError (one line) for anything else, oversized or inconsistent."""
    if len(data) > MAX_METADATA_BYTES:
        raise MetadataError(
            f"ledger metadata of {len(data)} bytes, more than the "
            f"{MAX_METADATA_BYTES} a znode can hold (not read)"
        )
    version, body = _header(bytes(data))
    try:
        if version == 3:
            meta = _from_binary(body)
        elif version == 2:
            meta = _from_text(parse_text(body))
        elif version == 1:
            meta = _from_lines(body)
        else:
            raise MetadataError(f"metadata format version {version} (known: 1, 2, 3)")
    except TextProtoError as exc:
        raise MetadataError(f"v{version} ledger metadata does not parse: {exc}") from None
    meta.format_version = version
    meta.ledger_id = ledger_id
    _check(meta)
    return meta


def _from_binary(body: bytes) -> LedgerMetadata:
    length, pos = read_varint(body, 0)
    if length > len(body) - pos:
        raise MetadataError(f"the v3 message claims {length} bytes, {len(body) - pos} remain")
    f: Dict[str, object] = {}
    segments: List[Tuple[int, Tuple[str, ...]]] = []
    custom: Dict[str, bytes] = {}
    ints = {
        1: "quorum",
        2: "ensemble",
        3: "length",
        4: "last",
        5: "state",
        7: "digest",
        9: "ack",
        10: "ctime",
        12: "ctoken",
    }
    for number, wire, value in wire_fields(body[pos : pos + length]):
        if number in ints and wire == 0:
            f[ints[number]] = signed64(int(value))
        elif number == 6 and isinstance(value, bytes):
            segments.append(_segment(value))
        elif number == 8 and wire == 2:
            f["password"] = value
        elif number == 11 and isinstance(value, bytes):
            key, val = _custom(value)
            custom[key] = val
    return _build(f, segments, custom)


def _segment(raw: bytes) -> Tuple[int, Tuple[str, ...]]:
    members: List[str] = []
    first = None
    for number, wire, value in wire_fields(raw):
        if number == 1 and wire == 2:
            members.append(bytes(value).decode("utf-8", "replace"))
        elif number == 2 and wire == 0:
            first = signed64(int(value))
    if first is None:
        raise MetadataError("an ensemble segment without firstEntryId")
    return first, tuple(members)


def _custom(raw: bytes) -> Tuple[str, bytes]:
    key, val = "", b""
    for number, wire, value in wire_fields(raw):
        if number == 1 and wire == 2:
            key = bytes(value).decode("utf-8", "replace")
        elif number == 2 and wire == 2:
            val = bytes(value)
    return key, val


def _text_int(msg: dict, name: str) -> Optional[int]:
    values = msg.get(name)
    if not values:
        return None
    try:
        return int(values[-1], 0) if isinstance(values[-1], str) else None
    except ValueError:
        raise MetadataError(f"field {name}: not a number: {values[-1][:20]!r}") from None


def _from_text(msg: dict) -> LedgerMetadata:
    f: Dict[str, object] = {}
    for key, name in (
        ("quorum", "quorumSize"),
        ("ensemble", "ensembleSize"),
        ("length", "length"),
        ("last", "lastEntryId"),
        ("ack", "ackQuorumSize"),
        ("ctime", "ctime"),
        ("ctoken", "cToken"),
    ):
        value = _text_int(msg, name)
        if value is not None:
            f[key] = value
    states = {v: k for k, v in _STATES.items()}
    if msg.get("state"):
        f["state"] = states.get(str(msg["state"][-1]), 0)
    if msg.get("digestType"):
        names = {v: k for k, v in DIGEST_TYPES.items()}
        f["digest"] = names.get(_DIGEST_NAMES.get(str(msg["digestType"][-1]), ""), 0)
    if msg.get("password") and isinstance(msg["password"][-1], bytes):
        f["password"] = msg["password"][-1]
    segments = []
    for seg in msg.get("segment", []):
        if not isinstance(seg, dict):
            raise MetadataError("segment is not a message")
        first = _text_int(seg, "firstEntryId")
        if first is None:
            raise MetadataError("an ensemble segment without firstEntryId")
        members = tuple(
            bytes(m).decode("utf-8", "replace")
            for m in seg.get("ensembleMember", [])
            if isinstance(m, bytes)
        )
        segments.append((first, members))
    custom = {}
    for kv in msg.get("customMetadata", []):
        if isinstance(kv, dict) and kv.get("key"):
            custom[bytes(kv["key"][-1]).decode("utf-8", "replace")] = bytes(
                (kv.get("value") or [b""])[-1]
            )
    return _build(f, segments, custom)


def _from_lines(body: bytes) -> LedgerMetadata:
    lines = body.decode("utf-8", "replace").split("\n")
    try:
        quorum, ensemble, length = int(lines[0]), int(lines[1]), int(lines[2])
        segments = []
        state, last = OPEN, -1
        for line in lines[3:]:
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) > 1 and parts[1] == _V1_CLOSED:
                entry = int(parts[0])
                state, last = (IN_RECOVERY, -1) if entry == _V1_IN_RECOVERY else (CLOSED, entry)
                break
            segments.append((int(parts[0]), tuple(parts[1:])))
    except (ValueError, IndexError):
        raise MetadataError(
            "v1 ledger metadata does not parse (lines of numbers expected)"
        ) from None
    f: Dict[str, object] = {
        "quorum": quorum,
        "ensemble": ensemble,
        "ack": quorum,
        "state": {v: k for k, v in _STATES.items()}[state],
        "last": last,
        "length": length if state == CLOSED else 0,
    }
    return _build(f, segments, {})


def _build(
    f: Dict[str, object], segments: List[Tuple[int, Tuple[str, ...]]], custom: Dict[str, bytes]
) -> LedgerMetadata:
    """The client's view (LedgerMetadataSerDe.decodeFormat): ackQuorum defaults to the write
    quorum; lastEntryId and length count only when CLOSED; the digest type only with a
    password."""

    def num(key: str, default: int) -> int:
        value = f.get(key, default)
        return value if isinstance(value, int) else default

    def optional(key: str) -> Optional[int]:
        value = f.get(key)
        return value if isinstance(value, int) else None

    quorum = num("quorum", 0)
    state = _STATES.get(num("state", 1), OPEN)
    closed = state == CLOSED
    password = f.get("password")
    digest = DIGEST_TYPES.get(num("digest", 0)) if isinstance(password, bytes) else None
    return LedgerMetadata(
        ledger_id=None,
        ensemble_size=num("ensemble", 0),
        write_quorum=quorum,
        ack_quorum=num("ack", quorum),
        state=state,
        last_entry_id=num("last", -1) if closed else -1,
        length=num("length", 0) if closed else 0,
        segments=sorted(segments, key=lambda s: s[0]),
        digest_type=digest,
        password=bytes(password) if isinstance(password, bytes) else b"",
        ctime=optional("ctime"),
        ctoken=optional("ctoken"),
        custom=custom,
    )


def _check(meta: LedgerMetadata) -> None:
    """MetadataError for metadata no BookKeeper client could use (and a planted segment loop:
    two segments starting at one entry, or segments out of order)."""
    if not meta.segments:
        raise MetadataError("no ensemble segment")
    if not 1 <= meta.ensemble_size <= _MAX_QUORUM:
        raise MetadataError(f"ensembleSize {meta.ensemble_size} out of range")
    if not 1 <= meta.write_quorum <= meta.ensemble_size:
        raise MetadataError(
            f"writeQuorum {meta.write_quorum} not within 1..ensembleSize {meta.ensemble_size}"
        )
    if not 1 <= meta.ack_quorum <= meta.write_quorum:
        raise MetadataError(
            f"ackQuorum {meta.ack_quorum} not within 1..writeQuorum {meta.write_quorum}"
        )
    firsts = [first for first, _ in meta.segments]
    if firsts[0] != 0:
        raise MetadataError(f"the first ensemble segment starts at entry {firsts[0]}, not 0")
    if len(set(firsts)) != len(firsts):
        raise MetadataError("two ensemble segments start at the same entry (a segment loop)")
    if any(f < 0 for f in firsts):
        raise MetadataError("an ensemble segment starts at a negative entry")
    for first, bookies in meta.segments:
        if len(bookies) != meta.ensemble_size:
            raise MetadataError(
                f"the segment from entry {first} names {len(bookies)} "
                f"bookies, ensembleSize is {meta.ensemble_size}"
            )
    if meta.state == CLOSED and meta.last_entry_id >= 0 and firsts[-1] > meta.last_entry_id + 1:
        raise MetadataError(
            f"a segment starts at entry {firsts[-1]}, past lastEntryId {meta.last_entry_id} + 1"
        )


# ---- files --------------------------------------------------------------------------------

_LEDGER_NODE = re.compile(r"L([0-9]{4})")
_DUMP_NAME = re.compile(r"(?:ledger[-_]?)?(-?[0-9]+)(?:\.[A-Za-z0-9]+)?")


def load_ledger_metadata(path: str) -> Dict[int, LedgerMetadata]:
    """Every ledger's metadata under `path`: a single dump file (named by its ledger ID), a
    directory of dumps (`<ledgerId>` or `<ledgerId>.<ext>` files), or a copy of the znode tree
    (`<root>/ledgers/00/0000/L0000/_data`, found at any depth below `path`, long 3-4-4-4-4
    paths too). MetadataError (one line, naming the file) for a file that does not parse;
    links are not followed, files are opened without following links."""
    st = os.stat(path)
    if stat.S_ISREG(st.st_mode):
        directory, base = os.path.split(os.path.abspath(path))
        return {
            _dump_id(base, path): _read_one(
                open_dir(directory, follow=True), base, path, _dump_id(base, path)
            )
        }
    out: Dict[int, LedgerMetadata] = {}
    _walk(path, [], out, 0)
    if not out:
        raise MetadataError(
            f"{path}: no ledger metadata found (dump files named by ledger "
            f"ID, or a znode tree with ledgers/00/0000/L0000/_data)"
        )
    return out


def _dump_id(base: str, shown: str) -> int:
    m = _DUMP_NAME.fullmatch(base)
    if not m:
        raise MetadataError(f"{shown}: a metadata dump file is named by its ledger ID")
    return int(m.group(1))


def _read_one(dfd: int, name: str, shown: str, ledger_id: int) -> LedgerMetadata:
    try:
        data = read_regular(dfd, name, MAX_METADATA_BYTES, display=shown)
    except OSError as exc:
        raise MetadataError(f"{shown}: {exc.strerror or exc}") from None
    finally:
        os.close(dfd)
    try:
        return parse_ledger_metadata(data, ledger_id)
    except MetadataError as exc:
        raise MetadataError(f"{shown}: {exc}") from None


def _znode_id(parts: List[str]) -> Optional[int]:
    """The ledger ID of a hierarchical (2-4-4) or long hierarchical (3-4-4-4-4) znode path
    (the components above `_data`, ending in `L<4 digits>`), else None."""
    if not parts or not _LEDGER_NODE.fullmatch(parts[-1]):
        return None
    for widths in ((2, 4), (3, 4, 4, 4)):
        tail = parts[-1 - len(widths) : -1]
        if len(tail) == len(widths) and all(
            len(p) == w and p.isdigit() for p, w in zip(tail, widths)
        ):
            return int("".join(tail) + parts[-1][1:])
    return None


def _walk(top: str, parts: List[str], out: Dict[int, LedgerMetadata], depth: int) -> None:
    if depth > 8 or len(out) > MAX_LEDGERS:
        return
    here = os.path.join(top, *parts)
    with os.scandir(here) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            if e.name not in (
                "cookies",
                "underreplication",
                "available",
                "INSTANCEID",
                "LAYOUT",
                "idgen",
                "idgen-long",
            ):
                _walk(top, parts + [e.name], out, depth + 1)
        elif e.is_file(follow_symlinks=False):
            if e.name == "_data":
                lid = _znode_id(parts)
                if lid is not None:
                    out[lid] = _read_one(open_dir(here), "_data", e.path, lid)
            elif depth == 0 and _DUMP_NAME.fullmatch(e.name):
                lid = _dump_id(e.name, e.path)
                out[lid] = _read_one(open_dir(here), e.name, e.path, lid)


def load_instance_id(path: str) -> Optional[str]:
    """The cluster's INSTANCEID from a copy of the znode tree under `path`
    (`<root>/INSTANCEID/_data`, a few levels down), else None (dump files do not hold it)."""
    if not os.path.isdir(path):
        return None
    for depth_glob in ("INSTANCEID", "*/INSTANCEID", "*/*/INSTANCEID"):
        import glob

        for node in sorted(glob.glob(os.path.join(glob.escape(path), depth_glob))):
            try:
                dfd = open_dir(node)
            except OSError:
                continue
            try:
                data = read_regular(dfd, "_data", 4096, display=node)
            except OSError:
                continue
            finally:
                os.close(dfd)
            return data.decode("utf-8", "replace").strip() or None
    return None


#: the most registered cookies read from a znode tree copy
MAX_COOKIES = 100_000


def load_registered_cookies(path: str) -> Optional[Dict[str, bytes]]:
    """The cookies the metadata store registers (`<root>/cookies/<bookieId>/_data`, bytes by
    bookie ID) in a copy of the znode tree under `path`, else None (no `cookies` node: dump
    files do not hold them). Directory names are bookie IDs (data): each is opened relative
    to the `cookies` directory, never followed through a link."""
    import glob

    from merkle.replica.bookkeeper.cookie import MAX_COOKIE_BYTES

    if not os.path.isdir(path):
        return None
    for pattern in ("cookies", "*/cookies", "*/*/cookies"):
        for node in sorted(glob.glob(os.path.join(glob.escape(path), pattern))):
            try:
                cfd = open_dir(node)
            except OSError:
                continue
            out: Dict[str, bytes] = {}
            try:
                for name in sorted(os.listdir(cfd))[:MAX_COOKIES]:
                    try:
                        bfd = open_dir(name, cfd)
                    except OSError:
                        continue
                    try:
                        out[name] = read_regular(
                            bfd,
                            "_data",
                            MAX_COOKIE_BYTES,
                            display=os.path.join(node, name, "_data"),
                        )
                    except OSError:
                        continue
                    finally:
                        os.close(bfd)
            finally:
                os.close(cfd)
            return out
    return None
