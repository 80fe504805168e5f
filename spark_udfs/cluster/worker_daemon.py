"""Spark's Python worker daemon, started with the installed crcmerkle on the import path.

The jobs set `spark.python.daemon.module` to this module (see spark_udfs.cluster.session). It
drops an unbuilt source checkout from the front of sys.path (spark_udfs._syspath), then runs
PySpark's own daemon unchanged; the workers it forks import the installed merkle and
spark_udfs.
"""

import runpy

from spark_udfs._syspath import prefer_installed_packages

if __name__ == "__main__":
    prefer_installed_packages()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
