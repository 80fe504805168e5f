"""The `ozone` replica layout: Apache Ozone datanode volumes (schema V3) as a datanode leaves
them: `.container` files, a RocksDB `container.db` per volume holding the block metadata,
FILE_PER_BLOCK / FILE_PER_CHUNK data files and `.tree` files. Read-only scanning with Ozone's
rules (scan.py), a writer of new volumes for the generator and tests (writer.py), and the
in-place repair of a stopped datanode's replica (offline.py, `crcmerkle reconcile --offline`).
May import: merkle's checksum core, merkle.trees and merkle.replica's shared modules
(the block-metadata model is merkle.replica.blocks; offline.py also ContainerPaths: an Ozone
container directory has the crcmerkle layout's shape). Its Layout is interface.py.
"""
