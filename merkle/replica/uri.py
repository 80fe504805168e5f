"""Locations the jobs take: local paths or URIs (s3://, hdfs://, gs://, file://), and what of
them may be shown.

A URI may carry what opens the store (`s3://KEY:SECRET@bucket/path`,
`?access_key=...&secret_key=...&endpoint_override=host:port&scheme=http`). The whole URI is
only ever used to open the filesystem (on the driver and, inside the work items, on the
executors); everything the jobs write or print (table rows, the report, reconcile commands,
messages) uses `display`: scheme and host kept, user information and secret query
parameters removed, the other query parameters (endpoint, scheme, region) kept so the
location still says which store it is on.

`redact(text)` is the one redactor of every message that may hold a URI (the error line of
both command lines, spark_udfs.cluster.errors, the Spark scan's error rows): each URI in the text is
replaced by its `display` form. Neither can fail, whatever the text: a secret pasted into a
URI unencoded (AWS secrets hold `/` and `+`; any may hold `@`, `%` or `:`) makes the URI
invalid, and then more is removed rather than less. For an object store (s3, gs, ...) a `:`
before the first `/` (bucket names have none) or an `@` there means user information, which
ends at the last `@` before the query; elsewhere `host:port/...` is a host and port.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Tuple
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:  # pyarrow is imported where a location is opened, so that the Spark
    import pyarrow.fs as pafs  # commands' guard can say in one line that it is missing

__all__ = ["Location", "child", "display", "is_uri", "join", "open_fs", "overlaps", "redact"]

#: query parameters that hold secrets (pyarrow's S3/GCS/HDFS URI options and the usual names)
_SECRET_WORDS = (
    "secret",
    "token",
    "password",
    "passwd",
    "access_key",
    "credential",
    "signature",
    "kerb_ticket",
)


def is_uri(location: str) -> bool:
    return "://" in location


#: schemes whose "host" is a bucket (no `:` in it): user information is the only `:` there
_BUCKET_SCHEMES = (
    "s3",
    "s3a",
    "s3n",
    "gs",
    "gcs",
    "abfs",
    "abfss",
    "wasb",
    "wasbs",
    "oss",
    "cos",
    "cosn",
    "obs",
    "r2",
    "az",
    "adl",
)
#: a URI in running text: scheme:// up to white space or a quote
_URI_IN_TEXT = re.compile(r"""[A-Za-z][A-Za-z0-9+.-]*://[^\s'"`<>]*""")


def _is_secret_key(key: str) -> bool:
    name = unquote(key, errors="replace").lower()
    return any(w in name for w in _SECRET_WORDS)


def _safe_query(query: str) -> str:
    """The query without its secret parameters, the others kept as written."""
    return "&".join(p for p in query.split("&") if p and not _is_secret_key(p.partition("=")[0]))


def _split_user_info(scheme: str, rest: str) -> str:
    """`rest` (after `scheme://`, before the query) without user information."""
    first = rest.split("/", 1)[0]
    if "@" not in rest:
        return rest
    if "@" in first:
        return rest.rpartition("@")[2]
    if ":" in first:
        port = first.rpartition(":")[2]
        if scheme.lower() in _BUCKET_SCHEMES or not (port.isdigit() and len(port) <= 5):
            return rest.rpartition("@")[2]
    return rest  # host[:port]/path@with-an-at: no user information


def _clean(location: str) -> Tuple[str, str]:
    """(scheme://host[:port]/path without user information or a trailing slash, the query
    without secrets) of a URI. Never fails (see the module docstring)."""
    scheme, _, rest = location.partition("://")
    rest, _, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    rest = _split_user_info(scheme, rest)
    try:  # the usual form: host lower-cased as urlsplit gives it
        u = urlsplit(f"{scheme}://{rest}")
        host = u.hostname or ""
        if u.port is not None:
            host = f"{host}:{u.port}"
        base = f"{u.scheme}://{host}{u.path.rstrip('/')}"
    except ValueError:  # not a URI urlsplit can read (a bad port, a stray bracket)
        base = f"{scheme}://{rest.rstrip('/')}"
    return base, _safe_query(query)


def redact(text: str) -> str:
    """`text` with every URI in it replaced by its display form (no user information, no
    secret query parameters); text without a URI is returned unchanged. Never fails."""
    try:
        text = str(text)
        if "://" not in text:
            return text
        return _URI_IN_TEXT.sub(lambda m: display(m.group(0)), text)
    except Exception:  # noqa: BLE001 - a message must come out, and without a secret
        return "(a message that could not be shown without its credentials)"


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


def _where(location: str) -> Tuple[str, str]:
    """(the store, the absolute normalised path in it) of a location, for comparing two: a
    local path or file:// URI resolved through its links (one missing part is fine), a URI
    by its scheme and host (no user information, no query) and its path."""
    if is_uri(location) and not location.lower().startswith("file://"):
        base = _clean(location)[0]
        scheme, _, rest = base.partition("://")
        host, slash, path = rest.partition("/")
        return f"{scheme.lower()}://{host.lower()}", os.path.normpath("/" + path)
    path = urlsplit(location).path if is_uri(location) else location
    return "", os.path.realpath(path)


def overlaps(a: str, b: str) -> bool:
    """Whether locations `a` and `b` are the same directory or one lies inside the other
    (a job writing one while it reads the other would overwrite what it reads)."""
    (sa, pa), (sb, pb) = _where(a), _where(b)
    if sa != sb:
        return False
    return pa == pb or pa.startswith(pb.rstrip("/") + "/") or pb.startswith(pa.rstrip("/") + "/")


@dataclass(frozen=True)
class Location:
    """A root opened once: its filesystem, the path inside it, and how to show a path of
    that filesystem (`show`), keeping the URI's scheme, host and safe query."""

    given: str
    filesystem: pafs.FileSystem
    path: str
    prefix: str = ""
    query: str = ""

    @classmethod
    def parse(cls, location: str) -> Location:
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


def open_fs(uri: str) -> Tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) for a local path or a URI."""
    loc = Location.parse(uri)
    return loc.filesystem, loc.path


def join(base: str, *parts: str) -> str:
    """Join path parts with '/', for URIs as well as local paths."""
    return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])
