"""Copies proved from stored checksums (issue 27): full-object CRCs composed from metadata.

fold.py: the CRC of pieces from theirs (`full_object_crc`); chunks.py: a key's chunk checksums
and their validation; ozonecrc.py: Ozone's own COMPOSITE_CRC, emulated; compose.py: a key's
CRC (`key_crc`) with Ozone's beside it; omdb.py: Ozone's key map read from an OM DB checkpoint
(`open_om_db`; imported on its own, as it needs rocksdict and protobuf, the `ozone` extra).
"""

from merkle.copies.chunks import BlockChecksums, ChunkChecksums
from merkle.copies.compose import KeyCrc, key_crc
from merkle.copies.fold import full_object_crc
from merkle.copies.ozonecrc import ozone_composite_crc

__all__ = [
    "BlockChecksums",
    "ChunkChecksums",
    "KeyCrc",
    "full_object_crc",
    "key_crc",
    "ozone_composite_crc",
]
