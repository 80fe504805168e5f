"""Helpers of the Ctrl-C tests (tests/test_ctrl_c.py, tests/spark/test_spark_ctrl_c.py): a
`crcmerkle` child as pip's console script starts it, interrupted, and the one rule checked."""

from __future__ import annotations

import os
import signal
import site
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
#: pip's console script, word for word
LAUNCH = "import sys; from crcmerkle_cli import main; sys.exit(main())"


def child_env() -> Dict[str, str]:
    """The environment of a child run with `python -S`: this checkout, then the site
    directories (no .pth file run: the site module's start-up is the interpreter's)."""
    dirs = [str(ROOT)] + [
        d
        for d in (
            *site.getsitepackages(),
            sysconfig.get_paths()["purelib"],
            sysconfig.get_paths()["platlib"],
        )
        if os.path.isdir(d)
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("CRCMERKLE_DEBUG", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(dirs))
    return env


def interrupt(code: str, args: List[str], delay: float) -> Tuple[int, str]:
    """(exit status, stderr) of the child `code` with `args`, sent SIGINT after `delay` s."""
    p = subprocess.Popen(
        [sys.executable, "-S", "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=child_env(),
    )
    try:
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err.decode("utf-8", "replace")


def interrupt_until_it_ends(p: subprocess.Popen[bytes], timeout: float) -> str:
    """SIGINT to `p` every 5 ms until it ends (at most `timeout` s), then its stderr; `p` is
    killed if it outlives that. A process shutting down has short windows (a session
    stopping, atexit, threads joined) that a single signal would mostly miss."""
    try:
        deadline = time.monotonic() + timeout
        while p.poll() is None and time.monotonic() < deadline:
            p.send_signal(signal.SIGINT)
            time.sleep(0.005)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return err.decode("utf-8", "replace")


def _before_any_code_of_ours(returncode: int, err: str) -> bool:
    """The interpreter's windows, before crcmerkle_cli's first line runs: with no handler yet
    the kernel's default action ends the process (a shell reports 130, nothing is printed);
    then, while the launcher looks crcmerkle_cli up, Python's own KeyboardInterrupt ends it
    (killed by SIGINT again) with a traceback made only of the launcher's line and the import
    machinery (frozen modules): no file is named, none of ours ran. On a loaded machine a
    stat of that lookup can take tens of milliseconds. Earlier still, while the interpreter
    initialises itself (its standard streams: the io module, frozen on 3.11+, read from the
    standard library on 3.9), the KeyboardInterrupt is CPython's "Fatal Python error: init_...",
    exit 1, with the standard library's frames only (seen at 0.01 s on a loaded machine)."""
    frames = [line.strip() for line in err.splitlines() if line.strip().startswith("File ")]
    only_frozen = all(f.startswith(('File "<string>"', 'File "<frozen ')) for f in frames)
    if returncode == 1 and err.startswith("Fatal Python error: init_"):
        # the standard library's own modules: frozen on 3.11+, read from its directory on 3.9
        stdlib = 'File "' + os.path.join(sysconfig.get_paths()["stdlib"], "")
        own = all(f.startswith(('File "<frozen ', stdlib)) for f in frames)
        return own and err.rstrip().endswith("KeyboardInterrupt")
    if returncode != -signal.SIGINT:
        return False
    if not err:
        return True
    return bool(frames) and only_frozen


def _after_all_code_of_ours(returncode: int, err: str) -> bool:
    """The interpreter's last window: the command was interrupted and said so in its one
    line, then, at the very end of its shutdown, CPython's signal module restores the
    default action of every signal it had a Python handler for (_PySignal_Fini: SIG_DFL),
    after which a Ctrl-C ends the process the kernel's way (killed by SIGINT: a shell
    reports 130, nothing more is printed). Seen when SIGINT came every 5 ms through a
    Spark session's shutdown on a loaded machine."""
    return returncode == -signal.SIGINT and err == "crcmerkle: error: interrupted\n"


def assert_one_line_130(returncode: int, err: str, delay: float) -> None:
    """Exit 130 and at most the one line 'crcmerkle: error: interrupted', no traceback (or
    the interpreter's own windows: _before_any_code_of_ours, _after_all_code_of_ours)."""
    if _before_any_code_of_ours(returncode, err) or _after_all_code_of_ours(returncode, err):
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "Exception ignored" not in err, (delay, err)
    assert returncode == 130, (delay, returncode, err)
    assert len(lines) <= 1 and (not lines or lines[0] == "crcmerkle: error: interrupted"), (
        delay,
        err,
    )
