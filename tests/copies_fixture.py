"""Copies of a generated cluster's keys in the loopback S3 server, with injected differences and
the ground truth (issue 27's copy check: what it must find).

    manifest = generate_cluster(out, layout="ozone", om_db=True, ...)
    with LoopbackS3() as s3:
        truth = upload_copies(s3, out, manifest, "copies")

Every key of the manifest's `keys` is copied (through boto3, over HTTP, as a migration tool
would) to `<prefix>/<volume>/<bucket>/<path>` in `s3.bucket`, its true bytes read back from the
cluster (merkle.replica.ozone.omkeys.key_bytes; regenerated from the seed when no replica holds
them any more: a migration made before the damage copied them). The upload kind cycles over
the keys (KINDS): single PUTs with CRC32, CRC32C and CRC64NVME, multipart COMPOSITE (CRC32C,
CRC32) and multipart FULL_OBJECT (CRC32C, CRC64NVME). A multipart copy has `parts` parts
(Ozone-sized keys are small here, so moto's 5 MiB minimum part size is lowered for the call:
moto reads `S3_UPLOAD_PART_MIN_SIZE` when an upload completes).

Injected differences (FAULTS), one each: `corrupted` (one byte flipped, same size; on the first
key uploaded with `corrupt_algorithm`, so a check of a cluster written with that checksum type
can see it), `missing` (a key not uploaded), `truncated` (a copy shorter than its key), `extra`
(an object under the prefix that is no key). Faults go to keys with a pristine copy.

What moto 5.2.5 reports (checked by tests/test_copies_fixture.py): single PUT and multipart
FULL_OBJECT values are the CRC of the whole object; a COMPOSITE value is the CRC of the
concatenated big-endian part CRCs, with `-N` on GetObject but without it on HeadObject and
GetObjectAttributes (and no ChecksumType on HeadObject unless the upload named one);
HeadObject with PartNumber gives the part's length but no checksum, GetObjectAttributes no
ObjectParts. moto verifies nothing the client sends: a single PUT's wrong checksum is stored
and reported as the object's (S3 answers BadDigest), a wrong part or FULL_OBJECT value is
ignored (moto computes its own). CRC32C is right only with the `crc32c` package installed and
CRC64NVME only with awscrt (without them moto silently computes CRC32).
"""

from __future__ import annotations

import base64
import contextlib
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import merkle
from merkle.replica.generate import block_data
from merkle.replica.ozone.omkeys import key_bytes

from loopback_s3 import LoopbackS3

__all__ = ["FAULTS", "KINDS", "s3_checksum", "s3_client", "upload_copies"]

#: (kind, checksum type, algorithm), cycled over the keys in name order
KINDS: Tuple[Tuple[str, str, str], ...] = (
    ("put", "FULL_OBJECT", "CRC32"),
    ("put", "FULL_OBJECT", "CRC32C"),
    ("put", "FULL_OBJECT", "CRC64NVME"),
    ("multipart", "COMPOSITE", "CRC32C"),
    ("multipart", "FULL_OBJECT", "CRC32C"),
    ("multipart", "FULL_OBJECT", "CRC64NVME"),
    ("multipart", "COMPOSITE", "CRC32"),
)
FAULTS = ("none", "corrupted", "missing", "extra", "truncated")
EXTRA_PATH = "vol1/obs1/not-a-key/extra-object.bin"
_CRC = {
    "CRC32": (merkle.crc32, 4),
    "CRC32C": (merkle.crc32c, 4),
    "CRC64NVME": (merkle.crc64nvme, 8),
}


def s3_client(s3: LoopbackS3) -> Any:
    """A boto3 S3 client of the loopback server."""
    import boto3

    env = s3.env()
    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_DEFAULT_REGION"],
    )


def crc(data: bytes, algorithm: str) -> int:
    """The full-object CRC of `data` (S3's algorithm name)."""
    return int(_CRC[algorithm][0](data))


def s3_checksum(parts: List[bytes], algorithm: str, checksum_type: str) -> str:
    """The value S3 keeps for an object uploaded as `parts`: base64 of the big-endian CRC of
    the whole (FULL_OBJECT), or of the CRC of the concatenated part CRCs, then `-N`
    (COMPOSITE)."""
    fn, width = _CRC[algorithm]
    if checksum_type == "FULL_OBJECT":
        return base64.b64encode(int(fn(b"".join(parts))).to_bytes(width, "big")).decode()
    joined = b"".join(int(fn(p)).to_bytes(width, "big") for p in parts)
    return base64.b64encode(int(fn(joined)).to_bytes(width, "big")).decode() + f"-{len(parts)}"


@contextlib.contextmanager
def _small_parts() -> Iterator[None]:
    """moto's minimum part size lowered to one byte for the duration (process-wide: the
    loopback server runs in this process)."""
    import moto.s3.models as models

    old = models.S3_UPLOAD_PART_MIN_SIZE
    models.S3_UPLOAD_PART_MIN_SIZE = 1
    try:
        yield
    finally:
        models.S3_UPLOAD_PART_MIN_SIZE = old


def _true_bytes(
    cluster_dir: os.PathLike[str] | str, manifest: Dict[str, Any], key: Dict[str, Any]
) -> bytes:
    if key["pristine_copy"]:
        return key_bytes(cluster_dir, key)
    return b"".join(block_data(manifest["seed"], c, lid, n) for c, lid, n in key["blocks"])


def _upload(
    client: Any,
    bucket: str,
    name: str,
    data: bytes,
    kind: str,
    checksum_type: str,
    algorithm: str,
    parts: int,
    part_size: Optional[int] = None,
) -> List[bytes]:
    """Upload `data` as `name`; the parts it was uploaded as (`part_size` bytes each but the
    last, as S3 clients upload, or else `parts` near-equal parts)."""
    if kind == "put":
        client.put_object(Bucket=bucket, Key=name, Body=data, ChecksumAlgorithm=algorithm)
        return [data]
    size = part_size or max(1, -(-len(data) // parts))
    chunks = [data[o : o + size] for o in range(0, len(data), size)] or [b""]
    up = client.create_multipart_upload(
        Bucket=bucket, Key=name, ChecksumAlgorithm=algorithm, ChecksumType=checksum_type
    )
    done = []
    for number, chunk in enumerate(chunks, 1):
        r = client.upload_part(
            Bucket=bucket,
            Key=name,
            UploadId=up["UploadId"],
            PartNumber=number,
            Body=chunk,
            ChecksumAlgorithm=algorithm,
        )
        done.append(
            {
                "PartNumber": number,
                "ETag": r["ETag"],
                f"Checksum{algorithm}": r[f"Checksum{algorithm}"],
            }
        )
    extra: Dict[str, str] = {}
    if checksum_type == "FULL_OBJECT":  # as a client must: the whole object's value
        extra = {
            f"Checksum{algorithm}": s3_checksum(chunks, algorithm, "FULL_OBJECT"),
            "ChecksumType": "FULL_OBJECT",
        }
    client.complete_multipart_upload(
        Bucket=bucket, Key=name, UploadId=up["UploadId"], MultipartUpload={"Parts": done}, **extra
    )
    return chunks


def _fault_keys(keys: List[Dict[str, Any]], corrupt_algorithm: str) -> Dict[str, str]:
    """{key name: fault}: corrupted on the first pristine key uploaded with
    `corrupt_algorithm`, then missing and truncated on the next pristine keys."""
    pristine = [(i, k) for i, k in enumerate(keys) if k["pristine_copy"] and k["size"] >= 2]
    out: Dict[str, str] = {}
    corrupt = next((k for i, k in pristine if KINDS[i % len(KINDS)][2] == corrupt_algorithm), None)
    if corrupt is None:
        raise ValueError(f"no pristine key is uploaded with {corrupt_algorithm}")
    out[corrupt["name"]] = "corrupted"
    rest = [k for _, k in pristine if k["name"] not in out]
    if len(rest) < 2:
        raise ValueError("too few pristine keys for the missing and truncated copies")
    out[rest[0]["name"]] = "missing"
    out[rest[1]["name"]] = "truncated"
    return out


def upload_copies(
    s3: LoopbackS3,
    cluster_dir: os.PathLike[str] | str,
    manifest: Dict[str, Any],
    prefix: str,
    *,
    parts: int = 3,
    part_size: Optional[int] = None,
    corrupt_algorithm: str = "CRC32",
) -> Dict[str, Dict[str, Any]]:
    """Upload a copy of every key of `manifest["keys"]` (see the module docstring) and return
    the ground truth, per target object name (in s3.bucket):

        key            the key's Ozone name (/vol/bucket/path) it copies, None for the extra
        kind           put | multipart
        checksum_type  FULL_OBJECT | COMPOSITE
        algorithm      CRC32 | CRC32C | CRC64NVME
        parts          parts uploaded (1 for a put)
        part_sizes     their sizes
        fault          none | corrupted | missing | extra | truncated
        size           bytes uploaded (None when missing)
        crc            the full-object CRC (`algorithm`) of the bytes uploaded (None: missing)
        checksum       the value S3 keeps for them (base64, `-N` for COMPOSITE; None: missing)
        key_size, key_crc32, key_crc32c, key_crc64nvme   the key's own (None for the extra)
        source         replicas (read back by key_bytes) | regenerated (no replica holds the
                       key's true bytes any more: the copy predates the damage) | None (extra)
    """
    keys = sorted(manifest["keys"], key=lambda k: k["name"])
    faults = _fault_keys(keys, corrupt_algorithm)
    base = prefix.strip("/")
    client = s3_client(s3)
    truth: Dict[str, Dict[str, Any]] = {}

    def name_of(ozone_name: str) -> str:
        return f"{base}{ozone_name}" if base else ozone_name.lstrip("/")

    with _small_parts():
        for i, key in enumerate(keys):
            kind, checksum_type, algorithm = KINDS[i % len(KINDS)]
            fault = faults.get(key["name"], "none")
            data = _true_bytes(cluster_dir, manifest, key)
            if fault == "corrupted":
                flipped = bytearray(data)
                flipped[len(data) // 2] ^= 0x5A
                data = bytes(flipped)
            elif fault == "truncated":
                data = data[: len(data) // 2]
            entry: Dict[str, Any] = dict(
                key=key["name"],
                kind=kind,
                checksum_type=checksum_type,
                algorithm=algorithm,
                fault=fault,
                key_size=key["size"],
                key_crc32=key["crc32"],
                key_crc32c=key["crc32c"],
                key_crc64nvme=key["crc64nvme"],
                source="replicas" if key["pristine_copy"] else "regenerated",
            )
            target = name_of(key["name"])
            if fault == "missing":
                entry.update(parts=0, part_sizes=[], size=None, crc=None, checksum=None)
            else:
                chunks = _upload(
                    client,
                    s3.bucket,
                    target,
                    data,
                    kind,
                    checksum_type,
                    algorithm,
                    parts,
                    part_size,
                )
                entry.update(
                    parts=len(chunks),
                    part_sizes=[len(c) for c in chunks],
                    size=len(data),
                    crc=crc(data, algorithm),
                    checksum=s3_checksum(chunks, algorithm, checksum_type),
                )
            truth[target] = entry
        extra = block_data(int(manifest["seed"]) ^ 0x5EED, 0, 0, 12345)
        target = f"{base}/{EXTRA_PATH}" if base else EXTRA_PATH
        chunks = _upload(client, s3.bucket, target, extra, "put", "FULL_OBJECT", "CRC32C", 1)
        truth[target] = dict(
            key=None,
            kind="put",
            checksum_type="FULL_OBJECT",
            algorithm="CRC32C",
            fault="extra",
            parts=1,
            part_sizes=[len(extra)],
            size=len(extra),
            crc=crc(extra, "CRC32C"),
            checksum=s3_checksum(chunks, "CRC32C", "FULL_OBJECT"),
            key_size=None,
            key_crc32=None,
            key_crc32c=None,
            key_crc64nvme=None,
            source=None,
        )
    return truth
