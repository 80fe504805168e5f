"""A GCS bucket as a copy, from a saved listing: `gs://bucket/prefix?listing=FILE` (no
network: every GCS object's crc32c is in its listing already).

FILE may hold, one after another or as the elements of a JSON array:
- the JSON API's objects.list responses (`{"kind": "storage#objects", "items": [...],
  "nextPageToken": ...}`), items being object resources: `name`, `bucket`, `size` (a decimal
  string), `crc32c` (base64 of the 4 big-endian bytes), `md5Hash`, `componentCount`, ...;
- `gcloud storage ls --json` output: a JSON array of `{"url": "gs://b/o", "type":
  "cloud_object", "metadata": {object resource}}` (entries of type "prefix" are folders);
- bare object resources: the JSON API's (`gcloud storage objects list --raw --format=json`)
  or gcloud's own formatting (`gcloud storage objects list --format=json`: `crc32c_hash`,
  `md5_hash`, `size` as a number, `storage_url`, `component_count`).

The file is untrusted: an entry that is not an object, has no name, belongs to another
bucket or lies outside the prefix is skipped and counted (`skips`); an object with a bad
size or checksum is a row with `error`; a noncurrent version (`timeDeleted`) is skipped.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterator, Optional
from urllib.parse import unquote

import pyarrow as pa

from merkle.copies.targets._jsonstream import JsonStream
from merkle.copies.targets._listing import open_listing, query_of
from merkle.copies.targets._rows import BATCH_ROWS, Rows, b64_exact, short, size_value, under
from merkle.copies.targets.base import Target, TargetError

_URL = re.compile(r"gs://([^/]+)/(.+)", re.S)
_GENERATION = re.compile(r"#([0-9]+)\Z")


class GcsTarget(Target):
    kind = "gcs"
    reads_data = False
    PARAMETERS = frozenset({"listing"})

    def preflight(self) -> None:
        open_listing(self.listing, self.display).close()

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        scheme, sep, rest = uri.partition("://")
        rest = rest.partition("#")[0].partition("?")[0]
        bucket, _, path = rest.partition("/")
        if not bucket or "@" in bucket or ":" in bucket:
            raise ValueError(f"target {self.display}: no bucket")
        self.bucket = unquote(bucket)
        self.prefix = unquote(path).strip("/")
        self.listing = query_of(uri).get("listing", "")
        if not self.listing:
            raise ValueError(
                f"target {self.display}: a GCS target is read from a saved "
                f"listing: add ?listing=FILE (objects.list JSON or "
                f"`gcloud storage ls --json` output)"
            )

    def list(self) -> Iterator[pa.RecordBatch]:
        rows = Rows()
        with open_listing(self.listing, self.display) as raw:
            try:
                for _in_array, value in JsonStream(raw).values():
                    self._node(rows, value)
                    if len(rows) >= BATCH_ROWS:
                        yield rows.take()
            except ValueError as exc:
                raise TargetError(f"target {self.display}: listing file: {exc}") from None
        if len(rows):
            yield rows.take()

    def _node(self, rows: Rows, value: Any) -> None:
        """A top-level value or array element: a page of items, or one item."""
        if not isinstance(value, dict):
            self.skips.add("not a JSON object")
            return
        if "items" in value or value.get("kind") == "storage#objects":
            items = value.get("items", [])
            if not isinstance(items, list):
                self.skips.add("a page whose items are not a list")
                return
            for item in items:
                self._item(rows, item)
            return
        self._item(rows, value)

    def _item(self, rows: Rows, item: Any) -> None:
        if not isinstance(item, dict):
            self.skips.add("not a JSON object")
            return
        kind = item.get("type")
        url = item.get("url")
        if isinstance(kind, str) and ("url" in item or "metadata" in item):
            # gcloud storage ls --json: {"url", "type", "metadata"}
            if kind == "prefix":
                self.skips.add("a folder (prefix) entry")
                return
            if kind != "cloud_object":
                self.skips.add(f"not an object (type {short(kind, 30)})")
                return
            meta = item.get("metadata")
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                self.skips.add("an object whose metadata is not a JSON object")
                return
            bucket, name = _from_url(url, meta)
            self._object(rows, meta, bucket, name)
            return
        kind = item.get("kind")
        if kind is not None and kind != "storage#object":
            self.skips.add(f"not an object (kind {short(kind, 30)})")
            return
        bucket, name = item.get("bucket"), item.get("name")
        if name is None and isinstance(item.get("storage_url"), str):
            bucket, name = _from_url(item["storage_url"], item)
        self._object(rows, item, bucket, name)

    def _object(self, rows: Rows, meta: Dict[str, Any], bucket: Any, name: Any) -> None:
        if not isinstance(name, str) or not name:
            self.skips.add("an object without a name")
            return
        if bucket is not None and bucket != self.bucket:
            self.skips.add("another bucket")
            return
        if meta.get("timeDeleted") or meta.get("soft_delete_time") or meta.get("softDeleteTime"):
            self.skips.add("a noncurrent or soft-deleted version")
            return
        rel = under(name, self.prefix)
        if rel is None:
            self.skips.add("outside the prefix")
            return
        errors = []
        size: Optional[int] = None
        if "size" in meta:
            try:
                size = size_value(meta["size"])
            except ValueError as exc:
                errors.append(str(exc))
        else:
            errors.append("no size")
        crc = None
        text = meta.get("crc32c", meta.get("crc32c_hash"))
        if text is not None:
            try:
                crc = b64_exact(text, 4, "crc32c")
            except ValueError as exc:
                errors.append(str(exc))
        other = []
        md5 = meta.get("md5Hash", meta.get("md5_hash"))
        if md5 is not None:
            other.append("md5")
        count = meta.get("componentCount", meta.get("component_count"))
        if count is not None:
            other.append(f"composed of {short(count, 12)} components (no md5)")
        rows.add(
            rel,
            size=size,
            crc32c=crc,
            other=", ".join(other) or None,
            requests=0,
            bytes_read=0,
            error="; ".join(errors) or None,
        )


def _from_url(url: Any, meta: Dict[str, Any]) -> tuple:
    """(bucket, name) of an entry: the metadata's when it has them, else from its
    `gs://bucket/name[#generation]` URL (the generation cut only when it is the one the
    metadata gives or the metadata gives none and the URL ends in '#digits')."""
    bucket, name = meta.get("bucket"), meta.get("name")
    if isinstance(name, str):
        return bucket, name
    if not isinstance(url, str):
        return bucket, None
    m = _URL.fullmatch(url)
    if not m:
        return bucket, None
    ubucket, uname = m.group(1), m.group(2)
    g = _GENERATION.search(uname)
    if g:
        generation = meta.get("generation")
        if generation is None or str(generation) == g.group(1):
            uname = uname[: g.start()]
    return (bucket if bucket is not None else ubucket), uname
