"""What a replica's metadata records for each chunk, read from the files on disk without the
scanner or merkle.replica's decoders: Ozone's `container.db` rows parsed with protobuf as
BlockData, crcmerkle's `.blocks` file parsed here from its documented byte layout. The
tests compare the chunks table's recorded columns with it, and the recorded CRCs with the
block files' bytes checksummed by merkle's one-shot functions."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

import merkle

#: Ozone's ChecksumType numbers (hdds.proto), for crcmerkle's `.blocks` records
OZONE_TYPES = {1: "NONE", 2: "CRC32", 3: "CRC32C", 4: "SHA256", 5: "MD5"}
_SIZES = {1: 0, 2: 4, 3: 4, 4: 32, 5: 16}

#: (replica directory, real path) -> block -> offset -> (type name, bytes per checksum,
#: checksums as stored, recorded length)
Key = Tuple[str, int, int]
Recorded = Tuple[str, int, bytes, int]


def _ozone_replicas(root: Path) -> Iterator[Tuple[str, int, Path]]:
    """(real replica path, container ID, the volume's container.db) of every Ozone replica."""
    for db in sorted(root.rglob("container.db")):
        cid_dir = db.parent.parent  # hdds/CID-*/DS-*/container.db
        for rep in sorted(cid_dir.glob("current/containerDir*/*")):
            yield os.path.realpath(rep), int(rep.name), db


def _ozone(root: Path) -> Dict[Key, Recorded]:
    from merkle.replica.ozone import datanode_pb2 as pb
    from merkle.replica.ozone.rocks import VolumeDB

    out: Dict[Key, Recorded] = {}
    for rep, cid, db_path in _ozone_replicas(root):
        with VolumeDB(db_path) as db:
            for _key, value in db.block_values(cid):
                msg = pb.BlockData()
                msg.ParseFromString(value)
                for c in msg.chunks:
                    cd = c.checksumData
                    out[(rep, msg.blockID.localID, c.offset)] = (
                        pb.ChecksumType.Name(cd.type),
                        cd.bytesPerChecksum,
                        b"".join(cd.checksums),
                        c.len,
                    )
    return out


def _blocks_file(path: Path) -> Iterator[Tuple[int, int, Recorded]]:
    """(block, offset, recorded) of every chunk record of a `.blocks` file (format 1, as
    merkle/replica/replicadir/blockmeta.py's docstring lays it out)."""
    data = path.read_bytes()
    magic, _version, header_size, _cid, n_blocks, _n_chunks, _body = struct.unpack_from(
        ">4sHHqIIQ", data, 0
    )
    assert magic == b"CMBD"
    pos = header_size
    for _ in range(n_blocks):
        block, n, _flags = struct.unpack_from(">qII", data, pos)
        pos += 16
        for _ in range(n):
            offset, length, ctype, _res, bpc, count = struct.unpack_from(">QQB3sII", data, pos)
            pos += 28
            size = count * _SIZES[ctype]
            yield block, offset, (OZONE_TYPES[ctype], bpc, data[pos : pos + size], length)
            pos += size


def _crcmerkle(root: Path) -> Dict[Key, Recorded]:
    out: Dict[Key, Recorded] = {}
    for f in sorted(root.rglob("metadata/*.blocks")):
        rep = os.path.realpath(f.parent.parent)
        for block, offset, rec in _blocks_file(f):
            out[(rep, block, offset)] = rec
    return out


def recorded_on_disk(root: Path) -> Dict[Key, Recorded]:
    """Every chunk's recorded ChecksumData under `root` (both layouts), by (real replica
    path, block, offset)."""
    return {**_ozone(root), **_crcmerkle(root)}


def window_crcs(
    replica: str, block: int, offset: int, length: int, bpc: int, ctype: str
) -> Optional[bytes]:
    """The CRC32/CRC32C of each `bpc`-byte window of the chunk's bytes in the block file
    `<replica>/chunks/<block>.block`, packed big-endian as Ozone stores them (None for the
    other types)."""
    fn = {"CRC32": merkle.crc32, "CRC32C": merkle.crc32c}.get(ctype)
    if fn is None:
        return None
    with open(os.path.join(replica, "chunks", f"{block}.block"), "rb") as f:
        f.seek(offset)
        data = f.read(length)
    assert len(data) == length
    return b"".join(fn(data[s : s + bpc]).to_bytes(4, "big") for s in range(0, length, bpc))
