"""Turns a fuzz input into a stream of decisions.

One implementation for every engine (atheris or the built-in one), so an input that fails
under one replays identically under the other and in a plain `python -m fuzz --replay`.
Reading past the end yields zeros: every input, even empty, is a valid program.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


class Provider:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def remaining(self) -> int:
        return max(0, len(self.data) - self.pos)

    def take(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk

    def int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (inclusive) from as few bytes as the span needs."""
        span = hi - lo
        if span <= 0:
            return lo
        nbytes = (span.bit_length() + 7) // 8
        v = int.from_bytes(self.take(nbytes).ljust(nbytes, b"\0"), "little")
        return lo + v % (span + 1)

    def bool(self) -> bool:
        return self.int(0, 1) == 1

    def choice(self, options: Sequence[T]) -> T:
        return options[self.int(0, len(options) - 1)]

    def u32(self) -> int:
        return self.int(0, 0xFFFFFFFF)

    def u64(self) -> int:
        return self.int(0, 0xFFFFFFFFFFFFFFFF)

    def length(self, big: int = 1 << 18) -> int:
        """A length biased to where kernels switch paths: tiny, around powers of two and
        folding strides, and occasionally large (up to `big`)."""
        kind = self.int(0, 7)
        if kind <= 2:
            return self.int(0, 64)
        if kind <= 4:
            return self.int(0, 4096)
        if kind == 5:  # k * 2^j + small delta: block boundaries of every kernel
            base = 1 << self.int(4, 16)
            return max(0, base * self.int(1, 4) + self.int(-9, 9))
        if kind == 6:
            return self.int(0, 64 * 1024)
        return self.int(0, big)
