"""Apache HDFS datanodes as a replica layout (read-only): storage directories, block pools,
block and meta files (merkle.replica.hdfs.storage, .blocks), every chunk's stored CRC checked
(.verify), the NameNode's view from saved fsck output (.fsck), and the scan that judges
every replica together (.scan)."""
