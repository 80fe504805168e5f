"""Judge a ledger's stored copies against its metadata, as columns.

judge_ledger takes every copy of one ledger (from every bookie: the local scan's, or a Spark
group's rows) and finds what its metadata says is wrong: entries stored past its last entry,
copies of one entry that disagree (bit rot, a client digest bug, different bytes), and each
entry's write set checked for a copy on each of its bookies. A ledger of 1 KiB entries has a
million per GiB: the write sets, the held and good copies and the counts are numpy arrays
over a block of entries at a time (_CELLS write-set slots), and Python looks only at the
entries that are wrong. A long run of entries that no bookie stores at all (a lying
lastEntryId, or a range lost everywhere) is one finding and counted arithmetically, never
walked entry by entry: what metadata or an index says never sizes the work unbounded.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from merkle.replica.bookkeeper.copies import ALSO_COLUMNS, Copies, Copy, as_table
from merkle.replica.bookkeeper.findings import (
    BOOKIE_HOLDS_NOTHING,
    COPIES_DIFFER,
    CORRUPT_ENTRY,
    DIGEST_MISMATCH_ALL_COPIES,
    ENTRY_OF_OPEN_LEDGER,
    ENTRY_PAST_LAST_ENTRY,
    LEDGER_METADATA_UNREAD,
    LEDGER_NOT_IN_METADATA,
    MISSING_ENTRY,
    Finding,
)
from merkle.replica.bookkeeper.metadata import CLOSED, LedgerMetadata

__all__ = [
    "ENTRY_ROWS",
    "GAP_LISTED",
    "Coverage",
    "LedgerVerdict",
    "copy_order",
    "holds_nothing",
    "judge_ledger",
    "judge_unknown_ledger",
]

#: a run of more entries than this that no bookie stores at all is one finding, not one per
#: entry and write-set bookie (and its entries are not listed in the summary)
GAP_LISTED = 1 << 16
#: write-set slots (entries x writeQuorum) judged in one step: the memory of a step
_CELLS = 1 << 22
_SHOWN = 20  # bookies or entries named in one finding's detail

#: LedgerVerdict.entries' columns
ENTRY_ROWS = pa.schema(
    [("entry", pa.int64()), ("write_set", pa.list_(pa.string())), ("good", pa.list_(pa.string()))]
)

Copiesish = Union[pa.Table, pa.RecordBatch, Copies, Iterable[Copy]]


@dataclass
class Coverage:
    """Which directories of each bookie the scan read: `scanned[bookie]` = (numDirs by its
    cookie, the cookie positions of the directories whose index was read, whether its storage
    maps a ledger to one directory (DbLedgerStorage)). Small (one entry per bookie): the Spark
    job broadcasts it to the tasks that judge the ledgers."""

    scanned: Dict[str, Tuple[int, Tuple[int, ...], bool]] = field(default_factory=dict)

    def covers(self, bookie: str, lid: int) -> bool:
        """Whether the scan read the directory where `bookie` keeps ledger `lid`: a copy the
        write set puts on a directory that was not read is no MISSING_ENTRY."""
        if bookie not in self.scanned:
            return False
        num, positions, db = self.scanned[bookie]
        return lid % max(num, 1) in positions if db else len(positions) == num


def copy_order(c: Copy) -> Tuple[str, str, int]:
    """The order a ledger's copies are judged in (which copy a finding names first): the
    same whether the copies come from one process's scan or from a Spark group."""
    return (c.bookie, c.file, c.offset)


@dataclass
class LedgerVerdict:
    """What judging one ledger of the metadata found: its findings (past its last entry,
    copies compared), the MISSING_ENTRY findings by bookie (held back until the bookie-wide
    count says whether the bookie holds nothing at all), the entry copies its write sets give
    each bookie (`expected`) and those the bookie holds (`held`), and the ledger's summary."""

    findings: List[Finding] = field(default_factory=list)
    missing: Dict[str, List[Finding]] = field(default_factory=dict)
    expected: Dict[str, int] = field(default_factory=dict)
    held: Dict[str, int] = field(default_factory=dict)
    summary: Dict[str, Any] = field(default_factory=dict)
    #: with judge_ledger(..., entries=True), ENTRY_ROWS: per entry of the ledger (0 to its
    #: last, and an unclosed ledger's stored entries past it), its write set (each bookie
    #: once) and the bookies of it that hold a good copy (what `spark plan` counts: a good
    #: copy outside the write set is never read by BookKeeper's clients)
    entries: Optional[pa.Table] = None

    def entry_rows(self) -> List[Tuple[int, List[str], List[str]]]:
        """`entries` as (entry, write set, good) tuples (for small ledgers and tests)."""
        if self.entries is None:
            return []
        d = self.entries.to_pydict()
        return list(zip(d["entry"], d["write_set"], d["good"]))


# ---- one ledger's copies as arrays ---------------------------------------------------------


def _np(col: Any, dtype: Any = None) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_boolean(col.type):
        return np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False), bool)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype)


def _codes(col: Any) -> Tuple[np.ndarray, List[Any]]:
    """(a code per row, equal values equal codes and a null -1; the distinct values)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    enc = pc.dictionary_encode(col)
    return (
        np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int64),
        enc.dictionary.to_pylist(),
    )


class _Columns:
    """One ledger's copies sorted by (entry, bookie, file, offset), as numpy arrays."""

    def __init__(self, copies: Copiesish) -> None:
        t = as_table(copies)
        entry = t["entry"].to_numpy()
        if t.num_rows > 1 and not (np.diff(entry) > 0).all():  # else sorted: one copy each
            t = t.take(
                pc.sort_indices(
                    t,
                    sort_keys=[
                        ("entry", "ascending"),
                        ("bookie", "ascending"),
                        ("file", "ascending"),
                        ("offset", "ascending"),
                    ],
                )
            )
        self.table = t = t.combine_chunks()
        self.n = t.num_rows
        self.entry = _np(t["entry"], np.int64)
        self.bookie, self.names = _codes(t["bookie"])
        self.frame_ok = _np(t["frame_ok"])
        self.digest_ok = _np(t["digest_ok"])
        self.verified = _np(t["verified"])
        self.indexed = _np(t["indexed"])
        self.good = self.frame_ok & self.digest_ok & self.verified
        self.lac = _np(t["last_add_confirmed"], np.int64)

    def rows(self, lo: int, hi: int) -> List[Copy]:
        return [Copy.from_row(r) for r in self.table.slice(lo, hi - lo).to_pylist()]

    def span(self, eid: int) -> Tuple[int, int]:
        """The rows of entry `eid`."""
        lo = int(np.searchsorted(self.entry, eid, "left"))
        return lo, int(np.searchsorted(self.entry, eid, "right"))

    def differing(self) -> np.ndarray:
        """The entries whose good copies do not all agree (payload CRC-32C, stored digest,
        --also CRCs): each entry's good rows are adjacent, so comparing neighbours is
        enough."""
        g = np.flatnonzero(self.good)
        if len(g) < 2:
            return np.empty(0, np.int64)
        e = self.entry[g]
        same = e[1:] == e[:-1]
        keys = [_np(self.table["payload_crc32c"], np.int64)[g]]
        for col in ("stored_digest", *ALSO_COLUMNS):
            if self.table[col].null_count < self.n:  # an --also column not asked for: all null
                keys.append(_codes(self.table[col])[0][g])
        neq = np.zeros(len(g) - 1, bool)
        for k in keys:
            neq |= k[1:] != k[:-1]
        return np.unique(e[1:][same & neq])


# ---- the judge ----------------------------------------------------------------------------


class _Ledger:
    """The state of judging one ledger: bookie codes (the copies' bookies, then the
    segments' others), each segment's ensemble as codes, and the counts being made."""

    def __init__(
        self,
        lid: int,
        meta: LedgerMetadata,
        cols: _Columns,
        coverage: Coverage,
        present: np.ndarray,
    ) -> None:
        self.lid, self.meta, self.cols = lid, meta, cols
        self.names = list(cols.names)
        code = {n: i for i, n in enumerate(self.names)}
        for _, ensemble in meta.segments:
            for b in ensemble:
                if b not in code:
                    code[b] = len(self.names)
                    self.names.append(b)
        self.nb = max(len(self.names), 1)
        self.name_array = pa.array(self.names, pa.string())
        self.ensembles = [np.array([code[b] for b in e], np.int64) for _, e in meta.segments]
        self.duplicated = [len(set(e)) < len(e) for _, e in meta.segments]
        self.firsts = np.array(
            list(itertools.accumulate((f for f, _ in meta.segments), max)), np.int64
        )
        self.quorum = max([min(meta.write_quorum, len(e)) for e in self.ensembles] or [0])
        self.covered = np.array([coverage.covers(n, lid) for n in self.names] or [False], bool)
        self.present = present  # the copies that count as an entry's good ones
        self.expected = np.zeros(self.nb, np.int64)
        self.held = np.zeros(self.nb, np.int64)
        #: a run no bookie stores, counted in closed form (Python ints: a lying lastEntryId
        #: can make more copies than int64 counts)
        self.unstored_expected: Dict[int, int] = defaultdict(int)
        self.missing: Dict[str, List[Finding]] = defaultdict(list)
        self.histogram: Dict[int, int] = defaultdict(int)
        self.below: List[int] = []
        self.none: List[int] = []
        self.entry_parts: List[pa.RecordBatch] = []

    def segment_of(self, eids: np.ndarray) -> np.ndarray:
        return np.maximum(np.searchsorted(self.firsts, eids, "right") - 1, 0)

    def slots(self, eids: np.ndarray) -> np.ndarray:
        """The write-set bookie codes of each entry (rows), -1 past its write quorum."""
        out = np.full((len(eids), self.quorum), -1, np.int64)
        segs = self.segment_of(eids)
        for seg in np.unique(segs).tolist():
            rows = np.flatnonzero(segs == seg)
            ens = self.ensembles[seg]
            m = len(ens)
            if not m:
                continue
            q = min(self.meta.write_quorum, m)
            at = ((eids[rows] % m)[:, None] + np.arange(q, dtype=np.int64)[None, :]) % m
            out[rows, :q] = ens[at]
        return out

    def keys(self, eids: np.ndarray, mask: Optional[np.ndarray] = None) -> np.ndarray:
        """(row of `eids`) * nb + bookie code of each copy of those entries (`mask`: only
        those copies), sorted and unique: which bookie holds which entry."""
        c = self.cols
        lo = int(np.searchsorted(c.entry, eids[0], "left"))
        hi = int(np.searchsorted(c.entry, eids[-1], "right"))
        e, b = c.entry[lo:hi], c.bookie[lo:hi]
        if mask is not None:
            keep = mask[lo:hi]
            e, b = e[keep], b[keep]
        row = np.searchsorted(eids, e)
        ok = eids[np.minimum(row, len(eids) - 1)] == e
        return _sorted_unique(row[ok] * self.nb + b[ok])

    def judge(self, eids: np.ndarray, place: bool, entries: bool, good_mask: np.ndarray) -> None:
        """Entries `eids` (sorted, unique): with `place`, their write sets checked for a copy
        on each covered bookie (expected, held, missing) and their good copies counted; with
        `entries`, their ENTRY rows (good from `good_mask`'s copies)."""
        slots = self.slots(eids)
        valid = slots >= 0
        safe = np.maximum(slots, 0)
        rows = np.arange(len(eids), dtype=np.int64)[:, None] * self.nb
        slot_keys = rows + safe
        if place:
            held_slot = valid & _isin(slot_keys, self.keys(eids))
            cov = valid & self.covered[safe]
            self.expected += np.bincount(slots[cov], minlength=self.nb)
            self.held += np.bincount(slots[cov & held_slot], minlength=self.nb)
            for r, k in zip(*np.nonzero(cov & ~held_slot)):
                self._missing(int(eids[r]), slots[r], int(k))
            good_keys = self.keys(eids, self.present)
            counts = np.bincount(good_keys // self.nb, minlength=len(eids))
            for k, n in enumerate(np.bincount(counts).tolist()):
                if n:
                    self.histogram[k] += n
            self.below.extend(eids[counts < self.meta.ack_quorum].tolist())
            self.none.extend(eids[counts == 0].tolist())
        if entries:
            if any(self.duplicated):
                valid = valid & _first_of_row(slots)
            good_slot = valid & _isin(slot_keys, self.keys(eids, good_mask))
            self.entry_parts.append(
                pa.RecordBatch.from_arrays(
                    [
                        pa.array(eids),
                        self._lists(slots, valid),
                        self._lists(slots, good_slot),
                    ],
                    schema=ENTRY_ROWS,
                )
            )

    def _lists(self, slots: np.ndarray, mask: np.ndarray) -> pa.Array:
        offsets = np.zeros(len(slots) + 1, np.int32)
        np.cumsum(mask.sum(axis=1), out=offsets[1:])
        values = self.name_array.take(pa.array(slots[mask]))
        return pa.ListArray.from_arrays(pa.array(offsets), values)

    def _missing(self, eid: int, slots: np.ndarray, k: int) -> None:
        ws = [self.names[s] for s in slots.tolist() if s >= 0]
        bookie = self.names[int(slots[k])]
        self.missing[bookie].append(
            Finding(
                MISSING_ENTRY,
                f"the write set {', '.join(ws)} puts "
                f"a copy here and the bookie holds none (under-replicated)",
                bookie=bookie,
                ledger=self.lid,
                entry=eid,
            )
        )

    def unstored(self, a: int, b: int) -> Finding:
        """Entries a..b-1, which no bookie stores: counted per write-set bookie in closed
        form (each segment's share), one finding for the run."""
        for seg, (lo, hi) in enumerate(self._segment_spans()):
            lo, hi = max(lo, a), min(hi, b)
            if lo >= hi or not len(self.ensembles[seg]):
                continue
            ens = self.ensembles[seg]
            per_position = _slot_counts(lo, hi, len(ens), min(self.meta.write_quorum, len(ens)))
            for code, n in zip(ens.tolist(), per_position):
                if self.covered[code]:
                    self.unstored_expected[code] += n
        self.histogram[0] += b - a
        holders = ", ".join(
            sorted({self.names[int(s)] for s in self.slots(np.array([a], np.int64))[0] if s >= 0})
        )
        return Finding(
            MISSING_ENTRY,
            f"entries {a}..{b - 1} ({b - a}) are stored on no bookie (write set of entry {a}: "
            f"{holders}): not listed one by one nor in the ledger's summary",
            ledger=self.lid,
            entry=a,
        )

    def _segment_spans(self) -> List[Tuple[int, int]]:
        """[start, end) of the entries each segment serves (segment_of's rule: a segment
        whose running-maximum start equals the next one's serves none)."""
        spans = []
        f = self.firsts.tolist()
        for i in range(len(f)):
            lo = 0 if i == 0 else f[i]
            hi = f[i + 1] if i + 1 < len(f) else 1 << 63
            spans.append((lo, max(lo, hi)))
        return spans


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """np.unique by a sort (the keys come nearly sorted; numpy's hash-based unique is
    several times slower on them)."""
    x = np.sort(x)
    if len(x) < 2:
        return x
    keep = np.empty(len(x), bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def _isin(keys: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    if not len(sorted_unique):
        return np.zeros(keys.shape, bool)
    at = np.minimum(np.searchsorted(sorted_unique, keys), len(sorted_unique) - 1)
    return sorted_unique[at] == keys


def _first_of_row(slots: np.ndarray) -> np.ndarray:
    """True where a slot's bookie is the first of its row with that code (a hostile ensemble
    naming one bookie twice puts it in a write set once)."""
    order = np.argsort(slots, axis=1, kind="stable")
    ordered = np.take_along_axis(slots, order, axis=1)
    first = np.ones(slots.shape, bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    keep = np.empty(slots.shape, bool)
    np.put_along_axis(keep, order, first, axis=1)
    return keep


def _slot_counts(a: int, b: int, m: int, q: int) -> List[int]:
    """How many of entries a..b-1 put a copy on each ensemble position (entry e's write set
    is positions (e + k) mod m, k < q), as Python ints (a hostile range overflows int64)."""
    span = b - a
    full, rem = divmod(span, m)
    by_residue = [full] * m
    for t in range(rem):
        by_residue[(a + t) % m] += 1
    doubled = list(itertools.accumulate([0, *by_residue, *by_residue]))
    # position j collects residues j-q+1..j (mod m)
    return [doubled[j + m + 1] - doubled[j + m + 1 - q] for j in range(m)]


def _runs_to_judge(
    seen: np.ndarray, last: int
) -> Tuple[List[Tuple[int, int]], List[Tuple[int, int]]]:
    """([a, b) ranges of 0..last judged entry by entry, [a, b) runs longer than GAP_LISTED
    that hold no stored entry): a judged range is never longer than the stored entries it
    lies between, plus GAP_LISTED on each side."""
    if last < 0:
        return [], []
    points = np.concatenate([[-1], seen, [last + 1]]).astype(
        object if last >= 1 << 62 else np.int64
    )
    gaps = np.flatnonzero(np.diff(points) - 1 > GAP_LISTED)
    dense, empty = [], []
    start = 0
    for g in gaps.tolist():
        lo, hi = int(points[g]) + 1, int(points[g + 1])
        if lo > start:
            dense.append((start, lo))
        empty.append((lo, hi))
        start = hi
    if start < last + 1:
        dense.append((start, last + 1))
    return dense, empty


def judge_ledger(
    lid: int,
    meta: LedgerMetadata,
    ledger_copies: Copiesish,
    coverage: Coverage,
    *,
    entries: bool = False,
    census: bool = False,
) -> LedgerVerdict:
    """Every copy of ledger `lid` (from every bookie; a table of COPY_ARROW's columns, or
    Copy rows) against its metadata: entries past its last entry, each entry's copies
    compared, and each write set's bookies checked for a copy. The local scan and the Spark
    job (grouped by ledger) both call this; the job asks for the per-entry good copies too
    (`entries`).

    `census` (the copies of a metadata-only scan: Copy.indexed, nothing verified): each
    entry's copies are counted as indexed, not good (the summary's `indexed_copies` and
    `without_indexed_copy` instead of `good_copies` and `without_good_copy`), and an unclosed
    ledger's placement is checked only up to its metadata's lastEntryId: the last entry its
    writer confirmed is in the entries' headers, which a census does not read."""
    cols = _Columns(ledger_copies)
    verdict = LedgerVerdict()
    if meta.state == CLOSED or census:
        last = meta.last_entry_id
    else:
        framed = cols.lac[cols.frame_ok]
        last = int(framed.max()) if len(framed) else -1
    seen = _sorted_unique(cols.entry)
    verdict.findings.extend(_past_last(lid, meta, cols, seen))
    verdict.findings.extend(_compared(lid, cols))
    state = _Ledger(lid, meta, cols, coverage, cols.indexed if census else cols.good)
    dense, empty = _runs_to_judge(seen[(seen >= 0) & (seen <= last)], last)
    step = max(1, _CELLS // max(state.quorum, 1))
    for a, b in dense:
        for lo in range(a, b, step):
            eids = np.arange(lo, min(b, lo + step), dtype=np.int64)
            state.judge(eids, True, entries, state.present)
    verdict.findings.extend(state.unstored(a, b) for a, b in empty)
    if entries and meta.state != CLOSED:
        # an unclosed ledger's entries past the last confirmed one may still be part of it
        # (the writer's last acknowledged add is confirmed by no stored header: recovery
        # decides), so the plan counts their copies too; a CLOSED ledger's are never read
        past = seen[seen > last]
        for lo in range(0, len(past), step):
            state.judge(past[lo : lo + step], False, True, cols.good)  # never a census's
    verdict.missing = dict(state.missing)
    expected = {i: int(n) for i, n in enumerate(state.expected.tolist()) if n}
    for i, n in state.unstored_expected.items():
        expected[i] = expected.get(i, 0) + n
    verdict.expected = {state.names[i]: n for i, n in sorted(expected.items()) if n}
    verdict.held = {state.names[i]: int(n) for i, n in enumerate(state.held) if n}
    if entries:
        verdict.entries = pa.Table.from_batches(state.entry_parts, ENTRY_ROWS)
    verdict.summary = {
        "ledger": lid,
        "state": meta.state,
        "digest_type": meta.digest_type,
        "last_entry_id": meta.last_entry_id,
        "checked_up_to": last,
        "ensemble_size": meta.ensemble_size,
        "write_quorum": meta.write_quorum,
        "ack_quorum": meta.ack_quorum,
        "good_copies": {str(k): n for k, n in sorted(state.histogram.items()) if n},
        "below_ack_quorum": state.below,
        "without_good_copy": state.none,
    }
    if census:  # counted from the indexes: no copy was verified, none is good
        summary = verdict.summary
        summary["census"] = True
        summary["indexed_copies"] = summary.pop("good_copies")
        summary["without_indexed_copy"] = summary.pop("without_good_copy")
    return verdict


def _past_last(lid: int, meta: LedgerMetadata, cols: _Columns, seen: np.ndarray) -> List[Finding]:
    past = seen[seen > meta.last_entry_id]
    if not len(past):
        return []
    codes = np.unique(cols.bookie[cols.entry > meta.last_entry_id])
    holders = sorted(cols.names[c] for c in codes.tolist())
    first, final = int(past[0]), int(past[-1])
    span = f"{first}..{final}" if len(past) > 1 else str(first)
    if meta.state == CLOSED:
        return [
            Finding(
                ENTRY_PAST_LAST_ENTRY,
                f"entries {span} stored past the CLOSED ledger's "
                f"lastEntryId {meta.last_entry_id} on {', '.join(holders)}: never read "
                f"(an add that lost the close race, or leftovers of recovery)",
                ledger=lid,
                entry=first,
            )
        ]
    return [
        Finding(
            ENTRY_OF_OPEN_LEDGER,
            f"entries {span} stored while the metadata says "
            f"{meta.state} (lastEntryId {meta.last_entry_id}): the ledger is still "
            f"being written or its writer died before closing it; recovery decides "
            f"which become part of it; checked for placement up to the last entry "
            f"confirmed in their headers",
            ledger=lid,
            entry=first,
        )
    ]


def _compared(lid: int, cols: _Columns) -> List[Finding]:
    """The entries whose copies disagree (a copy whose checked digest fails, good copies
    that differ), each compared copy by copy (_compare_copies); every other entry's copies
    agree and say nothing."""
    bad = cols.frame_ok & cols.verified & ~cols.digest_ok
    flagged = np.union1d(np.unique(cols.entry[bad]), cols.differing())
    found: List[Finding] = []
    for eid in flagged[flagged >= 0].tolist():
        lo, hi = cols.span(eid)
        found.extend(_compare_copies(lid, eid, cols.rows(lo, hi)))
    return found


def _compare_copies(lid: int, eid: int, here: List[Copy]) -> List[Finding]:
    """Per entry: bit rot on some copies, a digest failing identically everywhere (a client
    digest bug), copies that differ although each digest holds."""
    found: List[Finding] = []
    if len(here) < 2 and not any(c.frame_ok and c.verified and not c.digest_ok for c in here):
        return found  # no copy, or one that is not bad: nothing to compare, nothing rotted
    framed = [c for c in here if c.frame_ok and c.verified]
    bad = [c for c in framed if not c.digest_ok]
    if (
        len(bad) >= 2
        and len(bad) == len(framed)
        and len({(c.payload_crc32c, c.stored_digest) for c in bad}) == 1
    ):
        found.append(
            Finding(
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
        )
    else:
        for c in bad:
            others = [o.bookie for o in framed if o.digest_ok]
            found.append(
                Finding(
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
            )
    good = [c for c in framed if c.digest_ok]
    # the --also CRCs too, where the scan computed them: one more check that two copies whose
    # CRC-32C and digest agree hold the same bytes
    if len({(c.payload_crc32c, c.stored_digest, tuple(sorted(c.also.items()))) for c in good}) > 1:
        found.append(
            Finding(
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
        )
    return found


def judge_unknown_ledger(
    lid: int,
    ledger_copies: Copiesish,
    unread: Optional[Dict[int, str]] = None,
    metadata_complete: bool = True,
) -> List[Finding]:
    """The stored copies of a ledger the metadata does not have, one finding per bookie:
    garbage not yet collected, or (its metadata unread, the store not listed whole) copies
    that were not verified, never called garbage."""
    bookies = as_table(ledger_copies)["bookie"]
    counts = {r["values"]: r["counts"] for r in pc.value_counts(bookies).to_pylist() if r["values"]}
    found = []
    for bookie, n in sorted(counts.items()):
        entries = f"{n} stored entr{'y' if n == 1 else 'ies'}"
        why = unread.get(lid) if unread else None
        if why is None and not metadata_complete:
            why = "the metadata store could not be listed whole"
        if why is not None:  # its metadata may exist: never call it garbage
            found.append(
                Finding(
                    LEDGER_METADATA_UNREAD,
                    f"{entries} of a ledger whose metadata was not "
                    f"read ({why}): not verified, only their frames were checked",
                    bookie=bookie,
                    ledger=lid,
                )
            )
            continue
        found.append(
            Finding(
                LEDGER_NOT_IN_METADATA,
                f"{entries} of a ledger the metadata does not have "
                f"(deleted: garbage BookKeeper has not collected yet; only their frames "
                f"were checked)",
                bookie=bookie,
                ledger=lid,
            )
        )
    return found


def holds_nothing(expected: Dict[str, int], held: Dict[str, int]) -> Dict[str, Finding]:
    """The bookies that hold none of the entry copies their ensemble segments give them
    (counts summed over every ledger), each with its one BOOKIE_HOLDS_NOTHING finding, which
    stands for all its MISSING_ENTRY findings."""
    return {
        bookie: Finding(
            BOOKIE_HOLDS_NOTHING,
            f"holds none of the {n} entry "
            f"copies its ensemble segments give it: a re-formatted or replaced "
            f"bookie (BP-31's incarnation case; the cookie alone cannot tell)",
            bookie=bookie,
        )
        for bookie, n in sorted(expected.items())
        if n and not held.get(bookie)
    }
