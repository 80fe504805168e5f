"""Spark jobs started from the root of an unbuilt checkout import the real package: the
driver's directory holds a decoy `merkle/` whose import fails, as a fresh clone's would (no
native extension), and the job still runs, with `python -m spark_udfs` and under
spark-submit. Also: the progress feeder reads the real status tracker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import merkle
from merkle.replica.generate import generate_cluster, parse_faults
from spark_udfs.cluster.progress import read_stages

ROOT = str(Path(merkle.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def decoy_and_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("fresh_clone")
    decoy = base / "clone"
    (decoy / "merkle").mkdir(parents=True)
    (decoy / "merkle" / "__init__.py").write_text(
        "raise ImportError('DECOY: the unbuilt checkout was imported')\n"
    )
    cluster = base / "cluster"
    generate_cluster(cluster, faults=parse_faults("bitflip=1"), containers=2, seed=3)
    return decoy, cluster


def _env():
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "CRCMERKLE_DEBUG")
    }
    env["PYTHONPATH"] = ROOT  # stands for the installed package: not the working directory
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def _check(r, out):
    assert "DECOY" not in r.stderr + r.stdout, r.stderr[-3000:]
    assert r.returncode == 1, r.stderr[-3000:]  # one injected bitflip: findings
    assert "scanned 6 replica(s), 6 read: 1 error(s)" in r.stdout
    assert (out / "containers").is_dir()


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_python_m_spark_udfs_from_an_unbuilt_checkout(decoy_and_cluster):
    decoy, cluster = decoy_and_cluster
    out = decoy.parent / "out-m"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_udfs",
            "scan",
            str(cluster),
            "-o",
            str(out),
            "--master",
            "local[1]",
        ],
        cwd=decoy,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    _check(r, out)


@pytest.mark.slow  # ~40 s or more: CI's campaigns step, not the fast tier
def test_spark_submit_from_an_unbuilt_checkout(decoy_and_cluster):
    decoy, cluster = decoy_and_cluster
    submit = Path(sys.executable).parent / "spark-submit"
    if not submit.exists():
        submit = shutil.which("spark-submit")
        if submit is None:
            pytest.skip("no spark-submit (pyspark ships one in the venv's bin/)")
    out = decoy.parent / "out-submit"
    r = subprocess.run(
        [
            str(submit),
            "--master",
            "local[1]",
            os.path.join(ROOT, "spark_udfs", "__main__.py"),
            "scan",
            str(cluster),
            "-o",
            str(out),
        ],
        cwd=decoy,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    _check(r, out)


def test_read_stages_on_the_real_tracker(spark):
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    seen = []

    def job():
        sc.parallelize(range(4), 4).map(lambda x: time.sleep(1.5) or x).count()

    t = threading.Thread(target=job)
    t.start()
    deadline = time.monotonic() + 60
    while t.is_alive() and time.monotonic() < deadline and not seen:
        seen = [s for s in read_stages(tracker, sc) if s.total == 4]
        time.sleep(0.1)
    t.join()
    assert seen, "no running stage seen"
    st = seen[0]
    assert 0 <= st.done <= st.total == 4 and st.running >= 0
