"""The Spark commands' exit statuses and one-line errors (no Java or Python stack trace without
--debug), in-process on the suite's session where possible, in a subprocess where the case is
about a fresh process (Ctrl-C at start-up, a missing package, CRCMERKLE_BACKEND)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import merkle
from merkle.cli import main
from merkle.replica.generate import generate_cluster, parse_faults
from spark_udfs.cluster.errors import MasterError, check_master, describe

ROOT = str(Path(merkle.__file__).resolve().parent.parent)


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]  # the JVM's start-up line too
    assert len(lines) == 1 and lines[0].startswith("crcmerkle: error: "), err
    assert "Traceback" not in err and "\tat " not in err and "java.lang" not in lines[0]
    return lines[0]


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    base = tmp_path_factory.mktemp("spark_errors")
    clean = base / "clean"
    generate_cluster(clean, faults=parse_faults("none"), containers=2, seed=1)
    faulty = base / "faulty"
    generate_cluster(faulty, faults=parse_faults("bitflip=1"), containers=2, seed=1)
    return clean, faulty


# ---- exit statuses: scan, diff, report, run --------------------------------------------------
@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_scan_diff_report_run_exit_statuses(spark, clusters, tmp_path, capsys):
    clean, faulty = clusters
    st, out, err = run(capsys, "spark", "scan", clean, "-o", tmp_path / "sc")
    assert st == 0 and "0 error(s)" in out
    assert "\r" not in err and "stage" not in err  # no progress line off a terminal
    st, out, _ = run(capsys, "spark", "scan", faulty, "-o", tmp_path / "sf")
    assert st == 1 and "1 error(s)" in out  # findings, as the local scan says
    assert run(capsys, "scan", faulty, "--no-write")[0] == 1
    assert run(capsys, "spark", "diff", tmp_path / "sc", "-o", tmp_path / "dc")[0] == 0
    assert run(capsys, "spark", "diff", tmp_path / "sf", "-o", tmp_path / "df")[0] == 1
    assert run(capsys, "spark", "report", tmp_path / "sc")[0] == 0
    st, out, err = run(capsys, "spark", "report", tmp_path / "sf", "--json")
    assert st == 1 and out.lstrip().startswith("{") and "\r" not in err
    assert run(capsys, "spark", "run", clean, "-o", tmp_path / "rc")[0] == 0


def test_scan_of_an_unreadable_replica_is_2(spark, clusters, tmp_path, capsys):
    _, faulty = clusters
    bad = tmp_path / "bad"
    import shutil

    shutil.copytree(faulty / "dn0", bad / "dn0")
    for meta in bad.glob("dn0/*/*/metadata"):
        shutil.rmtree(meta)
        meta.write_text("not a directory")  # the replica cannot be read at all
    st, out, _ = run(capsys, "spark", "scan", bad, "-o", tmp_path / "o")
    assert st == 2 and ", 0 read:" in out  # nothing was verified: not a clean result


# ---- one-line errors ------------------------------------------------------------------------
def test_diff_on_a_directory_that_is_not_a_scan(spark, tmp_path, capsys):
    (tmp_path / "notscan" / "x").mkdir(parents=True)
    (tmp_path / "notscan" / "x" / "a.txt").write_text("hi")
    st, _, err = run(capsys, "spark", "diff", tmp_path / "notscan", "-o", tmp_path / "o")
    assert st == 2 and "not a scan's output" in one_line(err)
    (tmp_path / "t.parquet").write_bytes(b"not parquet")  # Spark itself fails here
    st, _, err = run(capsys, "spark", "diff", tmp_path / "t.parquet", "-o", tmp_path / "o")
    assert st == 2 and "--debug" in one_line(err)


def test_missing_input_path_is_refused_before_spark_starts(tmp_path, capsys, monkeypatch):
    from spark_udfs.cli import common

    def no_spark(args):
        raise AssertionError("the JVM was started before the path was checked")

    monkeypatch.setattr(common, "_session", no_spark)  # every verb starts Spark through it
    for argv in (
        ["scan", tmp_path / "missing", "-o", tmp_path / "o"],
        ["diff", tmp_path / "missing", "-o", tmp_path / "o"],
        ["report", tmp_path / "missing"],
        ["plan", tmp_path / "missing", "--decommission", "dn0"],
        ["run", tmp_path / "missing", "-o", tmp_path / "o"],
    ):
        st, _, err = run(capsys, "spark", *argv)
        assert st == 2 and "missing: No such file" in one_line(err), argv


def test_missing_input_path(spark, tmp_path, capsys):
    for argv in (
        ["scan", tmp_path / "missing", "-o", tmp_path / "o"],
        ["diff", tmp_path / "missing", "-o", tmp_path / "o"],
        ["report", tmp_path / "missing"],
        ["run", tmp_path / "missing", "-o", tmp_path / "o"],
    ):
        st, _, err = run(capsys, "spark", *argv)
        assert st == 2 and "No such file" in one_line(err)


@pytest.mark.parametrize(
    "master, words",
    [
        ("foo", "not a Spark master URL"),
        ("spark://127.0.0.1:9", "cannot reach the Spark master"),
        ("spark://nohost", "spark://HOST:PORT"),
    ],
)
def test_bad_or_unreachable_master(master, words, clusters, tmp_path, capsys):
    clean, _ = clusters
    t0 = time.monotonic()
    st, _, err = run(capsys, "spark", "scan", clean, "-o", tmp_path / "o", "--master", master)
    assert st == 2 and words in one_line(err)
    assert time.monotonic() - t0 < 30  # not Spark's minute of retries


def test_check_master_accepts_what_spark_does():
    for ok in (
        None,
        "local",
        "local[*]",
        "local[2]",
        "local[4,3]",
        "yarn",
        "local-cluster[2,1,1024]",
    ):
        check_master(ok)
    with pytest.raises(MasterError):
        check_master("k8s://https://127.0.0.1:9", timeout=2)


def test_s3_unreachable_endpoint(spark, tmp_path, capsys):
    assert hasattr(pytest.importorskip("pyarrow.fs"), "S3FileSystem")
    uri = "s3://no-such-bucket-crcmerkle/x?endpoint_override=127.0.0.1:9&scheme=http"
    st, _, err = run(capsys, "spark", "scan", uri, "-o", tmp_path / "o")
    assert st == 2 and "S3 endpoint cannot be reached" in one_line(err)


@pytest.mark.parametrize(
    "message, hint",
    [
        (
            "When listing objects under key '' in bucket 'b': AWS Error NO_SUCH_BUCKET during "
            "ListObjectsV2 operation: The specified bucket does not exist",
            "bucket does not exist",
        ),
        (
            "When getting information for key 'x' in bucket 'b': AWS Error ACCESS_DENIED during "
            "HeadObject operation: No response body.",
            "check the credentials",
        ),
        (
            "AWS Error UNKNOWN (HTTP status 403) during HeadObject operation: InvalidAccessKeyId",
            "check the credentials",
        ),
    ],
)
def test_s3_errors_name_the_fault(message, hint):
    line = describe(OSError(message + "\nsecond line\nthird"))
    assert hint in line and "\n" not in line and "second line" not in line


def test_describe_java_and_python_worker_stacks():
    class Py4JJavaError(Exception):  # recognised by name, like the real one
        java_exception = None

    java = (
        "An error occurred while calling o42.parquet.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in "
        "stage 1.0 failed\n\tat org.apache.spark.scheduler.DAGScheduler.x(DAG.scala:1)\n"
        "Caused by: java.io.FileNotFoundException: File file:/x/y does not exist\n"
        "\tat org.apache.hadoop.fs.RawLocalFileSystem.y(R.java:2)\n"
    )
    line = describe(Py4JJavaError(java))
    assert line == "FileNotFoundException: File file:/x/y does not exist"

    class PythonException(Exception):
        pass

    worker = (
        "\n  An exception was thrown from the Python worker. Please see the stack trace "
        'below.\nTraceback (most recent call last):\n  File "x.py", line 1, in f\n'
        "merkle.replica.errors.ReplicaError: /data/dn1/7: metadata unreadable\n"
    )
    assert (
        describe(PythonException(worker))
        == "a Spark task failed: ReplicaError: /data/dn1/7: metadata unreadable"
    )
    assert describe(ValueError("plain")) is None
    err = ImportError("No module named 'pyarrow'", name="pyarrow")
    assert 'pip install ".[spark]" in the crcmerkle clone' in describe(err)


def test_debug_shows_everything(spark, tmp_path, monkeypatch):
    monkeypatch.delenv("CRCMERKLE_DEBUG", raising=False)
    (tmp_path / "t.parquet").write_bytes(b"not parquet")
    try:
        with pytest.raises(Exception) as info:
            main(
                ["spark", "diff", str(tmp_path / "t.parquet"), "-o", str(tmp_path / "o"), "--debug"]
            )
        assert type(info.value).__name__ != "CLIError"  # Spark's own exception, unshortened
    finally:
        os.environ.pop("CRCMERKLE_DEBUG", None)  # --debug set it for the process
        spark.sparkContext.setLogLevel("ERROR")


# ---- a fresh process ------------------------------------------------------------------------
def _env(**extra):
    env = {
        k: v for k, v in os.environ.items() if k not in ("CRCMERKLE_DEBUG", "PYSPARK_GATEWAY_PORT")
    }
    env["PYTHONPATH"] = ROOT
    env.update(extra)
    return env


BLOCK_PYARROW = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from merkle.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_missing_pyarrow_is_one_line(clusters, tmp_path):
    clean, _ = clusters
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            BLOCK_PYARROW,
            "spark",
            "scan",
            str(clean),
            "-o",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert r.returncode == 2 and "need pyarrow" in one_line(r.stderr)


def test_unsupported_backend_env_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "spark_udfs", "scan", "x", "-o", "y"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(CRCMERKLE_BACKEND="avx9000"),
    )
    assert r.returncode == 2 and "CRCMERKLE_BACKEND='avx9000'" in one_line(r.stderr)


def _java_children(pid: int):
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("delay", [1.5, 4.0])
def test_ctrl_c_during_start_up(clusters, tmp_path, delay):
    clean, _ = clusters
    p = subprocess.Popen(
        [sys.executable, "-m", "spark_udfs", "scan", str(clean), "-o", str(tmp_path / "o")],
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    time.sleep(delay)
    children = _java_children(p.pid)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)  # returns only once the JVM let go of stderr too
    assert p.returncode == 130, err
    assert "interrupted" in one_line(err)
    time.sleep(1)
    for c in children:  # the JVM it was starting is gone
        assert (
            not Path(f"/proc/{c}").exists()
            or Path(f"/proc/{c}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
        )


def test_a_ctrl_c_is_known_whichever_handler_ran():
    """SparkContext swaps in its own SIGINT handler, and what reaches the command can be py4j's
    broken call or nothing at all; the latch reads CPython's wakeup fd, so it knows anyway."""
    from spark_udfs.cli.common import _InterruptLatch

    latch = _InterruptLatch()
    previous_wakeup_fd = signal.set_wakeup_fd(-1)  # another command's latch, if armed
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)  # a handler that swallows
    try:
        latch.arm()
        assert not latch.seen
        previous_usr1 = signal.signal(signal.SIGUSR1, lambda signum, frame: None)
        try:
            os.kill(os.getpid(), signal.SIGUSR1)  # another signal is not a Ctrl-C
            time.sleep(0.05)
            assert not latch.seen
        finally:
            signal.signal(signal.SIGUSR1, previous_usr1)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert latch.seen
    finally:
        signal.set_wakeup_fd(previous_wakeup_fd)
        signal.signal(signal.SIGINT, previous)


def test_a_missing_ozone_package_names_the_extra():
    """Executors without the ozone extra (the cluster recipe, docs/operations/cluster.md, once
    forgot it) fail on import in the Python worker; the line says which extra to install, and
    where."""

    class PythonException(Exception):
        pass

    worker = (
        "\n  An exception was thrown from the Python worker.\nTraceback (most recent "
        'call last):\n  File "blockdata.py", line 15, in <module>\n'
        "ModuleNotFoundError: No module named 'google.protobuf.message'\n"
    )
    line = describe(PythonException(worker))
    assert line.startswith(
        "a Spark task failed: ModuleNotFoundError: No module named 'google.protobuf.message'"
    )
    assert 'pip install ".[ozone]" from the clone' in line and "\n" not in line
    assert 'pip install "$(ls dist/crcmerkle-*.whl)[ozone]"' in line
    for name in ("rocksdict", "yaml", "google.protobuf"):
        err = ModuleNotFoundError(f"No module named {name!r}", name=name)
        assert 'pip install ".[ozone]" in the crcmerkle clone' in describe(err)
    err = ModuleNotFoundError("No module named 'pandas'", name="pandas")
    assert 'pip install ".[spark]" in the crcmerkle clone' in describe(err)
