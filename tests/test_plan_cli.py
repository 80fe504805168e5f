"""`crcmerkle spark plan`: a --decommission or --maintenance name the inventory does not hold
is one line, exit 2, before Spark starts (issue 36 item 11: the session is replaced by one
that fails the test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from merkle.cli import main

UUID = "6a0e7f6c-3b1c-4a49-9a4e-0c4b3c1f2a10"


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_udfs.cli import common

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(common, "_session", refuse)  # every verb starts Spark through it


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "datanodes.json"
    path.write_text(json.dumps([{"host": "dn1.example", "uuid": UUID, "volumes": ["/data/disk1"]}]))
    return path


@pytest.mark.parametrize("option", ["--decommission", "--maintenance"])
def test_a_leaving_name_not_in_the_inventory_is_one_line_before_spark(
    tmp_path: Path, inventory: Path, capsys: Any, option: str
) -> None:
    scan = tmp_path / "scan"
    scan.mkdir()
    rc = main(["spark", "plan", str(scan), option, "dn1.exampel", "--datanodes", str(inventory)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 and f"{option} dn1.exampel: not a host" in err[0], err


@pytest.mark.parametrize("name", ["dn1.example", "DN1.EXAMPLE", UUID, UUID.upper()])
def test_a_name_the_inventory_holds_goes_on_to_spark(
    tmp_path: Path, inventory: Path, capsys: Any, name: str
) -> None:
    scan = tmp_path / "scan"
    scan.mkdir()
    main(["spark", "plan", str(scan), "--decommission", name, "--datanodes", str(inventory)])
    assert "Spark was started" in capsys.readouterr().err  # the check let it through
