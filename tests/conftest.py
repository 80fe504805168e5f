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
