"""The cluster side the jobs share: starting Spark, placing work on its hosts, and judging
which of the hosts' volumes count.

    session        get_session: the SparkSession and its settings (Java, quiet logs, conf)
    worker_daemon  Spark's Python worker daemon (`spark.python.daemon.module`): the installed
                   crcmerkle first on the workers' import path
    locality       tasks placed on the host that holds their data (located_rdd)
    hosts          who each datanode is, where it runs, which volumes were not verified
    vouch          which scanned volumes may vouch for their replicas: the identity checks
                   only the whole cluster and its inventory show (a host not in the
                   inventory, a volume naming another datanode, one datanode on two hosts)
    progress       the one-line stage display on stderr
    errors         describe: Spark's, py4j's and pyarrow's failures as one line
vouch lives here, not in spark_udfs.tables: it reads no table and defines no schema; it
judges hosts and volumes against the inventory (per volume, never per replica), as hosts
does, for the data-local scan's driver (spark_udfs.jobs.hostscan) and for the readers of
emitted tables (spark_udfs.cli.common._read_tables) alike.
This package imports nothing (Spark's workers start `python -m
spark_udfs.cluster.worker_daemon`, which must run before any of crcmerkle is imported).
"""
