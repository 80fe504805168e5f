"""The replica scanner: verify a replica's data against its recorded checksums, keep its
`.tree` current, and report what is wrong (Ozone's on-demand/background container scanner).

For each block in the metadata, each chunk is read window-aligned into one reused buffer per
worker (os.preadv, large sequential reads of `buffer_size`), its windows are checksummed in
one native call per read with the chunk's own type (`checksum_windows(..., out=...)`), and the
observed checksums are compared with the recorded ones in one numpy comparison. The tree is
Ozone's scanner tree (KeyValueContainerCheck): built from the *observed* checksums (corruption
changes the leaf and everything above it), with `checksum_matches` false unless every window
and the length match; chunks of checksum type NONE are skipped (neither read nor in the tree),
and a block is in the tree only if at least one of its chunks was scanned (a block without
chunks, or with only NONE chunks, is left out). It is then merged into the stored tree
(tombstones win, live blocks the scan left out are dropped; merkle.trees.merge.merge) and
written atomically when it changed. The tree built from metadata alone (every recorded chunk,
empty blocks included) is what the replica writer stores when it closes a container, as Ozone
does at container close.

Findings (ScanError.kind), each an `error` or a `warning` (ScanError.severity; the table and
the reasons are in merkle.replica.levels: TREE_MISSING, TREE_CORRUPT and TREE_UNSUPPORTED are
warnings, the derived `.tree` being rebuilt from verified data; the others are errors):
  CORRUPT_CHUNK              a window checksum differs (also a short chunk whose partial last
                             window differs)
  INCONSISTENT_CHUNK_LENGTH  fewer bytes than recorded, every window read matching
  MISSING_CHUNK              no byte of the chunk in the file (no leaf in the tree)
  MISSING_DATA_FILE          the block file does not exist and its first chunk has a length > 0
                             (block absent from the tree; Ozone: EC padding blocks may have
                             no file)
  UNREADABLE_DATA_FILE       the block file exists but cannot be opened/read (I/O error)
  NOT_A_REGULAR_FILE         a link, directory, FIFO, socket or device where a block file,
                             `chunks/`, `metadata/`, `.blocks` or `.tree` should be: never
                             followed, read or written (merkle.replica.safeopen)
  METADATA_MISSING / METADATA_CORRUPT   the `.blocks` file; nothing can be verified, so the
                             scanned tree has no live blocks (reconcile then pulls them back)
  METADATA_UNREADABLE        an I/O error (EACCES, EIO) or a file above the size cap: not
                             corruption; the tree is not rewritten and reconcile refuses
  METADATA_UNSUPPORTED       a `.blocks` of a newer format version: never rewritten
  TREE_MISSING / TREE_CORRUPT           the stored `.tree` (rebuilt from the scan; tombstones
                             it held are lost and must come back from peers)
  TREE_UNREADABLE            an I/O error or a file above the size cap: the `.tree` is left
                             alone (its tombstones are not lost), reconcile refuses
  TREE_UNSUPPORTED           fields nested in the tree that this version does not understand:
                             not rewritten (unknown top-level fields are kept on rewrite)
  TREE_STALE / TREE_FROM_METADATA       the census only (metadata_only, warnings): the stored
                             tree does not describe the block metadata; the tree was built
                             from the recorded checksums (merkle.replica.census)

Whenever one of the last group is reported (or the `.tree`/`.blocks` is not a regular file),
the scan writes nothing: an error we do not understand is never "repaired" by a rewrite.

Memory never depends on a number read from a file: reads use one buffer of `buffer_size` per
worker, and windows larger than it are checksummed piecewise by chaining the CRC (or feeding
the hash) across reads.

Windows of SHA256/MD5 chunks are checked with hashlib one window at a time (a slow path; Ozone
and the generator default to CRC32). Optional worker threads scan blocks in parallel (the GIL
is released while reading and checksumming) and an optional per-volume byte rate limit paces
reads, as Ozone's scanner does (5 MiB/s per volume by default there; unlimited here unless
given: merkle.replica.politeio.DEFAULT_BYTES_PER_SECOND is the default for scans of live
datanodes, with its cost). `drop_cache` drops what was read from the page cache (politeio).
`also` (`crcmerkle scan --also`) computes more CRCs (CRC-64/NVME, S3's) per window and per
block from the same reads (merkle.replica.also; ScanResult.also).
"""

from __future__ import annotations

import os
import time  # noqa: F401  (the clock the rate limiter paces by, reached as scan.time)
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple, Union

from merkle.replica.errors import VolumeError
from merkle.replica.incremental import tracked_scan
from merkle.replica.layout import Layout, ReplicaRef, Volume
from merkle.replica.layouts import layout_of, layouts

# the finding kinds, the result classes and the verifier, re-exported (public names)
from merkle.replica.results import (  # noqa: F401
    CORRUPT_CHUNK,
    INCONSISTENT_CHUNK_LENGTH,
    METADATA_CORRUPT,
    METADATA_MISSING,
    METADATA_UNREADABLE,
    METADATA_UNSUPPORTED,
    MISSING_CHUNK,
    MISSING_DATA_FILE,
    NOT_A_REGULAR_FILE,
    PROTECTED_ERRORS,
    TREE_CORRUPT,
    TREE_FROM_METADATA,
    TREE_MISSING,
    TREE_STALE,
    TREE_UNREADABLE,
    TREE_UNSUPPORTED,
    UNREADABLE_DATA_FILE,
    RateLimiter,
    ScanError,
    ScanResult,
)

# (_Reader, _scan: the verifier's internals, reached here by the reconciler and the tests)
from merkle.replica.verify import (  # noqa: F401
    DEFAULT_BUFFER_SIZE,
    ProgressFn,
    StoredTree,
    _Reader,
    _scan,
    read_stored_tree,
    read_tree_state,
    scan_container,
    scan_files,
)

__all__ = [
    "CORRUPT_CHUNK",
    "INCONSISTENT_CHUNK_LENGTH",
    "METADATA_CORRUPT",
    "METADATA_MISSING",
    "METADATA_UNREADABLE",
    "METADATA_UNSUPPORTED",
    "MISSING_CHUNK",
    "MISSING_DATA_FILE",
    "NOT_A_REGULAR_FILE",
    "PROTECTED_ERRORS",
    "RateLimiter",
    "ScanError",
    "ScanResult",
    "StoredTree",
    "TREE_CORRUPT",
    "TREE_FROM_METADATA",
    "TREE_MISSING",
    "TREE_STALE",
    "TREE_UNREADABLE",
    "TREE_UNSUPPORTED",
    "UNREADABLE_DATA_FILE",
    "read_stored_tree",
    "read_tree_state",
    "scan_container",
    "scan_files",
    "scan_paths",
]

PathLike = Union[str, "os.PathLike[str]"]


def scan_paths(
    paths: Iterable[PathLike],
    *,
    bytes_per_second: Optional[float] = None,
    on_result: Optional[Callable[[ScanResult], Any]] = None,
    on_error: Optional[Callable[[Any, Exception], Any]] = None,
    ozone_scanned: Optional[Dict[Any, Any]] = None,
    tracker: Any = None,
    **kwargs: Any,
) -> List[ScanResult]:
    """Scan every replica under each path (replica, volume, datanode, cluster), one rate
    limiter per volume, each path by its layout (merkle.replica.layouts.layout_of; one call
    may mix layouts: they are scanned in the registry's order). Errors that stop one
    replica's scan (lock held, I/O), an entry the walk cannot use and a volume that cannot
    be read (once) go to `on_error(where, exc)` (`where.root` names it; re-raised without
    `on_error`); the other replicas are still scanned. `write_tree` (default True) is asked
    of every layout; one that cannot write (Ozone) scans read-only. `ozone_scanned` (its
    name kept from when only Ozone's layout used it): the replica directories already
    scanned, shared by calls (a directory met twice is scanned once where the layout can
    tell). `tracker` (merkle.replica.incremental.StateTracker, `--state`): per volume it picks
    the replicas to read and their order, the others' last results (CarriedResult) going to
    `on_result` first; each replica read is recorded with it."""
    kwargs.setdefault("write_tree", True)
    seen: Dict[Any, Any] = {} if ozone_scanned is None else ozone_scanned
    grouped: Dict[str, List[str]] = {}
    for p in paths:
        grouped.setdefault(layout_of(os.fspath(p)).name, []).append(os.fspath(p))
    results: List[ScanResult] = []

    def failed(where: Any, exc: Exception) -> None:
        if on_error is None:
            raise exc
        on_error(where, exc)

    for layout in layouts():
        done: Set[Tuple[str, Optional[str]]] = set()  # a volume given twice: scanned once
        for p in grouped.get(layout.name, ()):
            for volume in _volumes(layout, p, failed):
                if (volume.root, volume.inner) in done:
                    continue
                done.add((volume.root, volume.inner))
                results.extend(
                    _scan_volume(
                        layout, volume, seen, bytes_per_second, on_result, failed, kwargs, tracker
                    )
                )
    return results


def _volumes(layout: Layout, path: str, failed: Callable[[Any, Exception], None]) -> List[Volume]:
    """The volumes under `path` (entries the walk could not use reported: _walk_error)."""
    return layout.volumes(path, _walk_error(layout, failed))


def _scan_volume(
    layout: Layout,
    volume: Volume,
    seen: Dict[Any, Any],
    bytes_per_second: Optional[float],
    on_result: Optional[Callable[[ScanResult], Any]],
    failed: Callable[[Any, Exception], None],
    options: Dict[str, Any],
    tracker: Any = None,
) -> List[ScanResult]:
    """Scan one volume's replicas (a volume that cannot be read is reported once)."""
    if volume.problem is not None:
        failed(volume, VolumeError(volume.problem, volume.root))
        return []
    limiter = RateLimiter(bytes_per_second) if bytes_per_second else None
    results: List[ScanResult] = []
    broken = False
    refs = layout.replicas(volume, _walk_error(layout, failed))
    for ref, result, exc in tracked_scan(
        tracker, layout, volume, refs, limiter=limiter, seen=seen, **options
    ):
        if exc is not None:
            if isinstance(exc, VolumeError):
                if not broken:
                    failed(volume, exc)
                broken = True
            else:
                failed(ref, exc)
            continue
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _walk_error(
    layout: Layout, failed: Callable[[Any, Exception], None]
) -> Callable[[Any, Exception], None]:
    """An entry a walk could not use, reported like a replica that failed (at a ReplicaRef
    with container -1 naming the entry)."""

    def walk_error(where: Any, exc: Exception) -> None:
        failed(ReplicaRef(layout.name, "", os.fspath(where), -1), exc)

    return walk_error
