"""The Spark launcher against a hostile shared temporary directory (issue 23 item 1): a
spark-env.sh planted in $TMPDIR/crcmerkle-spark-conf-<uid> is never sourced by Spark's
launcher, and no write follows a link planted there. Starts a real JVM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_hostile_launcher import shared_tmp_with_plant  # noqa: E402  (tests/ on the path)

ROOT = Path(__file__).resolve().parents[2]

_START = """
from spark_udfs.cluster.session import get_session
spark = get_session("local[1]")
print(spark.range(3).count())
spark.stop()
"""


def test_planted_spark_env_is_not_sourced(tmp_path):
    shared, victim, planted = shared_tmp_with_plant(tmp_path)
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
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(shared))
    r = subprocess.run(
        [sys.executable, "-c", _START],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "3"
    assert not (planted / "SOURCED").exists()  # Spark's launcher never ran the planted script
    assert victim.read_text() == "secret\n"


def test_spark_error_line_for_an_unencoded_secret_hides_it(tmp_path, capsys):
    """An AWS secret holds `/` and `+`: pasted unencoded, pyarrow cannot parse the URI and
    says so quoting it ("Cannot parse URI: 's3://KEY:SECRET@...'"); the line shows none of
    the secret (issue 23 item 7)."""
    from merkle.cli import main

    secret = "wJalrXUt/nFEMI+K7MDENG@bPxRfi%CYEXAMPLE:KEY"
    uri = f"s3://AKIAEXAMPLEKEYID:{secret}@bucket/dir"
    assert main(["spark", "scan", uri, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "crcmerkle: error:" in err and "s3://bucket/dir" in err, err
    for piece in ("wJalrXUt", "nFEMI", "K7MDENG", "bPxRfi", "CYEXAMPLE", secret):
        assert piece not in err, err
