"""The generator's `ozone` layout: the same cluster content as the `crcmerkle` layout, written
as real datanode volumes, plus faults only this layout has.

merkle.replica.generate writes the cluster and injects the common faults in the crcmerkle layout
in a staging directory; `convert_cluster` then moves every replica onto datanode volumes
(`<out>/dn<d>/vol<v>/hdds/...`, merkle.replica.ozone.writer): same block files, same `.tree`
bytes (a corrupt or missing tree stays so), block metadata into each volume's `container.db`.
So a scan of either layout sees the same content and must report the same findings. The
common metadata faults take their Ozone form: `meta-corrupt` makes one `block_data` value of
the replica undecodable (METADATA_CORRUPT), `meta-missing` removes the `.container` file
(CONTAINER_FILE_MISSING).

Ozone-only faults (OZONE_FAULT_TYPES):
  container-checksum     one byte of a `.container` changed, its checksum left as it was
                         -> CONTAINER_FILE_CORRUPT (nothing of that replica is verified)
  open-container         a replica recorded as OPEN (a valid file) -> CONTAINER_NOT_SCANNED
  db-entry-without-file  a block_data entry whose block file does not exist -> MISSING_DATA_FILE
                         (#BLOCKCOUNT, #BYTESUSED and #BCSID count it, as after a real PutBlock)
  file-without-db-entry  a block file that no block_data entry names -> UNREFERENCED_DATA_FILE
The first two make a replica unusable, so they go (like metadata faults) to containers with no
other fault; the last two go to replicas whose metadata is usable.
"""

from __future__ import annotations

import os
import random
import shutil
import string
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from merkle.replica.errors import BlockMetaError
from merkle.replica.ozone.rocks import block_key
from merkle.replica.replicadir.blockmeta import BlockMeta, ChunkMeta, ContainerMeta, read_blockmeta
from merkle.replica.synth import GeneratorError, block_data
from merkle.trees.treefile import TreeFileError, tree_from_bytes

__all__ = ["OZONE_FAULT_TYPES", "convert_cluster"]

OZONE_FAULT_TYPES = (
    "container-checksum",
    "open-container",
    "db-entry-without-file",
    "file-without-db-entry",
)
#: the generator's default for the ozone layout: one of each
OZONE_DEFAULT_FAULTS = ",".join(OZONE_FAULT_TYPES)

CONTAINER_FILE_MISSING = "CONTAINER_FILE_MISSING"
CONTAINER_FILE_CORRUPT = "CONTAINER_FILE_CORRUPT"
CONTAINER_NOT_SCANNED = "CONTAINER_NOT_SCANNED"
UNREFERENCED_DATA_FILE = "UNREFERENCED_DATA_FILE"
MISSING_DATA_FILE = "MISSING_DATA_FILE"
METADATA_CORRUPT = "METADATA_CORRUPT"


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _pristine_meta(cfg: Any, cid: int, blocks: Dict[str, int], algorithm: str) -> ContainerMeta:
    """A container's block metadata from the generator's deterministic data."""
    meta = ContainerMeta(cid)
    for b, length in blocks.items():
        data = block_data(cfg.seed, cid, int(b), length)
        chunks = [
            ChunkMeta.from_data(
                o,
                data[o : o + cfg.chunk_size],
                algorithm=algorithm,
                bytes_per_checksum=cfg.bytes_per_checksum,
            )
            for o in range(0, length, cfg.chunk_size)
        ]
        meta.blocks[int(b)] = BlockMeta(int(b), tuple(chunks))
    return meta


def _remap(obj: Any, mapping: Dict[str, str]) -> Any:
    if isinstance(obj, str):
        return mapping.get(obj, obj)
    if isinstance(obj, list):
        return [_remap(x, mapping) for x in obj]
    if isinstance(obj, dict):
        return {mapping.get(k, k): _remap(v, mapping) for k, v in obj.items()}
    return obj


def mount_paths(
    template: Optional[str], datanodes: int, volumes: int
) -> Dict[Tuple[int, int], Optional[str]]:
    """The path each volume (datanode d, volume v) will be mounted at, from `template` with
    `{datanode}` and `{volume}` replaced by the indexes (None for each without a template:
    the `.container` files then record where the volume is written). GeneratorError for a
    template that is not absolute, names another field, or mounts two volumes of one
    datanode at the same path."""
    if template is None:
        return {(d, v): None for d in range(datanodes) for v in range(volumes)}
    try:
        fields = [
            (name, spec, conv)
            for _, name, spec, conv in string.Formatter().parse(template)
            if name is not None
        ]
    except ValueError as exc:
        raise GeneratorError(f"--mount-path {template!r}: {exc}") from None
    if any(name not in ("datanode", "volume") or spec or conv for name, spec, conv in fields):
        raise GeneratorError(
            f"--mount-path {template!r}: only {{datanode}} and {{volume}} "
            f"may be used (no other field, attribute or format)"
        )
    out: Dict[Tuple[int, int], Optional[str]] = {}
    for d in range(datanodes):
        seen: Dict[str, int] = {}
        for v in range(volumes):
            path = template.format(datanode=d, volume=v)
            parts = path.split("/")
            if not path.startswith("/") or "\0" in path or any(p in (".", "..") for p in parts):
                raise GeneratorError(
                    f"--mount-path {template!r} gives {path!r}: not an "
                    f"absolute path without . or .. components"
                )
            path = os.path.normpath(path)
            if path in seen:
                raise GeneratorError(
                    f"--mount-path {template!r} mounts volumes {seen[path]} "
                    f"and {v} of datanode {d} at the same path {path} (use "
                    f"{{volume}})"
                )
            seen[path] = v
            out[(d, v)] = path
    return out


def check_available() -> None:
    """GeneratorError unless the ozone extra (rocksdict, protobuf, PyYAML) is importable."""
    try:
        from merkle.replica.ozone import writer  # noqa: F401  (protobuf, YAML)
        from merkle.replica.ozone.rocks import VolumeDBError, load_rocksdict
    except ImportError as exc:
        raise GeneratorError(
            f"the ozone layout needs {exc.name or 'its extra'}: pip install 'crcmerkle[ozone]'"
        ) from None
    try:
        load_rocksdict()
    except VolumeDBError as exc:
        raise GeneratorError(str(exc)) from None


def convert_cluster(
    staging: Path, out: Path, manifest: Dict[str, Any], cfg: Any, ozone_faults: Dict[str, int]
) -> Dict[str, Any]:
    """Move the crcmerkle-layout cluster in `staging` onto datanode volumes under `out`,
    inject `ozone_faults`, and return the manifest with the new replica paths."""
    from merkle.replica.ozone.rocks import VolumeDBError
    from merkle.replica.ozone.writer import VolumeWriter

    check_available()

    rng = random.Random(f"ozone/{cfg.seed}")
    cluster_id = f"CID-{_uuid(rng)}"
    faults_by_rep: Dict[str, List[str]] = {}
    for f in manifest["faults"]:
        for r in f.get("replicas", []):
            faults_by_rep.setdefault(r, []).append(f["type"])
    writers: Dict[Tuple[int, int], Any] = {}
    mounts = mount_paths(getattr(cfg, "mount_path", None), cfg.datanodes, cfg.volumes)
    datanodes: Dict[str, str] = {}
    for d in range(cfg.datanodes):
        dn_uuid = _uuid(rng)
        datanodes[f"dn{d}"] = dn_uuid
        for v in range(cfg.volumes):
            writers[(d, v)] = VolumeWriter(
                out / f"dn{d}" / f"vol{v}",
                cluster_id=cluster_id,
                storage_id=f"DS-{_uuid(rng)}",
                datanode_uuid=dn_uuid,
                ctime_ms=1_700_000_000_000 + d * 1000 + v,
                mount_path=mounts[(d, v)],
            )
    mapping: Dict[str, str] = {}
    replicas: Dict[str, Any] = {}  # new path -> OzoneReplica
    corrupt_meta: List[Tuple[Any, int, str]] = []
    for cid_s, c in sorted(manifest["containers"].items(), key=lambda kv: int(kv[0])):
        cid = int(cid_s)
        for rep in c["replicas"]:
            dn, vol, _ = rep.split("/")
            w = writers[(int(dn[2:]), int(vol[3:]))]
            src = staging / rep
            kinds = faults_by_rep.get(rep, [])
            try:
                meta = read_blockmeta(src / "metadata" / f"{cid}.blocks", cid)
            except BlockMetaError:  # a metadata fault: the Ozone form is injected below
                meta = _pristine_meta(cfg, cid, c["blocks"], c["algorithm"])
            tree_path = src / "metadata" / f"{cid}.tree"
            tree = tree_path.read_bytes() if tree_path.exists() else None
            root = None
            if tree is not None:
                try:
                    root = tree_from_bytes(tree).data_checksum
                except TreeFileError:
                    pass
            files = {
                b: src / "chunks" / f"{b}.block"
                for b in meta.blocks
                if (src / "chunks" / f"{b}.block").exists()
            }
            r = w.add_container(meta, block_files=files, tree=tree, data_checksum=root)
            new = os.fspath(r.root.relative_to(out))
            mapping[rep] = new
            replicas[new] = (w, r, meta)
            if "meta-missing" in kinds:
                r.container_file.unlink()
            if "meta-corrupt" in kinds:
                corrupt_meta.append((w, cid, new))
    corrupt_block: Dict[str, int] = {}  # new path -> the block whose row is cut
    for w, cid, new in corrupt_meta:
        # drop the last byte of one value: the `size` varint is cut, never a valid message
        key = min(k for k in w.block_rows if k.startswith(block_key(cid, 0)[:9]))
        w.block_rows[key] = w.block_rows[key][:-1]
        corrupt_block[new] = int(key[9:])
    manifest = _remap(manifest, mapping)
    # an undecodable row is METADATA_CORRUPT of its own block (the other blocks are verified)
    for new, bid in corrupt_block.items():
        for e in manifest["expected_errors"].get(new, []):
            if e["error"] == METADATA_CORRUPT:
                e["block_id"] = bid
        for f in manifest["faults"]:
            for e in f.get("expected", []):
                if e.get("replica") == new and e["error"] == METADATA_CORRUPT:
                    e["block_id"] = bid
    for errs in manifest["expected_errors"].values():
        for e in errs:
            if e["error"] == "METADATA_MISSING":
                e.update(error=CONTAINER_FILE_MISSING)
    for f in manifest["faults"]:
        for e in f.get("expected", []):
            if e["error"] == "METADATA_MISSING":
                e["error"] = CONTAINER_FILE_MISSING
    _inject_ozone(rng, manifest, replicas, ozone_faults, GeneratorError)
    try:
        for w in writers.values():
            w.close()
    except VolumeDBError as exc:
        raise GeneratorError(str(exc)) from None
    shutil.rmtree(staging)
    manifest["layout"] = "ozone"
    manifest["cluster_id"] = cluster_id
    # the generator's datanode directories (dn0, ...) and the identity each one's volumes
    # record (VERSION's datanodeUuid): what every job's rows name them by
    manifest["datanode_uuids"] = datanodes
    if getattr(cfg, "mount_path", None) is not None:
        manifest["mount_paths"] = {f"dn{d}/vol{v}": m for (d, v), m in mounts.items()}
    return manifest


def _inject_ozone(
    rng: random.Random,
    manifest: Dict[str, Any],
    replicas: Dict[str, Any],
    faults: Dict[str, int],
    error_type: Any,
) -> None:
    expected = manifest["expected_errors"]
    by_container: Dict[int, List[Dict[str, Any]]] = {}
    for f in manifest["faults"]:
        by_container.setdefault(int(f["container_id"]), []).append(f)
    unusable: Set[str] = set()

    def may_lose(rep_path: str, cid: int) -> bool:
        """Can this replica become unusable without changing any other fault's truth? Not
        if it has a fault itself, shares its container with a metadata-like fault, a
        tombstone or an extra block, or holds the last healthy copy for a fault."""
        reps = manifest["containers"][str(cid)]["replicas"]
        if len(reps) < 2:
            return False
        for f in by_container.get(cid, []):
            if rep_path in f.get("replicas", []) or f["type"] in (
                "meta-corrupt",
                "meta-missing",
                "tombstone",
                "extra-block",
                "container-checksum",
                "open-container",
            ):
                return False
            if not set(reps) - set(f.get("replicas", [])) - {rep_path}:
                return False
        return True

    def expect(rep: str, kind: str, block: Optional[int] = None) -> Dict[str, Any]:
        e = {"error": kind, "block_id": block, "offset": None}
        expected[rep].append(e)
        return dict(e, replica=rep)

    def record(
        kind: str, cid: int, reps: List[str], exp: List[Dict[str, Any]], **extra: Any
    ) -> None:
        f = dict(
            id=len(manifest["faults"]),
            type=kind,
            container_id=cid,
            replicas=reps,
            expected=exp,
            **extra,
        )
        manifest["faults"].append(f)
        by_container.setdefault(cid, []).append(f)

    for kind in OZONE_FAULT_TYPES:
        for _ in range(faults.get(kind, 0)):
            if kind in ("container-checksum", "open-container"):
                pool = sorted(
                    r for r, (_w, rep, _m) in replicas.items() if may_lose(r, rep.container_id)
                )
            else:
                pool = sorted(
                    r
                    for r, (_w, rep, _m) in replicas.items()
                    if r not in unusable
                    and not any(
                        e["error"].startswith(("METADATA", "CONTAINER")) for e in expected[r]
                    )
                )
            if not pool:
                raise error_type(
                    f"cannot place another {kind!r} fault: the cluster is too "
                    f"small (more containers, fewer faults)"
                )
            rep_path = pool[rng.randrange(len(pool))]
            w, rep, meta = replicas[rep_path]
            cid = rep.container_id
            if kind == "container-checksum":
                text = rep.container_file.read_bytes()
                # maxSize 5368709120 -> 5368709121: valid YAML, stale checksum
                rep.container_file.write_bytes(
                    text.replace(b"maxSize: 5368709120", b"maxSize: 5368709121", 1)
                )
                unusable.add(rep_path)
                record(kind, cid, [rep_path], [expect(rep_path, CONTAINER_FILE_CORRUPT)])
            elif kind == "open-container":
                from merkle.replica.ozone.containerfile import (
                    parse_container_file,
                    render_container_file,
                )

                fields = dict(parse_container_file(rep.container_file.read_bytes()).fields)
                fields["state"] = "OPEN"
                rep.container_file.write_bytes(render_container_file(fields))
                unusable.add(rep_path)
                record(kind, cid, [rep_path], [expect(rep_path, CONTAINER_NOT_SCANNED)])
            else:
                bid = 5000 + max([0, *meta.blocks]) + rng.randrange(1000)
                while bid in meta.blocks:
                    bid += 1
                data = rng.randbytes(rng.randint(1, 8192))
                if kind == "db-entry-without-file":
                    extra = ContainerMeta(
                        cid,
                        {bid: BlockMeta(bid, (ChunkMeta.from_data(0, data, algorithm="crc32"),))},
                    )
                    meta.blocks[bid] = extra.blocks[bid]
                    # as a PutBlock does: the row, and the container's counters with it
                    w.put_blocks(meta)
                    w.put_counters(meta)
                    record(
                        kind,
                        cid,
                        [rep_path],
                        [expect(rep_path, MISSING_DATA_FILE, bid)],
                        block_id=bid,
                    )
                else:
                    (rep.chunks_dir / f"{bid}.block").write_bytes(data)
                    record(
                        kind,
                        cid,
                        [rep_path],
                        [expect(rep_path, UNREFERENCED_DATA_FILE, bid)],
                        block_id=bid,
                    )

    def key(e: Dict[str, Any]) -> Tuple[str, int, int]:
        return (e["error"], e["block_id"] or 0, e["offset"] or 0)

    for rep in expected:
        expected[rep].sort(key=key)
