"""Backend reporting, forcing at run time, and the CRCMERKLE_BACKEND environment variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import merkle


def test_backend_lists() -> None:
    available = merkle.available_backends()
    compiled = merkle.compiled_backends()
    assert available and available[-1] == "portable"
    assert set(available) <= set(compiled)
    assert merkle.backend() in available


def test_default_is_the_best_available() -> None:
    if os.environ.get(merkle.BACKEND_ENV):
        pytest.skip("CRCMERKLE_BACKEND pins the backend for this run")
    code = "import merkle; print(merkle.backend(), merkle.available_backends()[0])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != merkle.BACKEND_ENV},
    )
    active, best = out.stdout.split()
    assert active == best


def test_set_backend_errors() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        merkle.set_backend("nonsense")
    with pytest.raises(TypeError):
        merkle.set_backend(3)
    unavailable = set(merkle.compiled_backends()) - set(merkle.available_backends())
    for name in unavailable:
        with pytest.raises(merkle.BackendUnavailableError):
            merkle.set_backend(name)


def test_using_backend_restores() -> None:
    before = merkle.backend()
    with merkle.using_backend("portable") as active:
        assert active == "portable" == merkle.backend()
    assert merkle.backend() == before


def test_one_backend_for_both_extensions() -> None:
    """merkle._crc (scalar API) and merkle._native (numpy API) each link the C core; _native
    uses _crc's backend slot, so a switch through either reaches the kernels of both."""
    from merkle import _crc, _native

    before = merkle.backend()
    try:
        for name in merkle.available_backends():
            _crc.set_backend(name)
            assert _native._core_backend() == name
        _native.set_backend("portable")  # the re-exported switch is _crc's
        assert _crc.backend() == _native._core_backend() == "portable"
    finally:
        merkle.set_backend(before)


def test_environment_backend_reaches_the_numpy_layer() -> None:
    """CRCMERKLE_BACKEND is applied through merkle._crc at `import merkle`: the numpy layer
    (merkle._native) must run that backend too."""
    name = merkle.available_backends()[-1]
    code = (
        "import merkle; merkle.checksum_windows(b'abc', 2); print(merkle._native._core_backend())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, CRCMERKLE_BACKEND=name),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == name


def _import_with(value: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CRCMERKLE_BACKEND=value)
    return subprocess.run(
        [sys.executable, "-c", "import merkle; print(merkle.backend())"],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("name", merkle.available_backends())
def test_environment_forces_backend(name: str) -> None:
    result = _import_with(name)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == name


def test_environment_unknown_backend_fails_import() -> None:
    result = _import_with("bogus")
    assert result.returncode != 0
    assert "CRCMERKLE_BACKEND='bogus'" in result.stderr and "unknown backend" in result.stderr


def test_environment_unsupported_backend_fails_import() -> None:
    unavailable = sorted(set(merkle.compiled_backends()) - set(merkle.available_backends()))
    if not unavailable:
        pytest.skip("every compiled backend runs on this CPU")
    result = _import_with(unavailable[0])
    assert result.returncode != 0 and "cannot run on this CPU" in result.stderr


def _cpu_flags() -> set[str] | None:
    """The x86 feature flags Linux reports for this CPU (None elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


# Backend -> the /proc/cpuinfo flags its CPUID + XGETBV check stands for (Linux clears the AVX
# flags when it does not save the register state they need).
X86_FLAGS = {
    "avx512-vpclmulqdq": {"avx512f", "avx512bw", "avx512vl", "vpclmulqdq", "pclmulqdq", "sse4_2"},
    "avx2-vpclmulqdq": {"avx2", "vpclmulqdq", "pclmulqdq", "sse4_2"},
    "pclmulqdq": {"pclmulqdq", "sse4_2"},
    "sse42": {"sse4_2"},
}


@pytest.mark.parametrize("name", sorted(X86_FLAGS))
def test_detection_agrees_with_the_kernel(name: str) -> None:
    """A compiled x86 backend is available exactly when Linux reports its CPU features."""
    flags = _cpu_flags()
    if flags is None or "sse2" not in flags:
        pytest.skip("not Linux on x86")
    if name not in merkle.compiled_backends():
        pytest.skip(f"{name} is not in this build")
    assert (name in merkle.available_backends()) == X86_FLAGS[name].issubset(flags)
