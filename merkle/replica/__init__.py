"""Layer 3, container replicas on disk: the layout-neutral scanner, reconciler, generator, soak,
locks and file I/O, and one subpackage per on-disk layout (crcmerkle/, ozone/) behind the
Layout interface (layout.py) and its registry (layouts.py); tests/test_layout.py checks the
order of its layers from the import graph.
May import: merkle's checksum core and merkle.trees; never merkle.cli or spark_udfs.
"""
