"""The replica-layout interface: what every job needs of an on-disk layout, and nothing more.

A layout is one way of keeping container replicas on disk: crcmerkle's own
(`merkle.replica.crcmerkle`), a real Ozone datanode's volumes (`merkle.replica.ozone`) and
BookKeeper's bookies (`merkle.replica.bookkeeper`, read-only) are the ones the package ships;
`merkle.replica.layouts` registers them, and a test or a program may register another. The
jobs (scan, reconcile, replicate, generate, soak, the CLI verbs and the Spark jobs) ask the
registry which layout a path has and then speak only this interface: no job knows which
layout it is working on.

A layout is found from a path (`recognises`), lists the volumes under it (each with the
identity of the datanode that owns it), lists a volume's replicas, opens a replica's files for
reading (`merkle.replica.files.ReplicaFiles`, local or through pyarrow.fs alike) and scans a
batch of replicas (a layout may share work across a batch: Ozone opens a volume's RocksDB once).
It says what it can repair (`repair`). That is the reading role (`ReplicaReader`, the
registry's `Layout`), which every layout implements. The other roles are a layout's only when
it does them: the owner's commands (`OwnerCommands`: Ozone's datanodes repair and copy their
own replicas), generating (`GeneratedLayout`) and repairing and replicating
(`RepairableLayout`). A job asks for a role with `owner_of`, `generator_of` or `repairer_of`,
which refuse in one line a layout without it (a read-only one: `read_only`). Nothing of one
system is in a role: what only one layout's generator does (Ozone's OM DB) is its own
`finish_generation`'s, named by its `generator_options`.

This module imports nothing of the layouts nor of the jobs: layouts and jobs import it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    runtime_checkable,
)

from merkle.replica.errors import ReplicaError

__all__ = [
    "GeneratedLayout",
    "Layout",
    "OwnerCommands",
    "REPAIR_IN_PLACE",
    "REPAIR_NONE",
    "REPAIR_OFFLINE",
    "RepairTarget",
    "RepairableLayout",
    "ReplicaReader",
    "ReplicaRef",
    "UNKNOWN_DATANODE",
    "Volume",
    "WalkErrorFn",
    "datanode_identity",
    "generator_of",
    "owner_of",
    "read_only",
    "repair_refusal",
    "repairer_of",
    "replicate_refusal",
]

#: how a walk reports an entry it skipped (where, why) and goes on
WalkErrorFn = Callable[[Any, Exception], None]

#: what a layout can repair: its replicas in place while in service (crcmerkle's layout),
#: only with the datanode that owns them stopped (`reconcile --offline`, Ozone's volumes: its
#: own reconciler does it online), or nothing
REPAIR_IN_PLACE = "in-place"
REPAIR_OFFLINE = "offline"
REPAIR_NONE = "none"

#: the datanode of a volume whose recorded identity cannot be read (a volume with a problem)
UNKNOWN_DATANODE = "unknown"


def datanode_identity(recorded: Optional[str]) -> str:
    """The datanode a layout's recorded identity names (Ozone: VERSION's datanodeUuid), as
    every row, report and plan shows it: a UUID in its canonical lower-case form (Ozone reads
    it with UUID.fromString), anything else as written, stripped; UNKNOWN_DATANODE when
    nothing is recorded. Never a path: every host mounts its volumes at the same paths."""
    import uuid

    text = (recorded or "").strip()
    if not text:
        return UNKNOWN_DATANODE
    try:
        return str(uuid.UUID(text)) if len(text) == 36 else text
    except ValueError:
        return text


@dataclass(frozen=True)
class Volume:
    """One volume (a disk's share of a datanode) found under a path.

    `datanode` is the datanode's identity as rows and reports show it: Ozone's datanodeUuid
    (datanode_identity), the directory above the volume for crcmerkle's layout (its format
    names datanodes by directory); `datanode_uuid` and `cluster_id` are the identity the
    layout records, when it records one (Ozone's `VERSION`: datanodeUuid, clusterID; None for
    crcmerkle's layout, whose identity is its directory name)."""

    layout: str
    root: str
    datanode: str
    datanode_uuid: Optional[str] = None
    cluster_id: Optional[str] = None
    #: where under `root` the walk was asked to look (a path given inside the volume), if not
    #: the whole volume
    inner: Optional[str] = None
    #: why the volume cannot be read at all (none of its replicas is listed; the jobs report
    #: it once), else None
    problem: Optional[str] = None
    #: the volume's replicas when the walk that found the volume already listed them (then
    #: `Layout.replicas` returns them without listing again), else None
    listed: Optional[Tuple[ReplicaRef, ...]] = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ReplicaRef:
    """One replica found by a layout: plain strings and ints, so that it travels as a Spark
    work row and back. `path` is as found (a local path, or a URI for a store reached through
    pyarrow.fs); `fs_root`/`fs_path`: for URIs, the discovery root (the filesystem is opened
    from it once per process) and the replica's path inside that filesystem; for a local
    volume-based layout, `fs_root` may carry the volume root (work is grouped by it)."""

    layout: str
    datanode: str
    path: str
    container: int
    fs_root: Optional[str] = None
    fs_path: Optional[str] = None

    @property
    def root(self) -> str:
        """The replica directory (`path`): what a job's `on_error` reports, for every
        layout."""
        return self.path


@runtime_checkable
class ReplicaReader(Protocol):
    """The reading role, and a layout's identity: what every layout does (see the module
    docstring). The registry (merkle.replica.layouts) holds these; `Layout` is its name there.
    The other roles are the owner's commands (OwnerCommands), generating (GeneratedLayout),
    and repairing and replicating (RepairableLayout): a layout implements those it does, and
    `owner_of`, `generator_of` and `repairer_of` give the role or refuse in one line."""

    #: the layout's name: `--layout` values, Spark work rows, messages
    name: str
    #: the layout's name in sentences ("an Ozone replica is repaired from Ozone replicas only")
    title: str
    #: REPAIR_IN_PLACE, REPAIR_OFFLINE or REPAIR_NONE
    repair: str

    def recognises(self, root: str) -> bool:
        """True when `root` (a local path or a URI) is at, under or above replicas of this
        layout. Cheap (a few stats), never raises for a path that does not exist."""

    def volumes(self, root: str, on_error: Optional[WalkErrorFn] = None) -> List[Volume]:
        """The volumes at, under or above `root`, in path order, each with its datanode's
        identity. An entry the walk cannot use goes to `on_error` (else raises);
        FileNotFoundError when `root` does not exist; a ReplicaError or ValueError saying
        "no container replica here" when the layout finds none (and nothing went to
        `on_error`). A volume that cannot be read at all is listed with its `problem`."""

    def replicas(self, volume: Volume, on_error: Optional[WalkErrorFn] = None) -> List[ReplicaRef]:
        """The replicas of `volume` (under `volume.inner` when set), in path order."""

    def open_files(self, replica: ReplicaRef) -> Any:
        """How to read `replica`: a merkle.replica.files.ReplicaFiles (local descriptors, or
        pyarrow.fs for a URI)."""

    def data_bytes(self, replica: ReplicaRef) -> Optional[int]:
        """The bytes a scan of `replica` will read, when the layout can tell it cheaply (a
        progress bar's total), else None."""

    def scan(
        self,
        replicas: Iterable[ReplicaRef],
        *,
        trees_only: bool = False,
        metadata_only: bool = False,
        **options: Any,
    ) -> Iterator[Tuple[ReplicaRef, Any, Optional[Exception]]]:
        """Scan each replica: (replica, merkle.replica.results.ScanResult or None, the error
        that stopped it or None), in the order given; give the replicas of one volume
        together (a layout may share work across them). A replica that cannot be scanned
        gives its error; when its whole volume cannot be read, the error is a
        merkle.replica.errors.VolumeError (a job reports it once per volume).
        `trees_only`: the stored trees alone, no data read (a missing or unusable `.tree` is
        the result's one finding, its tree empty). `metadata_only`: the census, no data read
        either (bytes_read 0, no block file opened): each replica's block metadata is read
        and checked as by the data scan (the same findings), and its tree is its stored
        `.tree` when that still describes the metadata, else the tree the data scan would
        build if every chunk matched its recorded checksums (merkle.replica.census: the
        rule, and the warnings TREE_STALE and TREE_FROM_METADATA that say so). The two are
        mutually exclusive (ValueError); both read only, whatever `write_tree` says.
        `options`: the verifier's (workers, limiter, progress, buffer_size, drop_cache:
        merkle.replica.verify.READ_OPTIONS, passed on to every replica's scan), and `write_tree`
        (True or False: the scan of a replica this machine owns, writing its `.tree` unless False,
        where the layout allows it; left out: a read-only read through `open_files`, as a Spark
        executor does), `seen` (a dict shared by the scans of one job: a replica directory met twice
        is scanned once, where the layout can tell)."""

    def recorded_here(self, path: str) -> bool:
        """True when `path`, a replica or volume path as a scan recorded it, has this layout's
        shape, told from the string alone: reports and plans are made where the disks may not
        be (merkle.replica.layouts.owner_repairing)."""

    def datanode_of(self, path: str) -> str:
        """The datanode the replica at `path` lives on, as the repair vote counts datanodes
        (each casts one vote)."""

    def cluster_of(self, root: str) -> str:
        """What makes two scanned roots one cluster (a report's or plan's command must not
        mix clusters): Ozone's <volume>/hdds/<clusterID> is its clusterID, another root is
        its directory."""


#: what the registry holds and every job speaks first: the reading role
Layout = ReplicaReader


@runtime_checkable
class OwnerCommands(Protocol):
    """The role of a layout whose replicas' owner repairs and copies them itself, in service
    (REPAIR_OFFLINE: Ozone's datanodes): the commands a report or plan gives instead of
    crcmerkle's, and why crcmerkle does not repair them in service."""

    #: the layout's name (ReplicaReader.name)
    name: str
    #: what a plan says of the copies the owner makes itself
    owner_copies_note: str

    def owner_repair_argv(self, container_id: int) -> List[str]:
        """The command that asks the replicas' owner to repair the
        container itself, in service (a report lists it instead of crcmerkle's commands)."""

    def owner_leave_argv(self, host: str, maintenance: bool) -> List[str]:
        """The command that takes the datanode on `host` out of
        service (decommission, or maintenance), its owner making the copies a plan says it
        needs. `host` is the datanode's host name (Ozone's `ozone admin datanode
        decommission|maintenance` take host names), never its UUID or a path: the caller
        gives a checked host name (spark_udfs.cluster.hosts.command_host) or asks for no command."""

    def repair_refusal(self, path: str) -> str:
        """Why the replica at `path` (this layout's) is not repaired while in service, and
        what to do instead: asked when `repair` is not REPAIR_IN_PLACE."""


@runtime_checkable
class GeneratedLayout(Protocol):
    """The role of a layout the generator (merkle.replica.generate) writes."""

    #: the layout's name (ReplicaReader.name)
    name: str
    #: the generator's faults only this layout can inject (merkle.replica.generate.FAULT_TYPES
    #: are every layout's)
    fault_types: Tuple[str, ...]
    #: True when the generator writes this layout's replicas where they stay (crcmerkle's);
    #: False: it writes crcmerkle-layout replicas in a staging directory that
    #: `finish_generation` then moves onto this layout's volumes
    generated_in_place: bool
    #: whether a generated volume records where it will be mounted (`generate --mount-path`)
    records_mount_paths: bool
    #: the generator's options (GeneratorConfig fields) only this layout honours, done in its
    #: finish_generation (Ozone's: "om_db", `generate --om-db`); () for none
    generator_options: Tuple[str, ...]

    def check_can_generate(self) -> None:
        """merkle.replica.synth.GeneratorError unless the generator can write this layout
        here (what it needs installed: the ozone extra for Ozone's volumes)."""

    def mount_paths(
        self, template: Optional[str], datanodes: int, volumes: int
    ) -> Dict[Tuple[int, int], Optional[str]]:
        """Where each generated volume (datanode d, volume v) will be mounted, from
        `template` ({datanode}, {volume}); None each without one. GeneratorError for a
        template this layout cannot record (only asked when `records_mount_paths`)."""

    def finish_generation(
        self, staging: Path, out: Path, manifest: Dict[str, Any], cfg: Any, faults: Dict[str, int]
    ) -> Dict[str, Any]:
        """Finish the generated cluster under `out` and return its manifest: when not
        `generated_in_place`, move the crcmerkle-layout cluster in `staging` onto this
        layout's volumes under `out` with the new replica paths and inject `faults` (this
        layout's own `fault_types`); then do what `cfg` asks of this layout's
        `generator_options`. Asked of every generated layout (in place: `staging` is `out`)."""


@runtime_checkable
class RepairableLayout(Protocol):
    """The role of a layout whose replicas crcmerkle repairs (in place, or offline) and that
    guards its volumes against `replicate`."""

    #: the layout's name (ReplicaReader.name)
    name: str

    def replicate_refusal(self, path: str, role: str) -> Optional[str]:
        """Why `crcmerkle replicate` must not copy from (`role` "source") or into ("target")
        `path` when it lies on this layout's volumes (it may not exist yet: a target); None
        when it does not, or this layout lets replicate copy there. Every registered layout
        is asked."""

    def copy_replica(self, source: Any, target: Any, *, on_step: Any = None) -> Any:
        """Make the new replica `target` from this layout's good replica `source` (asked
        after every layout's replicate_refusal): a merkle.replica.results.ReplicateResult;
        SourceNotGoodError, TargetExistsError, ReplicaError or OSError otherwise."""

    def open_repair(self, path: str, *, dry_run: bool) -> RepairTarget:
        """The replica at `path` opened for a repair (held against other writers until
        `close`, except in a dry run): REPAIR_IN_PLACE layouts in service, REPAIR_OFFLINE
        layouts with the owner stopped (their lock checked free). ReplicaError/OSError when
        it cannot or must not be repaired."""

    def load_peer(self, path: str, container_id: int) -> Tuple[Any, Any, Dict[int, bytes]]:
        """A peer of a repair of this layout's replica: (its files, a
        merkle.replica.files.ReplicaFiles with .paths and close(); its block metadata, a
        ContainerMeta; the raw block-metadata values to copy into new records, by block ID,
        or {}). ReplicaError/OSError when it cannot serve."""

    def replica_groups(
        self, path: str, on_error: Optional[WalkErrorFn] = None
    ) -> Dict[int, List[Path]]:
        """This layout's replicas at or under `path`, grouped by container ID
        (`reconcile --all`); an entry the walk cannot use goes to `on_error` (else raises)."""

    def check_container_id(self, dir_fd: int, path: str, container_id: int) -> None:
        """ReplicaError unless the replica open at `dir_fd` (reached without links; `path`
        for messages) records `container_id` in its own metadata, before a command of a
        report or plan runs on it (a layout whose repair checks it itself may leave it)."""


def read_only(layout: ReplicaReader) -> str:
    """Why crcmerkle does not write `layout`'s replicas (a layout that only reads, REPAIR_NONE:
    BookKeeper's): the one line every writing job gives for it."""
    return (
        f"{layout.name}-layout replicas are read-only here: crcmerkle scans and "
        f"compares them, but does not write or repair them"
    )


def repairer_of(layout: ReplicaReader, path: Optional[str] = None) -> RepairableLayout:
    """`layout` as a repairer and replicator, else ReplicaError (read_only, at `path`)."""
    if isinstance(layout, RepairableLayout):
        return layout
    raise ReplicaError(read_only(layout), path)


def generator_of(layout: ReplicaReader) -> GeneratedLayout:
    """`layout` as the generator writes it, else ReplicaError in one line: the layout's
    `not_generated` when it has one (an optional string, no role's member: what writes its
    replicas instead, as BookKeeper's own generator does bookies), else read_only's."""
    if isinstance(layout, GeneratedLayout):
        return layout
    instead = getattr(layout, "not_generated", "")
    if instead:
        raise ReplicaError(str(instead))
    raise ReplicaError(
        f"the generator does not write the {layout.name} layout ({read_only(layout)})"
    )


def owner_of(layout: ReplicaReader) -> OwnerCommands:
    """`layout`'s owner commands, else ReplicaError in one line: crcmerkle's own commands
    repair and copy its replicas, or (REPAIR_NONE) nothing does."""
    if isinstance(layout, OwnerCommands):
        return layout
    if layout.repair == REPAIR_NONE:
        raise ReplicaError(
            f"no owner command repairs {layout.name}-layout replicas ({read_only(layout)})"
        )
    raise ReplicaError(
        f"{layout.name}-layout replicas are repaired and copied by crcmerkle reconcile and "
        f"replicate, not by an owner command"
    )


def repair_refusal(layout: ReplicaReader, path: str) -> str:
    """Why the replica at `path` (`layout`'s, whose `repair` is not REPAIR_IN_PLACE) is not
    repaired while in service, and what to do instead."""
    if isinstance(layout, OwnerCommands):
        return layout.repair_refusal(path)
    return read_only(layout)


def replicate_refusal(layout: ReplicaReader, path: str, role: str) -> Optional[str]:
    """RepairableLayout.replicate_refusal of `layout`; for a layout that is no repairer, its
    read-only refusal when `path` lies on its volumes (a target does not exist yet: the
    directory it would be created in is asked), else None. `replicate` asks every registered
    layout."""
    if isinstance(layout, RepairableLayout):
        return layout.replicate_refusal(path, role)
    where = path if role == "source" else os.path.dirname(os.path.abspath(path))
    return read_only(layout) if os.path.exists(where) and layout.recognises(where) else None


class RepairTarget(Protocol):
    """A replica opened for a repair (Layout.open_repair): where it is, how to read it, and
    where the repair stores what it wrote (block metadata, then the tree, each atomically)."""

    #: merkle.replica.crcmerkle.layout.ContainerPaths of the replica directory
    paths: Any
    #: merkle.replica.files.LocalReplicaFiles: reads and the block writes of the repair
    files: Any

    def save_blocks(
        self, meta: Any, peer_values: Dict[int, bytes], block_ids: Sequence[int], tree: Any
    ) -> None:
        """Store the block metadata `meta` (the blocks `block_ids` gained chunks; the peer's
        raw values by block ID; the tree the repair will write)."""

    def save_tree(self, tree: Any) -> None:
        """Store the rebuilt tree, atomically, after the block metadata."""

    def close(self) -> None:
        """Release what open_repair holds (files, lock)."""
