"""Spark (PySpark) UDFs and jobs over the crcmerkle core. Populated by the Spark work."""
