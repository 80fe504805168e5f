"""`python -m spark_udfs scan|diff|report|run|plan|demo ...` (same as `crcmerkle spark ...`)."""

import sys

from crcmerkle_cli import quiet_interrupts_while_importing, run_quietly

# A Ctrl-C while merkle and Spark's modules are imported ends with one line, exit 130 (see
# crcmerkle_cli); Python's own handler is back before any command runs, and after it the
# shutdown (Spark's atexit, py4j's threads) ends the same way.
quiet_interrupts_while_importing()

from spark_udfs._syspath import prefer_installed_packages  # noqa: E402

# Run from the root of an unbuilt clone, `-m` would import the clone's merkle/ (no native
# extension) instead of the installed package.
prefer_installed_packages()

from spark_udfs.cli import run  # noqa: E402  (after the import path is settled)

sys.exit(run_quietly(run, owns_process=True))
