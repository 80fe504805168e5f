"""Starting Spark without a Java runtime is a clear error, not pyspark's JAVA_GATEWAY_EXITED."""

from __future__ import annotations

import os

import pytest

from merkle.cli import main
from spark_udfs.session import JavaNotFoundError, find_java


def test_find_java_uses_java_home_then_path(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="openjdk-17"):
        find_java()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="holds no bin/java"):
        find_java()
    (tmp_path / "bin").mkdir()
    java = tmp_path / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    assert find_java() == os.fspath(java)


def test_cli_says_java_is_missing_in_one_line(tmp_path, monkeypatch, capsys):
    from pyspark.sql import SparkSession

    # as in a fresh process, even when the suite's session is already running
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["spark", "demo", "--dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crcmerkle: error: Spark needs a Java 17+ runtime") and \
        err.count("\n") == 1
    assert not (tmp_path / "d").exists()  # nothing generated before the check


@pytest.mark.parametrize("env, given", [
    ({}, False),
    ({"PYSPARK_GATEWAY_PORT": "4242"}, True),  # the driver spark-submit started
    ({"PYSPARK_SUBMIT_ARGS": "--master yarn pyspark-shell"}, True),
    ({"PYSPARK_SUBMIT_ARGS": "pyspark-shell"}, False),
    ({"MASTER": "spark://h:7077"}, True),
])
def test_a_launchers_master_is_not_overridden(monkeypatch, env, given):
    from spark_udfs import session

    for k in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "MASTER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert session._master_given() is given
