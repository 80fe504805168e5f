"""merkle.copies: the key CRC composed from chunk window checksums against every golden
COMPOSITE_CRC file written by Ozone's own client classes (../shared/ozone-golden/composite-crc/):
the CRC of the bytes, and Ozone's own answer (value, or the exception) on the quirk inputs."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

import merkle
from merkle.copies import BlockChecksums, ChunkChecksums, key_crc, ozone_composite_crc

#: the repository's copy of the shared golden set (tests/test_ozone_golden.py checks it is the
#: shared original, byte for byte)
GOLDEN = Path(__file__).resolve().parent / "data" / "ozone-golden" / "composite-crc"
FILES = sorted(GOLDEN.glob("[ce][0-9][0-9]_*.json"))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _chunk(c: dict[str, Any], typ: str, bpc: int, offset: int | None = None) -> ChunkChecksums:
    return ChunkChecksums.from_ozone(
        c["len"],
        c.get("type", typ),
        c.get("bytes_per_checksum", bpc),
        [bytes.fromhex(h) for h in c["checksums_hex"]],
        offset,
    )


def blocks_of(case: dict[str, Any]) -> list[BlockChecksums]:
    out = case["ozone_output"]
    spec = case["input_spec"]
    if case["layout"] == "ec":
        groups = []
        for g in out["block_groups"]:
            stripes = [
                [
                    _chunk(c, spec["type"], spec["bpc"])
                    for c in sorted(s["cells"], key=lambda c: c["replica_index"])
                    if not c.get("placeholder_parity")
                ]
                for s in g["stripes"]
            ]
            groups.append(BlockChecksums(g["length"], ec_stripes=stripes))
        return groups
    return [
        BlockChecksums(
            b["length"], [_chunk(c, spec["type"], 0, c["offset_in_block"]) for c in b["chunks"]]
        )
        for b in out["blocks"]
    ]


def test_every_golden_file_is_here() -> None:
    assert len(FILES) == 49, [f.name for f in FILES]
    assert len([f for f in FILES if f.name.startswith("e")]) == 7


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_golden_key(path: Path) -> None:
    case = _load(path)
    out = case["ozone_output"]
    plain = case["python_checks"].get("plain_crc_of_bytes_hex")
    got = key_crc(blocks_of(case))
    fc = out.get("file_checksum")

    # what Ozone returns (or throws), pinned from Ozone's own output
    if out.get("error") is not None:
        assert got.ozone_value is None and got.ozone_algorithm is None
        java = out["error"].split(" at ")[0]
        assert got.ozone_error is not None
        exc_class = java.split(":")[0].rsplit(".", 1)[-1]
        assert got.ozone_error.startswith(exc_class), (got.ozone_error, java)
        if "lengthBytes" in java:
            assert java.split(": ", 1)[1] in got.ozone_error
    elif "request_length" not in case["input_spec"]:
        assert got.ozone_error is None
        assert got.ozone_algorithm == fc["algorithm_name"]
        assert got.ozone_value == bytes.fromhex(fc.get("writable_bytes_hex", fc["bytes_hex"]))
        if fc["length"] == 4:
            assert got.ozone_value == bytes.fromhex(fc["bytes_hex"])

    # key_crc skips Ozone's step-by-step walk on consistent keys: the walk itself must give
    # Ozone's answer on every file too
    assert ozone_composite_crc(blocks_of(case)) == (
        got.ozone_algorithm,
        got.ozone_value,
        got.ozone_error,
    )

    # the CRC of the bytes
    if case["input_spec"].get("blocks") == []:
        assert got.crc == 0 and got.length == 0 and got.ozone_differs
    elif (
        plain is not None
        and len(
            {
                c.get("type", case["input_spec"]["type"])
                for b in out.get("blocks", [])
                for c in b["chunks"]
            }
            or {0}
        )
        == 1
    ):
        assert got.crc == int(plain, 16)
        assert got.algorithm == case["input_spec"]["type"].lower()
        assert got.length == case["data"]["length"]
    else:  # mixed checksum types: not derivable, and said so
        assert got.crc is None and got.algorithm is None
        assert any("mixed checksum types" in r for r in got.reasons)

    # c39's inconsistency is the range request only (test_range_request_quirk_c39): whole, the
    # key is consistent
    consistent = (
        case["python_checks"].get("ozone_composite_equals_plain_crc") is True
        or "request_length" in case["input_spec"]
    )
    assert got.ozone_differs is not consistent
    assert (got.reasons == ()) is consistent
    if "quirk" in case["input_spec"] and "request_length" not in case["input_spec"]:
        assert got.ozone_differs and got.reasons


@pytest.mark.parametrize(
    "path", [f for f in FILES if f.stat().st_size < 3_000_000], ids=lambda f: f.stem
)
def test_golden_crc_is_the_bytes_crc(path: Path) -> None:
    """Regenerate the key's bytes from its seed and check the composed CRC against them."""
    case = _load(path)
    got = key_crc(blocks_of(case))
    if got.crc is None or got.algorithm is None:
        return
    data = random.Random(case["data"]["seed"]).randbytes(case["data"]["length"])
    assert hashlib.sha256(data).hexdigest() == case["data"]["sha256"]
    assert got.crc == {"crc32": merkle.crc32, "crc32c": merkle.crc32c}[got.algorithm](data)


def test_range_request_quirk_c39() -> None:
    """A range shorter than the key: Ozone composes the blocks it skipped as 0x00000000."""
    case = _load(GOLDEN / "c39_quirk_range_request_shorter.json")
    fc = case["ozone_output"]["file_checksum"]
    alg, value, error = ozone_composite_crc(blocks_of(case), case["input_spec"]["request_length"])
    assert (alg, value, error) == (fc["algorithm_name"], bytes.fromhex(fc["bytes_hex"]), None)
    # the whole key is consistent: Ozone's full-length answer is the CRC of the bytes
    got = key_crc(blocks_of(case))
    assert got.ozone_value == got.crc.to_bytes(4, "big") and not got.ozone_differs


@pytest.mark.parametrize("path", [f for f in FILES if f.name.startswith("e")], ids=lambda f: f.stem)
def test_ec_cells_are_replica1_stripe_checksum(path: Path) -> None:
    """The EC model (data cells in replica order) is what Ozone reads: replica 1's stripe
    checksum minus the parity windows it strips."""
    case = _load(path)
    parity = int(case["input_spec"]["ec"].split("-")[2])
    bpc = case["input_spec"]["bpc"]
    for g in case["ozone_output"]["block_groups"]:
        for s in g["stripes"]:
            cells = sorted(s["cells"], key=lambda c: c["replica_index"])
            data = "".join(
                h for c in cells if not c.get("placeholder_parity") for h in c["checksums_hex"]
            )
            first = cells[0]["len"]
            parity_hex = -(-first // bpc) * 4 * parity * 2
            assert s["stripe_checksum_hex"][: len(s["stripe_checksum_hex"]) - parity_hex] == data


def _compose_rows(case: dict[str, Any], key_id: int) -> list[dict[str, Any]]:
    """The golden key as the copy check's compose step takes it (keycrcs.COMPOSE_SCHEMA):
    one row per chunk, its recorded checksums packed as Ozone stores them."""
    spec = case["input_spec"]
    rows = []
    for seq, b in enumerate(case["ozone_output"]["blocks"]):
        for c in b["chunks"]:
            rows.append(
                {
                    "key_id": key_id,
                    "seq": seq,
                    "container": 1,
                    "block": seq,
                    "block_length": b["length"],
                    "block_status": None,
                    "offset": c["offset_in_block"],
                    "length": c["len"],
                    "checksum_type": c.get("type", spec["type"]),
                    "bytes_per_checksum": c["bytes_per_checksum"],
                    "checksums": b"".join(bytes.fromhex(h) for h in c["checksums_hex"]),
                    "crc64nvme": None,
                    "crc32c": None,
                    "crc32": None,
                    "composite_algorithm": None,
                    "part_sizes": None,
                }
            )
    return rows


def test_compose_keys_equals_key_crc_and_ozone_on_golden_data() -> None:
    """The batch path (every golden replicated key in one compose_keys call, as the copy
    check runs it) gives key_crc's CRC of the bytes for each; on the keys where Ozone's
    composition is consistent, that is Ozone's own COMPOSITE_CRC (pinned from its output);
    where it is not, compose_keys says `ozone fs -checksum` would differ."""
    pa = pytest.importorskip("pyarrow")
    from merkle.copies.keycrcs import COMPOSE_SCHEMA, compose_keys

    cases = [_load(p) for p in FILES]
    replicated = [c for c in cases if c["layout"] != "ec"]
    rows = [r for i, c in enumerate(replicated) for r in _compose_rows(c, i)]
    out = {
        r["key_id"]: r
        for r in compose_keys(pa.Table.from_pylist(rows, schema=COMPOSE_SCHEMA)).to_pylist()
    }
    compared = consistent = 0
    for i, case in enumerate(replicated):
        want = key_crc(blocks_of(case))
        if i not in out:  # a key with no chunk rows: not composed here (an empty key)
            assert want.length == 0
            continue
        got = out[i]
        if want.crc is None or want.length != want.om_length:
            # mixed types, no CRC, or chunks not covering the OM length: no value is given
            assert got["crc32"] is None and got["crc32c"] is None, case["name"]
            continue
        alg = want.algorithm
        assert got["unverified"] is None, (case["name"], got["unverified"])
        assert int.from_bytes(got[alg], "big") == want.crc, case["name"]
        compared += 1
        if not want.ozone_differs and "request_length" not in case["input_spec"]:
            # (a range request's checksum covers less than the key: not the key's value)
            consistent += 1
            fc = case["ozone_output"]["file_checksum"]
            assert got[alg] == bytes.fromhex(fc["bytes_hex"]), case["name"]
            assert got["ozone_note"] is None, case["name"]
        elif want.ozone_differs:
            assert got["ozone_note"] and "would differ" in got["ozone_note"], case["name"]
    # every replicated golden key with a CRC of its bytes, 34 of them where Ozone agrees
    assert (compared, consistent) == (38, 34), (compared, consistent)
