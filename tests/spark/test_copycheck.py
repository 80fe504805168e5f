"""`crcmerkle spark copycheck` end to end: a generated Ozone cluster with an OM DB, scanned
by `crcmerkle spark scan`, its keys copied to an S3-compatible server on 127.0.0.1 (moto,
real HTTP) in every upload kind with injected differences (tests/copies_fixture.py: the
ground truth); the check must find exactly the injected differences, each key's verdict
derived here independently from the truth and the generator's manifest, with zero data bytes
read and the requests each object cost counted as the server counted them."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

pytest.importorskip("rocksdict")
pytest.importorskip("moto")
pytest.importorskip("boto3")

import pyarrow.parquet as pq  # noqa: E402

from merkle.cli import main  # noqa: E402
from merkle.replica.generate import generate_cluster, parse_faults  # noqa: E402
from merkle.replica.ozone.omkeys import key_bytes  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from copies_fixture import upload_copies  # noqa: E402
from loopback_s3 import LoopbackS3  # noqa: E402

KiB = 1024
BLOCK, CHUNK, BPC = 48 * KiB, 16 * KiB, 4 * KiB
PART = 8 * KiB  # multipart copies: parts of 8 KiB (two windows), the last shorter
# not tests/test_copies_fixture.py's prefix: one moto backend serves every loopback server of
# a process, so objects another test uploaded are still listed
PREFIX = "copycheck"


@pytest.fixture(scope="module")
def world(tmp_path_factory: Any) -> Any:
    """A cluster (CRC32, Ozone's default), its scans (with --also crc64nvme and crc32c, and
    without), and its copies on the loopback S3 server."""
    base = tmp_path_factory.mktemp("copycheck")
    cluster = base / "cluster"
    manifest = generate_cluster(
        cluster,
        layout="ozone",
        om_db=True,
        containers=12,
        seed=3,
        block_size=BLOCK,
        chunk_size=CHUNK,
        bytes_per_checksum=BPC,
        faults=parse_faults("default", "ozone"),
    )
    scans = {}
    for name, also in (("also", ["--also", "crc64nvme", "--also", "crc32c"]), ("plain", [])):
        scans[name] = base / f"scan-{name}"
        assert main(["spark", "scan", str(cluster), "-o", str(scans[name]), *also]) == 1
    with LoopbackS3() as s3:
        truth = upload_copies(s3, cluster, manifest, PREFIX, part_size=PART)
        yield base, cluster, manifest, scans, s3, truth


def check(
    world: Any, capsys: Any, scan: str, out: str, *extra: str, target: str = ""
) -> Tuple[int, Dict[str, Any], Dict[str, Dict[str, Any]]]:
    base, cluster, _, scans, s3, _ = world
    capsys.readouterr()
    rc = main(
        [
            "spark",
            "copycheck",
            "--om-db",
            str(cluster / "om.db"),
            "--scan",
            str(scans[scan]),
            "--target",
            target or s3.uri(PREFIX),
            "-o",
            str(base / out),
            "--json",
            *extra,
        ]
    )
    report = json.loads(capsys.readouterr().out)
    rows = pq.read_table(base / out / "verdicts").to_pylist()
    return rc, report, {r["name"]: r for r in rows}


def window_starts(key: Dict[str, Any]) -> set:
    """Every offset in the key where a checksum window starts, and its end: a block's
    chunks are CHUNK bytes (the last what is left), a chunk's windows BPC."""
    starts, base = set(), 0
    for _, _, length in key["blocks"]:
        for c in range(0, length, CHUNK):
            starts.update(base + c + w for w in range(0, min(CHUNK, length - c), BPC))
        base += length
    starts.add(base)
    return starts


def expected(
    manifest: Dict[str, Any],
    truth: Dict[str, Dict[str, Any]],
    comparable: Tuple[str, ...],
    part_checksums: bool = False,
) -> Dict[str, str]:
    """Each object name's verdict, from the ground truth alone: `comparable` are the
    algorithms the scan gives the keys (CRC32 recorded, plus its --also ones);
    `part_checksums`: the store answers each part's checksum (LoopbackS3.gives_part_checksums),
    so a composite object's full CRC is composed from them and compares whatever its parts'
    boundaries."""
    keys = {k["name"]: k for k in manifest["keys"]}
    out: Dict[str, str] = {}
    for name, t in truth.items():
        if t["fault"] == "extra":
            out[name] = "EXTRA"
        elif t["fault"] == "missing":
            out[name] = "MISSING"
        elif t["fault"] == "truncated":
            out[name] = "SIZE_DIFFERS"
        elif not keys[t["key"]]["pristine_copy"]:
            out[name] = "UNVERIFIED"  # no replica of some block holds its true bytes
        elif t["algorithm"].lower() not in comparable:
            out[name] = "NOT_COMPARABLE"
        elif (
            not part_checksums
            and t["checksum_type"] == "COMPOSITE"
            and t["parts"] > 1
            and not all(b in window_starts(keys[t["key"]]) for b in _cumsum(t["part_sizes"]))
        ):
            out[name] = "NOT_COMPARABLE"  # a part boundary inside a window
        else:
            out[name] = "MISMATCH" if t["fault"] == "corrupted" else "MATCH"
    return out


def _cumsum(sizes: List[int]) -> List[int]:
    out, total = [], 0
    for s in sizes:
        total += s
        out.append(total)
    return out


def test_copycheck_finds_exactly_the_injected_differences(world: Any, capsys: Any) -> None:
    _, _, manifest, _, s3, truth = world
    parts_known = s3.gives_part_checksums()  # before the requests are counted
    requests_before = s3.requests
    rc, report, rows = check(world, capsys, "also", "check-also")
    want = expected(manifest, truth, ("crc32", "crc32c", "crc64nvme"), parts_known)
    got = {name: r["verdict"] for name, r in rows.items()}
    assert got == {f"{n[len(PREFIX) + 1 :]}": v for n, v in want.items()}
    assert rc == 1
    # every kind of difference was injected, and the clean copies were proved
    kinds = {"MATCH", "MISMATCH", "MISSING", "EXTRA", "SIZE_DIFFERS", "UNVERIFIED"}
    assert kinds <= set(got.values())
    assert sum(v == "MATCH" for v in got.values()) >= 12
    # a matched composite was made from the key's windows and the parts' sizes (a store that
    # answers part checksums gives full CRCs instead: then none is composite)
    assert parts_known is not any(
        "composite" in (r["algorithm"] or "") and r["verdict"] == "MATCH" for r in rows.values()
    )
    for name, r in rows.items():
        t = truth[f"{PREFIX}/{name}"]
        if r["verdict"] in ("MATCH", "MISMATCH") and "composite" not in r["algorithm"]:
            alg = r["algorithm"].split(",")[0]
            assert (
                r["source_value"]
                == "0x" + t[f"key_{alg}"].to_bytes(8 if alg == "crc64nvme" else 4, "big").hex()
            )
            if parts_known and t["checksum_type"] == "COMPOSITE" and t["parts"] > 1:
                # the target's full CRC was composed from its parts' checksums
                assert (r["target_value"] == r["source_value"]) is (r["verdict"] == "MATCH")
                continue
            assert r["target_value"] == "0x" + base64.b64decode(t["checksum"].split("-")[0]).hex()
    # zero data bytes read; each object's requests as the server counted them
    assert report["reads_data"] is False and report["cost"]["bytes_read"] == 0
    for name, r in rows.items():
        t = truth[f"{PREFIX}/{name}"]
        if t["fault"] == "missing":
            assert r["requests"] == 0
        elif t["checksum_type"] == "COMPOSITE" and t["parts"] > 1:
            # moto lists no parts: GetObjectAttributes, then HeadObject per part for sizes
            assert r["requests"] == 1 + t["parts"]
        else:
            assert r["requests"] == 1
    total = report["cost"]["object_requests"] + report["cost"]["list_requests"]
    assert s3.requests - requests_before == total
    assert report["counts"] == {v: sum(x == v for x in got.values()) for v in report["counts"]}


def test_without_also_only_crc32_copies_compare(world: Any, capsys: Any) -> None:
    """Ozone CRC32 keys compare with S3 CRC32 values only; the others are NOT_COMPARABLE,
    naming both sides and the scan option that would make them comparable. --map limits the
    check to one bucket (its objects elsewhere are out of scope)."""
    _, _, manifest, _, s3, truth = world
    parts_known = s3.gives_part_checksums()
    rc, report, rows = check(
        world, capsys, "plain", "check-plain", "--map", "/vol1/obs1/=vol1/obs1/"
    )
    want = expected(manifest, truth, ("crc32",), parts_known)
    want = {
        n[len(PREFIX) + 1 :]: v for n, v in want.items() if n.startswith(f"{PREFIX}/vol1/obs1/")
    }
    assert {n: r["verdict"] for n, r in rows.items()} == want
    crc32c_only = [
        r
        for n, r in rows.items()
        if truth[f"{PREFIX}/{n}"]["algorithm"] == "CRC32C" and r["verdict"] == "NOT_COMPARABLE"
    ]
    assert crc32c_only and all("--also crc32c" in r["detail"] for r in crc32c_only)
    assert report["out_of_scope_objects"] == sum(
        not n.startswith(f"{PREFIX}/vol1/obs1/") for n in truth if truth[n]["fault"] != "missing"
    )
    assert rc == 1


def test_keys_mapped_to_one_name_are_not_compared_as_one(world: Any, capsys: Any) -> None:
    """--map rules that give two keys one name: that name is UNVERIFIED for each of them
    (never a MATCH against an object that copies only one), the other keys are untouched."""
    _, _, manifest, _, _, truth = world
    two = [k["name"] for k in manifest["keys"] if k["pristine_copy"]][:2]
    # both named as the first one's copy, which exists (its size may not be the second's)
    rc, _, rows = check(
        world,
        capsys,
        "plain",
        "check-merged",
        "--map",
        f"{two[0]}={two[0].lstrip('/')}",
        "--map",
        f"{two[1]}={two[0].lstrip('/')}",
    )
    merged = [
        r
        for r in pq.read_table(world[0] / "check-merged" / "verdicts").to_pylist()
        if r["name"] == two[0].lstrip("/")
    ]
    assert sorted(r["ozone_name"] for r in merged) == sorted(two)
    assert all(
        r["verdict"] == "UNVERIFIED" and "2 keys are given this name" in r["detail"] for r in merged
    )
    assert rc == 1


def test_local_directory_target_reads_and_says_so(world: Any, capsys: Any) -> None:
    """A local directory is the one target whose data is read: every pristine key written
    there MATCHes, and the report counts the bytes read."""
    base, cluster, manifest, _, _, _ = world
    copy = base / "local-copy"
    written = 0
    for k in manifest["keys"]:
        if not k["pristine_copy"]:
            continue
        path = copy / k["name"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = key_bytes(cluster, k)
        path.write_bytes(data)
        written += len(data)
    rc, report, rows = check(world, capsys, "plain", "check-local", target=str(copy))
    pristine = {k["name"].lstrip("/") for k in manifest["keys"] if k["pristine_copy"]}
    assert {n for n, r in rows.items() if r["verdict"] == "MATCH"} == pristine
    assert {r["verdict"] for r in rows.values()} == {"MATCH", "MISSING"}
    assert report["reads_data"] is True and report["cost"]["bytes_read"] == written
    assert rc == 1  # the keys with no pristine copy were not written: MISSING


def test_bad_inputs_are_one_line_errors(world: Any, capsys: Any, tmp_path: Path) -> None:
    base, cluster, _, scans, s3, _ = world
    cases = [
        (
            ["--om-db", str(tmp_path), "--scan", str(scans["plain"]), "--target", s3.uri(PREFIX)],
            "--om-db",
        ),
        (
            ["--om-db", str(cluster / "om.db"), "--scan", str(cluster), "--target", s3.uri(PREFIX)],
            "scan's output",
        ),
        (
            [
                "--om-db",
                str(cluster / "om.db"),
                "--scan",
                str(scans["plain"]),
                "--target",
                "ftp://x/y",
            ],
            "--target",
        ),
        (
            [
                "--om-db",
                str(cluster / "om.db"),
                "--scan",
                str(scans["plain"]),
                "--target",
                s3.uri(PREFIX),
                "--map",
                "nonsense",
            ],
            "--map",
        ),
        (
            [
                "--om-db",
                str(cluster / "om.db"),
                "--scan",
                str(scans["plain"]),
                "--target",
                s3.uri(PREFIX),
                "--allow",
                "FINE",
            ],
            "--allow",
        ),
        (
            [
                "--om-db",
                str(cluster / "om.db"),
                "--scan",
                str(scans["plain"]),
                "--target",
                s3.uri(PREFIX).replace(s3.bucket, "no-such-bucket"),
            ],
            "no-such-bucket",
        ),
        (
            [
                "--om-db",
                str(cluster / "om.db"),
                "--scan",
                str(scans["plain"]),
                "--target",
                f"gs://b/p?listing={tmp_path / 'absent.json'}",
            ],
            "absent.json",
        ),
    ]
    for i, args in enumerate(cases):
        capsys.readouterr()
        rc = main(["spark", "copycheck", *args[0], "-o", str(tmp_path / f"out{i}")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2, args
        assert len(err) == 1 and args[1] in err[0] and "Traceback" not in err[0], err
        assert "SECRET" not in err[0]
        assert not (tmp_path / f"out{i}").exists(), args  # a failed check leaves no output
