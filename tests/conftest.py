"""Shared fixtures: run a test once per compiled kernel backend, proving the switch happened."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

import merkle
from spark_udfs.cluster.session import SHORT_JOB_JAVA_OPTS

# Every Spark driver JVM the suite starts (each xdist worker's local[2] session, each
# `crcmerkle spark` or spark-submit subprocess, which inherit this) runs a few minutes of small
# jobs: C1 and the serial collector cost a third less CPU there than the JVM's defaults
# (SHORT_JOB_JAVA_OPTS, measured). Set before any JVM starts; a
# value from the caller's environment wins. The simulated hosts' daemons and executors get the
# same options from the rehearsal harness.
os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_JOB_JAVA_OPTS)

# A run started in the background by a shell without job control (`cmd &`) inherits SIGINT
# ignored, and so would every child a test starts (an ignored signal stays ignored across
# exec): the Ctrl-C tests would meet a process no Ctrl-C can reach. They model a user at a
# terminal, so this process takes Python's usual handler back (its children then start with
# the default action); the test of a child started with SIGINT ignored sets that itself.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say up front which kernel backends this run exercises and which this CPU cannot run."""
    compiled, available = merkle.compiled_backends(), merkle.available_backends()
    skipped = [name for name in compiled if name not in available]
    return [
        f"crcmerkle backends run: {', '.join(available)}; "
        f"compiled but not runnable on this CPU: {', '.join(skipped) or 'none'}"
    ]


@pytest.fixture(params=merkle.compiled_backends())
def each_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Force every backend this build contains in turn; skip those this CPU cannot run."""
    name = request.param
    if name not in merkle.available_backends():
        pytest.skip(f"backend {name} cannot run on this CPU")
    with merkle.using_backend(name) as active:
        # A parametrization that never switches proves nothing: check the kernel really changed.
        assert active == name
        assert merkle.backend() == name
        yield name


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """The simulated-hosts modules last: their driver is this process, and a process holds
    one SparkContext, so their session stops the local[2] one every other Spark test shares
    (tests/spark/conftest.py); after them, no test needs it. Each module's items keep their
    order (module fixtures)."""
    last = [
        i
        for i in items
        if "tests/spark/test_simhosts_" in i.nodeid.replace("\\", "/")
        or i.nodeid.startswith("spark/test_simhosts_")
    ]
    if last:
        keep = [i for i in items if i not in last]
        items[:] = keep + last
