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


# --- issue 23 item 4: the demo's directory ---------------------------------------------------

def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    return victim


def test_demo_marker_is_never_written_through_a_link(tmp_path):
    """An earlier demo's directory whose marker and entries were swapped for links: the
    links are removed, never followed; the marker is a new regular file."""
    from spark_udfs.cli import DEMO_MARKER, prepare_demo_dir

    victim = _victim(tmp_path)
    private = tmp_path / "private"
    private.mkdir()
    (private / "keep").write_text("keep\n")
    work = tmp_path / "demo"
    work.mkdir()
    (work / DEMO_MARKER).symlink_to(victim)
    (work / "cluster").symlink_to(private)  # an earlier demo's entry, now a link
    (work / "report.json").symlink_to(victim)
    assert prepare_demo_dir(str(work)) is False
    assert victim.read_text() == "secret\n"
    assert (private / "keep").read_text() == "keep\n"
    assert sorted(p.name for p in work.iterdir()) == [DEMO_MARKER]
    marker = os.lstat(work / DEMO_MARKER)
    assert stat.S_ISREG(marker.st_mode) and marker.st_nlink == 1


def test_failed_demo_cleanup_never_follows_links(tmp_path):
    from spark_udfs.cli import DEMO_MARKER, _clean_failed_demo, prepare_demo_dir

    private = tmp_path / "private"
    (private / "scan").mkdir(parents=True)
    (private / "scan" / "keep").write_text("keep\n")
    work = tmp_path / "demo"
    prepare_demo_dir(str(work))
    (work / "scan").symlink_to(private / "scan")
    (work / "cluster").mkdir()
    (work / "cluster" / "link").symlink_to(private)
    _clean_failed_demo(str(work), created=False)
    assert sorted(p.name for p in work.iterdir()) == [DEMO_MARKER]
    assert (private / "scan" / "keep").read_text() == "keep\n"
    moved = tmp_path / "moved"
    work.rename(moved)
    work.symlink_to(moved)  # the directory itself swapped for a link
    _clean_failed_demo(str(work), created=True)
    assert (moved / DEMO_MARKER).exists() and work.is_symlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_demo_refuses_a_directory_another_user_prepared(tmp_path):
    """The attack as filed: root runs the demo in a directory another user prepared, with
    the marker linked to a root-only file."""
    from merkle.cli import CLIError
    from spark_udfs.cli import DEMO_MARKER, check_demo_dir, prepare_demo_dir

    victim = _victim(tmp_path)
    work = tmp_path / "demo"
    work.mkdir()
    (work / DEMO_MARKER).symlink_to(victim)
    os.chown(work, 4242, 4242)
    os.lchown(work / DEMO_MARKER, 4242, 4242)
    with pytest.raises(CLIError, match="owned by another user"):
        check_demo_dir(str(work))
    with pytest.raises(CLIError, match="owned by another user"):
        prepare_demo_dir(str(work))
    assert victim.read_text() == "secret\n"
    alice = tmp_path / "alice"
    alice.mkdir()
    os.chown(alice, 4242, 4242)  # a new --dir inside another user's directory
    with pytest.raises(CLIError, match="another user"):
        prepare_demo_dir(str(alice / "demo"))
    assert not (alice / "demo").exists()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CLIError, match="symbolic link"):
        prepare_demo_dir(str(link))
