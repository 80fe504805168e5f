"""Command lists that root runs: a Spark report's reconcile commands and a Spark plan's copy
commands. Whoever can write a report or a plan (often through an object store) would steer
root's writes, so a list is read carefully and checked before anything runs:

  - files are opened without following a link and without blocking (a FIFO cannot hang the
    reader), must be regular files (fstat), and are bounded in size and in line length
    (/dev/zero or a sparse part is refused, not read as one endless line);
  - the list carries a SHA-256 digest written by its producer. The executors write a
    report's full list as JSON-lines part files: the report lists every part (name, bytes,
    SHA-256 of its bytes) and a digest over that ordered part list (`parts_digest`), so the
    digest is computed per part where the part was written and a swapped, edited, missing
    or extra part is refused. A list kept inline in the JSON (a plan's copy commands, a
    report whose commands all fit) is digested in a canonical form (`lines_digest`: one
    sorted-key compact JSON object per line);
  - every path a command names is checked against the disk before the command runs
    (`check_replica_path`): under one of the roots the producer says were scanned, at a
    replica's depth below it (<root>/<datanode>/<volume>/<containerID>, so every path of one
    command is on a volume of the same cluster), named by the command's container ID,
    reached without a symbolic link anywhere in it, and its own metadata records that
    container (`check_replica_metadata`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from merkle.replica.errors import ReplicaError

__all__ = [
    "CommandPart",
    "MAX_CONTAINER_ID",
    "MAX_LINE_BYTES",
    "MAX_LIST_BYTES",
    "MAX_ROUND",
    "REPLICA_DEPTH",
    "command_int",
    "canonical_line",
    "check_digest_field",
    "check_replica_metadata",
    "check_replica_path",
    "check_roots_field",
    "cluster_of",
    "lines_digest",
    "open_without_links",
    "parts_digest",
    "read_command_list",
    "read_json_file",
    "root_of",
]

PathLike = Union[str, "os.PathLike[str]"]

#: the largest command-list file (or report / plan JSON) read; a command is ~0.5 KB
MAX_LIST_BYTES = 1 << 30
#: the longest line of a command list (a command names a replica and a few peers)
MAX_LINE_BYTES = 1 << 20
#: a replica lies this many directories below a scanned root: <datanode>/<volume>/<ID>
#: (crcmerkle layout) or current/containerDir<N>/<ID> below <volume>/hdds/<clusterID>
REPLICA_DEPTH = 3
#: bounds of the integers a command carries (round numbers, container IDs)
MAX_ROUND = (1 << 31) - 1
MAX_CONTAINER_ID = (1 << 63) - 1
_HEX64 = re.compile(r"[0-9a-f]{64}")
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_PIECE = 1 << 20


def command_int(
    entry: Dict[str, Any], key: str, high: int, source: str, what: str, *, required: bool = True
) -> Optional[int]:
    """The integer `entry[key]` of a `what` (e.g. "copy command"), in 0..high; ReplicaError
    naming the key otherwise (a bool, a float, 1e400, [1] are refused, never coerced). An
    absent key is None when not `required`."""
    value = entry.get(key)
    if value is None and not required:
        return None
    if type(value) is not int or not 0 <= value <= high:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise ReplicaError(f'bad "{key}" in a {what}: {shown} (an integer 0..{high})', source)
    return value


@dataclass(frozen=True)
class CommandPart:
    """One file of a command list as read: its name, size and SHA-256 (hex)."""

    name: str
    size: int
    sha256: str

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "bytes": self.size, "sha256": self.sha256}


def canonical_line(command: Dict[str, Any]) -> bytes:
    """A command as one canonical JSON line (sorted keys, compact, ASCII)."""
    return (
        json.dumps(command, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"
    ).encode("ascii")


def lines_digest(commands: Iterable[Dict[str, Any]]) -> str:
    """SHA-256 (hex) of a list of commands in canonical form, in order."""
    h = hashlib.sha256()
    for c in commands:
        h.update(canonical_line(c))
    return h.hexdigest()


def parts_digest(parts: Iterable[Dict[str, Any]]) -> str:
    """SHA-256 (hex) over an ordered part list: one line "<name> <bytes> <sha256>" each."""
    h = hashlib.sha256()
    for p in parts:
        h.update(f"{p['name']} {int(p['bytes'])} {p['sha256']}\n".encode())
    return h.hexdigest()


def check_digest_field(value: Any, what: str, source: str) -> str:
    """A digest read from a report or plan: 64 lowercase hex digits, else ReplicaError."""
    if value is None:
        raise ReplicaError(
            f"{what} carries no SHA-256 digest of its command list (written "
            f"by an older crcmerkle, or edited): write it again",
            source,
        )
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ReplicaError(
            f"{what}: bad SHA-256 digest of its command list (64 hex digits)", source
        )
    return value


# ---- reading, bounded ----------------------------------------------------------------------


def _open_nofollow(name: str, dir_fd: Optional[int], shown: str) -> Tuple[int, os.stat_result]:
    """Open without following a link, without blocking; (fd, fstat)."""
    try:
        fd = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReplicaError("is a symbolic link (refused)", shown) from None
        raise OSError(exc.errno, exc.strerror, shown) from None
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def _read_bounded(fd: int, st: os.stat_result, shown: str, limit: int) -> bytes:
    """The bytes of an open regular file, refused above `limit` (by fstat, or growing)."""
    if not stat.S_ISREG(st.st_mode):
        raise ReplicaError("not a regular file (refused)", shown)
    if st.st_size > limit:
        raise ReplicaError(f"{st.st_size} bytes: above the {limit}-byte limit (refused)", shown)
    os.set_blocking(fd, True)
    out = bytearray()
    while True:
        got = os.read(fd, _PIECE)
        if not got:
            return bytes(out)
        out += got
        if len(out) > limit:
            raise ReplicaError(f"grew above the {limit}-byte limit while read (refused)", shown)


def read_json_file(path: PathLike, limit: int = MAX_LIST_BYTES) -> Any:
    """A report or plan named by the user: its last component may be a link the user chose
    (followed), but it must be a regular file within `limit` bytes, opened without blocking
    (a FIFO is refused, never waited on). ValueError when it is not JSON."""
    shown = os.fspath(path)
    fd = os.open(shown, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC)
    try:
        raw = _read_bounded(fd, os.fstat(fd), shown, limit)
    finally:
        os.close(fd)
    return json.loads(raw.decode("utf-8"))


def _parse_lines(raw: bytes, shown: str, out: List[Dict[str, Any]]) -> None:
    """The JSON objects of JSON-lines bytes (blank lines skipped), lines bounded."""
    for n, line in enumerate(raw.split(b"\n"), 1):
        if len(line) > MAX_LINE_BYTES:
            raise ReplicaError(f"line {n}: longer than {MAX_LINE_BYTES} bytes (refused)", shown)
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReplicaError(
                f"the command list is not UTF-8 text ({exc.reason})", shown
            ) from None
        try:
            e = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ReplicaError(f"line {n}: not JSON ({exc})", shown) from None
        if not isinstance(e, dict):
            raise ReplicaError(f"line {n}: not a command object", shown)
        out.append(e)


def read_command_list(
    path: str, limit: int = MAX_LIST_BYTES
) -> Tuple[List[Dict[str, Any]], List[CommandPart]]:
    """(the commands, the non-empty parts read) of a JSON-lines file, or of the part files
    of a directory Spark wrote (names starting with '_' or '.', such as _SUCCESS and
    checksums, are skipped, and so are empty parts: they hold no command). Nothing is
    followed through a link or waited on; every part is a regular file; the whole list is
    at most `limit` bytes and a line at most MAX_LINE_BYTES. ReplicaError (OSError
    reading)."""
    fd, st = _open_nofollow(path, None, path)
    out: List[Dict[str, Any]] = []
    parts: List[CommandPart] = []
    total = 0
    try:
        if stat.S_ISDIR(st.st_mode):
            names = sorted(n for n in os.listdir(fd) if not n.startswith(("_", ".")))
            for name in names:
                shown = os.path.join(path, name)
                pfd, pst = _open_nofollow(name, fd, shown)
                try:
                    raw = _read_bounded(pfd, pst, shown, limit - total)
                finally:
                    os.close(pfd)
                if not raw:
                    continue  # an empty part holds no command (Hadoop's readers skip it)
                total += len(raw)
                parts.append(CommandPart(name, len(raw), hashlib.sha256(raw).hexdigest()))
                _parse_lines(raw, shown, out)
        else:
            raw = _read_bounded(fd, st, path, limit)
            parts.append(
                CommandPart(os.path.basename(path), len(raw), hashlib.sha256(raw).hexdigest())
            )
            _parse_lines(raw, path, out)
    finally:
        os.close(fd)
    return out, parts


# ---- checking paths against the disk -------------------------------------------------------


def _components(path: str) -> List[str]:
    return [c for c in os.path.abspath(path).split("/") if c]


def root_of(path: str, roots: Sequence[str], source: str) -> str:
    """The scanned root a replica path lies under, exactly REPLICA_DEPTH levels deep;
    ReplicaError when it lies under none (or its path has '.', '..' or empty components,
    which would let it name one place and reach another)."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise ReplicaError("a command names a bad replica path", source)
    raw = path.rstrip("/").split("/")
    if any(c in (".", "..") for c in raw) or any(not c for c in raw[1:]):
        raise ReplicaError(f"{path}: a replica path with '.', '..' or '//' in it (refused)", source)
    parts = _components(path)
    for r in roots:
        rp = _components(r)
        if len(parts) == len(rp) + REPLICA_DEPTH and parts[: len(rp)] == rp:
            return "/" + "/".join(rp)
    raise ReplicaError(
        f"{path}: not a replica under the roots the scan read "
        f"({', '.join(roots[:5])}{' ...' if len(roots) > 5 else ''})",
        source,
    )


def check_roots_field(value: Any, what: str, source: str) -> List[str]:
    """The "scanned_roots" of a report or plan: a list of non-empty path strings."""
    if not (
        isinstance(value, list)
        and value
        and all(isinstance(r, str) and r and "\0" not in r for r in value)
    ):
        raise ReplicaError(
            f'{what} names no scanned roots ("scanned_roots"): its commands '
            f"cannot be checked against the disk; write it again",
            source,
        )
    return value


def cluster_of(root: str) -> str:
    """What makes two roots one cluster, as the root's layout says (merkle.replica.layout
    .Layout.cluster_of): an Ozone volume's <volume>/hdds/<clusterID> is its clusterID; a
    crcmerkle-layout root is its cluster directory."""
    from merkle.replica.layouts import layout_of

    return layout_of(root).cluster_of(root)


def check_replica_path(path: str, container_id: int, roots: Sequence[str], source: str) -> str:
    """Check one replica path of a command (see the module docstring; the directory itself
    may be absent: a copy's target); returns its scanned root."""
    root = root_of(path, roots, source)
    if os.path.basename(path.rstrip("/")) != str(container_id):
        raise ReplicaError(
            f"{path}: not named after the command's container {container_id} (refused)", source
        )
    _check_no_one_else_can_plant(root, path, source)
    return root


def _check_no_one_else_can_plant(root: str, path: str, source: str) -> None:
    """ReplicaError when a replica under `root` could have been planted by any user: the
    root is '/' (every directory three levels down, /tmp/<d>/<id> too, would be a replica of
    the cluster), or the root or a directory between it and the replica (a datanode or
    volume directory) is writable by others (world-writable, as /tmp: anyone may create
    replicas there, and datanode directories to outvote the real ones)."""
    if root == "/":
        raise ReplicaError(
            "the report names '/' as a scanned root: any directory three "
            "levels below / would count as a replica of the cluster (refused)",
            source,
        )
    below = path.rstrip("/").split("/")[len(_components(root)) + 1 : -1]
    here = root
    for name in ["", *below]:
        here = os.path.join(here, name) if name else here
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return  # a copy's target volume may not exist yet: nothing planted there
        except OSError as exc:
            raise ReplicaError(f"{here}: {exc.strerror or exc}", source) from None
        if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH:
            raise ReplicaError(
                f"{here}: writable by every user (mode "
                f"{stat.S_IMODE(st.st_mode):o}): anyone could have planted the "
                f"replicas a command names (refused)",
                source,
            )


def open_without_links(path: str) -> int:
    """A directory fd reached from / without a symbolic link anywhere (ReplicaError)."""
    from merkle.replica.safeopen import NotRegularFileError, open_dir_nofollow_path

    try:
        return open_dir_nofollow_path(path)
    except NotRegularFileError as exc:
        raise ReplicaError(f"refused: {exc.strerror}", path) from None


def check_replica_metadata(path: str, container_id: int) -> None:
    """The replica at `path` (reached without links) records `container_id` in its own
    metadata, as its layout checks it (merkle.replica.layout.RepairableLayout.check_container_id:
    a crcmerkle replica's `.blocks`, else its `.tree`; a replica on an Ozone volume is
    checked by the offline repair itself, its `.container` file); ReplicaError otherwise."""
    from merkle.replica.layout import repairer_of
    from merkle.replica.layouts import layout_of

    fd = open_without_links(path)
    try:
        repairer_of(layout_of(path), path).check_container_id(fd, path, container_id)
    finally:
        os.close(fd)
