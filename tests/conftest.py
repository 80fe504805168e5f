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
# (SHORT_JOB_JAVA_OPTS, measured). Set before any JVM starts; a value from the caller's
# environment wins. The simulated hosts' daemons and executors get the same options from the
# rehearsal harness; README command 1 (CI's demo step) and the bench run the JVM's defaults.
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


#: modules that hold the machine-wide simulated-hosts lock (spark_udfs.rehearsal.simhosts
#: LOCK_FILE: fixed mount points, a standalone master and a worker per host): on two xdist
#: workers they would wait for each other, so they are one unit of work (_LockFirstScheduling)
LOCK_MODULES = (
    "test_simhosts_smoke.py",
    "test_simhosts_jobs.py",
    "test_simhosts_bookies.py",
    "test_demo_hosts.py",
)


def _holds_the_lock(nodeid: str) -> bool:
    path = nodeid.replace("\\", "/").split("::", 1)[0]
    return path.rsplit("/", 1)[-1] in LOCK_MODULES and "spark/" in path


def _weight(item: pytest.Item) -> int:
    """0: a module holding the simulated-hosts lock; 1: any other Spark module; 2: the rest."""
    nodeid = item.nodeid.replace("\\", "/")
    if _holds_the_lock(nodeid):
        return 0
    return 1 if nodeid.startswith(("tests/spark/", "spark/")) else 2


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """The longest modules first, so that two xdist workers (`--dist loadfile`, which hands out
    modules in this order: _LockFirstScheduling) end together instead of one finishing a
    Spark module alone: the simulated-hosts modules (the longest, and one unit of work), then
    the other Spark modules, then the rest. A simulated-hosts session stops the local[2] one
    (a process holds one SparkContext); the next Spark module's `spark` fixture starts it
    again (tests/spark/conftest.py). Each module's items keep their order (module
    fixtures)."""
    items.sort(key=_weight)  # stable: the order within each group and module stays


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadfile` with two changes: the modules holding the simulated-hosts lock are one
    unit of work (one worker runs them back to back instead of the other idling on the lock
    for minutes), and units go out in collection order (pytest_collection_modifyitems: the
    longest first) rather than xdist's default of the most tests first, which handed the
    few-test, minute-long Spark modules out last."""
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    class _LockFirstScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if _holds_the_lock(nodeid):
                return "simulated-hosts"
            return str(super()._split_scope(nodeid))

    config.option.loadscopereorder = False
    return _LockFirstScheduling(config, log)
