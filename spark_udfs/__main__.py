"""`python -m spark_udfs scan|diff|report|run|demo ...` (same as `crcmerkle spark ...`)."""

import sys

from spark_udfs.cli import run

sys.exit(run())
