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

from typing import Dict, List, Optional, Tuple

import pyarrow as pa

from merkle.copies.fold import ALGORITHMS

__all__ = ["FINDINGS", "VERDICTS", "VERDICT_SCHEMA", "decide"]

MATCH, MISMATCH, MISSING, EXTRA = "MATCH", "MISMATCH", "MISSING", "EXTRA"
SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED = "SIZE_DIFFERS", "NOT_COMPARABLE", "UNVERIFIED"
VERDICTS = (MATCH, MISMATCH, MISSING, EXTRA, SIZE_DIFFERS, NOT_COMPARABLE, UNVERIFIED)
#: the verdicts that are not a proof of an identical copy
FINDINGS = tuple(v for v in VERDICTS if v != MATCH)

#: one row per name: the key's Ozone name (null for EXTRA), sizes of both sides, the
#: algorithm(s) compared and both values (hex), the reason, `ozone_note` when `ozone fs
#: -checksum` would not give the CRC of the bytes, and the target's requests / bytes read
VERDICT_SCHEMA = pa.schema([
    ("name", pa.string()), ("ozone_name", pa.string()), ("verdict", pa.string()),
    ("algorithm", pa.string()), ("source_value", pa.string()), ("target_value", pa.string()),
    ("size", pa.int64()), ("target_size", pa.int64()), ("detail", pa.string()),
    ("ozone_note", pa.string()), ("requests", pa.int64()), ("bytes_read", pa.int64())])

#: the source-side columns `decide` reads (the key table joined with the composed CRCs)
SOURCE_COLUMNS = ("key_id", "name", "ozone_name", "size", "blocks", "reason", "crc32",
                  "crc32c", "crc64nvme", "recorded_type", "unverified", "ozone_note",
                  "composite", "composite_note", "composed")
#: the target-side columns (merkle.copies.targets.TARGET_SCHEMA, prefixed `t_`)
TARGET_COLUMNS = ("t_name", "t_size", "t_crc32", "t_crc32c", "t_crc64nvme",
                  "t_composite_algorithm", "t_composite_crc", "t_parts", "t_part_sizes",
                  "t_other", "t_requests", "t_bytes_read", "t_error")


def _hex(v: Optional[bytes]) -> Optional[str]:
    return None if v is None else "0x" + bytes(v).hex()


def _source_has(row: Dict[str, object]) -> List[str]:
    return [a for a in ALGORITHMS if row[a] is not None]


def _target_has(row: Dict[str, object]) -> List[str]:
    return [a for a in ALGORITHMS if row["t_" + a] is not None]


def _decide_one(row: Dict[str, object]) -> Tuple[str, Optional[str], Optional[str],
                                                 Optional[str], Optional[str]]:
    """(verdict, algorithm, source value, target value, detail) of one joined row."""
    if row["t_name"] is None:
        if row["name"] is None:
            return UNVERIFIED, None, None, None, str(row["reason"] or "no name")
        return MISSING, None, None, None, "no object of this name in the target"
    if row["key_id"] is None:
        return EXTRA, None, None, None, "no key maps to this object"
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
        differ = [a for a in common if bytes(row[a]) != bytes(row["t_" + a])]  # type: ignore[arg-type]
        shown = differ[0] if differ else common[0]
        values = (_hex(row[shown]), _hex(row["t_" + shown]))  # type: ignore[arg-type]
        if differ:
            return (MISMATCH, ",".join(differ), *values,
                    f"{shown} differs: the copy's bytes are not the key's")
        return MATCH, ",".join(common), *values, None
    if row["composite"] is not None and row["t_composite_crc"] is not None:
        # S3's composite made from the key's windows with the parts' sizes the store gave
        alg = f"{str(row['t_composite_algorithm']).lower()} composite of {row['t_parts']} parts"
        values = (_hex(row["composite"]), _hex(row["t_composite_crc"]))  # type: ignore[arg-type]
        if bytes(row["composite"]) != bytes(row["t_composite_crc"]):  # type: ignore[arg-type]
            return MISMATCH, alg, *values, "the copy's bytes are not the key's"
        return MATCH, alg, *values, None
    return NOT_COMPARABLE, None, None, None, _why_not(row, src, tgt)


def _why_not(row: Dict[str, object], src: List[str], tgt: List[str]) -> str:
    recorded = row["recorded_type"]
    if src:
        have = ", ".join(src) + (f" (recorded {recorded})" if recorded else "")
    else:
        have = f"no CRC (recorded {recorded})" if recorded else "no CRC"
    parts = [f"Ozone side has {have}"]
    theirs: List[str] = list(tgt)
    if row["t_composite_algorithm"] is not None:
        why = (str(row["composite_note"]) if row["composite_note"] is not None
               else "the store gave neither the parts' values nor their sizes"
               if row["t_part_sizes"] is None
               else f"the Ozone side has no {str(row['t_composite_algorithm']).lower()}")
        theirs.append(f"composite {str(row['t_composite_algorithm']).lower()} of "
                      f"{row['t_parts']} parts ({why})")
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


def decide(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """VERDICT_SCHEMA rows for joined rows (SOURCE_COLUMNS + TARGET_COLUMNS; a side absent is
    all null)."""
    cols = {name: batch.column(name).to_pylist() for name in SOURCE_COLUMNS + TARGET_COLUMNS}
    n = batch.num_rows
    out: Dict[str, list] = {f.name: [] for f in VERDICT_SCHEMA}
    for i in range(n):
        row = {name: cols[name][i] for name in cols}
        if row["key_id"] is not None and not row["composed"] and row["blocks"] == 0 \
                and row["size"] == 0 and row["reason"] is None:
            # a key of no blocks holds no bytes: the CRC of nothing is 0 in every algorithm
            for a in ALGORITHMS:
                row[a] = bytes(8 if a == "crc64nvme" else 4)
        verdict, alg, sv, tv, detail = _decide_one(row)
        out["name"].append(row["name"] if row["name"] is not None else row["t_name"])
        out["ozone_name"].append(row["ozone_name"])
        out["verdict"].append(verdict)
        out["algorithm"].append(alg)
        out["source_value"].append(sv)
        out["target_value"].append(tv)
        out["size"].append(row["size"])
        out["target_size"].append(row["t_size"])
        out["detail"].append(detail)
        out["ozone_note"].append(row["ozone_note"])
        out["requests"].append(row["t_requests"] or 0)
        out["bytes_read"].append(row["t_bytes_read"] or 0)
    return pa.RecordBatch.from_pydict(out, schema=VERDICT_SCHEMA)
