"""A key's full-object CRC from its chunks' window checksums (issue 27), with Ozone's own
COMPOSITE_CRC beside it and whether `ozone fs -checksum` would differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from merkle.copies.chunks import CRC_TYPES, BlockChecksums, validate, window_sizes
from merkle.copies.fold import compose_columns, full_object_crc
from merkle.copies.ozonecrc import ozone_agrees, ozone_walk

__all__ = ["KeyCrc", "full_object_crc", "key_crc"]


@dataclass(frozen=True)
class KeyCrc:
    """A key's full-object CRC from metadata, next to Ozone's COMPOSITE_CRC for it.

    - `crc`: the CRC (`algorithm`) of the key's bytes (those its chunks cover: `length`), or None
      when the metadata cannot give it (mixed checksum types, no CRC) - then `reasons` says why.
    - `om_length`: the sum of the OM block lengths (what the key's size should be).
    - `ozone_algorithm` / `ozone_value`: what `ozone fs -checksum` returns (e.g.
      `COMPOSITE-CRC32C` and the 4 big-endian bytes), or `ozone_error` when Ozone's code throws.
    - `ozone_differs`: True when Ozone's answer is not `crc` (another value, an exception, another
      kind of checksum, or no CRC of the bytes to compare): a copy check can match while
      `ozone fs -checksum` disagrees; `reasons` names the inconsistent inputs."""

    algorithm: Optional[str]
    crc: Optional[int]
    length: int
    om_length: int
    ozone_algorithm: Optional[str]
    ozone_value: Optional[bytes]
    ozone_error: Optional[str]
    ozone_differs: bool
    reasons: tuple[str, ...] = field(default=())


def key_crc(blocks: Sequence[BlockChecksums]) -> KeyCrc:
    """A key's full-object CRC from its blocks' chunk checksums (key order), with Ozone's
    COMPOSITE_CRC beside it. One-line ValueError on corrupt metadata (negative or oversized
    lengths, window counts that do not match a chunk's length, chunks with gaps or overlaps,
    checksums out of range)."""
    valid = validate(blocks)
    chunks = [c for blk in valid for c in blk.chunks]
    reasons: list[str] = []
    for b, blk in enumerate(valid):
        covered = sum(c.length for c in blk.chunks)
        if covered != blk.length:
            reasons.append(f"block {b}: OM length {blk.length} but its chunks hold {covered} bytes")
        if len({c.bpc for c in blk.chunks}) > 1:
            reasons.append(f"block {b}: bytes_per_checksum differs between its chunks")
    length = sum(c.length for c in chunks)
    om_length = sum(blk.length for blk in valid)

    types = sorted({c.type_name for c in chunks})
    algorithm: Optional[str] = None
    crc: Optional[int] = None
    if not chunks:
        crc = 0
        reasons.append("no data: the CRC of nothing is 0 for every algorithm")
    elif len(types) > 1:
        reasons.append(
            f"mixed checksum types ({', '.join(types)}): the CRC of the bytes "
            "cannot be derived from them"
        )
    elif types[0] not in CRC_TYPES:
        reasons.append(f"checksum type {types[0]} is not a CRC")
    else:
        algorithm = CRC_TYPES[types[0]]
        crcs = np.concatenate([c.column for c in chunks if c.column is not None])
        crc = compose_columns(algorithm, crcs, window_sizes(chunks))[0]

    if algorithm == "crc64nvme":
        # crcmerkle's own scan values: Ozone's COMPOSITE_CRC is made of its CRC32/CRC32C ones
        return KeyCrc(
            algorithm,
            crc,
            length,
            om_length,
            None,
            None,
            None,
            True,
            tuple(reasons + ["Ozone has no COMPOSITE_CRC over CRC-64/NVME"]),
        )
    ozone_alg: Optional[str]
    ozone_value: Optional[bytes]
    ozone_error: Optional[str]
    if crc is not None and algorithm is not None and not reasons and ozone_agrees(valid):
        # Ozone's composition on consistent input is the CRC of the bytes (every golden
        # consistent key; tests/test_compose.py checks it against the emulation): skip the
        # step-by-step walk, which costs a Python step per window
        ozone_alg, ozone_value, ozone_error = (
            f"COMPOSITE-{algorithm.upper()}",
            crc.to_bytes(4, "big"),
            None,
        )
    else:
        ozone_alg, ozone_value, ozone_error = ozone_walk(valid, None)
    differs = not (
        crc is not None
        and algorithm is not None
        and ozone_alg == f"COMPOSITE-{algorithm.upper()}"
        and ozone_value == crc.to_bytes(4, "big")
    )
    if ozone_error is not None:
        reasons.append(f"Ozone's COMPOSITE_CRC throws {ozone_error}")
    elif differs and ozone_alg is not None and not ozone_alg.startswith("COMPOSITE-"):
        reasons.append(f"Ozone returns {ozone_alg}, not a COMPOSITE_CRC")
    elif differs and crc is not None:
        reasons.append("Ozone's COMPOSITE_CRC is not the CRC of the key's bytes")
    return KeyCrc(
        algorithm,
        crc,
        length,
        om_length,
        ozone_alg,
        ozone_value,
        ozone_error,
        differs,
        tuple(reasons),
    )
