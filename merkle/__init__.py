"""crcmerkle, layer 1: fast CRC-32C / CRC-32 / CRC-64/NVME for Python (merkle._native over csrc/), and the
public API of every layer re-exported here: merkle.trees (Ozone trees), merkle.replica (replicas
on disk); merkle.cli is the command line. The core imports nothing of the layers above it.

The checksum core is native (csrc/) with run-time CPU dispatch; see `backend()`.
Set CRCMERKLE_BACKEND to pin a kernel (an unknown or unsupported name fails the import).
"""

from __future__ import annotations

import os as _os
from contextlib import contextmanager as _contextmanager
from typing import Iterator as _Iterator

try:
    from merkle import _native  # noqa: F401  (checked first for a clear message)
except ModuleNotFoundError as _missing:  # pragma: no cover - exercised in a subprocess test
    if _missing.name != "merkle._native":
        raise
    _here = _os.path.dirname(_os.path.abspath(__file__))
    raise ImportError(
        f"crcmerkle's native extension is not built in {_here}: this looks like a source "
        "checkout shadowing the installed package (run from another directory, or build it in "
        "place with `pip install -e .`)") from None

from merkle._native import (
    GIL_RELEASE_THRESHOLD,
    CRC32,
    CRC32C,
    CRC64NVME,
    BackendUnavailableError,
    available_backends,
    backend,
    checksum_each,
    checksum_windows,
    combine_many,
    compiled_backends,
    crc32,
    crc32_combine,
    crc32c,
    crc32c_combine,
    crc64nvme,
    crc64nvme_combine,
    set_backend,
    )
from merkle.trees.diff import (ContainerIDMismatchError, DiffReport, ReplicaReport,
                               compare_replicas, diff)
from merkle.trees.merge import merge
from merkle.trees.model import ContainerTree, TreeBuilder
from merkle.trees.treefile import TreeFileError, read_tree, write_tree
from merkle.trees import ozone  # `from merkle import ozone`: the Ozone value formulas

__version__ = "0.1.0"

__all__ = [
    "CRC32",
    "CRC32C",
    "CRC64NVME",
    "GIL_RELEASE_THRESHOLD",
    "BackendUnavailableError",
    "available_backends",
    "backend",
    "checksum_each",
    "checksum_windows",
    "combine_many",
    "compiled_backends",
    "crc32",
    "crc32_combine",
    "crc32c",
    "crc32c_combine",
    "crc64nvme",
    "crc64nvme_combine",
    "set_backend",
    "using_backend",
    "ContainerTree",
    "TreeBuilder",
    "read_tree",
    "write_tree",
    "diff",
    "merge",
    "compare_replicas",
    "ozone",
    "TreeFileError",
    "DiffReport",
    "ReplicaReport",
    "ContainerIDMismatchError",
]

BACKEND_ENV = "CRCMERKLE_BACKEND"


@_contextmanager
def using_backend(name: str) -> _Iterator[str]:
    """Run a block with the named backend forced, then restore the previous one.

    The backend is process-wide: do not use this while other threads checksum.
    """
    previous = set_backend(name)
    try:
        yield backend()
    finally:
        set_backend(previous)


def _apply_backend_env() -> None:
    name = _os.environ.get(BACKEND_ENV, "").strip()
    if not name:
        return
    try:
        set_backend(name)
    except (ValueError, BackendUnavailableError) as exc:
        message = f"{BACKEND_ENV}={name!r}: {exc}"
        if _started_as_command() and _os.environ.get("CRCMERKLE_DEBUG", "") in ("", "0"):
            # The command line cannot catch an error raised while `merkle` itself is being
            # imported: say it in one line and exit 2 (the rule of merkle.cli) right here.
            import sys

            print(f"crcmerkle: error: {message} (unset {BACKEND_ENV} to pick the best one)",
                  file=sys.stderr, flush=True)
            raise SystemExit(2)
        raise ImportError(message) from None


def _started_as_command() -> bool:
    """True when this process is the `crcmerkle` command, `python -m merkle` or `python -m
    spark_udfs` (also under spark-submit), not a program importing the library."""
    import sys

    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 == "-m":  # `python -m merkle...`: the package is imported before __main__ runs
        return True
    if _os.path.basename(argv0) == "crcmerkle":
        return True
    parts = _os.path.normpath(argv0).split(_os.sep)[-2:]
    return parts in (["merkle", "__main__.py"], ["spark_udfs", "__main__.py"])


_apply_backend_env()

# ---- container replicas on disk: writer, scanner, reconciler, generator (issue 4) --------
from merkle.replica.errors import (  # noqa: E402
           BlockMetaError,
           ReplicaError,
           ReplicaLockedError,
           )
from merkle.replica.scan import ScanError, ScanResult, scan_container  # noqa: E402
from merkle.replica.reconcile import ReconcileResult, reconcile, reconcile_round  # noqa: E402
from merkle.replica.crcmerkle.writer import ContainerWriter  # noqa: E402
from merkle.replica.generate import generate_cluster  # noqa: E402

__all__ += [
    "BlockMetaError",
    "ContainerWriter",
    "ReconcileResult",
    "ReplicaError",
    "ReplicaLockedError",
    "ScanError",
    "ScanResult",
    "generate_cluster",
    "reconcile",
    "reconcile_round",
    "scan_container",
]
