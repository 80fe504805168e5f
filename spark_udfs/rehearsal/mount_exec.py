"""What each simulated host's `unshare --mount` runs: bind-mount each SRC at DST in this
(fresh, private) mount namespace, then exec PROGRAM. Run by its file path, argv only, no
shell:

  python mount_exec.py SRC DST [SRC DST ...] -- PROGRAM ARGS...

It imports nothing of the package (the daemons' environment has no PYTHONPATH), and it asks
the kernel to SIGKILL it, and so what it execs, when the thread that started it ends
(PR_SET_PDEATHSIG): a rehearsal killed without its clean-up leaves no daemon behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import List

#: the pid of the process that started us (unshare execs, never forks): set in the daemon's
#: environment by spark_udfs.rehearsal.simhosts
PARENT_ENV = "CRCMERKLE_SIMHOSTS_PARENT"


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG: SIGKILL this process (and what it execs) when the thread that
    started it ends."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    # the parent may have gone before the request took effect (we were reparented)
    expected = os.environ.get(PARENT_ENV, "")
    if expected.isdigit() and os.getppid() != int(expected):
        os._exit(1)


def mount_exec(argv: List[str]) -> int:
    """SRC DST [SRC DST ...] -- PROGRAM ARGS...: bind-mount, then exec PROGRAM (returns
    only on a usage error or a refused mount)."""
    if "--" not in argv:
        print("simhosts mount-exec: missing --", file=sys.stderr)
        return 2
    cut = argv.index("--")
    binds, program = argv[:cut], argv[cut + 1 :]
    if len(binds) % 2 or not program:
        print("simhosts mount-exec: need SRC DST pairs and a program", file=sys.stderr)
        return 2
    die_with_parent()
    for src, dst in zip(binds[::2], binds[1::2]):
        r = subprocess.run(["mount", "--bind", "--", src, dst], capture_output=True, text=True)
        if r.returncode != 0:
            print(
                f"simhosts mount-exec: mount --bind {src} {dst}: "
                f"{r.stderr.strip() or r.returncode}",
                file=sys.stderr,
            )
            return 1
    os.execvp(program[0], program)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(mount_exec(sys.argv[1:]))
