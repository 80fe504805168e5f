"""Entry point of the `crcmerkle` console script: merkle.cli.main, with Ctrl-C handled from
the first instant to the last.

Importing merkle (numpy, the native extension) takes a few tenths of a second; a Ctrl-C
then would end in a KeyboardInterrupt traceback before merkle.cli.main could catch it. So
this module, which imports nothing but builtin modules (not os, typing, nor the signal
module: each is an import's worth of Ctrl-C window where it is not loaded yet), installs a
SIGINT handler that ends the process at once with the one line every verb prints (exit 130),
imports the command line, and only then restores Python's own handler (KeyboardInterrupt,
caught by main). When the command is done and the
process ends (atexit handlers, Spark's and py4j's threads, the interpreter's own shutdown), a
Ctrl-C ends it the same way: nothing of the work is left to do, no traceback to show.

Before this module runs, the window is the interpreter's: with no handler installed yet the
kernel's default action ends the process (a shell reports 130, nothing is printed).
"""

# No `from __future__ import annotations`: it imports the __future__ module, read from disk,
# before the handler is installed (a Ctrl-C there was a traceback naming this file); the
# annotations below are strings instead.
import _signal  # type: ignore[import-not-found]  # builtin: the signal module's own core
import sys

try:
    import posix as _os  # builtin: os.write, os._exit and the environment without `import os`
except ImportError:  # pragma: no cover  (Windows)
    import nt as _os  # type: ignore[import-not-found, no-redef, unused-ignore]

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs tens of milliseconds to import: a Ctrl-C window
    from typing import Any, List, Optional

__all__ = [
    "main",
    "quiet_interrupts_while_exiting",
    "quiet_interrupts_while_importing",
    "run_quietly",
]

#: what every verb prints when interrupted (merkle.cli.main prints the same)
INTERRUPTED_LINE = b"crcmerkle: error: interrupted\n"
#: 128 + SIGINT, as shells report it (merkle.cli.EXIT_INTERRUPTED)
EXIT_INTERRUPTED = 130


#: this launcher wrote INTERRUPTED_LINE already
_SAID = [False]


def _say_interrupted() -> None:
    """INTERRUPTED_LINE, once per process: not when merkle.cli.main said it already (a Ctrl-C
    repeated while the interrupted command exits lands here too; seen as two lines when
    SIGINT came every 5 ms through the Spark session's shutdown)."""
    cli = sys.modules.get("merkle.cli")
    if _SAID[0] or getattr(cli, "interrupted_reported", False):
        return
    _SAID[0] = True
    _os.write(2, INTERRUPTED_LINE)


def _interrupted_while_importing(signum: int, frame: "Any") -> None:
    # nothing has been written yet: there is nothing to clean up, and no Python code of
    # ours that could be half-imported may run any more
    _say_interrupted()
    _os._exit(EXIT_INTERRUPTED)


def _interrupted_while_exiting(signum: int, frame: "Any") -> None:
    # the command is over and its output flushed: only the interpreter's shutdown (atexit,
    # threads being joined) is left, which a KeyboardInterrupt would turn into a traceback
    _say_interrupted()
    _os._exit(EXIT_INTERRUPTED)


def _debugging() -> bool:
    """--debug or CRCMERKLE_DEBUG=1 (merkle.cli.debug_enabled): the tracebacks are wanted."""
    if "--debug" in sys.argv:
        return True
    os = sys.modules.get("os")  # once imported: it sees what merkle.cli set for --debug
    if os is not None:
        return os.environ.get("CRCMERKLE_DEBUG", "") not in ("", "0")
    environ: Any = _os.environ  # bytes keys on POSIX, str on Windows
    value = environ.get(b"CRCMERKLE_DEBUG") or environ.get("CRCMERKLE_DEBUG") or ""
    return value not in ("", "0", b"", b"0")


def quiet_interrupts_while_importing() -> None:
    """Install the import-time SIGINT handler (main thread only; not under --debug, which
    wants the traceback). The caller restores signal.default_int_handler once imported."""
    if _debugging() or not _python_handles_sigint():
        return
    try:
        _signal.signal(_signal.SIGINT, _interrupted_while_importing)
    except ValueError:  # not the main thread: leave signals alone
        pass


#: SIGINT was ignored when the process started (`nohup`, a script's background job)
_IGNORED_AT_START = _signal.getsignal(_signal.SIGINT) == _signal.SIG_IGN


def _python_handles_sigint() -> bool:
    """Whether SIGINT has Python's own handler: not when the process was started with it
    ignored (`nohup`, a background job of a script), which must stay so, nor when a caller
    installed its own."""
    return _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler


def quiet_interrupts_while_exiting() -> None:
    """After the command: flush what it wrote (the handler ends the process without
    flushing), then let a Ctrl-C end the process in one line, exit 130. Only for a process
    that is the command (main() without argv: the console script, `python -m ...`); a caller
    that runs main(argv) in its own process keeps its signals."""
    if _debugging():
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # the reader went away (the verb said so already), or no stream at all
    if _IGNORED_AT_START:
        return  # started immune to Ctrl-C: stays so
    # whatever handler the command left (pyspark's SparkContext installs one that cancels
    # jobs over py4j: at shutdown its failure is a traceback) is replaced
    try:
        _signal.signal(_signal.SIGINT, _interrupted_while_exiting)
    except ValueError:  # not the main thread: leave signals alone
        pass


def main(argv: "Optional[List[str]]" = None) -> int:
    quiet_interrupts_while_importing()
    from merkle.cli import main as cli_main

    return run_quietly(lambda: cli_main(argv), owns_process=argv is None)


def _unraisable_quietly(hook: "Any") -> "Any":
    """sys.unraisablehook that drops a KeyboardInterrupt: one that lands in a finalizer or a
    weakref callback (py4j frees Java objects from them) cannot propagate, and Python would
    print it with a traceback; the command knows of the Ctrl-C anyway (spark_udfs.cli's latch,
    or the next bytecode's KeyboardInterrupt) and says so in its one line."""

    def unraisable(info: "Any") -> None:
        if isinstance(info.exc_value, KeyboardInterrupt) or info.exc_type is KeyboardInterrupt:
            return
        hook(info)

    return unraisable


def run_quietly(command: "Any", owns_process: bool) -> int:
    """command() (the command line, its merkle imported already): Python's own SIGINT
    handler back while it runs, a Ctrl-C that lands outside its own `try` one line and 130,
    and, in a process that is the command (`owns_process`), the exit-time handler after it
    and no traceback of a Ctrl-C that lands in a finalizer."""
    if owns_process and not _debugging():
        sys.unraisablehook = _unraisable_quietly(sys.unraisablehook)
    try:
        if _signal.getsignal(_signal.SIGINT) is _interrupted_while_importing:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        status = int(command())
        if owns_process:
            quiet_interrupts_while_exiting()
    except KeyboardInterrupt:
        # landed between the handler's restoring and the command's own try, or after it
        if _debugging():
            raise
        _say_interrupted()
        status = EXIT_INTERRUPTED
        if owns_process:
            quiet_interrupts_while_exiting()
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
