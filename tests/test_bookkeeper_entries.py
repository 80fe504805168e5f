"""The per-entry rows of a bookie scan that `spark plan --decommission` counts
(merkle.replica.bookkeeper.scan.judge_ledger with entries=True), on hand-made ledgers."""

from __future__ import annotations


def test_the_plans_entry_rows_follow_the_write_sets() -> None:
    """judge_ledger(entries=True), the rows `spark plan` counts: a good copy outside the write
    set is not one; a bookie a hostile ensemble names twice counts once; an OPEN ledger's
    stored entries past the last confirmed one are rows too, a CLOSED ledger's never."""
    from merkle.replica.bookkeeper.metadata import LedgerMetadata
    from merkle.replica.bookkeeper.scan import Copy, Coverage, judge_ledger

    def good(bookie: str, eid: int, lac: int = -1) -> Copy:
        return Copy(bookie, 1, eid, "f", 0, 1, True, True, True, last_add_confirmed=lac)

    twice = LedgerMetadata(1, 3, 2, 2, "CLOSED", 1, 0, [(0, ("a", "a", "b"))])
    rows = judge_ledger(1, twice, [good("a", 0), good("c", 0)], Coverage(), entries=True)
    assert rows.entry_rows() == [(0, ["a"], ["a"]), (1, ["a", "b"], [])]
    open_ = LedgerMetadata(1, 2, 2, 2, "OPEN", -1, 0, [(0, ("a", "b"))])
    copies = [good("a", 0), good("b", 0), good("a", 1, lac=0), good("b", 1, lac=0)]
    rows = judge_ledger(1, open_, [*copies, good("a", 2, lac=1)], Coverage(), entries=True)
    assert [e for e, _, _ in rows.entry_rows()] == [0, 1, 2]
    assert rows.entry_rows()[2] == (2, ["a", "b"], ["a"])
    closed = LedgerMetadata(1, 2, 2, 2, "CLOSED", 0, 0, [(0, ("a", "b"))])
    rows = judge_ledger(1, closed, copies, Coverage(), entries=True)
    assert [e for e, _, _ in rows.entry_rows()] == [0]
