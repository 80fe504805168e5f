"""The fault-injecting generator: determinism, fault specs, manifest shape, errors."""

from __future__ import annotations

import json

import pytest

from merkle.replica.generate import (
    DEFAULT_FAULTS,
    FAULT_TYPES,
    GeneratorError,
    block_data,
    parse_faults,
)

from replica_helpers import make_cluster, snapshot


def test_same_seed_same_bytes(tmp_path):
    a = make_cluster(tmp_path / "a", "default", containers=4, seed=7, min_blocks=3)
    b = make_cluster(tmp_path / "b", "default", containers=4, seed=7, min_blocks=3)
    assert a == b
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    make_cluster(tmp_path / "c", "default", containers=4, seed=8, min_blocks=3)
    assert snapshot(tmp_path / "c") != snapshot(tmp_path / "a")


def test_data_does_not_depend_on_the_faults(tmp_path):
    """Same seed without faults is the pristine cluster: the faults draw from their own
    stream, and block data depends only on (seed, container, block)."""
    m = make_cluster(tmp_path / "p", "none", containers=2, seed=3)
    f = make_cluster(tmp_path / "f", "bitflip", containers=2, seed=3)
    assert m["containers"] == f["containers"]
    cid, c = next(iter(m["containers"].items()))
    rep = c["replicas"][0]
    for b, n in c["blocks"].items():
        assert (tmp_path / "p" / rep / "chunks" / f"{b}.block").read_bytes() == block_data(
            3, int(cid), int(b), n
        )


def test_manifest_shape(tmp_path):
    m = make_cluster(tmp_path / "c", "default", containers=4, seed=1, min_blocks=3)
    on_disk = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(m))
    assert m["format"] == "crcmerkle-cluster-manifest" and m["version"] == 1
    kinds = [f["type"] for f in m["faults"]]
    assert sorted(kinds) == sorted(
        k for k, n in parse_faults(DEFAULT_FAULTS).items() for _ in range(n)
    )
    for f in m["faults"]:
        for e in f["expected"]:
            key = {k: e[k] for k in ("error", "block_id", "offset")}
            assert key in m["expected_errors"][e["replica"]]
    reps = [r for c in m["containers"].values() for r in c["replicas"]]
    assert sorted(m["expected_errors"]) == sorted(reps)
    for c in m["containers"].values():  # replicas on distinct datanodes
        assert len({r.split("/")[0] for r in c["replicas"]}) == len(c["replicas"])


def test_parse_faults():
    assert parse_faults("none") == {} and parse_faults("") == {}
    assert parse_faults("bitflip=2,truncate,bitflip") == {"bitflip": 3, "truncate": 1}
    assert set(parse_faults("default")) == set(FAULT_TYPES)
    with pytest.raises(GeneratorError, match="unknown fault"):
        parse_faults("gremlins")
    with pytest.raises(GeneratorError, match="integer"):
        parse_faults("bitflip=x")


def test_errors(tmp_path):
    with pytest.raises(GeneratorError, match="datanodes"):
        make_cluster(tmp_path / "a", replicas=4)
    with pytest.raises(GeneratorError, match="too small"):
        make_cluster(tmp_path / "b", "missing-file=50")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(GeneratorError, match="not empty"):
        make_cluster(tmp_path / "full")
