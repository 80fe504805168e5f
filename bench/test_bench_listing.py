"""Listing: how fast the Spark jobs' discovery (merkle.replica.crcmerkle.remote.discover)
finds replicas, in replicas listed per second, on local paths and on an S3-compatible store
on 127.0.0.1 (moto's server, tests/loopback_s3.py), at 1,200 and 12,000 replicas
(BENCH_SHORT=1: 1,200).

The layout is a cluster's: 10 datanodes x 2 volumes, 3 replicas per container, each replica
with two metadata files and two block files (empty: listing reads no data). The S3 case also
reports the HTTP requests one listing made: they grow with the directories above the
replicas (datanodes, volumes) and one page per 1,000 replicas of a volume, not with the
replicas. moto is much slower per request than a real store; the figures are for comparing
listings on this machine, not for predicting S3's.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from merkle.replica.crcmerkle import remote as fs  # noqa: E402

from conftest import SHORT  # noqa: E402  (bench/conftest.py)

SIZES = [1200] if SHORT else [1200, 12000]
DATANODES, VOLUMES = 10, 2


def _layout(n: int) -> Iterator[Tuple[str, int]]:
    """(replica path relative to the cluster, container ID) of n replicas."""
    for i in range(n):
        cid = i // 3 + 1
        dn = (cid + i % 3) % DATANODES
        yield f"dn{dn}/vol{cid % VOLUMES}/{cid}", cid


def _files(rel: str, cid: int) -> Tuple[str, ...]:
    return (
        f"{rel}/metadata/{cid}.blocks",
        f"{rel}/metadata/{cid}.tree",
        f"{rel}/chunks/1.block",
        f"{rel}/chunks/2.block",
    )


def _report(benchmark, where: str, n: int, seconds: float, requests: int = -1) -> None:
    rate = n / seconds
    benchmark.extra_info.update(
        {
            "replicas": n,
            "replicas_per_second": round(rate),
            "ms_per_replica": round(1e3 * seconds / n, 3),
        }
    )
    if requests >= 0:
        benchmark.extra_info["requests"] = requests
    print(
        f"\nlisting {where}: {n} replicas in {seconds:.2f} s = {rate:,.0f} replicas/s "
        f"({1e3 * seconds / n:.3f} ms per replica)"
        + (f", {requests} requests" if requests >= 0 else "")
    )


@pytest.mark.parametrize("n", SIZES)
def test_listing_local(benchmark, tmp_path, n):
    root = tmp_path / "cluster"
    for rel, cid in _layout(n):
        for f in _files(rel, cid):
            p = root / f
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch()
    t0 = time.perf_counter()
    reps = benchmark.pedantic(fs.discover, args=(str(root),), rounds=3, iterations=1)
    assert len(reps) == n
    _report(
        benchmark,
        "local",
        n,
        benchmark.stats.stats.min if benchmark.stats else (time.perf_counter() - t0) / 3,
    )


@pytest.mark.parametrize("n", SIZES)
def test_listing_s3(benchmark, n):
    pytest.importorskip("moto")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from loopback_s3 import LoopbackS3

    with LoopbackS3() as s3:
        for rel, cid in _layout(n):
            for f in _files(rel, cid):
                s3.put_direct(f"cluster/{f}")
        uri = s3.uri("cluster")
        before = s3.requests
        t0 = time.perf_counter()
        reps = benchmark.pedantic(fs.discover, args=(uri,), rounds=1, iterations=1)
        seconds = time.perf_counter() - t0
        assert len(reps) == n
        _report(benchmark, "S3 (moto, loopback)", n, seconds, s3.requests - before)
