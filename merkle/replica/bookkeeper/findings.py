"""The findings of a bookie scan: their kinds (levels in merkle.replica.levels) and `Finding`,
which names where each was found (bookie, ledger, entry, file, offset)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, Optional

from merkle.replica.levels import severity_of

__all__ = [
    "BOOKIE_HOLDS_NOTHING",
    "COOKIE_INVALID",
    "COOKIE_MISMATCH",
    "COPIES_DIFFER",
    "CORRUPT_ENTRY",
    "DIGEST_MISMATCH_ALL_COPIES",
    "ENTRY_FRAME_INVALID",
    "ENTRY_LOG_MISSING",
    "ENTRY_OF_OPEN_LEDGER",
    "ENTRY_PAST_LAST_ENTRY",
    "Finding",
    "INDEX_UNREADABLE",
    "LEDGER_IN_WRONG_DIR",
    "LEDGER_METADATA_UNREAD",
    "LEDGER_NOT_IN_METADATA",
    "MASTER_KEY_MISMATCH",
    "MISSING_ENTRY",
    "NOT_A_REGULAR_FILE",
    "UNINDEXED_ENTRY",
]

CORRUPT_ENTRY = "CORRUPT_ENTRY"
DIGEST_MISMATCH_ALL_COPIES = "DIGEST_MISMATCH_ALL_COPIES"
COPIES_DIFFER = "COPIES_DIFFER"
MISSING_ENTRY = "MISSING_ENTRY"
ENTRY_FRAME_INVALID = "ENTRY_FRAME_INVALID"
ENTRY_LOG_MISSING = "ENTRY_LOG_MISSING"
UNINDEXED_ENTRY = "UNINDEXED_ENTRY"
ENTRY_PAST_LAST_ENTRY = "ENTRY_PAST_LAST_ENTRY"
ENTRY_OF_OPEN_LEDGER = "ENTRY_OF_OPEN_LEDGER"
LEDGER_NOT_IN_METADATA = "LEDGER_NOT_IN_METADATA"
LEDGER_METADATA_UNREAD = "LEDGER_METADATA_UNREAD"
LEDGER_IN_WRONG_DIR = "LEDGER_IN_WRONG_DIR"
COOKIE_MISMATCH = "COOKIE_MISMATCH"
COOKIE_INVALID = "COOKIE_INVALID"
INDEX_UNREADABLE = "INDEX_UNREADABLE"
BOOKIE_HOLDS_NOTHING = "BOOKIE_HOLDS_NOTHING"
MASTER_KEY_MISMATCH = "MASTER_KEY_MISMATCH"
NOT_A_REGULAR_FILE = "NOT_A_REGULAR_FILE"


@dataclass
class Finding:
    kind: str
    detail: str
    bookie: Optional[str] = None
    ledger: Optional[int] = None
    entry: Optional[int] = None
    file: Optional[str] = None
    offset: Optional[int] = None
    #: when the data it is about was read, for a finding a --state record gave (the log was
    #: not read again: unchanged and verified within --max-age); None: read by this run
    read_at: Optional[float] = None

    @property
    def severity(self) -> str:
        return severity_of(self.kind)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "error": self.kind,
            "severity": self.severity,
            "bookie": self.bookie,
            "ledger": self.ledger,
            "entry": self.entry,
            "file": self.file,
            "offset": self.offset,
            "detail": self.detail,
            "read_at": self.read_at,
        }

    def line(self) -> str:
        where = [
            f"bookie {self.bookie}" if self.bookie else "",
            f"ledger {self.ledger}" if self.ledger is not None else "",
            f"entry {self.entry}" if self.entry is not None else "",
            (f"{self.file}" + (f" @{self.offset}" if self.offset is not None else ""))
            if self.file
            else "",
        ]
        when = "" if self.read_at is None else f" (as read {_utc(self.read_at)}; not read again)"
        return f"{self.kind} {' '.join(w for w in where if w)}: {self.detail}{when}"


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
