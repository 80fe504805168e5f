"""Throughput measurement of crcmerkle against the installed peer packages (no CLI code here).

Shared by `crcmerkle bench` (merkle/cli/bench.py) and the pytest-benchmark suite in bench/, so
both compare against the same peer registry. Peers that are not installed are simply absent
from `implementations()`; `missing_peers()` names them so callers can say so.

Units: GB/s is 1e9 bytes per second.
"""

from __future__ import annotations

import gc
import importlib
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import merkle

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

#: Buffer sizes of the hot one-shot table (64 B .. 4 MiB).
DEFAULT_SIZES = (64, 512, 4 * KiB, 16 * KiB, 256 * KiB, 4 * MiB)
#: The windows case: a large buffer checksummed in fixed windows.
DEFAULT_WINDOWS_BYTES = 256 * MiB
DEFAULT_WINDOW = 16 * KiB

OURS = "crcmerkle"


@dataclass(frozen=True)
class Impl:
    """One checksum implementation: `func(data, value=0) -> int` for one algorithm."""

    name: str  # display name: the package as pip knows it ("google-crc32c")
    algorithm: str  # "crc32c", "crc32" or "crc64nvme"
    func: Callable[..., int]
    bytes_only: bool = False  # refuses memoryview/bytearray (google-crc32c): slices are copied

    @property
    def ours(self) -> bool:
        return self.name == OURS


@dataclass(frozen=True)
class _PeerSpec:
    name: str
    algorithm: str
    module: str
    attr: str
    bytes_only: bool = False
    hasher: bool = False  # attr is a hashlib-style constructor, not a one-shot function


# Peers we compare against, if installed (the `peers` extra), plus zlib for CRC-32.
_PEERS = (
    _PeerSpec("google-crc32c", "crc32c", "google_crc32c", "value", bytes_only=True),
    _PeerSpec("crc32c", "crc32c", "crc32c", "crc32c"),
    _PeerSpec("awscrt", "crc32c", "awscrt.checksums", "crc32c"),
    # fastcrc 0.5 wraps the crc-fast crate (AVX-512 VPCLMULQDQ where present); iscsi = CRC-32C
    _PeerSpec("fastcrc", "crc32c", "fastcrc.crc32", "iscsi"),
    _PeerSpec("zlib", "crc32", "zlib", "crc32"),
    _PeerSpec("isal", "crc32", "isal.isal_zlib", "crc32"),  # ISA-L
    _PeerSpec("zlib-ng", "crc32", "zlib_ng.zlib_ng", "crc32"),
    _PeerSpec("awscrt", "crc32", "awscrt.checksums", "crc32"),
    _PeerSpec("awscrt", "crc64nvme", "awscrt.checksums", "crc64nvme"),
    # crc64fast 0.1 binds the crc64fast-nvme crate: only a hasher whose update() takes bytes
    _PeerSpec("crc64fast", "crc64nvme", "crc64fast", "crc64fast", bytes_only=True, hasher=True),
)

#: Each algorithm's check value (the CRC of b"123456789"): a peer that gives another value
#: computes another CRC and is left out rather than timed.
CHECK_VALUES = {"crc32c": 0xE3069283, "crc32": 0xCBF43926, "crc64nvme": 0xAE8B14860A799888}


def _one_shot(new: Callable[[], Any]) -> Callable[[Any], int]:
    """A hashlib-style constructor as `func(data) -> int`: what a user of it writes (a new
    object per call; digest() is big-endian). Its timing includes this Python frame."""

    def func(data: Any) -> int:
        h = new()
        h.update(data)
        return int.from_bytes(h.digest(), "big")

    return func


_cache: Dict[str, Any] = {}


def _load() -> None:
    if "impls" in _cache:
        return
    impls: List[Impl] = [
        Impl(OURS, "crc32c", merkle.crc32c),
        Impl(OURS, "crc32", merkle.crc32),
    ]
    if hasattr(merkle, "crc64nvme"):
        impls.append(Impl(OURS, "crc64nvme", merkle.crc64nvme))
    missing: Dict[str, str] = {}
    for spec in _PEERS:
        try:
            module = importlib.import_module(spec.module)
            func = getattr(module, spec.attr)
            if spec.hasher:
                func = _one_shot(func)
            check = func(b"123456789")
        except ImportError as exc:
            missing[spec.name] = f"{type(exc).__name__}: {exc}"
            continue
        except Exception as exc:  # installed, but too old for this algorithm, or broken
            missing[f"{spec.name} ({spec.algorithm})"] = f"{type(exc).__name__}: {exc}"
            continue
        if check != CHECK_VALUES[spec.algorithm]:
            missing[f"{spec.name} ({spec.algorithm})"] = (
                f"computes another CRC: {spec.attr}(b'123456789') = {check:#x}, not "
                f"{CHECK_VALUES[spec.algorithm]:#x}"
            )
            continue
        impls.append(Impl(spec.name, spec.algorithm, func, spec.bytes_only))
    _cache["impls"] = impls
    _cache["missing"] = missing


def implementations(algorithm: str = "crc32c") -> List[Impl]:
    """crcmerkle first, then every installed peer for that algorithm."""
    _load()
    return [i for i in _cache["impls"] if i.algorithm == algorithm]


def has_ours(algorithm: str) -> bool:
    """Whether this build of crcmerkle computes the algorithm (crc64nvme is newer)."""
    return any(i.ours for i in implementations(algorithm))


def missing_peers() -> Dict[str, str]:
    """Peer packages that could not be imported (or compute another CRC) -> why."""
    _load()
    return dict(_cache["missing"])


def peer_note() -> Optional[str]:
    missing = missing_peers()
    if not missing:
        return None
    absent = sorted(name for name in missing if " (" not in name)
    broken = sorted(f"{name}: {why}" for name, why in missing.items() if " (" in name)
    notes = []
    if absent:
        notes.append(
            f"not installed (columns omitted): {', '.join(absent)}; pip install 'crcmerkle[peers]'"
        )
    if broken:
        notes.append(f"left out: {'; '.join(broken)}")
    return "; ".join(notes)


# ---------------------------------------------------------------------------------------------
# helpers

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'64' -> 64, '4K'/'4KiB'/'4kb' -> 4096, '4MiB' -> 4194304 (binary units)."""
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (examples: 64, 4KiB, 16K, 4MiB)")
    number, unit = int(m.group(1)), m.group(2).lower()
    return number * {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1024 * GiB}[unit]


def format_size(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def make_buffer(size: int, seed: int = 0) -> bytes:
    """Deterministic pseudo-random bytes (content does not change CRC speed; it keeps the
    comparison honest against kernels with shortcuts for zeros)."""
    if size <= 0:
        return b""
    try:
        import numpy as np

        return np.random.default_rng(seed).bytes(size)
    except ImportError:  # pragma: no cover - numpy is a dependency
        import random

        return random.Random(seed).randbytes(size)


def llc_bytes() -> Optional[int]:
    """Size of the last-level cache as Linux reports it, or None."""
    import glob

    best = None
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                size = parse_size(f.read().strip())
        except (OSError, ValueError):
            continue
        best = size if best is None else max(best, size)
    return best


# ---------------------------------------------------------------------------------------------
# timing


def time_calls(
    func: Callable[..., Any], seconds: float = 0.2, runs: int = 5, args: tuple = ()
) -> float:
    """Best (smallest) nanoseconds per call of func(*args), over `runs` runs of about
    seconds/runs each. Hot: func repeats the same work. GC is off while timing.
    With one argument the loop calls func(arg) directly (no wrapper frame in the timing)."""
    if len(args) == 1:
        (arg,) = args
        inner = func

        def batch(reps: int) -> None:
            for _ in range(reps):
                inner(arg)
    else:

        def batch(reps: int) -> None:
            for _ in range(reps):
                func(*args)

    seconds = max(float(seconds), 1e-4)
    runs = max(int(runs), 1)
    per_run_ns = seconds * 1e9 / runs
    perf = time.perf_counter_ns
    # calibrate: grow the repetition count until one batch takes >= ~1/10 of a run
    target = per_run_ns / 10
    reps = 1
    while True:
        t0 = perf()
        batch(reps)
        elapsed = perf() - t0
        if elapsed >= target or reps >= 1 << 30:
            break
        if elapsed <= 0:
            reps *= 10
        else:
            reps = min(reps * 100, max(reps * 2, int(reps * target / elapsed) + 1))
    reps = max(1, int(reps * per_run_ns / max(elapsed, 1)))
    best = None
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):
            t0 = perf()
            batch(reps)
            ns = (perf() - t0) / reps
            best = ns if best is None else min(best, ns)
    finally:
        if gc_was_enabled:
            gc.enable()
    assert best is not None, "runs >= 1"
    return float(best)


def gbps(nbytes: int, ns: float) -> float:
    """bytes per nanosecond == GB/s (1e9 B/s)."""
    return nbytes / ns if ns > 0 else float("inf")


# ---------------------------------------------------------------------------------------------
# the cases


def windows_loop(impl: Impl, data: bytes, window: int) -> Callable[[], List[int]]:
    """What a Python user writes today: one call per window over memoryview slices
    (bytes slices, i.e. a copy each, for peers that refuse memoryview)."""
    func = impl.func
    n = len(data)
    if impl.bytes_only:

        def run() -> List[int]:
            return [func(data[i : i + window]) for i in range(0, n, window)]
    else:
        mv = memoryview(data)

        def run() -> List[int]:
            return [func(mv[i : i + window]) for i in range(0, n, window)]

    return run


def windows_native(data: bytes, window: int, algorithm: str = "crc32c") -> Callable[[], Any]:
    """crcmerkle's one-call answer to the same job."""

    def run():
        return merkle.checksum_windows(data, window, algorithm=algorithm)

    return run


@dataclass
class Result:
    case: str  # "crc32c", "crc32", "windows"
    impl: str
    size: int  # bytes per call (one-shot) or window size
    total: int  # bytes processed per timed call
    ns: float  # ns per timed call
    note: str = ""

    @property
    def gbps(self) -> float:
        return gbps(self.total, self.ns)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "case": self.case,
            "implementation": self.impl,
            "size": self.size,
            "bytes_per_call": self.total,
            "ns_per_call": round(self.ns, 3),
            "gbps": round(self.gbps, 4),
            "note": self.note,
        }


def check_same(impls: Sequence[Impl], data: bytes) -> None:
    """Refuse to report speed for an implementation that computes a different checksum."""
    values = {i.name: i.func(data) for i in impls}
    if len(set(values.values())) > 1:
        raise AssertionError(f"implementations disagree on {len(data)} bytes: {values}")


def bench_one_shot(
    algorithm: str,
    sizes: Sequence[int],
    seconds: float = 0.2,
    runs: int = 5,
    impls: Optional[Sequence[Impl]] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> List[Result]:
    """Hot throughput of one call per buffer, for each implementation and size."""
    impls = list(impls) if impls is not None else implementations(algorithm)
    results = []
    for size in sizes:
        data = make_buffer(size, seed=size)
        check_same(impls, data)
        for impl in impls:
            if progress:
                progress(f"{algorithm} {format_size(size)} {impl.name}")
            ns = time_calls(impl.func, seconds, runs, args=(data,))
            results.append(Result(algorithm, impl.name, size, size, ns))
    return results


def bench_windows(
    total: int = DEFAULT_WINDOWS_BYTES,
    window: int = DEFAULT_WINDOW,
    seconds: float = 0.5,
    runs: int = 3,
    algorithm: str = "crc32c",
    impls: Optional[Sequence[Impl]] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> List[Result]:
    """A `total`-byte buffer in `window`-byte windows: checksum_windows vs Python loops."""
    impls = list(impls) if impls is not None else implementations(algorithm)
    data = make_buffer(total, seed=1)
    expected = windows_native(data, window, algorithm)()
    results = []
    for impl in impls:
        if progress:
            progress(f"windows {format_size(window)} {impl.name}")
        if impl.ours:
            run = windows_native(data, window, algorithm)
            note = "checksum_windows"
        else:
            run = windows_loop(impl, data, window)
            note = "Python loop, bytes slices" if impl.bytes_only else "Python loop, memoryview"
            got = run()
            if list(got) != expected.tolist():
                raise AssertionError(f"{impl.name} disagrees with checksum_windows")
        ns = time_calls(run, seconds, runs)
        results.append(Result("windows", impl.name, window, total, ns, note))
    return results


# ---------------------------------------------------------------------------------------------
# reporting


def _columns(results: Sequence[Result]) -> List[str]:
    names: List[str] = []
    for r in results:
        if r.impl not in names:
            names.append(r.impl)
    names.sort(key=lambda n: n != OURS)  # ours first
    return names


def ratio_vs_best_peer(row: Dict[str, Result]) -> Optional[float]:
    ours = row.get(OURS)
    peers = [r.gbps for name, r in row.items() if name != OURS]
    if ours is None or not peers:
        return None
    return ours.gbps / max(peers)


def format_table(results: Sequence[Result], title: str) -> str:
    """A text table: one row per size, GB/s per implementation, ours / best peer."""
    if not results:
        return ""
    cols = _columns(results)
    rows: Dict[int, Dict[str, Result]] = {}
    for r in results:
        rows.setdefault(r.size, {})[r.impl] = r
    label = "window" if results[0].case == "windows" else "size"
    header = [label] + cols + ["ours/best peer"]
    lines = [header]
    for size, row in rows.items():
        cells = [format_size(size)]
        for c in cols:
            cells.append(f"{row[c].gbps:.2f}" if c in row else "-")
        ratio = ratio_vs_best_peer(row)
        cells.append(f"{ratio:.2f}x" if ratio is not None else "-")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [title]
    for n, line in enumerate(lines):
        out.append(
            "  ".join(
                cell.rjust(w) if i else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(line, widths))
            ).rstrip()
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def plot(results: Sequence[Result], path: str, title: str = "crcmerkle vs peers") -> None:
    """Save GB/s vs buffer size (log x) for the one-shot cases. Needs matplotlib (`plot` extra);
    raises ImportError with an install hint if it is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'crcmerkle[plot]'") from exc
    series: Dict[str, List[Result]] = {}
    for r in results:
        if r.case in ("crc32c", "crc32"):
            series.setdefault(f"{r.case}: {r.impl}", []).append(r)
    fig, ax = plt.subplots(figsize=(8, 5))
    try:
        for label, rs in series.items():
            rs = sorted(rs, key=lambda r: r.size)
            style = "-" if OURS in label else "--"
            ax.plot([r.size for r in rs], [r.gbps for r in rs], style, marker="o", label=label)
        ax.set_xscale("log", base=2)
        sizes = sorted({r.size for rs in series.values() for r in rs})
        if sizes:
            ax.set_xticks(sizes)
            ax.set_xticklabels([format_size(s) for s in sizes], fontsize="small")
            ax.minorticks_off()
        ax.set_xlabel("buffer size (bytes, data hot in cache)")
        ax.set_ylabel("GB/s (1e9 B/s)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)


__all__ = [
    "CHECK_VALUES",
    "DEFAULT_SIZES",
    "DEFAULT_WINDOW",
    "DEFAULT_WINDOWS_BYTES",
    "Impl",
    "OURS",
    "Result",
    "bench_one_shot",
    "bench_windows",
    "check_same",
    "format_size",
    "format_table",
    "gbps",
    "has_ours",
    "implementations",
    "llc_bytes",
    "make_buffer",
    "missing_peers",
    "parse_size",
    "peer_note",
    "plot",
    "ratio_vs_best_peer",
    "time_calls",
    "windows_loop",
    "windows_native",
]
