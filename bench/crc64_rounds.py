"""CRC-64/NVME and the one-pass CRC-32C + CRC-64/NVME pair against their peers, interleaved.

The same method as crc_rounds.py (every implementation of a case timed once per round in a
shuffled order, hot cases best of 5 short batches; a ratio is the median over rounds of that
round's ratio), for issue 26's cases, each printed with the target it is held against:

    python bench/crc64_rounds.py                     # all cases, 11 rounds
    python bench/crc64_rounds.py --rounds 21 --cases crc64nvme,pair
    CRCMERKLE_BACKEND=avx2-vpclmulqdq python bench/crc64_rounds.py   # pin our backend

Cases:
  limits     the CRC-64/NVME fold limit of this CPU in bytes/cycle and GB/s (cpu_limits.py)
  crc64nvme  one call per hot buffer, 64 B to 1 MiB: crcmerkle (the active backend, and each
             other backend forced: avx512-vpclmulqdq, avx2-vpclmulqdq, pclmulqdq, portable)
             against awscrt and crc64fast; % of the fold limit of each of our vector backends;
             crc-fast's published figure for this CPU class at 1 KiB and 1 MiB
  cold       a 256 MiB buffer (far beyond the last-level cache): one call over all of it, and
             checksum_windows(algorithm="crc64nvme") in 16 KiB windows against each peer's
             Python loop, beside a plain read of the same memory (read_probe)
  pair       checksum_windows(buf, 16 KiB, algorithm=("crc32c", "crc64nvme")) against the two
             calls one after the other and each alone, 256 KiB and 1 MiB hot, 256 MiB cold;
             pair / slower alone (target <= 1.25)
  call64     a 64-byte crc64nvme call against a 64-byte crc32c call (target: no slower)

crc64fast has no one-shot function: its figures are a new hasher + update + digest per call,
what its users write (its small-buffer figures carry that Python overhead). A peer that is not
installed, or a crcmerkle build without crc64nvme, leaves its columns out with one line.
GB/s = 1e9 B/s.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

import merkle
from merkle._native import read_probe
from merkle.cli import benchmarking as bm

import cpu_limits
from crc_rounds import (
    OURS,
    Backend,
    Case,
    Impl,
    _fmt_size,
    _reps_for,
    header,
    make_buffer,
    time_call,
)

KiB, MiB = 1024, 1024 * 1024
HOT_SIZES = (64, 1 * KiB, 4 * KiB, 16 * KiB, 256 * KiB, 1 * MiB)
PAIR_HOT = (256 * KiB, 1 * MiB)
WINDOW = 16 * KiB
PAIR = ("crc32c", "crc64nvme")
#: our backends timed beside the active one (each forced in turn), widest first
BACKENDS = ("avx512-vpclmulqdq", "avx2-vpclmulqdq", "pclmulqdq", "portable")
AWS_TARGET_SIZES = (16 * KiB, 256 * KiB)  # issue 26: at least 2x awscrt here
AWS_TARGET = 2.0
PAIR_TARGET = 1.25


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def has_crc64() -> bool:
    return hasattr(merkle, "crc64nvme")


def forced_backends() -> List[str]:
    """Our other backends this CPU runs, the active one left out."""
    return [b for b in BACKENDS if b in merkle.available_backends() and b != merkle.backend()]


@dataclass
class Text:
    text: str

    def line(self) -> str:
        return self.text


def per_round(case: Case, num: str, den: str) -> Optional[float]:
    """Median over rounds of num's value / den's value (GB/s: how many times faster num is)."""
    a, b = case.samples.get(num), case.samples.get(den)
    if not a or not b:
        return None
    ratios = [x / y for x, y in zip(a, b) if x > 0 and y > 0]
    return statistics.median(ratios) if ratios else None


def _interleave(case: Case, impls: Sequence[Impl], arg: Any, rounds: int, seconds: float) -> Case:
    """Each round times every impl once (best of 5 batches), shuffled; GB/s or ns per call."""
    reps = {}
    for impl in impls:
        with Backend(impl.backend):
            reps[impl.name] = _reps_for(impl.func, arg, seconds)
    nbytes = len(arg)
    for _ in range(rounds):
        order = list(impls)
        random.shuffle(order)
        for impl in order:
            with Backend(impl.backend):
                ns = time_call(impl.func, arg, reps[impl.name])
            case.add(impl.name, nbytes / ns if case.unit == "GB/s" else ns)
    case.samples = {i.name: case.samples[i.name] for i in impls}
    return case


def _check(impls: Sequence[Impl], arg: Any, what: str) -> None:
    """Every implementation must give the same value (ours forced to each backend too)."""
    values = {}
    for impl in impls:
        with Backend(impl.backend):
            values[impl.name] = impl.func(arg)
    if len(set(values.values())) > 1:
        shown = ", ".join(f"{k} {v:#x}" for k, v in values.items())
        raise AssertionError(f"implementations disagree on {what}: {shown}")


def crc64_impls() -> List[Impl]:
    impls = []
    if has_crc64():
        impls.append(Impl(OURS, merkle.crc64nvme))
        impls += [Impl(f"{OURS} {b}", merkle.crc64nvme, backend=b) for b in forced_backends()]
    impls += [
        Impl(i.name, i.func, bytes_only=i.bytes_only)
        for i in bm.implementations("crc64nvme")
        if not i.ours
    ]
    return impls


def _limit_notes(case: Case, limits: cpu_limits.Limits) -> List[str]:
    """% of the fold limit of each of our vector backends in this case."""
    parts = []
    for name, values in case.samples.items():
        if not name.startswith(OURS):
            continue
        backend = merkle.backend() if name == OURS else name[len(OURS) + 1 :]
        width = cpu_limits.BACKEND_WIDTH.get(backend)
        limit = limits.gbps(width) if width else None
        if limit:
            parts.append(f"{name} ({width}) {100 * statistics.median(values) / limit:.0f}%")
    if not parts:
        return []
    return [
        "of the fold limit ("
        + ", ".join(
            f"{w} {limits.gbps(w):.1f} GB/s" for w in ("zmm", "ymm", "xmm") if limits.gbps(w)
        )
        + "): "
        + ", ".join(parts)
    ]


def hot_case(size: int, rounds: int, seconds: float, limits: cpu_limits.Limits) -> Case:
    impls = crc64_impls()
    payload = make_buffer(size, seed=size)
    _check(impls, payload, f"crc64nvme of {size} bytes")
    case = _interleave(
        Case(f"crc64nvme {_fmt_size(size)} hot", "GB/s"), impls, payload, rounds, seconds
    )
    if OURS not in case.samples:  # run_cases said so once
        return case
    if size in AWS_TARGET_SIZES and "awscrt" in case.samples:
        r = per_round(case, OURS, "awscrt")
        note = f"target >= {AWS_TARGET:g}x awscrt: {r:.2f}x, {_met(r >= AWS_TARGET)}"
        width = cpu_limits.BACKEND_WIDTH.get(merkle.backend())
        limit = limits.gbps(width) if width else None
        need = AWS_TARGET * statistics.median(case.samples["awscrt"])
        if limit and need > limit:
            note += (
                f" (2x awscrt = {need:.1f} GB/s is beyond this CPU's {width} fold limit "
                f"{limit:.1f} GB/s: awscrt is at {100 * need / AWS_TARGET / limit:.0f}% of "
                "it, so no kernel can reach the target here)"
            )
        case.notes.append(note)
    case.notes += _limit_notes(case, limits)
    published = cpu_limits.crc_fast_published_gbps(size)
    if published:
        ours = statistics.median(case.samples[OURS])
        case.notes.append(
            f"crc-fast's published figure for {cpu_limits.cpu_class()} at {_fmt_size(size)} "
            f"(native Rust, bare metal): {published:.1f} GB/s; crcmerkle {ours / published:.2f}x "
            f"of it through a Python call, {_met(ours >= published)} (bench/kernel_rounds.py "
            "compares the kernel alone)"
        )
    return case


def _time_once(func: Callable[[], Any]) -> float:
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        func()
        return float(time.perf_counter_ns() - t0)
    finally:
        gc.enable()


def _cold_rounds(
    case: Case,
    runs: Dict[str, Callable[[], Any]],
    backends: Dict[str, Optional[str]],
    total: int,
    rounds: int,
) -> Case:
    for _ in range(rounds):
        order = list(runs)
        random.shuffle(order)
        for name in order:
            with Backend(backends.get(name)):
                case.add(name, total / _time_once(runs[name]))
    case.samples = {name: case.samples[name] for name in runs}
    return case


def cold_cases(
    rounds: int, total: int, window: int, data: Optional[bytes] = None
) -> Iterator[Case]:
    """One call over the whole cold buffer, then the same buffer in windows."""
    data = make_buffer(total, seed=7) if data is None else data
    impls = crc64_impls()
    backends = {i.name: i.backend for i in impls}
    whole = {i.name: (lambda f=i.func: f(data)) for i in impls}
    values = {}
    for name, run in whole.items():
        with Backend(backends.get(name)):
            values[name] = run()
    if len(set(values.values())) > 1:
        raise AssertionError(f"implementations disagree on the cold buffer: {values}")
    whole["plain read (limit)"] = lambda: read_probe(data)
    yield _cold_rounds(
        Case(f"crc64nvme {_fmt_size(total)} cold, one call", "GB/s"), whole, backends, total, rounds
    )

    mv = memoryview(data)

    def loop(impl: Impl) -> Callable[[], Any]:
        f = impl.func
        if impl.bytes_only:
            return lambda: [f(data[i : i + window]) for i in range(0, total, window)]
        return lambda: [f(mv[i : i + window]) for i in range(0, total, window)]

    runs: Dict[str, Callable[[], Any]] = {}
    if has_crc64():

        def native() -> Any:
            return merkle.checksum_windows(data, window, algorithm="crc64nvme")

        runs[OURS] = native
        for b in forced_backends():
            if b != "portable":  # the cold case is about memory; portable is not
                runs[f"{OURS} {b}"] = native
    peers = [i for i in impls if not i.name.startswith(OURS)]
    for impl in peers:
        runs[f"{impl.name} loop"] = loop(impl)
    reference = peers[0] if peers else (impls[0] if impls else None)
    if reference is None:
        return
    want = np.asarray(loop(reference)(), dtype=np.uint64)
    for name, run in runs.items():
        with Backend(backends.get(name) or _backend_of(name)):
            got = np.asarray(run(), dtype=np.uint64)
        if not np.array_equal(got, want):
            raise AssertionError(f"{name} disagrees with {reference.name} on the windows case")
    runs["plain read (limit)"] = lambda: read_probe(data)
    yield _cold_rounds(
        Case(
            f"checksum_windows crc64nvme {_fmt_size(window)} windows, {_fmt_size(total)} cold",
            "GB/s",
        ),
        runs,
        {n: _backend_of(n) for n in runs},
        total,
        rounds,
    )


def _backend_of(name: str) -> Optional[str]:
    """'crcmerkle avx2-vpclmulqdq' -> 'avx2-vpclmulqdq'; None for the others."""
    if name.startswith(OURS + " "):
        rest = name[len(OURS) + 1 :]
        return rest if rest in BACKENDS else None
    return None


def pair_case(
    data: Any,
    window: int,
    title: str,
    rounds: int,
    seconds: Optional[float],
    limits: Optional[cpu_limits.Limits] = None,
) -> Case:
    """The pair in one pass against the two calls in turn and each alone. seconds=None: cold
    (one pass per round); else hot (best of 5 batches per round)."""
    a, b = PAIR

    def pair(buf: Any) -> Any:
        return merkle.checksum_windows(buf, window, algorithm=PAIR)

    def one_after_other(buf: Any) -> Any:
        return (
            merkle.checksum_windows(buf, window, algorithm=a),
            merkle.checksum_windows(buf, window, algorithm=b),
        )

    def alone_a(buf: Any) -> Any:
        return merkle.checksum_windows(buf, window, algorithm=a)

    def alone_b(buf: Any) -> Any:
        return merkle.checksum_windows(buf, window, algorithm=b)

    got, want = pair(data), one_after_other(data)
    if len(got) != 2 or not all(np.array_equal(x, y) for x, y in zip(got, want)):
        raise AssertionError(f"the pair {PAIR} disagrees with the two calls")
    impls = [
        Impl("pair (one pass)", pair),
        Impl(f"{a} then {b}", one_after_other),
        Impl(f"{a} alone", alone_a),
        Impl(f"{b} alone", alone_b),
    ]
    case = Case(title, "GB/s")
    if seconds is None:
        _cold_rounds(
            case, {i.name: (lambda f=i.func: f(data)) for i in impls}, {}, len(data), rounds
        )
    else:
        _interleave(case, impls, data, rounds, seconds)
    s = case.samples
    slower = [min(x, y) for x, y in zip(s[f"{a} alone"], s[f"{b} alone"])]  # GB/s: min = slower
    r_slow = statistics.median(y / x for x, y in zip(s["pair (one pass)"], slower))
    r_seq = statistics.median(y / x for x, y in zip(s["pair (one pass)"], s[f"{a} then {b}"]))
    note = (
        f"pair time / slower alone = {r_slow:.2f} (target <= {PAIR_TARGET:g}: "
        f"{_met(r_slow <= PAIR_TARGET)}); pair time / one after the other = {r_seq:.2f}"
    )
    width = cpu_limits.BACKEND_WIDTH.get(merkle.backend())
    bound = limits.pair_bound(width) if limits and width and seconds is not None else None
    if bound:
        note += (
            f"; at this CPU's limits ({width} folds, crc32) one pass takes at least "
            f"{bound:.2f}x CRC-64/NVME alone"
        )
    case.notes.append(note)
    return case


def pair_cases(
    rounds: int,
    seconds: float,
    cold_data: Optional[bytes],
    cold_total: int,
    window: int,
    limits: Optional[cpu_limits.Limits] = None,
) -> Iterator[Any]:
    if not has_crc64():
        yield Text("pair: skipped, this build of crcmerkle has no crc64nvme")
        return
    for size in PAIR_HOT:
        yield pair_case(
            make_buffer(size, seed=size),
            window,
            f"pair {'+'.join(PAIR)} {_fmt_size(size)} hot in {_fmt_size(window)} windows",
            rounds,
            seconds,
            limits,
        )
    data = make_buffer(cold_total, seed=7) if cold_data is None else cold_data
    yield pair_case(
        data,
        window,
        f"pair {'+'.join(PAIR)} {_fmt_size(len(data))} cold in {_fmt_size(window)} windows",
        max(3, rounds // 2),
        None,
    )


def call64_case(rounds: int, seconds: float) -> Any:
    """A 64-byte crc64nvme call against a 64-byte crc32c call (and the CRC-64 peers)."""
    if not has_crc64():
        return Text("call64: skipped, this build of crcmerkle has no crc64nvme")
    payload = make_buffer(64, seed=64)
    impls = [i for i in crc64_impls() if i.backend is None]
    _check(impls, payload, "crc64nvme of 64 bytes")
    impls.insert(1, Impl(f"{OURS} crc32c", merkle.crc32c))
    case = _interleave(
        Case("call cost, 64 B: crc64nvme (crcmerkle) vs crc32c", "ns"),
        impls,
        payload,
        rounds,
        seconds,
    )
    r = per_round(case, OURS, f"{OURS} crc32c")  # ns per call: crc64nvme time / crc32c time
    each = [x / y for x, y in zip(case.samples[OURS], case.samples[f"{OURS} crc32c"])]
    case.notes.append(
        f"crc64nvme time / crc32c time = {r:.2f} (rounds {min(each):.2f}-"
        f"{max(each):.2f}; target <= 1: {_met(r <= 1.0)})"
    )
    return case


def limits_text(limits: cpu_limits.Limits) -> Text:
    cls = cpu_limits.cpu_class() or "unknown CPU class"
    return Text(f"{cls}: {limits.line()}")


CASES = ("limits", "crc64nvme", "cold", "pair", "call64")


def run_cases(
    cases: Sequence[str],
    rounds: int,
    seconds: float,
    cold_bytes: int,
    window: int = WINDOW,
    limits: Optional[cpu_limits.Limits] = None,
) -> Iterator[Any]:
    """Each case in turn (its implementations interleaved), as it finishes: objects with
    .line() (possibly several lines)."""
    limits = cpu_limits.limits() if limits is None else limits
    if "limits" in cases:
        yield limits_text(limits)
    if not has_crc64() and ("crc64nvme" in cases or "cold" in cases):
        yield Text("crcmerkle: this build has no crc64nvme; its CRC-64 cases time the peers only")
    if "crc64nvme" in cases:
        for size in HOT_SIZES:
            yield hot_case(size, rounds, seconds, limits)
    cold_data = None
    if "cold" in cases or "pair" in cases:
        cold_data = make_buffer(cold_bytes, seed=7)
    if "cold" in cases:
        yield from cold_cases(max(3, rounds // 2), cold_bytes, window, cold_data)
    if "pair" in cases:
        yield from pair_cases(rounds, seconds, cold_data, cold_bytes, window, limits)
    if "call64" in cases:
        yield call64_case(rounds, seconds)


def peer_versions() -> str:
    from importlib import metadata

    out = []
    for dist in ("awscrt", "crc64fast", "fastcrc"):
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist} not installed")
    return ", ".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--seconds",
        type=float,
        default=0.02,
        help="time per implementation per round in the hot cases",
    )
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--cold-mib", type=int, default=256)
    parser.add_argument("--window", type=int, default=WINDOW)
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(CASES)}")
    print(f"# {header(args.rounds)}", flush=True)
    print(f"# peers: {peer_versions()}", flush=True)
    note = bm.peer_note()
    if note:
        print(f"# {note}", flush=True)
    for case in run_cases(cases, args.rounds, args.seconds, args.cold_mib * MiB, args.window):
        print(case.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
