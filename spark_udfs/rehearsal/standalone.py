"""Start a Spark standalone master and workers the way a node would: pip's pyspark ships no
sbin scripts, so bin/spark-class runs the daemons, with the environment a node's daemon
would have (no virtualenv on PATH, no PYTHONPATH)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Dict

__all__ = ["clean_env", "free_port", "spark_home"]


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (nothing here listens anywhere else)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """The installed pyspark, whose bin/ holds spark-class and spark-submit."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def clean_env(extra: Dict[str, str]) -> Dict[str, str]:
    """What a node's Spark daemon would have: no virtualenv on PATH, no PYTHONPATH."""
    env = {
        k: os.environ[k] for k in ("PATH", "JAVA_HOME", "HOME", "LANG", "TMPDIR") if k in os.environ
    }
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home()))
    env.update(extra)
    return env
