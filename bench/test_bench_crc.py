"""crcmerkle vs peers: one benchmark per (implementation, size), peers in the same run.

Throughput (GB/s) or time (ns) goes to benchmark.extra_info and to the ratio table printed at
the end (see conftest.py). Each benchmark asserts its checksums are right; none asserts speed.
"""

from __future__ import annotations

import zlib
from contextlib import nullcontext
from typing import Dict, List

import numpy as np
import pytest

import merkle
from merkle.cli import benchmarking as bm

from conftest import SHORT, cold_bytes

KiB, MiB = bm.KiB, bm.MiB

CRC32C_SIZES = [64, 512, 4 * KiB, 16 * KiB, 256 * KiB, 4 * MiB]
CRC32_SIZES = [4 * KiB, 16 * KiB, 256 * KiB]
WINDOW = 16 * KiB
COMBINE_LEN = 16 * KiB
COMBINE_COUNT = (1 << 16) if SHORT else (1 << 20)

CRC32C_IMPLS = bm.implementations("crc32c")
CRC32_IMPLS = bm.implementations("crc32")
# crcmerkle's own only in a build that has it; the peers (awscrt, crc64fast) when installed
CRC64_IMPLS = bm.implementations("crc64nvme")
CRC64_SIZES = [64, KiB, 4 * KiB, 16 * KiB, 256 * KiB, MiB]
PAIR = ("crc32c", "crc64nvme")

# Our own 128-bit backend, as a yardstick for the wider ones (run with it forced).
YARDSTICK = "pclmulqdq"
PINNED: Dict[str, str] = {}
if YARDSTICK in merkle.available_backends() and merkle.backend() != YARDSTICK:
    for _impls, _func in ((CRC32C_IMPLS, merkle.crc32c), (CRC32_IMPLS, merkle.crc32)):
        _pinned = bm.Impl(f"{bm.OURS} {YARDSTICK}", _impls[0].algorithm, _func)
        PINNED[_pinned.name] = YARDSTICK
        _impls.insert(1, _pinned)


def _backend_for(impl: bm.Impl):
    """Forces the backend a pinned implementation stands for; a no-op for the others."""
    return merkle.using_backend(PINNED[impl.name]) if impl.name in PINNED else nullcontext()


def _ids(impls):
    return [i.name for i in impls]


def _size_ids(sizes):
    return [bm.format_size(s).replace(" ", "") for s in sizes]


# --- references (never the implementation under test) --------------------------------------


def _table(poly: int) -> List[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _table(0x82F63B78)


def _py_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _CRC32C_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_CRC64NVME_TABLE = _table(0x9A6C9329AC4BC9B5)


def _py_crc64nvme(data: bytes) -> int:
    crc = 0xFFFFFFFFFFFFFFFF
    t = _CRC64NVME_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def reference(impl: bm.Impl, data: bytes) -> int:
    """The expected checksum, computed by something other than impl."""
    if impl.algorithm == "crc64nvme":
        others = [i for i in CRC64_IMPLS if i.name != impl.name]
        return others[0].func(data) if others else _py_crc64nvme(data)
    if impl.algorithm == "crc32":
        return zlib.crc32(data) if impl.name != "zlib" else merkle.crc32(data)
    if not impl.ours:
        return merkle.crc32c(data)
    peers = [i for i in CRC32C_IMPLS if not i.ours and i.name not in PINNED]
    return peers[0].func(data) if peers else _py_crc32c(data)


# --- hot one-shots ----------------------------------------------------------------------------


@pytest.mark.parametrize("size", CRC32C_SIZES, ids=_size_ids(CRC32C_SIZES))
@pytest.mark.parametrize("impl", CRC32C_IMPLS, ids=_ids(CRC32C_IMPLS))
def test_crc32c_one_shot(bench, impl, size):
    data = bm.make_buffer(size, seed=size)
    with _backend_for(impl):
        got = bench.measure(
            impl.func,
            args=(data,),
            case=f"crc32c {bm.format_size(size)}",
            impl=impl.name,
            nbytes=size,
        )
    assert got == reference(impl, data)


@pytest.mark.parametrize("size", CRC32_SIZES, ids=_size_ids(CRC32_SIZES))
@pytest.mark.parametrize("impl", CRC32_IMPLS, ids=_ids(CRC32_IMPLS))
def test_crc32_one_shot(bench, impl, size):
    data = bm.make_buffer(size, seed=size)
    with _backend_for(impl):
        got = bench.measure(
            impl.func,
            args=(data,),
            case=f"crc32 {bm.format_size(size)}",
            impl=impl.name,
            nbytes=size,
        )
    assert got == reference(impl, data)


@pytest.mark.parametrize("size", CRC64_SIZES, ids=_size_ids(CRC64_SIZES))
@pytest.mark.parametrize("impl", CRC64_IMPLS, ids=_ids(CRC64_IMPLS))
def test_crc64nvme_one_shot(bench, impl, size):
    data = bm.make_buffer(size, seed=size)
    got = bench.measure(
        impl.func,
        args=(data,),
        case=f"crc64nvme {bm.format_size(size)}",
        impl=impl.name,
        nbytes=size,
    )
    assert got == reference(impl, data)


def test_crc64nvme_reference():
    """The Python reference above is CRC-64/NVME (its check value), whatever else is missing."""
    assert _py_crc64nvme(b"123456789") == bm.CHECK_VALUES["crc64nvme"]


# zlib.crc32 is in for scale: a METH_FASTCALL builtin, the floor of a Python call's cost.
OVERHEAD_IMPLS = [i for i in CRC32C_IMPLS if i.name not in PINNED] + [
    i for i in CRC32_IMPLS if i.name == "zlib"
]
WINDOW_IMPLS = [i for i in CRC32C_IMPLS if i.name not in PINNED]


@pytest.mark.parametrize(
    "impl", OVERHEAD_IMPLS, ids=[f"{i.name}-{i.algorithm}" for i in OVERHEAD_IMPLS]
)
def test_call_overhead_64B(bench, impl):
    data = bm.make_buffer(64, seed=64)
    name = impl.name if impl.algorithm == "crc32c" else f"{impl.name} (crc32)"
    got = bench.measure(
        impl.func, args=(data,), case="call overhead 64 B", impl=name, nbytes=64, unit="ns/call"
    )
    assert got == reference(impl, data)


# --- cold: a buffer much larger than the LLC, in 16 KiB windows --------------------------------


@pytest.fixture(scope="module")
def cold_buffer():
    return bm.make_buffer(cold_bytes(), seed=7)


@pytest.fixture(scope="module")
def cold_expected(cold_buffer):
    peers = [i for i in CRC32C_IMPLS if not i.ours and i.name not in PINNED]
    if peers:  # checked against a peer, not against ourselves
        return np.array(bm.windows_loop(peers[-1], cold_buffer, WINDOW)(), dtype=np.uint32)
    return np.array(bm.windows_loop(CRC32C_IMPLS[0], cold_buffer, WINDOW)(), dtype=np.uint32)


@pytest.mark.parametrize("impl", WINDOW_IMPLS, ids=_ids(WINDOW_IMPLS))
def test_windows_cold(bench, impl, cold_buffer, cold_expected):
    if impl.ours:
        run = bm.windows_native(cold_buffer, WINDOW)
    else:
        run = bm.windows_loop(impl, cold_buffer, WINDOW)
    got = bench.measure(
        run,
        case=f"windows {bm.format_size(WINDOW)}, cold {bm.format_size(len(cold_buffer))}",
        impl=impl.name,
        nbytes=len(cold_buffer),
        cold=True,
    )
    assert np.array_equal(np.asarray(got, dtype=np.uint32), cold_expected)


def test_windows_cold_read_limit(bench, cold_buffer):
    """The same buffer read with no checksum at all: the memory-bandwidth limit of the case."""
    from merkle._native import read_probe

    got = bench.measure(
        read_probe,
        args=(cold_buffer,),
        case=f"windows {bm.format_size(WINDOW)}, cold {bm.format_size(len(cold_buffer))}",
        impl="plain read (limit)",
        nbytes=len(cold_buffer),
        cold=True,
    )
    assert got == int(np.bitwise_xor.reduce(np.frombuffer(cold_buffer, dtype=np.uint64)))


# --- combine with a fixed length ---------------------------------------------------------------


@pytest.fixture(scope="module")
def combine_columns():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**32, COMBINE_COUNT, dtype=np.uint32)
    b = rng.integers(0, 2**32, COMBINE_COUNT, dtype=np.uint32)
    return a, b


@pytest.mark.parametrize("impl", ["crcmerkle", "python loop of crc32c_combine"])
def test_combine_many(bench, impl, combine_columns):
    a, b = combine_columns
    if impl == "crcmerkle":

        def run():
            return merkle.combine_many(a, b, COMBINE_LEN)
    else:
        al, bl = a.tolist(), b.tolist()
        combine = merkle.crc32c_combine

        def run():
            return [combine(x, y, COMBINE_LEN) for x, y in zip(al, bl)]

    got = np.asarray(
        bench.measure(
            run,
            case=f"combine_many len {bm.format_size(COMBINE_LEN)}",
            impl=impl,
            per=COMBINE_COUNT,
            unit="ns/elem",
        ),
        dtype=np.uint32,
    )
    # spot-check against the definition: crc(A||B) from real data
    for i in range(0, COMBINE_COUNT, COMBINE_COUNT // 8):
        assert got[i] == merkle.crc32c_combine(int(a[i]), int(b[i]), COMBINE_LEN)
    A, B = b"x" * 100, bm.make_buffer(COMBINE_LEN, seed=5)
    one = merkle.combine_many([merkle.crc32c(A)], [merkle.crc32c(B)], COMBINE_LEN)
    assert int(one[0]) == reference(CRC32C_IMPLS[0], A + B)


# --- CRC-32C and CRC-64/NVME in one pass (checksum_windows with a pair of algorithms) --------


def _pair_runs(data: bytes):
    def pair():
        return merkle.checksum_windows(data, WINDOW, algorithm=PAIR)

    def one_after_other():
        return tuple(merkle.checksum_windows(data, WINDOW, algorithm=a) for a in PAIR)

    runs = {"crcmerkle": pair, "one call per algorithm": one_after_other}
    for a in PAIR:
        runs[f"{a} alone"] = lambda a=a: merkle.checksum_windows(data, WINDOW, algorithm=a)
    return runs


PAIR_RUNS = ["crcmerkle", "one call per algorithm"] + [f"{a} alone" for a in PAIR]


def _pair_expected(data: bytes):
    """Each algorithm's windows from a peer's (or the reference's) one-shots, not from ours."""
    out = []
    for algorithm, impls in (("crc32c", CRC32C_IMPLS), ("crc64nvme", CRC64_IMPLS)):
        peers = [i for i in impls if not i.ours and i.name not in PINNED]
        f = peers[0].func if peers else (_py_crc32c if algorithm == "crc32c" else _py_crc64nvme)
        out.append(
            np.array(
                [f(data[i : i + WINDOW]) for i in range(0, len(data), WINDOW)],
                dtype=np.uint32 if algorithm == "crc32c" else np.uint64,
            )
        )
    return out


def _check_pair(name: str, got, expected) -> None:
    if name == "crcmerkle" or name == "one call per algorithm":
        assert len(got) == 2
        for g, e in zip(got, expected):
            assert np.array_equal(np.asarray(g), e)
    else:
        assert np.array_equal(np.asarray(got), expected[PAIR.index(name.split()[0])])


@pytest.mark.parametrize("run", PAIR_RUNS)
def test_pair_hot_1MiB(bench, run):
    if not bm.has_ours("crc64nvme"):
        pytest.skip("this build of crcmerkle has no crc64nvme")
    data = bm.make_buffer(MiB, seed=11)
    got = bench.measure(
        _pair_runs(data)[run],
        case=f"pair crc32c+crc64nvme, 1 MiB hot in {bm.format_size(WINDOW)} windows",
        impl=run,
        nbytes=len(data),
    )
    _check_pair(run, got, _pair_expected(data))


@pytest.mark.parametrize("run", PAIR_RUNS)
def test_pair_cold(bench, run, cold_buffer):
    if not bm.has_ours("crc64nvme"):
        pytest.skip("this build of crcmerkle has no crc64nvme")
    got = bench.measure(
        _pair_runs(cold_buffer)[run],
        case=f"pair crc32c+crc64nvme, cold {bm.format_size(len(cold_buffer))} "
        f"in {bm.format_size(WINDOW)} windows",
        impl=run,
        nbytes=len(cold_buffer),
        cold=True,
    )
    # checked against peers on the first 64 windows (a Python loop of a peer over the whole
    # buffer would double the step; test_windows_cold_crc64nvme checks every window)
    expected = _pair_expected(cold_buffer[: 64 * WINDOW])
    if run in ("crcmerkle", "one call per algorithm"):
        got = [np.asarray(g)[:64] for g in got]
    else:
        got = np.asarray(got)[:64]
    _check_pair(run, got, expected)


@pytest.fixture(scope="module")
def cold_expected64(cold_buffer):
    peers = [i for i in CRC64_IMPLS if not i.ours]
    impl = peers[0] if peers else CRC64_IMPLS[0]
    return np.array(bm.windows_loop(impl, cold_buffer, WINDOW)(), dtype=np.uint64)


@pytest.mark.parametrize("impl", CRC64_IMPLS, ids=_ids(CRC64_IMPLS))
def test_windows_cold_crc64nvme(bench, impl, cold_buffer, cold_expected64):
    if impl.ours:
        run = bm.windows_native(cold_buffer, WINDOW, algorithm="crc64nvme")
    else:
        run = bm.windows_loop(impl, cold_buffer, WINDOW)
    got = bench.measure(
        run,
        case=f"crc64nvme windows {bm.format_size(WINDOW)}, cold {bm.format_size(len(cold_buffer))}",
        impl=impl.name,
        nbytes=len(cold_buffer),
        cold=True,
    )
    assert np.array_equal(np.asarray(got, dtype=np.uint64), cold_expected64)
