"""Simple, obviously-correct references the native kernels are checked against."""

from __future__ import annotations

import functools

POLY = {"crc32c": 0x82F63B78, "crc32": 0xEDB88320, "crc64nvme": 0x9A6C9329AC4BC9B5}
WIDTH = {"crc32c": 32, "crc32": 32, "crc64nvme": 64}
MASK = {name: (1 << width) - 1 for name, width in WIDTH.items()}


def _table(poly: int) -> list[int]:
    table = []
    for byte in range(256):
        reg = byte
        for _ in range(8):
            reg = (reg >> 1) ^ (poly if reg & 1 else 0)
        table.append(reg)
    return table


TABLES = {name: _table(poly) for name, poly in POLY.items()}


def crc_prefixes(algorithm: str, data: bytes, value: int = 0) -> list[int]:
    """CRC of data[:k] (continuing from value) for every k in 0..len(data), bytewise."""
    table, mask = TABLES[algorithm], MASK[algorithm]
    reg = value ^ mask
    out = [value]
    for byte in data:
        reg = (reg >> 8) ^ table[(reg ^ byte) & 0xFF]
        out.append(reg ^ mask)
    return out


@functools.lru_cache(maxsize=8)
def crc_at_lengths(algorithm: str, data: bytes, lengths: tuple[int, ...]) -> dict[int, int]:
    """CRC of data[:n] for each n in lengths, in one bytewise pass (cached: it is slow)."""
    table, mask = TABLES[algorithm], MASK[algorithm]
    wanted = set(lengths)
    reg = mask
    out = {0: 0} if 0 in wanted else {}
    for i, byte in enumerate(data, 1):
        reg = (reg >> 8) ^ table[(reg ^ byte) & 0xFF]
        if i in wanted:
            out[i] = reg ^ mask
    return out


def crc(algorithm: str, data: bytes, value: int = 0) -> int:
    return crc_prefixes(algorithm, data, value)[-1]


def _reflect(v: int, width: int) -> int:
    return int(f"{v:0{width}b}"[::-1], 2)


def _polymod(a: int, m: int) -> int:
    """a mod m over GF(2), plain (non-reflected) bit order."""
    mdeg = m.bit_length() - 1
    while a.bit_length() - 1 >= mdeg:
        a ^= m << (a.bit_length() - 1 - mdeg)
    return a


def _polymulmod(a: int, b: int, m: int) -> int:
    product = 0
    while b:
        if b & 1:
            product ^= a
        b >>= 1
        a = _polymod(a << 1, m)
    return _polymod(product, m)


def combine(algorithm: str, crc1: int, crc2: int, len2: int) -> int:
    """crc(A||B) = crc(A) * x^(8*len2) + crc(B) mod P, in plain big-int GF(2) arithmetic."""
    width = WIDTH[algorithm]
    full = (1 << width) | _reflect(POLY[algorithm], width)  # P with its x^width term, plain order
    shift, base, exp = 1, 2, 8 * len2  # x^exp by square-and-multiply
    while exp:
        if exp & 1:
            shift = _polymulmod(shift, base, full)
        base = _polymulmod(base, base, full)
        exp >>= 1
    moved = _polymulmod(_reflect(crc1, width), shift, full)
    return _reflect(moved, width) ^ crc2
