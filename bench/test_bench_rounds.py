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
