"""Entry point of the `crcmerkle` console script: merkle.cli.main, with Ctrl-C handled from
the first instant.

Importing merkle (numpy, the native extension) takes a few tenths of a second; a Ctrl-C
then would end in a KeyboardInterrupt traceback before merkle.cli.main could catch it. So
this module, which imports nothing of crcmerkle, installs a SIGINT handler that ends the
process at once with the one line every verb prints (exit 130), imports the command line,
and only then restores Python's own handler (KeyboardInterrupt, caught by main).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, List, Optional

__all__ = ["main", "quiet_interrupts_while_importing"]

#: what every verb prints when interrupted (merkle.cli.main prints the same)
INTERRUPTED_LINE = b"crcmerkle: error: interrupted\n"
#: 128 + SIGINT, as shells report it (merkle.cli.EXIT_INTERRUPTED)
EXIT_INTERRUPTED = 130


def _interrupted_while_importing(signum: int, frame: Any) -> None:
    # nothing has been written yet: there is nothing to clean up, and no Python code of
    # ours that could be half-imported may run any more
    os.write(2, INTERRUPTED_LINE)
    os._exit(EXIT_INTERRUPTED)


def quiet_interrupts_while_importing() -> None:
    """Install the import-time SIGINT handler (main thread only; not under --debug, which
    wants the traceback). The caller restores signal.default_int_handler once imported."""
    if os.environ.get("CRCMERKLE_DEBUG", "") not in ("", "0") or "--debug" in sys.argv:
        return
    try:
        signal.signal(signal.SIGINT, _interrupted_while_importing)
    except ValueError:  # not the main thread: leave signals alone
        pass


def main(argv: Optional[List[str]] = None) -> int:
    quiet_interrupts_while_importing()
    from merkle.cli import main as cli_main

    if signal.getsignal(signal.SIGINT) is _interrupted_while_importing:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return cli_main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
