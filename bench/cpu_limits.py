"""The physical limit of CRC-64/NVME on the CPU in front of us: the carry-less multiply rate.

CRC-64/NVME has no scalar instruction on x86 or ARM: it is folding only, and every 16-byte lane
of a fold costs two carry-less multiplies. So a register of W bytes folds W bytes per two
VPCLMULQDQ, and the limit per core is W / (2 x cycles per VPCLMULQDQ) bytes per cycle, times the
core clock. Both are measured by bench/uarch_probe.c (`--limits`), compiled here with the
system's C compiler into a temporary directory (cycles counted against a chain of dependent adds
in the same run, so turbo and the TSC frequency do not matter). Without a compiler, or on a
CPU that is not x86, the table below (the same probe's figures on the CPUs this project has
seen) and /proc/cpuinfo's clock stand in, and the output says so.

    python bench/cpu_limits.py
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
WIDTH_BYTES = {"xmm": 16, "ymm": 32, "zmm": 64}
#: which register width each of our x86 backends folds CRC-64/NVME with
BACKEND_WIDTH = {"avx512-vpclmulqdq": "zmm", "avx2-vpclmulqdq": "ymm", "pclmulqdq": "xmm"}

# cycles per VPCLMULQDQ (throughput) by register width, from bench/uarch_probe.c on these CPUs
# (Zen 3 2026-11-23, Zen 4 2026-11-27); Sapphire Rapids from Intel's port 5 figure (1 per cycle
# at every width), not probed here.
# ("crc32": cycles per 64-bit crc32, 1 on all three)
KNOWN: Dict[str, Dict[str, float]] = {
    "AMD Zen 3": {"xmm": 2.0, "ymm": 2.0, "crc32": 1.0},
    "AMD Zen 4": {"xmm": 2.0, "ymm": 2.0, "zmm": 2.0, "crc32": 1.0},
    "Intel Sapphire Rapids": {"xmm": 1.0, "ymm": 1.0, "zmm": 1.0, "crc32": 1.0},
}

# crc-fast 1.10's published CRC-64/NVME figures (GiB/s, hot, native calls, bare metal) for the
# same CPU class: the AVX-512 target is "no slower than these" (issue 26).
CRC_FAST_GIBS: Dict[str, Dict[int, float]] = {
    "AMD Zen 4": {1024: 22.0, 1024 * 1024: 55.0},
    "Intel Sapphire Rapids": {1024: 28.0, 1024 * 1024: 88.0},
}


def _cpuinfo() -> Dict[str, str]:
    info: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first CPU is enough
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


def cpu_class(info: Optional[Dict[str, str]] = None) -> Optional[str]:
    """'AMD Zen 3', 'AMD Zen 4', 'AMD Zen 5', 'Intel Sapphire Rapids', ... or None."""
    info = _cpuinfo() if info is None else info
    try:
        family, model = int(info.get("cpu family", "")), int(info.get("model", ""))
    except ValueError:
        return None
    vendor = info.get("vendor_id", "")
    if vendor == "AuthenticAMD" and family == 25:
        if model <= 0x0F or 0x20 <= model <= 0x5F:
            return "AMD Zen 3"
        return "AMD Zen 4"  # 0x10-0x1F Genoa, 0x60-0x7F Raphael/Phoenix, 0xA0-0xAF Bergamo
    if vendor == "AuthenticAMD" and family == 26:
        return "AMD Zen 5"
    if vendor == "GenuineIntel" and family == 6:
        return {
            143: "Intel Sapphire Rapids",
            207: "Intel Emerald Rapids",
            173: "Intel Granite Rapids",
            106: "Intel Ice Lake-SP",
        }.get(model)
    return None


@dataclass
class Limits:
    ghz: Optional[float]
    clmul_cycles: Dict[str, float] = field(default_factory=dict)  # width -> cycles per insn
    source: str = ""  # how the figures were obtained
    crc32_cycles: Optional[float] = None  # per 64-bit crc32 instruction (throughput)

    def pair_bound(self, width: str) -> Optional[float]:
        """The least time of CRC-32C + CRC-64/NVME in one pass over the time of CRC-64/NVME
        alone, at the limits: CRC-64/NVME needs the multiplier for all the bytes (F bytes per
        cycle); CRC-32C can split its bytes between the multiplier and the crc32 unit (S bytes
        per cycle), so B bytes of both take at least 2B / (F + S) cycles, and never less than
        the B / F of CRC-64/NVME alone: max(1, 2F / (F + S)). 1.0 where F <= S (ymm on Zen 3,
        xmm anywhere), 1.33 for zmm on Zen 4, 1.6 on Sapphire Rapids: the wider the
        multiplier, the less the crc32 unit can hide."""
        fold = self.bytes_per_cycle(width)
        if not fold or not self.crc32_cycles:
            return None
        scalar = 8.0 / self.crc32_cycles
        return max(1.0, 2 * fold / (fold + scalar))

    def bytes_per_cycle(self, width: str) -> Optional[float]:
        cycles = self.clmul_cycles.get(width)
        if not cycles:
            return None
        return WIDTH_BYTES[width] / (2.0 * cycles)

    def gbps(self, width: str) -> Optional[float]:
        bpc = self.bytes_per_cycle(width)
        return bpc * self.ghz if bpc and self.ghz else None

    def widest(self) -> Optional[str]:
        for width in ("zmm", "ymm", "xmm"):
            if width in self.clmul_cycles:
                return width
        return None

    def line(self) -> str:
        parts = []
        for width in ("zmm", "ymm", "xmm"):
            bpc = self.bytes_per_cycle(width)
            if bpc is None:
                continue
            gb = self.gbps(width)
            parts.append(
                f"{width} {bpc:.1f} B/cycle ({self.clmul_cycles[width]:.2f} cycles "
                f"per VPCLMULQDQ)" + (f" = {gb:.1f} GB/s" if gb else "")
            )
        clock = f"{self.ghz:.2f} GHz" if self.ghz else "clock unknown"
        text = f"CRC-64/NVME fold limit per core ({self.source}; {clock}): " + (
            ", ".join(parts) if parts else "unknown"
        )
        if self.crc32_cycles:
            text += f"; crc32 {8 / self.crc32_cycles:.1f} B/cycle"
        return text


def _snap(cycles: float) -> float:
    """The probe measures 2.000 for an instruction that takes 2 cycles; a reading within 5%
    of a half cycle (a preempted best run) is snapped to it, so one noisy run does not move
    the limit; a reading further off is kept as it is."""
    half = round(cycles * 2) / 2
    return half if half > 0 and abs(cycles - half) <= 0.05 * half else cycles


def probe(timeout: float = 60.0) -> Optional[Limits]:
    """Run bench/uarch_probe.c --limits (compiled now); None if that cannot be done here."""
    if platform.machine() not in ("x86_64", "AMD64", "i686"):
        return None
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    src = os.path.join(HERE, "uarch_probe.c")
    if not cc or not os.path.exists(src):
        return None
    with tempfile.TemporaryDirectory(prefix="crcmerkle-probe.") as tmp:
        exe = os.path.join(tmp, "uarch_probe")
        try:
            subprocess.run(
                [cc, "-O2", src, "-o", exe], check=True, capture_output=True, timeout=timeout
            )
            out = subprocess.run(
                [exe, "--limits"], check=True, capture_output=True, text=True, timeout=timeout
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    values: Dict[str, float] = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        try:
            values[name] = float(value)
        except ValueError:
            continue
    if "ghz" not in values:
        return None
    cycles = {w: _snap(values[w]) for w in WIDTH_BYTES if values.get(w)}
    crc32 = _snap(values["crc32"]) if values.get("crc32") else None
    return Limits(values["ghz"], cycles, "measured by bench/uarch_probe.c", crc32)


def _cpuinfo_ghz(info: Dict[str, str]) -> Optional[float]:
    try:
        return float(info["cpu MHz"]) / 1000
    except (KeyError, ValueError):
        return None


def limits() -> Limits:
    """Measured if possible, else the table for a known CPU class, else unknown."""
    measured = probe()
    if measured is not None:
        return measured
    info = _cpuinfo()
    known = KNOWN.get(cpu_class(info) or "")
    flags = set(info.get("flags", "").split())
    if known:
        cycles = {w: c for w, c in known.items() if w in WIDTH_BYTES}
        if "avx512f" not in flags:  # a VM may hide AVX-512 from a CPU that has it
            cycles.pop("zmm", None)
        return Limits(
            _cpuinfo_ghz(info),
            cycles,
            "table for this CPU class, clock from /proc/cpuinfo (nominal; no C "
            "compiler to measure it)",
            known.get("crc32"),
        )
    return Limits(_cpuinfo_ghz(info), {}, "unknown CPU class and nothing to measure with")


def crc_fast_published_gbps(size: int) -> Optional[float]:
    """crc-fast's published CRC-64/NVME GB/s (1e9) at this size for this CPU class, if any."""
    table = CRC_FAST_GIBS.get(cpu_class() or "", {})
    gib = table.get(size)
    return gib * 1024**3 / 1e9 if gib else None


def main() -> int:
    info = _cpuinfo()
    print(f"{info.get('model name', platform.processor())}: {cpu_class(info) or 'unknown class'}")
    print(limits().line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
