"""A third replica layout, for the tests only: proof that every job speaks the Layout
interface (merkle.replica.layout) alone. Nothing outside this file knows it.

    <root>/<datanode>/<containerID>.replica/
        blocks          block metadata, in crcmerkle's `.blocks` format
        tree            the container's Merkle tree (Ozone's ContainerChecksumInfo; optional)
        <blockID>.data  one file per block; a chunk's offset is its file offset

A datanode directory is its one volume. Read-only (REPAIR_NONE: the reading role only,
merkle.replica.layout.ReplicaReader; every writing job refuses it in one line); files are
opened relative to the replica's directory descriptor without following links
(merkle.replica.safeopen).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.blocks import ContainerMeta
from merkle.replica.errors import BlockMetaError, ReplicaError
from merkle.replica.files import BlockFile, LocalBlockFile
from merkle.replica.layout import REPAIR_NONE, ReplicaRef, Volume, WalkErrorFn
from merkle.replica.replicadir.blockmeta import decode_blockmeta
from merkle.replica.results import tree_result
from merkle.replica.safeopen import open_dir, open_regular, read_regular
from merkle.replica.verify import read_stored_tree, scan_files

SUFFIX = ".replica"


class FlatFiles:
    """merkle.replica.files.ReplicaFiles of one flat replica."""

    def __init__(self, path: str, container_id: int) -> None:
        self.location = path
        self.container_id = int(container_id)

    def _read(self, name: str) -> bytes:
        fd = open_dir(self.location)
        try:
            return read_regular(fd, name, display=f"{self.location}/{name}")
        finally:
            os.close(fd)

    def load_meta(self) -> ContainerMeta:
        try:
            raw = self._read("blocks")
        except FileNotFoundError:
            raise BlockMetaError(
                "block-metadata file is missing", f"{self.location}/blocks", missing=True
            ) from None
        return decode_blockmeta(raw, f"{self.location}/blocks", self.container_id)

    def read_tree(self) -> bytes:
        return self._read("tree")

    def open_block(self, block_id: int) -> BlockFile:
        fd = open_dir(self.location)
        try:
            name = self.block_name(block_id)
            return LocalBlockFile(open_regular(fd, name, display=f"{self.location}/{name}"))
        finally:
            os.close(fd)

    def block_name(self, block_id: int) -> str:
        return f"{int(block_id)}.data"


def _replica_dirs(directory: Path) -> List[Path]:
    return sorted(
        p
        for p in directory.glob(f"*{SUFFIX}")
        if p.name[: -len(SUFFIX)].isdigit() and p.is_dir() and not p.is_symlink()
    )


class FlatLayout:
    name = "flat"
    title = "flat"
    repair = REPAIR_NONE

    def recorded_here(self, path: str) -> bool:
        return False

    def datanode_of(self, path: str) -> str:
        return os.path.dirname(os.path.abspath(path))

    def cluster_of(self, root: str) -> str:
        return os.path.abspath(root)

    def recognises(self, root: str) -> bool:
        p = Path(root)
        try:
            return (
                "://" not in root
                and p.is_dir()
                and (
                    p.name.endswith(SUFFIX)
                    or bool(_replica_dirs(p))
                    or any(_replica_dirs(d) for d in p.iterdir() if d.is_dir())
                )
            )
        except OSError:  # unreadable: not recognised (the default layout reports it)
            return False

    def volumes(self, root: str, on_error: Optional[WalkErrorFn] = None) -> List[Volume]:
        p = Path(root)
        if p.name.endswith(SUFFIX):
            return [self._volume(p.parent, inner=p)]
        if _replica_dirs(p):
            return [self._volume(p)]
        return [self._volume(d) for d in sorted(p.iterdir()) if d.is_dir() and _replica_dirs(d)]

    def _volume(self, directory: Path, inner: Optional[Path] = None) -> Volume:
        refs = tuple(
            ReplicaRef(self.name, directory.name, str(r), int(r.name[: -len(SUFFIX)]))
            for r in _replica_dirs(directory)
            if inner is None or r == inner
        )
        return Volume(
            self.name,
            str(directory),
            directory.name,
            inner=None if inner is None else str(inner),
            listed=refs,
        )

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None) -> List[ReplicaRef]:
        return list(volume.listed or ())

    def open_files(self, replica: ReplicaRef) -> FlatFiles:
        return FlatFiles(replica.path, replica.container)

    def data_bytes(self, replica: ReplicaRef) -> Optional[int]:
        try:
            return self.open_files(replica).load_meta().data_bytes
        except (OSError, ReplicaError):
            return 0

    def scan(
        self,
        replicas: Iterable[ReplicaRef],
        *,
        trees_only: bool = False,
        metadata_only: bool = False,
        **options: Any,
    ) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
        if trees_only and metadata_only:
            raise ValueError("trees_only and metadata_only are mutually exclusive")
        read = {
            k: options[k] for k in ("workers", "limiter", "progress", "buffer_size") if k in options
        }
        read["metadata_only"] = metadata_only  # the census: scan_files reads no block file
        for ref in replicas:
            files = self.open_files(ref)
            try:
                if trees_only:
                    tree, _raw, error = read_stored_tree(files)
                    yield ref, tree_result(ref.path, ref.container, tree, error), None
                else:
                    yield ref, scan_files(files, **read), None
            except (OSError, ReplicaError) as exc:
                yield ref, None, exc


LAYOUT = FlatLayout()
