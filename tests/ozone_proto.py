"""Ozone's ContainerChecksumInfo messages built at test time with the official protobuf
runtime (no protoc): the oracle our native encoder/decoder is checked against.

`to_message` sets the fields Ozone's ContainerMerkleTreeWriter sets, as its golden output
(tests/data/ozone-golden/) shows: every chunk field, every block's blockID, dataChecksum and
`deleted` (false included), chunks only for live blocks, the container value when generated."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="DatanodeClientProtocol_test.proto", package="hadoop.hdds.datanode", syntax="proto2"
    )

    def msg(name, fields):
        m = fd.message_type.add(name=name)
        for fname, num, ftype, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                f.type_name = f".hadoop.hdds.datanode.{tname}"

    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    i64, b, m = _F.TYPE_INT64, _F.TYPE_BOOL, _F.TYPE_MESSAGE
    msg(
        "ChunkMerkleTree",
        [
            ("offset", 1, i64, opt, None),
            ("length", 2, i64, opt, None),
            ("dataChecksum", 3, i64, opt, None),
            ("checksumMatches", 4, b, opt, None),
        ],
    )
    msg(
        "BlockMerkleTree",
        [
            ("blockID", 1, i64, opt, None),
            ("dataChecksum", 2, i64, opt, None),
            ("chunkMerkleTree", 3, m, rep, "ChunkMerkleTree"),
            ("deleted", 4, b, opt, None),
        ],
    )
    msg(
        "ContainerMerkleTree",
        [("dataChecksum", 1, i64, opt, None), ("blockMerkleTree", 2, m, rep, "BlockMerkleTree")],
    )
    msg(
        "ContainerChecksumInfo",
        [
            ("containerID", 1, i64, opt, None),
            ("containerMerkleTree", 2, m, opt, "ContainerMerkleTree"),
        ],
    )
    return fd


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())


def cls(name: str):
    return message_factory.GetMessageClass(
        _pool.FindMessageTypeByName(f"hadoop.hdds.datanode.{name}")
    )


ContainerChecksumInfo = cls("ContainerChecksumInfo")


def to_message(tree):
    """The message Ozone's Java code would build for `tree` (Ozone's field presence)."""
    info = ContainerChecksumInfo()
    info.containerID = tree.container_id
    t = info.containerMerkleTree
    t.SetInParent()
    if tree.data_checksum is not None:
        t.dataChecksum = tree.data_checksum
    for blk in tree.blocks():
        bm = t.blockMerkleTree.add()
        bm.blockID = blk.block_id
        bm.dataChecksum = blk.value
        for c in blk.chunks:
            cm = bm.chunkMerkleTree.add()
            cm.offset, cm.length, cm.dataChecksum = c.offset, c.length, c.value
            cm.checksumMatches = c.checksum_matches
        bm.deleted = blk.deleted  # always set: Ozone writes 20 00 for a live block
    return info
