"""A block pool's replicas on disk: `current/finalized/subdir<N>/subdir<M>/` and
`current/rbw/` (nothing else: `tmp/`, `trash/`, `previous/`, `lazypersist/`, restart markers
and upgrade hard links are not replicas to verify), each a `blk_<id>` block file paired by
name with its `blk_<id>_<genstamp>.meta` in the same directory (Block.blockFilePattern,
metaFilePattern: the ID signed, the genstamp unsigned decimal).

Walked through directory descriptors without following a link; every entry's type comes
from `lstat` relative to its directory. What does not pair is a finding: a block without a
meta, a meta without a block, two metas for one block (FsDatasetUtil.findMetaFile refuses
them), a finalized block outside the subdir its ID gives (DatanodeUtil.idToBlockDir;
VolumeScanner skips it), a link or other non-regular file where a replica file belongs.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple, Union

from merkle.replica.safeopen import NotRegularFileError, open_dir

__all__ = [
    "FINALIZED",
    "RBW",
    "BlockFinding",
    "Replica",
    "id_to_block_dir",
    "walk_block_pool",
]

FINALIZED, RBW = "FINALIZED", "RBW"
_BLOCK = re.compile(r"blk_(-?[0-9]{1,19})")
_META = re.compile(r"blk_(-?[0-9]{1,19})_([0-9]{1,20})\.meta")
_SUBDIR = re.compile(r"subdir([0-9]{1,2})")
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: entries of one directory looked at (a hostile directory of millions is read in bounded
#: memory: the names are sorted per directory, as the datanode's own walk does)
MAX_DIR_ENTRIES = 4 << 20


def id_to_block_dir(block_id: int) -> str:
    """DatanodeUtil.idToBlockDir: `finalized/subdir<(id >> 16) & 31>/subdir<(id >> 8) & 31>`
    (an arithmetic shift of the signed ID)."""
    return f"finalized/subdir{(block_id >> 16) & 0x1F}/subdir{(block_id >> 8) & 0x1F}"


@dataclass
class Replica:
    """One replica: its block pool, ID, genstamp, state, the directory it is in (relative to
    the pool's `current/`), its two file names and the block file's size."""

    pool: str
    block_id: int
    genstamp: int
    state: str
    directory: str
    block_name: str
    meta_name: str
    length: int


@dataclass
class BlockFinding:
    kind: str
    detail: str
    directory: str
    name: Optional[str] = None
    block_id: Optional[int] = None
    genstamp: Optional[int] = None


Walked = Union[Replica, BlockFinding]


def walk_block_pool(pool_dir: str, pool: str) -> Iterator[Walked]:
    """Every replica of the block pool at `pool_dir` (its `current/finalized` and
    `current/rbw`), and a BlockFinding for each entry that is no well-formed replica."""
    try:
        bp = open_dir(pool_dir, follow=True)
    except OSError as exc:
        yield BlockFinding("BLOCK_POOL_UNREADABLE", _why(exc), pool_dir)
        return
    try:
        try:
            cur = open_dir("current", bp)
        except OSError as exc:
            yield BlockFinding("BLOCK_POOL_UNREADABLE", f"current/: {_why(exc)}", pool_dir)
            return
        try:
            yield from _finalized(cur, pool)
            yield from _one_dir(cur, "rbw", pool, RBW)
        finally:
            os.close(cur)
    finally:
        os.close(bp)


def _why(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def _subdirs(fd: int, where: str) -> Iterator[Union[str, BlockFinding]]:
    for name in _names(fd):
        if _SUBDIR.fullmatch(name):
            yield name
        else:
            yield BlockFinding(
                "UNEXPECTED_ENTRY",
                "not a subdir<N> of the finalized layout: not read",
                where,
                name[:200],
            )


def _finalized(cur: int, pool: str) -> Iterator[Walked]:
    try:
        fin = open_dir("finalized", cur)
    except FileNotFoundError:
        return  # a pool with no finalized replica yet (git keeps no empty directory)
    except (OSError, NotRegularFileError) as exc:
        yield BlockFinding("BLOCK_POOL_UNREADABLE", f"finalized/: {_why(exc)}", "finalized")
        return
    try:
        for first in _subdirs(fin, "finalized"):
            if isinstance(first, BlockFinding):
                yield first
                continue
            try:
                d1 = open_dir(first, fin)
            except (OSError, NotRegularFileError) as exc:
                yield BlockFinding("NOT_A_REGULAR_FILE", _why(exc), "finalized", first)
                continue
            try:
                for second in _subdirs(d1, f"finalized/{first}"):
                    if isinstance(second, BlockFinding):
                        yield second
                        continue
                    yield from _one_dir(d1, second, pool, FINALIZED, f"finalized/{first}")
            finally:
                os.close(d1)
    finally:
        os.close(fin)


def _names(fd: int) -> List[str]:
    names: List[str] = []
    with os.scandir(fd) as it:
        for entry in it:
            names.append(entry.name)
            if len(names) >= MAX_DIR_ENTRIES:
                break
    return sorted(names)


def _one_dir(
    parent: int, name: str, pool: str, state: str, parent_rel: str = ""
) -> Iterator[Walked]:
    rel = f"{parent_rel}/{name}" if parent_rel else name
    try:
        fd = open_dir(name, parent)
    except FileNotFoundError:
        return
    except (OSError, NotRegularFileError) as exc:
        yield BlockFinding("NOT_A_REGULAR_FILE", _why(exc), parent_rel or ".", name)
        return
    try:
        blocks: Dict[int, Tuple[str, int]] = {}
        metas: Dict[int, List[Tuple[str, int]]] = {}
        for entry in _names(fd):
            b, m = _BLOCK.fullmatch(entry), _META.fullmatch(entry)
            if not (b or m):
                if state == FINALIZED and not entry.startswith("."):
                    yield BlockFinding(
                        "UNEXPECTED_ENTRY", "not a block or meta file", rel, entry[:200]
                    )
                continue  # rbw/ may hold a writer's other files
            block_id = int((b or m).group(1))  # type: ignore[union-attr]
            if not _INT64[0] <= block_id <= _INT64[1]:
                yield BlockFinding("UNEXPECTED_ENTRY", "a block ID past 64 bits", rel, entry)
                continue
            try:
                st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            except OSError as exc:
                yield BlockFinding("READ_ERROR", _why(exc), rel, entry, block_id)
                continue
            if not stat.S_ISREG(st.st_mode):
                yield BlockFinding(
                    "NOT_A_REGULAR_FILE", "not a regular file: never read", rel, entry, block_id
                )
                continue
            if b:
                blocks[block_id] = (entry, st.st_size)
            else:
                gs = int(m.group(2))  # type: ignore[union-attr]
                if gs >= 1 << 63:
                    yield BlockFinding("UNEXPECTED_ENTRY", "a genstamp past 63 bits", rel, entry)
                    continue
                metas.setdefault(block_id, []).append((entry, gs))
        for block_id in sorted(set(blocks) | set(metas)):
            found = metas.get(block_id, [])
            if block_id not in blocks:
                for meta, gs in found:
                    yield BlockFinding(
                        "META_WITHOUT_BLOCK", "a meta file without its block file", rel, meta,
                        block_id, gs,
                    )  # fmt: skip
                continue
            block, size = blocks[block_id]
            if not found:
                yield BlockFinding(
                    "BLOCK_WITHOUT_META",
                    "a block file without its meta file (the datanode loads it with "
                    "genstamp 0: \"does not have a metafile!\")",
                    rel, block, block_id,
                )  # fmt: skip
                continue
            if len(found) > 1:
                yield BlockFinding(
                    "DUPLICATE_META",
                    f"{len(found)} meta files for one block ("
                    + ", ".join(n for n, _ in found[:5])
                    + "): the datanode refuses it (\"Found more than one meta files\")",
                    rel, block, block_id,
                )  # fmt: skip
                continue
            meta, gs = found[0]
            if state == FINALIZED and rel != id_to_block_dir(block_id):
                yield BlockFinding(
                    "BLOCK_MISPLACED",
                    f"in {rel}, but its ID puts it in {id_to_block_dir(block_id)} "
                    f"(DatanodeUtil.idToBlockDir): HDFS's VolumeScanner skips it",
                    rel, block, block_id, gs,
                )  # fmt: skip
            yield Replica(pool, block_id, gs, state, rel, block, meta, size)
    finally:
        os.close(fd)
