"""An S3 bucket (or any S3-compatible store) as a copy: `s3://[KEY:SECRET@]bucket/prefix`
with `?endpoint_override=HOST:PORT` and/or `endpoint=URL`, `scheme=http|https`, `region=`,
`concurrency=N` (requests in flight per describe(), default 16). Without credentials in the
URI (user information, or access_key/secret_key/session_token in the query) boto3's default
chain is used (environment, profile, instance role).

Per object, ONE GetObjectAttributes(Checksum, ObjectParts, ObjectSize, ETag):
- a FULL_OBJECT checksum (or a single PUT's) fills its column as it is;
- a COMPOSITE one (the CRC of the parts' big-endian CRCs, "-N") is turned into the full
  object's value with full_object_crc when the parts' sizes and checksums are listed (pages
  of 1,000 parts: one more request each); the parts are checked against the composite value
  first. When ObjectParts is not given (moto, some S3-compatible stores),
  HeadObject(PartNumber=i, ChecksumMode=ENABLED) per part is tried, and given up at the
  first part without its checksum: the composite value then stays in composite_algorithm /
  composite_crc / parts, the full columns null;
- a store without GetObjectAttributes (or that refuses it) gets one
  HeadObject(ChecksumMode=ENABLED) per object instead, for the rest of the run.
Every HTTP attempt (retries included) is counted in the row's `requests`. A part count is
never trusted beyond S3's 10,000; a listed object gone meanwhile is the error "gone".
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import unquote

import pyarrow as pa

import merkle
from merkle.copies.fold import full_object_crc
from merkle.copies.targets._listing import query_of
from merkle.copies.targets._rows import (
    BATCH_ROWS,
    CRC_BYTES,
    Rows,
    b64_exact,
    conform,
    short,
    under,
)
from merkle.copies.targets.base import Target, TargetError
from merkle.replica.uri import redact

#: S3's own limit on a multipart upload's parts: a larger claim is refused, never allocated
MAX_PARTS = 10_000
#: S3's page of parts in GetObjectAttributes
PART_PAGE = 1000
_CRC_FN = {"crc32": merkle.crc32, "crc32c": merkle.crc32c, "crc64nvme": merkle.crc64nvme}
_CHECKSUM_KEYS = {
    "ChecksumCRC32": "crc32",
    "ChecksumCRC32C": "crc32c",
    "ChecksumCRC64NVME": "crc64nvme",
    "ChecksumSHA1": "sha1",
    "ChecksumSHA256": "sha256",
}
_SUFFIX = re.compile(r"(.*)-([0-9]{1,6})")
_MD5 = re.compile(r"[0-9a-fA-F]{32}")
_MD5_PARTS = re.compile(r"[0-9a-fA-F]{32}-([0-9]{1,6})")
#: replies meaning "this store has no GetObjectAttributes (or will not give it to us)"
_NO_ATTRIBUTES = {
    "NotImplemented",
    "MethodNotAllowed",
    "AccessDenied",
    "InvalidRequest",
    "InvalidArgument",
    "501",
    "405",
    "403",
}


class _Gone(Exception):
    pass


class S3Target(Target):
    kind = "s3"
    reads_data = False
    needs_describe = True
    _transient = ("_client", "_local")
    PARAMETERS = frozenset(
        {
            "endpoint_override",
            "endpoint",
            "scheme",
            "region",
            "concurrency",
            "access_key",
            "secret_key",
            "session_token",
        }
    )

    def preflight(self) -> None:
        try:
            import boto3  # noqa: F401
            import botocore  # noqa: F401
        except ImportError:
            raise TargetError(
                f"target {self.display}: S3 targets need boto3 (pip install 'crcmerkle[s3]')"
            ) from None

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        scheme, sep, rest = uri.partition("://")
        if not sep or scheme.lower() not in ("s3", "s3a"):
            raise ValueError(f"target {self.display}: not an s3:// URI")
        rest = rest.partition("#")[0].partition("?")[0]
        first = rest.split("/", 1)[0]
        user = ""
        if "@" in first or (":" in first and "@" in rest):
            user, _, rest = rest.rpartition("@")
        bucket, _, path = rest.partition("/")
        if not bucket or ":" in bucket or "@" in bucket:
            raise ValueError(f"target {self.display}: no bucket")
        self.bucket = unquote(bucket)
        self.prefix = unquote(path).strip("/")
        query = query_of(uri)
        key, _, secret = user.partition(":")
        self.access_key = unquote(key) or query.get("access_key") or None
        self.secret_key = unquote(secret) or query.get("secret_key") or None
        self.session_token = query.get("session_token") or None
        if bool(self.access_key) != bool(self.secret_key):
            raise ValueError(f"target {self.display}: an access key needs its secret")
        self.region = query.get("region") or None
        http = query.get("scheme", "https").lower()
        if http not in ("http", "https"):
            raise ValueError(f"target {self.display}: scheme must be http or https")
        self.endpoint: Optional[str] = query.get("endpoint") or None
        if not self.endpoint and query.get("endpoint_override"):
            self.endpoint = f"{http}://{query['endpoint_override']}"
        try:
            self.concurrency = int(query.get("concurrency", "16"))
        except ValueError:
            raise ValueError(f"target {self.display}: concurrency must be a number") from None
        if not 1 <= self.concurrency <= 256:
            raise ValueError(f"target {self.display}: concurrency must be in 1..256")
        #: False once the store refused GetObjectAttributes: HeadObject from then on
        self.attributes_supported = True
        self._client: Any = None
        self._local: Any = None

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    # -- the client, opened lazily in each process ------------------------------------------
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise TargetError("S3 targets need boto3 (pip install 'crcmerkle[s3]')") from None
            config = Config(
                max_pool_connections=self.concurrency + 4,
                retries={"mode": "standard", "max_attempts": 3},
                connect_timeout=10,
                read_timeout=60,
                # what the store keeps is asked for, never computed here
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                s3={"addressing_style": "path"} if self.endpoint else None,
            )
            session = boto3.session.Session()
            client = session.client(
                "s3",
                endpoint_url=self.endpoint,
                region_name=self.region,
                aws_access_key_id=self.access_key,
                aws_secret_access_key=self.secret_key,
                aws_session_token=self.session_token,
                config=config,
            )
            self._local = threading.local()
            # every HTTP attempt, retries included, is one request to the store
            client.meta.events.register("before-send.s3", self._count)
            self._client = client
        return self._client

    def _count(self, **_: Any) -> None:
        local = self._local
        local.n = getattr(local, "n", 0) + 1

    def _take_count(self) -> int:
        n = getattr(self._local, "n", 0)
        self._local.n = 0
        return n

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _fail(self, what: str, exc: BaseException) -> TargetError:
        return TargetError(f"target {self.display}: {what}: {_reason(exc)}")

    # -- list ---------------------------------------------------------------------------------
    def list(self) -> Iterator[pa.RecordBatch]:
        client = self.client()
        self._take_count()
        rows = Rows()
        kwargs: Dict[str, Any] = {
            "Bucket": self.bucket,
            "MaxKeys": 1000,
            "Prefix": self.prefix + "/" if self.prefix else "",
        }
        pages = 0
        while True:
            try:
                page = client.list_objects_v2(**kwargs)
            except Exception as exc:
                self.list_requests += self._take_count()
                raise self._fail("cannot list", exc) from None
            self.list_requests += self._take_count()
            pages += 1
            for item in page.get("Contents") or []:
                self._listed(rows, item)
                if len(rows) >= BATCH_ROWS:
                    yield rows.take()
            if not page.get("IsTruncated"):
                break
            token = page.get("NextContinuationToken")
            if not token or token == kwargs.get("ContinuationToken"):
                raise TargetError(
                    f"target {self.display}: listing page {pages} is truncated "
                    f"but gives no new continuation token"
                )
            kwargs["ContinuationToken"] = token
        if len(rows):
            yield rows.take()

    def _listed(self, rows: Rows, item: Dict[str, Any]) -> None:
        key = item.get("Key")
        if not isinstance(key, str):
            self.skips.add("a listed entry without a key")
            return
        name = under(key, self.prefix)
        if name is None:
            self.skips.add("outside the prefix")
            return
        size = item.get("Size")
        if key.endswith("/") and size == 0:
            self.skips.add("directory marker (an empty key ending in '/')")
            return
        if not isinstance(size, int) or size < 0:
            rows.add(name, error=f"listed with a bad size {short(size)}")
            return
        rows.add(name, size=size, other=_etag_kind(item.get("ETag")))

    # -- describe -----------------------------------------------------------------------------
    def describe(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        rows = conform(batch)
        self.client()
        out = Rows()
        # a pool per call: a Spark task's Target is a fresh copy, and threads left behind by
        # each would pile up in the executor
        workers = max(1, min(self.concurrency, len(rows)))
        with ThreadPoolExecutor(workers, thread_name_prefix="s3-describe") as pool:
            for row in pool.map(self._describe_one, rows):
                out.add_row(row)
        return out.batch()

    def _describe_one(self, row: Dict[str, Any]) -> Dict[str, Any]:
        if row.get("error") or not row.get("name"):
            return dict(
                row,
                requests=row.get("requests") or 0,
                bytes_read=row.get("bytes_read") or 0,
                error=row.get("error") or "no name",
            )
        self._take_count()
        row = dict(
            row,
            crc32=None,
            crc32c=None,
            crc64nvme=None,
            composite_algorithm=None,
            composite_crc=None,
            parts=None,
            bytes_read=0,
            error=None,
        )
        key = self._key(row["name"])
        try:
            info = self._attributes(key) if self.attributes_supported else None
            if info is None:
                info = self._head(key)
            self._fill(row, key, info)
        except _Gone:
            row["error"] = "gone"
        except ValueError as exc:
            row["error"] = redact(str(exc)).replace("\n", " ")
        except Exception as exc:  # one object's failure is that row's, the walk goes on
            row["error"] = _reason(exc)
        row["requests"] = self._take_count()
        return row

    def _attributes(self, key: str) -> Optional[Dict[str, Any]]:
        """GetObjectAttributes as {size, etag, type, checks, parts_count, parts}; None when
        the store has no such call (then HeadObject is used from now on)."""
        try:
            reply = self.client().get_object_attributes(
                Bucket=self.bucket,
                Key=key,
                MaxParts=PART_PAGE,
                ObjectAttributes=["ETag", "Checksum", "ObjectParts", "ObjectSize"],
            )
        except Exception as exc:
            code = _code(exc)
            if code in ("NoSuchKey", "404", "NotFound"):
                raise _Gone() from None
            if code in _NO_ATTRIBUTES:
                self.attributes_supported = False
                return None
            raise
        checksum = reply.get("Checksum") or {}
        info: Dict[str, Any] = {
            "size": reply.get("ObjectSize"),
            "etag": reply.get("ETag"),
            "type": checksum.get("ChecksumType"),
            "checks": {alg: checksum[k] for k, alg in _CHECKSUM_KEYS.items() if k in checksum},
            "parts_count": None,
            "parts": None,
        }
        parts = reply.get("ObjectParts")
        if isinstance(parts, dict):
            info["parts_count"] = parts.get("TotalPartsCount")
            info["parts"] = lambda: self._all_parts(key, parts)
        return info

    def _all_parts(self, key: str, first: Dict[str, Any]) -> List[Dict[str, Any]]:
        """Every part GetObjectAttributes lists, paging with PartNumberMarker (each page one
        request); bounded by MAX_PARTS whatever the server says."""
        parts = list(first.get("Parts") or [])
        page = first
        while page.get("IsTruncated"):
            marker = page.get("NextPartNumberMarker")
            if (
                not isinstance(marker, int)
                or marker <= (page.get("PartNumberMarker") or 0)
                or len(parts) > MAX_PARTS
            ):
                raise ValueError("the parts' pages do not advance")
            reply = self.client().get_object_attributes(
                Bucket=self.bucket,
                Key=key,
                MaxParts=PART_PAGE,
                PartNumberMarker=marker,
                ObjectAttributes=["ObjectParts"],
            )
            page = reply.get("ObjectParts") or {}
            parts.extend(page.get("Parts") or [])
        if len(parts) > MAX_PARTS:
            raise ValueError(f"lists {len(parts)} parts (S3 allows {MAX_PARTS})")
        return parts

    def _head(self, key: str, part: Optional[int] = None) -> Dict[str, Any]:
        kwargs: Dict[str, Any] = {"Bucket": self.bucket, "Key": key, "ChecksumMode": "ENABLED"}
        if part is not None:
            kwargs["PartNumber"] = part
        try:
            reply = self.client().head_object(**kwargs)
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                raise _Gone() from None
            raise
        headers = (reply.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
        count = reply.get("PartsCount", headers.get("x-amz-mp-parts-count"))
        return {
            "size": reply.get("ContentLength"),
            "etag": reply.get("ETag"),
            "type": reply.get("ChecksumType"),
            "checks": {alg: reply[k] for k, alg in _CHECKSUM_KEYS.items() if k in reply},
            "parts_count": count,
            "parts": None,
        }

    def _fill(self, row: Dict[str, Any], key: str, info: Dict[str, Any]) -> None:
        size = info.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"bad object size {short(size)}")
        row["size"] = size
        other: List[str] = []
        etag = _etag_kind(info.get("etag"))
        if etag:
            other.append(etag)
        ctype = str(info.get("type") or "").upper()
        for alg, text in info["checks"].items():
            if not isinstance(text, str):
                raise ValueError(f"bad {alg} value {short(text)}")
            m = _SUFFIX.fullmatch(text)
            value, suffix = (m.group(1), int(m.group(2))) if m else (text, None)
            composite = ctype == "COMPOSITE" or suffix is not None
            if alg in ("sha1", "sha256"):
                other.append(
                    f"{alg} composite ({suffix} parts)"
                    if composite and suffix
                    else f"{alg} composite"
                    if composite
                    else alg
                )
                continue
            width = CRC_BYTES[alg]
            raw = b64_exact(value, width, alg)
            if not composite:
                row[alg] = raw
                continue
            count = suffix if suffix is not None else _part_count(info, etag_text=info.get("etag"))
            full, part_sizes = self._compose(key, alg, raw, count, size, info)
            if full is not None:
                row[alg] = full
            elif row["composite_algorithm"] is None:
                row["composite_algorithm"], row["composite_crc"] = alg, raw
                row["parts"] = count if part_sizes is None else len(part_sizes)
                row["part_sizes"] = part_sizes
        row["other"] = ", ".join(other) or None

    def _compose(
        self,
        key: str,
        alg: str,
        composite: bytes,
        count: Optional[int],
        size: int,
        info: Dict[str, Any],
    ) -> Tuple[Optional[bytes], Optional[List[int]]]:
        """(the full-object value of a composite one from its parts, None) or, when the
        parts' checksums cannot be had, (None, every part's size if the store gave them,
        else None). ValueError when they contradict the composite value or the size."""
        if count is not None and not 1 <= count <= MAX_PARTS:
            raise ValueError(f"claims {count} parts (S3 allows 1..{MAX_PARTS})")
        listed: Optional[Tuple[List[int], Optional[List[int]]]] = _from_attributes(info, alg)
        if listed is None:
            listed = self._parts_by_head(key, alg, count)
        if listed is None:
            return None, None
        sizes, crcs = listed
        if count is not None and len(sizes) != count:
            raise ValueError(f"{len(sizes)} parts listed but the value says {count}")
        if sum(sizes) != size:
            raise ValueError(f"the parts add up to {sum(sizes)} bytes, the object has {size}")
        if crcs is None:
            return None, sizes
        if count is not None and len(crcs) != count:
            raise ValueError(f"{len(crcs)} parts listed but the value says {count}")
        width = CRC_BYTES[alg]
        joined = b"".join(c.to_bytes(width, "big") for c in crcs)
        if _CRC_FN[alg](joined).to_bytes(width, "big") != composite:
            raise ValueError(f"composite {alg} does not match its parts' {alg} values")
        return full_object_crc(crcs, sizes, alg).to_bytes(width, "big"), None

    def _parts_by_head(
        self, key: str, alg: str, count: Optional[int]
    ) -> Optional[Tuple[List[int], Optional[List[int]]]]:
        """Each part's size and checksum by HeadObject(PartNumber=i) (one request a part:
        only for a store whose GetObjectAttributes lists no parts); when the store gives
        the parts' sizes but not their checksums (moto), the sizes alone (crcs None): the
        copy check makes the composite from the key's windows with them. None when not even
        the sizes can be had."""
        sizes: List[int] = []
        crcs: Optional[List[int]] = []
        header = next(k for k, a in _CHECKSUM_KEYS.items() if a == alg)
        number = 1
        while count is None or number <= count:
            reply = self._head(key, number)
            if count is None:
                count = _int_or_none(reply.get("parts_count"))
                if count is None or not 1 <= count <= MAX_PARTS:
                    return None
            text = reply["checks"].get(alg)
            psize = reply.get("size")
            if not isinstance(psize, int) or isinstance(psize, bool) or psize < 0:
                return None
            sizes.append(psize)
            if crcs is not None and isinstance(text, str):
                m = _SUFFIX.fullmatch(text)
                raw = b64_exact(
                    m.group(1) if m else text, CRC_BYTES[alg], f"part {number} {header}"
                )
                crcs.append(int.from_bytes(raw, "big"))
            else:
                crcs = None  # one part without its value: none of them is of use
            number += 1
        return sizes, crcs


def _from_attributes(info: Dict[str, Any], alg: str) -> Optional[Tuple[List[int], List[int]]]:
    """The parts GetObjectAttributes listed, when each has its size and `alg` checksum, in
    part order; None otherwise."""
    fetch = info.get("parts")
    if fetch is None:
        return None
    parts = fetch()
    if not parts:
        return None
    key = next(k for k, a in _CHECKSUM_KEYS.items() if a == alg)
    sizes: List[int] = []
    crcs: List[int] = []
    last = 0
    for part in parts:
        if not isinstance(part, dict):
            return None
        number, psize, text = part.get("PartNumber"), part.get("Size"), part.get(key)
        if (
            not isinstance(number, int)
            or number <= last
            or not isinstance(psize, int)
            or psize < 0
            or not isinstance(text, str)
        ):
            return None
        last = number
        m = _SUFFIX.fullmatch(text)
        raw = b64_exact(m.group(1) if m else text, CRC_BYTES[alg], f"part {number} {key}")
        sizes.append(psize)
        crcs.append(int.from_bytes(raw, "big"))
    return sizes, crcs


def _part_count(info: Dict[str, Any], etag_text: object) -> Optional[int]:
    count = _int_or_none(info.get("parts_count"))
    if count is not None:
        return count
    m = _MD5_PARTS.fullmatch(str(etag_text or "").strip('"'))
    return int(m.group(1)) if m else None


def _int_or_none(value: object) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 9:
        return int(value)
    return None


def _etag_kind(etag: object) -> Optional[str]:
    """What an ETag is, for `other`: an MD5 of the bytes, a multipart one (MD5 of the
    parts' MD5s, "-N"), or opaque (encrypted objects, other stores)."""
    text = str(etag or "").strip('"')
    if not text:
        return None
    if _MD5.fullmatch(text):
        return "etag md5"
    m = _MD5_PARTS.fullmatch(text)
    if m:
        return f"etag multipart md5 ({int(m.group(1))} parts)"
    return "etag (opaque)"


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error") or {}
        code = str(error.get("Code") or "")
        status = str((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or "")
        if status == "404":
            return "404"
        return code or status
    return ""


def _reason(exc: BaseException) -> str:
    """One line naming the failure, any URI in it without credentials."""
    text = str(exc) or type(exc).__name__
    return redact(" ".join(text.split()))[:300]
