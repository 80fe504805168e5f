"""The bookkeeper demo's checks without Spark (spark_udfs.demo.bookkeeper): the comparison of
the scan's findings with the generator's manifest, and the choice of the bookie holding a last
good copy, from the manifest alone, checked against the generated bookies' own write sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

pytest.importorskip("rocksdict")

from merkle.replica.bookkeeper.generate import (  # noqa: E402
    BookKeeperGeneratorConfig,
    generate_bookies,
    parse_faults,
)
from spark_udfs.demo.bookkeeper import check_bookie_findings, last_good_copy_holder  # noqa: E402


def _found(f: Dict[str, Any], root: str) -> Dict[str, Any]:
    """A manifest finding as the findings table has it (error/severity, absolute file)."""
    return {
        "error": f["kind"],
        "severity": f["level"],
        "bookie": f["bookie"],
        "ledger": f["ledger"],
        "entry": f["entry"],
        "file": None if f["file"] is None else f"{root}/{f['file']}",
        "offset": f["offset"],
    }


@pytest.fixture(scope="module")
def generated(tmp_path_factory: Any) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("demo") / "bookies"
    manifest = generate_bookies(
        root, BookKeeperGeneratorConfig(seed=7, faults=parse_faults("default"))
    )
    return {"root": str(root), "manifest": manifest}


def test_the_manifest_matches_itself_and_each_difference_shows(generated: Dict[str, Any]) -> None:
    root, expected = generated["root"], generated["manifest"]["expected_findings"]
    found = [_found(f, root) for f in expected]
    assert check_bookie_findings(expected, found, root) == ([], [])
    # one finding the scan missed, one it made up, one at another offset
    placed = next(f for f in expected if f["offset"] is not None)
    moved = dict(_found(placed, root), offset=placed["offset"] + 1)
    extra = dict(found[0], ledger=999)
    rest = [g for f, g in zip(expected, found) if f is not placed and f is not expected[-1]]
    missing, made_up = check_bookie_findings(expected, [*rest, moved, extra], root)
    assert sorted(map(str, missing)) == sorted(map(str, [placed, expected[-1]]))
    assert sorted(map(str, made_up)) == sorted(map(str, [moved, extra]))


def test_a_level_that_differs_is_a_difference(generated: Dict[str, Any]) -> None:
    root, expected = generated["root"], generated["manifest"]["expected_findings"]
    found = [_found(f, root) for f in expected]
    found[0] = dict(found[0], severity="warning" if found[0]["severity"] == "error" else "error")
    missing, extra = check_bookie_findings(expected, found, root)
    assert missing == [expected[0]] and extra == [found[0]]


def test_the_holder_is_the_flipped_entrys_other_write_set_bookie(
    generated: Dict[str, Any],
) -> None:
    """Against the bookies' own record: the holder's ledger index has the entry, the flipped
    copy is on the other bookie of the write set, and the holder is no reformatted bookie."""
    manifest = generated["manifest"]
    holder = last_good_copy_holder(manifest)
    assert holder is not None
    bookie, lid, eid = holder
    flip = next(f for f in manifest["faults"] if f["type"] == "payload-flip")
    assert (lid, eid) == (flip["ledger"], flip["entry"]) and bookie != flip["bookie_id"]
    emptied = {
        f["bookie"] for f in manifest["expected_findings"] if f["kind"] == "BOOKIE_HOLDS_NOTHING"
    }
    assert bookie not in emptied
    led = manifest["ledgers"][str(lid)]
    assert bookie in led["segments"][-1][1] or any(bookie in s[1] for s in led["segments"])


def test_no_holder_when_the_other_copy_is_gone(generated: Dict[str, Any]) -> None:
    manifest = json.loads(json.dumps(generated["manifest"]))
    bookie, lid, eid = last_good_copy_holder(manifest) or ("", 0, 0)
    manifest["expected_findings"].append(
        {
            "kind": "MISSING_ENTRY",
            "level": "error",
            "bookie": bookie,
            "ledger": lid,
            "entry": eid,
            "file": None,
            "offset": None,
        }
    )
    assert last_good_copy_holder(manifest) is None


@pytest.mark.parametrize("seed", range(12))
def test_every_default_generation_has_an_entry_with_one_good_copy(
    tmp_path: Path, seed: int
) -> None:
    """The generator keeps a data fault's other copies intact, off reformatted bookies: the
    demo's decommission step always has its case."""
    manifest = generate_bookies(
        tmp_path / "b", BookKeeperGeneratorConfig(seed=seed, faults=parse_faults("default"))
    )
    assert last_good_copy_holder(manifest) is not None
