"""The checkout's own files beside tests/ (README.md, docs/, pyproject.toml, MANIFEST.in).

The wheel step of .ci/run runs a copy of tests/ against the installed wheel, with no source
tree around it: a test of what the checkout says (the docs' tables, the packaging
declarations) skips there and runs in the checkout's own suite."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def checkout_text(name: str) -> str:
    """The text of the checkout's file `name`; skips the test where it is not there."""
    path = ROOT / name
    if not path.is_file():
        pytest.skip(f"{name} is not beside tests/ (the wheel suite runs without the checkout)")
    return path.read_text(encoding="utf-8")
