"""The replica scanner: verify a replica's data against its recorded checksums, keep its
`.tree` current, and report what is wrong (Ozone's on-demand/background container scanner).

For each block in the metadata, each chunk is read window-aligned into one reused buffer per
worker (os.preadv, large sequential reads of `buffer_size`), its windows are checksummed in
one native call per read with the chunk's own type (`checksum_windows(..., out=...)`), and the
observed checksums are compared with the recorded ones in one numpy comparison. The tree is
Ozone's scanner tree (KeyValueContainerCheck): built from the *observed* checksums (corruption
changes the leaf and everything above it), with `checksum_matches` false unless every window
and the length match; chunks of checksum type NONE are skipped (neither read nor in the tree),
and a block is in the tree only if at least one of its chunks was scanned (a block without
chunks, or with only NONE chunks, is left out). It is then merged into the stored tree
(tombstones win, live blocks the scan left out are dropped; merkle.trees.merge.merge) and
written atomically when it changed. The tree built from metadata alone (every recorded chunk,
empty blocks included) is what the replica writer stores when it closes a container, as Ozone
does at container close.

Findings (ScanError.kind), each an `error` or a `warning` (ScanError.severity; the table and
the reasons are in merkle.replica.levels: TREE_MISSING, TREE_CORRUPT and TREE_UNSUPPORTED are
warnings, the derived `.tree` being rebuilt from verified data; the others are errors):
  CORRUPT_CHUNK              a window checksum differs (also a short chunk whose partial last
                             window differs)
  INCONSISTENT_CHUNK_LENGTH  fewer bytes than recorded, every window read matching
  MISSING_CHUNK              no byte of the chunk in the file (no leaf in the tree)
  MISSING_DATA_FILE          the block file does not exist and its first chunk has a length > 0
                             (block absent from the tree; Ozone: EC padding blocks may have
                             no file)
  UNREADABLE_DATA_FILE       the block file exists but cannot be opened/read (I/O error)
  NOT_A_REGULAR_FILE         a link, directory, FIFO, socket or device where a block file,
                             `chunks/`, `metadata/`, `.blocks` or `.tree` should be: never
                             followed, read or written (merkle.replica.safeopen)
  METADATA_MISSING / METADATA_CORRUPT   the `.blocks` file; nothing can be verified, so the
                             scanned tree has no live blocks (reconcile then pulls them back)
  METADATA_UNREADABLE        an I/O error (EACCES, EIO) or a file above the size cap: not
                             corruption; the tree is not rewritten and reconcile refuses
  METADATA_UNSUPPORTED       a `.blocks` of a newer format version: never rewritten
  TREE_MISSING / TREE_CORRUPT           the stored `.tree` (rebuilt from the scan; tombstones
                             it held are lost and must come back from peers)
  TREE_UNREADABLE            an I/O error or a file above the size cap: the `.tree` is left
                             alone (its tombstones are not lost), reconcile refuses
  TREE_UNSUPPORTED           fields nested in the tree that this version does not understand:
                             not rewritten (unknown top-level fields are kept on rewrite)

Whenever one of the last group is reported (or the `.tree`/`.blocks` is not a regular file),
the scan writes nothing: an error we do not understand is never "repaired" by a rewrite.

Memory never depends on a number read from a file: reads use one buffer of `buffer_size` per
worker, and windows larger than it are checksummed piecewise by chaining the CRC (or feeding
the hash) across reads.

Windows of SHA256/MD5 chunks are checked with hashlib one window at a time (a slow path; Ozone
and the generator default to CRC32). Optional worker threads scan blocks in parallel (the GIL
is released while reading and checksumming) and an optional per-volume byte rate limit paces
reads, as Ozone's scanner does (5 MiB/s per volume by default there; unlimited here).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from merkle import _native
from merkle.replica.crcmerkle.blockmeta import (CHECKSUM_SIZES, CRC32, CRC32C, NONE, SHA256,
                                                BlockMeta, ChunkMeta, ContainerMeta,
                                                decode_blockmeta)
from merkle.trees.ozone import format_checksum
from merkle.replica.errors import BlockMetaError, ReplicaError
from merkle.replica.files import BlockFile, LocalReplicaFiles, ReplicaFiles
from merkle.replica.protokeep import rewritable
from merkle.replica.safeopen import NOT_A_REGULAR_FILE, FileTooLargeError, NotRegularFileError
from merkle.replica.crcmerkle.layout import (META_SUFFIX, TREE_SUFFIX, ContainerPaths,
                                             ReplicaLocation, container_paths, find_containers,
                                             refuse_link)
from merkle.replica.levels import WARNING, counts_as_failure, severity_of
from merkle.replica.lock import ReplicaLock
from merkle.trees.model import ContainerTree
from merkle.trees.treefile import TreeFileError, tree_from_bytes, tree_to_bytes
from merkle.trees.merge import merge

__all__ = ["CORRUPT_CHUNK", "INCONSISTENT_CHUNK_LENGTH", "METADATA_CORRUPT",
           "METADATA_MISSING", "METADATA_UNREADABLE", "METADATA_UNSUPPORTED", "MISSING_CHUNK",
           "MISSING_DATA_FILE", "NOT_A_REGULAR_FILE", "PROTECTED_ERRORS", "RateLimiter",
           "ScanError", "ScanResult", "StoredTree", "TREE_CORRUPT", "TREE_MISSING",
           "TREE_UNREADABLE", "TREE_UNSUPPORTED", "UNREADABLE_DATA_FILE", "read_stored_tree",
           "read_tree_state", "scan_container", "scan_files", "scan_paths"]

PathLike = Union[str, "os.PathLike[str]"]

CORRUPT_CHUNK = "CORRUPT_CHUNK"
MISSING_CHUNK = "MISSING_CHUNK"
INCONSISTENT_CHUNK_LENGTH = "INCONSISTENT_CHUNK_LENGTH"
MISSING_DATA_FILE = "MISSING_DATA_FILE"
UNREADABLE_DATA_FILE = "UNREADABLE_DATA_FILE"
METADATA_MISSING = "METADATA_MISSING"
METADATA_CORRUPT = "METADATA_CORRUPT"
TREE_MISSING = "TREE_MISSING"
TREE_CORRUPT = "TREE_CORRUPT"
METADATA_UNREADABLE = "METADATA_UNREADABLE"
METADATA_UNSUPPORTED = "METADATA_UNSUPPORTED"
TREE_UNREADABLE = "TREE_UNREADABLE"
TREE_UNSUPPORTED = "TREE_UNSUPPORTED"
#: container-level errors after which nothing is written (see the module docstring)
PROTECTED_ERRORS = frozenset({METADATA_UNREADABLE, METADATA_UNSUPPORTED, TREE_UNREADABLE,
                              TREE_UNSUPPORTED, NOT_A_REGULAR_FILE})

#: Read size per worker, rounded down to whole windows. 256 KiB..4 MiB measured within the
#: noise of each other on a hot page cache (bench/test_bench_scan.py); 1 MiB stays in L2.
DEFAULT_BUFFER_SIZE = 1024 * 1024

ProgressFn = Callable[[int], Any]


@dataclass(frozen=True)
class ScanError:
    """One problem found by the scanner. `block_id`/`offset` are None for container-level
    (metadata, tree) errors; `offset` is the chunk's offset for chunk errors. `severity` is
    `error` or `warning` (merkle.replica.levels: the kind's level unless given, e.g. for a
    case of the kind the table lists apart); a warning leaves the replica ok."""

    kind: str
    block_id: Optional[int] = None
    offset: Optional[int] = None
    detail: str = ""
    severity: str = ""

    def __post_init__(self) -> None:
        if not self.severity:
            object.__setattr__(self, "severity", severity_of(self.kind))

    @property
    def is_warning(self) -> bool:
        return self.severity == WARNING

    @property
    def key(self) -> Tuple[str, Optional[int], Optional[int]]:
        """What identifies the finding (compared with a generator manifest)."""
        return (self.kind, self.block_id, self.offset)

    def to_dict(self) -> Dict[str, Any]:
        return {"error": self.kind, "block_id": self.block_id, "offset": self.offset,
                "detail": self.detail, "severity": self.severity}

    def __str__(self) -> str:
        where = ""
        if self.block_id is not None:
            where = f" block {self.block_id}"
            if self.offset is not None:
                where += f" chunk @{self.offset}"
        return f"{self.kind}{where}{': ' + self.detail if self.detail else ''}"


@dataclass
class ScanResult:
    """What one scan of one replica found and produced."""

    path: str
    container_id: int
    errors: List[ScanError]
    #: the tree built from the observed data alone
    scanned: ContainerTree
    #: scanned merged into the stored tree: what is (or, without writing, would be) stored
    tree: ContainerTree
    meta: Optional[ContainerMeta]
    bytes_read: int = 0
    blocks: int = 0
    chunks: int = 0
    seconds: float = 0.0
    tree_written: bool = False

    @property
    def ok(self) -> bool:
        """No error-level finding (warnings leave a replica ok; see merkle.replica.levels)."""
        return not any(counts_as_failure(e.severity) for e in self.errors)

    @property
    def warnings(self) -> List[ScanError]:
        """The warning-level findings (reported; they do not make the replica bad)."""
        return [e for e in self.errors if e.is_warning]

    def ok_at(self, strict: bool = False) -> bool:
        """`ok`, or with `strict` (--strict) no finding at all, warnings included."""
        return not any(counts_as_failure(e.severity, strict) for e in self.errors)

    @property
    def protected(self) -> bool:
        """A container-level error after which nothing may be written to this replica."""
        return any(e.kind in PROTECTED_ERRORS and e.block_id is None for e in self.errors)

    def error_keys(self) -> List[Tuple[str, Optional[int], Optional[int]]]:
        return sorted((e.key for e in self.errors), key=lambda k: (k[0], k[1] or 0, k[2] or 0))

    def to_dict(self, strict: bool = False) -> Dict[str, Any]:
        """JSON-ready; `errors` lists every finding, each with its `severity`; `ok` follows
        `strict` (ok_at), `warnings` counts the warning-level findings."""
        value = self.tree.data_checksum
        return {
            "path": self.path, "container_id": self.container_id, "ok": self.ok_at(strict),
            "data_checksum": None if value is None else format_checksum(value),
            "errors": [e.to_dict() for e in self.errors],
            "warnings": len(self.warnings),
            "blocks": self.blocks, "chunks": self.chunks, "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 6), "tree_written": self.tree_written,
            "unhealthy_chunks": int((~self.tree.chunk_matches).sum()),
        }


class RateLimiter:
    """Paces reads to `bytes_per_second` (shared by every scan of one volume, thread-safe).

    Each read is granted a start time right after the previous grant's share of the budget,
    so the long-run rate is the limit and no thread busy-waits.
    """

    def __init__(self, bytes_per_second: float) -> None:
        if bytes_per_second <= 0:
            raise ValueError("bytes_per_second must be > 0")
        self.rate = float(bytes_per_second)
        self._lock = threading.Lock()
        self._next = time.monotonic()

    def acquire(self, nbytes: int) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + nbytes / self.rate
        if start > now:
            time.sleep(start - now)


@dataclass
class _ChunkObs:
    offset: int
    length: int  # bytes observed
    leaf: int
    matches: bool


@dataclass
class _BlockObs:
    block_id: int
    present: bool  # in the scanned tree: some chunk of it was scanned
    chunks: List[_ChunkObs] = field(default_factory=list)
    errors: List[ScanError] = field(default_factory=list)
    bytes_read: int = 0


class _Reader:
    """Per-thread reusable buffer and the read/verify loop of one block.

    The buffer is `buffer_size` bytes whatever the metadata says: windows larger than it are
    checksummed piecewise (CRC chained across reads, hash objects fed), so 84 bytes of hostile
    metadata declaring 4 GiB windows cost no more memory than honest ones. Block data is read
    with pread (a file that shrinks mid-scan gives a short read, reported, never SIGBUS: the
    scanner does not map files).
    """

    def __init__(self, buffer_size: int, limiter: Optional[RateLimiter],
                 progress: Optional[ProgressFn], use_mmap: bool = False) -> None:
        self.buffer = bytearray(max(buffer_size, 1))
        self.view = memoryview(self.buffer)
        self.limiter = limiter
        self.progress = progress

    def _read(self, f: BlockFile, n: int, offset: int) -> int:
        if self.limiter is not None:
            self.limiter.acquire(n)
        got = f.pread_into(self.view[:n], offset)
        if self.progress is not None and got:
            self.progress(got)
        return got

    def _large_windows(self, f: BlockFile, c: ChunkMeta
                       ) -> Tuple[int, Optional[np.ndarray], bool]:
        """Chunk `c` whose windows are larger than the buffer, one window at a time."""
        bpc = c.bytes_per_checksum
        crc_fn = {CRC32: _native.crc32, CRC32C: _native.crc32c}.get(c.checksum_type)
        algo = "sha256" if c.checksum_type == SHA256 else "md5"
        values: List[int] = []
        digests: List[bytes] = []
        got = 0
        short = False
        while got < c.length and not short:
            wlen = min(bpc, c.length - got)
            crc = 0
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
            got += done
        if crc_fn is not None:
            observed = np.array(values, dtype=np.uint32)
            stored = np.frombuffer(c.checksums, dtype=">u4", count=len(values))
            return got, observed, bool(np.any(observed != stored))
        obs = b"".join(digests)
        return got, np.frombuffer(obs, dtype=np.uint8), obs != c.checksums[:len(obs)]

    def chunk(self, f: BlockFile, c: ChunkMeta) -> Tuple[int, Optional[np.ndarray], bool]:
        """Read chunk `c`; returns (bytes read, observed checksum bytes-or-values, mismatch)."""
        size = CHECKSUM_SIZES[c.checksum_type]
        if c.checksum_type == NONE or size == 0:
            got = 0
            while got < c.length:
                want = min(len(self.buffer), c.length - got)
                n = self._read(f, want, c.offset + got)
                got += n
                if n < want:
                    break
            return got, None, False
        bpc = c.bytes_per_checksum
        if bpc > len(self.buffer):
            return self._large_windows(f, c)
        piece = len(self.buffer) // bpc * bpc
        n_windows = -(-c.length // bpc)
        if c.checksum_type in (CRC32, CRC32C):
            alg = "crc32" if c.checksum_type == CRC32 else "crc32c"
            observed = np.empty(n_windows, dtype=np.uint32)
            got = w = 0
            while got < c.length:
                want = min(piece, c.length - got)
                n = self._read(f, want, c.offset + got)
                if n:
                    nw = -(-n // bpc)
                    _native.checksum_windows(self.view[:n], bpc, algorithm=alg,
                                             out=observed[w:w + nw])
                    w += nw
                    got += n
                if n < want:
                    break
            observed = observed[:w]
            stored = np.frombuffer(c.checksums, dtype=">u4", count=w)
            mismatch = bool(np.any(observed != stored))
            return got, observed, mismatch
        # SHA256 / MD5: one hashlib call per window (slow path, not Ozone's default)
        algo = "sha256" if c.checksum_type == SHA256 else "md5"
        parts: List[bytes] = []
        got = 0
        while got < c.length:
            want = min(piece, c.length - got)
            n = self._read(f, want, c.offset + got)
            for s in range(0, n, bpc):
                parts.append(hashlib.new(algo, self.view[s:min(s + bpc, n)]).digest())
            got += n
            if n < want:
                break
        obs = b"".join(parts)
        mismatch = obs != c.checksums[:len(obs)]
        return got, np.frombuffer(obs, dtype=np.uint8), mismatch

    def block(self, files: ReplicaFiles, block: BlockMeta) -> _BlockObs:
        out = _BlockObs(block.block_id, present=False)
        if not block.chunks:
            return out  # nothing to scan: not in the scanner's tree (Ozone)
        try:
            f = files.open_block(block.block_id)
        except FileNotFoundError:
            if block.chunks[0].length > 0:  # Ozone: an EC padding block may have no file
                out.errors.append(ScanError(MISSING_DATA_FILE, block.block_id, None,
                                            f"{files.block_name(block.block_id)} does not exist"))
            return out
        except NotRegularFileError as exc:
            out.present = False
            out.errors.append(ScanError(NOT_A_REGULAR_FILE, block.block_id, None,
                                        f"{exc.filename}: {exc.strerror}"))
            return out
        except OSError as exc:
            out.errors.append(ScanError(UNREADABLE_DATA_FILE, block.block_id, None,
                                        exc.strerror or str(exc)))
            return out
        try:
            for c in block.chunks:
                if c.checksum_type == NONE:
                    continue  # Ozone's scanner skips them: not read, not in the tree
                out.present = True  # a chunk is scanned: the block is in the tree
                if c.length == 0:
                    out.chunks.append(_ChunkObs(c.offset, 0, c.leaf, True))
                    continue
                try:
                    got, observed, mismatch = self.chunk(f, c)
                except OSError as exc:
                    out.errors.append(ScanError(UNREADABLE_DATA_FILE, block.block_id,
                                                c.offset, exc.strerror or str(exc)))
                    continue
                out.bytes_read += got
                if got == 0:
                    out.errors.append(ScanError(MISSING_CHUNK, block.block_id, c.offset,
                                                f"no data at {c.offset} (expected {c.length} "
                                                f"bytes)"))
                    continue
                if observed is None:  # type NONE: only the length can be checked
                    leaf = 0
                elif observed.dtype == np.uint32:
                    leaf = (c.leaf if not mismatch and got == c.length
                            else _native.crc32c(observed.astype(">u4").tobytes()))
                else:
                    leaf = _native.crc32c(observed.tobytes())
                healthy = not mismatch and got == c.length
                out.chunks.append(_ChunkObs(c.offset, got, leaf, healthy))
                if mismatch:
                    out.errors.append(ScanError(
                        CORRUPT_CHUNK, block.block_id, c.offset,
                        "window checksum mismatch" + (f" (short read: {got} of {c.length} "
                                                      f"bytes)" if got < c.length else "")))
                elif got < c.length:
                    out.errors.append(ScanError(INCONSISTENT_CHUNK_LENGTH, block.block_id,
                                                c.offset, f"{got} of {c.length} bytes"))
        finally:
            f.close()
        return out


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
    return ContainerTree.from_columns(container_id, bids, offs, lens,
                                      leaf=np.array(leaves, dtype=np.int64),
                                      checksum_matches=np.array(matches, dtype=bool),
                                      empty_blocks=present or None)


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
        return StoredTree(None, None, ScanError(NOT_A_REGULAR_FILE,
                                                detail=f"{exc.filename}: {exc.strerror}"),
                          writable=False)
    except (OSError, FileTooLargeError) as exc:
        return StoredTree(None, None, ScanError(TREE_UNREADABLE, detail=f"{name}: "
                                                f"{exc.strerror or exc}"), writable=False)
    try:
        tree = tree_from_bytes(raw, source=f"{files.location}/metadata/{name}")
    except TreeFileError as exc:
        return StoredTree(None, raw, ScanError(TREE_CORRUPT, detail=exc.reason))
    if tree.container_id != files.container_id:
        return StoredTree(None, raw, ScanError(TREE_CORRUPT, detail=f"tree is of container "
                                                                    f"{tree.container_id}"))
    ok, keep = rewritable(raw, lambda known: tree_to_bytes(tree_from_bytes(known)))
    if not ok:
        return StoredTree(tree, raw, ScanError(
            TREE_UNSUPPORTED, detail=f"{name} holds fields this crcmerkle does not "
                                     f"understand: not rewritten"), writable=False)
    return StoredTree(tree, raw, None, True, keep)


def read_stored_tree(files: ReplicaFiles) -> Tuple[Optional[ContainerTree], Optional[bytes],
                                                   Optional[ScanError]]:
    """(stored tree, its raw bytes, None), or (None, raw bytes or None, the error) when the
    `.tree` is absent, unreadable, corrupt or foreign (see read_tree_state)."""
    st = read_tree_state(files)
    if st.error is not None and st.error.kind == TREE_UNSUPPORTED:
        return st.tree, st.raw, None  # readable: only a rewrite would lose something
    return st.tree, st.raw, st.error


def scan_container(path: PathLike, *, write_tree: bool = True, workers: int = 1,
                   bytes_per_second: Optional[float] = None,
                   limiter: Optional[RateLimiter] = None,
                   progress: Optional[ProgressFn] = None,
                   buffer_size: int = DEFAULT_BUFFER_SIZE, lock: bool = True,
                   use_mmap: bool = False) -> ScanResult:
    """Scan one replica (see the module docstring) and return what was found.

    write_tree: store the merged tree (atomically, only if it changed); False for a
      read-only check (no lock is taken then).
    workers: threads scanning blocks in parallel (each with its own `buffer_size` buffer).
    bytes_per_second / limiter: pace reads (a limiter may be shared by a volume's scans).
    progress: called with the byte count of every read (e.g. a tqdm bar's update).
    lock: take the replica lock while writing (reconcile, which holds it, passes False).
    use_mmap: accepted for compatibility and ignored: block files are always read with pread,
      since a mapped file that shrinks mid-scan kills the process with SIGBUS.
    """
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
        return _scan(paths, write_tree, max(1, int(workers)), limiter, progress, buffer_size,
                     use_mmap)
    finally:
        if held is not None:
            held.release()


def scan_files(files: ReplicaFiles, *, workers: int = 1,
               limiter: Optional[RateLimiter] = None, progress: Optional[ProgressFn] = None,
               buffer_size: int = DEFAULT_BUFFER_SIZE) -> ScanResult:
    """Scan a replica read through `files` (merkle.replica.files: a local directory, or a
    remote store as spark_udfs.fs provides) without writing anything: the same checks,
    errors and trees as scan_container(..., write_tree=False)."""
    return _scan(files, False, max(1, int(workers)), limiter, progress, buffer_size)


def _scan(source: Union[ContainerPaths, ReplicaFiles], write: bool, workers: int,
          limiter: Optional[RateLimiter], progress: Optional[ProgressFn], buffer_size: int,
          use_mmap: bool = False) -> ScanResult:
    """The scan itself; writing the merged tree needs a local replica (ContainerPaths)."""
    files = LocalReplicaFiles(source) if isinstance(source, ContainerPaths) else source
    try:
        return _scan_files(files, write, workers, limiter, progress, buffer_size)
    finally:
        if isinstance(source, ContainerPaths):
            assert isinstance(files, LocalReplicaFiles)
            files.close()


def _scan_files(files: ReplicaFiles, write: bool, workers: int,
                limiter: Optional[RateLimiter], progress: Optional[ProgressFn],
                buffer_size: int) -> ScanResult:
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
                raise BlockMetaError("block-metadata file is missing", meta_name,
                                     missing=True) from None
            meta = decode_blockmeta(raw_meta, meta_name, files.container_id)
    except BlockMetaError as exc:
        meta = None
        reason = str(exc)[len(str(exc.path)) + 2:] if exc.path else str(exc)
        kind = (METADATA_MISSING if exc.missing else METADATA_UNSUPPORTED if exc.unsupported
                else METADATA_CORRUPT)
        errors.append(ScanError(kind, detail=reason))
    except NotRegularFileError as exc:
        meta = None
        errors.append(ScanError(NOT_A_REGULAR_FILE, detail=f"{exc.filename}: {exc.strerror}"))
    except OSError as exc:  # EACCES, EIO, above the size cap: an I/O error, not corruption
        meta = None
        errors.append(ScanError(METADATA_UNREADABLE, detail=f"{meta_name}: "
                                                            f"{exc.strerror or exc}"))
    blocks = meta.sorted_blocks() if meta is not None else []
    if workers > 1 and len(blocks) > 1:
        local = threading.local()

        def one(b: BlockMeta) -> _BlockObs:
            reader = getattr(local, "reader", None)
            if reader is None:
                reader = local.reader = _Reader(buffer_size, limiter, progress)
            return reader.block(files, b)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            observations = list(pool.map(one, blocks))
    else:
        reader = _Reader(buffer_size, limiter, progress)
        observations = [reader.block(files, b) for b in blocks]
    for ob in observations:
        errors.extend(ob.errors)
    scanned = _observed_tree(files.container_id, observations)
    state = read_tree_state(files)
    stored = state.tree
    if state.error is not None and state.error not in errors:  # not twice for one cause
        errors.insert(0, state.error)
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
        path=files.location, container_id=files.container_id, errors=errors,
        scanned=scanned, tree=merged, meta=meta,
        bytes_read=sum(o.bytes_read for o in observations), blocks=len(blocks),
        chunks=sum(len(b.chunks) for b in blocks), seconds=time.perf_counter() - t0,
        tree_written=written)


def scan_paths(paths: Iterable[PathLike], *, bytes_per_second: Optional[float] = None,
               on_result: Optional[Callable[[ScanResult], Any]] = None,
               on_error: Optional[Callable[[ReplicaLocation, Exception], Any]] = None,
               ozone_scanned: Optional[Dict[Any, Any]] = None,
               **kwargs: Any) -> List[ScanResult]:
    """Scan every replica under each path (replica, volume, datanode, cluster), one rate
    limiter per volume. Errors that stop one replica's scan (lock held, I/O) go to
    `on_error` (re-raised without it); the other replicas are still scanned. Paths on Ozone
    datanode volumes are scanned read-only (merkle.replica.ozone.scan.scan_ozone_paths), the
    others as crcmerkle-layout replicas: one call may mix both. `ozone_scanned`: the Ozone
    replica directories already scanned (scan_ozone_paths' `scanned`), shared by calls."""
    paths = list(paths)
    from merkle.replica.ozone.layout import is_ozone_path
    on_ozone = [os.path.exists(p) and is_ozone_path(p) for p in paths]
    results: List[ScanResult] = []
    if any(on_ozone):  # Ozone volumes first, read-only; the other paths after them
        try:
            from merkle.replica.ozone.scan import scan_ozone_paths
        except ImportError as exc:
            raise ReplicaError(f"reading Ozone volumes needs {exc.name or 'its extra'}: "
                               f"pip install 'crcmerkle[ozone]'") from None
        results = scan_ozone_paths([p for p, o in zip(paths, on_ozone) if o],
                                   bytes_per_second=bytes_per_second, on_result=on_result,
                                   on_error=on_error, scanned=ozone_scanned, **kwargs)
        paths = [p for p, o in zip(paths, on_ozone) if not o]
        if not paths:
            return results
    locations: List[ReplicaLocation] = []

    def walk_error(where: Any, exc: Exception) -> None:
        # an entry the discovery walk could not use: reported like a replica that failed
        if on_error is None:
            raise exc
        on_error(ReplicaLocation(ContainerPaths(where, -1), where.parent), exc)

    for p in paths:
        locations.extend(find_containers(p, walk_error))
    limiters: Dict[str, RateLimiter] = {}
    for loc in locations:
        lim = None
        if bytes_per_second:
            lim = limiters.setdefault(os.fspath(loc.volume), RateLimiter(bytes_per_second))
        try:
            r = scan_container(loc.root, limiter=lim, **kwargs)
        except (OSError, ReplicaError) as exc:
            if on_error is None:
                raise
            on_error(loc, exc)
            continue
        results.append(r)
        if on_result is not None:
            on_result(r)
    return results
