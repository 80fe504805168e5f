"""crcmerkle, layer 1: fast CRC-32C / CRC-32 / CRC-64/NVME for Python (merkle._crc, merkle._native
over csrc/), and the public API of every layer re-exported here: merkle.trees (Ozone trees),
merkle.replica (replicas on disk); merkle.cli is the command line. The core imports nothing of
the layers above it. In an isolated sub-interpreter, where numpy cannot load, `import merkle`
still gives the numpy-free core (merkle._crc: the scalar functions, the hash classes, the backend
switches).

The checksum core is native (csrc/) with run-time CPU dispatch; see `backend()`.
Set CRCMERKLE_BACKEND to pin a kernel (an unknown or unsupported name fails the import).
"""

from __future__ import annotations

import os as _os
from contextlib import contextmanager as _contextmanager
from typing import TYPE_CHECKING as _TYPE_CHECKING, Any as _Any, Iterator as _Iterator

try:
    from merkle import _crc  # noqa: F401  (checked first for a clear message)
except ModuleNotFoundError as _missing:  # pragma: no cover - exercised in a subprocess test
    if _missing.name != "merkle._crc":
        raise
    _here = _os.path.dirname(_os.path.abspath(__file__))
    raise ImportError(
        f"crcmerkle's native extension is not built in {_here}: this looks like a source "
        "checkout shadowing the installed package (run from another directory, or build it in "
        "place with `pip install -e .`)"
    ) from None

# The scalar core imports no numpy, so `import merkle` works in an isolated sub-interpreter
# (PEP 684), where numpy cannot be imported. Everything that needs numpy (the bulk functions of
# merkle._native and the layers above) is imported at the end of this file; in a sub-interpreter
# that refuses it, those names are left to __getattr__ below (see _import_numpy_layers).
from merkle._crc import (
    CRC32,
    CRC32C,
    CRC64NVME,
    GIL_RELEASE_THRESHOLD,
    BackendUnavailableError,
    available_backends,
    backend,
    compiled_backends,
    crc32,
    crc32_combine,
    crc32c,
    crc32c_combine,
    crc64nvme,
    crc64nvme_combine,
    set_backend,
)

#: the numpy-based public names -> (module, attribute; None for the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "bookkeeper_entries": ("merkle._native", "bookkeeper_entries"),
    "checksum_each": ("merkle._native", "checksum_each"),
    "checksum_windows": ("merkle._native", "checksum_windows"),
    "combine_many": ("merkle._native", "combine_many"),
    "full_object_crc": ("merkle.copies.fold", "full_object_crc"),
    "ContainerIDMismatchError": ("merkle.trees.diff", "ContainerIDMismatchError"),
    "DiffReport": ("merkle.trees.diff", "DiffReport"),
    "ReplicaReport": ("merkle.trees.diff", "ReplicaReport"),
    "compare_replicas": ("merkle.trees.diff", "compare_replicas"),
    "diff": ("merkle.trees.diff", "diff"),
    "merge": ("merkle.trees.merge", "merge"),
    "ContainerTree": ("merkle.trees.model", "ContainerTree"),
    "TreeBuilder": ("merkle.trees.model", "TreeBuilder"),
    "TreeFileError": ("merkle.trees.treefile", "TreeFileError"),
    "read_tree": ("merkle.trees.treefile", "read_tree"),
    "write_tree": ("merkle.trees.treefile", "write_tree"),
    "ozone": ("merkle.trees.ozone", None),  # `from merkle import ozone`: the Ozone formulas
    # container replicas on disk: writer, scanner, reconciler, generator (issue 4)
    "BlockMetaError": ("merkle.replica.errors", "BlockMetaError"),
    "ReplicaError": ("merkle.replica.errors", "ReplicaError"),
    "ReplicaLockedError": ("merkle.replica.errors", "ReplicaLockedError"),
    "ScanError": ("merkle.replica.scan", "ScanError"),
    "ScanResult": ("merkle.replica.scan", "ScanResult"),
    "scan_container": ("merkle.replica.scan", "scan_container"),
    "ReconcileResult": ("merkle.replica.reconcile", "ReconcileResult"),
    "reconcile": ("merkle.replica.reconcile", "reconcile"),
    "reconcile_round": ("merkle.replica.reconcile", "reconcile_round"),
    "ContainerWriter": ("merkle.replica.replicadir.writer", "ContainerWriter"),
    "generate_cluster": ("merkle.replica.generate", "generate_cluster"),
    # the subpackages, as attributes (`import merkle; merkle.trees.model`) as before
    "_native": ("merkle._native", None),
    "trees": ("merkle.trees", None),
    "replica": ("merkle.replica", None),
    "copies": ("merkle.copies", None),
}


if _TYPE_CHECKING:  # what _import_numpy_layers binds at run time, spelled out for type checkers
    from merkle import _native as _native, copies as copies, replica as replica, trees as trees
    from merkle._native import (
        bookkeeper_entries,
        checksum_each,
        checksum_windows,
        combine_many,
    )
    from merkle.copies.fold import full_object_crc
    from merkle.replica.errors import BlockMetaError, ReplicaError, ReplicaLockedError
    from merkle.replica.generate import generate_cluster
    from merkle.replica.reconcile import ReconcileResult, reconcile, reconcile_round
    from merkle.replica.replicadir.writer import ContainerWriter
    from merkle.replica.scan import ScanError, ScanResult, scan_container
    from merkle.trees import ozone
    from merkle.trees.diff import (
        ContainerIDMismatchError,
        DiffReport,
        ReplicaReport,
        compare_replicas,
        diff,
    )
    from merkle.trees.merge import merge
    from merkle.trees.model import ContainerTree, TreeBuilder
    from merkle.trees.treefile import TreeFileError, read_tree, write_tree


def _lazy_getattr(name: str) -> _Any:
    """PEP 562 __getattr__, installed only in a sub-interpreter that refused the numpy layers:
    import a numpy-based name when it is used (numpy's ImportError if it still cannot load)."""
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'merkle' has no attribute {name!r}") from None
    import importlib

    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def _in_subinterpreter() -> bool:
    """True in an interpreter other than the main one (CPython 3.12+; False before)."""
    import importlib

    for name in ("_interpreters", "_xxsubinterpreters"):  # 3.13+, 3.12
        try:
            interpreters = importlib.import_module(name)
        except ImportError:
            continue
        current, main = interpreters.get_current(), interpreters.get_main()
        # 3.13 returns (id, whence) tuples, 3.12 bare ids
        return (current[0] if isinstance(current, tuple) else current) != (
            main[0] if isinstance(main, tuple) else main
        )
    return False


def _import_numpy_layers() -> None:
    """Bind the numpy-based names here, as a plain import always did. A module __getattr__ is
    avoided on purpose: it stops CPython from specializing `merkle.crc32c` attribute loads
    (+10-15 ns a call). Only an isolated sub-interpreter, where merkle._native (numpy) cannot
    load, gets the __getattr__ that imports them on use."""
    import importlib

    try:
        for name, (module_name, attr) in _LAZY.items():
            module = importlib.import_module(module_name)
            globals()[name] = module if attr is None else getattr(module, attr)
    except ImportError:
        if not _in_subinterpreter():
            raise
        globals()["__getattr__"] = _lazy_getattr


__version__ = "0.1.0"

__all__ = [
    "CRC32",
    "CRC32C",
    "CRC64NVME",
    "GIL_RELEASE_THRESHOLD",
    "BackendUnavailableError",
    "available_backends",
    "backend",
    "bookkeeper_entries",
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
    "full_object_crc",
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

            print(
                f"crcmerkle: error: {message} (unset {BACKEND_ENV} to pick the best one)",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(2) from None
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
_import_numpy_layers()

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
