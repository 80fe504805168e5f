"""HDFS datanode storage directories: `<dir>/current/VERSION` (`storageType=DATA_NODE`; the
datanode is its `datanodeUuid`, the volume its `DS-` `storageID`, the cluster its
`clusterID`) and the block pools under it (`current/BP-*/current/VERSION`).

VERSION files are `java.util.Properties.store` output (Storage.writeProperties): a `#date`
comment line, then `key=value` lines in hash order. They are read bounded, without following
a link, and parsed as data: a name read from one (a block pool ID) is matched against what
the directory holds, never joined into a path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from merkle.replica.safeopen import NotRegularFileError, open_dir, open_regular

__all__ = [
    "BlockPool",
    "DataDir",
    "VERSION_BYTES",
    "find_data_dirs",
    "parse_properties",
    "read_data_dir",
]

#: the largest VERSION read (a real one is ~250 bytes)
VERSION_BYTES = 64 << 10
#: how many entries of a directory `find_data_dirs` looks at for storage directories below
_LOOK = 256
_BLOCK_POOL = re.compile(r"BP-[0-9]+-[0-9A-Za-z.:_-]+-[0-9]+")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(data: bytes) -> Dict[str, str]:
    """The keys and values of a Java Properties text (ISO 8859-1, `#`/`!` comments, `=`,
    `:` or blanks between key and value, backslash escapes and continuation lines)."""
    text = data.decode("latin-1")
    out: Dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split(line: str) -> tuple[str, str]:
    k = 0
    while k < len(line):
        c = line[k]
        if c == "\\":
            k += 2
            continue
        if c in "=: \t\f":
            break
        k += 1
    key, rest = line[:k], line[k:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, k = [], 0
    while k < len(s):
        c = s[k]
        if c == "\\" and k + 1 < len(s):
            nxt = s[k + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[k + 2 : k + 6] or ""):
                out.append(chr(int(s[k + 2 : k + 6], 16)))
                k += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            k += 2
            continue
        out.append(c)
        k += 1
    return "".join(out)


def _read_version(dir_fd: int) -> Dict[str, str]:
    """`VERSION` of the open directory `dir_fd` (OSError, NotRegularFileError, ValueError)."""
    fd = open_regular(dir_fd, "VERSION")
    try:
        data = os.read(fd, VERSION_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > VERSION_BYTES:
        raise ValueError(f"a VERSION of more than {VERSION_BYTES} bytes")
    return parse_properties(data)


@dataclass
class BlockPool:
    """One block pool of a storage directory: its ID (the directory's name, which its
    VERSION's blockpoolID must equal) and its directory."""

    id: str
    path: str
    problem: Optional[str] = None


@dataclass
class DataDir:
    """One datanode storage directory (a volume of `dfs.datanode.data.dir`)."""

    path: str
    datanode_uuid: Optional[str] = None
    storage_id: Optional[str] = None
    cluster_id: Optional[str] = None
    layout_version: Optional[int] = None
    block_pools: List[BlockPool] = field(default_factory=list)
    #: why the directory cannot be read as a datanode's (its VERSION), else None
    problem: Optional[str] = None


def _version_of(path: str) -> Optional[str]:
    """What `path/current/VERSION` says: "datanode" (storageType=DATA_NODE), "other" (a
    VERSION of another kind), "unreadable" (one that cannot be read: too large, not a
    regular file, an I/O error), None (no current/VERSION at all)."""
    try:
        top = open_dir(path, follow=True)
    except OSError:
        return None
    try:
        cur = open_dir("current", top)
    except OSError:
        os.close(top)
        return None
    try:
        try:
            props = _read_version(cur)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return "unreadable"
        return "datanode" if props.get("storageType") == "DATA_NODE" else "other"
    finally:
        os.close(cur)
        os.close(top)


def is_data_dir(path: str) -> bool:
    """Whether `path/current/VERSION` says storageType=DATA_NODE (cheap: one small read)."""
    return _version_of(path) == "datanode"


def find_data_dirs(root: str) -> List[str]:
    """`root` when it is a datanode storage directory, else those of its children (a
    datanode's data directories given by their parent), in name order. A child whose
    VERSION cannot be read is listed too when a sibling is a datanode's (read_data_dir then
    says why): never left out in silence."""
    if is_data_dir(root):
        return [root]
    try:
        names = sorted(os.listdir(root))[:_LOOK]
    except OSError:
        return []
    kinds = {}
    for n in names:
        p = os.path.join(root, n)
        if os.path.isdir(p) and not os.path.islink(p):
            kinds[p] = _version_of(p)
    if "datanode" not in kinds.values():
        return []
    return [p for p, k in kinds.items() if k in ("datanode", "unreadable")]


def read_data_dir(path: str) -> DataDir:
    """The storage directory at `path`: its VERSION's identity and its block pools (each
    `current/BP-*` directory with a `current/` of its own; a pool whose VERSION names
    another ID has its `problem`)."""
    d = DataDir(path)
    try:
        top = open_dir(path, follow=True)
    except OSError as exc:
        d.problem = f"cannot open it: {exc.strerror or exc}"
        return d
    try:
        cur = open_dir("current", top)
    except (OSError, NotRegularFileError) as exc:
        os.close(top)
        d.problem = f"no current/ directory: {getattr(exc, 'strerror', None) or exc}"
        return d
    try:
        try:
            props = _read_version(cur)
        except (OSError, ValueError) as exc:
            d.problem = f"current/VERSION unreadable: {getattr(exc, 'strerror', None) or exc}"
            return d
        if props.get("storageType") != "DATA_NODE":
            d.problem = (
                f"current/VERSION says storageType={props.get('storageType', '')[:40]!r}, "
                f"not DATA_NODE"
            )
            return d
        d.datanode_uuid = props.get("datanodeUuid") or None
        d.storage_id = props.get("storageID") or None
        d.cluster_id = props.get("clusterID") or None
        try:
            d.layout_version = int(props.get("layoutVersion", ""))
        except ValueError:
            d.layout_version = None
        for name in sorted(os.listdir(cur)):
            if not _BLOCK_POOL.fullmatch(name):
                continue
            d.block_pools.append(_block_pool(cur, name, os.path.join(path, "current", name)))
        return d
    finally:
        os.close(cur)
        os.close(top)


def _block_pool(cur: int, name: str, shown: str) -> BlockPool:
    pool = BlockPool(name, shown)
    try:
        bp = open_dir(name, cur)
    except (OSError, NotRegularFileError) as exc:
        pool.problem = f"not a directory to read: {getattr(exc, 'strerror', None) or exc}"
        return pool
    try:
        inner = open_dir("current", bp)
    except (OSError, NotRegularFileError) as exc:
        pool.problem = f"no current/: {getattr(exc, 'strerror', None) or exc}"
        os.close(bp)
        return pool
    try:
        try:
            props = _read_version(inner)
        except (OSError, ValueError) as exc:
            pool.problem = f"current/VERSION unreadable: {getattr(exc, 'strerror', None) or exc}"
            return pool
        if props.get("blockpoolID") != name:
            pool.problem = (
                f"its VERSION names block pool {props.get('blockpoolID', '')[:80]!r}, not {name}"
            )
        return pool
    finally:
        os.close(inner)
        os.close(bp)
