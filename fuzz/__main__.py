"""`python -m fuzz TARGET` runs one fuzz target (kernels, tree, blockmeta, diff) for a bounded
time.

    python -m fuzz kernels --time 600                    # long campaign (atheris if installed)
    python -m fuzz tree --runs 20000 --engine builtin    # bounded, no extra package needed
    python -m fuzz blockmeta --replay crash-1234         # re-run saved inputs
    python -m fuzz tree --time 60 -- -rss_limit_mb=1024  # extra libFuzzer flags (atheris)

Engines: `atheris` is libFuzzer (coverage-guided over the instrumented Python code of
merkle and the targets; the C core is not instrumented without clang) with the corpus kept in
build/fuzz-corpus/TARGET; `builtin` is a seeded mutation loop (bit flips, interesting values,
inserts, deletes, splices) that needs nothing but the standard library. `auto` (default)
picks atheris when it imports. Seeds: fuzz/seeds/TARGET/* plus each target's own.

On a failing input both engines save it (atheris: build/fuzz-crashes/TARGET/crash-*,
builtin: build/fuzz-crashes/TARGET/builtin-*) and exit non-zero. The builtin engine prints
one line `fuzz: TARGET builtin: N execs in S s (R/s), 0 failures` and, with --report,
writes the same as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
SEEDS = Path(__file__).resolve().parent / "seeds"
TARGETS = ("kernels", "tree", "blockmeta", "diff")
MAX_LEN = 1 << 16

Target = Callable[[bytes], None]


def load_target(name: str, instrument: bool) -> Tuple[Target, List[bytes]]:
    """The target function and its built-in seeds; under atheris, import merkle and the
    targets with coverage instrumentation (only works before anything imported merkle)."""

    def _import() -> Tuple[Target, List[bytes]]:
        if name == "kernels":
            from fuzz import fuzz_kernels as k

            bad = os.environ.get("FUZZ_SELFTEST")
            if bad:
                k.SELFTEST_BAD_LENGTH = int(bad)
            return k.target, k.seeds()
        if name == "diff":
            from fuzz import fuzz_diff as d

            return d.target_diff, d.seeds_diff()
        from fuzz import fuzz_parsers as p

        if name == "tree":
            return p.target_tree, p.seeds_tree()
        return p.target_blockmeta, p.seeds_blockmeta()

    if instrument:
        import atheris

        with atheris.instrument_imports(include=["merkle", "fuzz"]):
            return _import()
    return _import()


def seed_files(name: str) -> List[bytes]:
    d = SEEDS / name
    return [p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()] if d.is_dir() else []


# ---- the built-in engine ----------------------------------------------------------------

INTERESTING = (
    b"\x00",
    b"\x01",
    b"\x7f",
    b"\x80",
    b"\xff",
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
    b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x00",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x00\x00\x00\x00\x00\x00\x00\x01",
)


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        pos = rng.randrange(len(buf) + 1)
        if op == 0 and buf:  # flip a bit
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:  # random byte
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif op == 2:  # interesting value (varint edges, int32/64 edges) overwritten
            v = rng.choice(INTERESTING)
            buf[pos : pos + len(v)] = v
        elif op == 3:  # insert random bytes
            buf[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 4 and buf:  # delete a range
            end = min(len(buf), pos + rng.randint(1, 32))
            del buf[pos:end]
        elif op == 5 and buf:  # duplicate a range (repeated fields / records)
            a = rng.randrange(len(buf))
            b = min(len(buf), a + rng.randint(1, 64))
            buf[pos:pos] = buf[a:b]
        elif op == 6 and corpus:  # splice with another input
            other = rng.choice(corpus)
            cut = rng.randrange(len(other) + 1)
            buf = buf[:pos] + bytearray(other[cut:])
        elif op == 7 and buf:  # truncate
            del buf[rng.randrange(len(buf)) :]
        elif op == 8 and buf:  # add a small delta to a byte (lengths, counts)
            i = rng.randrange(len(buf))
            buf[i] = (buf[i] + rng.choice((-2, -1, 1, 2))) & 0xFF
    return bytes(buf[:MAX_LEN])


def _save(name: str, prefix: str, data: bytes) -> Path:
    d = ROOT / "build" / "fuzz-crashes" / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{prefix}-{hashlib.sha1(data).hexdigest()}"
    path.write_bytes(data)
    return path


def run_builtin(
    name: str,
    target: Target,
    seeds: List[bytes],
    runs: Optional[int],
    seconds: Optional[float],
    seed: int,
    timeout: float,
) -> dict:
    rng = random.Random(seed)
    corpus = list(seeds) or [b""]
    queue = list(corpus)  # the seeds run unmutated first
    execs = 0
    slowest = 0.0
    t0 = time.monotonic()
    failure = None
    while True:
        if runs is not None and execs >= runs:
            break
        if seconds is not None and time.monotonic() - t0 >= seconds:
            break
        data = queue.pop() if queue else mutate(rng, rng.choice(corpus), corpus)
        start = time.monotonic()
        try:
            target(data)
        except Exception:  # any exception escaping a target is a finding
            path = _save(name, "builtin", data)
            failure = {"input": str(path), "traceback": traceback.format_exc()}
            execs += 1
            break
        took = time.monotonic() - start
        slowest = max(slowest, took)
        execs += 1
        if took > timeout:
            path = _save(name, "slow", data)
            failure = {"input": str(path), "traceback": f"took {took:.1f} s > {timeout} s"}
            break
        if rng.random() < 0.02 and len(corpus) < 2000:
            corpus.append(data)  # no coverage signal: keep a random sample to go deeper
    elapsed = time.monotonic() - t0
    return {
        "target": name,
        "engine": "builtin",
        "execs": execs,
        "seconds": round(elapsed, 3),
        "execs_per_second": round(execs / elapsed, 1) if elapsed else 0.0,
        "slowest_seconds": round(slowest, 4),
        "failures": 0 if failure is None else 1,
        "failure": failure,
        "seed": seed,
    }


# ---- atheris ------------------------------------------------------------------------------


def run_atheris(
    name: str,
    target: Target,
    seeds: List[bytes],
    runs: Optional[int],
    seconds: Optional[float],
    timeout: float,
    extra: List[str],
) -> None:
    import atheris

    corpus = ROOT / "build" / "fuzz-corpus" / name
    corpus.mkdir(parents=True, exist_ok=True)
    for s in seeds:  # the targets' own seeds join the corpus (content-named, idempotent)
        (corpus / f"seed-{hashlib.sha1(s).hexdigest()}").write_bytes(s)
    crashes = ROOT / "build" / "fuzz-crashes" / name
    crashes.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.argv[0],
        str(corpus),
        f"-artifact_prefix={crashes}/",
        f"-timeout={int(max(1, timeout))}",
        f"-max_len={MAX_LEN}",
        "-rss_limit_mb=3072",
        "-print_final_stats=1",
    ]
    if (SEEDS / name).is_dir():
        argv.insert(2, str(SEEDS / name))
    if runs is not None:
        argv.append(f"-runs={runs}")
    if seconds is not None:
        argv.append(f"-max_total_time={int(max(1, seconds))}")
    atheris.Setup(argv + extra, target)
    atheris.Fuzz()  # exits the process: 0 when the budget is spent, non-zero on a finding


def main(argv: Optional[Sequence[str]] = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in args_in:
        cut = args_in.index("--")
        args_in, extra = args_in[:cut], args_in[cut + 1 :]
    ap = argparse.ArgumentParser(
        prog="python -m fuzz",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("target", choices=TARGETS)
    ap.add_argument("--engine", choices=("auto", "atheris", "builtin"), default="auto")
    ap.add_argument("--runs", type=int, default=None, help="stop after N executions")
    ap.add_argument("--time", type=float, default=None, help="stop after SECONDS")
    ap.add_argument("--seed", type=int, default=0, help="builtin engine's random seed")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-input limit (s)")
    ap.add_argument("--replay", nargs="+", metavar="FILE", help="run these inputs and stop")
    ap.add_argument("--report", metavar="FILE.json", help="builtin: write the stats as JSON")
    args = ap.parse_args(args_in)
    if args.runs is None and args.time is None and not args.replay:
        args.time = 60.0
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "builtin"
    if args.replay:
        engine = "builtin"
    target, own_seeds = load_target(args.target, instrument=engine == "atheris")
    seeds = seed_files(args.target) + own_seeds
    if args.replay:
        bad = 0
        for f in args.replay:
            try:
                target(Path(f).read_bytes())
                print(f"{f}: ok")
            except Exception:
                bad += 1
                print(f"{f}: FAILED\n{traceback.format_exc()}")
        return 1 if bad else 0
    if engine == "atheris":
        run_atheris(args.target, target, seeds, args.runs, args.time, args.timeout, extra)
        return 0  # not reached: atheris exits
    stats = run_builtin(args.target, target, seeds, args.runs, args.time, args.seed, args.timeout)
    print(
        f"fuzz: {args.target} builtin: {stats['execs']} execs in {stats['seconds']} s "
        f"({stats['execs_per_second']}/s), {stats['failures']} failures",
        flush=True,
    )
    if stats["failure"]:
        print(stats["failure"]["traceback"], file=sys.stderr)
        print(f"fuzz: failing input saved to {stats['failure']['input']}", file=sys.stderr)
    if args.report:
        Path(args.report).write_text(json.dumps(stats, indent=1) + "\n")
    return 1 if stats["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
