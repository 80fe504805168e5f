"""The verifier: read a replica's blocks window by window, compare them with the recorded
checksums, build the scanned tree and merge it into the stored one (see merkle.replica.scan
for the rules and the findings). It reads through merkle.replica.files.ReplicaFiles, so the
same code verifies a crcmerkle replica, a local or remote one, and an Ozone replica (whose
ReplicaFiles loads the block metadata from the volume's RocksDB: `load_meta`).

`scan_container` is the local scan of a crcmerkle-layout replica (under its lock, writing its
`.tree`); `scan_files` the read-only scan of any ReplicaFiles, or with `metadata_only` the
census of one (merkle.replica.census): the same metadata checks and findings, no block file
opened, the chunks taken as the recorded checksums say. merkle.replica.scan re-exports every
public name.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

import numpy as np

from merkle import _native
from merkle.replica.also import (
    AlsoChecksums,
    check_algorithms,
    combine,
    concat,
    crc_function,
    dtype_of,
)
from merkle.replica.blocks import (
    CHECKSUM_SIZES,
    CRC32,
    CRC32C,
    NONE,
    SHA256,
    BlockMeta,
    ChunkMeta,
    ContainerMeta,
)
from merkle.replica.census import census_tree
from merkle.replica.errors import BlockMetaError, ReplicaError
from merkle.replica.files import BlockFile, LocalReplicaFiles, ReplicaFiles
from merkle.replica.lock import ReplicaLock
from merkle.replica.protokeep import rewritable
from merkle.replica.replicadir.blockmeta import decode_blockmeta
from merkle.replica.replicadir.paths import (
    META_SUFFIX,
    TREE_SUFFIX,
    ContainerPaths,
    container_paths,
    refuse_link,
)
from merkle.replica.results import (
    CORRUPT_CHUNK,
    INCONSISTENT_CHUNK_LENGTH,
    METADATA_CORRUPT,
    METADATA_MISSING,
    METADATA_UNREADABLE,
    METADATA_UNSUPPORTED,
    MISSING_CHUNK,
    MISSING_DATA_FILE,
    PROTECTED_ERRORS,
    TREE_CORRUPT,
    TREE_MISSING,
    TREE_UNREADABLE,
    TREE_UNSUPPORTED,
    UNREADABLE_DATA_FILE,
    RateLimiter,
    ScanError,
    ScanResult,
)
from merkle.replica.safeopen import NOT_A_REGULAR_FILE, FileTooLargeError, NotRegularFileError
from merkle.trees.merge import merge
from merkle.trees.model import ContainerTree
from merkle.trees.treefile import TreeFileError, tree_from_bytes, tree_to_bytes

__all__ = [
    "BlockCheckpoint",
    "BlockObservation",
    "block_from_record",
    "block_record",
    "healthy_tree",
    "replayed_result",
    "scanned_from_record",
    "scanned_record",
    "DEFAULT_BUFFER_SIZE",
    "READ_OPTIONS",
    "ProgressFn",
    "StoredTree",
    "read_stored_tree",
    "read_tree_state",
    "scan_container",
    "scan_files",
]

PathLike = Union[str, "os.PathLike[str]"]

#: Read size per worker, rounded down to whole windows. 256 KiB..4 MiB measured within the
#: noise of each other on a hot page cache (bench/test_bench_scan.py); 1 MiB stays in L2.
DEFAULT_BUFFER_SIZE = 1024 * 1024

#: the verifier's options scan_files takes (a read-only scan through ReplicaFiles): what a
#: layout's scan() passes on of the options a job gives it
READ_OPTIONS = ("workers", "limiter", "progress", "buffer_size", "drop_cache", "also", "checkpoint")

#: the page size the cache is dropped by (see _Reader._read)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

ProgressFn = Callable[[int], Any]


class BlockCheckpoint(Protocol):
    """Progress within a replica that outlives the process (`crcmerkle scan --state`:
    merkle.replica.incremental.StateTracker): the scan asks for the blocks an interrupted
    run already verified of the replica at `location` (their observations, which it uses
    instead of reading them again) and tells each block it has just read."""

    def blocks_done(self, location: str) -> Dict[int, BlockObservation]: ...

    def block_read(self, location: str, block: BlockObservation) -> None: ...


@dataclass
class _ChunkObs:
    offset: int
    length: int  # bytes observed
    leaf: int
    matches: bool
    #: --also: each algorithm's window values of the bytes read (merkle.replica.also)
    also: Optional[Dict[str, np.ndarray]] = None


@dataclass
class _BlockObs:
    block_id: int
    present: bool  # in the scanned tree: some chunk of it was scanned
    chunks: List[_ChunkObs] = field(default_factory=list)
    errors: List[ScanError] = field(default_factory=list)
    bytes_read: int = 0
    #: --also: each algorithm's whole-block value, when the block was read in full
    also: Dict[str, int] = field(default_factory=dict)


#: what a scan observed of one block, as a BlockCheckpoint keeps it
BlockObservation = _BlockObs


def block_record(ob: _BlockObs) -> Dict[str, Any]:
    """`ob` as JSON-ready data (a checkpoint's record; --also values are never kept: a scan
    with --also reads every block)."""
    return {
        "block_id": ob.block_id,
        "present": ob.present,
        "bytes_read": ob.bytes_read,
        "chunks": [[c.offset, c.length, c.leaf, c.matches] for c in ob.chunks],
        "errors": [e.to_dict() for e in ob.errors],
    }


def block_from_record(d: Any) -> Optional[_BlockObs]:
    """The observation block_record wrote, or None when `d` is not one (never trusted: the
    block is read again)."""
    try:
        out = _BlockObs(int(d["block_id"]), bool(d["present"]), bytes_read=int(d["bytes_read"]))
        for offset, length, leaf, matches in d["chunks"]:
            if not all(isinstance(v, int) for v in (offset, length, leaf)):
                return None
            out.chunks.append(_ChunkObs(offset, length, leaf, bool(matches)))
        for e in d["errors"]:
            out.errors.append(
                ScanError(
                    str(e["error"]),
                    e.get("block_id"),
                    e.get("offset"),
                    str(e.get("detail", "")),
                    str(e.get("severity", "")),
                )
            )
    except (KeyError, TypeError, ValueError):
        return None
    return out


class _Reader:
    """Per-thread reusable buffer and the read/verify loop of one block.

    The buffer is `buffer_size` bytes whatever the metadata says: windows larger than it are
    checksummed piecewise (CRC chained across reads, hash objects fed), so 84 bytes of hostile
    metadata declaring 4 GiB windows cost no more memory than honest ones. Block data is read
    with pread (a file that shrinks mid-scan gives a short read, reported, never SIGBUS: the
    scanner does not map files).

    With `drop_cache`, what was read of a block file is dropped from the page cache as soon
    as its bytes are in the buffer (the checksums are computed from the buffer, never from the
    cache), through the block file's `drop_cached` (merkle.replica.politeio.drop_cached on
    local descriptors; a file without one, read through pyarrow.fs, is left alone). Each drop
    covers the whole extent read so far, from the page the block's first read started in:
    the kernel drops only the cache folios wholly inside the range, and a large folio (ext4,
    XFS: up to 2 MiB) across the end of one read would otherwise stay cached; the folios
    already dropped cost nothing to ask again.

    With `also` (merkle.replica.also: `crcmerkle scan --also`), each read's windows are also
    checksummed with those algorithms from the same buffer (the chunk's own CRC and the
    first of them in one native call), and each block read in full gets its whole-block
    value combined from them: nothing is read twice. Chunks of type NONE are not read (as
    without it) and have no such values.
    """

    def __init__(
        self,
        buffer_size: int,
        limiter: Optional[RateLimiter],
        progress: Optional[ProgressFn],
        use_mmap: bool = False,
        *,
        drop_cache: bool = False,
        also: Sequence[str] = (),
    ) -> None:
        self.also = tuple(also)
        self.buffer = bytearray(max(buffer_size, 1))
        self.view = memoryview(self.buffer)
        self.limiter = limiter
        self.progress = progress
        self.drop_cache = drop_cache
        self._extent: Optional[Tuple[int, int]] = None  # what was read of the current block

    def _read(self, f: BlockFile, n: int, offset: int) -> int:
        if self.limiter is not None:
            self.limiter.acquire(n)
        got = f.pread_into(self.view[:n], offset)
        if self.drop_cache and got:
            drop = getattr(f, "drop_cached", None)
            if drop is not None:
                lo, hi = self._extent or (offset, offset + got)
                lo, hi = min(lo, offset), max(hi, offset + got)
                self._extent = (lo, hi)
                start = lo - lo % _PAGE  # the page the extent starts in (see the docstring)
                drop(start, hi - start)
        if self.progress is not None and got:
            self.progress(got)
        return got

    def _large_windows(
        self, f: BlockFile, c: ChunkMeta
    ) -> Tuple[int, Optional[np.ndarray], bool, Dict[str, np.ndarray]]:
        """Chunk `c` whose windows are larger than the buffer, one window at a time."""
        bpc = c.bytes_per_checksum
        crc_fn = {CRC32: _native.crc32, CRC32C: _native.crc32c}.get(c.checksum_type)
        also_fns = {a: crc_function(a) for a in self.also}
        algo = "sha256" if c.checksum_type == SHA256 else "md5"
        values: List[int] = []
        digests: List[bytes] = []
        also_values: Dict[str, List[int]] = {a: [] for a in self.also}
        got = 0
        short = False
        while got < c.length and not short:
            wlen = min(bpc, c.length - got)
            crc = 0
            extra = {a: 0 for a in self.also}
            h = None if crc_fn is not None else hashlib.new(algo)
            done = 0
            while done < wlen:
                want = min(len(self.buffer), wlen - done)
                n = self._read(f, want, c.offset + got + done)
                if n:
                    if crc_fn is not None:
                        crc = crc_fn(self.view[:n], crc)
                    else:
                        assert h is not None
                        h.update(self.view[:n])
                    for a, fn in also_fns.items():  # chained across the window's reads
                        extra[a] = fn(self.view[:n], extra[a])
                    done += n
                if n < want:
                    short = True
                    break
            if done:
                if crc_fn is not None:
                    values.append(crc)
                else:
                    assert h is not None
                    digests.append(h.digest())
                for a in self.also:
                    also_values[a].append(extra[a])
            got += done
        also = {a: np.array(v, dtype=dtype_of(a)) for a, v in also_values.items()}
        if crc_fn is not None:
            observed = np.array(values, dtype=np.uint32)
            stored = np.frombuffer(c.checksums, dtype=">u4", count=len(values))
            return got, observed, bool(np.any(observed != stored)), also
        obs = b"".join(digests)
        return (got, np.frombuffer(obs, dtype=np.uint8), obs != c.checksums[: len(obs)], also)

    def _also_windows(
        self,
        n: int,
        bpc: int,
        w: int,
        nw: int,
        own: Optional[str],
        observed: Optional[np.ndarray],
        extra: Dict[str, np.ndarray],
    ) -> None:
        """Checksum the windows of the `n` bytes in the buffer (windows w..w+nw of the
        chunk): the chunk's own CRC `own` into `observed` and every --also algorithm into
        `extra`, the own CRC and the first other one in one native call (one pass)."""
        view = self.view[:n]
        others = [a for a in extra if a != own]
        if own is not None and observed is not None:
            if others:
                _native.checksum_windows(
                    view,
                    bpc,
                    algorithm=(own, others[0]),
                    out=(observed[w : w + nw], extra[others[0]][w : w + nw]),
                )
                others = others[1:]
            else:
                _native.checksum_windows(view, bpc, algorithm=own, out=observed[w : w + nw])
        elif len(others) >= 2:  # SHA256/MD5 chunks: two of the --also CRCs in one pass
            _native.checksum_windows(
                view,
                bpc,
                algorithm=(others[0], others[1]),
                out=(extra[others[0]][w : w + nw], extra[others[1]][w : w + nw]),
            )
            others = others[2:]
        for a in others:
            _native.checksum_windows(view, bpc, algorithm=a, out=extra[a][w : w + nw])

    def chunk(
        self, f: BlockFile, c: ChunkMeta
    ) -> Tuple[int, Optional[np.ndarray], bool, Dict[str, np.ndarray]]:
        """Read chunk `c`; returns (bytes read, observed checksum bytes-or-values, mismatch,
        the --also algorithms' window values of what was read)."""
        size = CHECKSUM_SIZES[c.checksum_type]
        if c.checksum_type == NONE or size == 0:
            got = 0
            while got < c.length:
                want = min(len(self.buffer), c.length - got)
                n = self._read(f, want, c.offset + got)
                got += n
                if n < want:
                    break
            return got, None, False, {}
        bpc = c.bytes_per_checksum
        if bpc > len(self.buffer):
            return self._large_windows(f, c)
        piece = len(self.buffer) // bpc * bpc
        n_windows = -(-c.length // bpc)
        extra = {a: np.empty(n_windows, dtype=dtype_of(a)) for a in self.also}
        if c.checksum_type in (CRC32, CRC32C):
            alg = "crc32" if c.checksum_type == CRC32 else "crc32c"
            observed = np.empty(n_windows, dtype=np.uint32)
            got = w = 0
            while got < c.length:
                want = min(piece, c.length - got)
                n = self._read(f, want, c.offset + got)
                if n:
                    nw = -(-n // bpc)
                    self._also_windows(n, bpc, w, nw, alg, observed, extra)
                    w += nw
                    got += n
                if n < want:
                    break
            observed = observed[:w]
            stored = np.frombuffer(c.checksums, dtype=">u4", count=w)
            mismatch = bool(np.any(observed != stored))
            if alg in extra:  # the chunk's own CRC asked for: the observed values
                extra[alg][:w] = observed
            return got, observed, mismatch, {a: v[:w] for a, v in extra.items()}
        # SHA256 / MD5: one hashlib call per window (slow path, not Ozone's default)
        algo = "sha256" if c.checksum_type == SHA256 else "md5"
        parts: List[bytes] = []
        got = w = 0
        while got < c.length:
            want = min(piece, c.length - got)
            n = self._read(f, want, c.offset + got)
            for s in range(0, n, bpc):
                parts.append(hashlib.new(algo, self.view[s : min(s + bpc, n)]).digest())
            if n and extra:
                nw = -(-n // bpc)
                self._also_windows(n, bpc, w, nw, None, None, extra)
                w += nw
            got += n
            if n < want:
                break
        obs = b"".join(parts)
        mismatch = obs != c.checksums[: len(obs)]
        return (
            got,
            np.frombuffer(obs, dtype=np.uint8),
            mismatch,
            {a: v[:w] for a, v in extra.items()},
        )

    def _block_values(self, block: BlockMeta, chunks: List[_ChunkObs]) -> Dict[str, int]:
        """Each --also algorithm's value of the whole block, combined from the windows read
        (merkle.replica.also.concat), when every chunk was read to its recorded length and
        the chunks cover the block from 0 without a gap or overlap; else none."""
        if not chunks or len(chunks) != len(block.chunks):
            return {}  # a chunk not read (type NONE, an I/O error, missing)
        end = 0
        for c, ob in zip(block.chunks, chunks):
            if c.offset != end or ob.offset != c.offset or ob.length != c.length or ob.also is None:
                return {}
            end = c.end
        out: Dict[str, int] = {}
        for a in self.also:
            crc: Optional[int] = None
            for c, ob in zip(block.chunks, chunks):
                assert ob.also is not None
                if c.length == 0:
                    continue
                bpc = c.bytes_per_checksum
                v = concat(a, ob.also[a], bpc, c.length - (-(-c.length // bpc) - 1) * bpc)
                crc = v if crc is None else combine(a, crc, v, c.length)
            out[a] = 0 if crc is None else crc
        return out

    def block(self, files: ReplicaFiles, block: BlockMeta) -> _BlockObs:
        out = _BlockObs(block.block_id, present=False)
        self._extent = None
        if not block.chunks:
            return out  # nothing to scan: not in the scanner's tree (Ozone)
        try:
            f = files.open_block(block.block_id)
        except FileNotFoundError:
            if block.chunks[0].length > 0:  # Ozone: an EC padding block may have no file
                out.errors.append(
                    ScanError(
                        MISSING_DATA_FILE,
                        block.block_id,
                        None,
                        f"{files.block_name(block.block_id)} does not exist",
                    )
                )
            return out
        except NotRegularFileError as exc:
            out.present = False
            out.errors.append(
                ScanError(
                    NOT_A_REGULAR_FILE, block.block_id, None, f"{exc.filename}: {exc.strerror}"
                )
            )
            return out
        except OSError as exc:
            out.errors.append(
                ScanError(UNREADABLE_DATA_FILE, block.block_id, None, exc.strerror or str(exc))
            )
            return out
        try:
            for c in block.chunks:
                if c.checksum_type == NONE:
                    continue  # Ozone's scanner skips them: not read, not in the tree
                out.present = True  # a chunk is scanned: the block is in the tree
                if c.length == 0:
                    out.chunks.append(
                        _ChunkObs(
                            c.offset,
                            0,
                            c.leaf,
                            True,
                            {a: np.zeros(0, dtype_of(a)) for a in self.also} if self.also else None,
                        )
                    )
                    continue
                try:
                    got, observed, mismatch, also = self.chunk(f, c)
                except OSError as exc:
                    out.errors.append(
                        ScanError(
                            UNREADABLE_DATA_FILE, block.block_id, c.offset, exc.strerror or str(exc)
                        )
                    )
                    continue
                out.bytes_read += got
                if got == 0:
                    out.errors.append(
                        ScanError(
                            MISSING_CHUNK,
                            block.block_id,
                            c.offset,
                            f"no data at {c.offset} (expected {c.length} bytes)",
                        )
                    )
                    continue
                if observed is None:  # type NONE: only the length can be checked
                    leaf = 0
                elif observed.dtype == np.uint32:
                    leaf = (
                        c.leaf
                        if not mismatch and got == c.length
                        else _native.crc32c(observed.astype(">u4").tobytes())
                    )
                else:
                    leaf = _native.crc32c(observed.tobytes())
                healthy = not mismatch and got == c.length
                out.chunks.append(
                    _ChunkObs(c.offset, got, leaf, healthy, also if self.also else None)
                )
                if mismatch:
                    out.errors.append(
                        ScanError(
                            CORRUPT_CHUNK,
                            block.block_id,
                            c.offset,
                            "window checksum mismatch"
                            + (
                                f" (short read: {got} of {c.length} bytes)"
                                if got < c.length
                                else ""
                            ),
                        )
                    )
                elif got < c.length:
                    out.errors.append(
                        ScanError(
                            INCONSISTENT_CHUNK_LENGTH,
                            block.block_id,
                            c.offset,
                            f"{got} of {c.length} bytes",
                        )
                    )
        finally:
            f.close()
        if self.also:
            out.also = self._block_values(block, out.chunks)
        return out


def _recorded_block(block: BlockMeta) -> _BlockObs:
    """What _Reader.block observes of `block` when its file is there and every chunk matches
    its recorded checksums, without opening the file (the census): the same chunks (type NONE
    skipped), recorded lengths and leaves, all healthy."""
    out = _BlockObs(block.block_id, present=False)
    for c in block.chunks:
        if c.checksum_type == NONE:
            continue
        out.present = True
        out.chunks.append(_ChunkObs(c.offset, c.length, c.leaf, True))
    return out


def healthy_tree(meta: ContainerMeta) -> ContainerTree:
    """The tree a data scan of the replica `meta` describes builds when every block file is
    there and every chunk matches its recorded checksums (`scanned` of a clean scan)."""
    return _observed_tree(meta.container_id, [_recorded_block(b) for b in meta.sorted_blocks()])


def scanned_record(result: ScanResult) -> Dict[str, Any]:
    """What a later run needs to give `result.scanned` again without reading the data (a
    `--state` record): nothing more when it is the healthy tree of its block metadata (a
    clean replica: the metadata, whose identity the state checks, tells it), else the tree
    itself (a replica with findings: rare, and as large as its chunks)."""
    if result.meta is not None and result.scanned == healthy_tree(result.meta):
        return {"scanned": "healthy"}
    return {"scanned": base64.b64encode(tree_to_bytes(result.scanned)).decode("ascii")}


def scanned_from_record(record: Dict[str, Any], meta: ContainerMeta) -> Optional[ContainerTree]:
    """The `scanned` tree scanned_record kept, for the replica whose block metadata is
    `meta` now (its identity unchanged); None when the record holds none or it does not
    parse (the replica is read again)."""
    kept = record.get("scanned")
    if kept == "healthy":
        return healthy_tree(meta)
    if not isinstance(kept, str):
        return None
    try:
        tree = tree_from_bytes(base64.b64decode(kept, validate=True))
    except (ValueError, TreeFileError):
        return None
    return tree if tree.container_id == meta.container_id else None


def replayed_result(
    files: ReplicaFiles,
    meta: ContainerMeta,
    scanned: ContainerTree,
    errors: List[ScanError],
    resumed_bytes: int,
) -> ScanResult:
    """The result of a replica not read again (`--state`: verified, identity unchanged):
    its last read's findings and scanned tree, merged into the stored tree as it is now, as
    the data scan merges them; no byte read (`resumed_bytes`: what the last read read)."""
    t0 = time.perf_counter()
    state = read_tree_state(files)
    blocks = meta.sorted_blocks()
    return ScanResult(
        path=files.location,
        container_id=files.container_id,
        errors=list(errors),
        scanned=scanned,
        tree=merge(state.tree, scanned),
        meta=meta,
        bytes_read=0,
        resumed_bytes=resumed_bytes,
        blocks=len(blocks),
        chunks=sum(len(b.chunks) for b in blocks),
        seconds=time.perf_counter() - t0,
    )


def _observed_tree(container_id: int, observations: Iterable[_BlockObs]) -> ContainerTree:
    bids: List[int] = []
    offs: List[int] = []
    lens: List[int] = []
    leaves: List[int] = []
    matches: List[bool] = []
    present: List[int] = []
    for b in observations:
        if not b.present:
            continue
        present.append(b.block_id)
        for c in b.chunks:
            bids.append(b.block_id)
            offs.append(c.offset)
            lens.append(c.length)
            leaves.append(c.leaf)
            matches.append(c.matches)
    return ContainerTree.from_columns(
        container_id,
        bids,
        offs,
        lens,
        leaf=np.array(leaves, dtype=np.int64),
        checksum_matches=np.array(matches, dtype=bool),
        empty_blocks=present or None,
    )


@dataclass
class StoredTree:
    """The stored `.tree` as read: the tree (None if absent/unusable), its raw bytes, the
    error to report, whether a rewrite may replace it, and its unknown top-level protobuf
    fields (merkle.replica.protokeep; the tree itself carries them too, in
    ContainerTree.unknown_fields, and writes them back after field 2 as Ozone does)."""

    tree: Optional[ContainerTree]
    raw: Optional[bytes]
    error: Optional[ScanError]
    writable: bool = True
    keep: bytes = b""


def read_tree_state(files: ReplicaFiles) -> StoredTree:
    """Read the stored `.tree` (see StoredTree). An I/O error (EACCES, EIO, too large) is
    TREE_UNREADABLE and a link/FIFO/... NOT_A_REGULAR_FILE, never corruption: not writable."""
    name = f"{files.container_id}{TREE_SUFFIX}"
    try:
        raw = files.read_tree()
    except FileNotFoundError:
        return StoredTree(None, None, ScanError(TREE_MISSING, detail=f"{name} does not exist"))
    except NotRegularFileError as exc:
        return StoredTree(
            None,
            None,
            ScanError(NOT_A_REGULAR_FILE, detail=f"{exc.filename}: {exc.strerror}"),
            writable=False,
        )
    except (OSError, FileTooLargeError) as exc:
        return StoredTree(
            None,
            None,
            ScanError(TREE_UNREADABLE, detail=f"{name}: {exc.strerror or exc}"),
            writable=False,
        )
    try:
        tree = tree_from_bytes(raw, source=f"{files.location}/metadata/{name}")
    except TreeFileError as exc:
        return StoredTree(None, raw, ScanError(TREE_CORRUPT, detail=exc.reason))
    if tree.container_id != files.container_id:
        return StoredTree(
            None, raw, ScanError(TREE_CORRUPT, detail=f"tree is of container {tree.container_id}")
        )
    ok, keep = rewritable(raw, lambda known: tree_to_bytes(tree_from_bytes(known)))
    if not ok:
        return StoredTree(
            tree,
            raw,
            ScanError(
                TREE_UNSUPPORTED,
                detail=f"{name} holds fields this crcmerkle does not understand: not rewritten",
            ),
            writable=False,
        )
    return StoredTree(tree, raw, None, True, keep)


def read_stored_tree(
    files: ReplicaFiles,
) -> Tuple[Optional[ContainerTree], Optional[bytes], Optional[ScanError]]:
    """(stored tree, its raw bytes, None), or (None, raw bytes or None, the error) when the
    `.tree` is absent, unreadable, corrupt or foreign (see read_tree_state)."""
    st = read_tree_state(files)
    if st.error is not None and st.error.kind == TREE_UNSUPPORTED:
        return st.tree, st.raw, None  # readable: only a rewrite would lose something
    return st.tree, st.raw, st.error


def scan_container(
    path: PathLike,
    *,
    write_tree: bool = True,
    workers: int = 1,
    bytes_per_second: Optional[float] = None,
    limiter: Optional[RateLimiter] = None,
    progress: Optional[ProgressFn] = None,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    lock: bool = True,
    use_mmap: bool = False,
    drop_cache: bool = False,
    also: Sequence[str] = (),
    checkpoint: Optional[BlockCheckpoint] = None,
) -> ScanResult:
    """Scan one replica (see the module docstring) and return what was found.

    write_tree: store the merged tree (atomically, only if it changed); False for a
      read-only check (no lock is taken then).
    workers: threads scanning blocks in parallel (each with its own `buffer_size` buffer).
    bytes_per_second / limiter: pace reads (a limiter may be shared by a volume's scans).
    progress: called with the byte count of every read (e.g. a tqdm bar's update).
    lock: take the replica lock while writing (reconcile, which holds it, passes False).
    use_mmap: accepted for compatibility and ignored: block files are always read with pread,
      since a mapped file that shrinks mid-scan kills the process with SIGBUS.
    drop_cache: drop each range read from the page cache once its bytes are in the buffer
      (POSIX_FADV_DONTNEED, merkle.replica.politeio.drop_cached): a scan of a live datanode
      then leaves the cache that serves its clients as it was. Off by default here (a
      library caller, a benchmark, may scan the same data twice); `crcmerkle scan` turns it
      on unless --keep-cache.
    also: more CRCs to compute from the bytes read (merkle.replica.also.ALSO_ALGORITHMS:
      crc64nvme, crc32c, crc32): each chunk's windows and each block read in full, in
      ScanResult.also (`crcmerkle scan --also`); nothing is read twice.
    checkpoint: progress within the replica that outlives the process (BlockCheckpoint):
      the blocks it holds as verified are not read again (their bytes are the result's
      `resumed_bytes`), each block read is told to it; not used with `also`.
    """
    also = check_algorithms(also)
    paths = container_paths(path)
    refuse_link(path)  # never scanned, locked or written through a link
    if not paths.root.is_dir():
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    if paths.container_id >= 1 << 63:
        raise ReplicaError("container ID above 2**63-1", os.fspath(path))
    if limiter is None and bytes_per_second:
        limiter = RateLimiter(bytes_per_second)
    held = ReplicaLock(paths) if (write_tree and lock) else None
    if held is not None:
        held.acquire()
    try:
        return _scan(
            paths,
            write_tree,
            max(1, int(workers)),
            limiter,
            progress,
            buffer_size,
            use_mmap,
            drop_cache=drop_cache,
            also=also,
            checkpoint=checkpoint,
        )
    finally:
        if held is not None:
            held.release()


def scan_files(
    files: ReplicaFiles,
    *,
    workers: int = 1,
    limiter: Optional[RateLimiter] = None,
    progress: Optional[ProgressFn] = None,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    metadata_only: bool = False,
    drop_cache: bool = False,
    also: Sequence[str] = (),
    checkpoint: Optional[BlockCheckpoint] = None,
) -> ScanResult:
    """Scan a replica read through `files` (merkle.replica.files: a local directory, or a
    remote store as merkle.replica.crcmerkle.remote provides) without writing anything: the
    same checks, errors and trees as scan_container(..., write_tree=False). `drop_cache`: as
    scan_container's (block files read through local descriptors only); `also` and
    `checkpoint`: as scan_container's (ignored by the census, which reads no data).

    metadata_only: the census (merkle.replica.census): the block metadata is read and
    checked as by the scan, no block file is opened (bytes_read 0), and the tree is the
    stored `.tree` when it still describes the metadata, else the scan's tree if every chunk
    matched (with TREE_STALE when the stored one was not trusted, and TREE_FROM_METADATA)."""
    return _scan(
        files,
        False,
        max(1, int(workers)),
        limiter,
        progress,
        buffer_size,
        metadata_only=metadata_only,
        drop_cache=drop_cache,
        also=check_algorithms(also),
        checkpoint=checkpoint,
    )


def _scan(
    source: Union[ContainerPaths, ReplicaFiles],
    write: bool,
    workers: int,
    limiter: Optional[RateLimiter],
    progress: Optional[ProgressFn],
    buffer_size: int,
    use_mmap: bool = False,
    metadata_only: bool = False,
    *,
    drop_cache: bool = False,
    also: Sequence[str] = (),
    checkpoint: Optional[BlockCheckpoint] = None,
) -> ScanResult:
    """The scan itself; writing the merged tree needs a local replica (ContainerPaths)."""
    files = LocalReplicaFiles(source) if isinstance(source, ContainerPaths) else source
    try:
        return _scan_files(
            files,
            write and not metadata_only,
            workers,
            limiter,
            progress,
            buffer_size,
            metadata_only,
            drop_cache,
            also,
            checkpoint,
        )
    finally:
        if isinstance(source, ContainerPaths):
            assert isinstance(files, LocalReplicaFiles)
            files.close()


def _scan_files(
    files: ReplicaFiles,
    write: bool,
    workers: int,
    limiter: Optional[RateLimiter],
    progress: Optional[ProgressFn],
    buffer_size: int,
    metadata_only: bool = False,
    drop_cache: bool = False,
    also: Sequence[str] = (),
    checkpoint: Optional[BlockCheckpoint] = None,
) -> ScanResult:
    t0 = time.perf_counter()
    errors: List[ScanError] = []
    meta: Optional[ContainerMeta]
    meta_name = f"{files.location}/metadata/{files.container_id}{META_SUFFIX}"
    # a layout that keeps block metadata elsewhere (Ozone: the volume's RocksDB) loads it
    load_meta = getattr(files, "load_meta", None)
    try:
        if load_meta is not None:
            meta = load_meta()
        else:
            try:
                raw_meta = files.read_blockmeta()
            except FileNotFoundError:
                raise BlockMetaError(
                    "block-metadata file is missing", meta_name, missing=True
                ) from None
            meta = decode_blockmeta(raw_meta, meta_name, files.container_id)
    except BlockMetaError as exc:
        meta = None
        reason = str(exc)[len(str(exc.path)) + 2 :] if exc.path else str(exc)
        kind = (
            METADATA_MISSING
            if exc.missing
            else METADATA_UNSUPPORTED
            if exc.unsupported
            else METADATA_CORRUPT
        )
        errors.append(ScanError(kind, detail=reason))
    except NotRegularFileError as exc:
        meta = None
        errors.append(ScanError(NOT_A_REGULAR_FILE, detail=f"{exc.filename}: {exc.strerror}"))
    except OSError as exc:  # EACCES, EIO, above the size cap: an I/O error, not corruption
        meta = None
        errors.append(ScanError(METADATA_UNREADABLE, detail=f"{meta_name}: {exc.strerror or exc}"))
    blocks = meta.sorted_blocks() if meta is not None else []
    if metadata_only or also or len({b.block_id for b in blocks}) != len(blocks):
        checkpoint = None  # a block ID listed twice: nothing to key a block's progress by
    resumed = checkpoint.blocks_done(files.location) if checkpoint is not None else {}

    def observe(reader: _Reader, b: BlockMeta) -> _BlockObs:
        ob = resumed.get(b.block_id)
        if ob is not None:
            return ob
        ob = reader.block(files, b)
        if checkpoint is not None:
            checkpoint.block_read(files.location, ob)
        return ob

    if metadata_only:  # the census: no block file is opened
        observations = [_recorded_block(b) for b in blocks]
    elif workers > 1 and len(blocks) > 1:
        local = threading.local()

        def one(b: BlockMeta) -> _BlockObs:
            reader = getattr(local, "reader", None)
            if reader is None:
                reader = local.reader = _Reader(
                    buffer_size, limiter, progress, drop_cache=drop_cache, also=also
                )
            return observe(reader, b)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            observations = list(pool.map(one, blocks))
    else:
        reader = _Reader(buffer_size, limiter, progress, drop_cache=drop_cache, also=also)
        observations = [observe(reader, b) for b in blocks]
    resumed_bytes = sum(o.bytes_read for o in observations if resumed.get(o.block_id) is o)
    for ob in observations:
        errors.extend(ob.errors)
    scanned = _observed_tree(files.container_id, observations)
    state = read_tree_state(files)
    stored = state.tree
    if state.error is not None and state.error not in errors:  # not twice for one cause
        errors.insert(0, state.error)
    if metadata_only:
        merged, notes = census_tree(stored, scanned, meta is not None)
        errors.extend(notes)
    else:
        merged = merge(stored, scanned)
    written = False
    protected = any(e.kind in PROTECTED_ERRORS and e.block_id is None for e in errors)
    if write and not protected and state.writable:
        if not isinstance(files, LocalReplicaFiles):
            raise ValueError("only a local replica's tree can be written")
        data = tree_to_bytes(merged)  # carries the stored tree's unknown top-level fields
        if data != state.raw:
            files.write_metadata(TREE_SUFFIX, data)
            written = True
    return ScanResult(
        path=files.location,
        container_id=files.container_id,
        errors=errors,
        scanned=scanned,
        tree=merged,
        meta=meta,
        bytes_read=sum(o.bytes_read for o in observations) - resumed_bytes,
        resumed_bytes=resumed_bytes,
        blocks=len(blocks),
        chunks=sum(len(b.chunks) for b in blocks),
        seconds=time.perf_counter() - t0,
        tree_written=written,
        also={} if metadata_only else _also_values(also, observations),
    )


def _also_values(also: Sequence[str], observations: List[_BlockObs]) -> Dict[str, AlsoChecksums]:
    """The --also values of a scan's observations, by algorithm (merkle.replica.also)."""
    return {
        a: AlsoChecksums.collect(
            a,
            [
                (b.block_id, c.offset, c.also[a])
                for b in observations
                for c in b.chunks
                if c.also is not None
            ],
            [(b.block_id, b.also[a]) for b in observations if a in b.also],
        )
        for a in also
    }
