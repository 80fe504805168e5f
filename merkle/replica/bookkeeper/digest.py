"""Verify a batch of stored BookKeeper entries in one call (the bulk kernel's interface).

A stored entry (DigestManager, METADATA_LENGTH 32) is `ledgerId(8) entryId(8)
lastAddConfirmed(8) length(8) digest(n) payload`, big-endian; the digest covers the 32-byte
header and the payload, not itself: CRC32C n=4 (the int CRC-32C), CRC32 n=8 (four zero bytes,
then zlib's CRC-32), HMAC n=20 (HmacSHA1 keyed SHA-1("mac" + password)), DUMMY n=0.

`verify_entries` is the one function the scan calls per batch: the native kernel (csrc/) will
replace its body for CRC32C/CRC32/DUMMY. Here it is vectorised as far as numpy and merkle's
bulk CRCs allow: the headers are gathered with one fancy index and checksummed as fixed
windows, the payloads with one `checksum_each`, and the two CRCs joined per payload length
with `combine_many` (the payload's CRC-32C is the cross-bookie comparison value as well).
HMAC stays in hashlib, one entry at a time.
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


def _be64(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The big-endian int64 at each of `starts` in the uint8 array `data`."""
    idx = starts[:, None] + np.arange(8, dtype=np.int64)
    return data[idx].copy().view(">i8").reshape(-1).astype(np.int64)


def verify_entries(buf: object, offsets: Union[Sequence[int], np.ndarray],
                   sizes: Union[Sequence[int], np.ndarray],
                   digest_type: str, password: bytes = b"") -> Dict[str, np.ndarray]:
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
    - `payload_length` (int64).
    ValueError for an unknown digest type or an entry outside `buf`."""
    if digest_type not in DIGEST_LENGTHS:
        raise ValueError(f"unknown digest type {digest_type!r}")
    n = DIGEST_LENGTHS[digest_type]
    data = np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]
    off = np.asarray(offsets, dtype=np.int64).reshape(-1)
    size = np.asarray(sizes, dtype=np.int64).reshape(-1)
    if off.shape != size.shape:
        raise ValueError("offsets and sizes differ in length")
    if len(off) and (off.min() < 0 or size.min() < 0 or (off + size).max() > len(data)):
        raise ValueError("an entry lies outside the buffer")
    count = len(off)
    frame_ok = size >= HEADER_LENGTH + n
    good = off[frame_ok]
    out: Dict[str, np.ndarray] = {
        "frame_ok": frame_ok,
        "ledger_id": np.zeros(count, np.int64), "entry_id": np.zeros(count, np.int64),
        "last_add_confirmed": np.zeros(count, np.int64), "length": np.zeros(count, np.int64),
        "digest_ok": np.zeros(count, bool),
        "stored_digest": np.zeros(count, np.uint64),
        "computed_digest": np.zeros(count, np.uint64),
        "payload_crc32c": np.zeros(count, np.uint32),
        "payload_length": np.where(frame_ok, size - HEADER_LENGTH - n, 0).astype(np.int64),
    }
    if not len(good):
        return out
    for field, at in (("ledger_id", 0), ("entry_id", 8), ("last_add_confirmed", 16),
                      ("length", 24)):
        out[field][frame_ok] = _be64(data, good + at)
    headers = np.ascontiguousarray(data[good[:, None] + np.arange(HEADER_LENGTH)])
    plen = out["payload_length"][frame_ok]
    pstart = good + HEADER_LENGTH + n
    view = memoryview(data)
    payloads = [view[s:s + ln] for s, ln in zip(pstart.tolist(), plen.tolist())]
    pcrc = _native.checksum_each(payloads, algorithm="crc32c")
    out["payload_crc32c"][frame_ok] = pcrc
    if digest_type == "DUMMY":
        out["digest_ok"][frame_ok] = True
        return out
    if digest_type == "HMAC":
        key = mac_key(password)
        oks = []
        for h, p, s in zip(headers, payloads, good.tolist()):
            mac = hmac.new(key, h.tobytes(), hashlib.sha1)
            mac.update(p)
            oks.append(hmac.compare_digest(mac.digest(), view[s + HEADER_LENGTH:
                                                              s + HEADER_LENGTH + n]))
        out["digest_ok"][frame_ok] = np.array(oks, dtype=bool)
        return out
    alg = "crc32c" if digest_type == "CRC32C" else "crc32"
    hcrc = _native.checksum_windows(headers.reshape(-1), HEADER_LENGTH, algorithm=alg)
    body = pcrc if alg == "crc32c" else _native.checksum_each(payloads, algorithm="crc32")
    computed = np.empty(len(good), np.uint32)
    for length in np.unique(plen).tolist():  # combine_many takes one length per call
        sel = plen == length
        computed[sel] = _native.combine_many(hcrc[sel], body[sel], int(length), algorithm=alg)
    dstart = good + HEADER_LENGTH
    stored = data[dstart[:, None] + np.arange(n)].copy().view(f">u{n}").reshape(-1)
    stored = stored.astype(np.uint64)
    out["stored_digest"][frame_ok] = stored
    out["computed_digest"][frame_ok] = computed.astype(np.uint64)
    out["digest_ok"][frame_ok] = stored == computed.astype(np.uint64)
    return out
