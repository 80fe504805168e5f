"""The NameNode's view of which datanode holds which block of which file, from the saved
output of `hdfs fsck PATH -files -blocks -locations` (NamenodeFsck.collectFileSummary and
collectBlocksSummary; DatanodeInfoWithStorage.toString for each location):

    <path> <len> bytes, replicated: replication=<r>, <n> block(s):  OK
    0. <bpid>:blk_<id>_<gs> len=<n> Live_repl=<l>  [DatanodeInfoWithStorage[<ip:port>,<DS-..>,<T>]]

(an erasure-coded file says `erasure-coded: policy=<name>,` and prefixes each location with
its internal block, `blk_<id>:`). The text is read line by line, bounded, and each line is
data: a path is a name to report, never a path to open. Lines of no known shape (the
summary fsck prints at its end, `-replicaDetails` suffixes it adds) are skipped; a block
line with no file line before it, or a file whose block count its lines do not reach, is a
problem of the input (one line each, at most a few), never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

__all__ = ["FsckBlock", "FsckError", "FsckFile", "FsckView", "MAX_FSCK_BYTES", "read_fsck"]

#: the largest fsck output read, whole, into memory (a line per file and per block, ~200
#: bytes per block: about 5 million blocks)
MAX_FSCK_BYTES = 1 << 30
_FILE = re.compile(
    r"(?P<path>/.*?) (?P<length>[0-9]+) bytes, "
    r"(?:replicated: replication=(?P<replication>[0-9]+)|erasure-coded: policy=(?P<policy>[^,]*)), "
    r"(?P<blocks>[0-9]+) block\(s\):(?P<status>.*)"
)
_BLOCK = re.compile(
    r"(?P<index>[0-9]+)\. (?P<pool>BP-[^:\s]+):blk_(?P<id>-?[0-9]{1,19})_(?P<gs>[0-9]{1,20}) "
    r"len=(?P<len>[0-9]+) Live_repl=(?P<live>[0-9]+)\s*(?:\[(?P<locations>.*)\])?.*"
)
_LOCATION = re.compile(
    r"(?:blk_(?P<internal>-?[0-9]{1,19}):)?DatanodeInfoWithStorage\[(?P<addr>[^,\]]+),"
    r"(?P<storage>[^,\]]+),(?P<type>[A-Z_]+)\]"
)


class FsckError(ValueError):
    """An fsck file that cannot be read (one line)."""


@dataclass
class FsckBlock:
    pool: str
    block_id: int
    genstamp: int
    length: int
    live: int
    #: (the block expected there: the group's internal block for EC, else block_id;
    #: datanode address; storage ID; storage type)
    locations: List[Tuple[int, str, str, str]] = field(default_factory=list)


@dataclass
class FsckFile:
    path: str
    length: int
    replication: Optional[int]
    policy: Optional[str]
    status: str
    blocks: List[FsckBlock] = field(default_factory=list)
    declared_blocks: int = 0


@dataclass
class FsckView:
    files: List[FsckFile] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    #: (pool, block ID) -> (the file, its block) for every block and EC internal block
    by_block: Dict[Tuple[str, int], Tuple[FsckFile, FsckBlock]] = field(default_factory=dict)


def read_fsck(path: str) -> FsckView:
    """The fsck output at `path` (a regular file; FsckError for anything else)."""
    import os

    from merkle.replica.safeopen import read_named

    try:
        size = os.stat(path).st_size
    except OSError as exc:
        raise FsckError(f"--fsck {path}: {exc.strerror or exc}") from None
    if size > MAX_FSCK_BYTES:
        raise FsckError(f"--fsck {path}: {size} bytes, more than the {MAX_FSCK_BYTES} read")
    try:
        data = read_named(path, MAX_FSCK_BYTES)
    except OSError as exc:
        raise FsckError(f"--fsck {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_fsck(data.decode("utf-8", "replace"))


def parse_fsck(text: str) -> FsckView:
    view = FsckView()
    current: Optional[FsckFile] = None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.rstrip("\r")
        m = _FILE.fullmatch(line)
        if m:
            current = FsckFile(
                m["path"],
                int(m["length"]),
                int(m["replication"]) if m["replication"] else None,
                m["policy"],
                m["status"].strip(),
                declared_blocks=int(m["blocks"]),
            )
            view.files.append(current)
            continue
        b = _BLOCK.fullmatch(line)
        if not b:
            continue
        if current is None:
            _problem(view, f"line {n}: a block line before any file line")
            continue
        block_id = int(b["id"])
        if not -(1 << 63) <= block_id < 1 << 63 or int(b["gs"]) >= 1 << 63:
            _problem(view, f"line {n}: a block ID or genstamp past 64 bits")
            continue
        blk = FsckBlock(b["pool"], block_id, int(b["gs"]), int(b["len"]), int(b["live"]))
        for loc in _LOCATION.finditer(b["locations"] or ""):
            internal = int(loc["internal"]) if loc["internal"] else block_id
            blk.locations.append((internal, loc["addr"], loc["storage"], loc["type"]))
        current.blocks.append(blk)
        view.by_block.setdefault((blk.pool, block_id), (current, blk))
        for internal, _, _, _ in blk.locations:
            view.by_block.setdefault((blk.pool, internal), (current, blk))
    for f in view.files:
        if len(f.blocks) != f.declared_blocks:
            _problem(
                view, f"{f.path[:200]}: {f.declared_blocks} block(s) said, {len(f.blocks)} listed"
            )
    return view


def _problem(view: FsckView, line: str) -> None:
    if len(view.problems) < 20:
        view.problems.append(line)
