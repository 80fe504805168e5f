"""The demo's copy-check step (Ozone layout): the keys of the generated cluster's OM DB are
copied to a directory that stands for the bucket they were migrated to, with four
differences injected (a copy with one byte changed, a key not copied, an object that is no
key, a copy cut short); `crcmerkle spark copycheck` must find exactly those, and call a key
UNVERIFIED exactly when no replica of one of its blocks still holds its bytes (the scan's
verdict). A directory is the one target that is read (S3, GCS and HDFS are compared from the
checksums they keep: tests/spark/test_copycheck.py runs this against an S3-compatible server);
the step says how many bytes it read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

from merkle.replica.fileio import write_atomic

__all__ = ["copy_keys", "run_copy_step"]

#: the injected differences, on the first keys (in name order) with a pristine copy
FAULTS = ("corrupted", "missing", "truncated")
EXTRA_NAME = "vol1/obs1/not-a-key.bin"


def _true_bytes(cluster: Path, manifest: Dict[str, Any], key: Dict[str, Any]) -> bytes:
    """A key's true bytes: from a replica that still holds them, else regenerated (the copy
    was made before the damage)."""
    from merkle.replica.generate import block_data
    from spark_udfs.demo.ozone import generated_key_bytes

    if key["pristine_copy"]:
        return generated_key_bytes(cluster, key)
    return b"".join(block_data(manifest["seed"], c, lid, n) for c, lid, n in key["blocks"])


def copy_keys(cluster: Path, manifest: Dict[str, Any], dest: Path) -> Dict[str, str]:
    """Write every key's copy under `dest` (its name volume/bucket/path) with the injected
    differences; {name: expected verdict}."""
    from merkle.replica.generate import block_data

    keys = sorted(manifest["keys"], key=lambda k: k["name"])
    pristine = [k for k in keys if k["pristine_copy"] and k["size"] >= 2]
    faults = {k["name"]: f for k, f in zip(pristine, FAULTS)}
    expected: Dict[str, str] = {}
    for key in keys:
        name = key["name"].lstrip("/")
        fault = faults.get(key["name"])
        if fault == "missing":
            expected[name] = "MISSING"
            continue
        data = _true_bytes(cluster, manifest, key)
        if fault == "corrupted":
            flipped = bytearray(data)
            flipped[len(data) // 2] ^= 0x5A
            data = bytes(flipped)
            expected[name] = "MISMATCH"
        elif fault == "truncated":
            data = data[: len(data) // 2]
            expected[name] = "SIZE_DIFFERS"
        else:
            expected[name] = "MATCH" if key["pristine_copy"] else "UNVERIFIED"
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
    (dest / EXTRA_NAME).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(dest / EXTRA_NAME, block_data(int(manifest["seed"]) ^ 0x5EED, 0, 0, 4321))
    expected[EXTRA_NAME] = "EXTRA"
    return expected


def run_copy_step(
    work: Path,
    spark: Any,
    cluster: Path,
    manifest: Dict[str, Any],
    scan_dir: Path,
    say: Any,
    step: str,
) -> bool:
    """Copy, check, compare with what was injected; True when the check found exactly it."""
    from merkle.copies.report import to_json
    from merkle.copies.verdicts import FINDINGS
    from spark_udfs.jobs.copycheck import copycheck

    copies = work / "copies"
    expected = copy_keys(cluster, manifest, copies)
    tables = {
        name: spark.read.parquet(str(scan_dir / name))
        for name in ("chunks", "blocks", "containers")
    }
    res = copycheck(spark, str(cluster / "om.db"), tables, str(copies), str(work / "copycheck"))
    got = {r["name"]: r["verdict"] for r in res.verdicts.select("name", "verdict").collect()}
    wrong: List[Tuple[str, str, str]] = sorted(
        (n, expected.get(n, "-"), got.get(n, "-"))
        for n in set(expected) | set(got)
        if expected.get(n) != got.get(n)
    )
    counts = ", ".join(f"{v} {c}" for v, c in res.counts.items() if c)
    say(
        f"{step} copy check: the {res.keys} keys of the OM DB against their copies in "
        f"{copies} (a directory: read in full, {res.bytes_read} bytes; S3, GCS and HDFS "
        f"copies are compared from their stored checksums, reading nothing): {counts}"
    )
    write_atomic(
        work / "copycheck.json",
        to_json(
            {
                "target": res.target,
                "keys": res.keys,
                "objects": res.objects,
                "counts": res.counts,
                "bytes_read": res.bytes_read,
                "first": res.first,
            }
        ).encode(),
    )
    for verdict in FINDINGS:
        for r in res.first.get(verdict, []):
            say(f"  {verdict:<14} {r['name']}: {r['detail']}")
    if wrong:
        say(
            "copy check: differs from what was injected: "
            + "; ".join(f"{n}: expected {e}, got {g}" for n, e, g in wrong[:10])
        )
        return False
    say(
        f"copy check: found exactly the injected differences (1 changed byte, 1 missing, "
        f"1 cut short, 1 extra object) and {sum(v == 'UNVERIFIED' for v in got.values())} "
        f"key(s) no replica vouches for"
    )
    return True
