"""Typed errors of the replica layer (layout, block metadata, locks, scan, reconcile).

Every error a caller can act on is a ReplicaError, so the CLI can print it as one line and a
cluster job can catch one type; the subclasses say what went wrong without parsing messages.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "BlockMetaError",
    "NotAReplicaError",
    "ReplicaError",
    "ReplicaLockedError",
    "SourceNotGoodError",
    "TargetExistsError",
    "VolumeError",
    "WriterError",
]


class ReplicaError(Exception):
    """Base class: something about a container replica on disk is wrong or unusable."""

    def __init__(self, message: str, path: Optional[str] = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class NotAReplicaError(ReplicaError):
    """A path that is not a container replica (nor a volume or datanode holding some)."""


class VolumeError(ReplicaError):
    """A whole volume cannot be read (its metadata store cannot be opened, its identity file
    is unusable): reported once for the volume, its replicas not scanned."""


class BlockMetaError(ReplicaError):
    """The block-metadata file is missing, truncated, corrupt, foreign or of a newer version.

    `missing` tells a missing file from an unreadable one (the scanner reports them as
    METADATA_MISSING and METADATA_CORRUPT); `unsupported` a file of a newer format version
    (METADATA_UNSUPPORTED: never rewritten).
    """

    def __init__(
        self,
        message: str,
        path: Optional[str] = None,
        *,
        missing: bool = False,
        unsupported: bool = False,
    ):
        self.missing = missing
        self.unsupported = unsupported
        super().__init__(message, path)


class ReplicaLockedError(ReplicaError):
    """Another process (or another open of the lock in this process) holds the replica lock."""


class WriterError(ReplicaError):
    """A write request that would break the layout (hole in a block file, bad sizes, ...)."""


class SourceNotGoodError(ReplicaError):
    """The source's data does not match its recorded checksums (or is missing): no copy."""


class TargetExistsError(ReplicaError):
    """Something other than an identical replica is already at the target."""
