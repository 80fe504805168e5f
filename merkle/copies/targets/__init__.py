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
be listed at all raises TargetError (an OSError, one line, credentials removed).
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
    if scheme in ("s3", "s3a"):
        from merkle.copies.targets.s3 import S3Target
        return S3Target(uri)
    if scheme in ("gs", "gcs"):
        from merkle.copies.targets.gcs import GcsTarget
        return GcsTarget(uri)
    if scheme == "hdfs":
        from merkle.copies.targets.hdfs import HdfsTarget
        return HdfsTarget(uri)
    if scheme in ("", "file"):
        from merkle.copies.targets.local import LocalTarget
        return LocalTarget(uri)
    raise ValueError(f"target {display(uri)}: unsupported scheme {scheme!r} "
                     f"(s3://, gs://...?listing=, hdfs://...?listing=, file:// or a path)")
