"""The filesystem layer executors read replicas through: discovery and readers of
crcmerkle-layout replicas over pyarrow.fs. They moved into the crcmerkle layout
(merkle.replica.crcmerkle.remote), which the jobs reach through the layout interface
(merkle.replica.layouts); the names stay reachable here."""

from merkle.replica.crcmerkle.remote import (  # noqa: F401
    LIST_THREADS,
    VOLUME_PROBES,
    ArrowReplicaFiles,
    Replica,
    _ArrowBlockFile,
    discover,
    join,
    open_fs,
    replica_files,
)
from merkle.replica.uri import is_uri

__all__ = [
    "ArrowReplicaFiles",
    "LIST_THREADS",
    "Replica",
    "VOLUME_PROBES",
    "discover",
    "is_uri",
    "join",
    "open_fs",
    "replica_files",
]
