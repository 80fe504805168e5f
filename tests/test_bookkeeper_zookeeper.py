"""BookKeeper's ledger metadata read from a real ZooKeeper (Debian's package, started by
tests/zookeeper_server.py) holding the golden cluster's znodes: the bytes read back are the
bytes BookKeeper stored, hostile trees give bounded one-line problems, and nothing is written."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Iterator, List

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from merkle.cli import main  # noqa: E402
from merkle.replica.bookkeeper.metadata import parse_ledger_metadata  # noqa: E402
from merkle.replica.bookkeeper.zkmeta import (  # noqa: E402
    ZkMetadata,
    ZooKeeperError,
    ledger_znode_path,
    parse_zookeeper_spec,
    read_zookeeper_metadata,
)

from zookeeper_server import (  # noqa: E402
    GOLDEN_ZK,
    ZooKeeperServer,
    load_znode_tree,
    require_zookeeper,
    znode_snapshot,
)

INSTANCE_ID = "4f45314a-d797-4da2-92b5-79bd9e51cc66"
BOOKIES = [f"127.0.0.1:{p}" for p in (31811, 31812, 31813, 31814)]
BIG = 2 * 1024 * 1024  # a znode of 2 MB: past our 1 MiB bound, under the test server's limit
FLAT = b"2\norg.apache.bookkeeper.meta.FlatLedgerManagerFactory:1"


def golden(path: str) -> bytes:
    with open(os.path.join(GOLDEN_ZK, *path.strip("/").split("/"), "_data"), "rb") as f:
        return f.read()


def plant_hostile(c: Any) -> None:
    """/hostile: the golden cluster plus everything a planted or broken tree can hold."""
    load_znode_tree(c, GOLDEN_ZK + "/ledgers", under="/hostile")
    c.create("/hostile/00/0000/L0005", b"x" * BIG)  # too large: not read
    for i in range(60):  # more than max_children
        c.create(f"/hostile/00/0001/L{i:04d}", b"y", makepath=True)
    c.create("/hostile/00/0000/Lxyz", b"")  # not a ledger name
    c.create("/hostile/00/0000/L00006", b"")  # 5 digits
    c.create("/hostile/evil", b"")  # unknown root child
    c.create("/hostile/99/9999/L9999", b"short", makepath=True)  # 9999999999: long form
    c.create("/hostile/000/0000/0000/0000/L0007", b"long", makepath=True)  # 7: short form
    c.create("/hostile/999/9999/9999/9999/L9999", b"", makepath=True)  # beyond 2^63 - 1
    c.create("/hostile/000/0000/0021/4748/L3647", b"maxint", makepath=True)  # 2^31 - 1: right
    c.create("/hostile/cookies/10.0.0.9:3181", b"z" * BIG)  # a cookie too large
    c.create("/hostile/cookies/x\u2028y", b"z" * BIG)  # ... named with a break
    c.create("/hostile/00/0000/L\u20280000", b"")  # a ledger name too
    c.create("/hostile/idgen/ID-0000000042", b"", makepath=True)  # BookKeeper's own
    c.create("/hostile/underreplication/ledgers", b"", makepath=True)
    c.create("/flat/LAYOUT", FLAT, makepath=True)
    c.create("/flat/L0000000001", golden("/ledgers/00/0000/L0001"))
    c.create("/nolayout/00/0000/L0000", golden("/ledgers/00/0000/L0000"), makepath=True)
    load_znode_tree(c, GOLDEN_ZK + "/ledgers", under="/badmeta")  # ledger 1's metadata
    c.set("/badmeta/00/0000/L0001", b"BookieMetadataFormatVersion\t3\n\xff\xff")  # broken


@pytest.fixture(scope="module")
def zk() -> Iterator[ZooKeeperServer]:
    require_zookeeper()
    with ZooKeeperServer(jute_maxbuffer=4 * 1024 * 1024) as server:
        c = server.client()
        load_znode_tree(c)
        plant_hostile(c)
        yield server


@pytest.fixture
def reads(zk: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[List[str]]:
    """The paths whose data or children the reader asked for; the test fails if it asks for
    any write (and the znode tree, every stat included, is the same after the test as before
    it)."""
    from kazoo.client import KazooClient

    asked: List[str] = []
    get_async, children_async = KazooClient.get_async, KazooClient.get_children_async

    def spy(self: Any, path: str, *a: Any, **k: Any) -> Any:
        asked.append(path)
        return get_async(self, path, *a, **k)

    def spy_children(self: Any, path: str, *a: Any, **k: Any) -> Any:
        asked.append("children of " + path)
        return children_async(self, path, *a, **k)

    def refuse(name: str) -> Any:
        def write(*_a: Any, **_k: Any) -> Any:
            raise AssertionError(f"the reader called KazooClient.{name}")

        return write

    checker = zk.client()
    before = znode_snapshot(checker)
    monkeypatch.setattr(KazooClient, "get_async", spy)
    monkeypatch.setattr(KazooClient, "get_children_async", spy_children)
    for name in (
        "create",
        "create_async",
        "set",
        "set_async",
        "delete",
        "delete_async",
        "ensure_path",
        "ensure_path_async",
        "set_acls",
        "set_acls_async",
        "transaction",
        "sync",
        "sync_async",
        "reconfig",
        "add_auth",
    ):
        monkeypatch.setattr(KazooClient, name, refuse(name))
    yield asked
    monkeypatch.undo()
    assert znode_snapshot(checker) == before


# --- the golden cluster ---------------------------------------------------------------------------


def test_golden_ledgers_read_back_exactly(zk: ZooKeeperServer, reads: List[str]) -> None:
    meta = read_zookeeper_metadata(zk.hosts, timeout=30.0)
    assert sorted(meta.ledgers) == [0, 1, 2, 3, 4]
    for lid, data in meta.ledgers.items():
        assert data == golden(f"/ledgers/00/0000/L{lid:04d}")
    assert meta.layout == "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory"
    assert meta.problems == [] and meta.unread == {} and meta.complete


def test_golden_cookies_and_their_stat(zk: ZooKeeperServer, reads: List[str]) -> None:
    meta = read_zookeeper_metadata(f"127.0.0.1:{zk.port}/ledgers", timeout=30.0)
    assert sorted(meta.cookies) == BOOKIES
    checker = zk.client()
    for bookie, cookie in meta.cookies.items():
        data, st = checker.get(f"/ledgers/cookies/{bookie}")
        assert cookie.data == data == golden(f"/ledgers/cookies/{bookie}")
        assert cookie.bookie_id == bookie
        assert (cookie.czxid, cookie.ctime, cookie.mzxid, cookie.mtime, cookie.version) == (
            st.czxid,
            st.ctime,
            st.mzxid,
            st.mtime,
            st.version,
        )
        assert f'instanceId: "{INSTANCE_ID}"'.encode() in cookie.data


def test_golden_instance_id(zk: ZooKeeperServer, reads: List[str]) -> None:
    meta = read_zookeeper_metadata(f"zk+hierarchical://127.0.0.1:{zk.port}/ledgers", timeout=30.0)
    assert meta.instance_id == INSTANCE_ID == golden("/ledgers/INSTANCEID").decode()
    assert sorted(meta.ledgers) == [0, 1, 2, 3, 4]


def test_a_reformatted_bookie_is_told_by_its_cookie_stat(zk: ZooKeeperServer) -> None:
    """BP-31: deleting and rewriting a cookie with the same bytes changes czxid (and ctime)."""
    c = zk.client()
    load_znode_tree(c, GOLDEN_ZK + "/ledgers", under="/reformat")
    first = read_zookeeper_metadata(f"{zk.hosts}/reformat", timeout=30.0).cookies
    path = f"/reformat/cookies/{BOOKIES[2]}"
    data, _ = c.get(path)
    before = znode_snapshot(c)
    c.delete(path)
    c.create(path, data)
    assert znode_snapshot(c) != before  # the no-write check above would see such a rewrite
    second = read_zookeeper_metadata(f"{zk.hosts}/reformat", timeout=30.0).cookies
    assert second[BOOKIES[2]].data == first[BOOKIES[2]].data
    assert second[BOOKIES[2]].czxid > first[BOOKIES[2]].czxid
    assert second[BOOKIES[1]] == first[BOOKIES[1]]


# --- hostile trees --------------------------------------------------------------------------------


def hostile(zk: ZooKeeperServer, **bounds: Any) -> ZkMetadata:
    return read_zookeeper_metadata(f"{zk.hosts}/hostile", timeout=30.0, max_children=50, **bounds)


def test_hostile_tree_gives_bounded_problems(zk: ZooKeeperServer, reads: List[str]) -> None:
    meta = hostile(zk)
    # the golden ledgers and the one well-placed long-form ledger, nothing else
    assert sorted(meta.ledgers) == [0, 1, 2, 3, 4, 2**31 - 1]
    assert meta.ledgers[2**31 - 1] == b"maxint"
    assert meta.ledgers[3] == golden("/ledgers/00/0000/L0003")
    text = "\n".join(meta.problems)
    assert all(len(p.splitlines()) == 1 for p in meta.problems)
    assert "'x\\u2028y'" in text and "'L\\u20280000'" in text
    # the 2 MB ledger znode: listed (so its data is not garbage), never read
    assert "L0005" in text and meta.unread.keys() == {5}
    assert "/hostile/00/0000/L0005" not in reads
    assert "/hostile/cookies/10.0.0.9:3181" not in reads
    assert "10.0.0.9:3181" not in meta.cookies and "10.0.0.9:3181" in text
    # 60 children with max_children 50: not listed, and the listing says it is incomplete
    assert "/hostile/00/0001: 60 children" in text and not meta.complete
    assert "children of /hostile/00/0001" not in reads  # refused from its stat
    assert "children of /hostile/00/0000" in reads
    assert not any(lid >= 10000 and lid < 2**31 - 1 for lid in meta.ledgers)
    # names that are not ledger znode names, and IDs that do not round-trip
    for bad in (
        "'Lxyz'",
        "'L00006'",
        "'evil'",
        "ledger 9999999999 belongs at",
        "ledger 7 belongs at /hostile/00/0000/L0007",
        "beyond a 64-bit ledger ID",
    ):
        assert bad in text, bad
    assert "idgen" not in text and "underreplication" not in text


def test_oversize_bound_is_ours_not_the_servers(zk: ZooKeeperServer, reads: List[str]) -> None:
    """The 2 MB znode is readable from this server (jute.maxbuffer 4 MiB): with a larger bound
    it is read, so it is our bound that kept it out above."""
    meta = hostile(zk, max_znode_bytes=4 * 1024 * 1024)
    assert meta.ledgers[5] == b"x" * BIG and 5 not in meta.unread


def test_total_bytes_bound_is_one_line_error(zk: ZooKeeperServer, reads: List[str]) -> None:
    with pytest.raises(ZooKeeperError, match="larger than the 1000 bytes") as exc:
        read_zookeeper_metadata(zk.hosts, timeout=30.0, max_total_bytes=1000)
    assert "\n" not in str(exc.value)


def test_other_ledger_managers_refused(zk: ZooKeeperServer, reads: List[str]) -> None:
    with pytest.raises(ZooKeeperError, match="only BookKeeper's hierarchical") as exc:
        read_zookeeper_metadata(f"{zk.hosts}/flat", timeout=30.0)
    assert "FlatLedgerManagerFactory" in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(ZooKeeperError, match="LAYOUT: no such znode"):
        read_zookeeper_metadata(f"{zk.hosts}/nolayout", timeout=30.0)
    with pytest.raises(ZooKeeperError, match="no znode /absent"):
        read_zookeeper_metadata(f"{zk.hosts}/absent", timeout=30.0)


def test_no_server_is_one_line_error() -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on (bound, never listening)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(ZooKeeperError, match="cannot connect within 1 s") as exc:
            read_zookeeper_metadata(f"127.0.0.1:{port}", timeout=1.0)
    assert "\n" not in str(exc.value)


# --- the spec -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,hosts,root",
    [
        ("zk1:2181", (("zk1", 2181),), "/ledgers"),
        ("zk1.example.com:2181/ledgers", (("zk1.example.com", 2181),), "/ledgers"),
        (
            "10.0.0.1:1,10.0.0.2:65535/pulsar/ledgers",
            (("10.0.0.1", 1), ("10.0.0.2", 65535)),
            "/pulsar/ledgers",
        ),
        ("[::1]:2181/bk", (("::1", 2181),), "/bk"),
        ("zk+hierarchical://a:2181;b:2182/ledgers", (("a", 2181), ("b", 2182)), "/ledgers"),
        ("zk+null://a:2181/x", (("a", 2181),), "/x"),
        ("zk://a:2181", (("a", 2181),), "/ledgers"),
    ],
)
def test_spec_good(spec: str, hosts: Any, root: str) -> None:
    parsed = parse_zookeeper_spec(spec)
    assert parsed.hosts == hosts and parsed.root == root


@pytest.mark.parametrize(
    "spec,why",
    [
        ("host:0", "bad port"),
        ("host:99999", "bad port"),
        ("host:+1", "bad port"),
        ("host:", "bad port"),
        ("host", "expected HOST:PORT"),
        (":2181", "expected HOST:PORT"),
        ("a_b:2181", "bad host name"),
        ("-a:2181", "bad host name"),
        ("a..b:2181", "bad host name"),
        ("h:2181/../x", "bad ledgers root"),
        ("h:2181/ledgers/", "bad ledgers root"),
        ("h:2181/", "bad ledgers root"),
        ("h:2181//x", "bad ledgers root"),
        ("h:2181/a/./b", "bad ledgers root"),
        ("h:2181/led gers", "bad ledgers root"),
        ("h:2181/a\nb", "bad ledgers root"),
        ("[zz]:2181", "bad IPv6"),
        ("[::1]2181", "[IPv6]"),
        ("zk+flat://h:2181/ledgers", "'flat' is not supported"),
        ("zk+ms://h:2181/ledgers", "'ms' is not supported"),
        ("etcd://h:2379/ledgers", "only zk://"),
        ("", "expected HOST:PORT"),
    ],
)
def test_spec_hostile(spec: str, why: str) -> None:
    with pytest.raises(ZooKeeperError) as exc:
        parse_zookeeper_spec(spec)
    assert why in str(exc.value)
    assert "\n" not in str(exc.value).replace(repr(spec), "")


def test_ledger_znode_paths_are_bookkeepers() -> None:
    """StringUtils.getHybridHierarchicalLedgerPath: 2-4-4 below Integer.MAX_VALUE, else
    3-4-4-4-L4 of the 19-digit form."""
    assert ledger_znode_path("/ledgers", 0) == "/ledgers/00/0000/L0000"
    assert ledger_znode_path("/ledgers", 1234567890) == "/ledgers/12/3456/L7890"
    assert ledger_znode_path("/ledgers", 2**31 - 2) == "/ledgers/21/4748/L3646"
    assert ledger_znode_path("/l", 2**31 - 1) == "/l/000/0000/0021/4748/L3647"
    assert ledger_znode_path("/l", 2**63 - 1) == "/l/922/3372/0368/5477/L5807"
    seen: Dict[str, int] = {}
    for lid in (0, 9999, 10000, 2**31 - 2, 2**31 - 1, 2**40 + 7, 2**63 - 1):
        assert ledger_znode_path("/l", lid) not in seen
        seen[ledger_znode_path("/l", lid)] = lid


def test_a_reply_longer_than_its_stat_said_is_refused_before_it_is_read(
    zk: ZooKeeperServer, reads: List[str]
) -> None:
    """A server that lies in a stat (dataLength small, the reply large): modelled on the real
    server by trusting every stat (max_znode_bytes beyond the 2 MB ledger) and bounding the
    replies below it. The reply is refused from its length word, a one-line error."""
    with pytest.raises(
        ZooKeeperError,
        match=r"/hostile/cookies/10.0.0.9:3181: .*a reply of "
        r"2097\d{3} bytes, more than the 1048576 read",
    ) as exc:
        hostile(zk, max_znode_bytes=4 * 1024 * 1024, max_reply_bytes=1024 * 1024)
    assert "\n" not in str(exc.value)


def test_zookeeper_absent_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI installs the zookeeper package: there a missing one fails instead of skipping."""
    import zookeeper_server

    monkeypatch.setattr(zookeeper_server, "ZOOKEEPER_JAR", "/nonexistent/zookeeper.jar")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Debian package zookeeper"):
        zookeeper_server.require_zookeeper()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must not be skipped"):
        zookeeper_server.require_zookeeper()


#: ledgers.json of the golden cluster: id -> (state, E, W, A, lastEntryId, length, digest,
#: password, segments)
GOLDEN_LEDGERS = {
    0: (
        "CLOSED",
        3,
        2,
        2,
        23,
        5102,
        "CRC32C",
        b"golden-a",
        [(0, ("127.0.0.1:31812", "127.0.0.1:31814", "127.0.0.1:31811"))],
    ),
    1: (
        "CLOSED",
        3,
        3,
        3,
        11,
        2874,
        "CRC32",
        b"",
        [(0, ("127.0.0.1:31813", "127.0.0.1:31811", "127.0.0.1:31812"))],
    ),
    2: (
        "CLOSED",
        3,
        2,
        2,
        19,
        4570,
        "CRC32C",
        b"golden-c",
        [
            (0, ("127.0.0.1:31814", "127.0.0.1:31811", "127.0.0.1:31812")),
            (10, ("127.0.0.1:31814", "127.0.0.1:31813", "127.0.0.1:31812")),
        ],
    ),
    3: (
        "CLOSED",
        2,
        2,
        2,
        5,
        1303,
        "HMAC",
        b"golden-d",
        [(0, ("127.0.0.1:31813", "127.0.0.1:31814"))],
    ),
    4: (
        "OPEN",
        3,
        3,
        2,
        -1,
        0,
        "CRC32C",
        b"golden-e",
        [(0, ("127.0.0.1:31812", "127.0.0.1:31813", "127.0.0.1:31814"))],
    ),
}


def test_live_metadata_parses_as_ledgers_json_says(zk: ZooKeeperServer, reads: List[str]) -> None:
    """The bytes read from ZooKeeper through the ledger-metadata parser give what the golden
    ledgers.json says."""
    meta = read_zookeeper_metadata(zk.hosts, timeout=30.0)
    for lid, want in GOLDEN_LEDGERS.items():
        m = parse_ledger_metadata(meta.ledgers[lid])
        got = (
            m.state,
            m.ensemble_size,
            m.write_quorum,
            m.ack_quorum,
            m.last_entry_id,
            m.length,
            m.digest_type,
            m.password,
            [(f, tuple(b)) for f, b in m.segments],
        )
        assert got == want, lid


# --- crcmerkle scan --zookeeper ---------------------------------------------------------------

GOLDEN_BOOKIES = os.path.join(os.path.dirname(GOLDEN_ZK))


def _scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["scan", GOLDEN_BOOKIES, *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_scan_against_a_live_zookeeper_finds_what_the_dump_finds(
    zk: ZooKeeperServer, reads: List[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`crcmerkle scan BOOKIES --zookeeper HOST:PORT` reads the metadata from the live
    ZooKeeper (read-only: the `reads` fixture fails on any write) and finds exactly what the
    same scan against the znode tree's files finds: the one flipped bit, exit 1."""
    live = _scan(capsys, "--zookeeper", zk.hosts)
    files = _scan(capsys, "--ledger-metadata", GOLDEN_ZK)
    assert live[0] == files[0] == 1
    findings = [line for line in live[1].splitlines() if line.startswith(("error:", "warning:"))]
    assert len(findings) == 2 and "CORRUPT_ENTRY" in findings[0], live[1]
    # the same findings and ledger lines; only the timing in the summary differs
    assert live[1].splitlines()[:-1] == files[1].splitlines()[:-1]
    assert any("children of /ledgers" in r for r in reads)


def test_an_unparsable_ledger_znode_leaves_its_entries_unverified_not_garbage(
    zk: ZooKeeperServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ledger 1's metadata in ZooKeeper does not parse: one problem line, its stored copies
    are LEDGER_METADATA_UNREAD (error: not verified), never LEDGER_NOT_IN_METADATA (the
    warning that calls them garbage), exit 1."""
    status, out, err = _scan(capsys, "--zookeeper", zk.hosts + "/badmeta")
    assert status == 1
    assert "ledger 1:" in err and "Traceback" not in err
    unread = [line for line in out.splitlines() if "LEDGER_METADATA_UNREAD" in line]
    assert unread and all("ledger 1:" in line for line in unread), out
    assert "LEDGER_NOT_IN_METADATA" not in out
    # ledger 1's 36 copies (E3/W3, 12 entries) were not verified: not counted good
    assert "151 entry copies (114 good)" in out.splitlines()[-1]


def test_zookeeper_and_ledger_metadata_together_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = _scan(capsys, "--zookeeper", "127.0.0.1:2181", "--ledger-metadata", GOLDEN_ZK)
    assert status == 2 and "give one source" in err and len(err.strip().splitlines()) == 1
