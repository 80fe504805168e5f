"""`crcmerkle scan --also ALG` (merkle.replica.also): the scan computes another CRC per window
of each chunk, and per block read in full, from the bytes it reads anyway.

Each value is checked against the block file's bytes read independently (through the layout's
own ReplicaFiles) and checksummed by merkle's one-shot functions, on both shipped layouts,
with windows smaller and larger than the read buffer; the data is read once (the progress
callback sees every read); a block not read in full has no block value; the --emit tables
carry the columns; `crcmerkle checksum -a crc64nvme` prints S3's form.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import zlib
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import merkle
from merkle.cli import main
from merkle.replica.also import ALSO_ALGORITHMS, AlsoChecksums, check_algorithms, concat
from merkle.replica.blocks import NONE
from merkle.replica.layouts import layout_of
from merkle.replica.scan import scan_paths

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replica_helpers import make_cluster  # noqa: E402

KiB = 1024
#: chunks of 5 KiB in 2 KiB windows (a short last window), blocks up to 12 KiB, both CRC types
SHAPE = dict(
    datanodes=1,
    replicas=1,
    volumes=1,
    containers=1,
    block_size=12 * KiB,
    chunk_size=5 * KiB,
    bytes_per_checksum=2 * KiB,
    algorithm="mixed",
    min_blocks=2,
    max_blocks=3,
)
ONE_SHOT = {"crc64nvme": merkle.crc64nvme, "crc32c": merkle.crc32c, "crc32": zlib.crc32}
LAYOUTS = [
    "crcmerkle",
    pytest.param(
        "ozone",
        marks=pytest.mark.skipif(
            not all(__import__("importlib").util.find_spec(m) for m in ("rocksdict", "yaml")),
            reason="the Ozone layout needs rocksdict and yaml",
        ),
    ),
]


@pytest.fixture(scope="module", params=LAYOUTS)
def cluster(request: Any, tmp_path_factory: Any) -> Path:
    root = tmp_path_factory.mktemp(f"also-{request.param}") / "cluster"
    make_cluster(root, layout=request.param, **SHAPE)
    return root


def _block_bytes(result: Any, block_id: int, length: int) -> bytes:
    """The block file's first `length` bytes, read through the layout's ReplicaFiles (not
    through the scanner)."""
    layout = layout_of(result.path)
    (volume,) = layout.volumes(result.path)
    (ref,) = [r for r in layout.replicas(volume) if os.path.samefile(r.path, result.path)]
    f = layout.open_files(ref).open_block(block_id)
    try:
        buf = bytearray(length)
        got = f.pread_into(memoryview(buf), 0) if length else 0
    finally:
        f.close()
    assert got == length
    return bytes(buf)


def _expected(
    result: Any, algorithm: str
) -> Tuple[Dict[Tuple[int, int], List[int]], Dict[int, int]]:
    """Each CRC chunk's window values and each block's value, from the files' bytes."""
    fn = ONE_SHOT[algorithm]
    windows: Dict[Tuple[int, int], List[int]] = {}
    blocks: Dict[int, int] = {}
    for b in result.meta.sorted_blocks():
        data = _block_bytes(result, b.block_id, b.length)
        for c in b.chunks:
            if c.checksum_type == NONE:
                continue
            bpc = c.bytes_per_checksum
            windows[(b.block_id, c.offset)] = [
                fn(data[c.offset + s : c.offset + min(s + bpc, c.length)])
                for s in range(0, c.length, bpc)
            ]
        blocks[b.block_id] = fn(data)
    return windows, blocks


@pytest.mark.parametrize("buffer_size", [1 << 20, 1000])  # 1000: windows larger than a read
def test_also_values_equal_the_files_bytes(cluster: Path, buffer_size: int) -> None:
    (r,) = scan_paths([cluster], also=ALSO_ALGORITHMS, write_tree=False, buffer_size=buffer_size)
    assert r.ok and set(r.also) == set(ALSO_ALGORITHMS)
    for alg in ALSO_ALGORITHMS:
        windows, blocks = _expected(r, alg)
        got = r.also[alg]
        assert len(got.chunk_block) == len(windows) > 3
        for (bid, off), want in windows.items():
            w = got.chunk_windows(bid, off)
            assert w is not None and w.tolist() == want, (alg, bid, off)
        assert {int(b): int(v) for b, v in zip(got.block_id, got.block_value)} == blocks
    # the chunk's own CRC asked for again: the values it was verified with
    for b in r.meta.sorted_blocks():
        for c in b.chunks:
            own = r.also[c.algorithm].chunk_windows(b.block_id, c.offset)
            assert own.tolist() == c.window_values().tolist()


def test_also_reads_the_data_once(cluster: Path) -> None:
    """Every read goes through the progress callback: --also adds none."""

    def reads(**kw: Any) -> Tuple[List[int], Any]:
        seen: List[int] = []
        (r,) = scan_paths([cluster], write_tree=False, progress=seen.append, **kw)
        return seen, r

    plain, r0 = reads()
    also, r1 = reads(also=("crc64nvme", "crc32"))
    assert plain == also and sum(also) == r1.bytes_read == r0.bytes_read
    assert r1.bytes_read == r1.meta.data_bytes
    assert not r0.also and r1.also


def test_a_block_not_read_in_full_has_no_block_value(tmp_path: Path) -> None:
    root = tmp_path / "c"
    make_cluster(root, **SHAPE)
    (r,) = scan_paths([root], write_tree=False)
    victim = r.meta.sorted_blocks()[0]
    block_file = next(p for p in root.rglob(f"{victim.block_id}.block"))
    with open(block_file, "r+b") as f:
        f.truncate(victim.length - 100)  # the last chunk reads short
    (r,) = scan_paths([root], write_tree=False, also=("crc64nvme",))
    v = r.also["crc64nvme"]
    assert v.block(victim.block_id) is None
    assert all(v.block(b.block_id) is not None for b in r.meta.sorted_blocks()[1:])
    # the chunks read in full keep their windows; the short one has the windows it read
    first = victim.chunks[0]
    assert v.chunk_windows(victim.block_id, first.offset) is not None


def test_concat_equals_the_crc_of_the_whole() -> None:
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 9 * 64 + 17, dtype=np.uint8).tobytes()
    for alg, fn in ONE_SHOT.items():
        for window in (64, 100):
            for n in range(1, len(data) // window + 2):
                part = data[: min(len(data), n * window)]
                if len(part) <= (n - 1) * window:
                    continue
                values = np.array(
                    [fn(part[s : s + window]) for s in range(0, len(part), window)], dtype=np.uint64
                )
                last = len(part) - (len(values) - 1) * window
                assert concat(alg, values, window, last) == fn(part), (alg, window, n)


def test_check_algorithms() -> None:
    assert check_algorithms(["CRC64NVME", "crc32", "crc64nvme"]) == ("crc64nvme", "crc32")
    assert check_algorithms(None) == ()
    with pytest.raises(ValueError, match="sha256"):
        check_algorithms(["sha256"])


def test_also_json_and_text(cluster: Path, capsys: Any) -> None:
    assert main(["scan", "--no-write", "--json", "--also", "crc64nvme", str(cluster)]) == 0
    out = json.loads(capsys.readouterr().out)
    (rep,) = out["replicas"]
    blocks = rep["also"]["crc64nvme"]["blocks"]
    assert blocks and out["summary"]["also"] == ["crc64nvme"]
    (r,) = scan_paths([cluster], write_tree=False)
    _, want = _expected(r, "crc64nvme")
    for b in blocks:
        value = want[b["block_id"]]
        assert b["value"] == f"0x{value:016x}"
        assert base64.b64decode(b["base64"]) == value.to_bytes(8, "big")
    chunk = rep["also"]["crc64nvme"]["chunks"][0]
    assert len(bytes.fromhex(chunk["windows"])) % 8 == 0
    assert main(["scan", "--no-write", "--also", "crc64nvme", str(cluster)]) == 0
    text = capsys.readouterr().out
    assert (
        f"crc64nvme block {blocks[0]['block_id']}: {blocks[0]['value']} "
        f"{blocks[0]['base64']}" in text
    )
    # no data read, nothing to checksum: refused in one line
    assert main(["scan", "--trees-only", "--also", "crc64nvme", str(cluster)]) == 2
    assert "--also" in capsys.readouterr().err


def test_emit_writes_the_also_columns(cluster: Path, tmp_path: Path, capsys: Any) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from merkle.replica.also import WIDTHS

    out = tmp_path / "tables"
    assert (
        main(
            [
                "scan",
                str(cluster),
                "--emit",
                str(out),
                "--host",
                "h0",
                "--also",
                "crc64nvme",
                "--also",
                "crc32c",
            ]
        )
        == 0
    )
    capsys.readouterr()
    (r,) = scan_paths([cluster], write_tree=False)
    windows, blocks = _expected(r, "crc64nvme")
    chunks = pq.read_table(str(out / "chunks")).to_pylist()
    assert {(c["block"], c["offset"]): c["crc64nvme"] for c in chunks} == {
        k: np.array(v, dtype=">u8").tobytes() for k, v in windows.items()
    }
    assert all(c["crc32c"] is not None and c["crc32"] is None for c in chunks)
    assert all(
        len(c["crc32c"]) == WIDTHS["crc32c"] * len(windows[(c["block"], c["offset"])])
        for c in chunks
    )
    rows = pq.read_table(str(out / "blocks")).to_pylist()
    assert {b["block"]: b["crc64nvme"] for b in rows} == {
        k: v.to_bytes(8, "big") for k, v in blocks.items()
    }


def test_tables_match_chunks_by_block_and_offset() -> None:
    pa = pytest.importorskip("pyarrow")
    from spark_udfs.tables import also_block_columns, also_chunk_columns

    v = AlsoChecksums.collect(
        "crc64nvme",
        [(7, 0, np.array([1, 2], np.uint64)), (5, 16, np.array([3], np.uint64))],
        [(5, 0xAE8B14860A799888)],
    )
    cols = also_chunk_columns(
        {"crc64nvme": v}, pa.array([5, 7, 7, None, 5]), pa.array([16, 0, 99, None, None])
    )
    assert cols["crc64nvme"].to_pylist() == [
        (3).to_bytes(8, "big"),
        (1).to_bytes(8, "big") + (2).to_bytes(8, "big"),
        None,
        None,
        None,
    ]
    assert cols["crc32"].null_count == 5
    blocks = also_block_columns({"crc64nvme": v}, np.array([7, 5], np.int64))
    assert blocks["crc64nvme"].to_pylist() == [None, bytes.fromhex("ae8b14860a799888")]
    # a replica none of whose chunks was read (all unreadable): every row null, no error
    none = AlsoChecksums.collect("crc32c", [], [])
    cols = also_chunk_columns({"crc32c": none}, pa.array([5, 7]), pa.array([0, 16]))
    assert cols["crc32c"].null_count == 2


@pytest.mark.parametrize(
    "argv, line",
    [
        (["-a", "crc64nvme"], "ae8b14860a799888  rosUhgp5mIg=  9  {}"),
        (["-a", "crc64nvme", "-b", "4"], "{}  29f5dbe7e2ff71d4 f3c774afe7009fd7 85894d772e0f40a7"),
        (
            ["-a", "crc64nvme", "-b", "4", "--buffer-size", "2"],
            "{}  29f5dbe7e2ff71d4 f3c774afe7009fd7 85894d772e0f40a7",
        ),
        (["-a", "crc32c"], "e3069283  9  {}"),  # unchanged
    ],
)
def test_checksum_cli_crc64nvme(tmp_path: Path, capsys: Any, argv: List[str], line: str) -> None:
    f = tmp_path / "check.txt"
    f.write_bytes(b"123456789")
    assert main(["checksum", *argv, str(f)]) == 0
    assert capsys.readouterr().out == line.format(f) + "\n"


def test_checksum_cli_crc64nvme_json(tmp_path: Path, capsys: Any) -> None:
    f = tmp_path / "check.txt"
    f.write_bytes(b"123456789")
    assert main(["checksum", "-a", "crc64nvme", "--format", "json", str(f)]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["value"] == 0xAE8B14860A799888 and rec["checksum"] == "ae8b14860a799888"
    # S3's x-amz-checksum-crc64nvme: base64 of the 8 big-endian bytes
    assert (
        rec["base64"]
        == "rosUhgp5mIg="
        == base64.b64encode((0xAE8B14860A799888).to_bytes(8, "big")).decode()
    )


def test_mixed_chunk_types(tmp_path: Path) -> None:
    """NONE chunks are not read (no windows, their block no value), a zero-length chunk has
    no windows, SHA256/MD5 chunks get the --also CRCs from the same reads (two in one
    pass), and --also values do not depend on the read size."""
    import hashlib

    from merkle.replica.blocks import MD5, SHA256, ChunkMeta
    from merkle.replica.crcmerkle.layout import container_paths
    from merkle.replica.replicadir.blockmeta import read_blockmeta, write_blockmeta
    from merkle.replica.replicadir.writer import ContainerWriter
    from merkle.replica.scan import scan_container

    root = tmp_path / "dn" / "vol" / "9"
    data = bytes(range(256)) * 64
    with ContainerWriter.create(root, 9, algorithm="crc32", bytes_per_checksum=1024) as w:
        w.write_chunk(1, 0, data[:4096])
        w.write_chunk(1, 4096, data[:3000], algorithm="none")
        w.write_chunk(2, 0, data[:3000])  # becomes SHA256 below
        w.write_chunk(3, 0, data[:5000])  # becomes MD5 below
        w.write_chunk(4, 0, data[:100])
        w.write_chunk(5, 0, b"")
    path = container_paths(root).blockmeta
    meta = read_blockmeta(path)
    for bid, kind, algo, n in ((2, SHA256, "sha256", 3000), (3, MD5, "md5", 5000)):
        digests = b"".join(
            hashlib.new(algo, data[s : min(s + 700, n)]).digest() for s in range(0, n, 700)
        )
        meta.blocks[bid] = meta.blocks[bid].with_chunks([ChunkMeta(0, n, kind, 700, digests)])
    write_blockmeta(meta, path)
    results = [
        scan_container(
            root, write_tree=False, buffer_size=size, also=("crc64nvme", "crc32c", "crc32")
        )
        for size in (1 << 20, 512)
    ]
    for r in results:
        assert r.ok, r.errors
        v = r.also["crc64nvme"]
        assert v.chunk_windows(1, 4096) is None and v.block(1) is None  # NONE: not read
        assert v.chunk_windows(1, 0).tolist() == [
            merkle.crc64nvme(data[s : s + 1024]) for s in range(0, 4096, 1024)
        ]
        for bid, n in ((2, 3000), (3, 5000)):
            for alg, fn in ONE_SHOT.items():
                assert r.also[alg].chunk_windows(bid, 0).tolist() == [
                    fn(data[s : min(s + 700, n)]) for s in range(0, n, 700)
                ], (alg, bid)
                assert r.also[alg].block(bid) == fn(data[:n])
        assert v.block(4) == merkle.crc64nvme(data[:100])
        assert v.chunk_windows(5, 0).tolist() == [] and v.block(5) == merkle.crc64nvme(b"") == 0
    for alg in ONE_SHOT:
        a, b = (r.also[alg] for r in results)
        assert a.windows.tolist() == b.windows.tolist()
        assert a.block_value.tolist() == b.block_value.tolist()


# ---- the checksums the metadata RECORDED (merkle.replica.recorded; the chunks table's
# checksum_type, bytes_per_checksum, checksums) --------------------------------------------


def _emitted_chunks(root: Path, out: Path, *mode: str) -> List[Dict[str, Any]]:
    """The chunk rows (rows with an offset) `crcmerkle scan --emit` writes for `root`."""
    pq = pytest.importorskip("pyarrow.parquet")
    assert main(["scan", str(root), "--emit", str(out), "--host", "h0", *mode]) in (0, 1)
    return [r for r in pq.read_table(str(out / "chunks")).to_pylist() if r["offset"] is not None]


def _check_recorded(rows: List[Dict[str, Any]], root: Path) -> Tuple[int, int]:
    """Each chunk row's recorded columns equal what the metadata on disk holds (decoded by
    tests/recorded_oracle.py, not by merkle.replica), and a row whose bytes matched has CRC
    checksums equal to the CRC of each window of the block file's bytes; (rows whose
    windows were checked against the bytes, rows that did not match)."""
    from recorded_oracle import recorded_on_disk, window_crcs

    want = recorded_on_disk(root)
    checked = mismatched = 0
    for r in rows:
        ctype, bpc, sums, length = want[(os.path.realpath(r["replica"]), r["block"], r["offset"])]
        assert (r["checksum_type"], r["bytes_per_checksum"], r["checksums"]) == (
            ctype,
            bpc,
            sums,
        ), (r["replica"], r["block"], r["offset"])
        from_bytes = window_crcs(r["replica"], r["block"], r["offset"], length, bpc, ctype)
        if r["checksum_matches"]:
            assert from_bytes == sums and len(sums) == 4 * -(-length // bpc)
            checked += 1
        else:
            assert from_bytes != sums  # a corrupted chunk: as recorded, not as read
            mismatched += 1
    return checked, mismatched


@pytest.mark.parametrize("mode", [(), ("--metadata-only",)])
def test_emit_writes_the_recorded_checksums(
    cluster: Path, tmp_path: Path, capsys: Any, mode: Tuple[str, ...]
) -> None:
    """A full scan and a census fill the recorded columns of every chunk, on both layouts,
    with what the metadata holds (a short last window included)."""
    from recorded_oracle import recorded_on_disk

    rows = _emitted_chunks(cluster, tmp_path / "t", *mode)
    capsys.readouterr()
    checked, mismatched = _check_recorded(rows, cluster)
    assert checked == len(rows) > 3 and mismatched == 0
    assert {r["checksum_type"] for r in rows} <= {"CRC32", "CRC32C"}
    assert (
        len({(os.path.realpath(r["replica"]), r["block"], r["offset"]) for r in rows})
        == len(recorded_on_disk(cluster))
        == len(rows)
    )


def test_trees_only_has_no_recorded_checksums(cluster: Path, tmp_path: Path, capsys: Any) -> None:
    rows = _emitted_chunks(cluster, tmp_path / "t", "--trees-only")
    capsys.readouterr()
    assert rows and all(
        r[c] is None for r in rows for c in ("checksum_type", "bytes_per_checksum", "checksums")
    )


@pytest.mark.skipif(
    not all(__import__("importlib").util.find_spec(m) for m in ("rocksdict", "yaml")),
    reason="needs rocksdict, yaml",
)
def test_a_corrupted_chunk_keeps_its_recorded_checksums(tmp_path: Path, capsys: Any) -> None:
    """A chunk whose bytes do not match: its row still carries what was recorded (the
    bytes' own CRCs differ), and checksum_matches is what tells the two apart; containers
    of both CRC types ("mixed" draws one per container)."""
    root = tmp_path / "c"
    make_cluster(
        root,
        "bitflip=2",
        layout="ozone",
        seed=1,
        **{**SHAPE, "datanodes": 2, "replicas": 2, "containers": 4},
    )
    rows = _emitted_chunks(root, tmp_path / "t")
    capsys.readouterr()
    checked, mismatched = _check_recorded(rows, root)
    assert mismatched == 2 and checked == len(rows) - 2
    assert {r["checksum_type"] for r in rows} == {"CRC32", "CRC32C"}


def test_also_json_chunks_carry_the_recorded_checksums(cluster: Path, capsys: Any) -> None:
    from recorded_oracle import recorded_on_disk

    assert main(["scan", "--no-write", "--json", "--also", "crc32c", str(cluster)]) == 0
    (rep,) = json.loads(capsys.readouterr().out)["replicas"]
    want = recorded_on_disk(cluster)
    chunks = rep["also"]["crc32c"]["chunks"]
    assert len(chunks) == len(want) > 3
    for c in chunks:
        ctype, bpc, sums, _ = want[(os.path.realpath(rep["path"]), c["block_id"], c["offset"])]
        assert (c["checksum_type"], c["bytes_per_checksum"], c["checksums"]) == (
            ctype,
            bpc,
            sums.hex(),
        )
        if ctype == "CRC32C":  # the recorded CRC32C equals the one computed from the read
            assert c["checksums"] == c["windows"]


def test_recorded_columns_match_chunks_by_block_and_offset() -> None:
    """Columnar matching: non-chunk rows and chunks not recorded are null, an unknown type
    keeps its number, NONE is an empty value, a (block, offset) recorded twice is
    ambiguous (null), and rows in any order find their chunk."""
    pa = pytest.importorskip("pyarrow")
    from merkle.replica.blocks import BlockMeta, ChunkMeta, ContainerMeta
    from merkle.replica.recorded import RecordedChecksums
    from spark_udfs.tables import RECORDED_COLUMNS, recorded_chunk_columns

    meta = ContainerMeta(1)
    meta.blocks[7] = BlockMeta(
        7,
        (
            ChunkMeta(0, 8, 3, 4, b"\1\2\3\4\5\6\7\x08"),
            ChunkMeta(8, 3, 1, 4, b""),
            ChunkMeta(16, 5, 9, 5, b"\xaa"),
        ),
    )
    meta.blocks[5] = BlockMeta(
        5, (ChunkMeta(0, 2, 4, 2, b"s" * 32), ChunkMeta(0, 2, 5, 2, b"m" * 16))
    )  # hostile: twice
    meta.blocks[6] = BlockMeta(6, (ChunkMeta(4, 1, 2, 1, b"\0\0\0\x09"),))
    rec = RecordedChecksums.from_meta(meta)
    cols = recorded_chunk_columns(
        rec, pa.array([6, 7, 7, None, 7, 5, 7, 9]), pa.array([4, 16, 0, None, None, 0, 8, 0])
    )
    assert list(cols) == RECORDED_COLUMNS
    assert cols["checksum_type"].to_pylist() == [
        "CRC32",
        "type number 9",
        "CRC32C",
        None,
        None,
        None,
        "NONE",
        None,
    ]
    assert cols["bytes_per_checksum"].to_pylist() == [1, 5, 4, None, None, None, 4, None]
    assert cols["checksums"].to_pylist() == [
        b"\0\0\0\x09",
        b"\xaa",
        b"\1\2\3\4\5\6\7\x08",
        None,
        None,
        None,
        b"",
        None,
    ]
    assert (
        rec.fields(5, 0)["checksums"] is None
        and rec.fields(7, 0)["checksums"] == "0102030405060708"
    )
    for none in (None, RecordedChecksums.from_meta(None)):
        empty = recorded_chunk_columns(none, pa.array([7]), pa.array([0]))
        assert all(c.null_count == 1 for c in empty.values())
