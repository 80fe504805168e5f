"""`python -m merkle ...` runs the `crcmerkle` command line."""

import sys

from merkle.cli import main

if __name__ == "__main__":
    sys.exit(main())
