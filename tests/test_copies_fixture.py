"""The copies fixture (tests/copies_fixture.py): what it uploads to the loopback S3 server is what
its ground truth says, and the checksums moto reports for each upload kind equal the truth
(merkle's CRCs of the uploaded bytes; S3's composite definition for multipart COMPOSITE)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

pytest.importorskip("moto")
pytest.importorskip("boto3")
pytest.importorskip("rocksdict")

import merkle  # noqa: E402
from merkle.replica.generate import generate_cluster, parse_faults  # noqa: E402
from merkle.replica.ozone.omkeys import key_bytes  # noqa: E402

from copies_fixture import KINDS, s3_checksum, s3_client, upload_copies  # noqa: E402
from loopback_s3 import LoopbackS3  # noqa: E402

PREFIX = "copies"


@pytest.fixture(scope="module")
def uploaded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("copies") / "c"
    manifest = generate_cluster(
        out,
        layout="ozone",
        om_db=True,
        containers=8,
        seed=0,
        block_size=48 * 1024,
        chunk_size=16 * 1024,
        bytes_per_checksum=4 * 1024,
        faults=parse_faults("default", "ozone"),
    )
    with LoopbackS3() as s3:
        truth = upload_copies(s3, out, manifest, PREFIX)
        yield out, manifest, truth, s3, s3_client(s3)


def test_every_key_has_one_target_and_one_extra(uploaded: Any) -> None:
    out, manifest, truth, s3, client = uploaded
    keys = {k["name"]: k for k in manifest["keys"]}
    by_key = {t["key"]: name for name, t in truth.items() if t["key"] is not None}
    assert set(by_key) == set(keys)
    for key, name in by_key.items():
        assert name == PREFIX + key
    assert sorted(t["fault"] for t in truth.values() if t["fault"] != "none") == [
        "corrupted",
        "extra",
        "missing",
        "truncated",
    ]
    extra = [n for n, t in truth.items() if t["fault"] == "extra"]
    assert len(extra) == 1 and truth[extra[0]]["key"] is None
    assert extra[0].startswith(PREFIX + "/") and PREFIX + "/" + extra[0] not in keys
    # every kind used; a composite upload of several parts
    assert {
        (t["kind"], t["checksum_type"], t["algorithm"])
        for t in truth.values()
        if t["key"] is not None
    } == set(KINDS)
    assert any(t["checksum_type"] == "COMPOSITE" and t["parts"] >= 2 for t in truth.values())
    assert [t["source"] for t in truth.values()].count("regenerated") == 1  # the bitflip-all key
    assert any(
        t["kind"] == "multipart" and t["checksum_type"] == "FULL_OBJECT" and t["parts"] >= 2
        for t in truth.values()
    )
    listed = set()
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=s3.bucket, Prefix=PREFIX + "/"
    ):
        listed |= {o["Key"] for o in page.get("Contents", [])}
    assert listed == {n for n, t in truth.items() if t["fault"] != "missing"}


def test_uploaded_bytes_are_the_truth(uploaded: Any) -> None:
    out, manifest, truth, s3, client = uploaded
    keys = {k["name"]: k for k in manifest["keys"]}
    for name, t in truth.items():
        if t["fault"] == "missing":
            continue
        body = client.get_object(Bucket=s3.bucket, Key=name)["Body"].read()
        assert len(body) == t["size"] == sum(t["part_sizes"])
        alg = {"CRC32": merkle.crc32, "CRC32C": merkle.crc32c, "CRC64NVME": merkle.crc64nvme}[
            t["algorithm"]
        ]
        assert alg(body) == t["crc"]
        if t["key"] is None:
            continue
        k = keys[t["key"]]
        assert t["source"] == ("replicas" if k["pristine_copy"] else "regenerated")
        true = key_bytes(out, k) if k["pristine_copy"] else None
        if t["fault"] == "none":
            assert t["size"] == k["size"] and merkle.crc32c(body) == k["crc32c"]
            assert merkle.crc32(body) == k["crc32"] and merkle.crc64nvme(body) == k["crc64nvme"]
        elif t["fault"] == "corrupted":
            assert true is not None and len(body) == len(true)
            assert sum(a != b for a, b in zip(body, true)) == 1
            assert merkle.crc32c(body) != k["crc32c"]
        elif t["fault"] == "truncated":
            assert true is not None and len(body) < len(true) and true.startswith(body)


def _b64(value: int, width: int) -> str:
    return base64.b64encode(value.to_bytes(width, "big")).decode()


def test_moto_checksums_equal_the_truth(uploaded: Any) -> None:
    """HeadObject (checksum mode), GetObjectAttributes and GetObject report the value the
    truth computed with merkle; for COMPOSITE uploads that is the CRC of the part CRCs, with
    `-N` on GetObject only (moto leaves it off HeadObject and GetObjectAttributes)."""
    out, manifest, truth, s3, client = uploaded
    checked = 0
    for name, t in truth.items():
        if t["fault"] == "missing":
            with pytest.raises(client.exceptions.ClientError):
                client.head_object(Bucket=s3.bucket, Key=name)
            continue
        field = f"Checksum{t['algorithm']}"
        width = 8 if t["algorithm"] == "CRC64NVME" else 4
        composite = t["checksum_type"] == "COMPOSITE"
        bare = t["checksum"].split("-")[0] if composite else t["checksum"]
        if not composite:
            assert t["checksum"] == _b64(t["crc"], width)  # full object: the CRC itself
        else:
            assert t["checksum"].endswith(f"-{t['parts']}")
            assert bare != _b64(t["crc"], width) or t["parts"] == 1
        head = client.head_object(Bucket=s3.bucket, Key=name, ChecksumMode="ENABLED")
        assert head[field] == bare and head["ContentLength"] == t["size"]
        attrs = client.get_object_attributes(
            Bucket=s3.bucket, Key=name, ObjectAttributes=["Checksum", "ObjectSize"]
        )
        assert attrs["Checksum"][field] == bare and attrs["ObjectSize"] == t["size"]
        if t["kind"] == "multipart":
            assert attrs["Checksum"]["ChecksumType"] == t["checksum_type"]
        got = client.get_object(Bucket=s3.bucket, Key=name, ChecksumMode="ENABLED")
        got["Body"].read()
        assert got[field] == t["checksum"]
        checked += 1
    assert checked == len(truth) - 1


def test_composite_is_the_crc_of_the_part_crcs() -> None:
    """s3_checksum against values worked out by hand from S3's definition."""
    a, b = b"123456789", b"abc"
    parts = merkle.crc32c(a).to_bytes(4, "big") + merkle.crc32c(b).to_bytes(4, "big")
    assert s3_checksum([a, b], "CRC32C", "COMPOSITE") == _b64(merkle.crc32c(parts), 4) + "-2"
    assert s3_checksum([a], "CRC64NVME", "FULL_OBJECT") == _b64(0xAE8B14860A799888, 8)
    assert s3_checksum([a, b], "CRC32", "FULL_OBJECT") == _b64(merkle.crc32(a + b), 4)
