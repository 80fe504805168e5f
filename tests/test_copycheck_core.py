"""The copy check's columnar core: compose_keys (every key's CRCs from its chunks' window
checksums, against the CRC of the key's actual bytes), decide (the verdict rules) and the name
map."""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional

import pyarrow as pa
import pytest

import merkle
from merkle.copies.keycrcs import COMPOSE_SCHEMA, compose_keys
from merkle.copies.keymap import NameMap, parse_map
from merkle.copies.verdicts import SOURCE_COLUMNS, TARGET_COLUMNS, decide

FN = {"crc32": merkle.crc32, "crc32c": merkle.crc32c, "crc64nvme": merkle.crc64nvme}
W = {"crc32": 4, "crc32c": 4, "crc64nvme": 8}


def windows(data: bytes, bpc: int, alg: str) -> bytes:
    out = b""
    for i in range(0, len(data), bpc):
        out += FN[alg](data[i : i + bpc]).to_bytes(W[alg], "big")
    return out


def chunk_row(
    key_id: int,
    seq: int,
    block: int,
    blen: int,
    offset: int,
    data: bytes,
    bpc: int,
    recorded: str,
    also: tuple = ("crc64nvme",),
    status: Optional[str] = None,
) -> Dict[str, Any]:
    row = {
        "key_id": key_id,
        "seq": seq,
        "container": 1 + block // 10,
        "block": block,
        "block_length": blen,
        "block_status": status,
        "offset": offset,
        "length": len(data),
        "checksum_type": recorded,
        "bytes_per_checksum": bpc,
        "checksums": windows(data, bpc, recorded.lower()),
        "crc64nvme": None,
        "crc32c": None,
        "crc32": None,
    }
    for a in also:
        row[a] = windows(data, bpc, a)
    return row


def make_keys(rng: random.Random, nkeys: int, recorded: str = "CRC32C"):
    rows: List[Dict[str, Any]] = []
    truth: List[bytes] = []
    block = 0
    for k in range(nkeys):
        key_bytes = b""
        for seq in range(rng.randint(0, 3)):
            bpc = rng.choice([512, 1024, 16384])
            chunk = bpc * rng.randint(1, 4)
            blen = rng.randint(0, 3 * chunk + 7)
            data = rng.randbytes(blen)
            block += 1
            if blen == 0:
                rows.append(
                    {
                        **chunk_row(k, seq, block, 0, 0, b"", bpc, recorded),
                        "offset": None,
                        "length": None,
                        "checksums": None,
                        "crc64nvme": None,
                    }
                )
            for off in range(0, blen, chunk):
                rows.append(
                    chunk_row(k, seq, block, blen, off, data[off : off + chunk], bpc, recorded)
                )
            key_bytes += data
        if not any(r["key_id"] == k for r in rows):  # a key of no blocks: not composed here
            truth.append(None)  # type: ignore[arg-type]
            continue
        truth.append(key_bytes)
    return pa.Table.from_pylist(rows, schema=COMPOSE_SCHEMA), truth


@pytest.mark.parametrize("recorded", ["CRC32C", "CRC32"])
def test_compose_keys_equal_the_crc_of_the_bytes(recorded: str) -> None:
    table, truth = make_keys(random.Random(27), 60, recorded)
    out = compose_keys(table).to_pylist()
    composed = {r["key_id"]: r for r in out}
    assert len(composed) == sum(t is not None for t in truth)
    own = recorded.lower()
    other = "crc32" if own == "crc32c" else "crc32c"
    for k, data in enumerate(truth):
        if data is None:
            continue
        r = composed[k]
        assert r["unverified"] is None, r
        assert r["covered"] == len(data)
        assert int.from_bytes(r[own], "big") == FN[own](data)
        assert int.from_bytes(r["crc64nvme"], "big") == merkle.crc64nvme(data)
        assert r[other] is None  # neither recorded nor --also: never made up


def test_compose_keys_refuses_gaps_short_blocks_and_bad_windows() -> None:
    rng = random.Random(5)
    d = rng.randbytes(3000)
    rows = [
        # key 0: a gap (the second chunk starts at 1200, the first holds 1000)
        chunk_row(0, 0, 1, 2200, 0, d[:1000], 500, "CRC32C"),
        chunk_row(0, 0, 1, 2200, 1200, d[1000:2000], 500, "CRC32C"),
        # key 1: OM says 3000, the chunks hold 1000
        chunk_row(1, 0, 2, 3000, 0, d[:1000], 500, "CRC32C"),
        # key 2: a block the scan could not vouch for
        {
            **chunk_row(2, 0, 3, 1000, 0, d[:1000], 500, "CRC32C"),
            "offset": None,
            "block_status": "its verified replicas disagree",
        },
        # key 3: one window missing from the recorded list: no CRC32C, crc64nvme still right
        {
            **chunk_row(3, 0, 4, 1000, 0, d[:1000], 500, "CRC32C"),
            "checksums": windows(d[:1000], 500, "crc32c")[:4],
        },
        # key 4: a first chunk shorter than the next: the CRC of the bytes, Ozone differs
        chunk_row(4, 0, 5, 1300, 0, d[:300], 500, "CRC32C"),
        chunk_row(4, 0, 5, 1300, 300, d[300:1300], 500, "CRC32C"),
    ]
    composed = compose_keys(pa.Table.from_pylist(rows, schema=COMPOSE_SCHEMA))
    out = {r["key_id"]: r for r in composed.to_pylist()}
    assert "gap" in out[0]["unverified"] and out[0]["crc32c"] is None
    assert "OM says 3000" in out[1]["unverified"]
    assert "disagree" in out[2]["unverified"]
    assert out[3]["unverified"] is None and out[3]["crc32c"] is None
    assert int.from_bytes(out[3]["crc64nvme"], "big") == merkle.crc64nvme(d[:1000])
    assert int.from_bytes(out[4]["crc32c"], "big") == merkle.crc32c(d[:1300])
    assert "first chunk is shorter" in out[4]["ozone_note"]
    assert out[0]["ozone_note"] is None


def joined(**kw: Any) -> pa.Table:
    row = {c: None for c in SOURCE_COLUMNS + TARGET_COLUMNS}
    row.update(
        {
            "key_id": 0,
            "name": "v/b/k",
            "ozone_name": "/v/b/k",
            "size": 10,
            "blocks": 1,
            "composed": True,
            "t_name": "v/b/k",
            "t_size": 10,
            "t_requests": 1,
            "t_bytes_read": 0,
        }
    )
    row.update(kw)
    types = {
        "key_id": pa.int64(),
        "size": pa.int64(),
        "blocks": pa.int32(),
        "composed": pa.bool_(),
        "t_size": pa.int64(),
        "t_parts": pa.int32(),
        "t_requests": pa.int32(),
        "t_bytes_read": pa.int64(),
    }
    binary = {
        "crc32",
        "crc32c",
        "crc64nvme",
        "t_crc32",
        "t_crc32c",
        "t_crc64nvme",
        "t_composite_crc",
        "composite",
    }
    types["t_part_sizes"] = pa.list_(pa.int64())
    schema = pa.schema(
        [(c, types.get(c, pa.binary() if c in binary else pa.string())) for c in row]
    )
    return pa.Table.from_pylist([row], schema=schema)


def verdict(**kw: Any) -> Dict[str, Any]:
    return decide(joined(**kw)).to_pylist()[0]


C = (123).to_bytes(4, "big")
D = (124).to_bytes(4, "big")


def test_verdict_rules() -> None:
    assert verdict(crc32c=C, t_crc32c=C)["verdict"] == "MATCH"
    assert verdict(crc32c=C, t_crc32c=D)["verdict"] == "MISMATCH"
    assert verdict(t_name=None, t_size=None)["verdict"] == "MISSING"
    assert verdict(key_id=None, name=None, ozone_name=None, size=None)["verdict"] == "EXTRA"
    assert verdict(crc32c=C, t_crc32c=C, t_size=9)["verdict"] == "SIZE_DIFFERS"
    r = verdict(crc32=C, recorded_type="CRC32", t_crc32c=C)
    assert r["verdict"] == "NOT_COMPARABLE" and "--also crc32c" in r["detail"]
    r = verdict(crc32c=C, t_composite_algorithm="CRC32C", t_composite_crc=C, t_parts=3)
    assert r["verdict"] == "NOT_COMPARABLE" and "composite" in r["detail"]
    r = verdict(
        crc32c=C,
        composite=D,
        t_composite_algorithm="crc32c",
        t_composite_crc=D,
        t_parts=3,
        t_part_sizes=[4, 4, 2],
    )
    assert r["verdict"] == "MATCH" and "composite of 3 parts" in r["algorithm"]
    r = verdict(
        crc32c=C,
        composite=C,
        t_composite_algorithm="crc32c",
        t_composite_crc=D,
        t_parts=3,
        t_part_sizes=[4, 4, 2],
    )
    assert r["verdict"] == "MISMATCH"
    r = verdict(crc32c=C, t_crc32c=C, unverified="block 1/2: its verified replicas disagree")
    assert r["verdict"] == "UNVERIFIED" and "disagree" in r["detail"]
    r = verdict(crc32c=C, t_crc32c=C, composed=False)
    assert r["verdict"] == "UNVERIFIED"
    assert verdict(crc32c=C, t_crc32c=C, t_error="gone")["verdict"] == "UNVERIFIED"
    # a key of no blocks is the CRC of nothing: 0
    assert (
        verdict(blocks=0, size=0, composed=False, t_size=0, t_crc32c=bytes(4))["verdict"] == "MATCH"
    )
    # every common algorithm must agree
    assert (
        verdict(crc32c=C, t_crc32c=C, crc64nvme=bytes(8), t_crc64nvme=(1).to_bytes(8, "big"))[
            "verdict"
        ]
        == "MISMATCH"
    )


def test_name_map() -> None:
    assert NameMap().target_name("/v/b/a/k") == "v/b/a/k"
    m = parse_map(["/v/b/=copy/", "/v/b/deep/=other/", "/v/bx=x"])
    assert m.target_name("/v/b/k") == "copy/k"
    assert m.target_name("/v/b/deep/k") == "other/k"
    assert m.target_name("/v/bx/k") == "x/k"
    assert m.target_name("/v/bxy/k") is None  # a prefix stops at '/'
    assert m.target_name("/w/b/k") is None
    assert m.in_scope("copy/k") and not m.in_scope("elsewhere/k")
    with pytest.raises(ValueError):
        parse_map(["novalue"])
    with pytest.raises(ValueError):
        parse_map(["=x"])


def test_compose_rate_is_columnar() -> None:
    """Many small keys in one call (a smoke test of the batch path, no timing)."""
    rng = random.Random(1)
    table, truth = make_keys(rng, 400)
    out = compose_keys(table)
    got = {r["key_id"]: r["crc32c"] for r in out.to_pylist()}
    for k, data in enumerate(truth):
        if data is not None:
            assert int.from_bytes(got[k], "big") == merkle.crc32c(data)


def _om_key(path: str, size: int, lengths: List[int], reason: Optional[str] = None) -> Any:
    """An OmKey look-alike (merkle.copies.omdb.OmKey's fields key_tables reads)."""
    from types import SimpleNamespace

    from merkle.copies.omdb import OmBlock, OmReplication

    vol, bucket, rest = path.lstrip("/").split("/", 2)
    blocks = tuple(OmBlock(1, i + 1, 0, n) for i, n in enumerate(lengths))
    return SimpleNamespace(
        name=path,
        path=rest,
        size=size,
        blocks=blocks,
        reason=reason,
        encrypted=False,
        replication=OmReplication("RATIS", "THREE"),
        file_checksum=None,
    )


def test_a_size_out_of_range_is_that_keys_reason_not_the_maps_error() -> None:
    """OM's dataSize and lengths are uint64: a record claiming 2^64-1 bytes is one
    UNVERIFIED key (its reason says why), the others are mapped as ever."""
    from merkle.copies.keymap import key_tables

    keys = [
        _om_key("/v/b/huge", 2**64 - 1, [2**64 - 1]),
        _om_key("/v/b/long-block", 10, [2**63]),
        _om_key("/v/b/sum", 2**63 - 1, [2**62, 2**62]),
        _om_key("/v/b/fine", 5, [5]),
    ]
    batches = list(key_tables(keys, NameMap()))
    k = pa.Table.from_batches([b for b, _ in batches]).to_pylist()
    blocks = pa.Table.from_batches([b for _, b in batches]).to_pylist()
    by = {r["ozone_name"]: r for r in k}
    assert "dataSize 18446744073709551615 is out of range" in by["/v/b/huge"]["reason"]
    assert by["/v/b/huge"]["size"] is None
    assert "block length 9223372036854775808 is out of range" in by["/v/b/long-block"]["reason"]
    assert "add up to" in by["/v/b/sum"]["reason"]
    assert by["/v/b/fine"]["reason"] is None and by["/v/b/fine"]["size"] == 5
    # only the good key's blocks are rows
    assert [b["key_id"] for b in blocks] == [by["/v/b/fine"]["key_id"]]
    # and the verdict is UNVERIFIED with that reason, decided before any size comparison
    r = verdict(size=None, reason=by["/v/b/huge"]["reason"], t_size=7)
    assert r["verdict"] == "UNVERIFIED" and "out of range" in r["detail"]


def test_map_rules_that_name_no_key_and_an_empty_scope_are_problems() -> None:
    from merkle.copies.keymap import MapStats, key_tables

    keys = [_om_key("/v/b/k1", 1, [1]), _om_key("/v/b/k2", 1, [1]), _om_key("/w/c/k", 1, [1])]
    names = parse_map(["/v/b/=copy/"])
    stats = MapStats(names.rules)
    list(key_tables(keys, names, stats=stats))
    assert (stats.keys, stats.out_of_scope, stats.named) == (2, 1, [2])
    assert stats.problem() is None
    typo = parse_map(["/v/bb/=copy/", "/v/b/=copy/"])
    stats = MapStats(typo.rules)
    list(key_tables(keys, typo, stats=stats))
    assert stats.problem() is not None and "--map /v/bb/=copy/" in stats.problem()
    assert "\n" not in stats.problem()
    nothing = parse_map(["/x/=copy/"])
    stats = MapStats(nothing.rules)
    list(key_tables(keys, nothing, stats=stats))
    assert stats.keys == 0 and stats.out_of_scope == 3 and "/x/" in stats.problem()
    stats = MapStats()
    list(key_tables([], NameMap(), stats=stats))
    assert "no key to compare" in stats.problem()


def _report(
    counts: Dict[str, int], findings: int, first: Dict[str, Any], allowed: tuple = (), **extra: Any
) -> Dict[str, Any]:
    from merkle.copies.verdicts import VERDICTS

    return {
        "keys": sum(n for v, n in counts.items() if v != "EXTRA"),
        "objects": 3,
        "target": "s3://b/p",
        "counts": {v: counts.get(v, 0) for v in VERDICTS},
        "findings": findings,
        "allowed": list(allowed),
        "reads_data": False,
        "cost": {
            "bytes_read": 0,
            "list_requests": 1,
            "object_requests": 3,
            "max_requests_per_object": 1,
            "requests_per_object": 1.0,
        },
        "first": first,
        **extra,
    }


def test_report_lines_name_the_algorithm_of_each_value() -> None:
    from merkle.copies.report import format_text

    rows = {
        "MATCH": [
            {
                "name": "v/b/k",
                "verdict": "MATCH",
                "algorithm": "crc32,crc64nvme",
                "source_value": "0x0000007b",
                "target_value": "0x0000007b",
            }
        ],
        "MISMATCH": [
            {
                "name": "v/b/m",
                "verdict": "MISMATCH",
                "algorithm": "crc32c",
                "source_value": "0x0000007b",
                "target_value": "0x0000007c",
                "detail": "crc32c differs",
            }
        ],
    }
    text = format_text(_report({"MATCH": 1, "MISMATCH": 1}, 1, rows))
    assert "crc32 0x0000007b vs 0x0000007b (crc64nvme equal too)" in text
    assert "crc32c 0x0000007b vs 0x0000007c" in text
    assert "crc32,crc64nvme 0x" not in text


def test_report_never_says_every_key_is_proved_unless_one_was() -> None:
    from merkle.copies.report import format_text

    proved = format_text(_report({"MATCH": 2, "EXTRA": 1}, 0, {}, allowed=("EXTRA",)))
    assert "result: every key is proved identical to its copy (2 keys)" in proved
    # every key UNVERIFIED, and that allowed: no finding, and no proof either
    allowed = format_text(_report({"UNVERIFIED": 3}, 0, {}, allowed=("UNVERIFIED",)))
    assert "every key is proved" not in allowed
    assert "no key was proved identical to its copy (3 compared)" in allowed
    # some keys proved, some UNVERIFIED and allowed: not "every key"
    some = format_text(_report({"MATCH": 1, "UNVERIFIED": 1}, 0, {}, allowed=("UNVERIFIED",)))
    assert "every key is proved" not in some and "1 of 2 keys proved" in some
    # nothing compared at all
    assert "every key is proved" not in format_text(_report({}, 0, {}))
    left = format_text(_report({"MATCH": 1}, 0, {}, out_of_scope_keys=4))
    assert "4 keys under no --map source prefix (not compared)" in left
