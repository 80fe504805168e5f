"""Layer 2, Apache Ozone's container Merkle trees: the tree model, `.tree` file I/O, diff, merge
and Ozone's value formulas (chunk leaf -> block -> container).
May import: merkle's checksum core (merkle._native) only; never merkle.replica, merkle.cli or Spark.
"""
