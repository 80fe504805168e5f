"""Starting Spark without a Java runtime is a clear error, not pyspark's JAVA_GATEWAY_EXITED."""

from __future__ import annotations

import os

import pytest

from merkle.cli import main
from spark_udfs.cluster.session import JavaNotFoundError, find_java


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
    assert (
        err.startswith("crcmerkle: error: Spark needs a Java 17+ runtime") and err.count("\n") == 1
    )
    assert not (tmp_path / "d").exists()  # nothing generated before the check


@pytest.mark.parametrize(
    "env, given",
    [
        ({}, False),
        ({"PYSPARK_GATEWAY_PORT": "4242"}, True),  # the driver spark-submit started
        ({"PYSPARK_SUBMIT_ARGS": "--master yarn pyspark-shell"}, True),
        ({"PYSPARK_SUBMIT_ARGS": "pyspark-shell"}, False),
        ({"MASTER": "spark://h:7077"}, True),
    ],
)
def test_a_launchers_master_is_not_overridden(monkeypatch, env, given):
    from spark_udfs.cluster import session

    for k in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "MASTER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert session._master_given() is given


_SHOW = """
import json, sys
from spark_udfs.cluster.session import get_session
spark = get_session("local[1]", conf=json.loads(sys.argv[1]))
keys = ["spark.ui.enabled", "spark.sql.execution.arrow.maxRecordsPerBatch",
        "spark.sql.session.timeZone", "spark.sql.shuffle.partitions",
        "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled",
        "spark.python.daemon.module", "spark.ui.showConsoleProgress"]
got = {k: spark.conf.get(k, None) for k in keys}
# the size the code generator's cache is built with (a static setting: read by the JVM)
got["codegen cache"] = spark._jsparkSession.sessionState().conf().codegenCacheMaxEntries()
print(json.dumps(got))
spark.stop()
"""


def _session_conf(tmp_path, env, conf):
    import json
    import subprocess
    import sys
    from pathlib import Path

    run_env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYSPARK_SUBMIT_ARGS",
            "SPARK_CONF_DIR",
            "PYSPARK_GATEWAY_PORT",
            "PYSPARK_GATEWAY_SECRET",
            "MASTER",
        )
    }
    run_env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    run_env.update(env)
    r = subprocess.run(
        [sys.executable, "-c", _SHOW, json.dumps(conf)],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_launcher_settings_win_over_the_defaults(tmp_path):
    """spark-defaults.conf and the launcher's --conf keep their values; DEFAULT_CONF fills
    in only what nobody set; the caller's conf wins over both; the worker daemon module
    stays (nobody set another)."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.ui.enabled true\nspark.sql.execution.arrow.maxRecordsPerBatch 77\n"
        "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled true\n"
        "spark.ui.showConsoleProgress   true\n"
    )
    got = _session_conf(
        tmp_path,
        {
            "SPARK_CONF_DIR": str(conf_dir),
            "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.session.timeZone=Europe/Paris "
            "--conf spark.sql.shuffle.partitions=5 pyspark-shell",
        },
        {"spark.sql.execution.arrow.pythonUDF.columnarInput.enabled": "false"},
    )
    assert got == {
        "spark.ui.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "77",
        "spark.sql.session.timeZone": "Europe/Paris",
        "spark.sql.shuffle.partitions": "5",
        "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled": "false",
        "spark.python.daemon.module": "spark_udfs.cluster.worker_daemon",
        "spark.ui.showConsoleProgress": "true",
        "codegen cache": 2000,
    }  # the user's spark-defaults


def test_defaults_apply_where_nobody_set_a_value(tmp_path):
    from spark_udfs.cluster.session import DEFAULT_CONF, SHUFFLE_TASKS_PER_CORE

    got = _session_conf(tmp_path, {}, {})
    assert got["spark.ui.enabled"] == "false"  # an embedded driver's UI is off
    assert (
        got["spark.sql.execution.arrow.maxRecordsPerBatch"]
        == DEFAULT_CONF["spark.sql.execution.arrow.maxRecordsPerBatch"]
    )
    assert got["spark.sql.session.timeZone"] == "UTC"
    assert got["codegen cache"] == int(DEFAULT_CONF["spark.sql.codegen.cache.maxEntries"])
    # scales with the cluster: local[1] has one core
    assert got["spark.sql.shuffle.partitions"] == str(SHUFFLE_TASKS_PER_CORE * 1)
    assert got["spark.python.daemon.module"] == "spark_udfs.cluster.worker_daemon"
    # pyspark's launcher sets it true as a shell's default; nobody chose it: off
    assert got["spark.ui.showConsoleProgress"] == "false"


@pytest.mark.parametrize(
    "env, launcher, chosen",
    [
        ({}, {}, False),
        # pyspark-shell's own default: in the JVM's conf, but nobody chose it
        ({}, {"spark.ui.showConsoleProgress": "true"}, False),
        ({"PYSPARK_SUBMIT_ARGS": "pyspark-shell"}, {"spark.ui.showConsoleProgress": "true"}, False),
        (
            {"PYSPARK_SUBMIT_ARGS": "--conf spark.ui.showConsoleProgress=true pyspark-shell"},
            {"spark.ui.showConsoleProgress": "true"},
            True,
        ),
        # spark-submit app.py (the driver it started): no shell default, the value is the user's
        ({"PYSPARK_GATEWAY_PORT": "4242"}, {"spark.ui.showConsoleProgress": "true"}, True),
    ],
)
def test_console_progress_is_the_users_choice_only(monkeypatch, tmp_path, env, launcher, chosen):
    from spark_udfs.cluster import session

    for k in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # no spark-defaults.conf
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert session._user_set("spark.ui.showConsoleProgress", launcher) is chosen
    (tmp_path / "spark-defaults.conf").write_text("# x\nspark.ui.showConsoleProgress true\n")
    assert session._user_set("spark.ui.showConsoleProgress", launcher) is bool(launcher)


def test_jvm_stderr_filter_drops_only_the_incubator_line():
    from spark_udfs.cluster.session import JVM_NOISE, _StderrFilter

    f = _StderrFilter(-1)
    assert f.feed(JVM_NOISE[:10]) == b""  # might still become the noise: held
    assert f.feed(JVM_NOISE[10:] + b"\nERROR x\n\r[Stage 0:>") == b"ERROR x\n\r[Stage 0:>"
    assert f.feed(b"WARN") == b""
    assert f.feed(b"ING: other\n") == b"WARNING: other\n"
    assert f.feed(JVM_NOISE + b"\r\n") == b""


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_a_scan_prints_nothing_on_stderr_off_a_terminal(tmp_path):
    """No Spark console progress bar ([Stage ...], pyspark's shell default) and no JVM
    start-up line on stderr: the JVM's fd 2 is the file, which capsys would not see."""
    import subprocess
    import sys
    from pathlib import Path

    from merkle.replica.generate import generate_cluster, parse_faults

    generate_cluster(tmp_path / "c", faults=parse_faults("none"), containers=2, seed=1)
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYSPARK_SUBMIT_ARGS",
            "SPARK_CONF_DIR",
            "PYSPARK_GATEWAY_PORT",
            "PYSPARK_GATEWAY_SECRET",
            "MASTER",
            "CRCMERKLE_DEBUG",
        )
    }
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    with open(tmp_path / "err", "wb") as err:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "spark_udfs",
                "scan",
                str(tmp_path / "c"),
                "-o",
                str(tmp_path / "o"),
                "--master",
                "local[2]",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            timeout=300,
            cwd=tmp_path,
        )
    text = (tmp_path / "err").read_text(errors="replace")
    assert r.returncode == 0, text
    assert "[Stage" not in text and "incubator" not in text
    assert text == ""


def test_the_scan_jobs_byte_accumulator_equals_the_summary(spark, tmp_path):
    """The progress line's "scanned" comes from the job itself: the executors add each
    replica's bytes_read to an accumulator (Spark's input metrics never see the Python
    reads); once the tasks are done it equals the summary table's total."""
    from pyspark.sql import functions as F

    from merkle.replica.generate import generate_cluster, parse_faults
    from spark_udfs.cluster.progress import scanned_bytes
    from spark_udfs.jobs.scan import scan_replicas

    generate_cluster(tmp_path / "c", faults=parse_faults("bitflip=1"), containers=3, seed=2)
    tables = scan_replicas(spark, [str(tmp_path / "c")])
    tables.write(str(tmp_path / "o"))
    total = tables.containers.agg(F.sum("bytes_read")).collect()[0][0]
    assert total > 0 and tables.bytes_scanned.value == total
    assert scanned_bytes()[id(tables.bytes_scanned)] == total
