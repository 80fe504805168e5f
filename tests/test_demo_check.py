"""The Spark demo's ground-truth comparison (spark_udfs.demo.check_findings), without Spark:
it must accept exactly the manifest's findings and flag every miss and false alarm."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest

pytest.importorskip("pyarrow")

from spark_udfs.demo import check_findings  # noqa: E402

MANIFEST: Dict[str, Any] = {
    "containers": {
        "1": {"replicas": ["dn0/v/1", "dn1/v/1", "dn2/v/1"]},
        "2": {"replicas": ["dn0/v/2", "dn1/v/2", "dn2/v/2"]},
        "3": {"replicas": ["dn0/v/3", "dn1/v/3", "dn2/v/3"]},
        "4": {"replicas": ["dn0/v/4", "dn1/v/4", "dn2/v/4"]},
    },
    "faults": [
        {
            "id": 0,
            "type": "bitflip",
            "container_id": 1,
            "block_id": 5,
            "replicas": ["dn0/v/1"],
            "expected": [
                {"replica": "dn0/v/1", "error": "CORRUPT_CHUNK", "block_id": 5, "offset": 0}
            ],
        },
        {
            "id": 1,
            "type": "tombstone",
            "container_id": 2,
            "block_id": 7,
            "replicas": ["dn1/v/2"],
            "expected": [],
        },
        {
            "id": 2,
            "type": "bitflip-all",
            "container_id": 3,
            "block_id": 1,
            "replicas": ["dn0/v/3", "dn1/v/3", "dn2/v/3"],
            "expected": [
                {"replica": r, "error": "CORRUPT_CHUNK", "block_id": 1, "offset": 0}
                for r in ("dn0/v/3", "dn1/v/3", "dn2/v/3")
            ],
        },
    ],
    "unrepairable_chunks": [{"container_id": 3, "block_id": 1, "offset": 0}],
    "tombstones": {"2": [7]},
}
ERRORS = [("dn0/v/1", "CORRUPT_CHUNK", 5, 0)] + [
    (r, "CORRUPT_CHUNK", 1, 0) for r in ("dn0/v/3", "dn1/v/3", "dn2/v/3")
]
PULLS = [("dn0/v/1", "CORRUPT_CHUNK", 5, 0)]
PENDING = [("dn0/v/2", 7), ("dn2/v/2", 7)]


def _check(**over: Any) -> Any:
    args = dict(
        errors=ERRORS, pulls=PULLS, mismatched=[1], unrecoverable=[(3, 1, 0)], pending=PENDING
    )
    args.update(over)
    return check_findings(copy.deepcopy(MANIFEST), **args)


def test_the_exact_findings_pass():
    f = _check()
    assert f.exact and not f.missed
    assert "total" in f.table() and "false alarms: 0 scan errors" in f.table()


def test_a_tombstone_adopted_through_pulls_passes_too():
    pulls = PULLS + [(r, "DIVERGED_DELETED_BLOCK", 7, None) for r in ("dn0/v/2", "dn2/v/2")]
    assert _check(pulls=pulls, pending=[], mismatched=[1, 2]).exact


@pytest.mark.parametrize(
    "over, what",
    [
        (dict(errors=ERRORS[1:]), "scan error CORRUPT_CHUNK on dn0/v/1"),
        (dict(pulls=[]), "CORRUPT_CHUNK pull for dn0/v/1"),
        (dict(mismatched=[]), "container 1 reported as matching"),
        (dict(pending=PENDING[:1]), "pending deletion for dn2/v/2"),
    ],
)
def test_a_miss_is_flagged(over, what):
    f = _check(**over)
    assert not f.exact
    assert any(what in m for c in f.missed for m in c.missing), f.table()


@pytest.mark.parametrize(
    "over, field",
    [
        (dict(errors=ERRORS + [("dn1/v/4", "MISSING_CHUNK", 2, 0)]), "false_errors"),
        (dict(mismatched=[1, 4]), "false_mismatches"),
        (dict(pulls=PULLS + [("dn1/v/4", "MISSING_BLOCK", 2, None)]), "false_pulls"),
        (dict(pending=PENDING + [("dn0/v/4", 2)]), "false_pending"),
    ],
)
def test_a_false_alarm_is_flagged(over, field):
    f = _check(**over)
    assert not f.exact and getattr(f, field)


def test_unrecoverable_must_match_exactly():
    assert not _check(unrecoverable=[]).exact
    assert not _check(unrecoverable=[(3, 1, 0), (1, 5, 0)]).exact


# ---- the decommission step's verdict (spark_udfs.demo.decommission) ------------------------


def test_the_decommission_step_decides_the_demo():
    from pathlib import Path

    from spark_udfs.demo import DemoResult

    res = DemoResult(Path("."), _check(), report={})
    assert res.ok  # no step run (--no-repair)
    res.plan_ok = True
    assert res.ok
    res.plan_ok = False
    assert not res.ok


def test_a_demo_directory_holds_the_decommission_steps_files():
    from spark_udfs.cli.demodir import DEMO_ENTRIES

    assert {"plan-cluster", "plan-scan", "plan-scan-after", "plan.json"} <= DEMO_ENTRIES
