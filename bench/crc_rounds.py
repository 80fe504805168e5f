"""crcmerkle against its peers with the cases interleaved round by round, reporting medians.

On a shared machine the speed of a core drifts by tens of percent within a minute, so timing one
implementation after another (as pytest-benchmark does) compares different machines. Here every
round times every implementation of a case once (hot cases: best of 5 short batches), in a
shuffled order, and the reported ratio is the median over rounds of that round's ratio: drift
hits both sides of each ratio alike. The ratios still depend on what else the machine runs: on
a heavily loaded VM the fused kernels (which keep both the multiplier and the crc32 unit busy)
were measured to lose more than the peers, so quote figures from a quiet machine with the load.

    python bench/crc_rounds.py                 # all cases, 11 rounds
    python bench/crc_rounds.py --rounds 21 --cases crc32c,windows
    CRCMERKLE_BACKEND=avx512-vpclmulqdq python bench/crc_rounds.py   # pin our backend

Cases: crc32c and crc32 one-shots on hot buffers (peers, and our own other vector backends the
CPU runs: `pclmulqdq`, the 128-bit kernel, and on AVX-512 CPUs `avx2-vpclmulqdq`, ymm against
zmm), the cost of a 64-byte call, and `checksum_windows` over a cold
buffer (default 256 MiB, far larger than the last-level cache) in 16 KiB windows against each
peer's Python loop and a plain read of the same memory (`read_probe`). GB/s = 1e9 B/s.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

import merkle
from merkle._native import read_probe
from merkle.cli import benchmarking as bm

KiB, MiB = 1024, 1024 * 1024
OURS = "crcmerkle"


@dataclass
class Impl:
    name: str
    func: Callable[[Any], Any]
    backend: Optional[str] = None  # run with our kernels pinned to this backend
    bytes_only: bool = False  # refuses memoryview: a Python loop must slice bytes (a copy)


def peers(algorithm: str) -> List[Impl]:
    """The installed peers for one algorithm, from the registry `crcmerkle bench` uses."""
    return [
        Impl(i.name, i.func, bytes_only=i.bytes_only)
        for i in bm.implementations(algorithm)
        if not i.ours
    ]


# Our own vector backends timed beside the active one when the CPU has them: the 128-bit
# `pclmulqdq` kernels as the yardstick ("today's" backend before the ymm one existed), and on an
# AVX-512 CPU the ymm backend against the zmm one (the measurement that orders them).
YARDSTICKS = ("avx2-vpclmulqdq", "pclmulqdq")


def yardsticks() -> List[str]:
    """Our other vector backends this CPU runs, best first, the active one left out."""
    return [b for b in YARDSTICKS if b in merkle.available_backends() and b != merkle.backend()]


def make_buffer(size: int, seed: int) -> bytes:
    """Random bytes in a bytes object, as Python users hold data (CPython puts the payload of
    a large bytes object 32 or 48 bytes past a 64-byte boundary)."""
    return np.random.default_rng(seed).bytes(size)


class Backend:
    """Pins our kernels to one backend for the duration of a timing."""

    def __init__(self, name: Optional[str]) -> None:
        self.name = name
        self.before: Optional[str] = None

    def __enter__(self) -> None:
        if self.name:
            self.before = merkle.backend()
            merkle.set_backend(self.name)
            if merkle.backend() != self.name:  # a timing under another name would mislead
                raise RuntimeError(f"could not force the {self.name} backend")

    def __exit__(self, *exc: object) -> None:
        if self.before:
            merkle.set_backend(self.before)


def _reps_for(func: Callable[[Any], Any], arg: Any, seconds: float) -> int:
    t0 = time.perf_counter_ns()
    func(arg)
    one = max(time.perf_counter_ns() - t0, 1)
    reps = max(1, int(seconds * 1e9 / 20 / one))
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        func(arg)
    one = max(time.perf_counter_ns() - t0, 1) / reps
    return max(1, int(seconds * 1e9 / one))


def time_call(func: Callable[[Any], Any], arg: Any, reps: int, batches: int = 5) -> float:
    """ns per call of func(arg): the best of `batches` batches of reps/batches calls (GC off).

    On a shared machine a batch that the scheduler interrupted is simply slower; the best batch
    of a round is the speed of this core in that round."""
    per = max(1, reps // batches)
    best = float("inf")
    gc.disable()
    try:
        for _ in range(batches):
            t0 = time.perf_counter_ns()
            for _ in range(per):
                func(arg)
            best = min(best, (time.perf_counter_ns() - t0) / per)
    finally:
        gc.enable()
    return best


@dataclass
class Case:
    title: str
    unit: str  # "GB/s" (higher is better) or "ns" (lower is better)
    samples: Dict[str, List[float]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)  # printed indented under the line

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, []).append(value)

    def line(self) -> str:
        ours = self.samples.get(OURS)
        parts = []
        for name, values in self.samples.items():
            med = statistics.median(values)
            text = f"{name} {med:.2f}" if self.unit == "GB/s" else f"{name} {med:.1f}"
            if ours is not None and name != OURS:
                ratios = [
                    (o / v if self.unit == "GB/s" else v / o)
                    for o, v in zip(ours, values)
                    if o > 0 and v > 0
                ]
                text += f" ({statistics.median(ratios):.2f}x)"
            parts.append(text)
        return "\n".join(
            [f"{self.title} [{self.unit}]: " + " | ".join(parts)]
            + [f"    {note}" for note in self.notes]
        )

    def ratio(self, name: str) -> Optional[float]:
        """Median over rounds of how many times faster crcmerkle is than `name`."""
        ours, theirs = self.samples.get(OURS), self.samples.get(name)
        if not ours or not theirs:
            return None
        ratios = [
            (o / v if self.unit == "GB/s" else v / o)
            for o, v in zip(ours, theirs)
            if o > 0 and v > 0
        ]
        return statistics.median(ratios) if ratios else None


# issue 26: CRC-32C no slower than fastcrc (crc-fast's zmm CRC-32C) at any size
NO_SLOWER_THAN = {"crc32c": "fastcrc"}


def _target_note(case: Case, algorithm: str) -> None:
    peer = NO_SLOWER_THAN.get(algorithm)
    r = case.ratio(peer) if peer else None
    if r is not None:
        case.notes.append(
            f"target: no slower than {peer}: {r:.2f}x, {'met' if r >= 1.0 else 'NOT met'}"
        )


def hot_case(algorithm: str, size: int, rounds: int, seconds: float) -> Case:
    ours = merkle.crc32c if algorithm == "crc32c" else merkle.crc32
    impls = [Impl(OURS, ours)]
    impls += [Impl(f"crcmerkle {b}", ours, backend=b) for b in yardsticks()]
    impls += peers(algorithm)
    payload = make_buffer(size, seed=size)
    expected = zlib.crc32(payload) if algorithm == "crc32" else None
    case = Case(f"{algorithm} {_fmt_size(size)} hot", "GB/s")
    reps = {}
    for impl in impls:
        with Backend(impl.backend):
            got = impl.func(payload)
            expected = got if expected is None else expected
            if got != expected:
                raise AssertionError(
                    f"{impl.name} gives {got:#x} for {algorithm} {size}, others {expected:#x}"
                )
            reps[impl.name] = _reps_for(impl.func, payload, seconds)
    for _ in range(rounds):
        order = list(impls)
        random.shuffle(order)
        for impl in order:
            with Backend(impl.backend):
                ns = time_call(impl.func, payload, reps[impl.name])
            case.add(impl.name, size / ns)
    case.samples = {i.name: case.samples[i.name] for i in impls}
    _target_note(case, algorithm)
    return case


def overhead_case(rounds: int, seconds: float) -> Case:
    payload = make_buffer(64, seed=64)
    impls = [Impl(OURS, merkle.crc32c)]
    impls += [Impl(f"crcmerkle {b}", merkle.crc32c, backend=b) for b in yardsticks()]
    impls += peers("crc32c") + [Impl("zlib (crc32)", zlib.crc32)]
    case = Case("call cost, 64 B", "ns")
    reps = {}
    for impl in impls:
        with Backend(impl.backend):
            reps[impl.name] = _reps_for(impl.func, payload, seconds)
    for _ in range(rounds):
        order = list(impls)
        random.shuffle(order)
        for impl in order:
            with Backend(impl.backend):
                case.add(impl.name, time_call(impl.func, payload, reps[impl.name]))
    case.samples = {i.name: case.samples[i.name] for i in impls}
    _target_note(case, "crc32c")
    return case


def windows_case(rounds: int, total: int, window: int) -> Case:
    data = make_buffer(total, seed=7)
    mv = memoryview(data)
    out = np.empty(-(-total // window), dtype=np.uint32)

    def native() -> Any:
        return merkle.checksum_windows(data, window, out=out)

    def loop(impl: Impl) -> Callable[[], Any]:
        f = impl.func
        if impl.bytes_only:
            return lambda: [f(data[i : i + window]) for i in range(0, total, window)]
        return lambda: [f(mv[i : i + window]) for i in range(0, total, window)]

    runs: Dict[str, Callable[[], Any]] = {OURS: native}
    backends: Dict[str, Optional[str]] = {}
    for b in yardsticks():
        runs[f"crcmerkle {b}"] = native
        backends[f"crcmerkle {b}"] = b
    for impl in peers("crc32c"):
        runs[f"{impl.name} loop"] = loop(impl)
    runs["plain read (limit)"] = lambda: read_probe(data)
    want = np.asarray(loop(Impl("zlib-shaped", merkle.crc32c))(), dtype=np.uint32)
    for name, run in runs.items():
        if name == "plain read (limit)":
            continue
        with Backend(backends.get(name)):
            got = np.asarray(run(), dtype=np.uint32)
        if not np.array_equal(got, want):
            raise AssertionError(f"{name} disagrees on the windows case")
    case = Case(f"checksum_windows {_fmt_size(window)} windows, {_fmt_size(total)} cold", "GB/s")
    for _ in range(rounds):
        order = list(runs)
        random.shuffle(order)
        for name in order:
            with Backend(backends.get(name)):
                gc.disable()
                t0 = time.perf_counter_ns()
                runs[name]()
                ns = time.perf_counter_ns() - t0
                gc.enable()
            case.add(name, total / ns)
    case.samples = {name: case.samples[name] for name in runs}
    r = case.ratio("fastcrc loop")
    if r is not None:
        case.notes.append(
            f"target: no slower than fastcrc's loop: {r:.2f}x, {'met' if r >= 1.0 else 'NOT met'}"
        )
    return case


def _fmt_size(n: int) -> str:
    for unit, scale in (("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


HOT_CRC32C = (512, 4 * KiB, 16 * KiB, 256 * KiB, 4 * MiB)
HOT_CRC32 = (4 * KiB, 16 * KiB, 256 * KiB)


def run_cases(
    cases: Sequence[str], rounds: int, seconds: float, cold_bytes: int, window: int
) -> Iterator[Case]:
    """Each case measured in turn (its implementations interleaved), as it finishes."""
    if "crc32c" in cases:
        for size in HOT_CRC32C:
            yield hot_case("crc32c", size, rounds, seconds)
    if "crc32" in cases:
        for size in HOT_CRC32:
            yield hot_case("crc32", size, rounds, seconds)
    if "overhead" in cases:
        yield overhead_case(rounds, seconds)
    if "windows" in cases:
        yield windows_case(max(3, rounds // 2), cold_bytes, window)


def header(rounds: int) -> str:
    try:
        load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
    except OSError:
        load = ""
    return (
        f"{cpu_name()}; backend {merkle.backend()}; {load}"
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {rounds} interleaved rounds, "
        "medians (ratio = median of the per-round ratios, how many times faster crcmerkle is)"
    )


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--seconds",
        type=float,
        default=0.02,
        help="time per implementation per round in the hot cases",
    )
    parser.add_argument("--cases", default="crc32c,crc32,overhead,windows")
    parser.add_argument("--cold-mib", type=int, default=256)
    parser.add_argument("--window", type=int, default=16 * KiB)
    args = parser.parse_args(argv)
    print(f"# {header(args.rounds)}", flush=True)
    for case in run_cases(
        args.cases.split(","), args.rounds, args.seconds, args.cold_mib * MiB, args.window
    ):
        print(case.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
