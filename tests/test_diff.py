"""The one-sided diff, case by case as OZONE.md lists them, Ozone's scenario grid (missing
blocks x missing chunks x corrupt chunks), tombstones, and the many-replica view."""

from __future__ import annotations

import numpy as np
import pytest

import merkle
from merkle.trees import diff as diff_mod
from merkle.trees.diff import compare_replicas, diff

from treespec import BAD, OK, tree

BASE = {1: {0: (11, OK), 100: (12, OK)}, 2: {0: (21, OK)}}


def counts(r):
    return r.counts()


def test_equal_roots_is_constant_time(monkeypatch):
    a = tree(BASE)
    monkeypatch.setattr(
        diff_mod._native, "_ozt_diff", lambda *x: pytest.fail("a full diff ran for equal roots")
    )
    r = diff(a, tree(BASE))
    assert r.roots_equal and not r.needs_repair


def test_unset_container_value_counts_as_0(monkeypatch):
    """Ozone compares getDataChecksum(), which reads 0 when unset: two tombstone-only trees, or
    one against an empty generated tree (value 0), are equal, whatever their blocks."""
    monkeypatch.setattr(
        diff_mod._native, "_ozt_diff", lambda *x: pytest.fail("a full diff ran for equal roots")
    )
    only_tombs = tree({4: ("T", 1)}, generated=False)
    more_tombs = tree({4: ("T", 1), 6: ("T", 9)}, generated=False)
    assert diff(only_tombs, more_tombs).roots_equal
    assert diff(tree({}), more_tombs).roots_equal  # 0 == unset
    assert diff(more_tombs, tree({})).roots_equal


def test_unset_value_against_a_real_one_diffs_fully():
    r = diff(tree(BASE), tree({2: ("T", 5), 6: ("T", 9)}, generated=False))
    assert not r.roots_equal and r.diverged_deleted_blocks.tolist() == [2, 6]


def test_different_container_ids_are_an_error():
    a = tree(BASE)
    b = a.replace(container_id=a.container_id + 1)
    with pytest.raises(diff_mod.ContainerIDMismatchError, match="different containers") as info:
        diff(a, b)
    assert isinstance(info.value, ValueError) and info.value.peer == a.container_id + 1


def test_block_only_in_ours_is_ignored():
    r = diff(tree({**BASE, 3: {0: (31, OK)}}), tree(BASE))
    assert not r.needs_repair and counts(r)["missing_blocks"] == 0


def test_block_only_in_peer_live_is_missing():
    r = diff(tree(BASE), tree({**BASE, 3: {0: (31, OK)}}))
    assert r.missing_blocks.tolist() == [3] and r.needs_repair


def test_block_only_in_peer_deleted_is_diverged_deleted():
    r = diff(tree(BASE), tree({**BASE, 3: ("T", 5)}))
    assert r.diverged_deleted_blocks.tolist() == [3] and r.missing_blocks.size == 0
    assert r.needs_repair


def test_chunk_only_in_peer_healthy_is_missing():
    r = diff(tree({1: {0: (11, OK)}, 2: BASE[2]}), tree(BASE))
    assert {b: o.tolist() for b, o in r.missing_chunks.items()} == {1: [100]}


def test_chunk_only_in_peer_unhealthy_is_dropped_and_counted():
    peer = {1: {0: (11, OK), 100: (12, BAD)}, 2: BASE[2]}
    r = diff(tree({1: {0: (11, OK)}, 2: BASE[2]}), tree(peer))
    assert r.missing_chunks == {} and r.unhealthy_chunks_filtered == 1
    assert not r.needs_repair


def test_chunk_only_in_ours_is_ignored():
    r = diff(tree({1: {0: (11, OK), 100: (12, OK), 200: (13, OK)}, 2: BASE[2]}), tree(BASE))
    assert not r.needs_repair


def test_ours_unhealthy_peer_healthy_is_corrupt():
    r = diff(tree({1: {0: (11, OK), 100: (99, BAD)}, 2: BASE[2]}), tree(BASE))
    assert {b: o.tolist() for b, o in r.corrupt_chunks.items()} == {1: [100]}
    assert r.needs_repair and r.unrecoverable_chunks == {}


def test_both_healthy_values_differ_is_unrecoverable_not_repaired():
    r = diff(tree({1: {0: (11, OK), 100: (99, OK)}, 2: BASE[2]}), tree(BASE))
    assert not r.needs_repair and r.corrupt_chunks == {}
    assert {b: o.tolist() for b, o in r.unrecoverable_chunks.items()} == {1: [100]}


@pytest.mark.parametrize("ours_ok,peer_ok,filtered", [(OK, BAD, 0), (BAD, BAD, 1)])
def test_peer_unhealthy_same_offset_is_no_repair(ours_ok, peer_ok, filtered):
    """Ours unhealthy too: Ozone's reportChunkIfHealthy drops the peer's copy and counts it."""
    r = diff(
        tree({1: {0: (11, OK), 100: (99, ours_ok)}, 2: BASE[2]}),
        tree({1: {0: (11, OK), 100: (12, peer_ok)}, 2: BASE[2]}),
    )
    assert not r.needs_repair and r.unrecoverable_chunks == {}
    assert r.unhealthy_chunks_filtered == filtered


def test_same_value_different_health_is_nothing():
    r = diff(tree({1: {0: (11, OK), 100: (12, BAD)}, 2: BASE[2]}), tree(BASE))
    assert not r.needs_repair


# --- tombstones ---------------------------------------------------------------------------


def test_ours_live_peer_deleted_adopts_tombstone():
    r = diff(tree(BASE), tree({1: ("T", 7), 2: BASE[2]}))
    assert r.diverged_deleted_blocks.tolist() == [1] and r.needs_repair
    assert r.missing_chunks == {}


def test_ours_live_peer_tombstone_with_the_same_value_stays_live():
    """A block present on both sides is examined only when the values differ (Ozone)."""
    ours = tree(BASE)
    r = diff(ours, tree({1: ("T", int(ours.block_value[0])), 2: BASE[2]}))
    assert r.diverged_deleted_blocks.size == 0 and not r.needs_repair


def test_ours_deleted_peer_live_is_ignored():
    r = diff(tree({1: ("T", 7), 2: BASE[2]}), tree(BASE))
    assert not r.needs_repair


@pytest.mark.parametrize("ours,peer,adopt", [(5, 9, True), (9, 5, False), (5, 5, False)])
def test_both_deleted_larger_value_wins(ours, peer, adopt):
    r = diff(tree({1: ("T", ours), 2: BASE[2]}), tree({1: ("T", peer), 2: BASE[2]}))
    assert r.diverged_deleted_blocks.tolist() == ([1] if adopt else [])


def test_tombstone_only_in_ours_is_ignored():
    r = diff(tree({**BASE, 3: ("T", 1)}), tree(BASE))
    assert not r.needs_repair


# --- Ozone's scenario grid ----------------------------------------------------------------


def healthy_tree(n_blocks=6, n_chunks=5):
    rng = np.random.default_rng(n_blocks * 100 + n_chunks)
    return {
        b: {c * 100: (int(rng.integers(1, 2**32)), OK) for c in range(n_chunks)}
        for b in range(1, n_blocks + 1)
    }


def damaged(spec, missing_blocks, missing_chunks, corrupt_chunks):
    """Ozone's buildTestTreeWithMismatches: drop blocks, drop chunks, corrupt chunks, each in
    a different block than the others (so the counts are exact)."""
    spec = {b: dict(c) for b, c in spec.items()}
    ids = sorted(spec)
    gone = ids[:missing_blocks]
    for b in gone:
        del spec[b]
    rest = ids[missing_blocks:]
    expected_missing, expected_corrupt = {}, {}
    for k in range(missing_chunks):
        b = rest[k % len(rest)]
        off = sorted(spec[b])[-1 - k // len(rest)]
        del spec[b][off]
        expected_missing.setdefault(b, []).append(off)
    for k in range(corrupt_chunks):
        b = rest[-1 - k % len(rest)]
        off = sorted(spec[b])[k // len(rest)]
        leaf, _ = spec[b][off]
        spec[b][off] = (leaf ^ 0x5A5A5A5A, BAD)
        expected_corrupt.setdefault(b, []).append(off)
    return spec, gone, expected_missing, expected_corrupt


GRID = [
    (0, 0, 1),
    (0, 1, 0),
    (1, 0, 0),
    (1, 2, 3),
    (3, 3, 0),
    (2, 0, 3),
    (0, 3, 3),
    (3, 0, 3),
    (3, 3, 3),
    (0, 0, 0),
    (1, 1, 1),
    (2, 2, 2),
]


@pytest.mark.parametrize("mb,mc,cc", GRID, ids=[f"{a}-{b}-{c}" for a, b, c in GRID])
def test_scenario_grid(mb, mc, cc):
    truth = healthy_tree()
    spec, gone, exp_missing, exp_corrupt = damaged(truth, mb, mc, cc)
    ours, peer = tree(spec), tree(truth)
    r = diff(ours, peer)
    assert sorted(r.missing_blocks.tolist()) == gone
    assert {b: sorted(o.tolist()) for b, o in r.missing_chunks.items()} == {
        b: sorted(o) for b, o in exp_missing.items()
    }
    assert {b: sorted(o.tolist()) for b, o in r.corrupt_chunks.items()} == {
        b: sorted(o) for b, o in exp_corrupt.items()
    }
    assert r.needs_repair == bool(mb or mc or cc)
    assert r.unrecoverable_chunks == {} and r.unhealthy_chunks_filtered == 0
    # the other way round the healthy replica needs nothing from the damaged one
    assert not diff(peer, ours).needs_repair
    # and the repaired tree equals the healthy one
    from merkle.trees.merge import apply_repair

    assert apply_repair(r).data_checksum == peer.data_checksum


def test_report_dict_and_repr():
    r = diff(tree({1: {0: (11, OK)}}), tree({**BASE, 3: ("T", 1)}))
    d = r.to_dict()
    assert d["missing_blocks"] == [2] and d["missing_chunks"] == {"1": [100]}
    assert d["diverged_deleted_blocks"] == [3] and d["needs_repair"]
    assert "missing_blocks=1" in repr(r)


def test_native_diff_rejects_inconsistent_columns():
    a = tree(BASE)
    side = diff_mod._side(a)
    bad = side[:3] + (np.array([0, 5, 1], dtype=np.int64),) + side[4:]
    with pytest.raises(ValueError):
        merkle._native._ozt_diff(bad, side)


# --- many replicas ------------------------------------------------------------------------


def test_compare_replicas():
    truth = healthy_tree(4, 3)
    a = tree(truth)
    spec_b, *_ = damaged(truth, 1, 0, 0)
    spec_c, *_ = damaged(truth, 0, 2, 1)
    rep = compare_replicas({"a": a, "b": tree(spec_b), "c": tree(spec_c), "d": tree(truth)})
    assert not rep.match
    groups = rep.groups
    assert sorted(groups[a.data_checksum]) == ["a", "d"]
    assert rep.pulls("a") == {} and rep.pulls("d") == {}
    assert list(rep.pulls("b")) == ["a"]  # everything from the first peer that has it
    pulls_c = rep.pulls("c")
    assert list(pulls_c) == ["a"]
    d = rep.to_dict()
    assert d["match"] is False and set(d["plans"]) == {"a", "b", "c", "d"}
    assert compare_replicas({"x": a, "y": tree(truth)}).match


def test_compare_replicas_splits_pulls_across_peers():
    truth = {1: {0: (1, OK)}, 2: {0: (2, OK)}}
    ours = tree({})
    p1 = tree({1: truth[1]})
    p2 = tree(truth)
    rep = compare_replicas({"ours": ours, "p1": p1, "p2": p2})
    pulls = rep.pulls("ours")
    assert pulls["p1"].missing_blocks.tolist() == [1]
    assert pulls["p2"].missing_blocks.tolist() == [2]
