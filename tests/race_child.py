"""Child process of tests/test_concurrency.py: wait until START (a time.time() value), then
reconcile TARGET from PEERS, pausing SLOW seconds after every write step so that a rival
process started at the same moment really overlaps. Prints one JSON line and exits 0
(done) or 3 (refused: the replica was locked).

    python tests/race_child.py START SLOW TARGET PEER...
"""

from __future__ import annotations

import json
import sys
import time

from merkle.replica.errors import ReplicaLockedError
from merkle.replica.reconcile import reconcile

start, slow, target, peers = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:]
time.sleep(max(0.0, start - time.time()))
try:
    r = reconcile(target, peers, on_step=lambda step, detail: time.sleep(slow))
except ReplicaLockedError as exc:
    print(json.dumps({"status": "locked", "error": str(exc)}))
    sys.exit(3)
print(
    json.dumps(
        {
            "status": "done",
            "copied": sum(p.bytes_copied for p in r.peers),
            "remaining": len(r.remaining),
        }
    )
)
