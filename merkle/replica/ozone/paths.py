"""The paths a `.container` file records, and whether they are the replica's own directories.

A datanode writes absolute `metadataPath` and `chunksPath` into each `.container` and reads and
writes there, not where the file sits. crcmerkle never follows them (a replica is always
read from the directory the walk found); it compares them with that directory:

* each must be `<mount>/hdds/<clusterID dir>/current/containerDir<N>/<id>/metadata` (resp.
  `chunks`) with exactly this replica's suffix (its cluster directory, containerDir and ID),
  no `.`/`..`/empty component, and both must name the same `<mount>`;
* `<mount>` must be this volume's mount: the directory the volume is scanned at, or (a volume
  inspected elsewhere: copied, moved, or mounted at another path than on its datanode) the
  mount that most of the volume's `.container` files record (a strict majority), unless that
  mount is another directory beside the volume (another disk of the same host).

Anything else (a path into another replica, another volume or outside the volume) is
CONTAINER_PATH_MISMATCH, naming the recorded and the actual path: Ozone would read other files
than the ones crcmerkle verifies. The majority rule cannot tell a volume whose every
`.container` names one other mount from a copy of a volume mounted there; scanning in place
(where the datanode mounts it) has no such blind spot.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any, Iterable, Mapping, Optional, Set

from merkle.replica.ozone.layout import CONTAINER_SUFFIX, OzoneReplica, OzoneVolume

__all__ = ["CONTAINER_PATH_MISMATCH", "accepted_mounts", "path_mismatch", "recorded_mount"]

CONTAINER_PATH_MISMATCH = "CONTAINER_PATH_MISMATCH"
_RECORDED_LINE = re.compile(r"^metadataPath: ([^\n]*)$", re.MULTILINE)
#: longest recorded path shown in a finding
_SHOWN = 300


def _suffix(replica: OzoneReplica, leaf: str) -> Optional[str]:
    """`hdds/<id dir>/current/containerDir<N>/<id>/<leaf>` of this replica, None when the
    replica does not lie in its volume's tree (never for replicas a volume lists)."""
    try:
        rel = replica.root.relative_to(replica.volume.root)
    except ValueError:
        return None
    return "/".join((*rel.parts, leaf))


def _mount_of(recorded: Any, suffix: str) -> Optional[str]:
    """The `<mount>` part (with its trailing `/`, or "" for a relative path) when `recorded`
    is `<mount>` + `suffix` with plain components only, else None."""
    if not isinstance(recorded, str) or "\0" in recorded:
        return None
    if recorded == suffix:
        mount = ""
    elif recorded.endswith("/" + suffix):
        mount = recorded[: len(recorded) - len(suffix)]
    else:
        return None
    inner = mount.strip("/").split("/") if mount.strip("/") else []
    if any(part in ("", ".", "..") for part in inner):
        return None
    return mount


def recorded_mount(replica: OzoneReplica, fields: Mapping[str, Any]) -> Optional[str]:
    """The mount both recorded paths of this replica name, None when they are not this
    replica's directories on one mount (see the module docstring)."""
    meta_suffix, chunks_suffix = _suffix(replica, "metadata"), _suffix(replica, "chunks")
    if meta_suffix is None or chunks_suffix is None:
        return None
    mount = _mount_of(fields.get("metadataPath"), meta_suffix)
    if mount is None or _mount_of(fields.get("chunksPath"), chunks_suffix) != mount:
        return None
    return mount


def _as_mount(path: os.PathLike) -> str:
    text = os.path.abspath(os.fspath(path))
    return text if text.endswith("/") else text + "/"


def accepted_mounts(volume: OzoneVolume, replicas: Iterable[OzoneReplica]) -> Set[str]:
    """The mounts a `.container` of this volume may record: where the volume is scanned,
    and the one a strict majority of `replicas`' `.container` files record (read as text,
    bounded, never through a link; an unreadable file has no vote)."""
    accepted = {_as_mount(volume.root)}
    votes: Counter = Counter()
    voters = 0
    for replica in replicas:
        try:
            data = replica.read_file(
                replica.metadata_dir / f"{replica.container_id}{CONTAINER_SUFFIX}"
            )
        except OSError:
            continue
        match = _RECORDED_LINE.search(data.decode("utf-8", "replace"))
        suffix = _suffix(replica, "metadata")
        voters += 1
        if match is None or suffix is None:
            continue
        mount = _mount_of(match.group(1), suffix)
        if mount is not None:
            votes[mount] += 1
    if votes:
        mount, count = votes.most_common(1)[0]
        if 2 * count > voters and not _another_volume_beside(volume, mount):
            accepted.add(mount)
    return accepted


def _another_volume_beside(volume: OzoneVolume, mount: str) -> bool:
    """Is `mount` another directory beside this volume's root (another disk of the same
    host: /data/disk2 for a volume scanned at /data/disk1)? Then the `.container` files
    record another volume's files, not a copy's original mount: a volume holding a copy of
    one replica of its sibling would otherwise elect that sibling with its only vote. Only
    the name is looked up (lstat, nothing under it is opened or followed)."""
    if not os.path.isabs(mount):
        return False
    candidate = os.path.normpath(mount)
    root = os.path.abspath(os.fspath(volume.root))
    if candidate == root or os.path.dirname(candidate) != os.path.dirname(root):
        return False
    try:
        os.lstat(candidate)
    except OSError:
        return False
    return True


def _shown(value: Any) -> str:
    if not isinstance(value, str):
        return f"<a {type(value).__name__}>" if value is not None else "(none)"
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def path_mismatch(
    replica: OzoneReplica, fields: Mapping[str, Any], accepted: Set[str]
) -> Optional[str]:
    """The finding's detail when the `.container` paths are not this replica's own
    directories on this volume's mount (see the module docstring), else None."""
    mount = recorded_mount(replica, fields)
    if mount is not None and mount in accepted:
        return None
    return (
        f"metadataPath {_shown(fields.get('metadataPath'))} and chunksPath "
        f"{_shown(fields.get('chunksPath'))} are not this replica's own directories "
        f"{_shown(os.fspath(replica.metadata_dir))} and "
        f"{_shown(os.fspath(replica.chunks_dir))} on this volume's mount: Ozone reads and "
        f"writes there, not the files verified here (never followed)"
    )
