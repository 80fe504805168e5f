"""`crcmerkle spark plan BOOKIE_SCAN --decommission BOOKIE[,...]`: may these bookies go down
now, counting only good copies? And what to run, in BookKeeper's own `bookkeeper shell`.

Input: the `entries` table of a bookie scan (spark_udfs.jobs.bookkeeper): per entry of every
ledger of the metadata, its write set and the bookies of it holding a copy whose digest
verified. A copy outside the write set does not count: BookKeeper's clients and its recovery
read an entry only from its write set. For each entry whose write set holds a leaving bookie,
the good copies that stay (on write-set bookies not leaving) decide:

  NO_GOOD_COPY       no copy of the entry verifies anywhere: already lost on every bookie; no
                     BookKeeper command brings it back
  LAST_GOOD_COPY     the only good copies are on leaving bookies: stopping them loses it
  UNDER_REPLICATED   fewer good copies than the ledger's ackQuorum stay: below what its writer
                     was promised until AutoRecovery copies them (with writeQuorum = ackQuorum,
                     Pulsar's default, every entry of a leaving bookie)

A bookie with none of these may go down now. What to run, read from BookKeeper's source:
  - `bookkeeper shell recover -f -l LEDGER BOOKIE` (BookieShell.RecoverCmd -> RecoverCommand ->
    BookKeeperAdmin.recoverBookieData(ledger, bookies, ...)) while the bookie still runs: it
    replaces the bookie in the ledger's ensembles and copies its fragments with ordinary
    client reads (LedgerFragmentReplicator: lh.asyncReadEntries), which verify every digest
    and try the next copy of the write set when one fails. With the bookie still up, its good
    copies are among those read: that is what saves a LAST_GOOD_COPY entry, and it also
    replaces the rotted copy of a bookie being recovered. It fences and closes an OPEN ledger
    whose last ensemble holds the bookie (BookKeeperAdmin.recoverLedger: fenceRequired).
  - then, the bookie stopped, `bookkeeper shell decommissionbookie -bookieid BOOKIE`
    (BookKeeperAdmin.decommissionBookie: refuses a bookie still available or read-only,
    triggers the Auditor's audit, waits until no ledger's ensemble names the bookie, deletes
    its cookie). Without a run of AutoRecovery, the same with `recover -f -d BOOKIE` after the
    stop (synchronous re-replication, then the cookie deleted).
Counts are lower bounds when a write-set bookie was not in the scan or one of its ledger
directories was not read: its copies count as none, which can only hold a bookie back.
"""

from __future__ import annotations

from typing import Any, Dict, List

__all__ = [
    "LAST_GOOD_COPY",
    "NO_GOOD_COPY",
    "REASONS",
    "UNDER_REPLICATED",
    "bookie_plan",
    "format_bookie_plan",
]

NO_GOOD_COPY = "NO_GOOD_COPY"
LAST_GOOD_COPY = "LAST_GOOD_COPY"
UNDER_REPLICATED = "UNDER_REPLICATED"
#: in order of gravity (an entry gets the first that holds)
REASONS = (NO_GOOD_COPY, LAST_GOOD_COPY, UNDER_REPLICATED)

_SHELL = "bookkeeper shell"


def _held_entries(entries: Any, ledgers: Any, leaving: List[str]) -> Any:
    """One row per (leaving bookie, entry of its write sets that holds it back): ledger,
    entry, the ledger's state and ackQuorum, the reason."""
    from pyspark.sql import functions as F

    gone = F.array(*[F.lit(b) for b in leaving])
    mine = entries.filter(F.arrays_overlap("write_set", gone))
    return (
        mine.join(ledgers.select("ledger", "state", "ack_quorum"), "ledger")
        .select(
            F.explode(F.array_intersect("write_set", gone)).alias("bookie"),
            "ledger",
            "entry",
            "state",
            "ack_quorum",
            F.size("good").alias("good"),
            F.size(F.array_except("good", gone)).alias("stay"),
        )
        .select(
            "*",
            F.expr(
                f"CASE WHEN good = 0 THEN '{NO_GOOD_COPY}' "
                f"WHEN stay = 0 THEN '{LAST_GOOD_COPY}' "
                f"WHEN stay < ack_quorum THEN '{UNDER_REPLICATED}' END"
            ).alias("reason"),
        )
        .filter("reason IS NOT NULL")
    )


def bookie_plan(
    entries: Any,
    ledgers: Any,
    leaving: List[str],
    *,
    scanned: Dict[str, List[str]],
    not_read: List[str],
    first: int = 20,
) -> Dict[str, Any]:
    """The plan for the `leaving` bookies (IDs as their cookies name them, each one of the
    scan's `scanned` bookies) from a bookie scan's `entries` and `ledgers` tables. `not_read`:
    the ledger directories the scan could not read (the counts are lower bounds then).
    What reaches the driver: one row per (bookie, ledger, reason) held back, and the first
    `first` entries of each (bookie, reason)."""
    from pyspark.sql import functions as F

    held = _held_entries(entries, ledgers, leaving)
    per_ledger = (
        held.groupBy("bookie", "ledger", "state", "ack_quorum", "reason")
        .agg(
            F.count(F.lit(1)).alias("entries"),
            F.min("entry").alias("first_entry"),
            F.max("entry").alias("last_entry"),
        )
        .orderBy("bookie", "ledger", "reason")
        .collect()
    )
    write_set_bookies = {
        r["b"] for r in entries.select(F.explode("write_set").alias("b")).distinct().collect()
    }
    bookies: Dict[str, Any] = {}
    for b in leaving:
        rows = [r for r in per_ledger if r["bookie"] == b]
        counts = {k: sum(int(r["entries"]) for r in rows if r["reason"] == k) for k in REASONS}
        by_ledger: Dict[int, Dict[str, Any]] = {}
        for r in rows:
            led = by_ledger.setdefault(
                int(r["ledger"]),
                {
                    "ledger": int(r["ledger"]),
                    "state": r["state"],
                    "ack_quorum": int(r["ack_quorum"]),
                    "reasons": {},
                },
            )
            led["reasons"][r["reason"]] = {
                "entries": int(r["entries"]),
                "first_entry": int(r["first_entry"]),
                "last_entry": int(r["last_entry"]),
            }
        held_ledgers = list(by_ledger.values())
        bookies[b] = {
            "may_go": not held_ledgers,
            "entries_held_back": sum(counts.values()),
            "reasons": {k: v for k, v in counts.items() if v},
            "ledgers": held_ledgers[:first],
            "ledgers_total": len(held_ledgers),
            "commands": _commands(b, held_ledgers),
        }
    missing = sorted(write_set_bookies - set(scanned))
    return {
        "layout": "bookkeeper",
        "decommission": list(leaving),
        "bookies": bookies,
        "write_set_bookies_not_scanned": missing,
        "directories_not_read": list(not_read),
        "counts_are_lower_bounds": bool(missing or not_read),
        "summary": {
            "bookies": len(leaving),
            "held_back": sum(not v["may_go"] for v in bookies.values()),
            "entries_held_back": sum(v["entries_held_back"] for v in bookies.values()),
        },
    }


def _commands(bookie: str, held: List[Dict[str, Any]]) -> List[str]:
    """What to run for one leaving bookie, comments first (a script an operator reads)."""
    decommission = f"{_SHELL} decommissionbookie -bookieid {bookie}"
    if not held:
        return [
            f"# {bookie} may go down: every entry of its write sets keeps at least its "
            "ledger's ackQuorum of good copies on other bookies",
            "# stop the bookie, then (the Auditor's AutoRecovery copies its ledgers from "
            "those copies; this waits for it and deletes the cookie):",
            decommission,
        ]
    recoverable = [led for led in held if set(led["reasons"]) - {NO_GOOD_COPY}]
    lost = [led["ledger"] for led in held if NO_GOOD_COPY in led["reasons"]]
    out = [f"# {bookie} may not go down yet"]
    if recoverable:
        out.append(
            f"# while {bookie} still runs: re-replicate these ledgers' fragments (reads verify "
            "every digest, so the good copies, its own among them, are what gets copied)"
        )
        for led in recoverable:
            if led["state"] != "CLOSED":
                out.append(
                    f"# ledger {led['ledger']} is {led['state']}: recovering it fences and "
                    "closes it when its last ensemble holds this bookie"
                )
            out.append(f"{_SHELL} recover -f -l {led['ledger']} {bookie}")
    if lost:
        out.append(
            "# no copy verifies anywhere of some entries of ledger(s) "
            + ", ".join(str(x) for x in lost)
            + ": no BookKeeper command restores them (the writer's own data, or delete the "
            "ledger); recover skips what it cannot read only with -sku"
        )
    out += [
        "# then scan the bookies again and plan again: exit 0 means it may go; then stop it and",
        decommission,
    ]
    return out


def format_bookie_plan(plan: Dict[str, Any]) -> str:
    """The plan as text: per bookie its verdict, the ledgers holding it back, the commands."""
    lines: List[str] = []
    for b, v in plan["bookies"].items():
        if v["may_go"]:
            lines.append(f"{b}: may go down now (every entry keeps ackQuorum good copies)")
        else:
            why = ", ".join(f"{k} {n}" for k, n in v["reasons"].items())
            lines.append(
                f"{b}: HELD BACK by {v['entries_held_back']} entries of "
                f"{v['ledgers_total']} ledger(s) ({why})"
            )
            for led in v["ledgers"]:
                for reason, r in led["reasons"].items():
                    span = (
                        str(r["first_entry"])
                        if r["entries"] == 1
                        else f"from {r['first_entry']} to {r['last_entry']}"
                    )
                    lines.append(
                        f"  ledger {led['ledger']} ({led['state']}, ackQuorum "
                        f"{led['ack_quorum']}): {reason}: {r['entries']} entries ({span})"
                    )
            if v["ledgers_total"] > len(v["ledgers"]):
                lines.append(
                    f"  ... and {v['ledgers_total'] - len(v['ledgers'])} more ledgers "
                    "(--first, or --json for the first of each)"
                )
        lines += [f"  {c}" for c in v["commands"]]
    if plan["counts_are_lower_bounds"]:
        parts = []
        if plan["write_set_bookies_not_scanned"]:
            parts.append(
                "write-set bookies not in the scan: "
                + ", ".join(plan["write_set_bookies_not_scanned"])
            )
        if plan["directories_not_read"]:
            parts.append(f"{len(plan['directories_not_read'])} ledger directories not read")
        lines.append(
            "counts are lower bounds (" + "; ".join(parts) + "): their copies count as none"
        )
    s = plan["summary"]
    lines.append(
        f"{s['bookies']} bookie(s) to decommission: {s['bookies'] - s['held_back']} may go "
        f"down now, {s['held_back']} held back ({s['entries_held_back']} entries)"
    )
    return "\n".join(lines) + "\n"
