"""`block_data` values (Ozone's BlockData protobuf) to and from the block-metadata model.

The scanner works on merkle.replica.blocks's ContainerMeta (blocks of chunks with
their stored window checksums); this module converts the DB rows of one container into it, one
row at a time (`read_blocks`), with the checks Ozone's codec and inspector make (proto2
`required` fields, `size` = the chunks' total, the key is the decimal localID, the value's
container ID is the container's, each chunk's checksum count fits its length) and one Ozone
does not make (a FILE_PER_CHUNK chunk name is the block's own `<localID>_chunk_<n>`). A bad
row costs its own block only, and says what Ozone's datanode does with it. It also builds the
values a datanode stores, for the generator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from google.protobuf.message import DecodeError

from merkle.replica.blocks import CHECKSUM_SIZES, BlockMeta, ChunkMeta, ContainerMeta
from merkle.replica.errors import BlockMetaError
from merkle.replica.ozone import datanode_pb2 as pb

__all__ = [
    "BadRow",
    "ChunkName",
    "DecodedBlocks",
    "decode_blocks",
    "encode_block",
    "chunk_name",
    "read_blocks",
    "valid_chunk_name",
]

#: (offset, length, chunkName) of one chunk: FILE_PER_CHUNK files are named by chunkName
ChunkName = Tuple[int, int, str]


def chunk_name(local_id: int, index: int) -> str:
    """The client's chunk name, `<localID>_chunk_<n>` with n = 1, 2, ..."""
    return f"{int(local_id)}_chunk_{int(index)}"


#: what Ozone's datanode does with a row crcmerkle flags (see `read_blocks`)
OZONE_SKIPS = (
    "Ozone's codec reads this row as null and its block iterator skips it "
    "silently: Ozone reports nothing (a replica with no other error is healthy to "
    "it), writes a container checksum without this block, as the data_checksum "
    "reported here is, and to Ozone {file} looks unreferenced"
)
OZONE_SKIPS_LAST = (
    "Ozone's codec reads this row as null and no decodable row of the "
    "container follows it, so Ozone's block iterator throws "
    "NoSuchElementException, which its data scanner does not catch: Ozone's "
    "scan of this container ends with no verdict and no checksum, and the "
    "volume's background data scanner thread exits"
)
OZONE_FAILS = (
    "Ozone's codec throws on this row (IllegalStateException, not caught by its "
    "data scanner): Ozone's scan of this container ends there, with no verdict "
    "and no checksum, and the volume's background data scanner thread exits"
)
OZONE_NOT_REACHED = "Ozone's scan never reaches this row: it ends at row {key!r}"
OZONE_SCANS = (
    "Ozone's scanner does not check this: it verifies the row as block {local_id} "
    "of this container, as done here"
)

#: a container's rows may hold one row or chunk per this many bytes of their cap (1M at the
#: 64 MiB default: a 5 GB container of 5 KB objects; ~400 MiB of records at most)
BYTES_PER_CHUNK_LIMIT = 64

#: a FILE_PER_CHUNK chunk's file name as Ozone's clients write it: `<localID>_chunk_<n>`,
#: n a decimal counter from 0 (a rewritten partial last chunk) or 1 (BlockOutputStream)
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)")
_CHUNK_NAME = re.compile(r"(-?[0-9]+)_chunk_(0|[1-9][0-9]*)")


@dataclass(frozen=True)
class BadRow:
    """A `block_data` row crcmerkle does not verify (or verifies with a caveat): its key,
    the block it names (the key's localID, None if the key is not one), the finding's kind
    (METADATA_CORRUPT, or METADATA_UNREADABLE above the row-size cap), why, and what Ozone's
    own datanode does with the row."""

    key: bytes
    block_id: Optional[int]
    kind: str
    reason: str
    ozone: str = ""

    @property
    def summary(self) -> str:
        """The row and what is wrong with it."""
        shown = self.key.decode("ascii", "backslashreplace")
        return f"block_data entry {shown!r}: {self.reason}"

    @property
    def detail(self) -> str:
        """The summary and what Ozone does with the row: a finding's detail."""
        return self.summary + (f" ({self.ozone})" if self.ozone else "")


@dataclass
class DecodedBlocks:
    meta: ContainerMeta
    #: per block, its chunks' names in stored order (for FILE_PER_CHUNK files)
    names: Dict[int, List[ChunkName]] = field(default_factory=dict)
    #: rows that are not (or not only) valid BlockData of this container, in key order
    bad: List[BadRow] = field(default_factory=list)
    #: why the container's rows were not all read (their total is above the cap), else None
    too_large: Optional[str] = None


def _bad(source: str, key: bytes, reason: str) -> BlockMetaError:
    shown = key.decode("ascii", "backslashreplace")
    return BlockMetaError(f"block_data entry {shown!r}: {reason}", source)


def _key_block(key: bytes) -> Optional[int]:
    """The localID a `block_data` key names (its canonical decimal text), else None."""
    try:
        text = key.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << 63) <= value < (1 << 63) else None


def valid_chunk_name(name: str, local_id: int) -> bool:
    """Is `name` one file name of Ozone's `<localID>_chunk_<n>` shape, of block `local_id`?
    A name read from the DB is data: `..`, `/`, NUL or any other shape is never joined to
    `chunks/` (Ozone's own scanner joins it unchecked)."""
    m = _CHUNK_NAME.fullmatch(name)
    return m is not None and m.group(1) == str(int(local_id))


def _java_long_sum(values: Iterable[int]) -> int:
    """Σ values as Java's long arithmetic computes it (wrapping at 2**64, signed)."""
    total = sum(values) & ((1 << 64) - 1)
    return total - (1 << 64) if total >= 1 << 63 else total


def _java_string(value: Union[str, bytes]) -> str:
    """A proto2 `string` field as Ozone's Java reads it. The Python runtime hands out the raw
    bytes when they are not UTF-8 (proto2 does not validate); Java decodes them with U+FFFD
    for each bad sequence."""
    return value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")


@dataclass
class _Row:
    """One decoded row's chunks (in stored order, with their names) or why it is not used."""

    chunks: List[ChunkMeta] = field(default_factory=list)
    names: List[ChunkName] = field(default_factory=list)
    #: (reason, what Ozone does) when crcmerkle does not verify the row, else None
    problem: Optional[Tuple[str, str]] = None


def _convert(msg: pb.BlockData, file_per_chunk: bool) -> _Row:
    """The row's chunks, or the first problem found (rows Ozone's codec rejects are handled
    by the caller; these are the checks after it). One pass over the chunks: protobuf
    attribute access is what a row costs."""
    out = _Row()
    seen_keys = set()
    for kv in msg.metadata:
        meta_key = _java_string(kv.key)
        if meta_key in seen_keys:  # BlockData.getFromProtoBuf: "Key already exists"
            out.problem = f"metadata key {meta_key!r} appears twice", OZONE_FAILS
            return out
        seen_keys.add(meta_key)
    local_id = msg.blockID.localID
    for c in msg.chunks:
        name = _java_string(c.chunkName)
        if file_per_chunk and not valid_chunk_name(name, local_id):
            out.problem = (
                f"chunk name {name!r} is not {local_id}_chunk_<n>: never opened",
                "Ozone's scanner joins it to chunks/ unchecked and reads whatever file it names",
            )
            return out
        cd = c.checksumData
        sums = cd.checksums
        cm = ChunkMeta(c.offset, c.len, cd.type, cd.bytesPerChecksum, b"".join(sums))
        problem = cm.validate()
        if problem is None and len(set(map(len, sums))) > 1:
            problem = "checksums of different sizes"
        if problem is not None:
            out.problem = (
                f"chunk {name!r}: {problem}: not verified",
                "Ozone's scanner reads as many windows as there are checksums, so "
                "it checks another span than the chunk's length",
            )
            return out
        out.chunks.append(cm)
        out.names.append((cm.offset, cm.length, name))
    if msg.HasField("size"):
        total = _java_long_sum(c.length for c in out.chunks)
        if msg.size != total:  # BlockData.getFromProtoBuf: "Size mismatch"
            out.problem = (
                f"size {msg.size} is not the sum of its chunks' lengths ({total})",
                OZONE_FAILS,
            )
    return out


def read_blocks(
    container_id: int,
    rows: Iterable[Tuple[bytes, bytes]],
    *,
    file_per_chunk: bool = False,
    row_limit: Optional[int] = None,
    total_limit: Optional[int] = None,
) -> DecodedBlocks:
    """ContainerMeta of the (key after prefix, value) rows of one container, read lazily,
    each row on its own: a row that is not a valid BlockData of this container is a BadRow
    (its block is then not verified) and the other rows are still read, as Ozone's scanner
    does. What Ozone does with each kind of bad row (from its source: BlockData's codec,
    KeyValueBlockIterator, KeyValueContainerCheck) is in the BadRow:

    * a value its protobuf parser rejects (malformed, or a proto2 `required` field missing,
      which the Python runtime does not enforce: IsInitialized() is checked here) is read
      as null and skipped silently, so Ozone calls the replica healthy; when no decodable
      row follows, its iterator throws instead (OZONE_SKIPS / OZONE_SKIPS_LAST);
    * a duplicate metadata key or a `size` that is not the sum of the chunk lengths makes
      its codec throw, which ends Ozone's scan (OZONE_FAILS);
    * a key that is not the value's localID, or a value of another container, is scanned
      by Ozone as the value's block of this container: so it is here (OZONE_SCANS), unless
      another row already holds that localID;
    * a FILE_PER_CHUNK chunk name not of the block's own `<localID>_chunk_<n>` shape, or a
      chunk whose checksum count does not fit its length, is not verified here.

    `row_limit` bounds one value's size (above it: METADATA_UNREADABLE for that row, not
    decoded), `total_limit` the container's rows together and, through it, the number of
    rows and chunks (one per BYTES_PER_CHUNK_LIMIT bytes: an empty chunk is ~25 bytes of a
    row but ~350 bytes of memory and ~20 us to convert); above either `too_large` is set and
    no further row is read. Memory is never sized from a number in a row."""
    from merkle.replica.results import METADATA_CORRUPT, METADATA_UNREADABLE

    record_limit = None if total_limit is None else total_limit // BYTES_PER_CHUNK_LIMIT
    records = 0

    out = DecodedBlocks(ContainerMeta(container_id))
    total = 0
    #: index in out.bad of the rows Ozone reads as null after its last decodable row
    trailing_nulls: List[int] = []
    for key, value in rows:
        key_id = _key_block(key)
        total += len(key) + len(value)
        records += 1  # a row costs a record even without chunks (or when it is bad)
        if total_limit is not None and total > total_limit:
            out.too_large = (
                f"the container's block_data rows exceed the {total_limit}-byte "
                f"limit for metadata (CRCMERKLE_MAX_METADATA_BYTES): not read"
            )
            break
        if row_limit is not None and len(value) > row_limit:
            out.bad.append(
                BadRow(
                    key,
                    key_id,
                    METADATA_UNREADABLE,
                    f"value of {len(value)} bytes exceeds the {row_limit}-byte "
                    f"limit for one row (CRCMERKLE_MAX_ROW_BYTES): not decoded",
                )
            )
            trailing_nulls.clear()  # Ozone decodes it
            continue
        msg = pb.BlockData()
        try:
            msg.ParseFromString(value)
            missing = [] if msg.IsInitialized() else msg.FindInitializationErrors()
        except DecodeError as exc:
            reason = f"not a BlockData message ({exc})"
        else:
            reason = f"a BlockData without its required {', '.join(missing)}" if missing else ""
        if reason:
            what = (
                f"chunks/{key_id}{'_chunk_*' if file_per_chunk else '.block'}"
                if key_id is not None
                else "its block file"
            )
            trailing_nulls.append(len(out.bad))
            out.bad.append(
                BadRow(key, key_id, METADATA_CORRUPT, reason, OZONE_SKIPS.format(file=what))
            )
            continue
        trailing_nulls.clear()
        local_id = msg.blockID.localID
        records += len(msg.chunks)
        if record_limit is not None and records > record_limit:
            out.too_large = (
                f"the container's block_data rows hold more than {record_limit} "
                f"rows and chunks (one per {BYTES_PER_CHUNK_LIMIT} bytes of "
                f"CRCMERKLE_MAX_METADATA_BYTES): not read"
            )
            break
        row = _convert(msg, file_per_chunk)
        if row.problem is not None:
            out.bad.append(
                BadRow(
                    key, key_id if key_id is not None else local_id, METADATA_CORRUPT, *row.problem
                )
            )
            continue
        if local_id in out.meta.blocks:  # only through a key that names another block
            out.bad.append(
                BadRow(
                    key,
                    key_id if key_id is not None else local_id,
                    METADATA_CORRUPT,
                    f"the value's block {local_id} is another row's too: not verified",
                    "Ozone scans both rows into one "
                    "tree entry, a later chunk replacing an earlier one at the "
                    "same offset",
                )
            )
            continue
        if key_id != local_id or msg.blockID.containerID != container_id:
            why = (
                f"key does not name the value's block {local_id}"
                if key_id != local_id
                else f"value is of container {msg.blockID.containerID}"
            )
            out.bad.append(
                BadRow(key, local_id, METADATA_CORRUPT, why, OZONE_SCANS.format(local_id=local_id))
            )
        # the scanner reads chunks in offset order; Ozone's tree sorts by offset too
        out.meta.blocks[local_id] = BlockMeta(
            local_id, tuple(sorted(row.chunks, key=lambda c: c.offset))
        )
        out.names[local_id] = row.names
    for i in trailing_nulls:
        out.bad[i] = replace(out.bad[i], ozone=OZONE_SKIPS_LAST)
    stop = next((i for i, bad in enumerate(out.bad) if bad.ozone == OZONE_FAILS), None)
    if stop is not None:  # Ozone's scan throws there: it never sees the rows after it
        shown = out.bad[stop].key.decode("ascii", "backslashreplace")
        for i in range(stop + 1, len(out.bad)):
            out.bad[i] = replace(out.bad[i], ozone=OZONE_NOT_REACHED.format(key=shown))
    return out


def decode_blocks(
    container_id: int,
    rows: Iterable[Tuple[bytes, bytes]],
    source: str,
    *,
    file_per_chunk: bool = False,
) -> DecodedBlocks:
    """ContainerMeta of the (key after prefix, value) rows of one container; BlockMetaError
    (METADATA_CORRUPT) for the first entry that is not a valid BlockData of this container
    (see read_blocks, which reads every row and reports each bad one instead)."""
    out = read_blocks(container_id, rows, file_per_chunk=file_per_chunk)
    if out.bad:
        first = out.bad[0]
        raise _bad(source, first.key, first.reason)
    return out


def encode_block(
    container_id: int,
    block: BlockMeta,
    *,
    bcsid: int = 0,
    names: Optional[Sequence[str]] = None,
    metadata: Sequence[Tuple[str, str]] = (("TYPE", "KEY"),),
) -> bytes:
    """The BlockData bytes a datanode stores for `block` (chunks in offset order, named
    `<localID>_chunk_<n>` unless `names` are given, size = sum of chunk lengths)."""
    msg = pb.BlockData()
    msg.blockID.containerID = int(container_id)
    msg.blockID.localID = block.block_id
    msg.blockID.blockCommitSequenceId = int(bcsid)
    for k, v in sorted(metadata):
        kv = msg.metadata.add()
        kv.key, kv.value = k, v
    for i, c in enumerate(block.chunks):
        ci = msg.chunks.add()
        ci.chunkName = names[i] if names is not None else chunk_name(block.block_id, i + 1)
        ci.offset = c.offset
        ci.len = c.length
        ci.checksumData.type = c.checksum_type
        ci.checksumData.bytesPerChecksum = c.bytes_per_checksum
        size = CHECKSUM_SIZES[c.checksum_type]
        if size:
            ci.checksumData.checksums.extend(
                c.checksums[s : s + size] for s in range(0, len(c.checksums), size)
            )
    msg.size = sum(c.length for c in block.chunks)
    return msg.SerializeToString()
