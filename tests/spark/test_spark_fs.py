"""The executors' filesystem layer (merkle.replica.crcmerkle.remote), without Spark: discovery
over pyarrow.fs finds what merkle's local discovery finds, and the scanner reading through
pyarrow.fs (ArrowReplicaFiles) reports exactly what it reports reading local files."""

from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from merkle.replica.crcmerkle import remote as fs  # noqa: E402
from merkle.replica.crcmerkle.layout import find_containers
from merkle.replica.files import LocalReplicaFiles
from merkle.replica.generate import generate_cluster, parse_faults
from merkle.replica.scan import scan_container, scan_files


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("fs") / "c"
    generate_cluster(root, faults=parse_faults("default"), containers=6, seed=3)
    return root


def test_discovery_matches_the_local_walk_for_paths_and_uris(cluster):
    want = sorted(
        (loc.volume.parent.name, loc.container_id, os.fspath(loc.root))
        for loc in find_containers(cluster)
    )
    got = sorted((r.datanode, r.container, r.path) for r in fs.discover(str(cluster)))
    assert got == want
    uri = sorted(
        (r.datanode, r.container, r.path, r.fs_path) for r in fs.discover("file://" + str(cluster))
    )
    assert [(d, c, "file://" + p, p) for d, c, p in want] == uri
    # any level: a datanode, a volume, one replica
    one = want[0][2]
    assert [r.path for r in fs.discover(one)] == [one]
    assert {r.datanode for r in fs.discover(str(cluster / "dn1"))} == {"dn1"}


def test_arrow_reads_equal_local_reads(cluster):
    for r in fs.discover("file://" + str(cluster)):
        # file:// goes to the local safe reader (no link followed, no FIFO opened); the Arrow
        # reader, which S3 and HDFS use, must agree with it on the same files
        assert isinstance(fs.replica_files(r), LocalReplicaFiles)
        files = fs.ArrowReplicaFiles(pafs.LocalFileSystem(), r.fs_path, r.container, r.path)
        got = scan_files(files, buffer_size=5000)  # many short reads, odd sizes
        local = scan_container(r.fs_path, write_tree=False)
        assert got.tree == local.tree and got.scanned == local.scanned
        assert [e.key for e in got.errors] == [e.key for e in local.errors]
        assert (got.bytes_read, got.blocks, got.chunks) == (
            local.bytes_read,
            local.blocks,
            local.chunks,
        )


def test_arrow_block_file_reads_are_positional_and_short_at_eof(tmp_path):
    (tmp_path / "f").write_bytes(bytes(range(200)))
    f = fs._ArrowBlockFile(pafs.LocalFileSystem().open_input_file(str(tmp_path / "f")))
    buf = bytearray(64)
    assert f.pread_into(memoryview(buf), 150) == 50 and buf[:50] == bytes(range(150, 200))
    assert f.pread_into(memoryview(buf)[:10], 3) == 10 and buf[:10] == bytes(range(3, 13))
    assert f.pread_into(memoryview(buf), 500) == 0
    assert f.fileno() is None  # never mapped
    f.close()


def test_bad_roots(tmp_path):
    with pytest.raises(FileNotFoundError):
        fs.discover(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError):
        fs.discover("file://" + str(tmp_path / "nope"))
    (tmp_path / "123").mkdir()  # a decimal name without chunks/ or metadata/
    with pytest.raises(ValueError, match="no container replica"):
        fs.discover(str(tmp_path))


class _NoSeekPastEnd:
    """A remote file as S3 behaves: seeking past the end is an error."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def size(self) -> int:
        return len(self.data)

    def seek(self, pos: int) -> None:
        if pos > len(self.data):
            raise OSError("Cannot seek past end of file")
        self.pos = pos

    def readinto(self, view) -> int:
        n = min(len(view), len(self.data) - self.pos)
        view[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def test_reads_are_clamped_to_the_file_size():
    f = fs._ArrowBlockFile(_NoSeekPastEnd(bytes(range(100))))
    buf = bytearray(64)
    assert f.pread_into(memoryview(buf), 80) == 20 and buf[:20] == bytes(range(80, 100))
    assert f.pread_into(memoryview(buf), 100) == 0
    assert f.pread_into(memoryview(buf), 4096) == 0  # a truncated block: short, not an error


def test_uri_display_and_location():
    from spark_udfs.uri import Location, child, display

    assert (
        display("s3://AK:SECRET@b/p/?endpoint_override=h:9&access_key=AK&secret_key=S&scheme=http")
        == "s3://b/p?endpoint_override=h:9&scheme=http"
    )
    assert display("hdfs://user@nn:8020/x/") == "hdfs://nn:8020/x"
    assert display("/local/path") == "/local/path"
    assert child("s3://b/p/?region=r", "plan.json") == "s3://b/p/plan.json?region=r"
    assert child("/a/b/", "plan.json") == "/a/b/plan.json"
    loc = Location.parse("file:///tmp/")
    assert loc.show("/tmp/x") == "file:///tmp/x"
