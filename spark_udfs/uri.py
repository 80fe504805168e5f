"""Locations the jobs take: local paths or URIs (s3://, hdfs://, gs://, file://), and what of
them may be shown.

A URI may carry what opens the store (`s3://KEY:SECRET@bucket/path`,
`?access_key=...&secret_key=...&endpoint_override=host:port&scheme=http`). The whole URI is
only ever used to open the filesystem (on the driver and, inside the work items, on the
executors); everything the jobs write or print (table rows, the report, reconcile commands,
messages) uses `display`: scheme and host kept, user information and secret query
parameters removed, the other query parameters (endpoint, scheme, region) kept so the
location still says which store it is on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Tuple
from urllib.parse import parse_qsl, urlencode, urlsplit

if TYPE_CHECKING:  # pyarrow is imported where a location is opened, so that the Spark
    import pyarrow.fs as pafs  # commands' guard can say in one line that it is missing

__all__ = ["Location", "child", "display", "is_uri"]

#: query parameters that hold secrets (pyarrow's S3/GCS/HDFS URI options and the usual names)
_SECRET_WORDS = ("secret", "token", "password", "passwd", "access_key", "credential",
                 "signature", "kerb_ticket")


def is_uri(location: str) -> bool:
    return "://" in location


def _safe_query(query: str) -> str:
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
             if not any(w in k.lower() for w in _SECRET_WORDS)]
    return urlencode(pairs, safe=":/")


def _clean(location: str) -> Tuple[str, str]:
    """(scheme://host[:port]/path without user information or a trailing slash, the query
    without secrets) of a URI."""
    u = urlsplit(location)
    host = u.hostname or ""
    if u.port is not None:
        host = f"{host}:{u.port}"
    path = u.path.rstrip("/")
    return f"{u.scheme}://{host}{path}", _safe_query(u.query)


def child(location: str, name: str) -> str:
    """`location`/`name`, for a path or a URI (before its query string, if any)."""
    base, sep, query = location.partition("?") if is_uri(location) else (location, "", "")
    return base.rstrip("/") + "/" + name.strip("/") + sep + query


def display(location: str) -> str:
    """`location` as it may be written anywhere: a local path unchanged, a URI without its
    credentials (see the module docstring)."""
    if not is_uri(location):
        return location
    base, query = _clean(location)
    return base + ("?" + query if query else "")


@dataclass(frozen=True)
class Location:
    """A root opened once: its filesystem, the path inside it, and how to show a path of
    that filesystem (`show`), keeping the URI's scheme, host and safe query."""

    given: str
    filesystem: "pafs.FileSystem"
    path: str
    prefix: str = ""
    query: str = ""

    @classmethod
    def parse(cls, location: str) -> "Location":
        import pyarrow.fs as pafs

        if not is_uri(location):
            return cls(location, pafs.LocalFileSystem(), os.path.abspath(location))
        filesystem, path = pafs.FileSystem.from_uri(location)
        base, query = _clean(location)
        inner = path.rstrip("/")
        # prefix + a filesystem path = the URI: s3://bucket/key -> "s3://" + "bucket/key",
        # hdfs://nn:8020/p -> "hdfs://nn:8020" + "/p", file:///p -> "file://" + "/p"
        if inner and base.endswith(inner):
            prefix = base[: len(base) - len(inner)]
        else:
            prefix = base.split("://", 1)[0] + "://"
        return cls(location, filesystem, path, prefix, query)

    @property
    def remote(self) -> bool:
        return is_uri(self.given)

    def show(self, path: str) -> str:
        """How a path of this filesystem is written in rows and messages."""
        if not self.remote:
            return path
        return self.prefix + path + ("?" + self.query if self.query else "")
