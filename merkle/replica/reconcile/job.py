"""The reconcile job: lock and scan the replica, load its peers, repair from each in turn
(merkle.replica.reconcile: the rules)."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from merkle.replica.blocks import ContainerMeta
from merkle.replica.errors import ReplicaError
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.layout import (
    REPAIR_IN_PLACE,
    REPAIR_OFFLINE,
    Layout,
    repair_refusal,
    repairer_of,
)
from merkle.replica.layouts import layout_of
from merkle.replica.reconcile.copying import _Copier
from merkle.replica.reconcile.peers import _handed_to_another_user, _identity, _load_peer, _Peer
from merkle.replica.reconcile.planning import (
    _empty_missing_blocks,
    _majority,
    _rebuilt_tree,
    _runs,
    _selected,
)
from merkle.replica.reconcile.results import (
    ChunkCopy,
    PathLike,
    PeerOutcome,
    Problem,
    ReconcileResult,
    StepHook,
)
from merkle.replica.reconcile.verifying import _remaining
from merkle.replica.replicadir.paths import ContainerPaths
from merkle.replica.scan import ScanResult, _scan
from merkle.trees.diff import diff
from merkle.trees.model import ContainerTree

# ---- reconcile ---------------------------------------------------------------------------


def refuse_ozone(path: PathLike) -> None:
    """ReplicaError when `path` is on a layout whose replicas are not repaired in service
    (Ozone's datanode volumes: a datanode owns its files, RocksDB, `.container`, `.tree`,
    and reconciles its replicas itself), with that layout's reason and what to do instead;
    this reconciler touches one only when asked for an offline repair
    (reconcile(..., offline=True))."""
    where = os.fspath(path)
    layout = layout_of(where)
    if layout.repair != REPAIR_IN_PLACE:
        raise ReplicaError(repair_refusal(layout, where), where)


def _refuse_other_layouts(layout: Layout, peer_paths: Sequence[PathLike]) -> None:
    """An offline repair reads its peers as its own layout's replicas: a peer that exists on
    another layout is refused (ReplicaError), before anything is locked."""
    for p in peer_paths:
        if os.path.exists(p) and layout_of(os.fspath(p)) is not layout:
            raise ReplicaError(
                f"an {layout.title} replica is repaired from {layout.title} replicas only",
                os.fspath(p),
            )


def reconcile(
    container_path: PathLike,
    peer_paths: Sequence[PathLike],
    dry_run: bool = False,
    *,
    workers: int = 1,
    on_step: Optional[StepHook] = None,
    offline: bool = False,
    datanodes: Optional[Mapping[str, str]] = None,
) -> ReconcileResult:
    """Repair the replica at `container_path` from each peer in turn (the package docstring).

    Returns a ReconcileResult: the container value before and after, per peer what was
    planned, copied, adopted, skipped (with reasons), and what remains unrepaired and why.
    Raises ReplicaLockedError if another process holds the replica, ReplicaError/OSError if
    the replica itself cannot be read or written (or must not be: see "Trust" above).

    The replica's layout (merkle.replica.layouts.layout_of) opens it for the repair, reads
    its peers and stores what the repair wrote. A layout repaired offline only (a replica
    on an Ozone datanode volume) is refused unless `offline`: then its volume must be
    offline (the DB's LOCK free; it is held for the whole repair), its peers are replicas of
    that layout, and the block metadata goes to the volume's `block_data`
    (merkle.replica.ozone.offline).

    `datanodes` maps a peer path (as given) to its datanode: each datanode then casts one
    vote (see "Trust" above); without it each distinct replica votes.
    """
    layout = layout_of(os.fspath(container_path))
    if offline and layout.repair == REPAIR_OFFLINE:
        _refuse_other_layouts(layout, peer_paths)
    else:
        for p in (container_path, *peer_paths):
            refuse_ozone(p)
    repairer = repairer_of(layout, os.fspath(container_path))
    target = repairer.open_repair(os.fspath(container_path), dry_run=dry_run)
    try:
        return _reconcile(
            target.paths,
            target.files,
            peer_paths,
            dry_run,
            workers,
            on_step,
            target,
            partial(_load_peer, repairer),
            datanodes,
        )
    finally:
        target.close()


def _reconcile(
    paths: ContainerPaths,
    files: LocalReplicaFiles,
    peer_paths: Sequence[PathLike],
    dry_run: bool,
    workers: int,
    on_step: Optional[StepHook],
    store: Any,
    load_peer: Callable[[PathLike, int], _Peer],
    datanodes: Optional[Mapping[str, str]] = None,
) -> ReconcileResult:
    scan = _scan(files, not dry_run, max(1, workers), None, None, 1 << 20)
    if scan.protected:
        why = "; ".join(str(e) for e in scan.errors if e.block_id is None)
        raise ReplicaError(f"not repaired: {why}", os.fspath(paths.root))
    if on_step is not None and scan.tree_written:
        on_step("tree", "scan")
    ours = scan.tree
    before = ours.data_checksum
    meta = scan.meta.copy() if scan.meta is not None else ContainerMeta(paths.container_id)
    sizes: Dict[int, int] = {}
    outcomes: List[PeerOutcome] = []
    unrecoverable: Dict[Tuple[int, int], List[str]] = {}
    failed: Dict[Tuple[int, int], str] = {}
    loaded: List[Tuple[str, Optional[_Peer], str]] = []
    # one replica, one voice: a peer named twice (or through a link) or that is the target
    # itself is skipped before it is read
    seen: Dict[Tuple[int, int], str] = {}
    mine = _identity(paths.root)
    if mine is not None:
        seen[mine] = ""
    for peer_path in peer_paths:
        name = os.fspath(peer_path)
        ident = _identity(peer_path)
        if ident is not None and ident in seen:
            loaded.append(
                (
                    name,
                    None,
                    "the peer is this replica"
                    if not seen[ident]
                    else f"the same replica as peer {seen[ident]} (counted once)",
                )
            )
            continue
        try:
            peer = load_peer(peer_path, paths.container_id)
        except (ReplicaError, OSError) as exc:
            loaded.append((name, None, f"unreadable peer: {exc}"))
            continue
        if os.path.realpath(peer.files.paths.root) == os.path.realpath(paths.root):
            peer.files.close()
            loaded.append((name, None, "the peer is this replica"))
            continue
        handed = _handed_to_another_user(paths.root, peer.files.paths.root)
        if handed:
            peer.files.close()
            loaded.append((name, None, handed))
            continue
        if ident is not None:
            seen[ident] = name
        peer.voter = (
            f"datanode:{datanodes[name]}"
            if datanodes and name in datanodes
            else f"replica:{ident or name}"
        )
        loaded.append((name, peer, ""))
    vote = _majority([p for _, p, _ in loaded if p is not None])
    try:
        for name, loaded_peer, why in loaded:
            if loaded_peer is None:
                outcomes.append(PeerOutcome(name, "skipped", why))
                continue
            ours = _one_peer(
                paths,
                files,
                loaded_peer,
                ours,
                scan,
                meta,
                vote,
                sizes,
                outcomes,
                unrecoverable,
                failed,
                dry_run,
                on_step,
                store,
            )
    finally:
        for _, loaded_peer, _ in loaded:
            if loaded_peer is not None:
                loaded_peer.files.close()
    remaining = _remaining(ours, scan.meta, unrecoverable, failed)
    return ReconcileResult(
        os.fspath(paths.root),
        paths.container_id,
        dry_run,
        before,
        ours.data_checksum,
        scan,
        outcomes,
        remaining,
    )


def _one_peer(
    paths: ContainerPaths,
    files: LocalReplicaFiles,
    peer: _Peer,
    ours: ContainerTree,
    scan: ScanResult,
    meta: ContainerMeta,
    vote: Callable[[int, int], Optional[Tuple[int, int]]],
    sizes: Dict[int, int],
    outcomes: List[PeerOutcome],
    unrecoverable: Dict[Tuple[int, int], List[str]],
    failed: Dict[Tuple[int, int], str],
    dry_run: bool,
    on_step: Optional[StepHook],
    store: Any,
) -> ContainerTree:
    """Repair from one peer; returns our tree afterwards."""
    name = peer.name
    report = diff(ours, peer.tree)
    out = PeerOutcome(name, "in-sync" if report.roots_equal else "planned", counts=report.counts())
    outcomes.append(out)
    for b, offs in report.unrecoverable_chunks.items():
        for o in offs:
            unrecoverable.setdefault((b, int(o)), []).append(name)
            out.unrecoverable.append((b, int(o)))
    if not report.needs_repair:
        if not report.roots_equal:
            out.status = "nothing-pulled"
        return ours
    copier = _Copier(files, peer, scan.meta, vote, sizes, on_step, dry_run, meta)
    written: List[ChunkCopy] = []
    created: List[int] = []
    for block_id, copies in ((b, run) for b, cs in _selected(report).items() for run in _runs(cs)):
        items, stops = copier.plan_block(block_id, copies)
        out.planned.extend(c for c, _ in items)
        out.failures.extend(stops)
        for stop in stops:
            failed[(block_id, stop.offset or 0)] = stop.reason
        if dry_run:
            copier.record(block_id, [c for c, _ in items])
            written.extend(c for c, _ in items)
            for c, _ in items:
                sizes[block_id] = max(sizes.get(block_id, 0), c.offset + c.length)
            continue
        done, metas, problem = copier.copy_block(block_id, items)
        copier.record(block_id, done)
        if problem is not None:
            out.failures.append(problem)
            failed[(block_id, problem.offset or 0)] = problem.reason
        if metas:
            meta.put_chunks(block_id, metas)
        written.extend(done)
    for b in _empty_missing_blocks(report):
        if not dry_run:
            try:
                os.close(files.open_block_rw(b, create=True))
            except OSError as exc:
                out.failures.append(
                    Problem(b, None, f"stopped: our block file: {exc.strerror or exc}")
                )
                continue
            meta.put_chunks(b, [])
        created.append(b)
    adopted = {
        int(report.peer.block_id[r]): int(report.peer.block_value[r])
        for r in report.deleted_block_rows
    }
    out.copied = written
    out.tombstones = sorted(adopted)
    if not (written or created or adopted):
        out.status = "nothing-pulled"
        return ours
    out.status = "planned" if dry_run else "repaired"
    ours = _rebuilt_tree(ours, written, created, adopted)
    if not dry_run and (written or created):
        # data files are durable (fsynced per block); the metadata before the tree
        store.save_blocks(
            meta, peer.values, sorted({c.block_id for c in written} | set(created)), ours
        )
        if on_step is not None:
            on_step("metadata", name)
    if not dry_run:
        store.save_tree(ours)
        if on_step is not None:
            on_step("tree", name)
    return ours


def reconcile_round(
    replicas: Sequence[PathLike], *, dry_run: bool = False, on_step: Optional[StepHook] = None
) -> List[ReconcileResult]:
    """One round: every replica reconciles with all the others, in the order given."""
    results = []
    for i, r in enumerate(replicas):
        peers = [p for j, p in enumerate(replicas) if j != i]
        results.append(reconcile(r, peers, dry_run=dry_run, on_step=on_step))
    return results


def replica_groups(
    path: PathLike,
    on_error: Optional[Callable[[Path, Exception], Any]] = None,
    *,
    offline: bool = False,
) -> Dict[int, List[Path]]:
    """Replicas under a cluster directory grouped by container ID ({ID: [paths]}), as the
    path's layout finds them; entries the walk cannot use go to `on_error` when given (else
    raise). A layout repaired offline only (Ozone's volumes) is refused unless `offline`."""
    where = os.fspath(path)
    layout = layout_of(where)
    if not (offline and layout.repair == REPAIR_OFFLINE):
        refuse_ozone(path)
    return repairer_of(layout, where).replica_groups(where, on_error)
