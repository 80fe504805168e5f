"""Differential fuzz target of the checksum kernels.

Every input is decoded (fuzz.provider.Provider) into one operation with random data, length,
buffer alignment and type, initial value, window size, value list or combine length; the
operation runs on *every* backend this CPU has (merkle.available_backends()) and each result
must equal the portable backend's, and, for inputs small enough to be cheap, the bytewise
pure-Python reference (tests/reference.py). A mismatch raises AssertionError naming the
backend and the case; nothing else may raise except the documented errors we ask for.

Why differential: the SIMD kernels (folding with 3 streams, 512-bit folds, tails, alignment
peeling) each have their own boundary cases; the portable slicing-by-16 kernel is simple and
itself checked against the reference, so any disagreement is a bug in one of them.
"""

from __future__ import annotations

import array
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import merkle

from fuzz.provider import Provider

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import reference  # noqa: E402  (tests/reference.py: the bytewise oracle)

try:  # Arrow columns take their own native path (offsets buffers); fuzz it when available
    import pyarrow as pa
except ImportError:  # pragma: no cover
    pa = None

ALGORITHMS = ("crc32c", "crc32", "crc64nvme")
FUNCS = {"crc32c": merkle.crc32c, "crc32": merkle.crc32, "crc64nvme": merkle.crc64nvme}
COMBINE = {
    "crc32c": merkle.crc32c_combine,
    "crc32": merkle.crc32_combine,
    "crc64nvme": merkle.crc64nvme_combine,
}
HASHES = {"crc32c": merkle.CRC32C, "crc32": merkle.CRC32, "crc64nvme": merkle.CRC64NVME}
#: result width in bytes: the dtype of the arrays and the size of digest()
WIDTH = {"crc32c": 4, "crc32": 4, "crc64nvme": 8}
DTYPE = {"crc32c": np.uint32, "crc32": np.uint32, "crc64nvme": np.uint64}
#: inputs up to this size are also checked against the bytewise Python reference
REFERENCE_LIMIT = 2048
BACKENDS: List[str] = merkle.available_backends()
#: Set by the self-test (FUZZ_SELFTEST=1): pretend one backend is wrong on one length, to
#: prove that the harness reports a mismatch (tests/test_fuzz_short.py).
SELFTEST_BAD_LENGTH: Optional[int] = None


def _data(p: Provider, n: int) -> bytes:
    """n bytes: the fuzzer's own bytes first, the rest from a seeded generator (so large
    buffers cost no input), or a constant pattern (all-zero/all-ones stress the folds)."""
    kind = p.int(0, 5)
    if kind == 0:
        return bytes(n)
    if kind == 1:
        return b"\xff" * n
    head = p.take(min(n, p.int(0, 64)))
    seed = p.u32()
    return head + np.random.default_rng(seed).bytes(n - len(head))


def _shaped(p: Provider, raw: bytes) -> Any:
    """The same bytes as one of the buffer types users pass, at a random alignment."""
    n = len(raw)
    align = p.int(0, 63)
    kind = p.int(0, 5)
    if kind == 0:
        return raw
    backing = bytearray(align + n + p.int(0, 16))
    backing[align : align + n] = raw
    if kind == 1:
        return memoryview(backing)[align : align + n]
    if kind == 2:
        return np.frombuffer(backing, dtype=np.uint8, count=n, offset=align)
    if kind == 3 and n % 4 == 0:  # a multi-byte item format, still C-contiguous
        return np.frombuffer(backing, dtype=np.uint8, count=n, offset=align).view(np.uint32)
    if kind == 4:
        return array.array("B", raw)
    return bytearray(raw)


def _each_backend(fn: Callable[[], Any]) -> Dict[str, Any]:
    """fn() under every available backend, {backend: result}."""
    out = {}
    previous = merkle.backend()
    try:
        for name in BACKENDS:
            merkle.set_backend(name)
            out[name] = fn()
    finally:
        merkle.set_backend(previous)
    return out


class _Arr:
    """A result array compared by value (cheaper than .tolist() for large outputs)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __eq__(self, other: object) -> bool:
        b = other.a if isinstance(other, _Arr) else other
        if isinstance(b, np.ndarray):  # two results: same values and same dtype
            return self.a.dtype == b.dtype and np.array_equal(self.a, b)
        # a list of Python ints (the expectation) in the result's own dtype: int64 would
        # overflow on CRC-64 values >= 2**63
        return np.array_equal(self.a, np.asarray(b, dtype=self.a.dtype))

    def __repr__(self) -> str:
        return f"array(n={self.a.shape[0]}, head={self.a[:8].tolist()})"


def _norm(v: Any) -> Any:
    """Arrays (also inside a tuple, as the pair returns them) compared by value and dtype."""
    if isinstance(v, np.ndarray):
        return _Arr(v)
    if isinstance(v, tuple):
        return tuple(_norm(x) for x in v)
    return v


def _agree(results: Dict[str, Any], case: str, expect: Any = None) -> None:
    """Every backend equals the portable one (and `expect`, the reference, if given)."""
    norm = {k: _norm(v) for k, v in results.items()}
    if SELFTEST_BAD_LENGTH is not None and f"n={SELFTEST_BAD_LENGTH} " in case + " ":
        victim = BACKENDS[0]
        norm[victim] = ("selftest-corrupted", norm[victim])
    want = norm["portable"] if expect is None else expect
    if expect is not None and norm["portable"] != expect:
        raise AssertionError(f"portable != reference: {case}: {norm['portable']!r} != {expect!r}")
    bad = {k: v for k, v in norm.items() if v != want}
    if bad:
        raise AssertionError(f"backend mismatch: {case}: want {want!r}, got {bad!r}")


def _init(p: Provider, alg: str) -> int:
    """A starting value in the algorithm's range: 0, all ones, or any."""
    mask = reference.MASK[alg]
    return p.choice((0, mask, p.u64() & mask))


def op_crc(p: Provider) -> None:
    alg = p.choice(ALGORITHMS)
    n = p.length()
    raw = _data(p, n)
    init = _init(p, alg)
    buf = _shaped(p, raw)
    fn = FUNCS[alg]
    by_keyword = p.bool()  # value= by keyword takes its own argument parsing
    expect = reference.crc(alg, raw, init) if n <= REFERENCE_LIMIT else None
    _agree(
        _each_backend(lambda: fn(buf, value=init) if by_keyword else fn(buf, init)),
        f"{alg} n={n} init={init:#x} kw={by_keyword} type={type(buf).__name__}",
        expect,
    )
    if n >= 3:  # [::2] of 2 bytes is 1 byte, which is contiguous
        try:
            fn(memoryview(bytearray(raw))[::2])
        except ValueError:
            pass
        else:
            raise AssertionError("a non-contiguous buffer was accepted")


def op_chain(p: Provider) -> None:
    """crc(b, crc(a)) == crc(a + b): the running value is carried correctly."""
    alg = p.choice(ALGORITHMS)
    raw = _data(p, p.length())
    cut = p.int(0, len(raw))
    fn = FUNCS[alg]
    with merkle.using_backend("portable"):
        whole = fn(raw)
    _agree(
        _each_backend(lambda: fn(raw[cut:], fn(raw[:cut]))),
        f"{alg} chain n={len(raw)} cut={cut}",
        whole,
    )


def op_windows(p: Provider) -> None:
    alg = p.choice(ALGORITHMS)
    n = p.length()
    raw = _data(p, n)
    w = p.choice((1, 2, 3, 4, 7, 64, 512, 4096, 16384, p.int(1, 70000), max(1, n), n + 1))
    buf = _shaped(p, raw)
    use_out = p.bool()
    count = -(-n // w)
    fn = FUNCS[alg]

    def run() -> Any:
        out = np.empty(count, dtype=DTYPE[alg]) if use_out else None
        got = merkle.checksum_windows(buf, w, algorithm=alg, out=out)
        if use_out and got is not out:
            raise AssertionError("checksum_windows(out=...) did not return `out`")
        if got.dtype != DTYPE[alg]:
            raise AssertionError(f"checksum_windows({alg}) returned {got.dtype}")
        return got

    expect = None  # many windows: every backend against the portable one only
    if count <= 512:  # few windows: portable also against one crc() call per window
        with merkle.using_backend("portable"):
            expect = [fn(raw[i : i + w]) for i in range(0, n, w)]
        if n <= REFERENCE_LIMIT:
            ref = [reference.crc(alg, raw[i : i + w]) for i in range(0, n, w)]
            if ref != expect:
                raise AssertionError(f"portable windows != reference: {alg} n={n} w={w}")
    _agree(_each_backend(run), f"{alg} windows n={n} w={w} out={use_out}", expect)


def op_windows_pair(p: Provider) -> None:
    """checksum_windows(algorithm=(a, b)), any two distinct algorithms in either order (the
    fused one-pass kernels), with and without an out= tuple: equal to the two single calls."""
    alg_a = p.choice(ALGORITHMS)
    alg_b = p.choice(tuple(a for a in ALGORITHMS if a != alg_a))
    n = p.length()
    raw = _data(p, n)
    w = p.choice((1, 3, 4, 8, 64, 512, 4096, 16384, p.int(1, 70000), max(1, n), n + 1))
    buf = _shaped(p, raw)
    use_out = p.bool()
    count = -(-n // w)

    def run() -> Any:
        out = (
            (np.empty(count, dtype=DTYPE[alg_a]), np.empty(count, dtype=DTYPE[alg_b]))
            if use_out
            else None
        )
        got = merkle.checksum_windows(buf, w, algorithm=(alg_a, alg_b), out=out)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise AssertionError(f"checksum_windows(pair) returned {type(got).__name__}")
        if use_out and (got[0] is not out[0] or got[1] is not out[1]):
            raise AssertionError("checksum_windows(pair, out=(a, b)) did not return them")
        if (got[0].dtype, got[1].dtype) != (DTYPE[alg_a], DTYPE[alg_b]):
            raise AssertionError(f"pair dtypes {got[0].dtype}, {got[1].dtype}")
        return got

    # the two single calls (themselves fuzzed on every backend by op_windows) on portable
    with merkle.using_backend("portable"):
        expect = tuple(merkle.checksum_windows(raw, w, algorithm=a) for a in (alg_a, alg_b))
    if n <= REFERENCE_LIMIT and count <= 64:
        for a, got in zip((alg_a, alg_b), expect):
            if got.tolist() != [reference.crc(a, raw[i : i + w]) for i in range(0, n, w)]:
                raise AssertionError(f"portable windows != reference: {a} n={n} w={w}")
    _agree(_each_backend(run), f"{alg_a}+{alg_b} windows n={n} w={w} out={use_out}", _norm(expect))
    if p.int(0, 7) == 0:  # the argument errors of the pair, on this buffer
        _pair_errors(buf, w, count, alg_a, alg_b)


def _pair_errors(buf: Any, w: int, count: int, alg_a: str, alg_b: str) -> None:
    def expect(exc: type, **kw: Any) -> None:
        try:
            merkle.checksum_windows(buf, w, **kw)
        except exc:
            return
        raise AssertionError(f"checksum_windows({kw}) did not raise {exc.__name__}")

    good_a = np.empty(count, DTYPE[alg_a])
    wrong_b = np.empty(count, np.uint32 if DTYPE[alg_b] is np.uint64 else np.uint64)
    expect(TypeError, algorithm=(alg_a, alg_b), out=(good_a,))
    expect(TypeError, algorithm=(alg_a, alg_b), out=good_a)
    expect(ValueError, algorithm=(alg_a, alg_b), out=(good_a, wrong_b))
    expect(ValueError, algorithm=(alg_a, alg_b), out=(good_a, np.empty(count + 1, DTYPE[alg_b])))
    expect(ValueError, algorithm=(alg_a, alg_a))
    expect(ValueError, algorithm=(alg_a, alg_b, alg_a))
    if DTYPE[alg_a] is DTYPE[alg_b]:
        expect(ValueError, algorithm=(alg_a, alg_b), out=(good_a, good_a))


def op_each(p: Provider) -> None:
    alg = p.choice(ALGORITHMS)
    k = p.int(0, 12)
    values: List[Optional[bytes]] = []
    for _ in range(k):
        values.append(
            None
            if p.int(0, 5) == 0
            else _data(p, p.choice((0, 1, 3, 8, 17, 64, p.length(1 << 14))))
        )
    fn = FUNCS[alg]
    with merkle.using_backend("portable"):
        expect = [0 if v is None else fn(v) for v in values]
    kind = p.int(0, 3)
    use_out = p.bool()
    if kind == 3 and pa is not None:
        typ = p.choice((pa.binary(), pa.large_binary()))
        col = pa.array(values, type=typ)
        start = p.int(0, len(values))
        col = col.slice(start)
        expect = expect[start:]
        subject: Any = col
    elif kind == 2:
        subject = [None if v is None else bytearray(v) for v in values]
    elif kind == 1:
        subject = tuple(values)
    else:
        subject = values

    def run() -> Any:
        out = np.empty(len(expect), dtype=DTYPE[alg]) if use_out else None
        got = merkle.checksum_each(subject, algorithm=alg, out=out)
        if use_out and got is not out:
            raise AssertionError("checksum_each(out=...) did not return `out`")
        if got.dtype != DTYPE[alg]:
            raise AssertionError(f"checksum_each({alg}) returned {got.dtype}")
        return got

    _agree(
        _each_backend(run),
        f"{alg} each k={k} kind={kind} out={use_out} n={sum(len(v or b'') for v in values)}",
        expect,
    )


def op_combine(p: Provider) -> None:
    alg = p.choice(ALGORITHMS)
    fn, comb = FUNCS[alg], COMBINE[alg]
    if p.bool():  # real parts: combine must give the CRC of the concatenation
        a, b = _data(p, p.length(1 << 16)), _data(p, p.length(1 << 16))
        ca, cb = fn(a), fn(b)
        _agree(
            _each_backend(lambda: comb(ca, cb, len(b))),
            f"{alg} combine |a|={len(a)} n={len(b)}",
            fn(a + b),
        )
        return
    # arbitrary values and huge lengths (up to 2**64 - 1): the GF(2) reference
    mask = reference.MASK[alg]
    c1, c2 = p.u64() & mask, p.u64() & mask
    len2 = p.choice(
        (0, 1, p.int(0, 1 << 20), p.int(0, (1 << 64) - 1), (1 << 64) - 1, 1 << p.int(0, 63))
    )
    expect = reference.combine(alg, c1, c2, len2)
    _agree(_each_backend(lambda: comb(c1, c2, len2)), f"{alg} combine len2={len2}", expect)
    k = p.choice((p.int(0, 40), 255, 256, 257, p.int(0, 3000)))  # >= 256: the table path
    rng = np.random.default_rng(p.u32())
    a1 = rng.integers(0, mask + 1, k, dtype=DTYPE[alg])
    a2 = rng.integers(0, mask + 1, k, dtype=DTYPE[alg])
    scalar = [comb(int(x), int(y), len2) for x, y in zip(a1, a2)]
    _agree(
        _each_backend(lambda: merkle.combine_many(a1, a2, len2, algorithm=alg)),
        f"{alg} combine_many k={k} len2={len2}",
        scalar,
    )
    # fold_fixed: the CRC of k pieces of one stride (four runs side by side from 256 on)
    stride = p.choice((0, 1, p.int(0, 1 << 20), 16384, (1 << 63) // max(k, 1)))
    folded = 0
    for x in a1:
        folded = comb(folded, int(x), stride)
    _agree(
        _each_backend(lambda: merkle._native.fold_fixed(a1, stride, algorithm=alg)),
        f"{alg} fold_fixed k={k} stride={stride}",
        folded,
    )


def op_hash(p: Provider) -> None:
    """hashlib-shaped objects fed in pieces, copied mid-way, reset: same as one call."""
    alg = p.choice(ALGORITHMS)
    raw = _data(p, p.length(1 << 16))
    cuts = sorted(p.int(0, len(raw)) for _ in range(p.int(0, 6)))
    mid = p.int(0, len(cuts))

    def run() -> Any:
        h = HASHES[alg]()
        snap = None
        prev = 0
        for i, c in enumerate(cuts + [len(raw)]):
            if i == mid:
                snap = h.copy()
            h.update(memoryview(raw)[prev:c])
            prev = c
        copy_val = snap.intdigest() if snap is not None else None
        out = (h.intdigest(), h.hexdigest(), h.digest(), copy_val)
        h.reset()
        return out + (h.intdigest(),)

    fn = FUNCS[alg]
    with merkle.using_backend("portable"):
        whole = fn(raw)
    snap_expect = fn(raw[: cuts[mid - 1]]) if mid > 0 else 0  # copied before piece `mid`
    width = WIDTH[alg]
    expect = (whole, f"{whole:0{2 * width}x}", whole.to_bytes(width, "big"), snap_expect, 0)
    _agree(_each_backend(run), f"{alg} hash n={len(raw)} cuts={cuts} mid={mid}", expect)


def _be(v: int, n: int) -> bytes:
    return (v & ((1 << (8 * n)) - 1)).to_bytes(n, "big")


def op_tree_values(p: Provider) -> None:
    """Ozone's tree values (leaf = CRC32C of the stored BE32 window checksums, block =
    CRC32C(BE64 id, BE64 leaves...), container = CRC32C(BE64 block values...)) from the
    native bulk paths, against the formulas of ../shared/OZONE.md spelled out bytewise."""
    from merkle.trees.model import ContainerTree

    rows = []
    for _ in range(p.int(0, 12)):
        windows = [p.u32() for _ in range(p.choice((0, 1, 2, p.int(0, 40), p.int(0, 1500))))]
        rows.append((p.int(-3, 3) * (1 << p.int(0, 61)), p.int(0, 4) * 4096, windows))
    bids = [r[0] for r in rows]
    offs = [r[1] for r in rows]
    flat = np.array([w for r in rows for w in r[2]], dtype=np.uint32)
    counts = [len(r[2]) for r in rows]
    raw = b"".join(_be(w, 4) for r in rows for w in r[2])

    def build() -> Any:
        a = ContainerTree.from_columns(3, bids, offs, window_checksums=flat, window_counts=counts)
        b = ContainerTree.from_columns(
            3, bids, offs, window_bytes=raw, window_byte_counts=[4 * c for c in counts]
        )
        if a != b:
            raise AssertionError("leaves from uint32 windows != leaves from stored bytes")
        return (a.chunk_value.tolist(), a.block_value.tolist(), a.data_checksum)

    last: Dict[tuple, int] = {}  # Ozone's per-block offset map: the later row wins
    for b, o, w in rows:
        last[(b, o)] = reference.crc("crc32c", b"".join(_be(x, 4) for x in w))
    keys = sorted(last)
    blocks: Dict[int, List[int]] = {}
    for b, o in keys:
        blocks.setdefault(b, []).append(last[(b, o)])
    bvals = [
        reference.crc("crc32c", _be(b, 8) + b"".join(_be(v, 8) for v in leaves))
        for b, leaves in sorted(blocks.items())
    ]
    root = reference.crc("crc32c", b"".join(_be(v, 8) for v in bvals))
    _agree(
        _each_backend(build),
        f"tree values rows={len(rows)}",
        ([last[k] for k in keys], bvals, root),
    )


OPS = (
    op_crc,
    op_crc,
    op_chain,
    op_windows,
    op_windows,
    op_each,
    op_combine,
    op_hash,
    op_tree_values,
    op_windows_pair,
    op_windows_pair,
)


def target(data: bytes) -> None:
    p = Provider(data)
    p.choice(OPS)(p)


def seeds() -> List[bytes]:
    """A few starting inputs: one per operation, with a mix of sizes (the rest comes from
    mutation; every byte string is a valid input)."""
    out = []
    for i in range(len(OPS)):
        for tail in (b"", b"\x05\x40\x00\x01\x02\x03", b"\x07\xff\xff\x03\x11" * 4):
            out.append(bytes([i]) + tail)
    return out
