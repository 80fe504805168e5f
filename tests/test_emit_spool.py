"""A volume's files written whole mid-pass (`scan --loop --emit --emit-every`,
spark_udfs.tables.emit._SpooledVolumeFiles over spark_udfs.tables.spool): the replicas read so
far with the earlier file's rows of the others; nothing written when the earlier file is
missing or of another version; the spool removed at the end."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from spark_udfs.tables.emit import (  # noqa: E402
    TABLE_ARROW,
    _output,
    _SpooledVolumeFiles,
)

NAME = "emit-h0_vol.parquet"
TABLES = ["containers", "errors", "volumes"]


def _rows(table: str, rows: List[Dict[str, Any]]) -> Any:
    return pa.Table.from_pylist(
        [{"datanode": "dn-1", **r} for r in rows], schema=TABLE_ARROW[table]
    )


def _read(out: Path, table: str) -> List[Dict[str, Any]]:
    return pq.read_table(str(out / table / "datanode=dn-1" / NAME)).to_pylist()


def _volume(replicas: int) -> Any:
    return _rows("volumes", [{"volume": "/v", "status": "SCANNED", "replicas": replicas}])


def test_mid_pass_files_are_whole_and_a_foreign_earlier_file_is_not_carried(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    o = _output(str(out))
    try:
        first = _SpooledVolumeFiles(o, NAME)
        first.open_all("dn-1", TABLES)
        assert first.publish(_volume(2)) is None  # a first pass: no earlier file, not written
        assert not (out / "containers" / "datanode=dn-1" / NAME).exists()
        first.add("containers", _rows("containers", [{"replica": "a", "errors": 0},
                                                      {"replica": "b", "errors": 1}]))  # fmt: skip
        first.add("errors", _rows("errors", [{"replica": "b", "error": "CORRUPT_CHUNK"}]))
        first.add("volumes", _volume(2))
        spool = first.spool.dir
        assert len(first.close()) == len(TABLES)
        assert not os.path.exists(spool)
        # the next pass has read b again (now clean) and not yet a
        second = _SpooledVolumeFiles(o, NAME)
        second.open_all("dn-1", TABLES)
        second.add("containers", _rows("containers", [{"replica": "b", "errors": 0}]))
        assert second.publish(_volume(2)) is not None
        got = {r["replica"]: r["errors"] for r in _read(out, "containers")}
        assert got == {"a": 0, "b": 0}  # whole: a from the pass before, b from this one
        assert _read(out, "errors") == []  # b's old finding is gone with its old rows
        assert [r["replicas"] for r in _read(out, "volumes")] == [2]
        # an earlier file of another version (a column missing): nothing carried, none written
        path = out / "containers" / "datanode=dn-1" / NAME
        pq.write_table(pa.table({"replica": ["a"]}), str(path))
        assert second.publish(_volume(2)) is None
        assert pq.ParquetFile(str(path)).schema_arrow.names == ["replica"]  # left as it was
        second.abandon()
        assert not os.path.exists(second.spool.dir)
        assert not [p for p in out.rglob("*") if p.name.startswith(".")]  # no temporary left
    finally:
        o.close()
