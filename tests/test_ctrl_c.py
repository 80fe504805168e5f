"""Ctrl-C wherever it lands in a `crcmerkle` process, start-up and shutdown included: exit 130
and at most one line on stderr ("crcmerkle: error: interrupted"), never a traceback.

The child runs what pip's console script runs (`from crcmerkle_cli import main`), with
`python -S` and the site directories on PYTHONPATH: the `site` module's own start-up (its .pth
files) is the interpreter's, before any code of crcmerkle can run, and is left out."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import List

import pytest
from interrupts import (
    LAUNCH,
    ROOT,
    assert_one_line_130,
    child_env as _env,
    interrupt as _interrupt,
    interrupt_until_it_ends,
)

import crcmerkle_cli

#: seconds of the slow shutdown: well past the longest delay of the shutdown test (1 s after
#: the command's line) on a loaded machine; a SIGINT that lands before the hook is answered
#: and the hook then runs in full, so each second here is a second of that test
SLOW_EXIT_SECONDS = 8
#: pip's console script but for the atexit hook (a slow shutdown, as Spark's)
SLOW_EXIT = (
    f"import atexit, time; atexit.register(time.sleep, {SLOW_EXIT_SECONDS}); "
    "import sys; from crcmerkle_cli import main; sys.exit(main())"
)
#: from the first instant to well after the imports (a loaded machine takes seconds)
DELAYS = [0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.17, 0.25, 0.35, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.mark.parametrize("delay", DELAYS)
def test_ctrl_c_at_any_moment_of_a_command(delay: float) -> None:
    # `checksum -` waits on stdin for ever: every phase from the imports to the work is hit
    returncode, err = _interrupt(LAUNCH, ["checksum", "-"], delay)
    assert_one_line_130(returncode, err, delay)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.3, 1.0])
def test_ctrl_c_during_the_shutdown(delay: float) -> None:
    """After the command (its output line seen: -u), while an atexit hook runs (pyspark's,
    py4j's threads): it was "Exception ignored in atexit callback ... KeyboardInterrupt"."""
    p = subprocess.Popen(
        [sys.executable, "-S", "-u", "-c", SLOW_EXIT, "checksum", "-"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=_env(),
    )
    try:
        assert p.stdout.readline().startswith(b"00000000  0  -")  # the command is done
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert_one_line_130(p.returncode, err.decode("utf-8", "replace"), delay)


def test_ctrl_c_repeated_while_the_interrupted_command_exits_is_one_line() -> None:
    """The command interrupted (it says so: merkle.cli.main), then Ctrl-C again and again while
    the process exits (a slow atexit hook, as Spark's shutdown): still the one line. It was
    two, once from the command and once from the exit-time handler (seen in
    test_spark_ctrl_c's shutdown test with SIGINT every 5 ms)."""
    code = SLOW_EXIT.replace(
        "from crcmerkle_cli import main;",
        "from crcmerkle_cli import main; import merkle.cli, os; os.write(1, b'ready\\n');",
    )
    p = subprocess.Popen(
        [sys.executable, "-S", "-u", "-c", code, "checksum", "-"],
        stdin=subprocess.PIPE,  # held open: the command waits on it until interrupted
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=_env(),
    )
    try:
        assert p.stdout.readline() == b"ready\n"
    except BaseException:
        p.kill()
        p.wait()
        raise
    time.sleep(0.5)  # main() has restored Python's handler: the command reads stdin
    text = interrupt_until_it_ends(p, timeout=120)
    assert p.returncode == 130 and text == "crcmerkle: error: interrupted\n", (p.returncode, text)


def test_slow_exit_launcher_ends_by_itself_when_not_interrupted() -> None:
    """The shutdown test's child does reach its atexit hook (checksum of an empty stdin
    prints its line): interrupted there, only the exit-time handler can answer."""
    p = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            SLOW_EXIT.replace(f"time.sleep, {SLOW_EXIT_SECONDS}", "time.sleep, 0"),
            "checksum",
            "-",
        ],
        input=b"",
        capture_output=True,
        cwd=ROOT,
        env=_env(),
        timeout=120,
    )
    assert p.returncode == 0 and p.stdout.startswith(b"00000000  0  -"), p


def test_started_with_ctrl_c_ignored_stays_so() -> None:
    """`nohup`, a script's background job: SIGINT ignored from the start is left ignored (the
    import-time and exit-time handlers replaced that ignore with an end)."""
    p = subprocess.Popen(
        [sys.executable, "-S", "-c", LAUNCH, "checksum", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=_env(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        for _ in range(5):
            time.sleep(0.2)
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(b"123456789", timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and out.startswith(b"e3069283  9  -"), (p.returncode, out, err)


def test_a_ctrl_c_in_a_finalizer_prints_no_traceback(capsys: pytest.CaptureFixture) -> None:
    """A KeyboardInterrupt raised in a finalizer cannot propagate; Python printed it with a
    traceback ("Exception ignored in ..."). The command's hook drops it (the command knows of
    the Ctrl-C anyway); any other unraisable exception still reaches the previous hook."""
    seen: List[object] = []
    hook = crcmerkle_cli._unraisable_quietly(seen.append)

    class Info:
        def __init__(self, exc: BaseException) -> None:
            self.exc_type, self.exc_value = type(exc), exc

    hook(Info(KeyboardInterrupt()))
    assert seen == []
    other = Info(ValueError("x"))
    hook(other)
    assert seen == [other]
