"""A rehearsal an operator can run: the data-local path of a real cluster on one machine.

`crcmerkle spark demo --hosts N` (spark_udfs.rehearsal.demo) starts a Spark standalone master
and N workers on 127.0.0.2.., each in its own mount namespace seeing only its datanode's disks
(spark_udfs.rehearsal.simhosts), then runs the inventory, the data-local scan, the report that
names hosts and a decommission plan, and checks the findings against the generated ground
truth. The data-local tests (tests/spark/simhosts.py) use the same harness.
"""
