"""Layer 3, container replicas on disk: the layout-neutral scanner, reconciler, generator, soak,
locks and file I/O, and one subpackage per on-disk layout (crcmerkle/, ozone/) behind
ReplicaFiles.
May import: merkle's checksum core and merkle.trees; never merkle.cli or spark_udfs.
"""
