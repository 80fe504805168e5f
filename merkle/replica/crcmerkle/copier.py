"""The crcmerkle layout's replica copier: a new replica of a container from a good one, the
copy `crcmerkle replicate` makes (the job, merkle.replica.replicate, asks every layout first:
Layout.replicate_refusal; then the source's layout copies: Layout.copy_replica).

`copy_replica(source, target)` holds the source's replica lock (no writer changes it meanwhile)
and builds the new replica in a staging directory beside the target, `<volume>/.crcmerkle-
replicate-<containerID>.tmp` (not a decimal name, so discovery never takes it for a replica):
  1. reads and verifies the source's block metadata (its CRC trailer and structure);
  2. copies every recorded chunk of every block file, in pieces of whole windows into one
     reused buffer, verifying each window against the source's *recorded* checksums before
     it is written (a mismatch, a short or missing block file stops the copy: the source is
     not a good replica); block files keep the source's mode, less setuid, setgid and sticky;
  3. writes the metadata (the source's bytes, so unknown and newer fields survive) and then
     the tree, each atomically: the source's stored `.tree` bytes when a read-only scan of
     the copy confirms them, else the tree that scan built (tombstones kept by the merge);
  4. removes the staging marker, renames the staging directory to the target in one step
     and fsyncs the volume.
The target is never touched when it exists (a replica already there with the source's
container value is reported as present, so a plan can be run again). A crash leaves only the
staging directory, which a re-run recognises (its name and entries) and starts over; the
target appears complete or not at all.

Files are opened relative to directory descriptors, never through a symbolic link, and must
be regular files (`open_in`): a link planted in a replica cannot redirect a read or a write.
The target's volume directory must already exist (it is never created) and is reached
without following any symbolic link in its path, so a linked datanode or volume directory
cannot send the copy elsewhere. The source's metadata and tree are read only when `fstat`
says they are within the metadata cap (safeopen.max_metadata_bytes). Everything created
(staging directory, `chunks/`, `metadata/`, files) gets the owner and group of the
directory it is made in, as the datanode's own files have, and never a setuid, setgid or
sticky bit (merkle.replica.safeopen's creation helpers). Hence a volume directory owned by
another user than the source replica's (root aside) is refused: the copy would become that
user's. A copy that fails (a volume that fills up: ENOSPC) removes its staging directory
through the volume's descriptor before the error is reported.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Callable, List, Optional, Union

import numpy as np

from merkle import _native
from merkle.replica.blocks import CHECKSUM_SIZES, CRC32, CRC32C, NONE, SHA256, ChunkMeta
from merkle.replica.crcmerkle.layout import (
    BLOCK_SUFFIX,
    META_SUFFIX,
    TREE_SUFFIX,
    ContainerPaths,
    container_paths,
)
from merkle.replica.errors import (
    BlockMetaError,
    ReplicaError,
    SourceNotGoodError,
    TargetExistsError,
)
from merkle.replica.fileio import pread_into
from merkle.replica.lock import ReplicaLock
from merkle.replica.replicadir.blockmeta import decode_blockmeta
from merkle.replica.results import ReplicateResult
from merkle.replica.safeopen import (
    NotRegularFileError,
    make_dir,
    open_dir,
    open_dir_nofollow_path,
    open_regular,
    read_regular,
    replace_atomic,
)
from merkle.trees.ozone import format_checksum

__all__ = ["STAGING_PREFIX", "copy_replica", "open_in"]

PathLike = Union[str, "os.PathLike[str]"]
#: Called after each step with (step, detail): "block", "metadata", "tree", "rename".
StepHook = Callable[[str, Any], None]

STAGING_PREFIX = ".crcmerkle-replicate-"
_MARKER = "SOURCE"  # inside the staging directory: where the copy comes from
#: bytes read and verified per call (whole windows); the buffer never grows beyond
#: max(this, one window), and a window larger than _MAX_WINDOW is refused
_PIECE = 4 * 1024 * 1024
_MAX_WINDOW = 64 * 1024 * 1024


# ---- careful opening (one place, so a shared helper can replace it) ---------------------


def open_in(
    dir_fd: int, name: str, flags: int = os.O_RDONLY, mode: int = 0o644, *, directory: bool = False
) -> int:
    """Open one path component `name` relative to `dir_fd` (safeopen.open_regular, or
    safeopen.open_dir when `directory`): never through a symbolic link, a file fstat-checked
    to be regular, a read that cannot hang on a FIFO, close-on-exec. A link, or a file that
    is not a regular one, is a ReplicaError naming it; a directory that is not one (a link
    included) NotADirectoryError."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a single path component: {name!r}")
    try:
        if directory:
            return open_dir(name, dir_fd)
        return open_regular(dir_fd, name, flags, mode=mode)
    except NotRegularFileError as exc:
        raise _refused(dir_fd, name, directory, exc) from None


def _refused(
    dir_fd: Optional[int], name: str, directory: bool, exc: NotRegularFileError
) -> Exception:
    """What replicate raises for an entry safeopen refused, as it always has: for a
    directory, NotADirectoryError (O_DIRECTORY|O_NOFOLLOW meets a link, a file or a FIFO
    with ENOTDIR); for a file, a ReplicaError naming a link or a file that is not regular."""
    shown = os.path.basename(name)
    if directory:
        return NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), shown)
    try:
        link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        link = False
    if link:
        return ReplicaError(f"{shown} is a symbolic link (refused)")
    return ReplicaError(f"{shown} is not a regular file")


def _open_dir(path: PathLike) -> int:
    """A directory given by path; its last component must not be a symbolic link (the
    components above it are followed, as the operator named them)."""
    p = os.path.abspath(os.fspath(path))
    try:
        return open_dir(p)
    except NotRegularFileError as exc:
        raise _refused(None, p, True, exc) from None


def _read_all(dir_fd: int, name: str, shown: str) -> bytes:
    """A metadata file, refused (FileTooLargeError, an OSError) before one byte is read when
    fstat says it is above the configured cap; a link or FIFO is NotRegularFileError."""
    return read_regular(dir_fd, name, display=shown)


def _create_in(dir_fd: int, name: str, mode: int) -> int:
    """A new regular file (never through a link, FileExistsError if anything is there),
    owned as its directory is, with `mode` less setuid, setgid and sticky; opened write-only."""
    return open_regular(dir_fd, name, os.O_WRONLY, create=True, exclusive=True, mode=mode & 0o777)


def _open_volume(volume: str) -> int:
    """The target's volume directory: it must exist (never created here) and be reached
    without following a symbolic link anywhere in its path."""
    try:
        return open_dir_nofollow_path(volume)
    except FileNotFoundError:
        raise ReplicaError(
            "the target's volume directory does not exist (it is never created)", volume
        ) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ReplicaError(
                f"refusing the target's volume directory: {exc.strerror}", volume
            ) from None
        raise


# ---- verification -----------------------------------------------------------------------


def _verify_piece(view: memoryview, c: ChunkMeta, window: int) -> bool:
    """Do these bytes (whole windows from window number `window`) match the recorded ones?"""
    if c.checksum_type == NONE:
        return True  # nothing recorded to verify against (Ozone's NONE)
    bpc = c.bytes_per_checksum
    n = -(-len(view) // bpc)
    if c.checksum_type in (CRC32, CRC32C):
        got = _native.checksum_windows(
            view, bpc, algorithm="crc32" if c.checksum_type == CRC32 else "crc32c"
        )
        return bool(np.array_equal(got, c.window_values()[window : window + n]))
    size = CHECKSUM_SIZES[c.checksum_type]
    algo = "sha256" if c.checksum_type == SHA256 else "md5"
    for i in range(n):
        want = c.checksums[(window + i) * size : (window + i + 1) * size]
        if hashlib.new(algo, view[i * bpc : (i + 1) * bpc]).digest() != want:
            return False
    return True


class _Copier:
    def __init__(self) -> None:
        self.buffer = bytearray(0)

    def copy_chunk(self, sfd: int, dfd: int, c: ChunkMeta, where: str) -> None:
        bpc = c.bytes_per_checksum if c.checksum_type != NONE else _PIECE
        if bpc <= 0 or bpc > _MAX_WINDOW:
            raise SourceNotGoodError(f"{where}: window of {bpc} bytes refused")
        piece = max(1, _PIECE // bpc) * bpc
        if len(self.buffer) < min(piece, max(c.length, 1)):
            self.buffer = bytearray(min(piece, max(c.length, 1)))
        done = 0
        while done < c.length:
            n = min(piece, c.length - done)
            view = memoryview(self.buffer)[:n]
            got = pread_into(sfd, view, c.offset + done)
            if got < n:
                raise SourceNotGoodError(
                    f"{where}: chunk @{c.offset} is short ({done + got} of {c.length} bytes)"
                )
            if not _verify_piece(view, c, done // bpc if c.checksum_type != NONE else 0):
                raise SourceNotGoodError(
                    f"{where}: chunk @{c.offset} does not match its recorded window checksums"
                )
            w = 0
            while w < n:
                w += os.pwrite(dfd, view[w:], c.offset + done + w)
            done += n


# ---- replicate --------------------------------------------------------------------------


def _staging_name(container_id: int) -> str:
    return f"{STAGING_PREFIX}{container_id}.tmp"


def _clear_staging(volume_fd: int, name: str, volume: str) -> None:
    """Remove a staging directory left by an interrupted run, after checking it is one."""
    try:
        st = os.lstat(name, dir_fd=volume_fd)
    except FileNotFoundError:
        return
    path = os.path.join(volume, name)
    if not stat.S_ISDIR(st.st_mode):
        raise ReplicaError("exists and is not a staging directory (refused)", path)
    fd = open_dir(name, volume_fd, display=path)
    try:
        entries = set(os.listdir(fd))
    finally:
        os.close(fd)
    if not entries <= {_MARKER, "chunks", "metadata"}:
        raise ReplicaError(
            f"holds entries this tool did not make ({', '.join(sorted(entries))}); not removed",
            path,
        )
    _remove_staging(volume_fd, name, path)


def _remove_staging(volume_fd: int, name: str, path: str) -> None:
    """Remove a checked staging directory (files, and `chunks/` / `metadata/` of files) through
    directory descriptors, following no link (shutil.rmtree takes dir_fd only from 3.11)."""
    fd = open_dir(name, volume_fd, display=path)
    try:
        for entry in os.listdir(fd):
            if stat.S_ISDIR(os.lstat(entry, dir_fd=fd).st_mode):
                sub = open_dir(entry, fd, display=os.path.join(path, entry))
                try:
                    for leaf in os.listdir(sub):
                        os.unlink(leaf, dir_fd=sub)  # a directory here: EISDIR, not removed
                finally:
                    os.close(sub)
                os.rmdir(entry, dir_fd=fd)
            else:
                os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=volume_fd)


def _target_tree(vol_fd: int, target: ContainerPaths) -> Optional[bytes]:
    """The target's stored `.tree` bytes, read as carefully as the source's (no link, no
    FIFO, within the cap); None when there is none or it cannot be read so."""
    name = os.path.basename(os.path.abspath(target.root))
    try:
        rfd = open_dir(name, vol_fd)
    except OSError:
        return None
    try:
        mfd = open_dir("metadata", rfd)
    except OSError:
        os.close(rfd)
        return None
    try:
        return _read_all(mfd, f"{target.container_id}{TREE_SUFFIX}", os.fspath(target.tree))
    except OSError:
        return None
    finally:
        os.close(mfd)
        os.close(rfd)


def _existing(vol_fd: int, target: ContainerPaths, source_value: Optional[int]) -> Optional[str]:
    """None when the target is absent (or an empty directory); "present" when it is a replica
    with the source's container value; else TargetExistsError."""
    root = os.fspath(target.root)
    name = os.path.basename(os.path.abspath(root))
    try:
        st = os.lstat(name, dir_fd=vol_fd)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        fd = open_dir(name, vol_fd, display=root)
        try:
            empty = not os.listdir(fd)
        finally:
            os.close(fd)
        if empty:
            return None
    if stat.S_ISDIR(st.st_mode) and source_value is not None:
        if _stored_value(_target_tree(vol_fd, target), root) == source_value:
            return "present"
    raise TargetExistsError("exists and is not an identical replica: refusing to touch it", root)


def _stored_value(raw: Optional[bytes], source: str) -> Optional[int]:
    if raw is None:
        return None
    from merkle.trees.treefile import TreeFileError, tree_from_bytes

    try:
        return tree_from_bytes(raw, source=source).data_checksum
    except TreeFileError:
        return None


def copy_replica(
    source: PathLike, target: PathLike, *, on_step: Optional[StepHook] = None
) -> ReplicateResult:
    """Create the replica `target` (a path `<volume>/<containerID>`) from the good replica
    `source` (see the module docstring). Raises SourceNotGoodError when the source's data
    does not verify, TargetExistsError when the target holds something else,
    ReplicaError/OSError when the work cannot be done (lock held, unreadable metadata)."""
    src = container_paths(source)
    tgt = container_paths(target)
    if src.container_id != tgt.container_id:
        raise ReplicaError(
            f"the target is named {tgt.container_id}, the source is container {src.container_id}",
            os.fspath(target),
        )
    if not os.path.isdir(src.root):
        raise ReplicaError("source replica does not exist", os.fspath(source))
    if os.path.realpath(src.root) == os.path.realpath(tgt.root):
        raise ReplicaError("source and target are the same replica", os.fspath(target))
    cid = src.container_id
    with ReplicaLock(src):
        return _replicate(src, tgt, cid, on_step)


def _replicate(
    src: ContainerPaths, tgt: ContainerPaths, cid: int, on_step: Optional[StepHook]
) -> ReplicateResult:
    step = on_step or (lambda s, d: None)
    src_root = _open_dir(src.root)
    fds: List[int] = [src_root]
    try:
        meta_fd = open_in(src_root, "metadata", directory=True)
        fds.append(meta_fd)
        meta_name = f"{cid}{META_SUFFIX}"
        where = os.fspath(src.blockmeta)
        try:
            meta_raw = _read_all(meta_fd, meta_name, where)
        except FileNotFoundError:
            raise SourceNotGoodError("block-metadata file is missing", where) from None
        try:
            meta = decode_blockmeta(meta_raw, where, cid)
        except BlockMetaError as exc:
            raise SourceNotGoodError(str(exc)) from None
        try:
            tree_raw: Optional[bytes] = _read_all(
                meta_fd, f"{cid}{TREE_SUFFIX}", os.fspath(src.tree)
            )
        except FileNotFoundError:
            tree_raw = None
        src_value = _stored_value(tree_raw, os.fspath(src.tree))
        volume = os.path.dirname(os.path.abspath(tgt.root))
        vol_fd = _open_volume(volume)
        fds.append(vol_fd)
        present = _existing(vol_fd, tgt, src_value)
        if present:
            return ReplicateResult(
                os.fspath(src.root),
                os.fspath(tgt.root),
                cid,
                present,
                data_checksum=src_value,
                notes=["a replica with the source's value is already there; not touched"],
            )
        _check_owner(vol_fd, src_root, volume, os.fspath(src.root))
        stage_name = _staging_name(cid)
        _clear_staging(vol_fd, stage_name, volume)
        stage = os.path.join(volume, stage_name)
        stage_fd = make_dir(stage_name, vol_fd, os.fstat(src_root).st_mode, display=stage)
        fds.append(stage_fd)
        result = ReplicateResult(os.fspath(src.root), os.fspath(tgt.root), cid, "created")
        try:
            mfd = _create_in(stage_fd, _MARKER, 0o644)
            try:
                os.write(mfd, (os.path.abspath(src.root) + "\n").encode())
            finally:
                os.close(mfd)
            _build(src_root, meta_fd, stage_fd, stage, meta, meta_raw, tree_raw, cid, result, step)
            _check_free(vol_fd, tgt)
        except (ReplicaError, ValueError, OSError) as exc:
            # ours, and useless: no half copies (a full volume, ENOSPC, keeps nothing of it)
            _discard_staging(vol_fd, stage_name, volume, exc)
            raise
        os.unlink(_MARKER, dir_fd=stage_fd)  # the marker belongs to the staging directory
        os.fsync(stage_fd)
        os.rename(
            stage_name,
            os.path.basename(os.path.abspath(tgt.root)),
            src_dir_fd=vol_fd,
            dst_dir_fd=vol_fd,
        )
        os.fsync(vol_fd)
        step("rename", cid)
        if src_value is not None and result.data_checksum != src_value:
            result.notes.append(
                f"the source's stored tree said {format_checksum(src_value)}; "
                f"its data gives {format_checksum(result.data_checksum or 0)}"
            )
        return result
    finally:
        for fd in fds:
            os.close(fd)


def _discard_staging(vol_fd: int, name: str, volume: str, cause: BaseException) -> None:
    """Remove our staging directory after a failed copy (through the volume's descriptor);
    when that fails too, the copy's own error is what is reported (a re-run clears it)."""
    try:
        _clear_staging(vol_fd, name, volume)
    except (ReplicaError, OSError) as exc:
        if isinstance(cause, OSError) and not isinstance(cause, ReplicaError):
            cause.strerror = (
                f"{cause.strerror or cause}; the partial copy "
                f"{os.path.join(volume, name)} could not be removed "
                f"({getattr(exc, 'strerror', None) or exc})"
            )


def _check_owner(vol_fd: int, src_root: int, volume: str, source: str) -> None:
    """What is created gets the volume directory's owner (as the datanode's own files): a
    volume owned by another user than the source replica's, other than root, would be
    handed that replica's data (a root-only replica given to a user). Refused."""
    vol_uid = os.fstat(vol_fd).st_uid
    src_uid = os.fstat(src_root).st_uid
    if vol_uid not in (0, src_uid):
        raise ReplicaError(
            f"the target's volume directory belongs to uid {vol_uid}, the "
            f"source replica {source} to uid {src_uid}: the copy would be "
            f"handed to another user (refused)",
            volume,
        )


def _build(
    src_root: int,
    meta_fd: int,
    stage_fd: int,
    stage: str,
    meta: Any,
    meta_raw: bytes,
    tree_raw: Optional[bytes],
    cid: int,
    result: ReplicateResult,
    step: StepHook,
) -> None:
    """Fill the staging directory: block files, then metadata, then the tree."""
    _copy_blocks(src_root, stage_fd, meta, result, step)
    # metadata, then the tree, each atomically (replace_atomic: temp, fsync, rename)
    out_meta = make_dir(
        "metadata", stage_fd, os.fstat(meta_fd).st_mode, display=os.path.join(stage, "metadata")
    )
    try:
        staged = ContainerPaths(Path(stage), cid)
        replace_atomic(
            out_meta, f"{cid}{META_SUFFIX}", meta_raw, display=os.fspath(staged.blockmeta)
        )
        step("metadata", cid)
        _write_tree(staged, out_meta, tree_raw, result)
        step("tree", cid)
        os.fsync(out_meta)
    finally:
        os.close(out_meta)
    os.fsync(stage_fd)


def _check_free(vol_fd: int, tgt: ContainerPaths) -> None:
    """Right before the rename: nothing appeared at the target meanwhile."""
    root = os.fspath(tgt.root)
    name = os.path.basename(os.path.abspath(root))
    try:
        st = os.lstat(name, dir_fd=vol_fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        fd = open_dir(name, vol_fd, display=root)
        try:
            if not os.listdir(fd):
                return
        finally:
            os.close(fd)
    raise TargetExistsError("appeared while copying: refusing to touch it", root)


def _copy_blocks(
    src_root: int, stage_fd: int, meta: Any, result: ReplicateResult, step: StepHook
) -> None:
    chunks_fd = open_in(src_root, "chunks", directory=True) if meta.blocks else -1
    try:
        mode = os.fstat(chunks_fd).st_mode if chunks_fd >= 0 else 0o755
        out_dir = make_dir("chunks", stage_fd, mode)
        try:
            copier = _Copier()
            for block in meta.sorted_blocks():
                name = f"{block.block_id}{BLOCK_SUFFIX}"
                where = f"{result.source}/chunks/{name}"
                try:
                    sfd = open_in(chunks_fd, name)
                except FileNotFoundError:
                    if not block.chunks or block.length == 0:
                        sfd = -1  # an empty block may lack its file; create an empty one
                    else:
                        raise SourceNotGoodError("block file is missing", where) from None
                try:
                    fmode = os.fstat(sfd).st_mode if sfd >= 0 else 0o644
                    dfd = _create_in(out_dir, name, fmode)  # never setuid, setgid, sticky
                    try:
                        for c in block.chunks:
                            copier.copy_chunk(sfd, dfd, c, where)
                            result.chunks += 1
                            result.bytes_copied += c.length
                        os.fsync(dfd)
                    finally:
                        os.close(dfd)
                finally:
                    if sfd >= 0:
                        os.close(sfd)
                result.blocks += 1
                step("block", block.block_id)
            os.fsync(out_dir)
        finally:
            os.close(out_dir)
    finally:
        if chunks_fd >= 0:
            os.close(chunks_fd)


def _write_tree(
    staged: ContainerPaths, meta_dir: int, tree_raw: Optional[bytes], result: ReplicateResult
) -> None:
    """The source's tree bytes when a read-only scan of the copy confirms them (unknown
    fields kept), else the scan's merged tree."""
    from merkle.replica.verify import _scan
    from merkle.trees.treefile import tree_to_bytes

    name = f"{staged.container_id}{TREE_SUFFIX}"
    if tree_raw is not None:
        replace_atomic(meta_dir, name, tree_raw, display=os.fspath(staged.tree))
    scan = _scan(staged, False, 1, None, None, 1 << 20)
    data_errors = [e for e in scan.errors if e.kind not in ("TREE_MISSING", "TREE_CORRUPT")]
    if data_errors:  # cannot happen after a verified copy, unless the disk lies
        raise SourceNotGoodError(f"the copy does not verify: {data_errors[0]}", result.target)
    if tree_raw is None or tree_to_bytes(scan.tree) != tree_raw:
        replace_atomic(meta_dir, name, tree_to_bytes(scan.tree), display=os.fspath(staged.tree))
        if tree_raw is not None:
            result.notes.append(
                "the source's stored tree was stale or unreadable; the copy's "
                "tree was rebuilt from its verified data"
            )
    result.data_checksum = scan.tree.data_checksum
