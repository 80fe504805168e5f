"""A synthetic cluster of container replicas with injected faults and a ground-truth manifest.

`generate_cluster(out, GeneratorConfig(...))` writes

    <out>/dn<d>/vol<v>/<containerID>/...     one replica per chosen datanode (replica layout)
    <out>/manifest.json                      every injected fault and what a scan must report

Random data, realistic sizes scaled down (Ozone: 4 MiB chunks, 256 MiB blocks, 16 KiB
windows; defaults here 64 KiB / 256 KiB / 4 KiB), every replica written through
ContainerWriter (so metadata and `.tree` are what a datanode holds after the container
closed), then faults are injected on chosen replicas. Everything is deterministic from
`seed`: the data of block B of container C depends only on (seed, C, B), and faults are drawn
from their own stream, so the same seed with no faults gives the pristine cluster.

Fault types (FAULT_TYPES), each count is a number of events:
  bitflip         one bit flipped inside a chunk on one replica       -> CORRUPT_CHUNK
  bitflip2        the same chunk corrupted on two replicas             -> CORRUPT_CHUNK x2
  bitflip-all     the same chunk corrupted on every replica (unrepairable)
  truncate        block file cut inside a chunk -> CORRUPT_CHUNK or INCONSISTENT_CHUNK_LENGTH
                  for that chunk, MISSING_CHUNK for every later chunk
  missing-chunks  block file cut at a chunk boundary -> MISSING_CHUNK for the cut chunks
  missing-file    block file deleted                                   -> MISSING_DATA_FILE
  tombstone       block deleted (Ozone's way) on some but not all replicas: no scan error;
                  the tombstone keeps the block's value, so the others keep their live
                  block (Ozone examines a block only when the values differ) and they
                  adopt the tombstone only if their copy diverges
  extra-block     a block written to one replica only: no scan error; the others pull it
  tree-corrupt    `.tree` overwritten with garbage                     -> TREE_CORRUPT
  tree-missing    `.tree` deleted                                      -> TREE_MISSING
  meta-corrupt    one bit flipped in the `.blocks` file                -> METADATA_CORRUPT
  meta-missing    `.blocks` deleted                                    -> METADATA_MISSING
With `om_db` (ozone layout only) it also writes <out>/om.db, an Ozone Manager DB whose keys
are made of the generated blocks, and each key's ground truth in the manifest's `keys`
(merkle.replica.ozone.omkeys).

Placement keeps the ground truth exact: each block gets at most one event; a replica with a
metadata fault gets no other fault (nothing on it can be verified); tree faults avoid
replicas holding a tombstone (it would be lost) and are injected last (writers rewrite the
tree); every event but bitflip-all
leaves a healthy copy of what it damages somewhere.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from merkle import _native
from merkle.replica.layout import GeneratedLayout, Layout, generator_of
from merkle.replica.layouts import LayoutError, layout_named, layouts
from merkle.replica.replicadir.writer import ContainerWriter
from merkle.replica.scan import (
    CORRUPT_CHUNK,
    INCONSISTENT_CHUNK_LENGTH,
    METADATA_CORRUPT,
    METADATA_MISSING,
    MISSING_CHUNK,
    MISSING_DATA_FILE,
    TREE_CORRUPT,
    TREE_MISSING,
)

# re-exported: their home is below the generator and the layouts (merkle.replica.synth)
from merkle.replica.synth import (  # noqa: F401
    MARKER_NAME,
    GeneratorError,
    block_data,
    prepare_output,
    remove_run,
    write_new_file,
)

__all__ = [
    "DEFAULT_FAULTS",
    "FAULT_TYPES",
    "GeneratorConfig",
    "GeneratorError",
    "MANIFEST_NAME",
    "generate_cluster",
    "parse_faults",
]

PathLike = Union[str, "os.PathLike[str]"]
MANIFEST_NAME = "manifest.json"
KiB = 1024

FAULT_TYPES = (
    "bitflip",
    "bitflip2",
    "bitflip-all",
    "truncate",
    "missing-chunks",
    "missing-file",
    "tombstone",
    "extra-block",
    "tree-corrupt",
    "tree-missing",
    "meta-corrupt",
    "meta-missing",
)
DEFAULT_FAULTS = (
    "bitflip=2,bitflip2=1,bitflip-all=1,truncate=2,missing-chunks=1,"
    "missing-file=1,tombstone=1,extra-block=1,tree-corrupt=1,tree-missing=1,"
    "meta-corrupt=1,meta-missing=1"
)


#: the shipped layouts the generator writes: `ozone` writes real datanode volumes
#: (merkle.replica.ozone); any registered layout (merkle.replica.layouts) is accepted
LAYOUTS = ("crcmerkle", "ozone")


def _layout(name: str) -> Layout:
    """The registered layout `name` (GeneratorError naming the known ones otherwise)."""
    try:
        return layout_named(name)
    except LayoutError:
        known = sorted(other.name for other in layouts())
        raise GeneratorError(f"layout must be one of {', '.join(known)}") from None


def _generated(layout: Layout) -> Optional[GeneratedLayout]:
    """`layout` as the generator writes it, or None for a layout it does not write (a
    read-only one: generate_cluster refuses it in one line)."""
    return layout if isinstance(layout, GeneratedLayout) else None


def _generated_layouts() -> List[GeneratedLayout]:
    """The registered layouts the generator writes, in the registry's order."""
    return [g for g in map(_generated, layouts()) if g is not None]


def _own_faults(name: str) -> Tuple[str, ...]:
    """The faults only the layout `name` injects (none for a name no layout has, or a layout
    the generator does not write)."""
    try:
        generated = _generated(layout_named(name))
    except LayoutError:
        return ()
    return tuple(generated.fault_types) if generated is not None else ()


def parse_faults(spec: str, layout: str = "crcmerkle") -> Dict[str, int]:
    """'bitflip=2,truncate' -> {'bitflip': 2, 'truncate': 1}; 'none' -> {}; 'default' (for
    a layout with faults of its own, the ozone layout's, also one of each of those)."""
    spec = spec.strip()
    if spec in ("", "none"):
        return {}
    own = _own_faults(layout)
    if spec == "default":
        spec = DEFAULT_FAULTS + "".join("," + kind for kind in own)
    known = FAULT_TYPES + own
    out: Dict[str, int] = {}
    for part in spec.split(","):
        name, _, count = part.strip().partition("=")
        name = name.strip()
        if name not in known:
            owner = [other.name for other in _generated_layouts() if name in other.fault_types]
            hint = f" (an {owner[0]}-layout fault)" if owner else ""
            raise GeneratorError(f"unknown fault type {name!r}{hint} (known: {', '.join(known)})")
        try:
            n = int(count) if count else 1
        except ValueError:
            raise GeneratorError(f"fault count must be an integer: {part!r}") from None
        if n < 0:
            raise GeneratorError(f"fault count must be >= 0: {part!r}")
        out[name] = out.get(name, 0) + n
    return out


@dataclass
class GeneratorConfig:
    """Cluster shape, sizes and faults (sizes in bytes)."""

    datanodes: int = 3
    volumes: int = 2
    containers: int = 4
    replicas: int = 3
    min_blocks: int = 2
    max_blocks: int = 6
    block_size: int = 256 * KiB
    chunk_size: int = 64 * KiB
    bytes_per_checksum: int = 4 * KiB
    algorithm: str = "crc32"  # crc32 | crc32c | mixed
    faults: Dict[str, int] = field(default_factory=dict)
    seed: int = 0
    layout: str = "crcmerkle"  # crcmerkle | ozone (LAYOUTS), or another registered layout
    #: a layout that records mount paths (ozone): where each volume will be mounted, a
    #: template with {datanode} and {volume} (the layout's mount_paths); None: where it is
    #: written
    mount_path: Optional[str] = None
    #: also write OUT/om.db, an OM DB whose keys are made of the generated blocks, and the
    #: keys' ground truth in the manifest (merkle.replica.ozone.omkeys); ozone layout only
    om_db: bool = False

    def validate(self) -> None:
        if min(self.datanodes, self.volumes, self.containers, self.replicas) < 1:
            raise GeneratorError("datanodes, volumes, containers and replicas must be >= 1")
        if self.replicas > self.datanodes:
            raise GeneratorError(
                f"{self.replicas} replicas need at least as many datanodes (got {self.datanodes})"
            )
        if not 1 <= self.min_blocks <= self.max_blocks:
            raise GeneratorError("blocks per container: need 1 <= min <= max")
        if min(self.block_size, self.chunk_size, self.bytes_per_checksum) < 1:
            raise GeneratorError("sizes must be positive")
        if self.algorithm not in ("crc32", "crc32c", "mixed"):
            raise GeneratorError("algorithm must be crc32, crc32c or mixed")
        # a layout the generator does not write passes here and is refused by generate_cluster
        layout = _generated(_layout(self.layout))
        if self.mount_path is not None:
            if layout is None or not layout.records_mount_paths:
                which = " or ".join(
                    other.name for other in _generated_layouts() if other.records_mount_paths
                )
                raise GeneratorError(
                    f"--mount-path: a mount path is recorded by the {which} layout only"
                )
            layout.mount_paths(self.mount_path, self.datanodes, self.volumes)
        if self.om_db and (layout is None or "om_db" not in layout.generator_options):
            which = " or ".join(
                other.name for other in _generated_layouts() if "om_db" in other.generator_options
            )
            raise GeneratorError(
                f"--om-db: an OM DB is written with --layout {which} only (not {self.layout})"
            )
        known = FAULT_TYPES + (tuple(layout.fault_types) if layout is not None else ())
        for k in self.faults:
            if k not in known:
                raise GeneratorError(f"unknown fault type {k!r} for the {self.layout} layout")


@dataclass
class _Container:
    cid: int
    algorithm: str
    replicas: List[str]  # relative paths
    blocks: Dict[int, int]  # block ID -> length


class _Cluster:
    def __init__(self, out: Path, cfg: GeneratorConfig) -> None:
        self.out = out
        self.cfg = cfg
        self.containers: Dict[int, _Container] = {}
        self.faults: List[Dict[str, Any]] = []
        self.expected: Dict[str, List[Dict[str, Any]]] = {}
        self.unrepairable: List[Dict[str, int]] = []
        self.tombstones: Dict[int, List[int]] = {}
        self.extra_blocks: Dict[int, List[int]] = {}
        self.used_blocks: Set[Tuple[int, int]] = set()
        self.meta_faulted: Set[str] = set()
        self.tree_faulted: Set[str] = set()
        self.data_faulted: Set[str] = set()
        self.tombstoned: Set[str] = set()

    # -- layout -------------------------------------------------------------------------

    def chunk_offsets(self, length: int) -> List[Tuple[int, int]]:
        cs = self.cfg.chunk_size
        return [(o, min(cs, length - o)) for o in range(0, length, cs)]

    def write(self) -> None:
        cfg = self.cfg
        rng = random.Random(f"layout/{cfg.seed}")
        for cid in range(1, cfg.containers + 1):
            alg = cfg.algorithm if cfg.algorithm != "mixed" else rng.choice(("crc32", "crc32c"))
            dns = sorted(rng.sample(range(cfg.datanodes), cfg.replicas))
            reps = [f"dn{d}/vol{rng.randrange(cfg.volumes)}/{cid}" for d in dns]
            nb = rng.randint(cfg.min_blocks, cfg.max_blocks)
            blocks = {}
            for bid in range(1, nb + 1):
                # mostly multi-chunk blocks, some ending in a short chunk, some exact
                lo = min(cfg.chunk_size + 1, cfg.block_size)
                length = rng.randint(lo, cfg.block_size)
                if rng.random() < 0.25:
                    length = max(cfg.chunk_size, length // cfg.chunk_size * cfg.chunk_size)
                blocks[bid] = length
            self.containers[cid] = _Container(cid, alg, reps, blocks)
            for rep in reps:
                self.expected[rep] = []
                self._write_replica(rep, cid, alg, blocks)

    def _write_replica(self, rep: str, cid: int, alg: str, blocks: Dict[int, int]) -> None:
        with ContainerWriter.create(
            self.out / rep,
            cid,
            algorithm=alg,
            bytes_per_checksum=self.cfg.bytes_per_checksum,
            chunk_size=self.cfg.chunk_size,
        ) as w:
            for bid, length in blocks.items():
                w.write_block(bid, block_data(self.cfg.seed, cid, bid, length))

    # -- fault helpers --------------------------------------------------------------------

    def path(self, rep: str, *parts: str) -> Path:
        return self.out / rep / Path(*parts) if parts else self.out / rep

    def block_file(self, rep: str, bid: int) -> Path:
        return self.out / rep / "chunks" / f"{bid}.block"

    def meta_file(self, rep: str) -> Path:
        cid = int(Path(rep).name)
        return self.out / rep / "metadata" / f"{cid}.blocks"

    def tree_file(self, rep: str) -> Path:
        cid = int(Path(rep).name)
        return self.out / rep / "metadata" / f"{cid}.tree"

    def expect(
        self, rep: str, error: str, block: Optional[int] = None, offset: Optional[int] = None
    ) -> Dict[str, Any]:
        e = {"error": error, "block_id": block, "offset": offset}
        self.expected[rep].append(e)
        return dict(e, replica=rep)

    def _not_meta_faulted(self, rep: str) -> bool:
        """Whether `rep`'s metadata is still intact (a fault picks its replicas among these)."""
        return rep not in self.meta_faulted

    def pick_block(
        self, rng: random.Random, ok_replicas: Any, need: int, min_chunks: int = 1
    ) -> Optional[Tuple[_Container, int, List[str]]]:
        """A (container, unused block, candidate replicas) with >= need candidates."""
        options = []
        for c in self.containers.values():
            cands = [r for r in c.replicas if ok_replicas(r)]
            if len(cands) < need:
                continue
            for bid, length in c.blocks.items():
                if (c.cid, bid) in self.used_blocks:
                    continue
                if len(self.chunk_offsets(length)) < min_chunks:
                    continue
                options.append((c, bid, cands))
        if not options:
            return None
        c, bid, cands = options[rng.randrange(len(options))]
        self.used_blocks.add((c.cid, bid))
        return c, bid, cands

    def healthy_left(self, c: _Container, targets: List[str]) -> bool:
        return any(r not in targets and r not in self.meta_faulted for r in c.replicas)

    def flip(self, path: Path, pos: int, bit: int) -> None:
        with open(path, "r+b") as f:
            f.seek(pos)
            b = f.read(1)
            f.seek(pos)
            f.write(bytes([b[0] ^ (1 << bit)]))

    # -- injection ------------------------------------------------------------------------

    def inject(self) -> None:
        rng = random.Random(f"faults/{self.cfg.seed}")
        # Tree faults come last: a writer (tombstone, extra-block) rewrites the tree.
        order = [
            "meta-corrupt",
            "meta-missing",
            "tombstone",
            "bitflip-all",
            "bitflip2",
            "bitflip",
            "truncate",
            "missing-chunks",
            "missing-file",
            "extra-block",
            "tree-corrupt",
            "tree-missing",
        ]
        for kind in order:
            for _ in range(self.cfg.faults.get(kind, 0)):
                fault = getattr(self, "_" + kind.replace("-", "_"))(rng)
                if fault is None:
                    raise GeneratorError(
                        f"cannot place another {kind!r} fault: the cluster is "
                        f"too small (more containers or blocks, fewer faults)"
                    )
                fault["id"] = len(self.faults)
                fault["type"] = kind
                self.faults.append(fault)

    def _replica_fault(self, rng: random.Random, pool: List[str]) -> Optional[str]:
        if not pool:
            return None
        return pool[rng.randrange(len(pool))]

    def _meta(self, rng: random.Random, corrupt: bool) -> Optional[Dict[str, Any]]:
        # one metadata fault per container, on a replica with nothing else
        busy = {int(Path(r).name) for r in self.meta_faulted}
        pool = [
            r
            for c in self.containers.values()
            if c.cid not in busy and len(c.replicas) > 1
            for r in c.replicas
        ]
        rep = self._replica_fault(rng, pool)
        if rep is None:
            return None
        self.meta_faulted.add(rep)
        f = self.meta_file(rep)
        detail: Dict[str, Any] = {}
        if corrupt:
            size = f.stat().st_size
            pos, bit = rng.randrange(size), rng.randrange(8)
            self.flip(f, pos, bit)
            detail = {"byte": pos, "bit": bit}
            e = self.expect(rep, METADATA_CORRUPT)
        else:
            f.unlink()
            e = self.expect(rep, METADATA_MISSING)
        return dict(container_id=int(Path(rep).name), replicas=[rep], expected=[e], **detail)

    def _meta_corrupt(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._meta(rng, True)

    def _meta_missing(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._meta(rng, False)

    def _tree(self, rng: random.Random, corrupt: bool) -> Optional[Dict[str, Any]]:
        pool = [
            r
            for c in self.containers.values()
            for r in c.replicas
            if r not in self.meta_faulted
            and r not in self.tree_faulted
            and r not in self.tombstoned
        ]
        rep = self._replica_fault(rng, pool)
        if rep is None:
            return None
        self.tree_faulted.add(rep)
        f = self.tree_file(rep)
        if corrupt:
            # wire type 7 at byte 0: never a valid protobuf, so always detected
            f.write_bytes(b"\xff" + rng.randbytes(rng.randrange(1, 64)))
            e = self.expect(rep, TREE_CORRUPT)
        else:
            f.unlink()
            e = self.expect(rep, TREE_MISSING)
        return dict(container_id=int(Path(rep).name), replicas=[rep], expected=[e])

    def _tree_corrupt(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._tree(rng, True)

    def _tree_missing(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._tree(rng, False)

    def _tombstone(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        picked = self.pick_block(rng, self._not_meta_faulted, 1)
        if picked is None:
            return None
        c, bid, cands = picked
        k = rng.randint(1, max(1, min(len(cands), len(c.replicas) - 1)))
        targets = sorted(rng.sample(cands, k))
        for rep in targets:
            with ContainerWriter(
                self.out / rep,
                c.cid,
                algorithm=c.algorithm,
                bytes_per_checksum=self.cfg.bytes_per_checksum,
                chunk_size=self.cfg.chunk_size,
            ) as w:
                w.delete_block(bid)
            self.tombstoned.add(rep)
        self.tombstones.setdefault(c.cid, []).append(bid)
        return dict(container_id=c.cid, block_id=bid, replicas=targets, expected=[])

    def _chunk_flip(
        self, rng: random.Random, need: int, all_replicas: bool
    ) -> Optional[Dict[str, Any]]:
        for _ in range(50):
            picked = self.pick_block(rng, self._not_meta_faulted, need)
            if picked is None:
                return None
            c, bid, cands = picked
            if all_replicas and len(cands) != len(c.replicas):
                continue
            targets = sorted(c.replicas) if all_replicas else sorted(rng.sample(cands, need))
            if not all_replicas and not self.healthy_left(c, targets):
                continue
            off, ln = rng.choice(self.chunk_offsets(c.blocks[bid]))
            expected, where = [], []
            for rep in targets:
                pos, bit = off + rng.randrange(ln), rng.randrange(8)
                self.flip(self.block_file(rep, bid), pos, bit)
                self.data_faulted.add(rep)
                where.append({"replica": rep, "byte": pos, "bit": bit})
                expected.append(self.expect(rep, CORRUPT_CHUNK, bid, off))
            if all_replicas:
                self.unrepairable.append({"container_id": c.cid, "block_id": bid, "offset": off})
            return dict(
                container_id=c.cid,
                block_id=bid,
                chunk_offset=off,
                replicas=targets,
                flips=where,
                expected=expected,
            )
        return None

    def _bitflip(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._chunk_flip(rng, 1, False)

    def _bitflip2(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._chunk_flip(rng, 2, False)

    def _bitflip_all(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._chunk_flip(rng, 1, True)

    def _cut(self, rng: random.Random, at_boundary: bool) -> Optional[Dict[str, Any]]:
        picked = self.pick_block(rng, self._not_meta_faulted, 1, min_chunks=2 if at_boundary else 1)
        if picked is None:
            return None
        c, bid, cands = picked
        rep = rng.choice(cands)
        if not self.healthy_left(c, [rep]):
            return None
        chunks = self.chunk_offsets(c.blocks[bid])
        bpc = self.cfg.bytes_per_checksum
        if at_boundary:
            k = rng.randrange(1, len(chunks))
            cut = chunks[k][0]
        else:
            k = rng.randrange(len(chunks))
            off, ln = chunks[k]
            if ln < 2:
                return None
            cut = off + rng.randrange(1, ln)
        os.truncate(self.block_file(rep, bid), cut)
        self.data_faulted.add(rep)
        expected = []
        for off, ln in chunks:
            if off + ln <= cut:
                continue
            if off >= cut:
                expected.append(self.expect(rep, MISSING_CHUNK, bid, off))
                continue
            # the cut chunk: does its partial last window still match the recorded one?
            data = block_data(self.cfg.seed, c.cid, bid, c.blocks[bid])
            got = cut - off
            wstart = off + (got - 1) // bpc * bpc
            full = data[wstart : min(wstart + bpc, off + ln)]
            part = data[wstart:cut]
            fn = _native.crc32 if c.algorithm == "crc32" else _native.crc32c
            kind = CORRUPT_CHUNK if fn(part) != fn(full) else INCONSISTENT_CHUNK_LENGTH
            expected.append(self.expect(rep, kind, bid, off))
        return dict(container_id=c.cid, block_id=bid, replicas=[rep], cut_at=cut, expected=expected)

    def _truncate(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._cut(rng, False)

    def _missing_chunks(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        return self._cut(rng, True)

    def _missing_file(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        picked = self.pick_block(rng, self._not_meta_faulted, 1)
        if picked is None:
            return None
        c, bid, cands = picked
        rep = rng.choice(cands)
        if not self.healthy_left(c, [rep]):
            return None
        self.block_file(rep, bid).unlink()
        self.data_faulted.add(rep)
        e = self.expect(rep, MISSING_DATA_FILE, bid)
        return dict(container_id=c.cid, block_id=bid, replicas=[rep], expected=[e])

    def _extra_block(self, rng: random.Random) -> Optional[Dict[str, Any]]:
        pool = [
            (c, r)
            for c in self.containers.values()
            for r in c.replicas
            if r not in self.meta_faulted and len(c.replicas) > 1
        ]
        if not pool:
            return None
        c, rep = pool[rng.randrange(len(pool))]
        bid = 1000 + max([b for b in c.blocks] + self.extra_blocks.get(c.cid, [0]))
        length = rng.randint(1, self.cfg.block_size)
        with ContainerWriter(
            self.out / rep,
            c.cid,
            algorithm=c.algorithm,
            bytes_per_checksum=self.cfg.bytes_per_checksum,
            chunk_size=self.cfg.chunk_size,
        ) as w:
            w.write_block(bid, block_data(self.cfg.seed, c.cid, bid, length))
        self.extra_blocks.setdefault(c.cid, []).append(bid)
        self.used_blocks.add((c.cid, bid))
        return dict(container_id=c.cid, block_id=bid, replicas=[rep], length=length, expected=[])

    # -- manifest -------------------------------------------------------------------------

    def manifest(self) -> Dict[str, Any]:
        def key(e: Dict[str, Any]) -> Tuple[str, int, int]:
            return (e["error"], e["block_id"] or 0, e["offset"] or 0)

        return {
            "format": "crcmerkle-cluster-manifest",
            "version": 1,
            "seed": self.cfg.seed,
            "config": asdict(self.cfg),
            "containers": {
                str(c.cid): {
                    "algorithm": c.algorithm,
                    "replicas": c.replicas,
                    "blocks": {str(b): n for b, n in c.blocks.items()},
                }
                for c in self.containers.values()
            },
            "faults": self.faults,
            "expected_errors": {r: sorted(es, key=key) for r, es in sorted(self.expected.items())},
            "unrepairable_chunks": self.unrepairable,
            "tombstones": {str(k): sorted(v) for k, v in sorted(self.tombstones.items())},
            "extra_blocks": {str(k): sorted(v) for k, v in sorted(self.extra_blocks.items())},
        }


def generate_cluster(
    out: PathLike, config: Optional[GeneratorConfig] = None, **kwargs: Any
) -> Dict[str, Any]:
    """Write a synthetic cluster under `out` (which must not exist or be empty) and return
    its manifest (also written to `<out>/manifest.json`). kwargs override config fields."""
    cfg = config or GeneratorConfig()
    if kwargs:
        cfg = GeneratorConfig(**{**asdict(cfg), **kwargs})
    cfg.validate()
    layout = generator_of(layout_named(cfg.layout))  # one line for a layout it does not write
    layout.check_can_generate()
    root = Path(out)
    created = _prepare_output(root)
    try:
        # a layout not generated in place (ozone): the same content made in the crcmerkle
        # layout in a staging directory, then moved onto the layout's volumes
        staging = root if layout.generated_in_place else root / _STAGING
        cluster = _Cluster(staging, cfg)
        cluster.write()
        cluster.inject()
        manifest = cluster.manifest()
        # the layout finishes its cluster: moves it onto its volumes (when not generated in
        # place), injects its own faults, and does its own options (Ozone's --om-db)
        own = {k: n for k, n in cfg.faults.items() if k in layout.fault_types}
        manifest = layout.finish_generation(staging, root, manifest, cfg, own)
        _write_new_file(root, MANIFEST_NAME, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    except BaseException:  # also Ctrl-C: leave nothing half-written behind
        _remove_run(root, keep_marker=not created)
        raise
    return manifest


#: what a generated cluster holds besides the marker (merkle.replica.synth.MARKER_NAME): the
#: manifest, dn<N>/ directories, the ozone staging area, the OM DB; a later run may replace it
_STAGING = ".staging"
_OM_DB = "om.db"  # the ozone layout's OM DB (merkle.replica.ozone.omkeys.OM_DB_NAME)
_OWN_ENTRY = re.compile(r"dn\d+")


def _is_own_entry(name: str) -> bool:
    return name in (MARKER_NAME, MANIFEST_NAME, _STAGING, _OM_DB) or bool(
        _OWN_ENTRY.fullmatch(name)
    )


def _prepare_output(root: Path) -> bool:
    """Create `root`, or accept it empty, or clear an earlier generated cluster from it (see
    MARKER_NAME), then write the marker. True when this call created the directory."""
    return prepare_output(root, _is_own_entry)


def _write_new_file(root: Path, name: str, text: str) -> None:
    write_new_file(root, name, text)


def _remove_run(root: Path, keep_marker: bool) -> None:
    remove_run(root, _is_own_entry, keep_marker)
