"""Targets: the copies a key map is checked against (issue 27), each as rows of
TARGET_SCHEMA: name (relative to the root), size, the full-object CRCs the store keeps
(crc32, crc32c, crc64nvme: big-endian bytes), an S3 composite value that could not be turned
into a full one, the checksums that are not comparable (`other`), and what it cost.

    target = open_target("s3://bucket/prefix?endpoint_override=host:9000&scheme=http")
    for batch in target.list():              # names and sizes (driver)
        rows = target.describe(batch)        # checksums (executors: Target is picklable)

Kinds: s3.py (any S3-compatible store: one GetObjectAttributes per object), gcs.py (a saved
GCS listing: `gs://bucket/prefix?listing=FILE`), hdfs.py (saved `hdfs dfs -checksum`
output: `hdfs://nn/path?listing=FILE`), local.py (a directory, read and checksummed: the
only kind that reads data). `open_target` picks one by the URI's scheme.

A row that cannot be described has `error` (one line) and the walk goes on; entries of a
listing that are not rows (outside the root, another bucket, not an object) are counted in
`target.skips.reasons` ({reason: count}; `target.skipped` their total). A target that cannot
be listed at all raises TargetError (an OSError, one line, credentials removed);
`target.preflight()` finds the commonest such causes before a job starts. A URI parameter its
kind does not take is refused (ValueError), never ignored.
"""

from __future__ import annotations

from merkle.copies.targets._rows import TARGET_SCHEMA
from merkle.copies.targets.base import Target, TargetError

__all__ = ["TARGET_SCHEMA", "Target", "TargetError", "open_target"]


def open_target(uri: str) -> Target:
    """The Target a URI names (nothing is opened yet); ValueError (one line) for a URI that
    is bad or of an unsupported kind."""
    from merkle.replica.uri import display

    if not isinstance(uri, str) or not uri:
        raise ValueError("target: empty URI")
    scheme = uri.partition("://")[0].lower() if "://" in uri else ""
    kind: type[Target]
    if scheme in ("s3", "s3a"):
        from merkle.copies.targets.s3 import S3Target as kind
    elif scheme in ("gs", "gcs"):
        from merkle.copies.targets.gcs import GcsTarget as kind
    elif scheme == "hdfs":
        from merkle.copies.targets.hdfs import HdfsTarget as kind
    elif scheme in ("", "file"):
        from merkle.copies.targets.local import LocalTarget as kind
    else:
        raise ValueError(
            f"target {display(uri)}: unsupported scheme {scheme!r} "
            f"(s3://, gs://...?listing=, hdfs://...?listing=, file:// or a path)"
        )
    if scheme:  # a plain path has no query: a '?' is part of its name
        _known_parameters(uri, kind.PARAMETERS)
    return kind(uri)


def _known_parameters(uri: str, known: frozenset) -> None:
    """ValueError (one line) for a query parameter the target's kind does not take."""
    from urllib.parse import parse_qsl

    from merkle.replica.uri import display

    query = uri.partition("?")[2].partition("#")[0]
    for name, _ in parse_qsl(query, keep_blank_values=True):
        if name not in known:
            shown = repr(name[:40])
            takes = ", ".join(sorted(known)) or "none"
            raise ValueError(
                f"target {display(uri)}: unknown parameter {shown} (this kind takes: {takes})"
            )
