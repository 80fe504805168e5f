"""HDFS replicas verified (issue 37's speed goal): checksum_windows at HDFS's 512-byte chunk
stride against the same call at 16 KiB windows over the same bytes (goal: at least 80 % of
its rate), a DataChecksum-style Python loop over google_crc32c (one CRC per chunk: the
floor), and the whole replica check (merkle.replica.hdfs.verify.verify_replica: the block
and meta read from the page cache, every chunk compared) against a plain read of the block
file. GB/s of block data; each benchmark asserts its answer, none asserts speed."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Tuple

import numpy as np
import pytest

import merkle
from merkle.cli import benchmarking as bm

from conftest import SHORT

KiB, MiB = bm.KiB, bm.MiB
CHUNK = 512
BLOCK_BYTES = (8 if SHORT else 64) * MiB
WIDE = "checksum_windows 16 KiB"
OURS_512 = "checksum_windows 512 B (HDFS chunks)"
PY = "python loop (google_crc32c, per chunk)"
VERIFY = "verify_replica (block + meta, page cache)"
READ = "read of the block file (limit)"

try:
    import google_crc32c
except ImportError:  # pragma: no cover - the peer is optional
    google_crc32c = None


@pytest.fixture(scope="module")
def block() -> bytes:
    return random.Random(37).randbytes(BLOCK_BYTES)


@pytest.mark.parametrize("impl", [OURS_512, WIDE] + ([PY] if google_crc32c else []))
def test_chunk_crcs(bench: Any, impl: str, block: bytes) -> None:
    want = merkle.checksum_windows(block, CHUNK)
    if impl == PY:
        data = block[: 4 * MiB]  # the floor, on a slice (it is ~100x slower)

        def run() -> Any:  # as DataChecksum does: one CRC per chunk, a chunk at a time
            return [google_crc32c.value(data[i : i + CHUNK]) for i in range(0, len(data), CHUNK)]

        got = bench.measure(run, case="hdfs chunk CRCs, hot", impl=impl, nbytes=len(data))
        assert got == want[: len(got)].tolist()
        return
    stride = CHUNK if impl == OURS_512 else 16 * KiB
    got = bench.measure(
        merkle.checksum_windows,
        args=(block, stride),
        case="hdfs chunk CRCs, hot",
        impl=impl,
        nbytes=len(block),
    )
    assert len(got) == -(-len(block) // stride)
    if stride == CHUNK:
        assert np.array_equal(got, want)


@pytest.fixture(scope="module")
def replica(tmp_path_factory: Any, block: bytes) -> Tuple[Path, Any]:
    from merkle.replica.hdfs.blocks import FINALIZED, Replica

    d = tmp_path_factory.mktemp("hdfs-replica")
    (d / "blk_1073741825").write_bytes(block)
    crcs = merkle.checksum_windows(block, CHUNK).astype(">u4").tobytes()
    (d / "blk_1073741825_1001.meta").write_bytes(b"\x00\x01\x02\x00\x00\x02\x00" + crcs)
    rep = Replica("BP-1-127.0.0.1-1", 1073741825, 1001, FINALIZED, ".", "blk_1073741825",
                  "blk_1073741825_1001.meta", len(block))  # fmt: skip
    return d, rep


@pytest.mark.parametrize("impl", [VERIFY, READ])
def test_replica_check(bench: Any, impl: str, replica: Any) -> None:
    from merkle.replica.hdfs.verify import verify_replica

    d, rep = replica
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    buffer = bytearray(16 * MiB)
    try:
        if impl == VERIFY:

            def run() -> Any:
                return verify_replica(fd, rep, buffer)

            def right(r: Any) -> bool:
                return r.verified and r.checked == -(-BLOCK_BYTES // CHUNK)

        else:

            def run() -> Any:
                bfd = os.open(d / rep.block_name, os.O_RDONLY)
                try:
                    total, view = 0, memoryview(buffer)
                    while True:
                        n = os.preadv(bfd, [view], total)
                        if not n:
                            return total
                        total += n
                finally:
                    os.close(bfd)

            def right(r: Any) -> bool:
                return r == BLOCK_BYTES

        got = bench.measure(
            run, case="hdfs replica, 512 B chunks, page cache", impl=impl, nbytes=BLOCK_BYTES
        )
        assert right(got), impl
    finally:
        os.close(fd)
