"""`python -m spark_udfs scan|diff|report|run|demo ...` (same as `crcmerkle spark ...`)."""

import sys

from spark_udfs._syspath import prefer_installed_packages

# Run from the root of an unbuilt clone, `-m` would import the clone's merkle/ (no native
# extension) instead of the installed package.
prefer_installed_packages()

from spark_udfs.cli import run  # noqa: E402  (after the import path is settled)

sys.exit(run())
