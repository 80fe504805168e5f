"""The reconciler: repair a replica from its peers so that all replicas converge, without
ever losing data (Ozone's container reconciliation, HDDS-10239).

`reconcile(container, peers)` holds the replica lock, scans the replica (fresh tree, merged
into the stored one), then for each peer in turn:
  1. loads the peer's block metadata and tree (the stored `.tree`; when that is missing or
     corrupt, a read-only scan of the peer); an unreadable peer is skipped with its reason;
  2. diffs (merkle.trees.diff.diff: what must *we* pull from *this peer*) and plans, block by
     block in offset order, the healthy peer chunks selected as missing blocks, missing
     chunks and corrupt chunks; a block stops at the first chunk that would start beyond the
     local file's end (block files have no holes);
  3. reads each chunk from the peer into a reused buffer and verifies its window checksums
     against the peer's *recorded* ones (and the recorded checksums against the peer tree's
     leaf), writes it at its offset with pwrite (never truncating), fsyncs the block file; a
     chunk that fails stops its block, the other blocks go on;
  4. records the written chunks in the block metadata (atomic replace), adopts the peer's
     tombstones in the tree only (no data deleted), and writes the rebuilt tree atomically.
Local data is never deleted, truncated or shortened: only pwrite at chunk offsets.

Trust (a peer may lie, be corrupt or be hostile; the client's checksums are the ground truth):
  - when our `.blocks` holds a record for a chunk, a peer's copy is pulled only if it has the
    same length and the same value as our record, and the bytes are verified against *our*
    window checksums; our record is kept (never replaced by the peer's, so never by NONE);
  - a pulled chunk never overlaps another chunk we hold a record for: a pull never writes
    outside the byte range of the chunk it repairs;
  - for a chunk we hold no record of, the healthy peers vote by (length, chunk value): only
    the version more than half of the voters holding a healthy copy agree on is pulled; with
    no majority the chunk is reported and left alone. Voters are distinct replicas, not
    paths: a peer that is the same directory as another peer or as the target (same
    st_dev/st_ino: a repeated path, a link to it) is skipped. With `datanodes` (the CLI's
    --all and --report give it) each datanode votes once: Ozone places at most one replica
    of a container on a datanode, so two copies on one datanode (dn1/vol1/7, dn1/vol2/7)
    count as one vote when they agree and as none when they disagree; an attacker holding
    one datanode never outvotes another;
  - our replica is not repaired at all when its `.tree` or `.blocks` is unreadable, not a
    regular file, or of a format this version does not fully understand (ReplicaError): an
    I/O error is not corruption and a rewrite would lose what we cannot read;
  - every file is opened through directory descriptors without following links, and a peer
    chunk is read through a buffer bounded by configuration (COPY_BUFFER_SIZE): a larger
    chunk is verified piecewise first, then copied and verified again.

Crash safety: data is written before the metadata that describes it and the metadata before
the tree, each replaced atomically, and every run starts from a fresh scan. A crash after a
data write leaves bytes no metadata claims yet (a re-run rewrites the same verified bytes);
after the metadata, a stale tree (the re-run's scan rebuilds it). The flock-based replica
lock dies with its process, so a re-run never waits on a dead holder.

A replica on an Ozone datanode volume is refused unless `offline=True` (the datanode
reconciles itself); then merkle.replica.ozone.offline locks the stopped datanode's volume DB,
supplies the replica's records from `block_data` and stores them back there (the store).

`dry_run=True` takes no lock (offline: checks that the volume's is free), writes nothing and
returns the plan (what, from where, how many bytes), simulating each peer's repair so later
peers are not asked for the same chunk.

The package, one job per module: `results` (what a run reports), `peers` (loading a peer,
who it is and whose vote it casts), `planning` (what the diff selects, the majority, the tree
afterwards), `copying` (verified reads and pwrites), `verifying` (what is still wrong after
the repair), `job` (reconcile itself) and `reports` (a Spark report's repair commands). Every
name importable from the single module it replaces is importable from here.
"""

from __future__ import annotations

# the names of the module this package replaced, re-exported (tests import private ones)
from merkle.replica.reconcile.copying import (  # noqa: F401
    COPY_BUFFER_SIZE,
    _Copier,
    _overlaps,
    _Verifier,
    _verify,
)
from merkle.replica.reconcile.job import (  # noqa: F401
    _one_peer,
    _reconcile,
    _refuse_other_layouts,
    reconcile,
    reconcile_round,
    refuse_ozone,
    replica_groups,
)
from merkle.replica.reconcile.peers import (  # noqa: F401
    _handed_to_another_user,
    _identity,
    _load_peer,
    _Peer,
    _peer_tree,
    datanode_of,
)
from merkle.replica.reconcile.planning import (  # noqa: F401
    _empty_missing_blocks,
    _majority,
    _rebuilt_tree,
    _rows_of_block,
    _runs,
    _selected,
)
from merkle.replica.reconcile.reports import (  # noqa: F401
    _MAX_COMMANDS,
    SPARK_REPORT_FORMAT,
    LoadedReport,
    ReportJob,
    _check_argv,
    _check_parts,
    _inline_commands,
    _ozone_commands,
    _report_commands,
    _report_int,
    check_report_job,
    jobs_from_report,
    load_report,
    load_report_jobs,
    report_commands,
    report_jobs,
)
from merkle.replica.reconcile.results import (  # noqa: F401
    ChunkCopy,
    PathLike,
    PeerOutcome,
    Problem,
    ReconcileResult,
    StepHook,
)
from merkle.replica.reconcile.verifying import (  # noqa: F401
    _remaining,
)

__all__ = [
    "ChunkCopy",
    "LoadedReport",
    "PeerOutcome",
    "Problem",
    "ReconcileResult",
    "ReportJob",
    "check_report_job",
    "datanode_of",
    "jobs_from_report",
    "load_report",
    "load_report_jobs",
    "reconcile",
    "reconcile_round",
    "report_commands",
    "report_jobs",
]
