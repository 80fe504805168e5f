"""Keeping what a `.tree` holds that this crcmerkle does not understand.

A newer Ozone may add fields to ContainerChecksumInfo. The tree codec skips unknown fields
when reading, so rewriting a tree would silently drop them. `split_unknown` separates the
top-level fields this version knows (containerID = 1, containerMerkleTree = 2) from the others,
so a rewrite can append the others unchanged (protobuf allows fields in any order, and a
reader keeps the last value of a repeated optional field, so nothing changes meaning).
Unknown fields *nested* in the tree cannot be kept that way: `rewritable` tells whether the
codec re-encodes the known part exactly, and a tree that fails that test is never rewritten.
"""

from __future__ import annotations

from typing import Callable, FrozenSet, List, Tuple

__all__ = ["KNOWN_TOP_LEVEL", "rewritable", "split_unknown"]

#: ContainerChecksumInfo fields this version reads (3 is retired in Ozone and kept if seen).
KNOWN_TOP_LEVEL: FrozenSet[int] = frozenset({1, 2})


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def split_unknown(raw: bytes, known: FrozenSet[int] = KNOWN_TOP_LEVEL) -> Tuple[bytes, bytes]:
    """(the bytes of the known top-level fields, the bytes of the others), each in file
    order. Bytes that do not parse as protobuf are returned whole as known (the tree codec
    then reports them)."""
    parts_known: List[bytes] = []
    parts_unknown: List[bytes] = []
    pos = 0
    n = len(raw)
    try:
        while pos < n:
            start = pos
            key, pos = _varint(raw, pos)
            wire = key & 7
            if wire == 0:
                _, pos = _varint(raw, pos)
            elif wire == 1:
                pos += 8
            elif wire == 2:
                length, pos = _varint(raw, pos)
                pos += length
            elif wire == 5:
                pos += 4
            else:
                return bytes(raw), b""
            if pos > n:
                return bytes(raw), b""
            (parts_known if (key >> 3) in known else parts_unknown).append(raw[start:pos])
    except ValueError:
        return bytes(raw), b""
    return b"".join(parts_known), b"".join(parts_unknown)


def rewritable(raw: bytes, reencode: Callable[[bytes], bytes]) -> Tuple[bool, bytes]:
    """(whether a tree read from `raw` can be rewritten without losing anything, the unknown
    top-level bytes to append to every rewrite). `reencode(known)` decodes and re-encodes."""
    known, unknown = split_unknown(raw)
    try:
        same = reencode(known) == known
    except Exception:
        return True, b""  # not a tree we read at all: the caller reports it as corrupt
    return same, unknown
