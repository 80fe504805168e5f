"""The copy check's verdict on each name: a key and its copy side by side (or one of them
alone), decided from sizes and the full-object CRCs both sides hold.

Verdicts, in the order they are decided:
- MISSING: a key with no object of its name in the target;
- EXTRA: an object in the target no key maps to;
- SIZE_DIFFERS: both sizes known and not equal (OM's size against the target's; no scan
  needed: a copy of another length is not the key, whatever else holds);
- UNVERIFIED: the source side cannot be vouched for (a block missing from the scan, no replica
  of it verified, verified replicas disagreeing, an OM record that cannot be read as a key, an
  erasure-coded key) or the target could not describe the object: the reason says which;
- MATCH: every algorithm both sides hold is equal (at least one);
- MISMATCH: an algorithm both sides hold differs;
- NOT_COMPARABLE: no algorithm in common: which ones each side has, and why.
Comparable pairs are equal exactly when the bytes are equal (a CRC of the same algorithm over
the whole object); an MD5 ETag, a SHA or an S3 composite value whose parts are unknown never
is, and is named, not guessed from.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from merkle.copies.fold import ALGORITHMS

__all__ = ["FINDINGS", "SOURCES", "VERDICTS", "VERDICT_SCHEMA", "decide"]

MATCH, MISMATCH, MISSING, EXTRA = "MATCH", "MISMATCH", "MISSING", "EXTRA"
SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED = "SIZE_DIFFERS", "NOT_COMPARABLE", "UNVERIFIED"
VERDICTS = (MATCH, MISMATCH, MISSING, EXTRA, SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED)
#: the verdicts that are not a proof of an identical copy
FINDINGS = tuple(v for v in VERDICTS if v != MATCH)

#: one row per name: the key's Ozone name (null for EXTRA), sizes of both sides, the
#: algorithm(s) compared and both values (hex: those of the first algorithm listed), the
#: reason, `ozone_note` when `ozone fs -checksum` would not give the CRC of the bytes, the
#: target's requests / bytes read, and `sources`: which replica spoke for each block of the
#: key, in key order (`CONTAINER/BLOCK: DATANODE REPLICA`, or `CONTAINER/BLOCK: none`)
VERDICT_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("ozone_name", pa.string()),
        ("verdict", pa.string()),
        ("algorithm", pa.string()),
        ("source_value", pa.string()),
        ("target_value", pa.string()),
        ("size", pa.int64()),
        ("target_size", pa.int64()),
        ("detail", pa.string()),
        ("ozone_note", pa.string()),
        ("requests", pa.int64()),
        ("bytes_read", pa.int64()),
        ("sources", pa.list_(pa.string())),
    ]
)

#: the source-side columns `decide` reads (the key table joined with the composed CRCs)
SOURCE_COLUMNS = (
    "key_id",
    "name",
    "ozone_name",
    "size",
    "blocks",
    "reason",
    "crc32",
    "crc32c",
    "crc64nvme",
    "recorded_type",
    "unverified",
    "ozone_note",
    "composite",
    "composite_note",
    "composed",
)
#: passed through to the verdict when the joined rows carry it (SOURCE_SCHEMA's `sources`)
SOURCES = "sources"
#: the target-side columns (merkle.copies.targets.TARGET_SCHEMA, prefixed `t_`)
TARGET_COLUMNS = (
    "t_name",
    "t_size",
    "t_crc32",
    "t_crc32c",
    "t_crc64nvme",
    "t_composite_algorithm",
    "t_composite_crc",
    "t_parts",
    "t_part_sizes",
    "t_other",
    "t_requests",
    "t_bytes_read",
    "t_error",
)


#: the end of the reason of a key that shares its target name with other keys (--map rules
#: that merge prefixes): decided before the sizes, which would compare it with another's copy
SHARED_NAME = "keys are given this name (--map): which one the object copies cannot be told"


def _hex(v: Optional[bytes]) -> Optional[str]:
    return None if v is None else "0x" + bytes(v).hex()


def _source_has(row: Dict[str, Any]) -> List[str]:
    return [a for a in ALGORITHMS if row[a] is not None]


def _target_has(row: Dict[str, Any]) -> List[str]:
    return [a for a in ALGORITHMS if row["t_" + a] is not None]


def _decide_one(
    row: Dict[str, Any],
) -> Tuple[str, Optional[str], Optional[str], Optional[str], Optional[str]]:
    """(verdict, algorithm, source value, target value, detail) of one joined row."""
    if row["t_name"] is None:
        if row["name"] is None:
            return UNVERIFIED, None, None, None, str(row["reason"] or "no name")
        return MISSING, None, None, None, "no object of this name in the target"
    if row["key_id"] is None:
        return EXTRA, None, None, None, "no key maps to this object"
    if row["reason"] is not None and str(row["reason"]).endswith(SHARED_NAME):
        return UNVERIFIED, None, None, None, str(row["reason"])
    size, tsize = row["size"], row["t_size"]
    if size is not None and tsize is not None and size != tsize:
        return SIZE_DIFFERS, None, None, None, f"{size} bytes in Ozone, {tsize} in the target"
    if row["reason"] is not None:
        return UNVERIFIED, None, None, None, str(row["reason"])
    if row["t_error"] is not None:
        return UNVERIFIED, None, None, None, f"target: {row['t_error']}"
    if not row["composed"] and (row["blocks"] or 0) > 0:
        return UNVERIFIED, None, None, None, "none of its blocks is in the scan output"
    if row["unverified"] is not None:
        return UNVERIFIED, None, None, None, str(row["unverified"])
    src, tgt = _source_has(row), _target_has(row)
    common = [a for a in src if a in tgt]
    if common:
        differ = [a for a in common if bytes(row[a]) != bytes(row["t_" + a])]
        shown = differ[0] if differ else common[0]
        values = (_hex(row[shown]), _hex(row["t_" + shown]))
        if differ:
            return (
                MISMATCH,
                ",".join(differ),
                *values,
                f"{shown} differs: the copy's bytes are not the key's",
            )
        return MATCH, ",".join(common), *values, None
    if row["composite"] is not None and row["t_composite_crc"] is not None:
        # S3's composite made from the key's windows with the parts' sizes the store gave
        alg = f"{str(row['t_composite_algorithm']).lower()} composite of {row['t_parts']} parts"
        values = (_hex(row["composite"]), _hex(row["t_composite_crc"]))
        if bytes(row["composite"]) != bytes(row["t_composite_crc"]):
            return MISMATCH, alg, *values, "the copy's bytes are not the key's"
        return MATCH, alg, *values, None
    return NOT_COMPARABLE, None, None, None, _why_not(row, src, tgt)


def _why_not(row: Dict[str, Any], src: List[str], tgt: List[str]) -> str:
    recorded = row["recorded_type"]
    if src:
        have = ", ".join(src) + (f" (recorded {recorded})" if recorded else "")
    else:
        have = f"no CRC (recorded {recorded})" if recorded else "no CRC"
    parts = [f"Ozone side has {have}"]
    theirs: List[str] = list(tgt)
    if row["t_composite_algorithm"] is not None:
        why = (
            str(row["composite_note"])
            if row["composite_note"] is not None
            else "the store gave neither the parts' values nor their sizes"
            if row["t_part_sizes"] is None
            else f"the Ozone side has no {str(row['t_composite_algorithm']).lower()}"
        )
        theirs.append(
            f"composite {str(row['t_composite_algorithm']).lower()} of "
            f"{row['t_parts']} parts ({why})"
        )
    if row["t_other"] is not None:
        theirs.append(str(row["t_other"]))
    parts.append("target has " + (", ".join(theirs) if theirs else "no checksum"))
    hint = ""
    wanted = list(tgt)
    if row["t_composite_algorithm"] is not None:
        wanted.append(str(row["t_composite_algorithm"]).lower())
    missing = [a for a in wanted if a in ALGORITHMS and a not in src]
    if missing and not any(a in src for a in wanted):
        hint = f"; scan the datanodes with --also {missing[0]} to compare"
    return "; ".join(parts) + hint


def _valid(batch: pa.RecordBatch | pa.Table, name: str) -> np.ndarray:
    return np.asarray(batch.column(name).is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _plain_matches(batch: pa.RecordBatch | pa.Table) -> Tuple[np.ndarray, List[List[str]]]:
    """Rows that are MATCH on their face, found column by column (most rows of a copy
    check): both sides present and vouched for, equal sizes, at least one algorithm on both
    sides and every such one equal. Returns the mask and, per row, its common algorithms."""
    n = batch.num_rows
    ok = (
        _valid(batch, "key_id")
        & _valid(batch, "t_name")
        & ~_valid(batch, "reason")
        & ~_valid(batch, "t_error")
        & ~_valid(batch, "unverified")
    )
    ok &= np.asarray(
        batch.column("composed").fill_null(False).to_numpy(zero_copy_only=False), dtype=bool
    )
    size_eq = pc.equal(batch.column("size"), batch.column("t_size"))
    ok &= np.asarray(size_eq.fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)
    any_common = np.zeros(n, dtype=bool)
    all_equal = np.ones(n, dtype=bool)
    common: Dict[str, np.ndarray] = {}
    for a in ALGORITHMS:
        both = _valid(batch, a) & _valid(batch, "t_" + a)
        eq = np.asarray(
            pc.equal(batch.column(a), batch.column("t_" + a))
            .fill_null(False)
            .to_numpy(zero_copy_only=False),
            dtype=bool,
        )
        common[a] = both
        any_common |= both
        all_equal &= ~both | eq
    mask = ok & any_common & all_equal
    algs = [[a for a in ALGORITHMS if common[a][i]] for i in np.flatnonzero(mask).tolist()]
    return mask, algs


def decide(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """VERDICT_SCHEMA rows for joined rows (SOURCE_COLUMNS + TARGET_COLUMNS; a side absent is
    all null). The plain matches are found column by column; only the other rows are
    decided one by one (_decide_one)."""
    if isinstance(batch, pa.Table):
        batches = batch.combine_chunks().to_batches()
        batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=batch.schema)
    n = batch.num_rows
    mask, match_algs = _plain_matches(batch)
    rest = np.flatnonzero(~mask).tolist()
    cols = (
        {
            name: batch.column(name).take(pa.array(rest, pa.int64())).to_pylist()
            for name in SOURCE_COLUMNS + TARGET_COLUMNS
        }
        if rest
        else {}
    )
    verdict: List[Optional[str]] = [MATCH] * n
    alg_col: List[Optional[str]] = [None] * n
    sval: List[Optional[str]] = [None] * n
    tval: List[Optional[str]] = [None] * n
    detail: List[Optional[str]] = [None] * n
    for i, algs in zip(np.flatnonzero(mask).tolist(), match_algs):
        alg_col[i] = ",".join(algs)
    if match_algs:
        first = {a: batch.column(a).to_pylist() for a in ALGORITHMS}
        tfirst = {a: batch.column("t_" + a).to_pylist() for a in ALGORITHMS}
        for i, algs in zip(np.flatnonzero(mask).tolist(), match_algs):
            sval[i] = _hex(first[algs[0]][i])
            tval[i] = _hex(tfirst[algs[0]][i])
    for j, i in enumerate(rest):
        row = {name: cols[name][j] for name in cols}
        if (
            row["key_id"] is not None
            and not row["composed"]
            and row["blocks"] == 0
            and row["size"] == 0
            and row["reason"] is None
        ):
            # a key of no blocks holds no bytes: the CRC of nothing is 0 in every algorithm
            for a in ALGORITHMS:
                row[a] = bytes(8 if a == "crc64nvme" else 4)
        verdict[i], alg_col[i], sval[i], tval[i], detail[i] = _decide_one(row)
    name = pc.coalesce(batch.column("name"), batch.column("t_name"))
    return pa.RecordBatch.from_pydict(
        {
            "name": name,
            "ozone_name": batch.column("ozone_name"),
            "verdict": verdict,
            "algorithm": alg_col,
            "source_value": sval,
            "target_value": tval,
            "size": batch.column("size").cast(pa.int64()),
            "target_size": batch.column("t_size").cast(pa.int64()),
            "detail": detail,
            "ozone_note": batch.column("ozone_note"),
            "requests": pc.coalesce(batch.column("t_requests"), 0).cast(pa.int64()),
            "bytes_read": pc.coalesce(batch.column("t_bytes_read"), 0).cast(pa.int64()),
            "sources": (
                batch.column(SOURCES)
                if SOURCES in batch.schema.names
                else pa.nulls(n, pa.list_(pa.string()))
            ),
        },
        schema=VERDICT_SCHEMA,
    )
