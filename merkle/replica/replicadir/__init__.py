"""A container replica as a directory of block files (see merkle.replica.replicadir.paths)."""
