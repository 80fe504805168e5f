"""`crcmerkle spark demo --layout bookkeeper`: bookies with injected faults, found by the
Spark scan exactly, and a decommission the plan holds back.

It generates four bookies in BookKeeper's on-disk format with one fault of every type
(merkle.replica.bookkeeper.generate; the ground truth is its manifest's `expected_findings`),
scans them on Spark as `crcmerkle spark scan --ledger-metadata` does (write_scan), and checks
the findings table against the manifest: kind, bookie, ledger, entry and level, and file and
offset where the manifest names them (check_bookie_findings, plain Python, tested without
Spark). Then the decommission: the generator's payload bit flip leaves its entry one good copy,
on the other bookie of its write set (the manifest's ledger segments, round robin). BookKeeper's
own decommission (stop, then AutoRecovery) would re-replicate that entry from the copy that
stays, the flipped one, whose digest fails: the entry would be lost. `spark plan
--decommission` of that bookie (spark_udfs.jobs.bookkeeper.plan) must hold it back with
LAST_GOOD_COPY on that entry.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from merkle.replica.bookkeeper.metadata import LedgerMetadata

__all__ = ["BookieDemoResult", "check_bookie_findings", "last_good_copy_holder", "run_demo"]

#: the generated cluster's directory and the scan's, under the demo's directory
BOOKIES_DIR = "bookies"
SCAN_DIR = "scan"

Key = Tuple[str, Optional[str], Optional[int], Optional[int], str]


@dataclass
class BookieDemoResult:
    """What the demo found: the expected findings the scan missed and the findings nobody
    injected (both empty when exact), and the decommission step's outcome."""

    expected: int
    missing: List[Dict[str, Any]] = field(default_factory=list)
    extra: List[Dict[str, Any]] = field(default_factory=list)
    leaving: Optional[str] = None
    entry: Optional[Tuple[int, int]] = None
    plan_ok: bool = False

    @property
    def exact(self) -> bool:
        return not self.missing and not self.extra

    @property
    def ok(self) -> bool:
        return self.exact and self.plan_ok


def _key(f: Dict[str, Any]) -> Key:
    return (
        str(f.get("kind") or f.get("error")),
        f.get("bookie"),
        f.get("ledger"),
        f.get("entry"),
        str(f.get("level") or f.get("severity")),
    )


def check_bookie_findings(
    expected: List[Dict[str, Any]], found: List[Dict[str, Any]], root: str
) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(missing, extra): the manifest's findings (`expected`, files relative to `root`) the
    scan did not report, and the scan's findings (`found`, the findings table's rows) no
    fault explains. A manifest finding matches a found one with its kind, bookie, ledger,
    entry and level, and its file and offset where it names them."""
    pool = list(found)
    missing = []
    # the findings that name file and offset first, so that a looser one cannot take theirs
    for want in sorted(expected, key=lambda f: (f.get("file") is None, f.get("offset") is None)):
        path = None if want.get("file") is None else os.path.join(root, want["file"])
        match = next(
            (
                g
                for g in pool
                if _key(g) == _key(want)
                and (path is None or g.get("file") == path)
                and (want.get("offset") is None or g.get("offset") == want["offset"])
            ),
            None,
        )
        if match is None:
            missing.append(want)
        else:
            pool.remove(match)
    return missing, pool


def last_good_copy_holder(manifest: Dict[str, Any]) -> Optional[Tuple[str, int, int]]:
    """(bookie, ledger, entry): the bookie holding the one good copy of the entry whose
    payload the generator flipped, from the manifest's ledger segments (placed by
    LedgerMetadata.write_set, BookKeeper's round robin), or None (no such fault, or its
    write set keeps more than one other copy, or the other copy is damaged too)."""
    # the copies the faults damage (their findings name them), and the bookies they empty
    findings = manifest["expected_findings"]
    damaged = {
        (f["bookie"], f["ledger"], f["entry"])
        for f in findings
        if f["kind"] in ("CORRUPT_ENTRY", "ENTRY_FRAME_INVALID", "MISSING_ENTRY")
    }
    emptied = {f["bookie"] for f in findings if f["kind"] == "BOOKIE_HOLDS_NOTHING"}
    for f in manifest["faults"]:
        if f["type"] != "payload-flip":
            continue
        led = manifest["ledgers"][str(f["ledger"])]
        meta = LedgerMetadata(
            int(f["ledger"]),
            int(led["ensemble_size"]),
            int(led["write_quorum"]),
            int(led["ack_quorum"]),
            str(led["state"]),
            int(led["last_entry_id"]),
            int(led["length"]),
            [(int(first), tuple(bookies)) for first, bookies in led["segments"]],
        )
        ws = meta.write_set(int(f["entry"]))
        others = [b for b in ws if b != f["bookie_id"]]
        if (
            len(others) == 1
            and others[0] not in emptied
            and (others[0], f["ledger"], f["entry"]) not in damaged
        ):
            return others[0], int(f["ledger"]), int(f["entry"])
    return None


def run_demo(
    work: str,
    spark: Any,
    *,
    seed: int,
    faults: str,
    say: Callable[[str], None] = print,
) -> BookieDemoResult:
    """The demo's steps under `work` (prepared by the caller: spark_udfs.cli.demodir)."""
    import json

    from merkle.replica.bookkeeper.generate import (
        BookKeeperGeneratorConfig,
        generate_bookies,
        parse_faults,
    )
    from merkle.replica.bookkeeper.metadata import (
        load_instance_id,
        load_ledger_metadata,
        load_registered_cookies,
    )
    from merkle.replica.bookkeeper.scan import list_bookies
    from merkle.replica.fileio import write_atomic
    from spark_udfs.jobs.bookkeeper import META_FILE, scan_bookkeeper
    from spark_udfs.jobs.bookkeeper.plan import bookie_plan, format_bookie_plan

    root = os.path.join(work, BOOKIES_DIR)
    cfg = BookKeeperGeneratorConfig(seed=seed, faults=parse_faults(faults))
    say(
        f"[1/3] generating {cfg.bookies} bookies ({cfg.ledger_dirs} ledger directories each, "
        f"DbLedgerStorage), {cfg.ledgers} ledgers, with injected faults, and their ledger "
        f"metadata as ZooKeeper stores it"
    )
    manifest = generate_bookies(root, cfg)
    paths = [os.path.join(root, b) for b in manifest["bookies"]]
    znodes = os.path.join(root, manifest["metadata"]["znode_tree"])
    out = os.path.join(work, SCAN_DIR)
    say("[2/3] spark scan of the bookies: every stored entry's digest, every write set")
    # as `crcmerkle spark scan BOOKIE... --ledger-metadata ZNODES -o OUT` (which `spark
    # report OUT` reads back): the generated znode tree is complete and parses
    listing = list_bookies(
        paths,
        instance_id=load_instance_id(znodes),
        registered_cookies=load_registered_cookies(znodes),
    )
    tables = scan_bookkeeper(spark, listing, load_ledger_metadata(znodes))
    tables.write(out)
    doc = tables.document(paths, [])
    write_atomic(os.path.join(out, META_FILE), json.dumps(doc, indent=1, sort_keys=True).encode())
    found = [r.asDict() for r in tables.findings.collect()]  # a demo's few dozen
    missing, extra = check_bookie_findings(manifest["expected_findings"], found, root)
    res = BookieDemoResult(
        expected=len(manifest["expected_findings"]), missing=missing, extra=extra
    )
    for f in missing:
        say(f"  MISSING (injected, not found): {f}")
    for f in extra:
        say(f"  EXTRA (found, not injected): {f}")
    counts = Counter(str(f["error"]) for f in found)
    say("  " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    holder = last_good_copy_holder(manifest)
    if holder is None:
        say("[3/3] no payload bit flip whose entry keeps one good copy: no decommission step")
        res.plan_ok = True
        return res
    bookie, lid, eid = holder
    res.leaving, res.entry = bookie, (lid, eid)
    say(
        f"[3/3] may {bookie} go down? It holds the only good copy of ledger {lid} entry {eid} "
        f"(the other copy's payload is flipped): BookKeeper's decommission would re-replicate "
        f"it from that copy, whose digest fails"
    )
    from spark_udfs.jobs.bookkeeper import ENTRY_SCHEMA, LEDGER_SCHEMA

    plan = bookie_plan(
        spark.read.schema(ENTRY_SCHEMA).parquet(os.path.join(out, "entries")),
        spark.read.schema(LEDGER_SCHEMA).parquet(os.path.join(out, "ledgers")),
        [bookie],
        scanned=tables.bookies,
        not_read=[str(f.get("path")) for f in tables.failed],
        first=1000,
    )
    for line in format_bookie_plan(plan).splitlines():
        say("  " + line)
    mine = plan["bookies"][bookie]
    held = next((led for led in mine["ledgers"] if led["ledger"] == lid), None)
    last = (held or {}).get("reasons", {}).get("LAST_GOOD_COPY")
    res.plan_ok = bool(
        not mine["may_go"] and last and last["first_entry"] <= eid <= last["last_entry"]
    )
    return res
