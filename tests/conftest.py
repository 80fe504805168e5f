"""Shared fixtures: run a test once per compiled kernel backend, proving the switch happened."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import merkle


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say up front which kernel backends this run exercises and which this CPU cannot run."""
    compiled, available = merkle.compiled_backends(), merkle.available_backends()
    skipped = [name for name in compiled if name not in available]
    return [f"crcmerkle backends run: {', '.join(available)}; "
            f"compiled but not runnable on this CPU: {', '.join(skipped) or 'none'}"]


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


def _is_spark(item: pytest.Item, module: str = "") -> bool:
    nodeid = item.nodeid.replace("\\", "/")
    return f"tests/spark/{module}" in nodeid or nodeid.startswith(f"spark/{module}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """The simulated-hosts modules last: their driver is this process, and a process holds
    one SparkContext, so their session stops the local[2] one every other Spark test shares
    (tests/spark/conftest.py); after them, no test needs it. Each module's items keep their
    order (module fixtures).

    Under pytest-xdist (`--dist loadgroup`, .ci/fast) each Spark module is one xdist group:
    its module fixtures (a generated cluster and its Spark scan, most of a module's time)
    then run once, on one worker, instead of once on each worker that gets one of its tests."""
    for item in items:
        if _is_spark(item) and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(f"spark-{item.path.stem}"))
    last = [i for i in items if _is_spark(i, "test_simhosts_")]
    if last:
        keep = [i for i in items if i not in last]
        items[:] = keep + last
