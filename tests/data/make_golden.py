"""Regenerate the golden .tree files (run once; they are committed and pin the format).

    python tests/data/make_golden.py

Data: OZONE.md's check-value container (window byte i = (i*31 + seed) mod 251; bytesPerChecksum
16384; block 1 = two 40000-byte chunks, seeds 1 and 2, at offsets 0 and 40000; block 2 = one
12345-byte chunk, seed 3), with CRC32 and with CRC32C windows; plus a tree with a tombstone, an
unhealthy chunk and a negative block ID, and a tombstone-only tree (no container value).
The bytes are produced by the protobuf runtime (the oracle), not by crcmerkle's encoder.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

from merkle.trees.model import ContainerTree, TreeBuilder  # noqa: E402

import ozone_proto  # noqa: E402


def window_data(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(n))


CHUNKS = [
    (1, 0, window_data(40000, 1)),
    (1, 40000, window_data(40000, 2)),
    (2, 0, window_data(12345, 3)),
]


def golden_trees() -> dict:
    trees = {
        "check_crc32.tree": ContainerTree.from_chunk_data(
            1, CHUNKS, bytes_per_checksum=16384, algorithm="crc32"
        ),
        "check_crc32c.tree": ContainerTree.from_chunk_data(
            1, CHUNKS, bytes_per_checksum=16384, algorithm="crc32c"
        ),
    }
    b = TreeBuilder(1 << 40)
    b.add_chunk(-7, 0, 4096, windows=[0xDEADBEEF, 0x01020304])
    b.add_chunk(3, 0, 4194304, leaf=0x1CA55F45)
    b.add_chunk(3, 4194304, 100, leaf=0x7D6DD059, checksum_matches=False)
    b.add_chunk(9, 0, 10, leaf=0x42B3AA6A)
    b.mark_deleted(9)
    b.add_block(12)
    trees["tombstones.tree"] = b.build()
    t = TreeBuilder(5)
    t.mark_deleted(100, value=0xB9D9A696)
    t.mark_deleted(101, value=0xFFFFFFFF)
    trees["tombstone_only.tree"] = t.build(data_checksum=False)
    return trees


def main() -> None:
    for name, tree in golden_trees().items():
        (HERE / name).write_bytes(ozone_proto.to_message(tree).SerializeToString())
        print(name, tree)


if __name__ == "__main__":
    main()
