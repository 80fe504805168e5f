"""BookKeeper's on-disk bytes, written: what the generator (merkle.replica.bookkeeper.generate)
puts on its bookies and into its metadata store. Each function writes what one BookKeeper
class writes (named in its docstring; the facts with their sources are in BOOKKEEPER.md), the
same bytes the readers beside it (cookie, entrylog, index, metadata) parse; the golden cluster
(tests/data/bookkeeper-golden, written by BookKeeper itself) is the reference the tests compare
them with, field by field.

Nothing here reads a bookie: the generator is the only caller, on directories it creates.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import zlib
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from merkle._crc import crc32c
from merkle.replica.bookkeeper.digest import DIGEST_LENGTHS, mac_key
from merkle.replica.bookkeeper.entrylog import HEADER_SIZE

__all__ = [
    "IDX_HEADER_SIZE",
    "IDX_PAGE_SIZE",
    "cookie_text",
    "entry_bytes",
    "idx_bytes",
    "idx_relpath",
    "layout_znode",
    "ledger_data",
    "ledger_metadata_v3",
    "ledger_znode",
    "log_header",
    "ledgers_map",
    "master_key",
    "rocksdb_problem",
    "write_rocksdb",
]

_DIGEST_ENUM = {"CRC32": 1, "HMAC": 2, "CRC32C": 3, "DUMMY": 4}
_STATE_ENUM = {"OPEN": 1, "IN_RECOVERY": 2, "CLOSED": 3}
IDX_HEADER_SIZE = 1024
#: IndexPersistenceMgr writes whole pages of pageSize (8192 bytes: 1024 locations)
IDX_PAGE_SIZE = 8192


# ---- the stored entry (DigestManager) -------------------------------------------------------


def _digest(digest_type: str, password: bytes, covered: bytes) -> bytes:
    """The digest over header ‖ payload: CRC32C 4 bytes, CRC32 8 (writeLong of zlib's
    CRC-32), HMAC-SHA1 20 keyed SHA-1("mac" + password), DUMMY none."""
    if digest_type == "CRC32C":
        return struct.pack(">I", crc32c(covered))
    if digest_type == "CRC32":
        return struct.pack(">Q", zlib.crc32(covered))
    if digest_type == "HMAC":
        return hmac.new(mac_key(password), covered, hashlib.sha1).digest()
    if digest_type == "DUMMY":
        return b""
    raise ValueError(f"unknown digest type {digest_type!r}")


def entry_bytes(
    ledger_id: int,
    entry_id: int,
    last_add_confirmed: int,
    length: int,
    payload: bytes,
    digest_type: str,
    password: bytes = b"",
) -> bytes:
    """The entry as the client sends it and the bookie stores it
    (DigestManager.computeDigestAndPackageForSendingV3): ledgerId, entryId, lastAddConfirmed,
    length (the ledger's length including this entry), all 8 bytes big-endian, the digest,
    the payload."""
    header = struct.pack(">qqqq", ledger_id, entry_id, last_add_confirmed, length)
    digest = _digest(digest_type, password, header + payload)
    assert len(digest) == DIGEST_LENGTHS[digest_type]
    return header + digest + payload


def master_key(password: bytes) -> bytes:
    """DigestManager.generateMasterKey: SHA-1("ledger" + password)."""
    return hashlib.sha1(b"ledger" + bytes(password)).digest()


# ---- entry logs (DefaultEntryLogger) ----------------------------------------------------------


def log_header(ledgers_map_offset: int = 0, ledgers_count: int = 0) -> bytes:
    """EntryLoggerAllocator's 1024-byte header: "BKLO", version 1, the ledgers map's offset and
    count (0 until BufferedLogChannel.appendLedgersMap writes them), zeros."""
    head = b"BKLO" + struct.pack(">iqi", 1, ledgers_map_offset, ledgers_count)
    return head + bytes(HEADER_SIZE - len(head))


def ledgers_map(sizes: Dict[int, int], batch: int = 10_000) -> bytes:
    """BufferedLogChannel.appendLedgersMap's records: per batch of at most `batch` ledgers,
    int size, ledgerId -1, entryId -2, int count, then (ledgerId, bytes) pairs, bytes being
    the sum of (entry size + 4) of the ledger in this log."""
    out = bytearray()
    items = sorted(sizes.items())
    for start in range(0, len(items), batch):
        part = items[start : start + batch]
        out += struct.pack(">iqqi", 4 + 8 + 8 + 4 + 16 * len(part) - 4, -1, -2, len(part))
        for lid, size in part:
            out += struct.pack(">qq", lid, size)
    return bytes(out)


# ---- indexes --------------------------------------------------------------------------------


def ledger_data(master: bytes, *, fenced: bool = False) -> bytes:
    """LedgerMetadataIndex's value: DbLedgerStorageDataFormats.proto LedgerData with exists
    (1) true, fenced (2) and masterKey (3), as protobuf-java serialises it (golden:
    `080110001a14<key>`)."""
    return b"\x08\x01\x10" + (b"\x01" if fenced else b"\x00") + _len_field(3, master)


def idx_relpath(ledger_id: int) -> Tuple[str, str, str]:
    """IndexPersistenceMgr.getLedgerName: `<hex((L>>8)&0xff)>/<hex(L&0xff)>/<hex L>.idx`."""
    return (
        f"{(ledger_id & 0xFF00) >> 8:x}",
        f"{ledger_id & 0xFF:x}",
        f"{ledger_id & 0xFFFFFFFFFFFFFFFF:x}.idx",
    )


def idx_bytes(master: bytes, locations: Dict[int, int], *, fenced: bool = False) -> bytes:
    """A ledger's `.idx` file (FileInfo.writeHeader, V1, no explicit LAC; then whole pages of
    8-byte big-endian locations, entry E at 1024 + 8E, 0 where absent)."""
    head = b"BKLE" + struct.pack(">ii", 1, len(master)) + master
    head += struct.pack(">ii", 1 if fenced else 0, 0)
    head += bytes(IDX_HEADER_SIZE - len(head))
    if not locations:
        return head
    per_page = IDX_PAGE_SIZE // 8
    pages = max(locations) // per_page + 1
    body = bytearray(pages * IDX_PAGE_SIZE)
    for eid, loc in locations.items():
        struct.pack_into(">Q", body, 8 * eid, loc)
    return head + bytes(body)


def rocksdb_problem() -> Optional[str]:
    """Why the RocksDB binding cannot be loaded (one line), or None when it can."""
    from merkle.replica.rocksdb import VolumeDBError, load_rocksdict

    try:
        load_rocksdict()
    except VolumeDBError as exc:
        return str(exc)
    return None


def write_rocksdb(db_dir: Path, rows: Iterable[Tuple[bytes, bytes]], *, lz4: bool = False) -> None:
    """A RocksDB at `db_dir` holding `rows`, made as KeyValueStorageRocksDB makes it (the
    default column family and bytewise comparator; block-based table format_version 5 with
    kxxHash checksums, its defaults; `lz4`: LZ4 compression, the `locations` DB's default),
    flushed to an SST file so that any RocksDB opens it."""
    from merkle.replica.rocksdb import load_rocksdict

    rd = load_rocksdict()
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(True)
    if lz4:
        opts.set_compression_type(rd.DBCompressionType.lz4())
    table = rd.BlockBasedOptions()
    table.set_format_version(5)
    table.set_checksum_type(rd.ChecksumType.xxhash())
    opts.set_block_based_table_factory(table)
    db = rd.Rdict(os.fspath(db_dir), options=opts)
    try:
        for key, value in sorted(rows):
            db[key] = value
        db.flush()
    finally:
        db.close()
    try:  # the binding's own file is no part of BookKeeper's DB
        os.unlink(os.path.join(os.fspath(db_dir), "rocksdict-config.json"))
    except FileNotFoundError:
        pass


# ---- cookies (Cookie.toString, layout 5) -----------------------------------------------------


def _text_string(value: str) -> str:
    """A protobuf text-format string literal (TextFormat's escaping: the tab as `\\t`)."""
    out = []
    for byte in value.encode("utf-8"):
        ch = chr(byte)
        if ch in "\"'\\":
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def cookie_text(
    bookie_id: str,
    journal_dirs: Sequence[str],
    ledger_dirs: Sequence[str],
    instance_id: Optional[str],
    index_dirs: Sequence[str] = (),
) -> bytes:
    """A layout-5 cookie: `5`, then CookieFormat in text format (bookieHost, journalDir joined
    with `,`, ledgerDirs `<count>\\t<dir>...`, instanceId, indexDirs when set)."""
    lines = [
        "5",
        f"bookieHost: {_text_string(bookie_id)}",
        f"journalDir: {_text_string(','.join(journal_dirs))}",
        f"ledgerDirs: {_text_string(chr(9).join([str(len(ledger_dirs)), *ledger_dirs]))}",
    ]
    if instance_id:
        lines.append(f"instanceId: {_text_string(instance_id)}")
    if index_dirs:
        lines.append(f"indexDirs: {_text_string(chr(9).join([str(len(index_dirs)), *index_dirs]))}")
    return ("\n".join(lines) + "\n").encode("utf-8")


# ---- ledger metadata (LedgerMetadataSerDe, format version 3) ----------------------------------


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64s are 10-byte varints
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _len_field(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def ledger_metadata_v3(
    *,
    ensemble_size: int,
    write_quorum: int,
    ack_quorum: int,
    state: str,
    last_entry_id: int,
    length: int,
    segments: Sequence[Tuple[int, Sequence[str]]],
    digest_type: str,
    password: bytes,
    ctoken: int = 0,
) -> bytes:
    """A ledger's znode bytes as LedgerMetadataSerDe.serialize writes them for format 3:
    `BookieMetadataFormatVersion\\t3\\n`, a varint length, LedgerMetadataFormat in field order
    (quorumSize, ensembleSize, length, lastEntryId, state, segments, digestType, password,
    ackQuorumSize, cToken; no ctime: the golden cluster stored none)."""
    msg = bytearray()
    msg += _int_field(1, write_quorum)
    msg += _int_field(2, ensemble_size)
    msg += _int_field(3, length)
    msg += _int_field(4, last_entry_id)
    msg += _int_field(5, _STATE_ENUM[state])
    for first, members in segments:
        seg = b"".join(_len_field(1, m.encode("utf-8")) for m in members)
        msg += _len_field(6, seg + _int_field(2, first))
    msg += _int_field(7, _DIGEST_ENUM[digest_type])
    msg += _len_field(8, bytes(password))
    msg += _int_field(9, ack_quorum)
    msg += _int_field(12, ctoken)
    return b"BookieMetadataFormatVersion\t3\n" + _varint(len(msg)) + bytes(msg)


def ledger_znode(ledger_id: int) -> List[str]:
    """The hierarchical ledger manager's znode components of a ledger below the root
    (StringUtils.getShortHierarchicalLedgerPath / getLongHierarchicalLedgerPath)."""
    if ledger_id < 2**31 - 1:
        digits = f"{ledger_id:010d}"
        return [digits[0:2], digits[2:6], "L" + digits[6:10]]
    digits = f"{ledger_id:019d}"
    return [digits[0:3], digits[3:7], digits[7:11], digits[11:15], "L" + digits[15:19]]


def layout_znode() -> bytes:
    """`<root>/LAYOUT` of a hierarchical ledger manager (LedgerLayout.serialize, version 2)."""
    return b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
