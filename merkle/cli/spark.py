"""`crcmerkle spark ...`: the Spark jobs (scan, diff, report); defined in spark_udfs.cli."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from spark_udfs.cli import add_parser as spark_parser

    return spark_parser(subparsers)
