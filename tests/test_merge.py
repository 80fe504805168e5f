"""Merging a scanned tree into the stored one (tombstone and conflict rules), repair from a
peer, and property tests: merge idempotent/associative, diff+repair converges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from merkle import ozone
from merkle.trees.diff import ContainerIDMismatchError, diff
from merkle.trees.merge import apply_repair, merge, reconcile
from merkle.trees.model import ContainerTree

from treespec import BAD, OK, tree


def as_spec(t: ContainerTree):
    return {
        b.block_id: ("T", b.value)
        if b.deleted
        else {c.offset: (c.value, c.checksum_matches) for c in b.chunks}
        for b in t.blocks()
    }


def test_tombstone_in_stored_beats_live_scanned():
    stored = tree({1: ("T", 7)})
    scanned = tree({1: {0: (5, OK)}, 2: {0: (6, OK)}})
    m = merge(stored, scanned)
    assert as_spec(m) == {1: ("T", 7), 2: {0: (6, OK)}}
    assert m.data_checksum == ozone.container_checksum([7, m.block(2).value])


def test_tombstone_in_scanned_beats_live_stored():
    m = merge(tree({1: {0: (5, OK)}}), tree({1: ("T", 9)}))
    assert as_spec(m) == {1: ("T", 9)}


def test_both_tombstones_newer_wins():
    assert as_spec(merge(tree({1: ("T", 9)}), tree({1: ("T", 3)}))) == {1: ("T", 3)}


def test_live_in_both_newer_wins():
    m = merge(tree({1: {0: (5, OK)}}), tree({1: {0: (6, BAD)}}))
    assert as_spec(m) == {1: {0: (6, BAD)}}


def test_only_in_stored_survives_only_as_tombstone():
    m = merge(tree({1: {0: (5, OK)}, 2: ("T", 4)}), tree({3: {0: (1, OK)}}))
    assert as_spec(m) == {2: ("T", 4), 3: {0: (1, OK)}}


def test_merge_without_stored_tree_and_id_mismatch():
    s = tree({1: {0: (5, OK)}})
    assert merge(None, s) is s
    with pytest.raises(ContainerIDMismatchError, match="different containers"):
        merge(tree({}, cid=2), s)


def test_merge_keeps_scanned_generation_state():
    m = merge(tree({1: ("T", 3)}), tree({}, generated=False))
    assert m.data_checksum is None and as_spec(m) == {1: ("T", 3)}


# --- repair --------------------------------------------------------------------------------


def test_repair_stops_a_block_at_the_first_gap():
    peer = tree({1: {0: (1, OK), 100: (2, BAD), 200: (3, OK)}})
    ours = tree({1: {0: (1, OK)}})
    r = diff(ours, peer)
    assert r.missing_chunks[1].tolist() == [200] and r.unhealthy_chunks_filtered == 1
    fixed = apply_repair(r)
    assert as_spec(fixed) == {1: {0: (1, OK)}}  # 200 would leave a hole at 100


def test_repair_of_missing_block_skips_unhealthy_tail():
    peer = tree({1: {0: (1, OK), 100: (2, BAD), 200: (3, OK)}})
    fixed = apply_repair(diff(tree({}), peer))
    assert as_spec(fixed) == {1: {0: (1, OK)}}


def test_repair_adopts_tombstones_and_never_deletes_local_data():
    ours = tree({1: {0: (1, OK)}, 5: {0: (9, OK)}})
    peer = tree({1: ("T", 42), 2: ("T", 43)})
    fixed = apply_repair(diff(ours, peer))
    assert as_spec(fixed) == {1: ("T", 42), 2: ("T", 43), 5: {0: (9, OK)}}


def test_repair_keeps_empty_blocks():
    ours = tree({3: {}})
    fixed = apply_repair(diff(ours, tree({1: {0: (1, OK)}})))
    assert sorted(as_spec(fixed)) == [1, 3]


# --- properties ---------------------------------------------------------------------------

entry = st.one_of(
    st.tuples(st.just("T"), st.integers(0, 2**32 - 1)),
    st.dictionaries(
        st.sampled_from([0, 100, 200]),
        st.tuples(st.integers(0, 2**32 - 1), st.booleans()),
        max_size=3,
    ),
)
spec_st = st.dictionaries(st.integers(-3, 6), entry, max_size=6)


@settings(max_examples=150, deadline=None)
@given(spec_st)
def test_merge_idempotent(s):
    t = tree(s)
    assert merge(t, t) == t


@settings(max_examples=150, deadline=None)
@given(spec_st, spec_st, spec_st)
def test_merge_associative(a, b, c):
    ta, tb, tc = tree(a), tree(b), tree(c)
    assert merge(merge(ta, tb), tc) == merge(ta, merge(tb, tc))


@settings(max_examples=150, deadline=None)
@given(spec_st, spec_st)
def test_merge_commutative_on_tombstoned_ids(a, b):
    ta, tb = tree(a), tree(b)
    ab, ba = merge(ta, tb), merge(tb, ta)
    assert (
        set(ab.block_id[ab.block_deleted].tolist())
        == set(ba.block_id[ba.block_deleted].tolist())
        == set(ta.block_id[ta.block_deleted].tolist()) | set(tb.block_id[tb.block_deleted].tolist())
    )


@settings(max_examples=150, deadline=None)
@given(spec_st, spec_st)
def test_diff_then_repair_leaves_nothing_to_pull(a, b):
    ours, peer = tree(a), tree(b)
    fixed = apply_repair(diff(ours, peer))
    again = diff(fixed, peer)
    # what is left is what cannot be pulled: the first left in a block does not follow a
    # chunk we hold (Ozone's contiguity rule: it would leave a hole)
    from merkle.trees.merge import chunk_follows

    for left in (again.missing_chunks, again.corrupt_chunks):
        for blk, offs in left.items():
            held = {c.offset: c.length for c in fixed.block(blk).chunks}
            assert not chunk_follows(held, int(offs.min()))
    assert again.diverged_deleted_blocks.size == 0
    # a missing block stays missing only if its first chunk cannot be written
    assert again.missing_blocks.size == 0 or all(
        not peer.block(int(b)).chunks[0].checksum_matches or peer.block(int(b)).chunks[0].offset > 0
        for b in again.missing_blocks
    )


@st.composite
def replica_sets(draw):
    """A healthy 'truth' and 2-4 replicas damaged from it: blocks lost, block files truncated
    (missing chunk tails), chunks corrupted (unhealthy, new value), blocks tombstoned. Every
    chunk stays healthy in at least one replica; `full` says whether one replica is intact."""
    n_blocks = draw(st.integers(1, 5))
    truth = {
        b: {o * 100: (draw(st.integers(1, 2**32 - 1)), OK) for o in range(draw(st.integers(0, 4)))}
        for b in range(n_blocks)
    }
    tvalues = {
        b: ozone.block_checksum(b, [v for _, (v, _) in sorted(c.items())]) for b, c in truth.items()
    }
    deleted = draw(st.sets(st.sampled_from(range(n_blocks))))
    n = draw(st.integers(2, 4))
    full = draw(st.booleans())
    reps = []
    for r in range(n):
        spec = {}
        for b, chunks in truth.items():
            if full and r == 0:
                spec[b] = dict(chunks)
                continue
            kind = draw(st.sampled_from(["keep", "lose", "truncate", "corrupt"]))
            if kind == "lose":
                continue
            c = dict(chunks)
            if kind == "truncate" and c:
                cut = draw(st.integers(0, len(c) - 1))
                c = {o: v for o, v in c.items() if o < cut * 100}
            if kind == "corrupt" and c:
                o = draw(st.sampled_from(sorted(c)))
                c[o] = (c[o][0] ^ 1, BAD)
            spec[b] = c
        for b in deleted:
            if draw(st.booleans()) or (r == n - 1):
                spec[b] = ("T", tvalues[b])
        reps.append(spec)
    # every chunk healthy in some replica: the last one gets whatever nobody has healthy
    for b, chunks in truth.items():
        if b in deleted:
            continue
        for o, v in list(chunks.items()) + [(None, None)]:
            if o is None:  # the block itself (it may have no chunks)
                if any(isinstance(s.get(b), dict) for s in reps):
                    continue
            elif any(isinstance(s.get(b), dict) and s[b].get(o) == v for s in reps):
                continue
            if True:
                reps[-1][b] = (
                    dict(truth[b]) if not isinstance(reps[-1].get(b), tuple) else reps[-1][b]
                )
                if isinstance(reps[-1][b], tuple):
                    reps[-2][b] = dict(truth[b])
    return truth, deleted, full, reps


@settings(max_examples=120, deadline=None)
@given(replica_sets())
def test_reconciliation_converges(case):
    truth, deleted, full, specs = case
    trees = [tree(s) for s in specs]
    for _ in range(len(trees) + 4):
        for i in range(len(trees)):
            trees[i] = reconcile(trees[i], *[t for j, t in enumerate(trees) if j != i])
        if len({t.data_checksum for t in trees}) == 1:
            break
    assert len({t.data_checksum for t in trees}) == 1
    for t in trees:
        check_against_truth(t, truth, deleted)


def check_against_truth(t, truth, deleted):
    """Live blocks equal the truth; a deleted block is a tombstone or, since `deleted` is not
    hashed (OZONE.md), a live block with the same value (equal container values: no diff)."""
    final = as_spec(t)
    assert sorted(final) == sorted(truth)
    for b in truth:
        if b in deleted:
            assert t.block(b).value == ozone.block_checksum(
                b, [v for _, (v, _) in sorted(truth[b].items())]
            )
            if not isinstance(final[b], tuple):
                assert final[b] == truth[b]
        else:
            assert final[b] == truth[b]


@settings(max_examples=80, deadline=None)
@given(replica_sets())
def test_one_round_converges_with_an_intact_replica(case):
    truth, deleted, full, specs = case
    if not full:
        return
    trees = [tree(s) for s in specs]
    for i in range(len(trees)):
        trees[i] = reconcile(trees[i], *[t for j, t in enumerate(trees) if j != i])
    assert len({t.data_checksum for t in trees}) == 1
    for t in trees:
        check_against_truth(t, truth, deleted)


@pytest.mark.parametrize(
    "local,offset,ok",
    [
        ({}, 0, True),
        ({}, 100, False),
        ({0: 100}, 100, True),
        ({0: 100}, 150, False),
        ({0: 200}, 100, False),  # inside the file, but not where a chunk ends
        ({0: 100, 100: 50}, 150, True),
        ({0: 100, 100: 50}, 100, True),  # overwrite in place
        ({0: 100, 300: 100}, 200, False),
        ({-5: 5}, 0, True),
        ({-10: 3}, -7, True),
    ],
)
def test_chunk_follows_is_ozones_previous_chunk_rule(local, offset, ok):
    from merkle.trees.merge import chunk_follows

    assert chunk_follows(local, offset) is ok


def _lens(spec, length):
    t = tree(spec)
    return t.replace(chunk_length=np.full(t.n_chunks, length, dtype=np.int64))


def test_repair_needs_the_previous_chunk_to_end_exactly_at_the_offset():
    """The old rule wrote a chunk anywhere inside the file; Ozone's needs an exact end."""
    peer = tree({1: {0: (1, OK), 100: (2, OK), 150: (3, OK)}})
    ours = _lens({1: {0: (1, OK)}}, 150)  # our chunk at 0 is 150 bytes: 100 starts inside it
    r = diff(ours, peer)
    assert {b: o.tolist() for b, o in r.missing_chunks.items()} == {1: [100, 150]}
    fixed = apply_repair(r)
    assert [c.offset for c in fixed.block(1).chunks] == [0]


def test_repair_runs_missing_then_corrupt_each_to_its_own_gap():
    """Ozone pulls a block's missing chunks and its corrupt chunks as separate lists: a gap
    in the first does not stop the second."""
    peer = tree({1: {0: (1, OK), 100: (2, BAD), 200: (3, OK), 300: (4, OK)}})
    ours = tree({1: {0: (1, OK), 100: (9, OK), 300: (8, BAD)}})
    r = diff(ours, peer)
    assert r.missing_chunks[1].tolist() == [200] and r.corrupt_chunks[1].tolist() == [300]
    fixed = apply_repair(r)
    got = {c.offset: (c.value, c.checksum_matches) for c in fixed.block(1).chunks}
    assert got == {0: (1, OK), 100: (9, OK), 200: (3, OK), 300: (4, OK)}
    # the peer's chunk at 50 cannot be written (our chunk at 0 ends at 100), which stops the
    # missing run; the corrupt chunk at 100 follows our chunk at 0 and is still repaired
    peer = tree({1: {0: (1, OK), 50: (5, OK), 100: (2, OK)}})
    ours = tree({1: {0: (1, OK), 100: (9, BAD)}})
    r = diff(ours, peer)
    assert r.missing_chunks[1].tolist() == [50] and r.corrupt_chunks[1].tolist() == [100]
    got = {c.offset: (c.value, c.checksum_matches) for c in apply_repair(r).block(1).chunks}
    assert got == {0: (1, OK), 100: (2, OK)}
