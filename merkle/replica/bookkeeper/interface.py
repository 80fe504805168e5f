"""The Layout interface (merkle.replica.layout) for Apache BookKeeper bookies, read-only.

A volume is one ledger directory of a bookie (its `current/VERSION` cookie names the bookie:
`bookieHost`, its bookie ID, is the volume's datanode; `instanceId` its cluster); a replica is
one ledger stored there (container = ledger ID). The copies of a ledger are only meaningful
against the ledger metadata (digest type, password, ensembles), so the data scan is
`crcmerkle scan BOOKIE_DIR... --ledger-metadata PATH` (merkle.replica.bookkeeper.scan); the
interface's `scan` says so in one line. Everything that would write (generate, replicate,
repair) is refused by ReadOnlyLayout.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.bookkeeper.bookies import LedgerDir, find_ledger_dirs, read_cookie
from merkle.replica.errors import ReplicaError
from merkle.replica.layout import (
    UNKNOWN_DATANODE,
    ReadOnlyLayout,
    ReplicaRef,
    Volume,
    WalkErrorFn,
)
from merkle.replica.uri import is_uri

__all__ = ["LAYOUT", "BookKeeperLayout"]

_SCAN_HINT = (
    "BookKeeper bookies are verified against their ledger metadata: crcmerkle scan "
    "BOOKIE_DIR... --ledger-metadata PATH"
)


#: `recognises` looks at no more subdirectories than this per directory (it must stay cheap)
_RECOGNISE_ENTRIES = 64


class BookKeeperLayout(ReadOnlyLayout):
    name = "bookkeeper"
    title = "BookKeeper"

    def recognises(self, root: str) -> bool:
        if is_uri(root):
            return False
        try:
            return bool(find_ledger_dirs(root, max_entries=_RECOGNISE_ENTRIES))
        except OSError:
            return False

    def volumes(self, root: str, on_error: Optional[WalkErrorFn] = None) -> List[Volume]:
        found = find_ledger_dirs(root)
        if not found:
            raise ReplicaError(f"{root}: no bookie ledger directory here")
        out = []
        for path in found:
            d = LedgerDir(path)
            read_cookie(d)
            cookie = d.cookie
            out.append(
                Volume(
                    self.name,
                    path,
                    cookie.bookie_id if cookie else UNKNOWN_DATANODE,
                    datanode_uuid=cookie.bookie_id if cookie else None,
                    cluster_id=(cookie.instance_id or None) if cookie else None,
                    problem=d.problem,
                )
            )
        return out

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None) -> List[ReplicaRef]:
        """One ReplicaRef per ledger the directory's index holds (container = ledger ID)."""
        from merkle.replica.bookkeeper.index import IndexError_, db_indexes, idx_files
        from merkle.replica.safeopen import open_dir

        current = os.path.join(volume.root, "current")
        if volume.problem:
            return []
        try:
            if os.path.isdir(os.path.join(current, "locations")):
                ledgers, entries, _ = db_indexes(current)
                ids = set(ledgers) | {e[0] for e in entries}
            else:
                fd = open_dir(current)
                try:
                    ids = {int(name[:-4], 16) for _, _, name in idx_files(fd)}
                finally:
                    os.close(fd)
        except (IndexError_, OSError) as exc:
            if on_error is None:
                raise ReplicaError(str(exc), current) from None
            on_error(volume, exc)
            return []
        return [
            ReplicaRef(self.name, volume.datanode, volume.root, lid, fs_root=volume.root)
            for lid in sorted(ids)
        ]

    def open_files(self, replica: ReplicaRef) -> Any:
        raise ReplicaError(_SCAN_HINT, replica.path)

    def data_bytes(self, replica: ReplicaRef) -> Optional[int]:
        return None

    def scan(
        self,
        replicas: Iterable[ReplicaRef],
        *,
        trees_only: bool = False,
        metadata_only: bool = False,
        **options: Any,
    ) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
        for ref in replicas:
            yield ref, None, ReplicaError(_SCAN_HINT, ref.path)

    def datanode_of(self, path: str) -> str:
        d = LedgerDir(path)
        read_cookie(d)
        return d.cookie.bookie_id if d.cookie else UNKNOWN_DATANODE


LAYOUT = BookKeeperLayout()
