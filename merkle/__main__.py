"""`python -m merkle ...` runs the `crcmerkle` command line."""

import sys

from crcmerkle_cli import main  # Ctrl-C handled while merkle.cli is imported

if __name__ == "__main__":
    sys.exit(main())
