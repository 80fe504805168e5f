"""Ozone's key map as the copy check takes it: two Arrow tables (a row per key, a row per block
of each key's latest version) read from an OM DB checkpoint, each key given the name its copy
has in the target (`NameMap`, the `--map SOURCE_PREFIX=TARGET_PREFIX` rules).

A key name is data: it is compared with the target's names, never joined to a path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa

__all__ = ["KEY_BLOCK_SCHEMA", "KEY_SCHEMA", "MapStats", "NameMap", "key_tables", "parse_map"]

#: the largest size or length a key map holds (Arrow int64); OM's uint64 fields may say more
INT64_MAX = 2**63 - 1

#: one row per key: `name` its target name (after --map), `ozone_name` /volume/bucket/path,
#: `size` OM's dataSize, `reason` why the OM record itself cannot be verified (a broken FSO
#: chain, a size that is not its blocks', encryption, erasure coding), `ozone_checksum` the
#: file checksum OM stored for the key, if any (as `COMPOSITE-CRC32C:0x...`)
KEY_SCHEMA = pa.schema(
    [
        ("key_id", pa.int64()),
        ("name", pa.string()),
        ("ozone_name", pa.string()),
        ("size", pa.int64()),
        ("replication", pa.string()),
        ("blocks", pa.int32()),
        ("reason", pa.string()),
        ("ozone_checksum", pa.string()),
    ]
)
#: one row per block of a key's latest version, in key order (`seq`)
KEY_BLOCK_SCHEMA = pa.schema(
    [
        ("key_id", pa.int64()),
        ("seq", pa.int32()),
        ("container", pa.int64()),
        ("block", pa.int64()),
        ("block_length", pa.int64()),
    ]
)

#: why an erasure-coded key is not composed: its bytes are the data cells of each stripe in
#: replica-index order, and the scan tables do not say which index each replica holds
EC_REASON = (
    "erasure-coded: the scan output does not record which replica index each "
    "container replica holds, so the cells cannot be put in key order"
)
ENCRYPTED_REASON = (
    "stored encrypted (fileEncryptionInfo): the datanodes' checksums are of "
    "the ciphertext, not of the bytes a copy holds"
)


def parse_map(rules: Sequence[str]) -> NameMap:
    """`SOURCE_PREFIX=TARGET_PREFIX` rules (ValueError, one line, for a malformed one)."""
    pairs: List[Tuple[str, str]] = []
    for rule in rules:
        src, sep, dst = rule.partition("=")
        if not sep or not src.strip("/"):
            raise ValueError(
                f"--map wants SOURCE_PREFIX=TARGET_PREFIX (a non-empty source), not {rule!r}"
            )
        pairs.append((src.lstrip("/"), dst.lstrip("/")))
    return NameMap(tuple(pairs))


@dataclass(frozen=True)
class NameMap:
    """Ozone names (`volume/bucket/path`, without the leading '/') to target names: the
    longest matching source prefix is replaced by its target prefix; with no rules every key
    keeps its name. With rules, a key under none of them is out of scope (None), and so is a
    target object under none of the target prefixes (`in_scope`)."""

    rules: Tuple[Tuple[str, str], ...] = ()

    def target_name(self, ozone_name: str) -> Optional[str]:
        name = ozone_name.lstrip("/")
        if not self.rules:
            return name
        best = self.rule_of(ozone_name)
        if best is None:
            return None
        src, dst = self.rules[best]
        return dst + name[len(src) :]

    def rule_of(self, ozone_name: str) -> Optional[int]:
        """The index of the rule that names this key (the longest matching source prefix;
        the first given of equal ones), None when none matches (or there are no rules)."""
        name = ozone_name.lstrip("/")
        best: Optional[int] = None
        for i, (src, _) in enumerate(self.rules):
            if _under(name, src) and (best is None or len(src) > len(self.rules[best][0])):
                best = i
        return best

    def in_scope(self, target_name: str) -> bool:
        return not self.rules or any(_under(target_name, dst) for _, dst in self.rules)


def _under(name: str, prefix: str) -> bool:
    """`prefix` names a directory-like prefix of `name`: `a/b` is under `a/` and `a`, not
    `a/bc` under `a/b` (a prefix without a trailing '/' stops at a '/')."""
    if not prefix:
        return True
    if not name.startswith(prefix):
        return False
    return prefix.endswith("/") or len(name) == len(prefix) or name[len(prefix)] == "/"


@dataclass
class MapStats:
    """What the key map took from the OM DB: `keys` kept (in scope), `out_of_scope` left
    out by --map, and per rule (in the order given) the keys it named."""

    rules: Tuple[Tuple[str, str], ...] = ()
    keys: int = 0
    out_of_scope: int = 0
    named: List[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.named:
            self.named = [0] * len(self.rules)

    def problem(self) -> Optional[str]:
        """One line when the map leaves nothing to prove: a rule that named no key (a
        mistyped prefix), or no key at all in scope; None when every rule named a key."""
        for (src, dst), n in zip(self.rules, self.named):
            if n == 0:
                return (
                    f"--map /{src}={dst}: no key of the OM DB checkpoint is under "
                    f"/{src} (or a longer or earlier --map rule names each one): check "
                    f"the prefix"
                )
        if self.keys == 0:
            left = f" ({self.out_of_scope} left out by --map)" if self.out_of_scope else ""
            return f"the OM DB checkpoint gives no key to compare{left}"
        return None


def _out_of_range(key: object) -> Optional[str]:
    """Why a key's size or block lengths cannot be held (OM's fields are uint64: a record
    may claim up to 2^64-1 bytes), None when they can."""
    size = int(key.size)  # type: ignore[attr-defined]
    if not 0 <= size <= INT64_MAX:
        return f"dataSize {size} is out of range (more than 2^63-1 bytes)"
    total = 0
    for blk in key.blocks:  # type: ignore[attr-defined]
        length = int(blk.length)
        if not 0 <= length <= INT64_MAX:
            return f"a block length {length} is out of range (more than 2^63-1 bytes)"
        total += length
    if total > INT64_MAX:
        return f"its blocks' lengths add up to {total} bytes (more than 2^63-1)"
    return None


def key_tables(
    keys: Iterable[object],
    names: NameMap,
    batch_rows: int = 65536,
    stats: Optional[MapStats] = None,
) -> Iterator[Tuple[pa.RecordBatch, pa.RecordBatch]]:
    """(keys, key blocks) batches of KEY_SCHEMA / KEY_BLOCK_SCHEMA from OmKey records
    (merkle.copies.omdb); keys out of the map's scope are left out (and counted in `stats`).
    A key whose size or a block length is out of range is kept with that as its reason and
    no block rows (an UNVERIFIED key, never an error of the whole map)."""
    stats = stats if stats is not None else MapStats(names.rules)
    cols: dict = {f.name: [] for f in KEY_SCHEMA}
    bcols: dict = {f.name: [] for f in KEY_BLOCK_SCHEMA}
    key_id = 0
    for key in keys:
        ozone_name = key.name  # type: ignore[attr-defined]
        target = None
        if key.path is not None and names.rules:  # type: ignore[attr-defined]
            rule = names.rule_of(ozone_name)
            if rule is None:
                stats.out_of_scope += 1
                continue
            stats.named[rule] += 1
            target = names.target_name(ozone_name)
        elif key.path is not None:  # type: ignore[attr-defined]
            target = names.target_name(ozone_name)
        stats.keys += 1
        bad = _out_of_range(key)
        reason = bad or key.reason  # type: ignore[attr-defined]
        if reason is None and key.encrypted:  # type: ignore[attr-defined]
            reason = ENCRYPTED_REASON
        if reason is None and key.replication.type == "EC":  # type: ignore[attr-defined]
            reason = EC_REASON
        checksum = key.file_checksum  # type: ignore[attr-defined]
        cols["key_id"].append(key_id)
        # a key whose path could not be rebuilt has no name to join on: reported on its own
        cols["name"].append(target)
        cols["ozone_name"].append(ozone_name)
        size = int(key.size)  # type: ignore[attr-defined]
        cols["size"].append(size if 0 <= size <= INT64_MAX else None)
        cols["replication"].append(str(key.replication))  # type: ignore[attr-defined]
        cols["blocks"].append(len(key.blocks))  # type: ignore[attr-defined]
        cols["reason"].append(reason)
        cols["ozone_checksum"].append(None if checksum is None else str(checksum))
        for seq, blk in enumerate(() if bad else key.blocks):  # type: ignore[attr-defined]
            bcols["key_id"].append(key_id)
            bcols["seq"].append(seq)
            bcols["container"].append(int(blk.container_id))
            bcols["block"].append(int(blk.local_id))
            bcols["block_length"].append(int(blk.length))
        key_id += 1
        if len(cols["key_id"]) >= batch_rows:
            yield _batches(cols, bcols)
            cols = {f.name: [] for f in KEY_SCHEMA}
            bcols = {f.name: [] for f in KEY_BLOCK_SCHEMA}
    if cols["key_id"]:
        yield _batches(cols, bcols)


def _batches(cols: dict, bcols: dict) -> Tuple[pa.RecordBatch, pa.RecordBatch]:
    return (
        pa.RecordBatch.from_pydict(cols, schema=KEY_SCHEMA),
        pa.RecordBatch.from_pydict(bcols, schema=KEY_BLOCK_SCHEMA),
    )
