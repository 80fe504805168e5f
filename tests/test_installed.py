"""When CI tests an installed wheel (CRCMERKLE_EXPECT_INSTALLED=1), the suite must really import
the installed package, not this checkout: otherwise it would test the source tree again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import merkle
import spark_udfs

CHECKOUT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(
    os.environ.get("CRCMERKLE_EXPECT_INSTALLED") != "1",
    reason="only when testing an installed wheel (CRCMERKLE_EXPECT_INSTALLED=1)",
)
@pytest.mark.parametrize(
    "module", [merkle, merkle._crc, merkle._native, spark_udfs], ids=lambda m: m.__name__
)
def test_package_is_imported_from_the_installation(module):
    where = Path(module.__file__).resolve()
    assert CHECKOUT not in where.parents, f"{module.__name__} imported from the checkout: {where}"
    assert "site-packages" in where.parts
