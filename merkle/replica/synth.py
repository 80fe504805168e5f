"""What the generator and every layout's part of it share, below both: the generator's error
and the pristine bytes of a block (merkle.replica.generate writes clusters with them; a
layout that moves a generated cluster onto its own volumes, merkle.replica.ozone.generate,
rebuilds metadata from them), and the output directory's handling every generator shares (a
new or empty OUT, or one holding only an earlier run, which is replaced). Imports nothing of
the generator nor of the layouts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import numpy as np

from merkle.replica.errors import ReplicaError

__all__ = [
    "GeneratorError",
    "MARKER_NAME",
    "block_data",
    "prepare_output",
    "remove_run",
    "write_new_file",
]

#: Marker file of a generated cluster: a later run may replace a directory holding only a
#: generated cluster (the marker and what the run's `owns` recognises as its own)
MARKER_NAME = ".crcmerkle-generate"


class GeneratorError(ReplicaError):
    """Bad generator parameters, or faults that do not fit the cluster."""


def block_data(seed: int, container_id: int, block_id: int, length: int) -> bytes:
    """The pristine bytes of a block (depends only on seed, container and block)."""
    return np.random.default_rng([seed & 0xFFFFFFFF, container_id, block_id, 0xB10C]).bytes(length)


def prepare_output(root: Path, owns: Callable[[str], bool]) -> bool:
    """Create `root`, or accept it empty, or clear an earlier generated cluster from it (see
    MARKER_NAME; `owns`: whether a name is one a generate run writes), then write the marker.
    True when this call created the directory."""
    if root.exists() and not root.is_dir():
        raise GeneratorError("output path exists and is not a directory", os.fspath(root))
    entries = os.listdir(root) if root.exists() else []
    if entries and (
        MARKER_NAME not in entries
        or not all(map(owns, entries))
        or not os.path.isfile(root / MARKER_NAME)
        or os.path.islink(root / MARKER_NAME)
    ):
        raise GeneratorError(
            "output directory exists and is not empty (and holds more than "
            "an earlier 'crcmerkle generate' run)",
            os.fspath(root),
        )
    created = not root.exists()
    if entries:
        remove_run(root, owns, keep_marker=True)
    root.mkdir(parents=True, exist_ok=True)
    write_new_file(
        root, MARKER_NAME, "written by crcmerkle generate: a later run may replace this directory\n"
    )
    return created


def write_new_file(root: Path, name: str, text: str) -> None:
    """Write `root/name` as a new file, never through a link: OUT may be a directory another
    user prepared, and a link planted there (to a root-only file) must not be written through
    (the old entry, a file of an earlier run, is removed first)."""
    path = root / name
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(
        path,
        os.O_WRONLY
        | os.O_CREAT
        | os.O_EXCL
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0),
        0o644,
    )
    with os.fdopen(fd, "w") as f:
        f.write(text)


def remove_run(root: Path, owns: Callable[[str], bool], keep_marker: bool) -> None:
    """Remove a generated cluster's entries from root (and root itself unless keep_marker)."""
    if not root.is_dir():
        return
    for name in os.listdir(root):
        if not owns(name) or (keep_marker and name == MARKER_NAME):
            continue
        p = root / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    if not keep_marker:
        try:
            root.rmdir()
        except OSError:
            pass  # something else appeared meanwhile: leave it
