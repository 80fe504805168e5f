"""A rehearsal an operator can run: the data-local path of a real cluster on one machine.

`crcmerkle spark demo --hosts N` (spark_udfs.rehearsal.demo) starts a Spark standalone master
and N workers on 127.0.0.2.., each in its own mount namespace seeing only its datanode's disks
(spark_udfs.rehearsal.simhosts), then runs the inventory, the data-local scan, the report that
names hosts and a decommission plan, and checks the findings against the generated ground
truth. The data-local tests (tests/spark/simhosts.py) use the same harness.

It stays a package of its own beside spark_udfs.demo, not under it: it is a harness (a
standalone master, simulated hosts, mount namespaces) that the data-local tests and
benchmarks start without any demo, and mount_exec.py runs as a file in the namespaces,
importing nothing of the package; the demo's verb only calls into it
(spark_udfs.cli.demo, `--hosts`).
"""
