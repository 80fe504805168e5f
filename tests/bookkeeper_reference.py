"""The scalar judge of a ledger's copies, as the scan had it before it judged by columns
(merkle.replica.bookkeeper.judge): one Python step per entry and copy. Kept as the
reference the columnar judge is compared with on random ledgers (test_bookkeeper_judge.py);
never imported by the package."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, Iterable, List, Set, Tuple

from merkle.replica.bookkeeper.copies import Copy
from merkle.replica.bookkeeper.findings import (
    COPIES_DIFFER,
    CORRUPT_ENTRY,
    DIGEST_MISMATCH_ALL_COPIES,
    ENTRY_OF_OPEN_LEDGER,
    ENTRY_PAST_LAST_ENTRY,
    MISSING_ENTRY,
    Finding,
)
from merkle.replica.bookkeeper.judge import Coverage, LedgerVerdict, copy_order
from merkle.replica.bookkeeper.metadata import CLOSED, LedgerMetadata

_SHOWN = 20


class ScanReport:
    def __init__(self) -> None:
        self.findings: List[Finding] = []

    def add(self, kind: str, detail: str, **where: object) -> None:
        self.findings.append(Finding(kind, detail, **where))  # type: ignore[arg-type]


def reference_judge(
    lid: int,
    meta: LedgerMetadata,
    ledger_copies: Iterable[Copy],
    coverage: Coverage,
    *,
    entries: bool = False,
    census: bool = False,
) -> Tuple[LedgerVerdict, List[Tuple[int, List[str], List[str]]]]:
    """Every copy of ledger `lid` (from every bookie) against its metadata: entries past its
    last entry, each entry's copies compared, and each write set's bookies checked for a
    copy. The local scan and the Spark job (grouped by ledger) both call this; the job asks
    for the per-entry good copies too (`entries`).

    `census` (the copies of a metadata-only scan: Copy.indexed, nothing verified): each
    entry's copies are counted as indexed, not good (the summary's `indexed_copies` and
    `without_indexed_copy` instead of `good_copies` and `without_good_copy`), and an unclosed
    ledger's placement is checked only up to its metadata's lastEntryId: the last entry its
    writer confirmed is in the entries' headers, which a census does not read."""
    verdict = LedgerVerdict()
    rows: List[Tuple[int, List[str], List[str]]] = []
    report = ScanReport()
    copies: Dict[int, List[Copy]] = defaultdict(list)
    for c in sorted(ledger_copies, key=copy_order):
        copies[c.entry].append(c)
    seen = sorted(copies)
    last = (
        meta.last_entry_id
        if meta.state == CLOSED or census
        else max(
            [c.last_add_confirmed for e in seen for c in copies[e] if c.frame_ok],
            default=-1,
        )
    )
    _past_last(lid, meta, seen, copies, report)
    good_counts = []
    below, none = [], []
    expected: Dict[str, int] = defaultdict(int)
    held: Dict[str, int] = defaultdict(int)
    missing: Dict[str, List[Finding]] = defaultdict(list)
    write_set = meta.write_sets()
    covered: Dict[str, bool] = {}  # coverage.covers(bookie, lid), asked once per bookie
    for eid in range(0, last + 1):
        here = copies.get(eid, [])
        _compare_copies(lid, eid, here, report)
        good = {c.bookie for c in here if (c.indexed if census else c.good)}
        holders = {c.bookie for c in here}
        ws = write_set(eid)
        if entries:
            rows.append(_entry_row(eid, ws, good))
        for bookie in ws:
            cov = covered.get(bookie)
            if cov is None:
                cov = covered[bookie] = coverage.covers(bookie, lid)
            if not cov:
                continue
            expected[bookie] += 1
            if bookie in holders:
                held[bookie] += 1
            else:
                missing[bookie].append(
                    Finding(
                        MISSING_ENTRY,
                        f"the write set {', '.join(ws)} puts "
                        f"a copy here and the bookie holds none (under-replicated)",
                        bookie=bookie,
                        ledger=lid,
                        entry=eid,
                    )
                )
        good_counts.append(len(good))
        if len(good) < meta.ack_quorum:
            below.append(eid)
        if not good:
            none.append(eid)
    for eid in seen:
        if eid > last:
            _compare_copies(lid, eid, copies[eid], report)
            if entries and meta.state != CLOSED:
                # an unclosed ledger's entries past the last confirmed one may still be part
                # of it (the writer's last acknowledged add is confirmed by no stored header:
                # recovery decides), so the plan counts their copies too; a CLOSED ledger's
                # are never read
                ws = write_set(eid)
                good = {c.bookie for c in copies[eid] if c.good}  # never a census's
                rows.append(_entry_row(eid, ws, good))
    verdict.findings = report.findings
    verdict.missing, verdict.expected, verdict.held = dict(missing), dict(expected), dict(held)
    verdict.summary = {
        "ledger": lid,
        "state": meta.state,
        "digest_type": meta.digest_type,
        "last_entry_id": meta.last_entry_id,
        "checked_up_to": last,
        "ensemble_size": meta.ensemble_size,
        "write_quorum": meta.write_quorum,
        "ack_quorum": meta.ack_quorum,
        "good_copies": {str(k): good_counts.count(k) for k in sorted(set(good_counts))},
        "below_ack_quorum": below,
        "without_good_copy": none,
    }
    if census:  # counted from the indexes: no copy was verified, none is good
        summary = verdict.summary
        summary["census"] = True
        summary["indexed_copies"] = summary.pop("good_copies")
        summary["without_indexed_copy"] = summary.pop("without_good_copy")
    return verdict, rows


def _entry_row(
    eid: int, write_set: Iterable[str], good: Set[str]
) -> Tuple[int, List[str], List[str]]:
    """An entry's row of LedgerVerdict.entries: its write set (each bookie once, even when
    a hostile ensemble names one twice) and the bookies of it holding a good copy."""
    ws = list(dict.fromkeys(write_set))
    return eid, ws, [b for b in ws if b in good]


def _past_last(
    lid: int,
    meta: LedgerMetadata,
    seen: List[int],
    copies: Dict[int, List[Copy]],
    report: ScanReport,
) -> None:
    past = [e for e in seen if e > meta.last_entry_id]
    if not past:
        return
    holders = sorted({c.bookie for e in past for c in copies[e]})
    span = f"{past[0]}..{past[-1]}" if len(past) > 1 else str(past[0])
    if meta.state == CLOSED:
        report.add(
            ENTRY_PAST_LAST_ENTRY,
            f"entries {span} stored past the CLOSED ledger's "
            f"lastEntryId {meta.last_entry_id} on {', '.join(holders)}: never read "
            f"(an add that lost the close race, or leftovers of recovery)",
            ledger=lid,
            entry=past[0],
        )
    else:
        report.add(
            ENTRY_OF_OPEN_LEDGER,
            f"entries {span} stored while the metadata says "
            f"{meta.state} (lastEntryId {meta.last_entry_id}): the ledger is still "
            f"being written or its writer died before closing it; recovery decides "
            f"which become part of it; checked for placement up to the last entry "
            f"confirmed in their headers",
            ledger=lid,
            entry=past[0],
        )


def _compare_copies(lid: int, eid: int, here: List[Copy], report: ScanReport) -> None:
    """Per entry: bit rot on some copies, a digest failing identically everywhere (a client
    digest bug), copies that differ although each digest holds."""
    if len(here) < 2 and not any(c.frame_ok and c.verified and not c.digest_ok for c in here):
        return  # no copy, or one that is not bad: nothing to compare, nothing rotted
    framed = [c for c in here if c.frame_ok and c.verified]
    bad = [c for c in framed if not c.digest_ok]
    if (
        len(bad) >= 2
        and len(bad) == len(framed)
        and len({(c.payload_crc32c, c.stored_digest) for c in bad}) == 1
    ):
        report.add(
            DIGEST_MISMATCH_ALL_COPIES,
            f"the digest fails identically on all "
            f"{len(bad)} copies ({', '.join(c.bookie for c in bad)}): the client "
            f"computed it wrongly when writing (a client digest bug, such as "
            f"BookKeeper PR #4140/#4196), not a disk",
            ledger=lid,
            entry=eid,
            bookie=bad[0].bookie,
            file=bad[0].file,
            offset=bad[0].offset,
        )
    else:
        for c in bad:
            others = [o.bookie for o in framed if o.digest_ok]
            report.add(
                CORRUPT_ENTRY,
                f"{c.problem} (bit rot: "
                f"{'good copies on ' + ', '.join(others) if others else 'no good copy'}"
                f"; BookKeeper's clients skip this copy and never repair it)",
                bookie=c.bookie,
                ledger=lid,
                entry=eid,
                file=c.file,
                offset=c.offset,
            )
    good = [c for c in framed if c.digest_ok]
    # the --also CRCs too, where the scan computed them: one more check that two copies whose
    # CRC-32C and digest agree hold the same bytes
    if len({(c.payload_crc32c, c.stored_digest, tuple(sorted(c.also.items()))) for c in good}) > 1:
        report.add(
            COPIES_DIFFER,
            "copies hold different bytes although each digest holds: "
            + "; ".join(
                f"{c.bookie} payload crc32c {c.payload_crc32c:08x}"
                + "".join(f" {a} {v:x}" for a, v in sorted(c.also.items()))
                for c in good[:_SHOWN]
            )
            + " (the client wrote different bytes: a writer or recovery bug, not a "
            "disk)",
            ledger=lid,
            entry=eid,
        )
