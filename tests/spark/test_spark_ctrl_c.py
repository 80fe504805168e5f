"""Ctrl-C during `crcmerkle spark scan`, wherever it lands: the imports of pyarrow and pyspark,
the JVM's start, the session's, the scan, and the shutdown after it (pyspark's SIGINT handler
still installed, its atexit and py4j's threads): exit 130, at most one line, no traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Tuple

import pytest
from interrupts import (  # noqa: E402
    LAUNCH,
    ROOT,
    assert_one_line_130,
    child_env,
    interrupt,
    interrupt_until_it_ends,
)

from merkle.replica.generate import generate_cluster, parse_faults

#: from the first instant to the session's start on a loaded machine
DELAYS = [0.01, 0.1, 0.3, 0.6, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ctrl_c") / "c"
    generate_cluster(out, faults=parse_faults("none"), containers=2, seed=3)
    return out


@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_during_spark_scan(cluster: Path, tmp_path: Path, delay: float) -> None:
    returncode, err = interrupt(
        LAUNCH, ["spark", "scan", str(cluster), "-o", str(tmp_path / "o")], delay
    )
    assert_one_line_130(returncode, err, delay)


def _scan_then_interrupt(cluster: Path, out: Path, delay: float) -> Tuple[int, str]:
    """A whole `spark scan` (its summary line read, -u), then SIGINT after `delay` s and
    every 5 ms until it ends: the process is shutting down (the session stopping, atexit,
    py4j's threads), a short window that a single signal would mostly miss."""
    p: Any = subprocess.Popen(
        [sys.executable, "-S", "-u", "-c", LAUNCH, "spark", "scan", str(cluster), "-o", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=child_env(),
    )
    try:
        for line in p.stdout:  # the summary is the last line the command prints
            if b"error(s)" in line:
                break
    except BaseException:
        p.kill()
        p.wait()
        raise
    time.sleep(delay)
    err = interrupt_until_it_ends(p, timeout=300)
    return p.returncode, err


def test_ctrl_c_during_the_spark_shutdown(cluster: Path, tmp_path: Path) -> None:
    returncode, err = _scan_then_interrupt(cluster, tmp_path / "o", 0.0)
    if returncode == 0 and not err:
        pytest.skip("the process had ended before the signal")
    assert_one_line_130(returncode, err, 0.0)


#: a long campaign: CI's campaigns step runs it, not the fast tier (.ci/lib.sh CAMPAIGNS)
pytestmark = pytest.mark.slow
