"""Where an Ozone datanode keeps its container replicas (schema V3), and how to find them.

    <R>/                                  one hdds.datanode.dir entry: a volume
      hdds/VERSION                        Java properties: storageID, clusterID, datanodeUuid, ...
      hdds/<clusterID>/                   (the only subdirectory on pre-SCM-HA volumes)
        <storageID>/container.db/         the volume's RocksDB (block metadata of every container)
        current/containerDir<N>/<id>/     one replica, N = (id >> 9) & 0xFF
          metadata/<id>.container         YAML descriptor (state, layout, checksum)
          metadata/<id>.tree              Merkle tree (ContainerChecksumInfo)
          chunks/<localID>.block          FILE_PER_BLOCK data (layOutVersion 2)
          chunks/<localID>_chunk_<n>      FILE_PER_CHUNK data (layOutVersion 1)

`find_volumes` accepts a volume root, a directory inside one, a datanode (a directory of
volumes) or a cluster (a directory of datanodes). Paths are derived from the directory being
walked, never from the absolute paths recorded in `.container` (a volume may be mounted
elsewhere when inspected). Files are opened without following symbolic links and must be
regular files.

VERSION is data, never a path: `clusterID` and `storageID` must each be one plain path
component, and the directories they name (and `current/`) must be real directories under the
volume's `hdds/`, not links. A volume whose VERSION breaks that, or whose `layOutVersion` is
not the one Ozone accepts (HDDSVolumeLayoutVersion: only 1; a datanode fails such a volume
at start-up), or whose `current/` cannot be listed (missing, a link, unreadable), is a volume
problem: none of its replicas is listed, and the scans report the volume failed.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

from merkle.replica.safeopen import (
    FileTooLargeError,
    check_component,
    max_metadata_bytes,
    open_dir,
    open_dir_chain,
    open_regular as safe_open_regular,
)

__all__ = [
    "HDDS",
    "OzoneReplica",
    "OzoneVolume",
    "VOLUME_LAYOUT_VERSION",
    "container_dir_index",
    "find_volumes",
    "is_ozone_path",
    "is_plain_component",
    "open_regular",
    "read_regular",
    "read_version",
]

PathLike = Union[str, "os.PathLike[str]"]

HDDS = "hdds"
VERSION = "VERSION"
CONTAINER_SUFFIX = ".container"
TREE_SUFFIX = ".tree"
BLOCK_SUFFIX = ".block"
#: a VERSION or .container file is a few hundred bytes; never read more than this
MAX_SMALL_FILE = 1 << 20
#: how deep below a given path volumes are looked for (cluster/datanode/volume)
_MAX_DEPTH = 4
#: the only VERSION layOutVersion Ozone accepts (HDDSVolumeLayoutVersion.getLatestVersion)
VOLUME_LAYOUT_VERSION = 1
#: the longest file name POSIX file systems allow (NAME_MAX)
_NAME_MAX = 255


def is_plain_component(name: str) -> bool:
    """Is `name` usable as one path component: not empty, not `.` or `..`, no `/`, no NUL,
    no control character, at most NAME_MAX bytes? Names read from VERSION must be."""
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and all(ord(c) >= 0x20 and c != "\x7f" for c in name)
        and len(name.encode("utf-8", "surrogateescape")) <= _NAME_MAX
    )


def _shown(value: str, limit: int = 80) -> str:
    """A value read from a file, quoted and cut for a one-line message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"


def _real_dir(path: Path) -> bool:
    """Is `path` a directory itself (lstat: a link to one is not)?"""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def container_dir_index(container_id: int) -> int:
    """N of `containerDir<N>` (KeyValueContainerLocationUtil)."""
    return (int(container_id) >> 9) & 0xFF


def open_regular(path: PathLike, root: Optional[PathLike] = None) -> int:
    """An O_RDONLY descriptor of the regular file `path`, never following a link and never
    blocking (merkle.replica.safeopen: a FIFO opens without waiting for a writer).

    Without `root`, the file's directory is opened as named and the file relative to it.
    With `root` (a replica directory `path` lies under), `root` itself and every directory
    between it and the file are opened with O_DIRECTORY|O_NOFOLLOW: a link in place of the
    replica, its `metadata/` or `chunks/`, or the file raises NotRegularFileError (an
    OSError; scanners report it as NOT_A_REGULAR_FILE)."""
    p = Path(os.fspath(path))
    parts: Tuple[str, ...]
    if root is None:
        base, parts, follow = p.parent, (p.name,), True
    else:
        base = Path(os.fspath(root))
        parts = p.relative_to(base).parts
        follow = False
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "Is a directory", os.fspath(p))
    for name in parts:  # `..` would walk out of the replica without meeting a link
        check_component(name, os.fspath(p))
    fd = open_dir(os.fspath(base), follow=follow)
    try:
        where = base
        for name in parts[:-1]:
            where = where / name
            nfd = open_dir(name, fd, display=os.fspath(where))
            os.close(fd)
            fd = nfd
        return safe_open_regular(fd, parts[-1], display=os.fspath(p))
    finally:
        os.close(fd)


def read_regular(
    path: PathLike, limit: int = MAX_SMALL_FILE, root: Optional[PathLike] = None
) -> bytes:
    """A regular file's bytes (see open_regular), refused with FileTooLargeError (an OSError,
    EFBIG) when fstat says it holds more than `limit` bytes: memory is never sized from
    input. Metadata files pass `limit=max_metadata_bytes()`, the crcmerkle layout's cap."""
    fd = open_regular(path, root)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise FileTooLargeError(
                errno.EFBIG,
                f"file of {size} bytes exceeds the {limit}-byte limit (not read)",
                os.fspath(path),
            )
        chunks: List[bytes] = []
        got = 0
        while got <= limit:
            data = os.pread(fd, min(1 << 20, limit + 1 - got), got)
            if not data:
                break
            chunks.append(data)
            got += len(data)
    finally:
        os.close(fd)
    if got > limit:
        raise FileTooLargeError(
            errno.EFBIG, f"larger than {limit} bytes (grew while read)", os.fspath(path)
        )
    return b"".join(chunks)


def read_version(path: PathLike) -> Dict[str, str]:
    """A Java properties file as written by Properties.store (`#` comments, key=value)."""
    out: Dict[str, str] = {}
    for line in read_regular(path).decode("latin-1").splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class OzoneVolume:
    """One datanode volume (an hdds.datanode.dir entry)."""

    root: Path
    properties: Dict[str, str]
    id_dir: Optional[Path]
    #: why the volume cannot be used (no cluster dir, several candidates), else None
    problem: Optional[str] = None

    @property
    def hdds(self) -> Path:
        return self.root / HDDS

    @property
    def storage_id(self) -> str:
        return self.properties.get("storageID", "")

    @property
    def datanode_uuid(self) -> str:
        return self.properties.get("datanodeUuid", "")

    @property
    def db_dir(self) -> Optional[Path]:
        if self.id_dir is None or not self.storage_id:
            return None
        return self.id_dir / self.storage_id / "container.db"

    def replicas(self) -> List[OzoneReplica]:
        """Every container directory of the volume, by ID (a non-numeric name is skipped,
        as Ozone skips it)."""
        if self.id_dir is None:
            return []
        found: List[OzoneReplica] = []
        current = self.id_dir / "current"
        try:  # hdds/, the cluster directory and current/ opened one by one, never a link
            base = open_dir(os.fspath(self.hdds))
            try:
                fd = open_dir_chain(base, (self.id_dir.name, "current"), start=self.hdds)
            finally:
                os.close(base)
        except OSError:  # missing, or a link out of the volume: never followed
            return []
        try:
            dirs = sorted(os.scandir(fd), key=lambda e: e.name)
            for d in dirs:
                if not d.name.startswith("containerDir") or not d.is_dir(follow_symlinks=False):
                    continue
                try:
                    dfd = open_dir(d.name, fd)
                except OSError:  # replaced by a link or removed since the listing
                    continue
                try:
                    for c in os.scandir(dfd):
                        cid = _decimal(c.name)
                        if cid is not None and c.is_dir(follow_symlinks=False):
                            found.append(OzoneReplica(self, cid, current / d.name / c.name))
                finally:
                    os.close(dfd)
        finally:
            os.close(fd)
        found.sort(key=lambda r: r.container_id)
        return found


@dataclass(frozen=True)
class OzoneReplica:
    """One container replica on an Ozone volume."""

    volume: OzoneVolume
    container_id: int
    root: Path

    @property
    def metadata_dir(self) -> Path:
        return self.root / "metadata"

    @property
    def chunks_dir(self) -> Path:
        return self.root / "chunks"

    @property
    def container_file(self) -> Path:
        return self.metadata_dir / f"{self.container_id}{CONTAINER_SUFFIX}"

    @property
    def tree(self) -> Path:
        return self.metadata_dir / f"{self.container_id}{TREE_SUFFIX}"

    def block_file(self, local_id: int) -> Path:
        return self.chunks_dir / f"{int(local_id)}{BLOCK_SUFFIX}"

    def open_file(self, path: PathLike) -> int:
        """A file of this replica (under its root), opened by open_regular(path, root)."""
        return open_regular(path, self.root)

    def read_file(self, path: PathLike, limit: int = MAX_SMALL_FILE) -> bytes:
        return read_regular(path, limit, self.root)

    def read_tree(self) -> bytes:
        """The `.tree`, capped as the crcmerkle layout's metadata (max_metadata_bytes)."""
        return read_regular(self.tree, max_metadata_bytes(), self.root)

    def identity(self) -> Optional[Tuple[int, int]]:
        """(st_dev, st_ino) of the replica directory itself (never through a link), None
        when it cannot be read: the same directory reached twice (a bind mount) has one."""
        try:
            st = os.lstat(self.root)
        except OSError:
            return None
        return st.st_dev, st.st_ino


def _decimal(name: str) -> Optional[int]:
    if not name.isdigit() or not name.isascii():
        return None
    value = int(name)
    return value if str(value) == name else None


def _version_problem(props: Dict[str, str], version_file: Path) -> Optional[str]:
    """Why Ozone would refuse this VERSION, or why its names cannot be used as directory
    names (StorageVolumeUtil's checks, plus: a name is one plain component), else None."""
    layout = props.get("layOutVersion", "")
    if layout.strip() != str(VOLUME_LAYOUT_VERSION):
        return (
            f"{version_file}: layOutVersion {_shown(layout)}: Ozone accepts only "
            f"{VOLUME_LAYOUT_VERSION} (HDDSVolumeLayoutVersion) and would refuse this volume"
        )
    for key in ("clusterID", "storageID"):
        value = props.get(key, "")
        if not is_plain_component(value):
            return (
                f"{version_file}: {key} {_shown(value)} is not one plain directory name "
                f"(never used as a path)"
            )
    if not props.get("datanodeUuid", "").strip():
        return f"{version_file}: no datanodeUuid: Ozone would refuse this volume"
    ctime = props.get("ctime", "")
    if not (ctime.isascii() and ctime.isdigit()) or int(ctime) > time.time() * 1000:
        return (
            f"{version_file}: ctime {_shown(ctime)} is not a creation time in the past "
            f"(milliseconds): Ozone would refuse this volume"
        )
    return None


def _under(child: Path, parent: Path) -> bool:
    """Does `child` resolve to a directory right inside what `parent` resolves to?"""
    return Path(os.path.realpath(child)).parent == Path(os.path.realpath(parent))


def _volume(root: Path) -> OzoneVolume:
    hdds = root / HDDS
    version = hdds / VERSION
    props = read_version(version)
    problem = _version_problem(props, version)
    if problem is not None:
        return OzoneVolume(root, props, None, problem)
    if not _real_dir(hdds):
        return OzoneVolume(
            root, props, None, f"{hdds} is not a directory (a link is never followed)"
        )
    cluster = props["clusterID"]
    if _real_dir(hdds / cluster):
        id_dir = hdds / cluster
    else:
        subdirs = [Path(e.path) for e in os.scandir(hdds) if e.is_dir(follow_symlinks=False)]
        if len(subdirs) != 1:
            return OzoneVolume(
                root, props, None, f"no {cluster} directory in {hdds} ({len(subdirs)} candidates)"
            )
        id_dir = subdirs[0]  # a volume formatted before SCM HA: the scmID directory
    storage = id_dir / props["storageID"]
    if os.path.lexists(storage) and not _real_dir(storage):
        return OzoneVolume(
            root, props, None, f"{storage} is not a directory (a link is never followed)"
        )
    if not _under(id_dir, hdds) or (_real_dir(storage) and not _under(storage, id_dir)):
        return OzoneVolume(root, props, None, f"{id_dir} does not lie under {hdds}")
    problem = _current_problem(hdds, id_dir)
    if problem is not None:
        return OzoneVolume(root, props, None, problem)
    return OzoneVolume(root, props, id_dir)


def _current_problem(hdds: Path, id_dir: Path) -> Optional[str]:
    """Why `<id_dir>/current` cannot be listed (missing, a link, unreadable), else None. A
    volume whose replicas cannot be listed is failed, never one that holds none: its holder
    would otherwise look verified with nothing on it (and free to stop)."""
    current = id_dir / "current"
    try:
        base = open_dir(os.fspath(hdds))
        try:
            fd = open_dir_chain(base, (id_dir.name, "current"), start=hdds)
        finally:
            os.close(base)
        try:
            with os.scandir(fd) as entries:
                next(entries, None)
        finally:
            os.close(fd)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if isinstance(exc, FileNotFoundError):
            why = f"{current} is missing"
        elif not why.startswith(os.fspath(current)):  # a link says where it was met
            why = f"{current}: {why}"
        return f"{why}: the volume's replicas cannot be listed; nothing of it is verified"
    return None


def _marks_volume(version: Path) -> bool:
    """Does `version` exist (whatever it is: a link, a FIFO or a directory in its place make
    a volume with a problem, reported, never one silently skipped)?"""
    return os.path.lexists(version)


def _volume_above(p: Path) -> Optional[Tuple[Path, Path]]:
    """(volume root, p) when p is inside a volume's hdds directory (or is the root)."""
    for anc in [p, *p.parents]:
        if _marks_volume(anc / HDDS / VERSION):
            return anc, p
        if anc.name == HDDS and _marks_volume(anc / VERSION):
            return anc.parent, p
    return None


def is_ozone_path(path: PathLike) -> bool:
    """Does `path` hold (or lie inside) Ozone datanode volumes?"""
    p = Path(os.path.abspath(os.fspath(path)))
    if _volume_above(p) is not None:
        return True
    return any(True for _ in _walk_volumes(p, 0))


def _walk_volumes(p: Path, depth: int) -> Iterator[Path]:
    try:
        is_volume = _marks_volume(p / HDDS / VERSION)
    except OSError:  # an unreadable directory: reported by the scan walk, not fatal here
        return
    if is_volume:
        yield p
        return
    if depth >= _MAX_DEPTH:
        return
    try:
        entries = sorted(os.scandir(p), key=lambda e: e.name)
    except (NotADirectoryError, PermissionError, FileNotFoundError):
        return
    for e in entries:
        if e.is_dir(follow_symlinks=False) and e.name != HDDS:
            yield from _walk_volumes(Path(e.path), depth + 1)


def find_volumes(path: PathLike) -> List[Tuple[OzoneVolume, Optional[Path]]]:
    """Every volume at, above or under `path`, with the directory inside it that `path`
    names (None for the whole volume): only replicas under that directory are meant."""
    p = Path(os.path.abspath(os.fspath(path)))
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", os.fspath(path))
    above = _volume_above(p)
    if above is not None:
        root, inner = above
        return [(_volume_or_problem(root), None if inner == root else inner)]
    return [(_volume_or_problem(v), None) for v in _walk_volumes(p, 0)]


def _volume_or_problem(root: Path) -> OzoneVolume:
    """The volume at `root`; one whose VERSION cannot be read (a link, a FIFO, too large,
    unreadable) is a volume with that problem, so that the walk goes on to the others."""
    try:
        return _volume(root)
    except OSError as exc:
        where = exc.filename if exc.filename else root / HDDS / VERSION
        return OzoneVolume(root, {}, None, f"{where}: {exc.strerror or exc}")


def replicas_under(volume: OzoneVolume, inner: Optional[Path]) -> List[OzoneReplica]:
    """The volume's replicas, limited to those at or under `inner` (or containing it)."""
    reps = volume.replicas()
    if inner is None:
        return reps
    return [
        r for r in reps if r.root == inner or inner in r.root.parents or r.root in inner.parents
    ]
