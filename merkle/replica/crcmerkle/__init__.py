"""The `crcmerkle` replica layout: Ozone's FILE_PER_BLOCK data files with block metadata in a
self-checking `metadata/<id>.blocks` file; its paths, metadata format, client-style writer,
reads through pyarrow.fs (remote.py) and its Layout (interface.py).
May import: merkle's checksum core, merkle.trees and merkle.replica's shared modules.
"""
