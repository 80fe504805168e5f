"""Every chunk of one HDFS replica checked against its meta file's stored CRC.

A meta file is a 7-byte header (BlockMetadataHeader: `short version` = 1, then DataChecksum's
`byte type` (NULL 0, CRC32 1, CRC32C 2) and `int bytesPerChecksum`), then one 4-byte
big-endian CRC per chunk of the block, the partial last chunk's over its own bytes. The
block is read a window at a time (a whole number of chunks) into one buffer, each window's
CRCs computed in one native call (`checksum_windows` at the chunk stride) and compared with
the stored ones as arrays: every bad chunk is found, not only the first (BlockSender stops at
it). A FINALIZED replica's meta must hold exactly ceil(length / bpc) CRCs; an open (RBW)
replica is checked up to its last complete chunk, whose CRCs the writer no longer rewrites.
An I/O error is a READ_ERROR, never corruption (HDFS's scanner reports it as a bad block).
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from merkle import _native
from merkle.replica.hdfs.blocks import RBW, Replica
from merkle.replica.safeopen import open_regular

__all__ = ["CHECKSUMS", "HEADER_BYTES", "MAX_BYTES_PER_CHECKSUM", "ChunkCheck", "verify_replica"]

HEADER_BYTES = 7
#: DataChecksum.Type ids -> the CRC crcmerkle computes for them (NULL: none)
CHECKSUMS = {0: "NULL", 1: "CRC32", 2: "CRC32C"}
_ALGORITHM = {"CRC32": "crc32", "CRC32C": "crc32c"}
#: the largest bytesPerChecksum read (writers use 512 to 64 KiB): a larger one is a finding,
#: never the size of a read
MAX_BYTES_PER_CHECKSUM = 16 << 20
#: bytes of block data read per step (a whole number of chunks)
WINDOW_BYTES = 16 << 20


@dataclass
class ChunkCheck:
    """What checking one replica found. `bad`: the indexes of the chunks whose stored CRC
    differs from the one computed over their bytes, with both values (`stored`,
    `computed`); `problems`: (kind, detail) of what is wrong besides (header, lengths, I/O);
    `crc_digest`: SHA-256 of the stored CRCs checked (two replicas of one block that each
    verify and have different digests hold different bytes)."""

    checksum: Optional[str] = None
    bytes_per_checksum: int = 0
    meta_version: Optional[int] = None
    length: int = 0
    chunks: int = 0
    crcs: int = 0
    checked: int = 0
    bad: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    stored: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint32))
    computed: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint32))
    problems: List[tuple] = field(default_factory=list)
    crc_digest: str = ""
    bytes_read: int = 0

    @property
    def verified(self) -> bool:
        """Every chunk of the replica checked, and each matched its stored CRC."""
        return (
            not self.problems
            and not len(self.bad)
            and self.checked == self.chunks
            and self.checksum in _ALGORITHM
        )


def _pread(fd: int, view: memoryview, offset: int) -> int:
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n == 0:
            break
        got += n
    return got


def verify_replica(dir_fd: int, rep: Replica, buffer: Optional[bytearray] = None) -> ChunkCheck:
    """Check replica `rep`, whose files are in the open directory `dir_fd`."""
    out = ChunkCheck()
    try:
        mfd = open_regular(dir_fd, rep.meta_name)
    except OSError as exc:
        out.problems.append(("READ_ERROR", f"{rep.meta_name}: {exc.strerror or exc}"))
        return out
    try:
        try:
            bfd = open_regular(dir_fd, rep.block_name)
        except OSError as exc:
            out.problems.append(("READ_ERROR", f"{rep.block_name}: {exc.strerror or exc}"))
            return out
        try:
            _check(mfd, bfd, rep, out, buffer)
        except OSError as exc:
            out.problems.append(("READ_ERROR", f"{exc.strerror or exc} (not corruption)"))
        finally:
            os.close(bfd)
    finally:
        os.close(mfd)
    return out


def _check(mfd: int, bfd: int, rep: Replica, out: ChunkCheck, buffer: Optional[bytearray]) -> None:
    meta_len = os.fstat(mfd).st_size
    out.length = length = os.fstat(bfd).st_size
    head = os.pread(mfd, HEADER_BYTES, 0)
    if len(head) < HEADER_BYTES:
        out.problems.append(
            ("META_HEADER_INVALID", f"a meta of {meta_len} bytes, shorter than its 7-byte header")
        )
        return
    version, kind, bpc = struct.unpack(">hbi", head)
    out.meta_version = version
    if version != 1:  # BlockMetadataHeader.readDataChecksum only warns
        out.problems.append(
            ("META_VERSION", f"meta version {version}, not 1 (HDFS warns and reads it)")
        )
    if kind not in CHECKSUMS:
        out.problems.append(
            ("META_HEADER_INVALID", f"checksum type {kind} (NULL 0, CRC32 1, CRC32C 2): "
                                    f"no DataChecksum can be made of it")
        )  # fmt: skip
        return
    out.checksum = CHECKSUMS[kind]
    out.bytes_per_checksum = bpc
    if out.checksum == "NULL":
        out.problems.append(("CHECKSUM_NULL", "checksum type NULL: no stored CRC to check"))
        return
    if not 0 < bpc <= MAX_BYTES_PER_CHECKSUM:
        out.problems.append(
            ("META_HEADER_INVALID", f"bytesPerChecksum {bpc} (read: 1 to {MAX_BYTES_PER_CHECKSUM})")
        )
        return
    out.chunks = chunks = -(-length // bpc)
    body = meta_len - HEADER_BYTES
    out.crcs = crcs = body // 4
    if rep.state == RBW:
        todo = min(length // bpc, crcs)  # up to its last complete chunk
    else:
        todo = min(chunks, crcs)
        if crcs != chunks or body % 4:
            out.problems.append(
                ("META_LENGTH_MISMATCH",
                 f"the meta holds {crcs} CRCs ({meta_len} bytes) for a block of {length} bytes, "
                 f"which needs {chunks} ({HEADER_BYTES + 4 * chunks} bytes): "
                 f"{'chunks without a CRC are not verified' if crcs < chunks else 'extra CRCs'}")
            )  # fmt: skip
    if rep.state == RBW:
        out.chunks = todo  # what an open replica is checked up to
    per = max(1, WINDOW_BYTES // bpc)
    size = per * bpc
    buf = buffer if buffer is not None and len(buffer) >= size else bytearray(size)
    view = memoryview(buf)
    crc_view = bytearray(4 * per)
    digest = hashlib.sha256()
    algorithm = _ALGORITHM[out.checksum]
    bad: List[np.ndarray] = []
    stored_bad: List[np.ndarray] = []
    computed_bad: List[np.ndarray] = []
    c = 0
    while c < todo:
        n = min(per, todo - c)
        want = min(n * bpc, length - c * bpc)
        got = _pread(bfd, view[:want], c * bpc)
        out.bytes_read += got
        short = got < want
        if short:
            out.problems.append(
                ("READ_ERROR", f"the block file ended at {c * bpc + got} bytes while being "
                               f"read (it was {length}): the rest is not verified")
            )  # fmt: skip
            n = got // bpc
            want = n * bpc
            if not n:
                break
        cview = memoryview(crc_view)[: 4 * n]
        if _pread(mfd, cview, HEADER_BYTES + 4 * c) < 4 * n:
            out.problems.append(("READ_ERROR", "the meta file shrank while being read"))
            break
        digest.update(cview)
        stored = np.frombuffer(cview, ">u4").astype(np.uint32)
        computed = _native.checksum_windows(view[:want], bpc, algorithm=algorithm)
        wrong = np.flatnonzero(computed != stored)
        if len(wrong):
            bad.append(wrong + c)
            stored_bad.append(stored[wrong])
            computed_bad.append(computed[wrong])
        c += n
        out.checked = c
        if short:
            break
    if bad:
        out.bad = np.concatenate(bad).astype(np.int64)
        out.stored = np.concatenate(stored_bad)
        out.computed = np.concatenate(computed_bad)
    out.crc_digest = digest.hexdigest()


def chunk_crcs(dir_fd: int, rep: Replica, bpc: int, chunks: np.ndarray, algorithm: str) -> tuple:
    """(stored, computed) CRCs of some chunks of replica `rep` (targeted reads: the
    comparison of a bad chunk with the other replicas' same chunk)."""
    stored = np.zeros(len(chunks), np.uint32)
    computed = np.zeros(len(chunks), np.uint32)
    mfd = open_regular(dir_fd, rep.meta_name)
    try:
        bfd = open_regular(dir_fd, rep.block_name)
        try:
            for k, c in enumerate(chunks.tolist()):
                raw = os.pread(mfd, 4, HEADER_BYTES + 4 * c)
                data = os.pread(bfd, bpc, c * bpc)
                if len(raw) < 4:
                    raise OSError(0, "the meta file is shorter than its chunk")
                stored[k] = int.from_bytes(raw, "big")
                computed[k] = (
                    int(_native.checksum_windows(data, bpc, algorithm=algorithm)[0]) if data else 0
                )
        finally:
            os.close(bfd)
    finally:
        os.close(mfd)
    return stored, computed
