"""Ozone's own COMPOSITE_CRC file checksum (`ozone fs -checksum`) over a key's chunk
checksums, as its client computes it (BaseFileChecksumHelper, ReplicatedBlockChecksumComputer,
ECBlockChecksumComputer, CrcComposer), quirks included: where the input is inconsistent it is
not the CRC of the bytes (../shared/ozone-golden/composite-crc/README.md, "Divergences").
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Optional, Sequence

import numpy as np

from merkle.copies.chunks import CRC_TYPES, Block, BlockChecksums, Chunk, check_int, validate
from merkle.copies.fold import COMBINE, compose_columns


def ozone_agrees(blocks: list[Block]) -> bool:
    """True when Ozone's block computers see exactly the windows' true lengths (the caller has
    checked one CRC type over the key and OM lengths equal to the chunks'): no empty chunk, one
    bpc per block, the replicated precondition (length <= windows * first chunk's length) met,
    EC cells as long as Ozone takes them (min(group bytes left, replica 1's cell length))."""
    for blk in blocks:
        if not blk.chunks or any(c.length == 0 for c in blk.chunks):
            return False
        if len({c.bpc for c in blk.chunks}) != 1:
            return False
        if blk.stripes is None:
            first = blk.chunks[0].length
            if any(c.length > c.count * first for c in blk.chunks):
                return False
            continue
        left = blk.length
        for stripe in blk.stripes:
            if not stripe:
                return False
            size = stripe[0].length
            for cell in stripe:
                if cell.length != min(left, size):
                    return False
                left -= size
    return True


class _OzoneError(Exception):
    """What Ozone's code would throw (its message, one line)."""


def _composer_digest(updates: Iterable[tuple[int, int]], alg: str) -> int:
    """Ozone's CrcComposer (one stripe): fold (crc, length) pairs; a negative length throws as
    CrcUtil.getMonomial does; no bytes at all leaves an empty digest, which readInt rejects."""
    combine = COMBINE[alg]
    acc, position = 0, 0
    for value, size in updates:
        if size < 0:
            raise _OzoneError(f"IllegalArgumentException: lengthBytes must be positive, got {size}")
        acc = value if acc == 0 else combine(acc, value, size)
        position += size
    if position <= 0:
        raise _OzoneError("ArrayIndexOutOfBoundsException: readInt of an empty digest")
    return acc


def _ozone_type(chunk: Chunk) -> str:
    if chunk.type_name not in ("CRC32", "CRC32C"):
        raise _OzoneError(f"IllegalArgumentException: unsupported checksum type: {chunk.type_name}")
    return CRC_TYPES[chunk.type_name]


def _ozone_replicated_block(block: Block) -> tuple[int, str]:
    """ReplicatedBlockChecksumComputer, COMPOSITE_CRC mode -> (block CRC, type name)."""
    if not block.chunks:
        raise _OzoneError("PathIOException: Fail to get block checksum (no chunks)")
    first = block.chunks[0]
    alg = _ozone_type(first)
    chunk_size = first.length  # Ozone's precondition uses the first chunk's length, not bpc
    bpc = first.bpc  # and the first chunk's bpc for every chunk
    chunk_crcs = []
    for chunk in block.chunks:
        n = chunk.count
        if chunk.length > n * chunk_size:
            raise _OzoneError("IllegalArgumentException: null (Preconditions.checkArgument)")
        # window i is composed as min(bpc, length - i * bpc) bytes: 0 once the length is used
        # up exactly, negative (CrcUtil throws) from window length // bpc + 1 on
        if bpc and chunk.length // bpc + 1 < n:
            first_bad = chunk.length // bpc + 1
            raise _OzoneError(
                "IllegalArgumentException: lengthBytes must be positive, got "
                f"{chunk.length - first_bad * bpc}"
            )
        sizes = (
            np.minimum(bpc, chunk.length - np.arange(n, dtype=np.int64) * bpc)
            if bpc
            else np.zeros(n, dtype=np.int64)
        )
        value, position = compose_columns(alg, chunk.ozone_column, sizes, strict=False)
        if position <= 0:
            raise _OzoneError("ArrayIndexOutOfBoundsException: readInt of an empty digest")
        chunk_crcs.append((value, chunk.length))
    return _composer_digest(chunk_crcs, alg), first.type_name


def _ozone_ec_group(block: Block) -> tuple[int, str]:
    """ECBlockChecksumComputer, COMPOSITE_CRC mode. Per stripe it reads replica 1's
    stripeChecksum (the data cells' windows in replica order, then the parity cells', which it
    strips) taking each cell as min(group bytes left, replica 1's chunk length) bytes."""
    stripes = [s for s in (block.stripes or []) if s]
    if not stripes:
        raise _OzoneError("IllegalArgumentException: no chunks (Preconditions.checkArgument)")
    first = stripes[0][0]
    alg = _ozone_type(first)
    bpc = first.bpc
    group_left = block.length
    updates = []
    for stripe in stripes:
        chunk_size = stripe[0].length
        buffer = [w for cell in stripe for w in cell.windows]
        i = 0
        while i < len(buffer):
            remaining = min(group_left, chunk_size)
            if remaining <= 0:
                # windows left over with no group bytes to give them: Ozone's loop never ends
                raise _OzoneError(
                    "(no answer: windows beyond the block group's length make "
                    "ECBlockChecksumComputer loop forever)"
                )
            while i < len(buffer) and remaining > 0:
                updates.append((buffer[i], min(bpc, remaining)))
                i += 1
                remaining -= bpc
            group_left -= chunk_size
    return _composer_digest(updates, alg), first.type_name


def _data_output_capacity(written: int) -> int:
    """The backing array of Hadoop's DataOutputBuffer after `written` 4-byte writes (32 bytes,
    doubled as needed): makeCompositeCrcResult reads past what was written, up to this."""
    cap, size = 32, 0
    for _ in range(written):
        if size + 4 > cap:
            cap = max(cap * 2, size + 4)
        size += 4
    return cap


def ozone_composite_crc(
    blocks: Sequence[BlockChecksums], request_length: Optional[int] = None
) -> tuple[Optional[str], Optional[bytes], Optional[str]]:
    """What Ozone's client returns for `getFileChecksum` in COMPOSITE_CRC mode over these blocks
    (BaseFileChecksumHelper and the block computers), emulated step by step, quirks included:
    (algorithm name, value as `getBytes()` / `write()` gives it, None), or (None, None, what
    Ozone throws). `request_length` (default: the whole key) is the range a client asked for.
    It walks every window in Python (a check, not the fast path)."""
    if request_length is not None:
        request_length = check_int(request_length, "request_length")
    return ozone_walk(validate(blocks), request_length)


def ozone_walk(
    blocks: list[Block], request_length: Optional[int]
) -> tuple[Optional[str], Optional[bytes], Optional[str]]:
    length = sum(b.length for b in blocks) if request_length is None else request_length
    if not blocks or length <= 0:
        # an empty key (or range): MD5MD5CRC32GzipFileChecksum(0, 0, MD5 of 32 zero bytes),
        # as written: bytesPerCRC (int), crcPerBlock (long), the MD5
        return "MD5-of-0MD5-of-0CRC32", bytes(12) + hashlib.md5(bytes(32)).digest(), None
    try:
        block_crcs: list[int] = []
        key_type, current = "", 0
        for block in blocks:
            if current > length:
                break  # checksumBlocks() stops past the requested range
            value, key_type = (
                _ozone_ec_group(block)
                if block.stripes is not None
                else _ozone_replicated_block(block)
            )
            block_crcs.append(value)
            current += block.length
        capacity = _data_output_capacity(len(block_crcs))
        alg = CRC_TYPES[key_type]  # the key's type is the last block's (setChecksumType per block)
        updates = []
        for i, block in enumerate(blocks):
            if i * 4 + 4 > capacity:
                raise _OzoneError("ArrayIndexOutOfBoundsException: readInt out of bounds")
            # blocks past the range read the buffer's zeros; each block counts its OM length
            updates.append((block_crcs[i] if i < len(block_crcs) else 0, block.length))
        value = _composer_digest(updates, alg)
    except _OzoneError as exc:
        return None, None, str(exc)
    return f"COMPOSITE-{key_type}", value.to_bytes(4, "big"), None
