"""crcmerkle's CRC-64/NVME and CRC-32C kernels timed natively (bench/kernel_rounds.c), every
backend this CPU runs, against the CPU's fold limit and crc-fast's published figures.

The Python benchmarks pay a call (~35 ns) that native published figures do not; this is the
like-for-like comparison with them. csrc/ is compiled here (each kernel file with its own ISA
flags, as setup.py does) into a temporary directory: about a minute on 2 busy cores. x86 only.

    python bench/kernel_rounds.py [--rounds 11]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

import cpu_limits

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(os.path.dirname(HERE), "csrc")
# setup.py's X86_KERNELS: kernel file suffix -> its ISA flags (only that file gets them)
X86_FLAGS = {
    "sse42": ["-msse4.2"],
    "pclmul": ["-msse4.2", "-mpclmul"],
    "avx2": ["-msse4.2", "-mpclmul", "-mavx2", "-mvpclmulqdq"],
    "avx512": ["-msse4.2", "-mpclmul", "-mavx512f", "-mavx512vl", "-mavx512bw", "-mvpclmulqdq"],
}
BASE = ["-std=c11", "-O3", "-w"]


def build(tmp: str) -> str:
    """Compile csrc's CRC files and the harness; return the executable's path."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler (cc) on PATH")
    macros = [f"-DCRCM_HAVE_{s.upper()}=1" for s in X86_FLAGS]
    jobs: List[Tuple[str, List[str]]] = []
    for name in sorted(os.listdir(CSRC)):
        stem, ext = os.path.splitext(name)
        if ext != ".c" or not stem.startswith("crc_") or stem.endswith("_arm64"):
            continue
        suffix = stem.rsplit("_", 1)[-1]
        jobs.append((os.path.join(CSRC, name), X86_FLAGS.get(suffix, [])))
    jobs.append((os.path.join(HERE, "kernel_rounds.c"), []))

    def compile_one(job: Tuple[str, List[str]]) -> str:
        src, flags = job
        obj = os.path.join(tmp, os.path.basename(src) + ".o")
        subprocess.run(
            [cc, *BASE, *macros, *flags, "-I", CSRC, "-c", src, "-o", obj],
            check=True,
            capture_output=True,
        )
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objs = list(pool.map(compile_one, jobs))
    exe = os.path.join(tmp, "kernel_rounds")
    subprocess.run([cc, *objs, "-o", exe], check=True, capture_output=True)
    return exe


def run(rounds: int) -> Dict[Tuple[str, str, int], float]:
    with tempfile.TemporaryDirectory(prefix="crcmerkle-kernels.") as tmp:
        out = subprocess.run(
            [build(tmp), str(rounds)], check=True, capture_output=True, text=True
        ).stdout
    figures = {}
    for line in out.splitlines():
        crc, backend, size, gbps = line.split()
        figures[(crc, backend, int(size))] = float(gbps)
    return figures


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def table(figures: Dict[Tuple[str, str, int], float], limits: cpu_limits.Limits) -> List[str]:
    lines = []
    for crc in ("crc64nvme", "crc32c"):
        backends = list(dict.fromkeys(b for c, b, _ in figures if c == crc))
        sizes = sorted({s for c, _, s in figures if c == crc})
        lines.append(
            f"{crc}, GB/s per backend (C, no Python call"
            + ("; % of that backend's fold limit" if crc == "crc64nvme" else "")
            + ")"
        )
        for size in sizes:
            cells = []
            for b in backends:
                g = figures[(crc, b, size)]
                width = cpu_limits.BACKEND_WIDTH.get(b)
                limit = limits.gbps(width) if width and crc == "crc64nvme" else None
                cells.append(f"{b} {g:.2f}" + (f" ({100 * g / limit:.0f}%)" if limit else ""))
            text = f"  {_size(size)}: " + " | ".join(cells)
            published = cpu_limits.crc_fast_published_gbps(size) if crc == "crc64nvme" else None
            if published:
                best = max(figures[(crc, b, size)] for b in backends)
                text += (
                    f" | crc-fast published {published:.1f} "
                    f"(best backend {best / published:.2f}x of it)"
                )
            lines.append(text)
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args(argv)
    if platform.machine() not in ("x86_64", "AMD64"):
        print("kernel_rounds: x86-64 only")
        return 2
    limits = cpu_limits.limits()
    print(f"# {cpu_limits.cpu_class() or 'unknown CPU class'}; {limits.line()}", flush=True)
    try:
        figures = run(args.rounds)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        print(f"kernel_rounds: could not build or run: {exc} {detail.strip()[:500]}")
        return 2
    for line in table(figures, limits):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
