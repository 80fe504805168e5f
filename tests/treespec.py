"""Small trees written as literals, shared by the diff and merge tests."""

from __future__ import annotations

from merkle.trees.model import TreeBuilder

OK, BAD = True, False


def tree(spec, cid=1, generated=True):
    """spec: {block_id: {offset: (leaf, healthy)} | ("T", value)}"""
    b = TreeBuilder(cid)
    for bid, chunks in spec.items():
        if isinstance(chunks, tuple):
            b.mark_deleted(bid, value=chunks[1])
            continue
        b.add_block(bid)
        for off, (leaf, healthy) in chunks.items():
            b.add_chunk(bid, off, 100, leaf=leaf, checksum_matches=healthy)
    return b.build(data_checksum=generated)
