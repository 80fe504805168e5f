"""crcmerkle-layout replicas wherever pyarrow.fs reaches them: local paths, or any URI it
understands (hdfs://, s3://, gs://, file://), so that block bytes go from storage straight
into the reader (a Spark executor's Python worker) and never through the JVM or Arrow batches.
pyarrow is imported only when a URI is read: it is optional for the package's core. (It was
spark_udfs.fs; the Spark jobs reach it through the layout interface.)

`replica_files` gives the scanner (merkle.replica.scan.scan_files) its view of one replica:
merkle's own os.preadv reader for a local path, `ArrowReplicaFiles` for a URI (positional
reads into the scanner's reused buffer through pyarrow's NativeFile.readinto).

Discovery mirrors merkle.replica.crcmerkle.layout.find_containers (a replica is a directory
named by its decimal container ID holding chunks/ or metadata/; the walk does not descend
into replicas) but lists through pyarrow.fs so it works on remote stores too; on those,
requests grow with the directories above the replicas, not with the replicas (discover).
The datanode of a replica is the name of the directory above its volume
(<datanode>/<volume>/<containerID>), which is how `crcmerkle generate` lays out a cluster.
"""

from __future__ import annotations

import functools
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional

from merkle.replica.crcmerkle.layout import (
    BLOCK_SUFFIX,
    META_SUFFIX,
    TREE_SUFFIX,
    container_paths,
    datanode_of,
)
from merkle.replica.files import BlockFile, LocalReplicaFiles, ReplicaFiles, read_capped
from merkle.replica.uri import Location, display, is_uri, join, open_fs  # noqa: F401  (its names)

if TYPE_CHECKING:  # imported where a URI is opened (see the module docstring)
    import pyarrow.fs as pafs

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
]  # is_uri: re-exported


@functools.lru_cache(maxsize=64)
def _filesystem(root: str) -> pafs.FileSystem:
    """One filesystem object per discovery root per process: connecting to HDFS or S3 costs
    far more than reading a replica's metadata."""
    import pyarrow.fs as pafs

    return pafs.FileSystem.from_uri(root)[0]


class _ArrowBlockFile:
    def __init__(self, f: pafs.NativeFile) -> None:
        self._f = f
        self._size: Optional[int] = None

    def pread_into(self, view: memoryview, offset: int) -> int:
        # Reads are clamped to the file's size: a truncated block then reads short, as a
        # local pread does, and the scanner reports MISSING_CHUNK. S3 refuses to seek past
        # the end ("Cannot seek past end of file"), which would make it an I/O error.
        if self._size is None:
            self._size = self._f.size()
        want = min(len(view), max(0, self._size - offset))
        if want == 0:
            return 0
        self._f.seek(offset)
        got = 0
        while got < want:
            n = self._f.readinto(view[got:want])
            if n <= 0:
                break
            got += n
        return got

    def fileno(self) -> Optional[int]:
        return None  # never mapped: a remote read error must be an error, not SIGBUS

    def close(self) -> None:
        self._f.close()


class ArrowReplicaFiles:
    """A replica read through a pyarrow FileSystem (merkle.replica.files.ReplicaFiles)."""

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        path: str,
        container_id: int,
        location: Optional[str] = None,
    ) -> None:
        self.fs = filesystem
        self.path = path.rstrip("/")
        self.container_id = int(container_id)
        self.location = location or self.path

    def _read(self, path: str) -> bytes:
        # open_input_file raises FileNotFoundError (an OSError subclass) for a missing file
        # a `.tree` / `.blocks` above CRCMERKLE_MAX_METADATA_BYTES is refused unread, as a
        # local one (FileTooLargeError, an OSError: METADATA_/TREE_UNREADABLE)
        with self.fs.open_input_file(path) as f:
            return read_capped(f, f"{self.location}/{path[len(self.path) + 1 :]}")

    def read_blockmeta(self) -> bytes:
        return self._read(f"{self.path}/metadata/{self.container_id}{META_SUFFIX}")

    def read_tree(self) -> bytes:
        return self._read(f"{self.path}/metadata/{self.container_id}{TREE_SUFFIX}")

    def open_block(self, block_id: int) -> BlockFile:
        path = f"{self.path}/chunks/{self.block_name(block_id)}"
        return _ArrowBlockFile(self.fs.open_input_file(path))

    def block_name(self, block_id: int) -> str:
        return f"{int(block_id)}{BLOCK_SUFFIX}"


@dataclass(frozen=True)
class Replica:
    """One replica found by discovery."""

    datanode: str
    path: str  # as given: a local path, or the URI of the replica (for messages and rows)
    container: int
    #: for URIs: the discovery root (the filesystem is opened from it once per process)
    #: and the replica's path inside that filesystem
    fs_root: Optional[str] = None
    fs_path: Optional[str] = None


def replica_files(replica: Any) -> ReplicaFiles:
    """How an executor reads `replica` (a Replica, or any object with its fields: a
    merkle.replica.layout.ReplicaRef): a local directory, or a store pyarrow.fs reaches."""
    if replica.fs_root is None:
        return LocalReplicaFiles(container_paths(replica.path, replica.container))
    import pyarrow.fs as pafs

    filesystem = _filesystem(replica.fs_root)
    if isinstance(filesystem, pafs.LocalFileSystem) and replica.fs_path:
        # file:// — the local reader: no link followed, a FIFO never blocks the executor
        return LocalReplicaFiles(container_paths(replica.fs_path, replica.container))
    return ArrowReplicaFiles(
        _filesystem(replica.fs_root), replica.fs_path or "", replica.container, replica.path
    )


def _cid(name: str) -> int:
    try:
        v = int(name, 10)
    except ValueError:
        return -1
    return v if str(v) == name and v >= 0 else -1


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


#: parallel listings (remote stores answer slowly but in parallel)
LIST_THREADS = 8

#: decimal-named subdirectories of a remote directory checked for chunks/ or metadata/
#: before all of them are taken as replicas (see discover)
VOLUME_PROBES = 3


def _not_found(fsys: pafs.FileSystem, path: str) -> str:
    """Why `path` is not there: on S3 a key of a missing bucket is merely "not found" to
    pyarrow, so the bucket is asked about itself (a HEAD) and named when it is missing."""
    import pyarrow.fs as pafs

    bucket = path.strip("/").split("/", 1)[0]
    if type(fsys).__name__ == "S3FileSystem" and bucket:
        try:
            missing = (
                bucket == path.strip("/")
                or fsys.get_file_info(bucket).type == pafs.FileType.NotFound
            )
        except OSError:
            missing = False
        if missing:
            return f"the S3 bucket {bucket!r} does not exist (check the URI)"
    return "No such file or directory"


def discover(root: str) -> List[Replica]:
    """Every replica at or under `root` (a replica, volume, datanode or cluster directory,
    a local path or a URI), in path order. FileNotFoundError if root does not exist;
    ValueError if it holds none.

    The walk lists one directory level at a time, LIST_THREADS directories at once, and
    never descends into a replica. Local paths: every decimal-named subdirectory is checked
    for chunks/ or metadata/ (stat calls; as merkle's local discovery does). Remote stores
    (s3://, hdfs://, gs://, file://): asking that of every replica took four sequential
    requests per replica, hours for 600,000; instead the first VOLUME_PROBES decimal-named
    subdirectories of a directory are checked, and if one is a replica the directory is a
    volume and all of its decimal-named subdirectories are taken as replicas (one that is
    not shows up as a METADATA_MISSING error of the scan, not silently). So requests grow
    with the directories above the replicas (datanodes, volumes) plus one listing page per
    1,000 replicas of a volume (S3), not with the replicas.
    """
    import pyarrow.fs as pafs

    loc = Location.parse(root)
    fsys, base = loc.filesystem, loc.path
    info = fsys.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(2, _not_found(fsys, base), display(root))

    # pyarrow follows symbolic links; on the local filesystem (plain paths and file://) a
    # link where a replica, volume or datanode directory may be is never followed (a link
    # dn1/vol1/1 -> dn0/vol1/1 is no second replica): lstat and scandir(follow_symlinks=False)
    local = isinstance(fsys, pafs.LocalFileSystem)

    def _real_dir(path: str) -> bool:
        try:
            return stat.S_ISDIR(os.lstat(path).st_mode)
        except OSError:
            return False

    def holds_replica_dirs(paths: List[str]) -> List[bool]:
        """Which of `paths` hold chunks/ or metadata/ (one call for all of them)."""
        if local:
            return [
                _real_dir(p) and (_real_dir(f"{p}/chunks") or _real_dir(f"{p}/metadata"))
                for p in paths
            ]
        infos = fsys.get_file_info([f"{p}/{sub}" for p in paths for sub in ("chunks", "metadata")])
        return [
            pafs.FileType.Directory in (infos[2 * i].type, infos[2 * i + 1].type)
            for i in range(len(paths))
        ]

    def children(path: str) -> List[str]:
        if local:
            try:
                with os.scandir(path) as it:
                    return sorted(
                        f"{path.rstrip('/')}/{e.name}"
                        for e in it
                        if e.is_dir(follow_symlinks=False)
                    )
            except (FileNotFoundError, NotADirectoryError):
                return []
        entries = fsys.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(e.path for e in entries if e.type == pafs.FileType.Directory)

    def is_replica(path: str) -> bool:
        """One listing (one request on S3, where a lookup of chunks/ and metadata/ takes
        four)."""
        return any(_basename(d) in ("chunks", "metadata") for d in children(path))

    found: List[str] = []
    if info.type == pafs.FileType.Directory:
        top = base.rstrip("/") or "/"
        if _cid(_basename(top)) >= 0 and holds_replica_dirs([top])[0]:
            found.append(top)
        else:
            frontier = [top]
            with ThreadPoolExecutor(max_workers=LIST_THREADS) as pool:
                while frontier:
                    nxt: List[str] = []
                    for dirs in pool.map(children, frontier):
                        cands = [d for d in dirs if _cid(_basename(d)) >= 0]
                        nxt.extend(d for d in dirs if _cid(_basename(d)) < 0)
                        if not cands:
                            continue
                        if not loc.remote:
                            yes = holds_replica_dirs(cands)
                        elif any(is_replica(c) for c in cands[:VOLUME_PROBES]):
                            yes = [True] * len(cands)  # a volume (see the docstring)
                        else:
                            yes = [False] * len(cands)
                        found.extend(d for d, y in zip(cands, yes) if y)
                        nxt.extend(d for d, y in zip(cands, yes) if not y)
                    frontier = nxt
    if not found:
        raise ValueError(
            f"{display(root)}: no container replica here (expected "
            f"<volume>/<containerID>/chunks or metadata)"
        )
    out = []
    for p in sorted(found):
        parts = p.rstrip("/").split("/")
        datanode = datanode_of(p)
        if loc.remote:
            out.append(Replica(datanode, loc.show(p), _cid(parts[-1]), root, p))
        else:
            out.append(Replica(datanode, p, _cid(parts[-1])))
    return out
