"""Print the CRC-64/NVME folding and Barrett constants that csrc/crc_arm64.c uses, and check them.

Run `python tools/gen_crc64_arm64_constants.py` to print the C initialisers; `--check` also runs
a pure-Python model of the kernel's arithmetic (same lanes, same products, same shifts) against a
bitwise CRC over random messages, so a wrong constant or a wrong derivation fails here first.

Conventions (the same as the C code): reflected, x^0 is bit 63 of a 64-bit value; a 16-byte lane
loaded little-endian is a 128-bit polynomial whose bit k is x^(127-k). A carry-less product of two
reflected 64-bit values, read as such a lane, is a*b*x (one bit short), so a fold by D bits uses
x^(D+63) mod P for the lane's low half (its first 8 bytes) and x^(D-1) mod P for its high half.
"""

from __future__ import annotations

import random
import sys

POLY = 0x9A6C9329AC4BC9B5  # CRC-64/NVME, reflected
MASK64 = (1 << 64) - 1
FOLD_DISTANCES = (128, 256, 384, 512, 1024)  # bits


def xn_mod_p(n: int) -> int:
    """x^n mod P, reflected (x^0 is bit 63)."""
    v = 1 << 63
    for _ in range(n):
        v = (v >> 1) ^ (POLY if v & 1 else 0)
    return v


def reflect64(v: int) -> int:
    return int(f"{v:064b}"[::-1], 2)


def normal_poly() -> int:
    """P in normal bit order with its x^64 term."""
    return (1 << 64) | reflect64(POLY)


def poly_div(num: int, den: int) -> int:
    """floor(num / den) for GF(2) polynomials in normal bit order."""
    q = 0
    dd = den.bit_length()
    while num.bit_length() >= dd:
        s = num.bit_length() - dd
        q |= 1 << s
        num ^= den << s
    return q


def fold_keys(d: int) -> tuple[int, int]:
    return xn_mod_p(d + 63), xn_mod_p(d - 1)


def barrett_mu() -> int:
    """floor(x^127 / P), degree 63, reflected into 64 bits."""
    return reflect64(poly_div(1 << 127, normal_poly()))


def barrett_poly() -> int:
    """floor(P / x) (degree 63), reflected: P's x^1..x^64 terms."""
    return ((POLY << 1) | 1) & MASK64


# ---- a model of the kernel's arithmetic -------------------------------------------------------


def clmul(a: int, b: int) -> tuple[int, int]:
    """vmull_p64: the 128-bit carry-less product as (low 64, high 64)."""
    r = 0
    for i in range(64):
        if b >> i & 1:
            r ^= a << i
    return r & MASK64, r >> 64


def fold(x: tuple[int, int], k: tuple[int, int]) -> tuple[int, int]:
    lo = clmul(x[0], k[0])
    hi = clmul(x[1], k[1])
    return lo[0] ^ hi[0], lo[1] ^ hi[1]


def xor(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] ^ b[0], a[1] ^ b[1]


def load(p: bytes) -> tuple[int, int]:
    return int.from_bytes(p[:8], "little"), int.from_bytes(p[8:16], "little")


def barrett(a: int, mu: int, p1: int) -> int:
    """a * x^64 mod P for a reflected 64-bit a."""
    q = clmul(a, mu)[0]
    return clmul(q, p1)[1] ^ q


def model_crc(reg: int, data: bytes) -> int:
    mu, p1 = barrett_mu(), barrett_poly()
    keys = {d: fold_keys(d) for d in FOLD_DISTANCES}
    n = len(data)
    if n < 16:
        pos = 0
        while n - pos >= 8:
            reg = barrett(reg ^ int.from_bytes(data[pos : pos + 8], "little"), mu, p1)
            pos += 8
        r = n - pos
        if r:
            s = 8 * r
            m = int.from_bytes(data[pos:], "little")
            reg = barrett(((reg ^ m) << (64 - s)) & MASK64, mu, p1) ^ (reg >> s)
        return reg
    # The same lane structure as the C code: 8 lanes 128 bytes apart, then 4 lanes 64 bytes apart,
    # then one lane, so every fold distance's constants are exercised.
    pos = 0
    if n >= 64:
        lanes = [load(data[pos + 16 * i :]) for i in range(4)]
        lanes[0] = xor(lanes[0], (reg, 0))
        pos += 64
        if n - pos >= 64:
            lanes += [load(data[pos + 16 * i :]) for i in range(4)]
            pos += 64
            while n - pos >= 128:
                loads = [load(data[pos + 16 * i :]) for i in range(8)]
                lanes = [xor(fold(lanes[i], keys[1024]), loads[i]) for i in range(8)]
                pos += 128
            lanes = [xor(fold(lanes[i], keys[512]), lanes[i + 4]) for i in range(4)]
        while n - pos >= 64:
            lanes = [xor(fold(lanes[i], keys[512]), load(data[pos + 16 * i :])) for i in range(4)]
            pos += 64
        x = xor(fold(lanes[0], keys[384]), fold(lanes[1], keys[256]))
        x = xor(x, xor(fold(lanes[2], keys[128]), lanes[3]))
    else:
        x = xor(load(data), (reg, 0))
        pos = 16
    while n - pos >= 16:
        x = xor(fold(x, keys[128]), load(data[pos:]))
        pos += 16
    r = n - pos
    if r:
        xb = x[0].to_bytes(8, "little") + x[1].to_bytes(8, "little")
        tail = data[n - 16 :]
        h = bytes(16 - r) + xb[:r]
        low = xb[r:] + tail[16 - r :]
        x = xor(fold(load(h), keys[128]), load(low))
    z = clmul(x[0], xn_mod_p(127))
    w_lo, w_hi = z[0] ^ x[1], z[1]
    return barrett(w_lo, mu, p1) ^ w_hi


def model_mulmod(a: int, b: int) -> int:
    lo, hi = clmul(a, b)
    t1 = (lo << 1) & MASK64
    t0 = ((hi << 1) | (lo >> 63)) & MASK64
    return barrett(t1, barrett_mu(), barrett_poly()) ^ t0


def ref_crc(reg: int, data: bytes) -> int:
    for byte in data:
        reg ^= byte
        for _ in range(8):
            reg = (reg >> 1) ^ (POLY if reg & 1 else 0)
    return reg


def ref_mulmod(a: int, b: int) -> int:
    r = 0
    for i in range(64):
        if a & (1 << (63 - i)):
            r ^= b
        b = (b >> 1) ^ (POLY if b & 1 else 0)
    return r


def check() -> None:
    assert ref_crc(MASK64, b"123456789") ^ MASK64 == 0xAE8B14860A799888
    assert model_crc(MASK64, b"123456789") ^ MASK64 == 0xAE8B14860A799888
    rnd = random.Random(26)
    for n in list(range(0, 80)) + [rnd.randrange(80, 1200) for _ in range(80)]:
        data = rnd.randbytes(n)
        reg = rnd.getrandbits(64)
        assert model_crc(reg, data) == ref_crc(reg, data), n
    for _ in range(2000):
        a, b = rnd.getrandbits(64), rnd.getrandbits(64)
        assert model_mulmod(a, b) == ref_mulmod(a, b)
    print("model matches the bitwise reference", file=sys.stderr)


def main() -> None:
    if "--check" in sys.argv[1:]:
        check()
    for d in FOLD_DISTANCES:
        lo, hi = fold_keys(d)
        print(f"    {{0x{lo:016x}ull, 0x{hi:016x}ull}}, /* x^{d + 63}, x^{d - 1}: {d} bits */")
    print(f"    x^127 mod P       = 0x{xn_mod_p(127):016x}")
    print(f"    floor(x^127 / P)  = 0x{barrett_mu():016x}")
    print(f"    floor(P / x)      = 0x{barrett_poly():016x}")


if __name__ == "__main__":
    main()
