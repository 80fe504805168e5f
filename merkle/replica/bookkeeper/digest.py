"""Verify a batch of stored BookKeeper entries in one call.

A stored entry (DigestManager, METADATA_LENGTH 32) is `ledgerId(8) entryId(8)
lastAddConfirmed(8) length(8) digest(n) payload`, big-endian; the digest covers the 32-byte
header and the payload, not itself: CRC32C n=4 (the int CRC-32C), CRC32 n=8 (four zero bytes,
then zlib's CRC-32), HMAC n=20 (HmacSHA1 keyed SHA-1("mac" + password)), DUMMY n=0.

`verify_entries` is the one function the scan calls per batch: one native call
(`merkle.bookkeeper_entries`, csrc/bookkeeper.c) frames every entry, recomputes the CRC
digests and the payload's CRC-32C in one pass over each payload; only HMAC, keyed by the
ledger's password, is computed here with hashlib, one entry at a time.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Dict, Sequence, Union

import numpy as np

from merkle import _native

__all__ = ["DIGEST_LENGTHS", "HEADER_LENGTH", "mac_key", "verify_entries"]

HEADER_LENGTH = 32
DIGEST_LENGTHS = {"CRC32C": 4, "CRC32": 8, "HMAC": 20, "DUMMY": 0}


def mac_key(password: bytes) -> bytes:
    """MacDigestManager's HMAC key: SHA-1("mac" + password)."""
    return hashlib.sha1(b"mac" + bytes(password)).digest()


_NATIVE_DIGEST = {"CRC32C": "crc32c", "CRC32": "crc32", "HMAC": "hmac-sha1", "DUMMY": "dummy"}
#: merkle.bookkeeper_entries' status codes
_OK, _SHORT, _OUTSIDE, _MISMATCH, _HMAC_UNCHECKED = 0, 1, 2, 3, 4


def verify_entries(
    buf: object,
    offsets: Union[Sequence[int], np.ndarray],
    sizes: Union[Sequence[int], np.ndarray],
    digest_type: str,
    password: bytes = b"",
    also: Sequence[str] = (),
) -> Dict[str, np.ndarray]:
    """Check the entries at `offsets` (of each entry's first byte, after its size int) with
    `sizes` bytes each, all inside `buf`, with the ledger's `digest_type` ("CRC32C", "CRC32",
    "HMAC", "DUMMY"; `password` for HMAC). Returns numpy arrays, one value per entry:

    - `frame_ok` (bool): size >= 32 + digest length, so the fields below are read;
    - `ledger_id`, `entry_id`, `last_add_confirmed`, `length` (int64): the header (0 when
      the frame is not ok);
    - `digest_ok` (bool): the stored digest equals the one recomputed (False when the frame
      is not ok; True for DUMMY);
    - `stored_digest`, `computed_digest` (uint64): for CRC32C the 4-byte value, for CRC32
      the 8 bytes as stored / as BookKeeper writes them; 0 for HMAC and DUMMY;
    - `payload_crc32c` (uint32): the payload's CRC-32C (compared across bookies);
    - `payload_length` (int64);
    - `payload_<name>` for each name of `also` (merkle.replica.also's: crc64nvme uint64,
      crc32c / crc32 uint32): that CRC of the payload, from the same pass.
    ValueError for an unknown digest type or an entry outside `buf`."""
    if digest_type not in DIGEST_LENGTHS:
        raise ValueError(f"unknown digest type {digest_type!r}")
    n = DIGEST_LENGTHS[digest_type]
    off = np.asarray(offsets, dtype=np.int64).reshape(-1)
    size = np.asarray(sizes, dtype=np.int64).reshape(-1)
    if off.shape != size.shape:
        raise ValueError("offsets and sizes differ in length")
    got = _native.bookkeeper_entries(buf, off, size, _NATIVE_DIGEST[digest_type], also=also)
    status = got["status"]
    if (status == _OUTSIDE).any():
        raise ValueError("an entry lies outside the buffer")
    frame_ok = status != _SHORT
    out: Dict[str, np.ndarray] = {
        "frame_ok": frame_ok,
        "digest_ok": (status == _OK) & frame_ok,
        "payload_length": np.where(frame_ok, size - HEADER_LENGTH - n, 0).astype(np.int64),
    }
    for name in ("ledger_id", "entry_id", "last_add_confirmed", "length"):
        out[name] = np.where(frame_ok, got[name], 0).astype(np.int64)
    for name in ("stored_digest", "computed_digest", "payload_crc32c"):
        out[name] = got[name]
    for name in also:
        out[f"payload_{name}"] = got[f"payload_{name}"]
    if digest_type == "HMAC":
        out["digest_ok"] = _hmac_ok(buf, off, size, status == _HMAC_UNCHECKED, mac_key(password))
    return out


def _hmac_ok(
    buf: object, off: np.ndarray, size: np.ndarray, framed: np.ndarray, key: bytes
) -> np.ndarray:
    """HmacSHA1 over header ‖ payload of each framed entry, against its stored 20 bytes."""
    view = memoryview(buf).cast("B")  # type: ignore[arg-type]
    oks = np.zeros(len(off), dtype=bool)
    digest_end = HEADER_LENGTH + DIGEST_LENGTHS["HMAC"]
    for i in np.flatnonzero(framed).tolist():
        s, ln = int(off[i]), int(size[i])
        mac = hmac.new(key, view[s : s + HEADER_LENGTH], hashlib.sha1)
        mac.update(view[s + digest_end : s + ln])
        oks[i] = hmac.compare_digest(mac.digest(), view[s + HEADER_LENGTH : s + digest_end])
    return oks
