"""The columnar judge of a ledger (merkle.replica.bookkeeper.judge.judge_ledger) against the
scalar one the scan had before (tests/bookkeeper_reference.py: one Python step per entry), on
random ledgers: every finding with its fields and detail, the held-back MISSING_ENTRY
findings, the per-bookie counts, the summary and the plan's entry rows must be the same.
And what the scalar judge could not do: a lying lastEntryId is one finding, not 10^15
steps."""

from __future__ import annotations

import time
from typing import Any, List, Tuple

import pytest

hypothesis = pytest.importorskip("hypothesis")
from bookkeeper_reference import reference_judge  # noqa: E402
from hypothesis import (  # noqa: E402
    given,
    settings,
    strategies as st,  # noqa: E402
)

from merkle.replica.bookkeeper.copies import Copies, Copy, as_table  # noqa: E402
from merkle.replica.bookkeeper.judge import GAP_LISTED, Coverage, judge_ledger  # noqa: E402
from merkle.replica.bookkeeper.metadata import LedgerMetadata  # noqa: E402

BOOKIES = ["a", "b", "c", "d", "e"]


@st.composite
def ledgers(draw: Any) -> Tuple[LedgerMetadata, List[Copy], Coverage, bool]:
    ensemble_size = draw(st.integers(1, 4))
    write_quorum = draw(st.integers(1, ensemble_size))
    ack_quorum = draw(st.integers(1, write_quorum))
    state = draw(st.sampled_from(["CLOSED", "OPEN", "IN_RECOVERY"]))
    last = draw(st.integers(-1, 40))
    firsts = sorted({0, *draw(st.lists(st.integers(1, 45), max_size=3))})
    # a hostile ensemble may name one bookie twice
    segments = [
        (f, tuple(draw(st.lists(st.sampled_from(BOOKIES), min_size=ensemble_size,
                                max_size=ensemble_size))))
        for f in firsts
    ]  # fmt: skip
    meta = LedgerMetadata(
        1, ensemble_size, write_quorum, ack_quorum, state, last, 0, segments, "CRC32C"
    )
    copies = []
    for _ in range(draw(st.integers(0, 60))):
        frame_ok = draw(st.booleans()) or draw(st.booleans())
        copies.append(
            Copy(
                draw(st.sampled_from(BOOKIES)),
                1,
                draw(st.integers(-2, 50)),
                draw(st.sampled_from(["/x/0.log", "/x/1.log"])),
                draw(st.integers(1028, 1100)),
                100,
                frame_ok=frame_ok,
                digest_ok=frame_ok and (draw(st.booleans()) or draw(st.booleans())),
                verified=draw(st.booleans()) or draw(st.booleans()),
                stored_digest=draw(st.sampled_from(["0a0b0c0d", "0a0b0c0e"])) if frame_ok else "",
                payload_crc32c=draw(st.sampled_from([7, 7, 7, 8])),
                last_add_confirmed=draw(st.integers(-1, 45)),
                problem="stored CRC32C digest x, computed y" if frame_ok else None,
                also={"crc64nvme": draw(st.sampled_from([5, 5, 6]))} if frame_ok else {},
                indexed=draw(st.booleans()),
            )
        )
    scanned = {
        b: (draw(st.integers(1, 2)), (0,), draw(st.booleans()))
        for b in BOOKIES
        if draw(st.booleans()) or draw(st.booleans())
    }
    return meta, copies, Coverage(scanned), draw(st.booleans())


@settings(max_examples=400, deadline=None)
@given(ledgers())
def test_the_columnar_judge_says_what_the_scalar_one_said(case: Any) -> None:
    meta, copies, coverage, census = case
    want, want_rows = reference_judge(1, meta, copies, coverage, entries=True, census=census)
    for given_as in (copies, as_table(copies)):  # rows, and the columns the scan hands over
        got = judge_ledger(1, meta, given_as, coverage, entries=True, census=census)
        assert got.findings == want.findings
        assert got.missing == want.missing
        assert got.expected == want.expected
        assert got.held == want.held
        assert got.summary == want.summary
        assert got.entry_rows() == want_rows


def test_a_lying_last_entry_id_is_one_finding_not_a_walk() -> None:
    """A CLOSED ledger whose metadata claims 10^15 entries while the bookies store 3: the
    run no bookie stores is one MISSING_ENTRY finding (no bookie named: all lack it), the
    write-set counts made in closed form, and the judge takes no time to say so."""
    meta = LedgerMetadata(1, 3, 2, 2, "CLOSED", 10**15, 0, [(0, ("a", "b", "c"))], "CRC32C")
    copies = [
        Copy(b, 1, e, f"/{b}/0.log", 1028 + e, 100, True, True, True)
        for e in range(3)
        for b in meta.write_set(e)
    ]
    cover = Coverage({b: (1, (0,), True) for b in "abc"})
    t0 = time.process_time()
    got = judge_ledger(1, meta, copies, cover, entries=True)
    assert time.process_time() - t0 < 5  # a guard against a walk of 10^15 steps, not a timing
    gaps = [f for f in got.findings if f.kind == "MISSING_ENTRY"]
    assert len(gaps) == 1 and gaps[0].entry == 3 and gaps[0].bookie is None
    assert f"3..{10**15}" in gaps[0].detail
    assert got.missing == {}
    # every entry 0..10^15 puts 2 copies on the 3 bookies: 2/3 of the entries each
    assert sum(got.expected.values()) == 2 * (10**15 + 1)
    assert got.held == {"a": 2, "b": 2, "c": 2}
    assert got.summary["good_copies"] == {"0": 10**15 + 1 - 3, "2": 3}
    assert got.entry_rows()[-1][0] == 2


def test_a_run_no_bookie_stores_is_listed_entry_by_entry_up_to_the_limit() -> None:
    """GAP_LISTED entries with no copy anywhere are still MISSING_ENTRY each (held back
    by bookie); one more and the run is one finding."""
    for gap, listed in ((GAP_LISTED, True), (GAP_LISTED + 1, False)):
        meta = LedgerMetadata(1, 1, 1, 1, "CLOSED", gap, 0, [(0, ("a",))], "CRC32C")
        copies = Copies()
        copies.append(Copy("a", 1, gap, "/a/0.log", 1028, 100, True, True, True))
        got = judge_ledger(1, meta, copies, Coverage({"a": (1, (0,), True)}))
        assert len(got.missing.get("a", [])) == (gap if listed else 0)
        assert [f.kind for f in got.findings] == ([] if listed else ["MISSING_ENTRY"])
        assert got.expected == {"a": gap + 1} and got.held == {"a": 1}
