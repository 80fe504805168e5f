"""The `crcmerkle` replica layout: Ozone's FILE_PER_BLOCK data files with block metadata in a
self-checking `metadata/<id>.blocks` file; its paths, metadata format and client-style writer.
May import: merkle's checksum core, merkle.trees and merkle.replica's shared modules.
"""
