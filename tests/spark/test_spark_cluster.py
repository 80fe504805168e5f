"""The demo's pipeline on a real Spark standalone cluster: a master and one worker (1 core,
small memory) started with pyspark's bin/spark-class on 127.0.0.1, the driver started by
spark-submit the documented way (docs/operations/cluster.md); the findings equal the local[2] run's.

The worker is started with a clean environment (no PYTHONPATH, no virtualenv): its
executors see the driver's virtualenv only if told to. Two routes, as in docs/operations/cluster.md:
  - CRCMERKLE_SPARK_ARCHIVE=env.tar.gz (a `venv-pack -p env -o env.tar.gz` of a virtualenv
    with crcmerkle[spark] installed, built by .ci/run): `--archives env.tar.gz#env` and
    spark.pyspark.python=./env/bin/python; the test checks the executor unpacked it;
  - otherwise, with CRCMERKLE_CLUSTER_TESTS=1, the installed env (spark.pyspark.python is
    this interpreter, the same path on every node).
Skipped unless one of the two is set (it starts four JVMs: about a minute).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest

from spark_udfs.cluster.session import SHORT_JOB_JAVA_OPTS

from spark_standalone import clean_env, free_port, spark_home

ARCHIVE = os.environ.get("CRCMERKLE_SPARK_ARCHIVE")
if not ARCHIVE and os.environ.get("CRCMERKLE_CLUSTER_TESTS", "") in ("", "0"):
    pytest.skip(
        "standalone-cluster test: set CRCMERKLE_SPARK_ARCHIVE=env.tar.gz (packed env) "
        "or CRCMERKLE_CLUSTER_TESTS=1 (installed env); .ci/run does",
        allow_module_level=True,
    )

ROOT = Path(__file__).resolve().parents[2]
#: the crcmerkle layout: every fault kind fits in 4 containers (the Ozone layout's default
#: fault mix needs more, and a longer run on the 1-core worker)
CONTAINERS, SEED, LAYOUT = 4, 7, "crcmerkle"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(master URL, worker work dir); both daemons stopped afterwards."""
    base = tmp_path_factory.mktemp("standalone")
    conf = base / "conf"
    conf.mkdir()
    from spark_udfs.cluster.session import LOG4J2

    (conf / "log4j2.properties").write_text(LOG4J2)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui = free_port(), free_port()
    env = clean_env(
        {
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOG_DIR": str(base),
            "SPARK_DAEMON_JAVA_OPTS": SHORT_JOB_JAVA_OPTS,
        }
    )
    procs: List[subprocess.Popen] = []
    logs = []

    def start(args: List[str], name: str) -> None:
        log = open(base / f"{name}.log", "wb")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=base
            )
        )

    start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        "master",
    )
    master = f"spark://127.0.0.1:{port}"
    work = base / "work"
    start(
        [
            "org.apache.spark.deploy.worker.Worker",
            master,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(work),
        ],
        "worker",
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                    if json.load(r).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail(
                    "the standalone master/worker did not come up: "
                    + "".join(
                        (base / f"{n}.log").read_text(errors="replace")[-1500:]
                        for n in ("master", "worker")
                    )
                )
            time.sleep(1)
        yield master, work
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs[::-1]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in logs:
            log.close()


def _normalise(report: Dict[str, Any], root: Path) -> Dict[str, Any]:
    rel = lambda p: os.path.relpath(p, root) if p else p  # noqa: E731
    return {
        "summary": report["summary"],
        "read": report["read"],
        "containers": report["containers"],
        "mismatched": [
            {
                "containerID": m["containerID"],
                "groups": m["groups"],
                "replicas": [
                    (r["datanode"], r["dataChecksum"], rel(r["replica"])) for r in m["replicas"]
                ],
            }
            for m in report["mismatched"]
        ],
        "unrecoverable": report["unrecoverable"],
        "pending": [
            (p["container"], p["datanode"], rel(p["replica"]), p["block"])
            for p in report["pending_deletions"]
        ],
        "reconcile": sorted(
            (e["round"], rel(e["replica"]), [rel(p) for p in e["peers"]])
            for e in report["reconcile"]
        ),
    }


def test_demo_on_a_standalone_cluster_equals_local(spark, cluster, tmp_path):
    master, work = cluster
    demo = tmp_path / "demo"
    python = "./env/bin/python" if ARCHIVE else sys.executable
    cmd = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        master,
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        f"spark.executor.extraJavaOptions={SHORT_JOB_JAVA_OPTS}",
        "--driver-java-options",
        SHORT_JOB_JAVA_OPTS,
    ]
    if ARCHIVE:
        cmd += ["--archives", f"{ARCHIVE}#env"]
    cmd += [
        str(ROOT / "spark_udfs" / "__main__.py"),
        "demo",
        "--dir",
        str(demo),
        "--containers",
        str(CONTAINERS),
        "--seed",
        str(SEED),
        "--no-repair",
        "--layout",
        LAYOUT,
    ]
    # The documented form (docs/operations/cluster.md): PYSPARK_PYTHON for the executors,
    # PYSPARK_DRIVER_PYTHON for the driver (spark.pyspark.python would apply to the
    # client-mode driver too, which has no ./env); the driver imports this checkout
    env = clean_env(
        {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    )
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "OK: the jobs found exactly" in r.stdout
    assert f"on {master}" in r.stdout  # ran on the cluster, not on local[*]
    if ARCHIVE:  # the executor ran from the unpacked archive
        assert list(work.glob("app-*/*/env/bin/python")), list(work.rglob("*"))[:50]

    # the same cluster, analysed on local[2] in this process: the same findings
    from merkle.replica.generate import generate_cluster, parse_faults
    from spark_udfs.demo import _analyse

    local_root = tmp_path / "local" / "cluster"
    generate_cluster(
        local_root,
        faults=parse_faults("default", LAYOUT),
        containers=CONTAINERS,
        seed=SEED,
        layout=LAYOUT,
    )
    _, local = _analyse(
        spark,
        local_root,
        tmp_path / "local" / "scan",
        first=100,
        report_file=tmp_path / "local" / "report.json",
    )
    remote = json.loads((demo / "report.json").read_text())
    assert _normalise(remote, demo / "cluster") == _normalise(local, local_root)
    shutil.rmtree(work, ignore_errors=True)
