"""The headline ratios, measured with crcmerkle and its peers interleaved round by round.

pytest-benchmark times one implementation after another, so on a shared machine whose speed
drifts the peers of one case are measured on different machines. These cases (from
crc_rounds.py) time every implementation once per round in a shuffled order and report the
median of the per-round ratios; the lines are printed in the summary at the end. Each case
checks that every implementation gives the same checksums; none asserts speed.
"""

from __future__ import annotations

import pytest

import crc_rounds
from conftest import SHORT, cold_bytes, record_interleaved

ROUNDS = 7 if SHORT else 15
SECONDS = 0.01 if SHORT else 0.03


@pytest.mark.parametrize("case", ["crc32c", "crc32", "overhead", "windows"])
def test_interleaved_rounds(case: str, request: pytest.FixtureRequest) -> None:
    disabled = not request.config.option.benchmark_enable
    rounds, seconds = (1, 0.001) if disabled else (ROUNDS, SECONDS)
    cold = min(cold_bytes(), 16 * crc_rounds.MiB) if disabled else cold_bytes()
    for measured in crc_rounds.run_cases([case], rounds, seconds, cold, 16 * crc_rounds.KiB):
        if not disabled:
            record_interleaved(request.config, crc_rounds.header(rounds), measured.line())


# --- CRC-64/NVME and the one-pass pair (issue 26; crc64_rounds.py) --------------------------

_LIMITS = []


def _limits(disabled: bool):
    """The fold limit of this CPU, probed once per session (not at all when not timing)."""
    import cpu_limits

    if disabled:
        return cpu_limits.Limits(None, {}, "not measured")
    if not _LIMITS:
        _LIMITS.append(cpu_limits.limits())
    return _LIMITS[0]


@pytest.mark.parametrize("case", ["crc64nvme", "cold", "pair", "call64"])
def test_crc64_interleaved_rounds(case: str, request: pytest.FixtureRequest) -> None:
    import crc64_rounds

    disabled = not request.config.option.benchmark_enable
    rounds, seconds = (1, 0.001) if disabled else (ROUNDS, SECONDS)
    cold = min(cold_bytes(), 16 * crc_rounds.MiB) if disabled else cold_bytes()
    cases = ["limits", case] if case == "crc64nvme" else [case]
    for measured in crc64_rounds.run_cases(cases, rounds, seconds, cold, limits=_limits(disabled)):
        if not disabled:
            record_interleaved(request.config, crc_rounds.header(rounds), measured.line())
