"""Copies proved from stored checksums (issue 27): full-object CRCs composed from metadata."""

from merkle.copies.compose import (
    BlockChecksums,
    ChunkChecksums,
    KeyCrc,
    full_object_crc,
    key_crc,
    ozone_composite_crc,
)

__all__ = ["BlockChecksums", "ChunkChecksums", "KeyCrc", "full_object_crc", "key_crc",
           "ozone_composite_crc"]
