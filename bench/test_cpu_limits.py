"""The CPU-limit arithmetic the CRC-64/NVME benchmarks print (cpu_limits.py): no timing here."""

from __future__ import annotations

import pytest

import cpu_limits


def _info(vendor: str, family: int, model: int) -> dict:
    return {"vendor_id": vendor, "cpu family": str(family), "model": str(model)}


@pytest.mark.parametrize(
    "info, expected",
    [
        (_info("AuthenticAMD", 25, 1), "AMD Zen 3"),  # Milan
        (_info("AuthenticAMD", 25, 0x21), "AMD Zen 3"),  # Vermeer
        (_info("AuthenticAMD", 25, 17), "AMD Zen 4"),  # Genoa (this project's VM)
        (_info("AuthenticAMD", 25, 0x61), "AMD Zen 4"),  # Raphael
        (_info("AuthenticAMD", 26, 2), "AMD Zen 5"),
        (_info("GenuineIntel", 6, 143), "Intel Sapphire Rapids"),
        (_info("GenuineIntel", 6, 85), None),  # Skylake-SP: not in the table
        ({"vendor_id": "AuthenticAMD"}, None),  # no family/model (not x86 /proc)
    ],
)
def test_cpu_class(info, expected):
    assert cpu_limits.cpu_class(info) == expected


def test_fold_limit_and_pair_bound():
    zen4 = cpu_limits.Limits(3.5, {"xmm": 2.0, "ymm": 2.0, "zmm": 2.0}, "test", 1.0)
    assert zen4.bytes_per_cycle("zmm") == 16 and zen4.bytes_per_cycle("ymm") == 8
    assert zen4.gbps("zmm") == pytest.approx(56.0)
    assert zen4.widest() == "zmm"
    assert zen4.pair_bound("zmm") == pytest.approx(4 / 3)  # 2*16 / (16 + 8)
    assert zen4.pair_bound("ymm") == 1.0  # F = S: the crc32 unit hides CRC-32C entirely
    assert zen4.pair_bound("xmm") == 1.0  # never below CRC-64/NVME alone
    spr = cpu_limits.Limits(3.0, {"zmm": 1.0}, "test", 1.0)
    assert spr.pair_bound("zmm") == pytest.approx(1.6)
    unknown = cpu_limits.Limits(None, {}, "test")
    assert unknown.gbps("zmm") is None and unknown.pair_bound("zmm") is None
    assert unknown.widest() is None and "unknown" in unknown.line()


@pytest.mark.parametrize(
    "measured, snapped", [(2.0, 2.0), (2.08, 2.0), (1.93, 2.0), (0.52, 0.5), (2.3, 2.3), (1.0, 1.0)]
)
def test_snap(measured, snapped):
    assert cpu_limits._snap(measured) == pytest.approx(snapped)


def test_published_figures_only_for_known_classes(monkeypatch):
    monkeypatch.setattr(cpu_limits, "cpu_class", lambda info=None: "AMD Zen 4")
    assert cpu_limits.crc_fast_published_gbps(1 << 20) == pytest.approx(55 * 2**30 / 1e9)
    assert cpu_limits.crc_fast_published_gbps(4096) is None
    monkeypatch.setattr(cpu_limits, "cpu_class", lambda info=None: None)
    assert cpu_limits.crc_fast_published_gbps(1 << 20) is None
