"""Child process of tests/test_crash_kill.py: one scan + reconcile round over a cluster
(replica_helpers.full_round), killed with SIGKILL at its K-th write event.

    python tests/crash_child.py CLUSTER K      # K = -1: no kill, print the events as JSON

Write events, in the order they happen:
  pwrite              a chunk written by the reconciler (K lands *inside* it: half the chunk
                      is written, then the process dies: a torn write)
  before-rename.X     a metadata (.blocks) or tree (.tree) temp file written and fsynced,
                      not yet renamed over the old one (scans write trees too)
  after-rename.X      renamed, directory not yet fsynced
  step-S              the reconciler's own step hook (chunk, block, metadata, tree)
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replica_helpers import full_round  # noqa: E402

root, kill_at = Path(sys.argv[1]), int(sys.argv[2])
events: list = []


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def event(kind: str) -> None:
    if len(events) == kill_at:
        die()
    events.append(kind)


real_replace, real_pwrite = os.replace, os.pwrite


def replace(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
    kind = Path(os.fspath(dst)).suffix
    event(f"before-rename{kind}")
    real_replace(src, dst, *args, **kwargs)
    event(f"after-rename{kind}")


def pwrite(fd, data, offset):  # type: ignore[no-untyped-def]
    if len(data) < 1024:  # the lock file's PID
        return real_pwrite(fd, data, offset)
    if len(events) == kill_at:
        real_pwrite(fd, bytes(memoryview(data)[: len(data) // 2]), offset)
        die()
    events.append("pwrite")
    return real_pwrite(fd, data, offset)


os.replace = replace
os.pwrite = pwrite
full_round(root, on_step=lambda step, detail: event(f"step-{step}"))
print(json.dumps(events))
