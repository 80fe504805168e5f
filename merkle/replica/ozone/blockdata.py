"""`block_data` values (Ozone's BlockData protobuf) to and from crcmerkle's block metadata.

The scanner works on merkle.replica.crcmerkle.blockmeta's ContainerMeta (blocks of chunks with
their stored window checksums); this module converts the DB rows of one container into it, with
the checks Ozone's own inspector makes (the key is the decimal localID, the value's container
ID is the container's, each chunk's checksum count fits its length), and builds the values a
datanode stores for the generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from google.protobuf.message import DecodeError

from merkle.replica.crcmerkle.blockmeta import CHECKSUM_SIZES, BlockMeta, ChunkMeta, ContainerMeta
from merkle.replica.errors import BlockMetaError
from merkle.replica.ozone import datanode_pb2 as pb

__all__ = ["ChunkName", "DecodedBlocks", "decode_blocks", "encode_block", "chunk_name"]

#: (offset, length, chunkName) of one chunk: FILE_PER_CHUNK files are named by chunkName
ChunkName = Tuple[int, int, str]


def chunk_name(local_id: int, index: int) -> str:
    """The client's chunk name, `<localID>_chunk_<n>` with n = 1, 2, ..."""
    return f"{int(local_id)}_chunk_{int(index)}"


@dataclass
class DecodedBlocks:
    meta: ContainerMeta
    #: per block, its chunks' names in stored order (for FILE_PER_CHUNK files)
    names: Dict[int, List[ChunkName]] = field(default_factory=dict)


def _bad(source: str, key: bytes, reason: str) -> BlockMetaError:
    shown = key.decode("ascii", "backslashreplace")
    return BlockMetaError(f"block_data entry {shown!r}: {reason}", source)


def decode_blocks(container_id: int, rows: Iterable[Tuple[bytes, bytes]], source: str
                  ) -> DecodedBlocks:
    """ContainerMeta of the (key after prefix, value) rows of one container; BlockMetaError
    (METADATA_CORRUPT) for the first entry that is not a valid BlockData of this container."""
    out = DecodedBlocks(ContainerMeta(container_id))
    for key, value in rows:
        msg = pb.BlockData()
        try:
            msg.ParseFromString(value)
        except DecodeError as exc:
            raise _bad(source, key, f"not a BlockData message ({exc})") from None
        local_id = msg.blockID.localID
        if key != str(local_id).encode("ascii"):
            raise _bad(source, key, f"key does not name the value's block {local_id}")
        if msg.blockID.containerID != container_id:
            raise _bad(source, key, f"value is of container {msg.blockID.containerID}")
        chunks: List[ChunkMeta] = []
        names: List[ChunkName] = []
        for c in msg.chunks:
            cd = c.checksumData
            sums = cd.checksums
            cm = ChunkMeta(int(c.offset), int(c.len), int(cd.type), int(cd.bytesPerChecksum),
                           b"".join(sums))
            problem = cm.validate()
            if problem is not None or len(set(map(len, sums))) > 1:
                raise _bad(source, key, f"chunk {c.chunkName}: "
                                        f"{problem or 'checksums of different sizes'}")
            chunks.append(cm)
            names.append((cm.offset, cm.length, c.chunkName))
        # the scanner reads chunks in offset order; Ozone's tree sorts by offset too
        chunks.sort(key=lambda c: c.offset)
        out.meta.blocks[local_id] = BlockMeta(local_id, tuple(chunks))
        out.names[local_id] = names
    return out


def encode_block(container_id: int, block: BlockMeta, *, bcsid: int = 0,
                 names: Optional[Sequence[str]] = None,
                 metadata: Sequence[Tuple[str, str]] = (("TYPE", "KEY"),)) -> bytes:
    """The BlockData bytes a datanode stores for `block` (chunks in offset order, named
    `<localID>_chunk_<n>` unless `names` are given, size = sum of chunk lengths)."""
    msg = pb.BlockData()
    msg.blockID.containerID = int(container_id)
    msg.blockID.localID = block.block_id
    msg.blockID.blockCommitSequenceId = int(bcsid)
    for k, v in sorted(metadata):
        kv = msg.metadata.add()
        kv.key, kv.value = k, v
    for i, c in enumerate(block.chunks):
        ci = msg.chunks.add()
        ci.chunkName = names[i] if names is not None else chunk_name(block.block_id, i + 1)
        ci.offset = c.offset
        ci.len = c.length
        ci.checksumData.type = c.checksum_type
        ci.checksumData.bytesPerChecksum = c.bytes_per_checksum
        size = CHECKSUM_SIZES[c.checksum_type]
        if size:
            ci.checksumData.checksums.extend(c.checksums[s:s + size]
                                             for s in range(0, len(c.checksums), size))
    msg.size = sum(c.length for c in block.chunks)
    return msg.SerializeToString()
