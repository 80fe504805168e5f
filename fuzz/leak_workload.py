"""Every buffer path of the extension in a loop, for leak checks (issue 6, sanitizers).

    python fuzz/leak_workload.py ITERATIONS [KEEP_BYTES] [--rss] [--c-leak]

Each iteration calls every entry point that takes a buffer (checksums, windows with and
without out=, checksum_each on lists and Arrow columns, combine_many, the hash objects, the
tree codec and diff), for CRC-32C, CRC-32 and CRC-64/NVME (merkle._crc and merkle._native)
and for the one-pass pair of two algorithms, including the error paths (wrong types,
non-contiguous views, bad window sizes, wrong out= arrays and dtypes, out= tuples of the wrong
length), which are where a Py_buffer is most easily left unreleased.
After the calls it resizes the bytearray it passed: a buffer export the extension forgot to
release makes that raise BufferError at once. Used by tests/test_leaks.py (RSS growth over
100k iterations) and fuzz/leakcheck.sh (LeakSanitizer on the ASan build: leaked bytes must
not depend on the number of iterations).
"""

from __future__ import annotations

import sys
from typing import Any, Callable, List

import numpy as np

import merkle
from merkle.trees.diff import diff
from merkle.trees.treefile import tree_from_bytes, tree_to_bytes

try:
    import pyarrow as pa
except ImportError:  # pragma: no cover
    pa = None

SMALL = 1000
DTYPE = {"crc32c": np.uint32, "crc32": np.uint32, "crc64nvme": np.uint64}
#: every ordered pair of two distinct algorithms (the pair of checksum_windows)
PAIRS = [(a, b) for a in DTYPE for b in DTYPE if a != b]
LARGE = 64 * 1024  # above GIL_RELEASE_THRESHOLD: the nogil path


def _expect(exc: type, fn: Callable[[], Any]) -> None:
    try:
        fn()
    except exc:
        return
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


def _tree_pair() -> List[Any]:
    from merkle.trees.model import ContainerTree

    n = 64
    bids = np.repeat(np.arange(1, 9), 8)
    offs = np.tile(np.arange(8) * 4096, 8)
    a = ContainerTree.from_columns(3, bids, offs, np.full(n, 4096), leaf=np.arange(n))
    vals = np.arange(n)
    vals[::7] += 1
    b = ContainerTree.from_columns(3, bids, offs, np.full(n, 4096), leaf=vals)
    return [a, b, tree_to_bytes(b)]


def one_iteration(state: dict) -> None:
    buf: bytearray = state["buf"]
    for n in (SMALL, LARGE):
        del buf[n:]
        buf.extend(b"\x5a" * (n - len(buf)))
        mv = memoryview(buf)
        merkle.crc32c(buf)
        merkle.crc32(mv[1:], 7)
        merkle.crc32c(np.frombuffer(buf, dtype=np.uint8))
        w = merkle.checksum_windows(buf, 512)
        merkle.checksum_windows(mv, 512, algorithm="crc32", out=np.empty_like(w))
        _expect(ValueError, lambda: merkle.checksum_windows(buf, 512, out=np.empty(1, np.uint32)))
        _expect(ValueError, lambda: merkle.checksum_windows(buf, 0))
        _expect(ValueError, lambda: merkle.crc32c(mv[::2]))  # noqa: B023 (called at once)
        _expect(TypeError, lambda: merkle.crc32c("text"))
        _expect(TypeError, lambda: merkle.checksum_each([buf, "text"]))
        merkle.checksum_each([buf, mv[:10], None, b"abc"])
        h = merkle.CRC32C(buf)
        h.update(mv[:100])
        h.copy().update(buf)
        h.digest()
        _expect(TypeError, lambda: h.update("text"))  # noqa: B023 (called at once)
        _crc64_calls(buf, mv)
        mv.release()
        # the resize below raises BufferError if any call above kept an export of `buf`
        buf.extend(b"\x01")
        del buf[-1:]
    if pa is not None:
        col = state["arrow"]
        merkle.checksum_each(col)
        merkle.checksum_each(col.slice(3), algorithm="crc32")
        merkle.checksum_each(
            col.slice(5), algorithm="crc64nvme", out=np.empty(len(col) - 5, np.uint64)
        )
        _expect(
            ValueError,
            lambda: merkle.checksum_each(
                col, algorithm="crc64nvme", out=np.empty(len(col), np.uint32)
            ),
        )
    a, b, raw = state["trees"]
    merkle.combine_many(state["c1"], state["c2"], 4096)
    merkle.combine_many(state["d1"], state["d2"], 4096, algorithm="crc64nvme")
    merkle._native.fold_fixed(state["c1"], 4096)
    merkle._native.fold_fixed(state["d1"], 4096, algorithm="crc64nvme")
    _expect(ValueError, lambda: merkle._native.fold_fixed(state["c1"], 1 << 62))
    merkle.full_object_crc(state["c1"], [4096] * len(state["c1"]), "crc32c")
    _expect(
        ValueError,
        lambda: merkle.combine_many(state["d1"], state["d2"][1:], 1, algorithm="crc64nvme"),
    )
    tree_from_bytes(raw)
    tree_to_bytes(a)
    diff(a, b)
    _expect(Exception, lambda: tree_from_bytes(raw[:-3]))


def _crc64_calls(buf: bytearray, mv: memoryview) -> None:
    """CRC-64/NVME's twin of every call above, and the pair of two algorithms (success and
    error paths: wrong dtypes, out= tuples of the wrong length, one array twice)."""
    merkle.crc64nvme(buf)
    merkle.crc64nvme(mv[1:], 7)
    merkle.crc64nvme(np.frombuffer(buf, dtype=np.uint8), value=1 << 63)
    w = merkle.checksum_windows(buf, 512, algorithm="crc64nvme")
    merkle.checksum_windows(mv, 512, algorithm="crc64nvme", out=np.empty_like(w))
    _expect(
        ValueError,
        lambda: merkle.checksum_windows(
            buf, 512, algorithm="crc64nvme", out=np.empty(len(w), np.uint32)
        ),
    )
    _expect(ValueError, lambda: merkle.checksum_windows(buf, 0, algorithm="crc64nvme"))
    _expect(ValueError, lambda: merkle.crc64nvme(mv[::2]))
    _expect(TypeError, lambda: merkle.crc64nvme("text"))
    _expect(TypeError, lambda: merkle.crc64nvme(buf, valu=1))
    _expect(TypeError, lambda: merkle.checksum_each([buf, "text"], algorithm="crc64nvme"))
    merkle.checksum_each([buf, mv[:10], None, b"abc"], algorithm="crc64nvme")
    merkle.checksum_each([buf, mv[:10]], algorithm="crc64nvme", out=np.empty(2, np.uint64))
    _expect(
        ValueError,
        lambda: merkle.checksum_each(
            [buf, mv[:10]], algorithm="crc64nvme", out=np.empty(2, np.uint32)
        ),
    )
    # the one-pass pair: every ordered pair of distinct algorithms, with and without out=
    n = len(w)
    for a, b in PAIRS:
        merkle.checksum_windows(buf, 512, algorithm=(a, b))
        merkle.checksum_windows(
            mv, 512, algorithm=(a, b), out=(np.empty(n, DTYPE[a]), np.empty(n, DTYPE[b]))
        )
    pair = ("crc32c", "crc64nvme")
    u32, u64 = np.empty(n, np.uint32), np.empty(n, np.uint64)
    _expect(TypeError, lambda: merkle.checksum_windows(buf, 512, algorithm=pair, out=(u32,)))
    _expect(
        TypeError, lambda: merkle.checksum_windows(buf, 512, algorithm=pair, out=(u32, u64, u64))
    )
    _expect(TypeError, lambda: merkle.checksum_windows(buf, 512, algorithm=pair, out=u32))
    _expect(
        ValueError, lambda: merkle.checksum_windows(buf, 512, algorithm=pair, out=(u32, u32))
    )  # uint32 for crc64
    _expect(ValueError, lambda: merkle.checksum_windows(buf, 512, algorithm=pair, out=(u64, u64)))
    _expect(
        ValueError,
        lambda: merkle.checksum_windows(buf, 512, algorithm=("crc32", "crc32c"), out=(u32, u32)),
    )  # one array twice
    _expect(ValueError, lambda: merkle.checksum_windows(buf, 512, algorithm=("crc32", "crc32")))
    _expect(ValueError, lambda: merkle.checksum_windows(buf, 512, algorithm=("crc32",)))
    _expect(ValueError, lambda: merkle.checksum_windows(buf, 512, algorithm=(*pair, "crc32")))
    _expect(ValueError, lambda: merkle.checksum_windows(buf, 512, algorithm=("crc32", "md5")))
    _expect(ValueError, lambda: merkle.checksum_windows(buf, 0, algorithm=pair))
    _expect(ValueError, lambda: merkle.checksum_windows(mv[::2], 512, algorithm=pair))
    h = merkle.CRC64NVME(buf, value=5)
    h.update(mv[:100])
    h.copy().update(buf)
    h.digest()
    h.hexdigest()
    _expect(TypeError, lambda: h.update("text"))
    _expect(TypeError, lambda: merkle.CRC64NVME("text"))
    _expect(ValueError, lambda: merkle.CRC64NVME(mv[::2]))


def make_state() -> dict:
    state = {
        "buf": bytearray(),
        "trees": _tree_pair(),
        "c1": np.arange(300, dtype=np.uint32),
        "c2": np.arange(300, dtype=np.uint32),
        "d1": np.arange(300, dtype=np.uint64) << np.uint64(33),
        "d2": np.arange(300, dtype=np.uint64),
    }
    if pa is not None:
        state["arrow"] = pa.array([b"x" * i for i in range(40)], type=pa.binary())
    return state


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096  # resident pages (page size 4 KiB on Linux)


def run(iterations: int, leak_per_iteration: int = 0, c_leak: bool = False) -> List[int]:
    """Run the loop; returns RSS after 10% of it and at the end. `leak_per_iteration`
    keeps that many bytes per iteration alive on purpose (the RSS test's positive control);
    `c_leak` mallocs 64 bytes per iteration and drops the pointer (LeakSanitizer's control)."""
    libc_malloc = None
    if c_leak:
        import ctypes

        libc_malloc = ctypes.CDLL(None).malloc
        libc_malloc.restype = ctypes.c_size_t  # an int: LSan finds no pointer to the block
    state = make_state()
    kept: List[bytes] = []
    marks = []
    warm = max(1, iterations // 10)
    for i in range(iterations):
        one_iteration(state)
        if leak_per_iteration:
            kept.append(bytes(leak_per_iteration))
        if libc_malloc is not None:
            libc_malloc(64)
        if i + 1 == warm:
            marks.append(rss_bytes())
    marks.append(rss_bytes())
    return marks


if __name__ == "__main__":
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    leak = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0
    before, after = run(iterations, leak, c_leak="--c-leak" in sys.argv)
    if "--rss" in sys.argv:
        print(f"rss_growth {after - before}")
