"""The Target interface every kind of copy implements (see the package docstring)."""

from __future__ import annotations

from typing import Any, Dict, Iterator

import pyarrow as pa

from merkle.copies.targets._rows import Skips
from merkle.replica.uri import display as _display


class Target:
    """A copy's root: its objects listed (`list`) and described (`describe`).

    Picklable (Spark ships it to executors): it holds the URI and options; clients, pools
    and descriptors are opened lazily and dropped from the pickled state."""

    #: what kind of store ("s3", "gcs", "hdfs", "local")
    kind = ""
    #: True only where describe() reads the objects' data (a local directory)
    reads_data = False

    def __init__(self, uri: str) -> None:
        self.uri = uri
        #: the URI without credentials (for reports and messages)
        self.display = _display(uri)
        #: requests list() made so far (S3 ListObjectsV2 pages)
        self.list_requests = 0
        #: entries of the listing that are not rows, counted by reason
        self.skips = Skips()

    @property
    def skipped(self) -> int:
        return self.skips.total

    def list(self) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    #: False when list() already gives every column (GCS, HDFS listings): describe() is
    #: the identity, and a job need not run it
    needs_describe = False

    def describe(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The listing already says all there is (GCS, HDFS): the rows as they are."""
        return batch

    #: the URI query parameters this kind takes (any other is refused: a mistyped
    #: `endpoint_overide` would silently send the requests elsewhere)
    PARAMETERS: frozenset = frozenset()

    def preflight(self) -> None:
        """What can be checked before any job starts (a directory or listing file that is
        not there, a client library not installed): TargetError, one line. Opens nothing
        that stays open."""

    # clients and pools are per process: never pickled
    _transient: tuple = ()

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        for key in self._transient:
            state[key] = None
        return state

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.display}>"


class TargetError(OSError):
    """A target that cannot be listed at all (a missing bucket, no access, an unreadable
    listing file): one line, credentials removed."""
