"""The Layout interface (merkle.replica.layout) for crcmerkle's own layout:
<datanode>/<volume>/<containerID>/{chunks,metadata} (merkle.replica.crcmerkle.layout), locally or
through pyarrow.fs (HDFS, S3, GCS, file://).

Reading delegates to the layout's walks: `find_containers` for a local path (entries it cannot
use go to `on_error`), `remote.discover` for a URI (pyarrow imported only then); files are
read by `remote.replica_files` (merkle's descriptor-based reader for a local replica), and
verified by merkle.replica.verify.
"""

from __future__ import annotations

import os
from itertools import groupby
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from merkle.replica.crcmerkle.copier import copy_replica
from merkle.replica.crcmerkle.layout import (
    container_paths,
    datanode_of,
    find_containers,
    holds_containers,
)
from merkle.replica.crcmerkle.remote import discover, replica_files
from merkle.replica.crcmerkle.repair import (
    CrcmerkleRepair,
    check_container_id,
    load_peer,
    replica_groups,
)
from merkle.replica.errors import ReplicaError
from merkle.replica.layout import REPAIR_IN_PLACE, ReplicaRef, Volume, WalkErrorFn
from merkle.replica.replicadir.blockmeta import ContainerMeta, read_blockmeta
from merkle.replica.results import ReplicateResult, ScanResult, tree_result
from merkle.replica.uri import is_uri
from merkle.replica.verify import READ_OPTIONS, read_stored_tree, scan_container, scan_files

__all__ = ["LAYOUT", "CrcmerkleLayout"]

_READ_OPTIONS = READ_OPTIONS  # the verifier's options scan_files takes


class CrcmerkleLayout:
    name = "crcmerkle"
    repair = REPAIR_IN_PLACE

    # ---- reading ---------------------------------------------------------------------------

    def recognises(self, root: str) -> bool:
        """A URI (a store holds this layout's replicas only), or a local replica or directory
        with one within three levels below it (holds_containers: stops at the first)."""
        return is_uri(root) or holds_containers(root)

    def volumes(self, root: str, on_error: Optional[WalkErrorFn] = None) -> List[Volume]:
        """One walk (find_containers, or discover for a URI); each volume carries the
        replicas found in it (`listed`). NotAReplicaError (a URI: ValueError) "no container
        replica here" when there is none."""
        if is_uri(root):
            refs = [
                ReplicaRef(self.name, r.datanode, r.path, r.container, r.fs_root, r.fs_path)
                for r in discover(root)
            ]
        else:
            refs = [
                ReplicaRef(
                    self.name,
                    datanode_of(os.fspath(loc.root)),
                    os.fspath(loc.root),
                    loc.container_id,
                )
                for loc in find_containers(root, on_error)
            ]
        given = root.rstrip("/") if is_uri(root) else os.path.normpath(root)
        out = []
        for volume, group in groupby(refs, key=lambda r: r.path.rstrip("/").rpartition("/")[0]):
            listed = tuple(group)
            inner = given if given != volume and given.startswith(volume + "/") else None
            out.append(Volume(self.name, volume, listed[0].datanode, inner=inner, listed=listed))
        return out

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None) -> List[ReplicaRef]:
        if volume.listed is not None:
            return list(volume.listed)
        return [
            r for v in self.volumes(volume.inner or volume.root, on_error) for r in v.listed or ()
        ]

    def open_files(self, replica: ReplicaRef) -> Any:
        return replica_files(replica)

    def data_bytes(self, replica: ReplicaRef) -> Optional[int]:
        """From a local replica's `.blocks` (0 when it cannot be read: the scan reports it);
        None for a URI (a remote read per replica is not cheap)."""
        if replica.fs_root is not None:
            return None
        try:
            return read_blockmeta(
                container_paths(replica.path, replica.container).blockmeta
            ).data_bytes
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
        """With `write_tree` (True or False) a local replica is scanned by scan_container
        (under its lock while writing; a replica directory that is a link is refused);
        without, every replica is read through open_files (read-only). trees_only and
        metadata_only (the census: `.blocks` and `.tree`, no block file) read through
        open_files, never write. A replica reached twice is scanned twice (`seen` is not
        used: this layout's rule as before)."""
        if trees_only and metadata_only:
            raise ValueError("trees_only and metadata_only are mutually exclusive")
        write = options.pop("write_tree", None)
        options.pop("seen", None)
        read_options: Dict[str, Any] = {k: options[k] for k in _READ_OPTIONS if k in options}
        for ref in replicas:
            try:
                result = self._scan_one(
                    ref, trees_only, metadata_only, write, options, read_options
                )
            except (OSError, ReplicaError) as exc:
                yield ref, None, exc
                continue
            yield ref, result, None

    def _scan_one(
        self,
        ref: ReplicaRef,
        trees_only: bool,
        metadata_only: bool,
        write: Optional[bool],
        options: Dict[str, Any],
        read_options: Dict[str, Any],
    ) -> ScanResult:
        if trees_only:
            tree, _raw, error = read_stored_tree(self.open_files(ref))
            return tree_result(ref.path, ref.container, tree, error)
        if metadata_only:
            files = self.open_files(ref)
            try:
                return scan_files(files, metadata_only=True)
            finally:
                close = getattr(files, "close", None)
                if close is not None:  # a census visits many replicas: no descriptor waits
                    close()  # for the garbage collector
        if write is not None and ref.fs_root is None:
            return scan_container(Path(ref.path), write_tree=write, **options)
        return scan_files(self.open_files(ref), **read_options)

    title = "crcmerkle"

    def recorded_here(self, path: str) -> bool:
        return False  # the default layout: crcmerkle's own commands repair and copy

    def datanode_of(self, path: str) -> str:
        # <datanode>/<volume>/<containerID>, as the Spark scan names it
        return os.path.dirname(os.path.dirname(os.path.abspath(path)))

    def cluster_of(self, root: str) -> str:
        # a crcmerkle-layout root is its cluster directory
        return "/" + "/".join(c for c in os.path.abspath(root).split("/") if c)

    # ---- generating (GeneratedLayout) ------------------------------------------------------

    #: the generator's common faults are this layout's: none of its own
    fault_types: Tuple[str, ...] = ()
    generated_in_place = True
    records_mount_paths = False
    generator_options: Tuple[str, ...] = ()

    def check_can_generate(self) -> None:
        """Nothing to check: the generator writes this layout with the core package."""

    def mount_paths(
        self, template: Optional[str], datanodes: int, volumes: int
    ) -> Dict[Tuple[int, int], Optional[str]]:
        # a replica directory records no mount path: each volume is where it is written
        return {(d, v): None for d in range(datanodes) for v in range(volumes)}

    def finish_generation(
        self, staging: Path, out: Path, manifest: Dict[str, Any], cfg: Any, faults: Dict[str, int]
    ) -> Dict[str, Any]:
        return manifest  # generated in place: nothing to move, no option of its own

    # ---- repairing and replicating (RepairableLayout) --------------------------------------
    # (no OwnerCommands: crcmerkle's own reconcile and replicate repair and copy here)

    def replicate_refusal(self, path: str, role: str) -> Optional[str]:
        return None  # replicate copies this layout's replicas

    def copy_replica(self, source: Any, target: Any, *, on_step: Any = None) -> ReplicateResult:
        return copy_replica(source, target, on_step=on_step)

    def open_repair(self, path: str, *, dry_run: bool) -> CrcmerkleRepair:
        return CrcmerkleRepair(path, dry_run=dry_run)

    def load_peer(
        self, path: str, container_id: int
    ) -> Tuple[Any, ContainerMeta, Dict[int, bytes]]:
        return load_peer(path, container_id)

    def replica_groups(
        self, path: str, on_error: Optional[WalkErrorFn] = None
    ) -> Dict[int, List[Path]]:
        return replica_groups(path, on_error)

    def check_container_id(self, dir_fd: int, path: str, container_id: int) -> None:
        check_container_id(dir_fd, path, container_id)


LAYOUT = CrcmerkleLayout()
