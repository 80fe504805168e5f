"""Hostile input against the launchers (issue 23): the Spark configuration directory, the
demo's directory, secrets in URIs, numeric options, broken pipes, control characters and
early interrupts. The attacker is any local user who can write a shared directory (/tmp,
a directory prepared for the demo) or who hands root a URI, a path or a file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> Dict[str, str]:
    """This checkout first on the import path, no Spark configuration inherited."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT",
                        "PYSPARK_GATEWAY_SECRET", "MASTER", "CRCMERKLE_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


# --- issue 23 item 1: SPARK_CONF_DIR in a shared temporary directory -----------------------

def plant_spark_conf_dir(tmpdir: Path, victim: Path) -> Path:
    """What a local attacker prepares before root's first `crcmerkle spark ...`: the fixed
    directory name the old launcher used, with a spark-env.sh (which Spark's launcher
    sources) and log4j2.properties as a link to a root-only file."""
    planted = tmpdir / f"crcmerkle-spark-conf-{os.getuid()}"
    planted.mkdir(mode=0o777)
    (planted / "spark-env.sh").write_text(f"touch {planted / 'SOURCED'}\n")
    (planted / "log4j2.properties").symlink_to(victim)
    return planted


def test_spark_conf_dir_is_never_in_the_shared_temporary_directory(tmp_path, monkeypatch):
    """prepare_environment neither uses nor writes through a planted
    $TMPDIR/crcmerkle-spark-conf-<uid>: the quiet configuration is the package's own."""
    from spark_udfs import session

    shared = tmp_path / "tmp"
    shared.mkdir()
    victim = tmp_path / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    planted = plant_spark_conf_dir(shared, victim)
    empty_home = tmp_path / "spark-home"
    (empty_home / "conf").mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setenv("SPARK_HOME", str(empty_home))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    session.prepare_environment(quiet=True)
    conf_dir = Path(os.environ["SPARK_CONF_DIR"]).resolve()
    assert not str(conf_dir).startswith(str(shared.resolve())), conf_dir
    assert conf_dir == session.CONF_DIR
    assert sorted(p.name for p in conf_dir.iterdir()) == ["log4j2.properties"]
    assert (conf_dir / "log4j2.properties").read_text() == session.LOG4J2
    assert victim.read_text() == "secret\n"  # no write followed the planted link
    assert sorted(p.name for p in planted.iterdir()) == ["log4j2.properties", "spark-env.sh"]


def test_packaged_spark_conf_is_shipped_in_the_wheel_and_sdist():
    """The configuration directory is package data: declared for the wheel and the sdist."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"conf/log4j2.properties"' in pyproject
    assert "spark_udfs/conf/log4j2.properties" in (ROOT / "MANIFEST.in").read_text()
