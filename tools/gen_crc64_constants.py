"""Derive and check the CRC-64/NVME folding constants used by the x86 kernels.

Prints the constants pasted into csrc/crc_x86_fold.h, crc_avx2.c and crc_avx512.c, after
checking them by emulating the kernels' arithmetic (128-bit folds, the 128 -> 64 finish, the
Barrett step, the carry-less a*b mod P) in Python against a bitwise CRC on random inputs.

Conventions (reflected, as the kernels): a 64-bit value has x^0 at bit 63 (bit i <-> x^(63-i));
a 128-bit lane loaded from 16 bytes has bit k <-> x^(127-k). A carry-less product of two
64-bit reflected values a, b read as a lane is a*b*x (its top bit is always 0). So folding a
lane D bits forward multiplies its low qword by x^(D+63) mod P and its high qword by
x^(D-1) mod P (no shift, unlike the 33-bit CRC-32 constants, which are stored << 1).

Run: python tools/gen_crc64_constants.py
"""

from __future__ import annotations

import random

POLY = 0x9A6C9329AC4BC9B5  # reflected CRC-64/NVME
MASK = (1 << 64) - 1


def rev(v: int, bits: int) -> int:
    return int(f"{v:0{bits}b}"[::-1], 2)


def mulmod(a: int, b: int) -> int:
    """a*b mod P, reflected 64-bit operands (x^0 is bit 63)."""
    product = 0
    for i in range(64):
        if a & (1 << (63 - i)):
            product ^= b
        b = (b >> 1) ^ (POLY if b & 1 else 0)
    return product


def xn(n: int) -> int:
    """x^n mod P, reflected."""
    acc, base = 1 << 63, 1 << 62  # x^0, x^1
    while n:
        if n & 1:
            acc = mulmod(acc, base)
        base = mulmod(base, base)
        n >>= 1
    return acc


def clmul(a: int, b: int) -> int:
    r = 0
    for i in range(64):
        if b >> i & 1:
            r ^= a << i
    return r


def fold_k(d: int) -> tuple[int, int]:
    """(low-qword, high-qword) multipliers moving a lane d bits forward."""
    return xn(d + 63), xn(d - 1)


# Barrett: in plain (non-reflected) order P_n = x^64 + p, mu_n = floor(x^128 / P_n) (degree 64).
P_N = (1 << 64) | rev(POLY, 64)


def polydiv(a: int, m: int) -> int:
    q = 0
    while a.bit_length() >= m.bit_length():
        s = a.bit_length() - m.bit_length()
        q |= 1 << s
        a ^= m << s
    return q


MU_N = polydiv(1 << 128, P_N)
K_MU = rev(MU_N >> 1, 64)  # floor(mu/x), reflected: lo qword of A*K_MU is floor(A*mu / x^64)
K_P = rev(P_N >> 1, 64)  # (P - 1)/x, reflected: hi qword of q*K_P, xor q, is (q*P) mod x^64


def barrett(a: int) -> int:
    """a*x^64 mod P for a 64-bit reflected a."""
    q = clmul(a, K_MU) & MASK
    return (clmul(q, K_P) >> 64) ^ q


def finish(lane: int) -> int:
    """Raw CRC (register) of a 128-bit lane from register 0: lane*x^64 mod P."""
    lo, hi = lane & MASK, lane >> 64
    y = clmul(lo, xn(127)) ^ hi  # lo*x^128 + hi*x^64, as a lane
    return barrett(y & MASK) ^ (y >> 64)


def pclmul_mulmod(a: int, b: int) -> int:
    y = clmul(a, b) << 1  # the lane a*b
    return barrett(y & MASK) ^ (y >> 64)


def fold(lane: int, d: int) -> int:
    klo, khi = fold_k(d)
    return clmul(lane & MASK, klo) ^ clmul(lane >> 64, khi)


def finish4(lanes: list[int]) -> int:
    """Raw CRC of four consecutive lanes in one step: each lane moved to distance D+64 (the
    x^64 of the CRC folded in) and one Barrett reduction, as crc64_fold64_finish does."""
    y = 0
    for i, lane in enumerate(lanes[:3]):
        y ^= fold(lane, 128 * (3 - i) + 64)
    y ^= clmul(lanes[3] & MASK, xn(127)) ^ (lanes[3] >> 64)
    return barrett(y & MASK) ^ (y >> 64)


def raw_crc(reg: int, data: bytes) -> int:
    for byte in data:
        reg ^= byte
        for _ in range(8):
            reg = (reg >> 1) ^ (POLY if reg & 1 else 0)
    return reg


def check() -> None:
    rng = random.Random(1)
    assert raw_crc(MASK, b"123456789") ^ MASK == 0xAE8B14860A799888
    for _ in range(50):
        a, b = rng.getrandbits(64), rng.getrandbits(64)
        assert pclmul_mulmod(a, b) == mulmod(a, b)
        lane_bytes = rng.randbytes(16)
        assert finish(int.from_bytes(lane_bytes, "little")) == raw_crc(0, lane_bytes)
        # folding k lanes of 16 bytes, each D = 128*(k-1) bits before the last
        for lanes in (2, 3, 5, 9, 17):
            data = rng.randbytes(16 * lanes)
            acc = 0
            for i in range(lanes):
                lane = int.from_bytes(data[16 * i : 16 * i + 16], "little")
                acc ^= fold(lane, 128 * (lanes - 1 - i)) if i < lanes - 1 else lane
            assert finish(acc) == raw_crc(0, data)
        data = rng.randbytes(64)
        lanes = [int.from_bytes(data[16 * i : 16 * i + 16], "little") for i in range(4)]
        assert finish4(lanes) == raw_crc(0, data)


def main() -> None:
    check()
    print("/* fold_set K_N: */")
    for d in (128, 256, 384, 512, 768, 1024, 1536, 2048):
        klo, khi = fold_k(d)
        print(f"    {{0x{klo:016x}ull, 0x{khi:016x}ull}},  /* D={d}: x^{d + 63}, x^{d - 1} */")
    print("/* four lanes straight to the finish (D+64): */")
    for d in (192, 320, 448):
        klo, khi = fold_k(d)
        print(f"    {{0x{klo:016x}ull, 0x{khi:016x}ull}},  /* D={d}: x^{d + 63}, x^{d - 1} */")
    print(f"x^127 = 0x{xn(127):016x}; K_MU = 0x{K_MU:016x}; K_P = 0x{K_P:016x}")


if __name__ == "__main__":
    main()
