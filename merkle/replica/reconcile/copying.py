"""Copying a repair: peer chunks read through a bounded buffer, verified against the recorded
window checksums, written at their offsets (pwrite, never truncating) and fsynced."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from merkle import _native
from merkle.replica.blocks import CRC32, CRC32C, NONE, SHA256, ChunkMeta, ContainerMeta
from merkle.replica.fileio import pread_into
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.reconcile.peers import _Peer
from merkle.replica.reconcile.results import ChunkCopy, Problem, StepHook
from merkle.trees.merge import chunk_follows

#: The largest peer chunk read into memory whole; larger ones are verified piecewise through
#: a buffer of this size (memory is bounded by this, never by a length a peer declares).
COPY_BUFFER_SIZE = 16 * 1024 * 1024


# ---- copying -----------------------------------------------------------------------------


class _Verifier:
    """Feeds a chunk's bytes piece by piece (any piece sizes) and tells whether they match
    the recorded window checksums; windows are chained across pieces, so memory does not
    depend on the window size."""

    def __init__(self, c: ChunkMeta) -> None:
        self.c = c
        self.bpc = c.bytes_per_checksum
        self.crc_fn = {CRC32: _native.crc32, CRC32C: _native.crc32c}.get(c.checksum_type)
        self.algo = "sha256" if c.checksum_type == SHA256 else "md5"
        self.parts: List[bytes] = []
        self.values: List[int] = []
        self.fill = 0
        self.crc = 0
        self.h: Any = None

    def feed(self, view: memoryview) -> None:
        if self.c.checksum_type == NONE:
            return
        pos = 0
        n = len(view)
        while pos < n:
            take = min(self.bpc - self.fill, n - pos)
            if self.fill == 0 and take == self.bpc and self.crc_fn is not None:
                whole = (n - pos) // self.bpc * self.bpc  # whole windows: one native call
                w = _native.checksum_windows(
                    view[pos : pos + whole],
                    self.bpc,
                    algorithm="crc32" if self.c.checksum_type == CRC32 else "crc32c",
                )
                self.values.extend(int(x) for x in w.tolist())
                pos += whole
                continue
            piece = view[pos : pos + take]
            if self.crc_fn is not None:
                self.crc = self.crc_fn(piece, self.crc)
            else:
                if self.h is None:
                    self.h = hashlib.new(self.algo)
                self.h.update(piece)
            self.fill += take
            pos += take
            if self.fill == self.bpc:
                self._close_window()

    def _close_window(self) -> None:
        if self.crc_fn is not None:
            self.values.append(self.crc)
        else:
            self.parts.append(self.h.digest() if self.h is not None else b"")
        self.fill = 0
        self.crc = 0
        self.h = None

    def matches(self) -> bool:
        if self.c.checksum_type == NONE:
            return True  # nothing recorded to verify against (Ozone's NONE)
        if self.fill:
            self._close_window()
        if self.crc_fn is not None:
            return bool(
                np.array_equal(np.array(self.values, dtype=np.uint32), self.c.window_values())
            )
        return b"".join(self.parts) == self.c.checksums


def _verify(view: memoryview, c: ChunkMeta) -> bool:
    """Do these bytes match the chunk's recorded window checksums?"""
    v = _Verifier(c)
    v.feed(view)
    return v.matches()


def _overlaps(a_off: int, a_len: int, b_off: int, b_len: int) -> bool:
    return a_off < b_off + b_len and b_off < a_off + a_len


class _Copier:
    """Copies verified chunks from one peer into our block files."""

    def __init__(
        self,
        ours: LocalReplicaFiles,
        peer: _Peer,
        our_meta: Optional[ContainerMeta],
        vote: Callable[[int, int], Optional[Tuple[int, int]]],
        sizes: Dict[int, int],
        on_step: Optional[StepHook],
        dry_run: bool,
        held: Optional[ContainerMeta] = None,
    ) -> None:
        self.ours = ours
        #: our current records (our_meta plus what earlier peers supplied): the chunks held
        self.held = held if held is not None else our_meta
        self.peer = peer
        self.peer_meta = peer.meta
        self.our_meta = our_meta
        self.vote = vote
        self.sizes = sizes  # local block file sizes as the writes go (simulated in dry-run)
        #: our chunks per block {offset: length}: recorded, then pulled (Ozone's contiguity)
        self.local: Dict[int, Dict[int, int]] = {}
        self.on_step = on_step
        self.dry_run = dry_run
        self.buffer = bytearray(0)

    def _size(self, block_id: int) -> int:
        if block_id not in self.sizes:
            self.sizes[block_id] = self.ours.block_size(block_id)
        return self.sizes[block_id]

    def _step(self, step: str, detail: Any) -> None:
        if self.on_step is not None:
            self.on_step(step, detail)

    def _trust(self, block_id: int, c: ChunkCopy, cm: ChunkMeta) -> Optional[str]:
        """Why this peer copy must not be pulled (None: it may, once verified)."""
        ours = self.our_meta.blocks.get(block_id) if self.our_meta is not None else None
        mine = ours.chunk_at(c.offset) if ours is not None else None
        if mine is not None:
            if cm.length != mine.length:
                return (
                    f"refused: the peer's chunk is {cm.length} bytes, our record says "
                    f"{mine.length} (a pull never writes outside the chunk)"
                )
            if mine.checksum_type != NONE:
                if cm.checksum_type == NONE:
                    return "refused: the peer records type NONE over our verifiable chunk"
                if cm.leaf != mine.leaf:
                    return (
                        "refused: the peer's copy differs from our recorded window "
                        "checksums (the client's)"
                    )
                return None
        elif ours is not None:
            for o in ours.chunks:
                if o.length and _overlaps(c.offset, c.length, o.offset, o.length):
                    return (
                        f"refused: the peer's chunk would overwrite our recorded chunk @{o.offset}"
                    )
        winner = self.vote(block_id, c.offset)
        if winner is None:
            return "left alone: healthy peers disagree and no version has a majority"
        if winner != (c.length, c.peer_value):
            return "refused: the peer's version is not the one the majority of peers hold"
        return None

    def _record(self, block_id: int, offset: int) -> Optional[ChunkMeta]:
        ours = self.our_meta.blocks.get(block_id) if self.our_meta is not None else None
        return ours.chunk_at(offset) if ours is not None else None

    def _local(self, block_id: int) -> Dict[int, int]:
        if block_id not in self.local:
            block = self.held.blocks.get(block_id) if self.held is not None else None
            self.local[block_id] = {c.offset: c.length for c in block.chunks} if block else {}
        return self.local[block_id]

    def record(self, block_id: int, done: Sequence[ChunkCopy]) -> None:
        """Chunks now held locally (written, or simulated in a dry run)."""
        local = self._local(block_id)
        for c in done:
            local[c.offset] = c.length

    def plan_block(
        self, block_id: int, copies: List[ChunkCopy]
    ) -> Tuple[List[Tuple[ChunkCopy, ChunkMeta]], List[Problem]]:
        """The copies of one run that can be attempted (in order), and why others are not.
        Ozone's contiguity rule stops the run at the first chunk whose offset is not 0 and not
        where the previous local chunk (recorded, or pulled before it) ends exactly."""
        problems: List[Problem] = []
        try:
            size = self._size(block_id)
        except OSError as exc:
            return [], [
                Problem(
                    block_id,
                    copies[0].offset if copies else None,
                    f"stopped: our block file: {exc.strerror or exc}",
                )
            ]
        pmeta = self.peer_meta.blocks.get(block_id)
        local = dict(self._local(block_id))  # what we would hold as the run goes
        out: List[Tuple[ChunkCopy, ChunkMeta]] = []
        for c in copies:
            if not chunk_follows(local, c.offset):
                problems.append(
                    Problem(
                        block_id,
                        c.offset,
                        f"stopped: chunk at {c.offset} "
                        f"does not follow a local chunk ending there "
                        f"(no holes)",
                    )
                )
                break
            cm = pmeta.chunk_at(c.offset) if pmeta is not None else None
            if cm is None or cm.length != c.length or cm.leaf != c.peer_value:
                problems.append(
                    Problem(
                        block_id,
                        c.offset,
                        "stopped: the peer's metadata does not match its tree for this chunk",
                    )
                )
                break
            why = self._trust(block_id, c, cm)
            if why is not None:
                problems.append(Problem(block_id, c.offset, why))
                continue  # not held: a later chunk that needs it stops the run
            out.append((c, cm))
            local[c.offset] = c.length
            size = max(size, c.offset + c.length)
        return out, problems

    def _read_verified(
        self, pfd: int, c: ChunkCopy, check: ChunkMeta, whose: str
    ) -> Tuple[Optional[memoryview], Optional[str]]:
        """The chunk's bytes in the buffer when they fit (else None: stream), or a reason."""
        if c.length > COPY_BUFFER_SIZE:
            # verify piecewise first; the copy itself re-verifies while writing
            if len(self.buffer) < COPY_BUFFER_SIZE:
                self.buffer = bytearray(COPY_BUFFER_SIZE)
            v = _Verifier(check)
            got = 0
            while got < c.length:
                view = memoryview(self.buffer)[: min(COPY_BUFFER_SIZE, c.length - got)]
                n = pread_into(pfd, view, c.offset + got)
                v.feed(view[:n])
                got += n
                if n < len(view):
                    return None, f"stopped: peer chunk is short ({got} of {c.length} bytes)"
            return None, (
                None
                if v.matches()
                else f"stopped: peer data does not match {whose} recorded window checksums"
            )
        if len(self.buffer) < c.length:
            self.buffer = bytearray(c.length)
        view = memoryview(self.buffer)[: c.length]
        got = pread_into(pfd, view, c.offset)
        if got < c.length:
            return None, f"stopped: peer chunk is short ({got} of {c.length} bytes)"
        if not _verify(view, check):
            return None, f"stopped: peer data does not match {whose} recorded window checksums"
        return view, None

    def _stream_copy(self, pfd: int, fd: int, c: ChunkCopy, check: ChunkMeta) -> Optional[str]:
        v = _Verifier(check)
        got = 0
        while got < c.length:
            view = memoryview(self.buffer)[: min(COPY_BUFFER_SIZE, c.length - got)]
            n = pread_into(pfd, view, c.offset + got)
            if n < len(view):
                return f"stopped: peer chunk shrank while copied ({got + n} of {c.length})"
            v.feed(view)
            written = 0
            while written < n:
                written += os.pwrite(fd, view[written:], c.offset + got + written)
            got += n
        return (
            None
            if v.matches()
            else (
                "stopped: peer data changed while copied (no longer "
                "matches the recorded window checksums)"
            )
        )

    def copy_block(
        self, block_id: int, items: List[Tuple[ChunkCopy, ChunkMeta]]
    ) -> Tuple[List[ChunkCopy], List[ChunkMeta], Optional[Problem]]:
        """Read, verify and write the planned chunks of one block, stopping at a failure.
        Returns the copies done, the records to add (only for chunks we had none of) and
        the problem that stopped the block."""
        done: List[ChunkCopy] = []
        metas: List[ChunkMeta] = []
        if not items:
            return done, metas, None
        try:
            pf = self.peer.files.open_block(block_id)
        except OSError as exc:
            return (
                done,
                metas,
                Problem(
                    block_id,
                    items[0][0].offset,
                    f"peer block file unreadable: {exc.strerror or exc}",
                ),
            )
        pfd = pf.fileno()
        assert pfd is not None
        fd = -1
        problem: Optional[Problem] = None
        try:
            try:
                fd = self.ours.open_block_rw(block_id, create=True)
            except OSError as exc:
                problem = Problem(
                    block_id, items[0][0].offset, f"stopped: our block file: {exc.strerror or exc}"
                )
                return done, metas, problem
            size = os.fstat(fd).st_size
            peer_size = os.fstat(pfd).st_size
            for c, cm in items:
                if c.offset + c.length > peer_size:
                    problem = Problem(
                        block_id,
                        c.offset,
                        f"stopped: peer chunk is short (its file has {peer_size} bytes)",
                    )
                    break
                mine = self._record(block_id, c.offset)
                check = mine if mine is not None and mine.checksum_type != NONE else cm
                try:
                    view, why = self._read_verified(pfd, c, check, "its" if check is cm else "our")
                    if why is None and view is None:
                        why = self._stream_copy(pfd, fd, c, check)
                    elif why is None and view is not None:
                        written = 0
                        while written < c.length:
                            written += os.pwrite(fd, view[written:], c.offset + written)
                except OSError as exc:
                    why = f"stopped: peer read or local write failed: {exc.strerror or exc}"
                if why is not None:
                    problem = Problem(block_id, c.offset, why)
                    break
                size = max(size, c.offset + c.length)
                self.sizes[block_id] = size
                done.append(c)
                if mine is None:
                    metas.append(cm)
                self._step("chunk", c)
            os.fsync(fd)
            self.ours.fsync_chunks()
        finally:
            pf.close()
            if fd >= 0:
                os.close(fd)
        self._step("block", block_id)
        return done, metas, problem
