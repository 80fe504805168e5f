"""Targets of the copy check (issue 27): S3 against moto's server on 127.0.0.1 (real HTTP
through boto3, requests compared with the server's own counter), saved GCS and HDFS
listings (realistic and hostile), and a local directory with a link and a FIFO."""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Dict, List

import pyarrow as pa
import pytest

import merkle
from merkle.copies.targets import TARGET_SCHEMA, Target, TargetError, open_target

sys.path.insert(0, str(Path(__file__).resolve().parent))

PART = 5 << 20  # S3's smallest part but the last


def b64(value: int, n: int) -> str:
    return base64.b64encode(value.to_bytes(n, "big")).decode()


def crcs(data: bytes) -> Dict[str, bytes]:
    return {
        "crc32": merkle.crc32(data).to_bytes(4, "big"),
        "crc32c": merkle.crc32c(data).to_bytes(4, "big"),
        "crc64nvme": merkle.crc64nvme(data).to_bytes(8, "big"),
    }


def rows_of(target: Target) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for batch in target.list():
        assert batch.schema == TARGET_SCHEMA
        described = target.describe(batch)
        assert described.schema == TARGET_SCHEMA
        assert described.num_rows == batch.num_rows
        for row in described.to_pylist():
            assert row["name"] not in out
            out[row["name"]] = row
    return out


def test_schema_contract() -> None:
    assert TARGET_SCHEMA.names == [
        "name",
        "size",
        "crc32",
        "crc32c",
        "crc64nvme",
        "composite_algorithm",
        "composite_crc",
        "parts",
        "part_sizes",
        "other",
        "requests",
        "bytes_read",
        "error",
    ]
    assert [str(f.type) for f in TARGET_SCHEMA] == [
        "string",
        "int64",
        "binary",
        "binary",
        "binary",
        "string",
        "binary",
        "int32",
        "list<item: int64>",
        "string",
        "int32",
        "int64",
        "string",
    ]


@pytest.mark.parametrize(
    "uri",
    [
        "ftp://h/x",
        "gs://bucket/p",
        "hdfs://nn/p",
        "",
        "s3://",
        "s3://bucket/p?scheme=gopher",
        "s3://K@bucket/p",
    ],
)
def test_bad_uris_are_one_line_value_errors(uri: str) -> None:
    with pytest.raises(ValueError) as info:
        open_target(uri)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "uri",
    [
        "s3://bucket/p?endpoint_overide=127.0.0.1:9000",
        "gs://bucket/p?listing=/x&listng=/y",
        "hdfs://nn/p?listing=/x&combine=1",
        "file:///tmp/x?read=all",
    ],
)
def test_unknown_uri_parameters_are_refused(uri: str) -> None:
    """A mistyped parameter is never ignored (an `endpoint_overide` would send the requests
    to AWS instead of the store meant): one line naming it."""
    with pytest.raises(ValueError, match="unknown parameter") as info:
        open_target(uri)
    assert "\n" not in str(info.value)


def test_preflight_finds_a_target_that_is_not_there(tmp_path: Path, monkeypatch) -> None:
    """What a job would fail on after Spark started, found before: a directory or listing
    file that does not exist, an S3 target without boto3 (the `s3` extra)."""
    for uri in (
        str(tmp_path / "absent"),
        f"file://{tmp_path}/absent",
        f"gs://b/p?listing={tmp_path}/absent.json",
        f"hdfs://nn/p?listing={tmp_path}/absent.txt",
        f"gs://b/p?listing={tmp_path}",
    ):  # a directory, not a listing file
        with pytest.raises(TargetError) as info:
            open_target(uri).preflight()
        assert "\n" not in str(info.value)
    open_target(str(tmp_path)).preflight()  # there: no error
    monkeypatch.setitem(sys.modules, "boto3", None)  # `import boto3` raises ImportError
    with pytest.raises(TargetError, match=r"crcmerkle\[s3\]"):
        open_target("s3://bucket/p").preflight()


# -- S3 ---------------------------------------------------------------------------------------

pytest.importorskip("moto")
pytest.importorskip("boto3")
from loopback_s3 import SECRET_KEY, LoopbackS3  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    with LoopbackS3() as server:
        yield server


def client_of(target: Target) -> Any:
    return target.client()  # type: ignore[attr-defined]


def multipart(
    client: Any, bucket: str, key: str, parts: List[bytes], algorithm: str, full: bool
) -> None:
    kw = {"ChecksumType": "FULL_OBJECT"} if full else {}
    up = client.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=algorithm, **kw)
    done = []
    for i, body in enumerate(parts, 1):
        r = client.upload_part(
            Bucket=bucket,
            Key=key,
            UploadId=up["UploadId"],
            PartNumber=i,
            Body=body,
            ChecksumAlgorithm=algorithm,
        )
        done.append(
            {"PartNumber": i, "ETag": r["ETag"]}
            if full
            else {
                "PartNumber": i,
                "ETag": r["ETag"],
                f"Checksum{algorithm}": r[f"Checksum{algorithm}"],
            }
        )
    extra: Dict[str, Any] = {}
    if full:
        whole = crcs(b"".join(parts))[algorithm.lower()]
        extra = {
            "ChecksumType": "FULL_OBJECT",
            f"Checksum{algorithm}": base64.b64encode(whole).decode(),
        }
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=up["UploadId"], MultipartUpload={"Parts": done}, **extra
    )


@pytest.fixture(scope="module")
def uploaded(s3):
    """Each upload kind under kinds/, and what was uploaded."""
    target = open_target(s3.uri("kinds"))
    c = client_of(target)
    data: Dict[str, bytes] = {}
    small = os.urandom(100_003)
    for alg in ("CRC32", "CRC32C", "CRC64NVME", "SHA256"):
        c.put_object(Bucket=s3.bucket, Key=f"kinds/single-{alg}", Body=small, ChecksumAlgorithm=alg)
        data[f"single-{alg}"] = small
    c.put_object(Bucket=s3.bucket, Key="kinds/plain", Body=small)
    data["plain"] = small
    c.put_object(Bucket=s3.bucket, Key="kinds/empty", Body=b"", ChecksumAlgorithm="CRC32C")
    data["empty"] = b""
    parts = [os.urandom(PART), os.urandom(PART), os.urandom(777)]
    for alg in ("CRC32", "CRC32C"):
        multipart(c, s3.bucket, f"kinds/dir/composite-{alg}", parts, alg, full=False)
        data[f"dir/composite-{alg}"] = b"".join(parts)
    for alg in ("CRC32", "CRC32C", "CRC64NVME"):
        multipart(c, s3.bucket, f"kinds/dir/full-{alg}", parts, alg, full=True)
        data[f"dir/full-{alg}"] = b"".join(parts)
    # neighbours that are not under the prefix kinds/
    c.put_object(Bucket=s3.bucket, Key="kinds-sibling", Body=b"x")
    c.put_object(Bucket=s3.bucket, Key="kindsx/y", Body=b"x")
    return data, parts


def test_s3_each_upload_kind(s3, uploaded) -> None:
    data, parts = uploaded
    target = open_target(s3.uri("kinds"))
    before = s3.requests
    rows = rows_of(target)
    assert s3.requests - before == target.list_requests + sum(r["requests"] for r in rows.values())
    assert target.list_requests == 1
    assert set(rows) == set(data)
    for name, row in rows.items():
        assert row["error"] is None, (name, row)
        assert row["size"] == len(data[name])
        assert row["bytes_read"] == 0
    want = crcs(data["single-CRC32"])
    for alg in ("crc32", "crc32c", "crc64nvme"):
        row = rows[f"single-{alg.upper()}"]
        assert row[alg] == want[alg]
        assert [row[a] for a in ("crc32", "crc32c", "crc64nvme") if a != alg] == [None, None]
        assert row["requests"] == 1 and row["other"] == "etag md5"
    assert rows["single-SHA256"]["other"] == "etag md5, sha256"
    assert rows["plain"]["crc32c"] is None and rows["plain"]["requests"] == 1
    assert rows["empty"]["crc32c"] == b"\0\0\0\0"
    whole = crcs(data["dir/full-CRC32"])
    for alg in ("crc32", "crc32c", "crc64nvme"):
        row = rows[f"dir/full-{alg.upper()}"]
        assert row[alg] == whole[alg], alg
        assert row["composite_algorithm"] is None and row["requests"] == 1
        assert row["other"] == "etag multipart md5 (3 parts)"


def test_s3_composite_without_parts_stays_composite(s3, uploaded) -> None:
    """A store that gives neither ObjectParts nor part checksums (moto before 5.2.6): the
    composite value (AWS's definition: the CRC of the parts' big-endian CRCs) is kept, the
    full columns null, with every part's size (one GetObjectAttributes, one HeadObject per
    part: the copy check makes the composite from the key's windows with them). A store that
    answers each part's checksum (moto from 5.2.6): the full CRC composed from them."""
    _, parts = uploaded
    parts_known = s3.gives_part_checksums()
    rows = rows_of(open_target(s3.uri("kinds/dir")))
    for alg in ("crc32", "crc32c"):
        row = rows[f"composite-{alg.upper()}"]
        fn = merkle.crc32 if alg == "crc32" else merkle.crc32c
        if parts_known:  # moto from 5.2.6: the full CRC composed from the parts' CRCs
            assert row[alg] == fn(b"".join(parts)).to_bytes(4, "big"), alg
            assert row["composite_algorithm"] is None and row["error"] is None
            continue
        aws = fn(b"".join(fn(p).to_bytes(4, "big") for p in parts)).to_bytes(4, "big")
        assert (row["composite_algorithm"], row["composite_crc"], row["parts"]) == (alg, aws, 3)
        assert row[alg] is None and row["error"] is None
        assert row["part_sizes"] == [len(p) for p in parts]
        assert row["requests"] == 1 + len(parts)


def _inject(
    target: Target,
    parts: List[bytes],
    alg: str,
    tamper: bool = False,
    via: str = "attributes",
    page: int = 1000,
) -> None:
    """Make the store answer as AWS does (moto does not): the parts' sizes and checksums in
    GetObjectAttributes' ObjectParts (paged), or in HeadObject(PartNumber=i)."""
    fn = merkle.crc32 if alg == "crc32" else merkle.crc32c
    key = f"Checksum{alg.upper()}"
    values = [fn(p) for p in parts]
    if tamper:
        values[1] ^= 1

    def part(i: int) -> Dict[str, Any]:
        return {"PartNumber": i + 1, "Size": len(parts[i]), key: b64(values[i], 4)}

    def remember(params: Dict[str, Any], context: Dict[str, Any], **_: Any) -> None:
        context["marker"] = params.get("PartNumberMarker") or 0

    def attributes(parsed: Dict[str, Any], context: Dict[str, Any], **_: Any) -> None:
        if via != "attributes":
            return
        start = context.get("marker", 0)
        chunk = [part(i) for i in range(start, min(start + page, len(parts)))]
        end = start + len(chunk)
        parsed["ObjectParts"] = {
            "TotalPartsCount": len(parts),
            "PartNumberMarker": start,
            "NextPartNumberMarker": end,
            "MaxParts": page,
            "IsTruncated": end < len(parts),
            "Parts": chunk,
        }

    calls = [0]

    def head(parsed: Dict[str, Any], **_: Any) -> None:
        if via == "head" and "PartsCount" in parsed:
            parsed[key] = b64(values[calls[0]], 4)
            calls[0] += 1

    c = client_of(target)
    c.meta.events.register("before-parameter-build.s3.GetObjectAttributes", remember)
    c.meta.events.register("after-call.s3.GetObjectAttributes", attributes)
    c.meta.events.register("after-call.s3.HeadObject", head)


@pytest.mark.parametrize("via,page", [("attributes", 1000), ("attributes", 2), ("head", 0)])
def test_s3_composite_parts_give_the_full_value(s3, uploaded, via, page) -> None:
    data, parts = uploaded
    target = open_target(s3.uri("kinds/dir"))
    _inject(target, parts, "crc32c", via=via, page=page)
    batch = pa.RecordBatch.from_pylist([{"name": "composite-CRC32C"}], schema=TARGET_SCHEMA)
    before = s3.requests
    row = target.describe(batch).to_pylist()[0]
    assert row["error"] is None, row
    assert row["crc32c"] == crcs(data["dir/composite-CRC32C"])["crc32c"]
    assert row["composite_algorithm"] is None
    want = {("attributes", 1000): 1, ("attributes", 2): 2, ("head", 0): 4}[(via, page)]
    assert row["requests"] == want == s3.requests - before


def test_s3_parts_that_contradict_the_composite_value_are_an_error(s3, uploaded) -> None:
    _, parts = uploaded
    target = open_target(s3.uri("kinds/dir"))
    _inject(target, parts, "crc32c", tamper=True)
    batch = pa.RecordBatch.from_pylist([{"name": "composite-CRC32C"}], schema=TARGET_SCHEMA)
    row = target.describe(batch).to_pylist()[0]
    assert row["crc32c"] is None and "does not match" in row["error"]


def test_s3_hostile_replies_are_row_errors(s3, uploaded) -> None:
    target = open_target(s3.uri("kinds"))
    c = client_of(target)

    def spoil(parsed: Dict[str, Any], **_: Any) -> None:
        checksum = parsed.get("Checksum") or {}
        if "ChecksumCRC32C" in checksum:
            checksum["ChecksumCRC32C"] = "AAAAAAA="  # 5 bytes
        if "ChecksumCRC32" in checksum:
            checksum["ChecksumCRC32"] = "m9qkxQ==-20000"  # more parts than S3 allows

    c.meta.events.register("after-call.s3.GetObjectAttributes", spoil)
    names = ["single-CRC32C", "single-CRC32", "single-CRC64NVME"]
    batch = pa.RecordBatch.from_pylist([{"name": n} for n in names], schema=TARGET_SCHEMA)
    rows = {r["name"]: r for r in target.describe(batch).to_pylist()}
    assert "5 bytes, not 4" in rows["single-CRC32C"]["error"]
    assert "20000 parts" in rows["single-CRC32"]["error"]
    assert rows["single-CRC64NVME"]["error"] is None  # the walk goes on
    assert rows["single-CRC64NVME"]["crc64nvme"] is not None


def test_s3_gone_object(s3) -> None:
    target = open_target(s3.uri("gone"))
    c = client_of(target)
    for n in ("a", "b"):
        c.put_object(Bucket=s3.bucket, Key=f"gone/{n}", Body=n.encode(), ChecksumAlgorithm="CRC32C")
    batches = list(target.list())
    c.delete_object(Bucket=s3.bucket, Key="gone/a")
    rows = {r["name"]: r for b in batches for r in target.describe(b).to_pylist()}
    assert rows["a"]["error"] == "gone" and rows["a"]["requests"] == 1
    assert rows["b"]["crc32c"] == crcs(b"b")["crc32c"] and rows["b"]["error"] is None


def test_s3_without_get_object_attributes_falls_back_to_head(s3, uploaded) -> None:
    data, _ = uploaded
    target = open_target(s3.uri("kinds"))
    c = client_of(target)

    def refuse(**_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        raw = AWSResponse("http://x", 501, {}, None)
        return raw, {
            "Error": {"Code": "NotImplemented", "Message": "no"},
            "ResponseMetadata": {"HTTPStatusCode": 501},
        }

    c.meta.events.register("before-call.s3.GetObjectAttributes", refuse)
    batch = pa.RecordBatch.from_pylist(
        [{"name": "single-CRC32"}, {"name": "single-CRC32C"}, {"name": "dir/full-CRC64NVME"}],
        schema=TARGET_SCHEMA,
    )
    target.concurrency = 1  # the first refusal switches the rest to HeadObject
    before = s3.requests
    rows = {r["name"]: r for r in target.describe(batch).to_pylist()}
    assert not target.attributes_supported  # type: ignore[attr-defined]
    assert rows["single-CRC32"]["crc32"] == crcs(data["single-CRC32"])["crc32"]
    assert rows["single-CRC32C"]["crc32c"] == crcs(data["single-CRC32C"])["crc32c"]
    assert rows["dir/full-CRC64NVME"]["crc64nvme"] == crcs(data["dir/full-CRC64NVME"])["crc64nvme"]
    assert sum(r["requests"] for r in rows.values()) == s3.requests - before == 3


def test_s3_paged_listing_and_pickling(s3) -> None:
    for i in range(1003):
        s3.put_direct(f"many/k{i:05d}", b"")
    target = pickle.loads(pickle.dumps(open_target(s3.uri("many"))))
    names = [n for b in target.list() for n in b.column("name").to_pylist()]
    assert len(names) == 1003 and names[0] == "k00000"
    assert target.list_requests == 2
    assert SECRET_KEY not in target.display
    assert target.reads_data is False


# -- GCS --------------------------------------------------------------------------------------


def gcs_object(name: str, data: bytes, bucket: str = "bkt", **extra: Any) -> Dict[str, Any]:
    import hashlib

    obj = {
        "kind": "storage#object",
        "id": f"{bucket}/{name}/1700000000000000",
        "selfLink": f"https://www.googleapis.com/storage/v1/b/{bucket}/o/{name}",
        "name": name,
        "bucket": bucket,
        "generation": "1700000000000000",
        "metageneration": "1",
        "contentType": "application/octet-stream",
        "storageClass": "STANDARD",
        "size": str(len(data)),
        "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
        "crc32c": b64(merkle.crc32c(data), 4),
        "etag": "CICAgICAgICAAQ=",
        "timeCreated": "2026-11-01T00:00:00.000Z",
        "updated": "2026-11-01T00:00:00.000Z",
    }
    obj.update(extra)
    return obj


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_gcs_json_api_pages(tmp_path: Path) -> None:
    blobs = {f"data/part-{i}": os.urandom(i * 100) for i in range(5)}
    items = [gcs_object(n, d) for n, d in blobs.items()]
    page1 = {
        "kind": "storage#objects",
        "nextPageToken": "CgRkYXRh",
        "items": items[:3],
        "prefixes": [],
    }
    page2 = {"kind": "storage#objects", "items": items[3:] + [gcs_object("elsewhere/x", b"")]}
    for text in (
        json.dumps(page1) + "\n" + json.dumps(page2),
        json.dumps([page1, page2], indent=2),
    ):
        path = write(tmp_path, "pages.json", text)
        target = open_target(f"gs://bkt/data?listing={path}")
        rows = rows_of(target)
        assert set(rows) == {n.split("/", 1)[1] for n in blobs}
        for name, data in blobs.items():
            row = rows[name.split("/", 1)[1]]
            assert row["crc32c"] == crcs(data)["crc32c"] and row["size"] == len(data)
            assert row["other"] == "md5" and row["error"] is None and row["requests"] == 0
        assert target.skips.reasons == {"outside the prefix": 1}
        assert target.list_requests == 0 and not target.reads_data


def test_gcs_gcloud_ls_json_and_objects_list(tmp_path: Path) -> None:
    data = b"hello gcs"
    ls = [
        {"url": "gs://bkt/a/", "type": "prefix"},
        {
            "url": "gs://bkt/a/x#1700000000000000",
            "type": "cloud_object",
            "metadata": gcs_object("a/x", data),
        },
        {
            "url": "gs://bkt/a/y",
            "type": "cloud_object",
            "metadata": {k: v for k, v in gcs_object("a/y", data).items() if k != "name"},
        },
    ]
    described = [
        {
            "bucket": "bkt",
            "name": "a/z",
            "size": len(data),
            "crc32c_hash": b64(merkle.crc32c(data), 4),
            "md5_hash": "XrY7u+Ae7tCTyyK7j1rNww==",
            "storage_url": "gs://bkt/a/z#1",
            "content_type": "text/plain",
            "component_count": 2,
        }
    ]
    path = write(tmp_path, "ls.json", json.dumps(ls, indent=2) + json.dumps(described))
    rows = rows_of(open_target(f"gs://bkt/?listing={path}"))
    assert set(rows) == {"a/x", "a/y", "a/z"}
    assert {r["crc32c"] for r in rows.values()} == {crcs(data)["crc32c"]}
    assert rows["a/z"]["other"] == "md5, composed of 2 components (no md5)"


def test_gcs_hostile_listing(tmp_path: Path) -> None:
    good = gcs_object("p/good", b"ok")
    items: List[Any] = [
        good,
        gcs_object("p/badb64", b"", crc32c="!!!!"),
        gcs_object("p/short", b"", crc32c="AAAA"),  # 3 bytes
        gcs_object("p/neg", b"", size="-5"),
        gcs_object("p/huge", b"", size="99999999999999999999"),
        gcs_object("p/float", b"", size=1.5),
        gcs_object("p/../../etc/passwd", b"x"),
        gcs_object("p/x", b"", bucket="other"),
        gcs_object("p/old", b"", timeDeleted="2026-01-01T00:00:00Z"),
        {"kind": "storage#object", "size": "3"},  # no name
        "a string",
        42,
        None,
        [1, 2],
    ]
    path = write(tmp_path, "bad.json", json.dumps({"kind": "storage#objects", "items": items}))
    target = open_target(f"gs://bkt/p?listing={path}")
    rows = rows_of(target)
    assert rows["good"]["error"] is None and rows["good"]["crc32c"] == crcs(b"ok")["crc32c"]
    assert "not base64" in rows["badb64"]["error"]
    assert "3 bytes, not 4" in rows["short"]["error"]
    for name in ("neg", "huge", "float"):
        assert "size" in rows[name]["error"] and rows[name]["size"] is None
    # a name is data: '..' stays in it, nothing is resolved
    assert rows["../../etc/passwd"]["error"] is None
    assert target.skipped == 7
    assert target.skips.reasons["not a JSON object"] == 4


def test_gcs_syntax_error_and_not_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.json", '[{"name": "a", "size": "1"}, {"name": ')
    target = open_target(f"gs://bkt?listing={path}")
    with pytest.raises(TargetError, match="malformed JSON"):
        list(target.list())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(TargetError, match="not a regular file"):
        list(open_target(f"gs://bkt?listing={fifo}").list())


@pytest.mark.parametrize(
    "deep",
    [
        "[" * 200_000 + "]" * 200_000,
        '{"a":' * 200_000 + "1" + "}" * 200_000,
        '{"kind": "storage#objects", "items": ' + "[" * 200_000,
    ],
)
def test_gcs_listing_nested_too_deep_is_one_line(tmp_path: Path, deep: str) -> None:
    """A listing nested 200,000 deep (planted: no listing nests more than a few levels) is
    the target's one-line error, never a RecursionError."""
    path = write(tmp_path, "deep.json", deep)
    with pytest.raises(TargetError) as err:
        list(open_target(f"gs://bkt?listing={path}").list())
    assert "nested too deep" in str(err.value) and "\n" not in str(err.value)


def test_gcs_stream_reads_values_across_small_chunks(tmp_path: Path, monkeypatch) -> None:
    from merkle.copies.targets import _jsonstream

    monkeypatch.setattr(_jsonstream, "_CHUNK", 7)
    items = [
        {
            "url": f"gs://bkt/k{i}",
            "type": "cloud_object",
            "metadata": gcs_object(f"k{i}", b"\xff" * i),
        }
        for i in range(50)
    ]
    path = write(tmp_path, "ls.json", json.dumps(items))
    rows = rows_of(open_target(f"gs://bkt?listing={path}"))
    assert len(rows) == 50 and rows["k49"]["size"] == 49
    assert rows["k49"]["crc32c"] == crcs(b"\xff" * 49)["crc32c"]
    with pytest.raises(ValueError, match="longer than"):
        list(_jsonstream.JsonStream(open(path, "rb"), max_value=100).values())


# -- HDFS -------------------------------------------------------------------------------------


def test_hdfs_checksum_output(tmp_path: Path) -> None:
    a, b = os.urandom(1000), os.urandom(3)
    md5crc = "00000200000000000000000045a6f1ec3e6ab4ffe0a39de5ef4d3c4f"  # 28 bytes
    lines = [
        f"hdfs://nn1:8020/warehouse/t/a\tCOMPOSITE-CRC32C\t{merkle.crc32c(a):08x}",
        f"/warehouse/t/sub/b\tCOMPOSITE-CRC32\t{merkle.crc32(b):08x}\tBlockSize=134217728",
        f"/warehouse/t/c\tMD5-of-0MD5-of-512CRC32C\t{md5crc}",
        "/warehouse/t/d\tNONE\t",
        "/warehouse/t/v\tCOMPOSITE-CRC32C\t00000001\t134217728",
        "/warehouse/t/with\ttab\tCOMPOSITE-CRC32C\t00000000",
        "/warehouse/t/bad\tCOMPOSITE-CRC32C\t0xZZ",
        "/warehouse/t/long\tCOMPOSITE-CRC32C\t0000000000",
        "/warehouse/t/../x\tCOMPOSITE-CRC32C\t00000000",
        "/warehouse/other\tCOMPOSITE-CRC32C\t00000000",
        "relative/p\tCOMPOSITE-CRC32C\t00000000",
        "s3a://bucket/warehouse/t/e\tCOMPOSITE-CRC32C\t00000000",
        "hdfs://nn2:8020/warehouse/t/f\tCOMPOSITE-CRC32C\t00000000",
        "garbage without tabs",
        "",
    ]
    path = write(tmp_path, "checksums.txt", "\n".join(lines) + "\n")
    target = open_target(f"hdfs://nn1:8020/warehouse/t?listing={path}")
    rows = rows_of(target)
    assert rows["a"]["crc32c"] == crcs(a)["crc32c"] and rows["a"]["size"] is None
    assert rows["sub/b"]["crc32"] == crcs(b)["crc32"]
    assert rows["c"]["other"] == "hdfs MD5-of-0MD5-of-512CRC32C" and rows["c"]["crc32c"] is None
    assert rows["d"]["other"].startswith("hdfs NONE")
    assert rows["v"]["crc32c"] == b"\0\0\0\1"  # -v's block size column dropped
    assert rows["with\ttab"]["crc32c"] == b"\0\0\0\0"
    assert "not hex" in rows["bad"]["error"]
    assert "5 bytes, not 4" in rows["long"]["error"]
    assert rows["../x"]["error"] is None  # a name, never resolved
    assert target.skipped == 5 and set(target.skips.reasons) == {
        "outside the root",
        "a relative path (run hdfs dfs -checksum with absolute paths)",
        "another file system",
        "a line that is not `PATH<tab>ALGORITHM<tab>HEX`",
    }
    # hdfs:/// (no namenode) takes any namenode's paths
    rows = rows_of(open_target(f"hdfs:///warehouse/t?listing={path}"))
    assert "f" in rows


# -- a local directory ------------------------------------------------------------------------


def test_local_directory(tmp_path: Path, monkeypatch) -> None:
    from merkle.copies.targets import local

    monkeypatch.setattr(local, "BUFFER", 4096)  # many reads per file: the chaining counts
    root = tmp_path / "copy"
    (root / "d" / "e").mkdir(parents=True)
    blobs = {"a": os.urandom(10_000), "d/e/f": os.urandom(4096 * 3), "d/empty": b""}
    for name, data in blobs.items():
        (root / name).write_bytes(data)
    (root / "d" / "link").symlink_to("/etc/passwd")
    (root / "dirlink").symlink_to(root / "d")
    os.mkfifo(root / "d" / "fifo")
    target = open_target(f"file://{root}")
    assert target.reads_data
    rows = rows_of(pickle.loads(pickle.dumps(target)))
    assert set(rows) == set(blobs) | {"d/link", "dirlink", "d/fifo"}
    for name, data in blobs.items():
        row = rows[name]
        assert row["error"] is None
        assert (row["crc32"], row["crc32c"], row["crc64nvme"]) == tuple(crcs(data).values())
        assert row["bytes_read"] == row["size"] == len(data)
    assert "symbolic link" in rows["d/link"]["error"] and rows["d/link"]["bytes_read"] == 0
    assert "symbolic link" in rows["dirlink"]["error"]
    assert "FIFO" in rows["d/fifo"]["error"]
    # the job may hand describe() only the columns it keeps: name and size
    slim = pa.RecordBatch.from_pylist([{"name": "a", "size": 1}])
    row = target.describe(slim).to_pylist()[0]
    assert row["crc32c"] == crcs(blobs["a"])["crc32c"] and row["size"] == 10_000


def test_local_describe_refuses_what_changed_after_listing(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"data")
    (root / "g").write_bytes(b"data")
    target = open_target(str(root))
    batch = next(iter(target.list()))
    (root / "g").unlink()
    (root / "d" / "f").unlink()
    (root / "d" / "f").symlink_to("/etc/passwd")
    hostile = pa.RecordBatch.from_pylist(
        [{"name": "../copy/g"}, {"name": "d/../g"}], schema=TARGET_SCHEMA
    )
    rows = {r["name"]: r for b in (batch, hostile) for r in target.describe(b).to_pylist()}
    assert rows["g"]["error"] == "gone"
    assert "symbolic link" in rows["d/f"]["error"] and rows["d/f"]["crc32c"] is None
    assert rows["../copy/g"]["error"] and rows["d/../g"]["error"]
    assert all(r["bytes_read"] == 0 for r in rows.values())


def test_s3_parts_pages_that_never_advance_are_an_error(s3, uploaded) -> None:
    target = open_target(s3.uri("kinds/dir"))
    stuck = {
        "TotalPartsCount": 3,
        "PartNumberMarker": 0,
        "NextPartNumberMarker": 0,
        "MaxParts": 1,
        "IsTruncated": True,
        "Parts": [{"PartNumber": 1, "Size": PART, "ChecksumCRC32C": "AAAAAA=="}],
    }
    client_of(target).meta.events.register(
        "after-call.s3.GetObjectAttributes",
        lambda parsed, **_: parsed.__setitem__("ObjectParts", dict(stuck)),
    )
    batch = pa.RecordBatch.from_pylist([{"name": "composite-CRC32C"}], schema=TARGET_SCHEMA)
    row = target.describe(batch).to_pylist()[0]
    assert "do not advance" in row["error"] and row["requests"] == 1


def test_s3_credentials_from_the_environment_and_odd_names(s3, monkeypatch) -> None:
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    target = open_target(s3.uri("odd", credentials=False))
    names = ["ü nicode/with space", "a%2Fb", "x/../y", "tab\tin name", "+plus"]
    for n in names:
        client_of(target).put_object(
            Bucket=s3.bucket, Key=f"odd/{n}", Body=n.encode(), ChecksumAlgorithm="CRC32C"
        )
    rows = rows_of(target)
    assert set(rows) == set(names)
    for n in names:
        assert rows[n]["crc32c"] == crcs(n.encode())["crc32c"] and rows[n]["error"] is None
