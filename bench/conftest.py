"""pytest-benchmark harness for crcmerkle vs its peers (see test_bench_crc.py).

Run:  python -m pytest bench --benchmark-enable -q        (full: a few minutes)
      BENCH_SHORT=1 python -m pytest bench -q             (short: well under 2 minutes)

pyproject's addopts carry --benchmark-disable (for tests/); this conftest turns benchmarking
back on for bench/ unless --benchmark-disable is given explicitly on the command line, so the
flag --benchmark-enable is optional here. Speed never fails a run; wrong checksums do.
At the end two tables are printed: the medians of interleaved rounds (test_bench_rounds.py,
the figures to quote on a shared machine) and the best round of each pytest-benchmark case.

Environment:
  BENCH_SHORT=1          shorter timings and fewer rounds
  BENCH_COLD_BYTES=SIZE  override the cold buffer of the windows case (e.g. 512MiB)
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List

import pytest

import merkle
from merkle.cli import benchmarking as bm

SHORT = os.environ.get("BENCH_SHORT", "").strip() not in ("", "0", "false", "no")
#: target wall time of one benchmark (rounds x iterations), seconds
HOT_SECONDS = 0.12 if SHORT else 0.8
HOT_ROUNDS = 7 if SHORT else 15
#: rounds of a cold case (a whole Spark job, or a pass over a buffer larger than the cache),
#: after its warm-up: the short pass (CI's) takes one, where each Spark round of the plan and
#: diff cases costs 5-10 s on a 2-core machine (the best of 2 cost CI a minute more; the
#: figures to quote come from the full pass)
COLD_ROUNDS = 1 if SHORT else 5

_RESULTS_KEY = pytest.StashKey[Dict[str, Dict[str, "Measured"]]]()
_INTERLEAVED_KEY = pytest.StashKey[List[str]]()


def cold_bytes() -> int:
    """A buffer much larger than the last-level cache, so each pass streams from DRAM."""
    env = os.environ.get("BENCH_COLD_BYTES")
    if env:
        return bm.parse_size(env)
    if not SHORT:
        return bm.GiB
    llc = bm.llc_bytes() or 32 * bm.MiB
    size = max(256 * bm.MiB, 2 * llc)
    size = min(size, bm.GiB)
    return -(-size // bm.MiB) * bm.MiB


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if "--benchmark-disable" not in config.invocation_params.args:
        config.option.benchmark_enable = True
    config.stash[_RESULTS_KEY] = {}
    config.stash[_INTERLEAVED_KEY] = []


def record_interleaved(config: pytest.Config, header: str, line: str) -> None:
    """A result line of test_bench_rounds.py, printed in the summary under the first header."""
    lines = config.stash[_INTERLEAVED_KEY]
    if not lines:
        lines.append(header)
    lines.append(line)


@dataclass
class Measured:
    case: str
    impl: str
    value: float  # GB/s, or ns
    unit: str  # "GB/s" (higher is better) or "ns/call", "ns/elem" (lower is better)

    @property
    def higher_is_better(self) -> bool:
        return self.unit == "GB/s"


class Bench:
    """Wraps pytest-benchmark's fixture: calibrated pedantic runs, extra_info, ratio table."""

    def __init__(self, benchmark: Any, config: pytest.Config) -> None:
        self.benchmark = benchmark
        self.config = config

    def _iterations(
        self, func: Callable[..., Any], args: tuple, seconds: float, rounds: int
    ) -> int:
        per_round = seconds / rounds
        t0 = time.perf_counter_ns()
        func(*args)  # also a warm-up
        one = max(time.perf_counter_ns() - t0, 1) / 1e9
        if one < per_round / 4:  # refine with a batch: the first call may have been cold
            batch = max(1, min(100000, int(per_round / 4 / one)))
            t0 = time.perf_counter_ns()
            for _ in range(batch):
                func(*args)
            one = max(time.perf_counter_ns() - t0, 1) / 1e9 / batch
        return max(1, int(per_round / one))

    def measure(
        self,
        func: Callable[..., Any],
        *,
        case: str,
        impl: str,
        args: tuple = (),
        nbytes: int = 0,
        per: int = 1,
        unit: str = "GB/s",
        cold: bool = False,
        warmup: int = 0,
    ) -> Any:
        """Benchmark func(*args); return its result for the correctness assert.

        Pass the implementation itself with args=(data,) rather than a lambda, so that no
        extra Python frame is timed (it matters at 64 B).
        nbytes: bytes processed per call (for GB/s); per: elements per call (for ns/elem).
        cold: one call per round, COLD_ROUNDS rounds, after `warmup` untimed calls (whole
        Spark jobs: the JVM's JIT keeps speeding them up over the first few runs).
        """
        self.benchmark.group = case
        if cold or getattr(self.benchmark, "disabled", False):
            rounds, iterations = COLD_ROUNDS, 1
        else:
            rounds = HOT_ROUNDS
            iterations = self._iterations(func, args, HOT_SECONDS, rounds)
            warmup = 1
        result = self.benchmark.pedantic(
            func, args=args, rounds=rounds, iterations=iterations, warmup_rounds=warmup
        )
        meta = getattr(self.benchmark, "stats", None)
        stats = getattr(meta, "stats", None)
        if stats is None:  # benchmarks disabled: the function ran once
            return result
        best_s = stats.min  # seconds per call, best round
        info = self.benchmark.extra_info
        info.update(case=case, implementation=impl, backend=merkle.backend())
        if unit == "GB/s":
            value = bm.gbps(nbytes, best_s * 1e9)
            info.update(
                gbps=round(value, 4), bytes_per_call=nbytes, ns_per_call=round(best_s * 1e9, 2)
            )
        elif unit == "ns/elem":
            value = best_s * 1e9 / per
            info.update(ns_per_element=round(value, 3), elements=per)
        else:
            value = best_s * 1e9
            info.update(ns_per_call=round(value, 2), bytes_per_call=nbytes)
        self.config.stash[_RESULTS_KEY].setdefault(case, {})[impl] = Measured(
            case, impl, value, unit
        )
        return result


@pytest.fixture
def bench(benchmark: Any, request: pytest.FixtureRequest) -> Bench:
    return Bench(benchmark, request.config)


def _fmt(m: Measured) -> str:
    if m.unit == "GB/s":
        return f"{m.value:.2f}"
    return f"{m.value:.1f}"


def ratio_lines(results: Dict[str, Dict[str, Measured]]) -> List[str]:
    lines = []
    for case, row in results.items():
        ours = row.get(bm.OURS)
        unit = next(iter(row.values())).unit
        parts = []
        if ours is not None:
            parts.append(f"{bm.OURS} {_fmt(ours)} {unit}")
        for name, m in row.items():
            if name == bm.OURS:
                continue
            if ours is not None and m.value > 0 and ours.value > 0:
                ratio = ours.value / m.value if m.higher_is_better else m.value / ours.value
                parts.append(f"{name} {_fmt(m)} ({ratio:.2f}x)")
            else:
                parts.append(f"{name} {_fmt(m)}")
        lines.append(f"{case}: " + " | ".join(parts))
    return lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    tr = terminalreporter
    interleaved = config.stash.get(_INTERLEAVED_KEY, [])
    if interleaved:
        tr.section("crcmerkle vs peers, interleaved rounds (the figures to quote)")
        for line in interleaved:
            tr.write_line(line)
    results = config.stash.get(_RESULTS_KEY, {})
    if not results:
        return
    tr.section("crcmerkle vs peers (ratio = how many times faster crcmerkle is)")
    tr.write_line(
        f"backend {merkle.backend()}; mode {'short' if SHORT else 'full'}; "
        f"cold buffer {bm.format_size(cold_bytes())}; best round of each benchmark"
    )
    for line in ratio_lines(results):
        tr.write_line(line)
    note = bm.peer_note()
    if note:
        tr.write_line(f"note: {note}")
