"""The batch kernels behind every UDF form, without Spark: equal to merkle on the driver."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import merkle
from merkle import ozone
from spark_udfs import kernels

values_st = st.lists(st.one_of(st.none(), st.binary(max_size=300)), max_size=20)


@settings(max_examples=60, deadline=None)
@given(
    values_st,
    st.integers(1, 64),
    st.sampled_from(["crc32c", "crc32"]),
    st.integers(0, 3),
    st.booleans(),
)
def test_kernels_match_merkle(values, bpc, alg, cut, large):
    arr = pa.array(values, type=pa.large_binary() if large else pa.binary())
    arr = arr.slice(min(cut, len(arr)))  # sliced arrays: offsets not starting at 0
    vals = values[min(cut, len(values)) :]
    fn = merkle.crc32c if alg == "crc32c" else merkle.crc32
    assert kernels.crc_each(arr, alg).to_pylist() == [None if v is None else fn(v) for v in vals]
    want = [
        None if v is None else merkle.checksum_windows(v, bpc, algorithm=alg).tolist() for v in vals
    ]
    w = kernels.windows_each(arr, bpc, alg)
    assert w.to_pylist() == want
    packed = kernels.windows_each(arr, bpc, alg, packed=True).to_pylist()
    assert packed == [None if x is None else np.array(x, dtype=">u4").tobytes() for x in want]
    leaves = [
        None if x is None else ozone.leaf_checksum(np.array(x, dtype=np.uint32)) for x in want
    ]
    assert kernels.leaf_each(w).to_pylist() == leaves
    assert kernels.leaf_each(pa.array(packed, type=pa.binary())).to_pylist() == leaves


def test_null_with_bytes_behind_it_is_skipped():
    # a null slot may still own a byte range in the data buffer: it must not shift windows
    data = pa.py_buffer(b"aaaabbbbcccc")
    offs = pa.py_buffer(np.array([0, 4, 8, 12], dtype=np.int32))
    validity = pa.array([True, False, True]).buffers()[1]
    arr = pa.BinaryArray.from_buffers(pa.binary(), 3, [validity, offs, data])
    assert kernels.windows_each(arr, 3).to_pylist() == [
        merkle.checksum_windows(b"aaaa", 3).tolist(),
        None,
        merkle.checksum_windows(b"cccc", 3).tolist(),
    ]


def test_pandas_inputs_and_empties():
    s = pd.Series([b"123456789", None, b""])
    assert kernels.crc_each(s).to_pylist() == [0xE3069283, None, 0]
    assert kernels.windows_each(s, 4).to_pylist()[1:] == [None, []]
    assert kernels.leaf_each(
        pd.Series([np.array([1, 2]), None, np.array([], dtype=np.int64)])
    ).to_pylist() == [ozone.leaf_checksum([1, 2]), None, 0]


def test_bad_inputs():
    with pytest.raises(ValueError, match="algorithm"):
        kernels.crc_each(pa.array([b"x"]), "md5")
    with pytest.raises(ValueError, match="> 0"):
        kernels.windows_each(pa.array([b"x"]), 0)
    with pytest.raises(TypeError, match="encoded"):
        kernels.crc_each(pa.array(["text"]))
    with pytest.raises(TypeError, match="binary"):
        kernels.crc_each(pa.array([1, 2]))
    with pytest.raises(ValueError, match="32-bit"):
        kernels.leaf_each(pa.array([[1, 2**32]]))
    with pytest.raises(ValueError, match="32-bit"):
        kernels.leaf_each(pa.array([[-1]]))
    with pytest.raises(ValueError, match="null element"):
        kernels.leaf_each(pa.array([[1, None]]))


def test_block_and_container_values_order_rows_themselves():
    rng = np.random.default_rng(3)
    offs = np.arange(6, dtype=np.int64) * 100
    leaves = rng.integers(0, 2**32, 6)
    perm = rng.permutation(6)
    bid = 2**60 + 5  # beyond float64's exact range: no lossy conversion anywhere
    v = kernels.block_value(pd.Series([bid] * 6), pd.Series(offs[perm]), pd.Series(leaves[perm]))
    assert v == ozone.block_checksum(bid, leaves)
    # a null leaf (missing chunk) is skipped, like a chunk absent from the tree
    s_leaf = pd.Series(list(leaves[perm]) + [None], dtype=object)
    s_off = pd.Series(list(offs[perm]) + [999], dtype=object)
    assert kernels.block_value(pd.Series([bid] * 7), s_off, s_leaf) == v
    ids = np.array([9, 3, 7])
    vals = np.array([11, 22, 33])
    assert kernels.container_value(ids, vals) == ozone.container_checksum([22, 33, 11])
    with pytest.raises(ValueError, match="twice"):
        kernels.container_value([1, 1], [2, 3])
    with pytest.raises(ValueError, match="one non-null block ID"):
        kernels.block_value([1, 2], [0, 1], [5, 6])
