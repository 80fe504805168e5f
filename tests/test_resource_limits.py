"""Memory stays bounded on huge inputs (issue 6, resource limits), measured as the peak
resident set an operation adds in a fresh process (tests/resource_child.py).

Bounds stated and checked:
- scanning a block of any size: the reused read buffer (1 MiB, DEFAULT_BUFFER_SIZE) plus the
  block's metadata and its observed window checksums (4 bytes per window) plus the tree
  columns (~26 bytes per chunk): a 2 GiB sparse block (131,072 windows) must add < 16 MiB
  (measured 2.6 MiB for 4 GiB). RESOURCE_SCAN_GIB=8 runs a larger one.
- diffing two trees: the output arrays are allocated at the peer's size but only the pages
  of rows actually written become resident, so the peak grows with the *differences*:
  < 40 bytes per differing chunk + 8 MiB. Two 4,000,000-chunk trees (97 MiB of columns
  each) differing in 0.1% of chunks add < 8 MiB (measured 2.1 MiB); differing everywhere,
  < 160 MB (measured 128 MB, 32 bytes per chunk).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).resolve().parent / "resource_child.py"
MiB = 1 << 20

pytestmark = [
    pytest.mark.slow,  # a long campaign: CI's campaigns step (.ci/lib.sh CAMPAIGNS)
    pytest.mark.skipif(
        not Path("/proc/self/clear_refs").exists(),
        reason="needs Linux /proc/self/clear_refs (VmHWM reset)",
    ),
    pytest.mark.skipif(
        "libasan" in os.environ.get("LD_PRELOAD", ""),
        reason="ASan's shadow memory and quarantine dominate the RSS",
    ),
]


def _child(*args: str) -> dict:
    r = subprocess.run(
        [sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_scanning_a_huge_block_uses_a_bounded_buffer(tmp_path):
    gib = int(os.environ.get("RESOURCE_SCAN_GIB", "2"))
    out = _child("scan", str(tmp_path / "1"), str(gib))
    assert out["bytes"] == gib << 30
    assert out["peak_growth"] < 16 * MiB, out


def test_diff_of_huge_trees_grows_with_the_differences_only():
    n = 4_000_000
    few = _child("diff", str(n), "0.001")
    assert few["differing"] == n // 1000
    assert few["peak_growth"] < 8 * MiB, few
    assert few["peak_growth"] < few["tree_bytes"] / 10
    every = _child("diff", str(n), "1")
    assert every["peak_growth"] < 40 * every["differing"] + 8 * MiB, every
