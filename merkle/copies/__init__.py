"""Copies proved from stored checksums (issue 27): full-object CRCs composed from metadata.

fold.py: the CRC of pieces from theirs (`full_object_crc`); chunks.py: a key's chunk checksums
and their validation; ozonecrc.py: Ozone's own COMPOSITE_CRC, emulated; compose.py: a key's
CRC (`key_crc`) with Ozone's beside it.
"""

from merkle.copies.chunks import BlockChecksums, ChunkChecksums
from merkle.copies.compose import KeyCrc, key_crc
from merkle.copies.fold import full_object_crc
from merkle.copies.ozonecrc import ozone_composite_crc

__all__ = ["BlockChecksums", "ChunkChecksums", "KeyCrc", "full_object_crc", "key_crc",
           "ozone_composite_crc"]
