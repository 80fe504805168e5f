"""The `.tree` file: Ozone's ContainerChecksumInfo (proto2), read and written natively.

Wire format (package hadoop.hdds.datanode, DatanodeClientProtocol.proto), written exactly as
Java protobuf writes it: fields in field-number order, int64 as varint (negative values as 10
bytes), bool as one varint byte, repeated messages unpacked. One message per file, no framing.

    ContainerChecksumInfo { optional int64 containerID = 1;
                            optional ContainerMerkleTree containerMerkleTree = 2; }  // 3 retired
    ContainerMerkleTree   { optional int64 dataChecksum = 1;
                            repeated BlockMerkleTree blockMerkleTree = 2; }
    BlockMerkleTree       { optional int64 blockID = 1; optional int64 dataChecksum = 2;
                            repeated ChunkMerkleTree chunkMerkleTree = 3;
                            optional bool deleted = 4; }
    ChunkMerkleTree       { optional int64 offset = 1; optional int64 length = 2;
                            optional int64 dataChecksum = 3; optional bool checksumMatches = 4; }

What Ozone writes (proved by the golden files of tests/data/ozone-golden/, written by Ozone's
own ContainerMerkleTreeWriter): containerID and containerMerkleTree always; dataChecksum of the
container only when a full tree was generated; every block field, `deleted` included when false
(bytes 20 00); chunks only for live blocks; every chunk field. A tree read from bytes remembers
which optional fields were present, so `tree_to_bytes(tree_from_bytes(b)) == b` for any
canonical encoding; trees built or changed here are written as Ozone writes them. Unknown
top-level fields (an old file's removed field 3) are kept raw in `ContainerTree.unknown_fields`
and written back after field 2, byte for byte, as protobuf-java does when Ozone rewrites a file
from its stored message (scans, merges, repairs); unknown fields inside the tree messages are
skipped (Ozone rebuilds those).

The encoding itself (tree_to_bytes, tree_from_bytes, TreeFileError) lives with the model in
merkle.trees.model, so that the model never imports this file-I/O module; they are re-exported
here. Files are `<container>/metadata/<containerID>.tree`; `write_tree` writes a temp file in the
same directory, fsyncs it, renames it over the target and fsyncs the directory.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Optional, Union

from merkle.trees.model import ContainerTree, TreeFileError, tree_from_bytes, tree_to_bytes

__all__ = [
    "TreeFileError",
    "read_tree",
    "tree_from_bytes",
    "tree_path",
    "tree_to_bytes",
    "write_tree",
]

PathLike = Union[str, "os.PathLike[str]"]


def tree_path(container_dir: PathLike, container_id: int) -> Path:
    """Where Ozone keeps a container's tree: <container>/metadata/<containerID>.tree."""
    return Path(container_dir) / "metadata" / f"{int(container_id)}.tree"


def read_tree(
    path: PathLike, *, corrupt_ok: bool = False, missing_ok: bool = False
) -> Optional[ContainerTree]:
    """Read a `.tree` file.

    Raises TreeFileError naming the file for an empty, truncated, corrupt or foreign file,
    unless `corrupt_ok`, which returns None ("no tree"), as Ozone does. A missing file raises
    FileNotFoundError unless `missing_ok` (then None).
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    try:
        return tree_from_bytes(data, source=name)
    except TreeFileError:
        if corrupt_ok:
            return None
        raise


def fsync_dir(directory: PathLike) -> None:
    """fsync a directory so a rename or a new file in it survives a power cut (best effort
    where directories cannot be opened)."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows: directories cannot be opened; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically: temp file in the same directory, fsync, rename
    over the target, fsync the directory. A crash leaves the old file or the new one.

    A file replaced keeps its owner, group and mode; a new one gets the directory's owner and
    group and mode 0644 (best effort: only root may give a file away). The setuid, setgid and
    sticky bits are never carried over."""
    name = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(name))
    try:
        old: Optional[os.stat_result] = os.lstat(name)
    except OSError:
        old = None
    if old is not None and stat.S_ISREG(old.st_mode):
        uid, gid, mode = old.st_uid, old.st_gid, stat.S_IMODE(old.st_mode) & 0o777
    else:
        dst = os.stat(directory)
        uid, gid, mode = dst.st_uid, dst.st_gid, 0o644
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(name) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            st = os.fstat(f.fileno())
            if hasattr(os, "fchown") and (st.st_uid, st.st_gid) != (uid, gid):
                try:
                    os.fchown(f.fileno(), uid, gid)
                except PermissionError:
                    pass  # not root: the file is ours, as any file we create
            os.fsync(f.fileno())
        os.replace(tmp, name)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def write_tree(tree: ContainerTree, path: PathLike) -> None:
    """Write `tree` to a `.tree` file atomically (see write_bytes_atomic)."""
    write_bytes_atomic(path, tree_to_bytes(tree))
