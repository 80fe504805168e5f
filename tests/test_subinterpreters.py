"""`import merkle` in an isolated sub-interpreter with its own GIL (PEP 684, CPython 3.12+), and
crc32c, crc32, crc64nvme, their combines and hash classes there:
merkle._crc is built with module state and declares per-interpreter-GIL support; numpy (and so
merkle._native) cannot load there, and `import merkle` must not try. Each check runs in a fresh
process, as crc32c 2.x's own sub-interpreter tests do."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import merkle

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12), reason="sub-interpreters with their own GIL need CPython 3.12+"
)

ROOT = Path(merkle.__file__).resolve().parent.parent

# Runs `code` in a new isolated interpreter (own GIL, single-phase-init modules refused) and
# raises in the caller if it fails: _interpreters on 3.13+, _xxsubinterpreters on 3.12.
HELPER = textwrap.dedent("""
    import sys
    try:
        import _interpreters as _I
    except ImportError:
        _I = None
        import _xxsubinterpreters as _X

    def run_isolated(code):
        if _I is not None:
            interp = _I.create(_I.new_config("isolated"))
            try:
                failure = _I.exec(interp, code)
            finally:
                _I.destroy(interp)
            if failure is not None:
                raise RuntimeError(failure.formatted)
        else:
            interp = _X.create(isolated=True)
            try:
                _X.run_string(interp, code)  # raises in the caller on failure
            finally:
                _X.destroy(interp)
""")

# What the sub-interpreter checks: values computed here in the main interpreter.
CHECKS = textwrap.dedent("""
    import sys
    import merkle
    assert "numpy" not in sys.modules, "import merkle loaded numpy"
    assert "merkle._native" not in sys.modules
    data = bytes(range(256)) * 400  # 100 KiB: above the GIL release threshold
    assert merkle.crc32c(b"123456789") == 0xE3069283
    assert merkle.crc32(b"123456789") == 0xCBF43926
    assert merkle.crc32c(data) == EXPECTED_C, "crc32c"
    assert merkle.crc32(data) == EXPECTED_Z, "crc32"
    assert merkle.crc32c(data[1000:], value=merkle.crc32c(data[:1000])) == EXPECTED_C
    assert merkle.crc32c_combine(merkle.crc32c(data[:7]), merkle.crc32c(data[7:]),
                                 len(data) - 7) == EXPECTED_C
    import io
    h = merkle.CRC32C()
    for _ in h.consume(io.BytesIO(data), 4096):
        pass
    assert h.intdigest() == EXPECTED_C and h.digest() == EXPECTED_C.to_bytes(4, "big")
    h2 = merkle.CRC32(data[:10]); h2.update(data[10:]); assert h2.hexdigest() == f"{EXPECTED_Z:08x}"
    assert merkle.crc64nvme(b"123456789") == 0xAE8B14860A799888
    assert merkle.crc64nvme(data) == EXPECTED_64, "crc64nvme"
    assert merkle.crc64nvme(data[5:], value=merkle.crc64nvme(data[:5])) == EXPECTED_64
    assert merkle.crc64nvme_combine(merkle.crc64nvme(data[:9]), merkle.crc64nvme(data[9:]),
                                    len(data) - 9) == EXPECTED_64
    h3 = merkle.CRC64NVME(data[:100]); h3.update(data[100:])
    assert h3.digest() == EXPECTED_64.to_bytes(8, "big")
    assert merkle.backend() in merkle.available_backends()
    try:
        merkle.crc32_combine(1, 2, -1)
    except OverflowError:
        pass
    else:
        raise AssertionError("no OverflowError")
""")


def _run(script: str) -> str:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    env.pop("CRCMERKLE_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _expected() -> str:
    data = bytes(range(256)) * 400
    return (
        f"EXPECTED_C = {merkle.crc32c(data)}\nEXPECTED_Z = {merkle.crc32(data)}\n"
        f"EXPECTED_64 = {merkle.crc64nvme(data)}\n"
    )


def _main(*lines: str) -> str:
    """A script for the child process: the helper, then these lines (no indentation games)."""
    return HELPER + "\n".join(lines) + "\n"


def test_import_and_checksum_in_an_isolated_subinterpreter() -> None:
    script = _main(
        "import merkle, numpy  # the main interpreter has both loaded: no interference",
        f"run_isolated({(_expected() + CHECKS)!r})",
        "# a sub-interpreter's backend is the process's: set here, seen there",
        "previous = merkle.set_backend('portable')",
        "run_isolated(\"import merkle; assert merkle.backend() == 'portable', merkle.backend()\")",
        "merkle.set_backend(previous)",
        "print('ok')",
    )
    assert _run(script).strip() == "ok"


# Run in the isolated interpreter: what it prints goes straight to fd 1 (its own sys.stdout
# is not flushed when it is destroyed).
REFUSED = textwrap.dedent("""
    import os
    try:
        import merkle._native
    except ImportError as exc:
        os.write(1, f"refused: {type(exc).__name__}\\n".encode())
    else:
        raise AssertionError("merkle._native imported in an isolated interpreter")
    import merkle
    try:
        merkle.checksum_windows(b"abc", 2)
    except ImportError:
        os.write(1, b"bulk: ImportError\\n")
    assert merkle.crc32c(b"abc") == 0x364B3FB7
""")


def test_isolation_is_enforced() -> None:
    """The check above would be empty if the interpreter did not refuse modules that cannot
    run isolated: merkle._native (it loads numpy) must fail to import there, with ImportError;
    the bulk functions then raise ImportError while the scalar API keeps working."""
    out = _run(_main(f"run_isolated({REFUSED!r})"))
    assert out.splitlines() == ["refused: ImportError", "bulk: ImportError"]


LOOP = textwrap.dedent("""
    for i in range(30):
        assert merkle.crc32c(data) == EXPECTED_C
        h = merkle.CRC32C(); h.update(data); h.update(data[:i])
        assert h.intdigest() == merkle.crc32c(data[:i], value=EXPECTED_C)
""")

CONCURRENT = textwrap.dedent("""
    import threading
    import merkle

    errors = []

    def worker():
        try:
            for _ in range(2):
                run_isolated(WORK)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    data = bytes(range(256)) * 400
    for _ in range(30):
        assert merkle.crc32c(data) == merkle.CRC32C(data).intdigest()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    print("ok")
""")


def test_concurrent_subinterpreters_with_their_own_gil() -> None:
    """Threads each running their own isolated interpreter (own GIL), checksumming at once,
    with the main interpreter checksumming too: every value right, no crash."""
    script = _main(f"WORK = {(_expected() + CHECKS + LOOP)!r}", CONCURRENT)
    assert _run(script).strip() == "ok"
