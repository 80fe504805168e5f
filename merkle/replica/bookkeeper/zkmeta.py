"""BookKeeper's ledger metadata from where it lives: a live ZooKeeper, read-only (`--zookeeper`).

    meta = read_zookeeper_metadata("zk1:2181,zk2:2181/ledgers")
    meta.ledgers[0]            # ledger 0's znode bytes, as parse_ledger_metadata() reads them
    meta.cookies["10.0.0.7:3181"].czxid   # a cookie znode and its stat (re-formatted bookies)

The spec is `HOST:PORT[,HOST:PORT...][/root]` or BookKeeper's metadata service URI
`zk+hierarchical://HOST:PORT[;HOST:PORT...]/ledgers` (ZKMetadataDriverBase: the URI's path is
the ledgers root; AbstractConfiguration.getZkLedgersRootPath: "/ledgers" when none is given).

What is read, with kazoo (a session with read_only=True; no create, set, delete, sync or watch
is ever sent): `<root>/LAYOUT` (only the hierarchical ledger managers are understood: their
znode paths are the 2-4-4 `00/0000/L0000` form for IDs below Integer.MAX_VALUE and the
3-4-4-4-L4 form above, StringUtils.getHybridHierarchicalLedgerPath), `<root>/INSTANCEID`, every
`<root>/cookies/<bookieId>` with its stat (BP-31: a deleted and rewritten cookie gets a new czxid
and ctime even when its bytes are identical), and every ledger znode's bytes.

Everything the server sends is data: a name that is not a ledger znode name is a problem line and
is skipped (never a path to walk into), a ledger ID whose znode path does not round-trip is a
problem, and a znode's size and child count are checked from its stat BEFORE it is read: a znode
larger than `max_znode_bytes` or with more than `max_children` children is a problem line, never
read. The total of the bytes kept is bounded too (`max_total_bytes`: an error, since a partial
listing would make every unlisted ledger look deleted). Every request waits at most `timeout`.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from merkle.replica.errors import ReplicaError

__all__ = [
    "DEFAULT_LEDGERS_ROOT",
    "DEFAULT_TIMEOUT",
    "MAX_CHILDREN",
    "MAX_TOTAL_BYTES",
    "MAX_ZNODE_BYTES",
    "CookieZnode",
    "ZkMetadata",
    "ZkSpec",
    "ZooKeeperError",
    "ledger_znode_path",
    "parse_zookeeper_spec",
    "read_zookeeper_metadata",
]

#: BookKeeper's default ledgers root (AbstractConfiguration.getZkLedgersRootPath,
#: BookKeeperConstants.DEFAULT_ZK_LEDGERS_ROOT_PATH)
DEFAULT_LEDGERS_ROOT = "/ledgers"
#: seconds: to connect, and for each request
DEFAULT_TIMEOUT = 10.0
#: ZooKeeper refuses a request larger than jute.maxbuffer, 1 MiB by default (0xfffff bytes of data)
MAX_ZNODE_BYTES = 1 << 20
#: a hierarchical level holds at most 10 000 names (4 digits); the root and `cookies` a few more
MAX_CHILDREN = 100_000
#: all ledger and cookie bytes kept together (a ledger's metadata is typically 100-300 bytes)
MAX_TOTAL_BYTES = 1 << 30
#: problem lines kept; beyond, one line says how many more there were
MAX_PROBLEMS = 1000
#: requests in flight at once while reading ledgers (round trips, not memory: each is bounded)
_WINDOW = 128

_INT_MAX = 2**31 - 1  # Integer.MAX_VALUE: below it the short 2-4-4 path, from it the long one
_LONG_MAX = 2**63 - 1
_HIERARCHICAL = {
    "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory",
    "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory",
    "org.apache.bookkeeper.meta.LegacyHierarchicalLedgerManagerFactory",
    "hierarchical",
    "longhierarchical",
    "legacyhierarchical",  # layout format version 1 names
}
# the `zk+<type>` of a metadata service URI (ZKMetadataDriverBase.resolveLedgerManagerFactory);
# "null" and no type mean "whatever LAYOUT says"
_URI_TYPES = {"", "null", "hierarchical", "longhierarchical", "legacyhierarchical"}
# names under the root that are not ledger parents (AbstractZkLedgerManager.isSpecialZnode,
# BookKeeperConstants, ZkLedgerIdGenerator.LEDGER_ID_GEN_PREFIX "ID-")
_SPECIAL = {
    "available",
    "cookies",
    "LAYOUT",
    "INSTANCEID",
    "underreplication",
    "idgen",
    "idgen-long",
    "disableHealthCheck",
}
_HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
_ROOT_PART = re.compile(r"[A-Za-z0-9._:@+-]{1,255}\Z")
_PORT = re.compile(r"[0-9]{1,5}\Z")
_URI = re.compile(r"zk(?:\+([a-z]*))?://([^/]*)(/.*)?\Z", re.IGNORECASE)
# one level's name pattern per depth: short (2-4-L4) and long (3-4-4-4-L4) forms
_SHORT = (re.compile(r"[0-9]{2}\Z"), re.compile(r"[0-9]{4}\Z"), re.compile(r"L[0-9]{4}\Z"))
_LONG = (
    re.compile(r"[0-9]{3}\Z"),
    re.compile(r"[0-9]{4}\Z"),
    re.compile(r"[0-9]{4}\Z"),
    re.compile(r"[0-9]{4}\Z"),
    re.compile(r"L[0-9]{4}\Z"),
)

_log = logging.getLogger(__name__ + ".kazoo")
_log.addHandler(logging.NullHandler())  # kazoo's reconnect chatter is not the CLI's output


class ZooKeeperError(ReplicaError):
    """The metadata could not be read at all: a bad spec, no server, no BookKeeper root, a
    ledger manager this reader does not understand, or more data than the bounds allow."""


@dataclass(frozen=True)
class ZkSpec:
    """A parsed `--zookeeper` value: servers and the ledgers root."""

    hosts: Tuple[Tuple[str, int], ...]
    root: str
    layout_type: str = ""  # the `zk+<type>` of a URI ("" when none)

    def connect_string(self) -> str:
        """kazoo's `hosts` (no chroot: every path read is absolute under `root`)."""
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts)

    def __str__(self) -> str:
        return self.connect_string() + self.root


@dataclass(frozen=True)
class CookieZnode:
    """`<root>/cookies/<bookieId>`: the cookie bytes and the stat that tells incarnations."""

    bookie_id: str
    data: bytes
    czxid: int
    ctime: int  # ms since the epoch, as ZooKeeper keeps it
    mzxid: int
    mtime: int
    version: int


@dataclass
class ZkMetadata:
    """What one ZooKeeper holds for one BookKeeper cluster."""

    instance_id: Optional[str]
    layout: str
    ledgers: Dict[int, bytes] = field(default_factory=dict)
    cookies: Dict[str, CookieZnode] = field(default_factory=dict)
    problems: List[str] = field(default_factory=list)
    #: ledgers listed but not read (too large, unreadable): their metadata exists, so their data
    #: on a bookie is NOT garbage
    unread: Dict[int, str] = field(default_factory=dict)
    #: False when a level could not be listed: a ledger missing here may still exist
    complete: bool = True
    spec: Optional[ZkSpec] = None
    _dropped: int = field(default=0, repr=False, compare=False)

    def problem(self, line: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(line)
        else:
            self._dropped += 1


# --- the spec ------------------------------------------------------------------------------------


def parse_zookeeper_spec(spec: str) -> ZkSpec:
    """`HOST:PORT[,HOST:PORT...][/root]` or `zk[+type]://HOST:PORT[;HOST:PORT...][/root]`;
    ZooKeeperError (one line) for anything else."""
    if not isinstance(spec, str) or not spec or len(spec) > 4096:
        raise ZooKeeperError(f"--zookeeper {spec!r}: expected HOST:PORT[/root]")
    layout_type = ""
    m = _URI.match(spec)
    if m:
        layout_type = (m.group(1) or "").lower()
        if layout_type not in _URI_TYPES:
            raise ZooKeeperError(
                f"--zookeeper {spec!r}: ledger manager {layout_type!r} is not "
                f"supported (only the hierarchical ones)"
            )
        servers, root = m.group(2).replace(";", ","), m.group(3)
    elif "://" in spec:
        raise ZooKeeperError(
            f"--zookeeper {spec!r}: only zk:// metadata service URIs are ZooKeeper"
        )
    else:
        slash = spec.find("/")
        servers, root = (spec, None) if slash < 0 else (spec[:slash], spec[slash:])
    hosts = tuple(_host_port(spec, part) for part in servers.split(","))
    if len(hosts) > 64:
        raise ZooKeeperError(f"--zookeeper {spec[:80]!r}...: more than 64 servers")
    return ZkSpec(hosts, _root(spec, root), layout_type)


def _host_port(spec: str, part: str) -> Tuple[str, int]:
    if part.startswith("["):  # an IPv6 literal: [addr]:port
        host, sep, port = part[1:].partition("]:")
        if not sep:
            raise ZooKeeperError(f"--zookeeper {spec!r}: expected [IPv6]:PORT, got {part!r}")
        try:
            host = str(ipaddress.IPv6Address(host))
        except ValueError:
            raise ZooKeeperError(f"--zookeeper {spec!r}: bad IPv6 address {host!r}") from None
    else:
        host, sep, port = part.rpartition(":")
        if not sep or not host:
            raise ZooKeeperError(f"--zookeeper {spec!r}: expected HOST:PORT, got {part!r}")
        if len(host) > 253 or not all(_HOST_LABEL.match(x) for x in host.split(".")):
            raise ZooKeeperError(
                f"--zookeeper {spec!r}: bad host name {host!r} "
                f"(letters, digits, '-' and '.', or [IPv6])"
            )
    if not _PORT.match(port) or not 1 <= int(port) <= 65535:
        raise ZooKeeperError(f"--zookeeper {spec!r}: bad port {port!r} (1..65535)")
    return host, int(port)


def _root(spec: str, root: Optional[str]) -> str:
    if root is None or root == "":
        return DEFAULT_LEDGERS_ROOT
    parts = root.split("/")[1:]
    if root == "/" or any(p in ("", ".", "..") or not _ROOT_PART.match(p) for p in parts):
        raise ZooKeeperError(
            f"--zookeeper {spec!r}: bad ledgers root {root!r} (an absolute "
            f"znode path such as /ledgers: no '.', '..', empty or trailing "
            f"parts)"
        )
    return root


def _show(text: str) -> str:
    """A line to print: names come from the server, and one holding a line break (ZooKeeper
    refuses control characters in names, not U+2028) must not become two lines."""
    return text if text.isprintable() else repr(text)


def ledger_znode_path(root: str, ledger_id: int) -> str:
    """Where BookKeeper's hierarchical ledger manager keeps ledger `ledger_id`
    (StringUtils.getHybridHierarchicalLedgerPath)."""
    if ledger_id < _INT_MAX:
        s = f"{ledger_id:010d}"
        return f"{root}/{s[0:2]}/{s[2:6]}/L{s[6:10]}"
    s = f"{ledger_id:019d}"
    return f"{root}/{s[0:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/L{s[15:19]}"


# --- reading -------------------------------------------------------------------------------------


class _Reader:
    """One read-only session; every request bounded in time, every reply in size."""

    def __init__(
        self,
        client: Any,
        timeout: float,
        max_znode_bytes: int,
        max_children: int,
        max_total_bytes: int,
        meta: ZkMetadata,
    ) -> None:
        from kazoo.exceptions import NoNodeError

        self.client, self.timeout, self.meta = client, timeout, meta
        self.max_bytes, self.max_children = max_znode_bytes, max_children
        self.budget = self.max_total = max_total_bytes
        self.NoNodeError = NoNodeError

    def _wait(self, result: Any, path: str) -> Any:
        try:
            return result.get(timeout=self.timeout)
        except self.NoNodeError:
            raise
        except Exception as exc:  # kazoo's timeouts, connection loss, auth: one line each
            raise ZooKeeperError(
                _show(f"{path}: {type(exc).__name__}: {exc}".rstrip(": ")), None
            ) from None

    def stat(self, path: str) -> Optional[Any]:
        return self._wait(self.client.exists_async(path), path)

    def children(self, path: str) -> Optional[List[str]]:
        """The names under `path`, or None (a problem line) when there are too many."""
        st = self.stat(path)
        if st is None:
            return None
        if st.numChildren > self.max_children:
            self.meta.problem(
                f"{path}: {st.numChildren} children, more than the "
                f"{self.max_children} read: not listed"
            )
            return None
        try:
            names = self._wait(self.client.get_children_async(path), path)
        except self.NoNodeError:
            return None
        if len(names) > self.max_children:  # it grew between the stat and the listing
            self.meta.problem(
                f"{path}: {len(names)} children, more than the {self.max_children} read: not listed"
            )
            return None
        return sorted(names)

    def _keep(self, path: str, data: bytes) -> None:
        self.budget -= len(data)
        if self.budget < 0:
            raise ZooKeeperError(
                f"{path}: the metadata is larger than the {self.max_total} bytes one read keeps"
            )

    def data(self, path: str) -> Tuple[Optional[bytes], Any, str]:
        """One znode: (bytes, stat, "") or (None, stat or None, why not)."""
        for _path, data, st, why in self.many([path]):
            return data, st, why
        return None, None, "no such znode"

    def many(self, paths: List[str]) -> Iterator[Tuple[str, Optional[bytes], Any, str]]:
        """Read znodes `_WINDOW` requests in flight: each one's stat first, its data only when
        the stat says it fits. A znode deleted meanwhile is left out (gone, as BookKeeper
        would see it)."""
        for start in range(0, len(paths), _WINDOW):
            pending = []
            for path, res in [
                (p, self.client.exists_async(p)) for p in paths[start : start + _WINDOW]
            ]:
                st = self._wait(res, path)
                if st is None:
                    continue
                if st.dataLength > self.max_bytes:
                    yield path, None, st, self._too_big(st.dataLength)
                else:
                    pending.append((path, self.client.get_async(path)))
            for path, res in pending:
                try:
                    data, st = self._wait(res, path)
                except self.NoNodeError:
                    continue
                data = data or b""
                if len(data) > self.max_bytes:  # rewritten larger since its stat
                    yield path, None, st, self._too_big(len(data))
                    continue
                self._keep(path, data)
                yield path, data, st, ""

    def _too_big(self, size: int) -> str:
        return f"{size} bytes, more than the {self.max_bytes} read: not read"


def _layout(reader: _Reader, spec: ZkSpec) -> str:
    """The LAYOUT znode's ledger manager factory, refused unless hierarchical
    (LedgerLayout.parseLayout: "<format version>\\n<factory class>:<manager version>")."""
    path = spec.root + "/LAYOUT"
    if reader.stat(spec.root) is None:
        raise ZooKeeperError(f"{spec}: no znode {spec.root}: not a BookKeeper ledgers root")
    data, _st, why = reader.data(path)
    if data is None:
        raise ZooKeeperError(f"{spec}: {path}: {why}: not a BookKeeper ledgers root")
    lines = data.decode("utf-8", "replace").split("\n")
    factory = lines[1].rpartition(":")[0] if len(lines) >= 2 else ""
    if not lines[0].strip().isdigit() or factory not in _HIERARCHICAL:
        shown = data[:200].decode("utf-8", "replace")
        raise ZooKeeperError(
            f"{spec}: {path} says {shown!r}: only BookKeeper's hierarchical "
            f"ledger managers are read"
        )
    return factory


def _instance_id(reader: _Reader, meta: ZkMetadata, root: str) -> Optional[str]:
    data, _st, why = reader.data(root + "/INSTANCEID")
    if data is None:
        meta.problem(f"{root}/INSTANCEID: {why}: the cluster's instanceId is unknown")
        return None
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        meta.problem(f"{root}/INSTANCEID: not ASCII text: the cluster's instanceId is unknown")
        return None


def _cookies(reader: _Reader, meta: ZkMetadata, root: str) -> None:
    base = root + "/cookies"
    names = reader.children(base)
    if names is None:  # none (a cluster never formatted), or too many: a problem line
        return
    by_path = {f"{base}/{n}": n for n in names}
    for path, data, st, why in reader.many(list(by_path)):
        bookie = by_path[path]
        if data is None:
            meta.problem(f"{base}/{bookie!r}: cookie of bookie {bookie!r}: {why}")
            continue
        meta.cookies[bookie] = CookieZnode(
            bookie, data, st.czxid, st.ctime, st.mzxid, st.mtime, st.version
        )


def _ledger_paths(reader: _Reader, meta: ZkMetadata, root: str) -> Dict[str, int]:
    """Every ledger znode under the root, by the strict hierarchical name rules: path -> ID."""
    found: Dict[str, int] = {}
    top = reader.children(root)
    if top is None:
        meta.complete = False
        return found
    for name in top:
        if name in _SPECIAL or name.startswith("ID-"):
            continue
        if _SHORT[0].match(name):
            _walk(reader, meta, root, [name], _SHORT, found)
        elif _LONG[0].match(name):
            _walk(reader, meta, root, [name], _LONG, found)
        else:
            meta.problem(f"{root}/{name!r}: not a BookKeeper znode name: ignored")
    return found


def _walk(
    reader: _Reader,
    meta: ZkMetadata,
    root: str,
    parts: List[str],
    levels: Tuple[Any, ...],
    found: Dict[str, int],
) -> None:
    path = "/".join([root] + parts)
    names = reader.children(path)
    if names is None:
        meta.complete = False  # too many children (a problem line), or deleted meanwhile
        return
    depth = len(parts)
    for name in names:
        child = f"{path}/{name}"
        if not levels[depth].match(name):
            meta.problem(f"{path}/{name!r}: not a ledger znode name: ignored")
        elif depth + 1 < len(levels):
            _walk(reader, meta, root, parts + [name], levels, found)
        else:
            _ledger(meta, root, child, parts + [name[1:]], found)


def _ledger(
    meta: ZkMetadata, root: str, path: str, digits: List[str], found: Dict[str, int]
) -> None:
    ledger_id = int("".join(digits))
    if ledger_id > _LONG_MAX:
        meta.problem(f"{path}: ledger ID {''.join(digits)} is beyond a 64-bit ledger ID: ignored")
    elif ledger_znode_path(root, ledger_id) != path:
        meta.problem(
            f"{path}: ledger {ledger_id} belongs at {ledger_znode_path(root, ledger_id)}"
            f" (BookKeeper never reads it here): ignored"
        )
    else:
        found[path] = ledger_id


def _guard_replies(client: Any, max_reply_bytes: int, refused: List[str]) -> None:
    """Refuse any reply longer than `max_reply_bytes` before it is read, as ZooKeeper's Java
    client does with jute.maxbuffer ("Packet len is out of range"): the stat checks above trust
    the server's own stat, and a server that lies in it would otherwise make kazoo collect
    whatever length its reply header claims. kazoo drops the connection; the request in flight
    ends with ConnectionLoss (one line). This wraps kazoo's private reader
    (ConnectionHandler._read, kazoo 2.x); the test of the bound fails if kazoo renames it."""
    from kazoo.exceptions import ConnectionDropped

    conn: Any = getattr(client, "_connection", None)
    read = getattr(conn, "_read", None)
    if read is None:
        return

    def bounded(length: int, timeout: float) -> Any:
        if length > max_reply_bytes:
            refused.append(f"a reply of {length} bytes, more than the {max_reply_bytes} read")
            raise ConnectionDropped(refused[-1])
        return read(length, timeout)

    conn._read = bounded


def read_zookeeper_metadata(
    spec: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    max_znode_bytes: int = MAX_ZNODE_BYTES,
    max_children: int = MAX_CHILDREN,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_reply_bytes: Optional[int] = None,
) -> ZkMetadata:
    """Read LAYOUT, INSTANCEID, the cookies and every ledger's metadata bytes from a live
    ZooKeeper, read-only. ZooKeeperError (one line) when the work cannot be done; what is odd
    but readable is a line in `problems`. `max_reply_bytes` bounds any one reply on the wire
    (default: a znode's bound, or a full listing's, plus room for the reply's header)."""
    parsed = parse_zookeeper_spec(spec)
    if not timeout > 0:
        raise ZooKeeperError(f"--zookeeper timeout must be positive, not {timeout!r}")
    try:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry
    except ImportError:
        raise ZooKeeperError(
            "--zookeeper needs kazoo: pip install 'crcmerkle[bookkeeper]'"
        ) from None
    client = KazooClient(
        hosts=parsed.connect_string(),
        timeout=timeout,
        read_only=True,
        connection_retry=KazooRetry(max_tries=2, delay=0.1, max_delay=1.0),
        command_retry=None,
        logger=_log,
    )
    if max_reply_bytes is None:  # a name is at most a few hundred bytes in practice
        max_reply_bytes = max(max_znode_bytes, 256 * max_children) + (64 << 10)
    refused: List[str] = []
    _guard_replies(client, max_reply_bytes, refused)
    try:
        client.start(timeout=timeout)
    except Exception as exc:
        raise ZooKeeperError(
            f"{parsed}: cannot connect within {timeout:g} s ({type(exc).__name__})"
        ) from None
    try:
        return _read(client, parsed, timeout, max_znode_bytes, max_children, max_total_bytes)
    except ZooKeeperError as exc:
        if refused:  # the connection was dropped on purpose: say why, not just "lost"
            raise ZooKeeperError(f"{exc}: {refused[0]}") from None
        raise
    finally:
        client.stop()
        client.close()


def _read(
    client: Any,
    spec: ZkSpec,
    timeout: float,
    max_znode_bytes: int,
    max_children: int,
    max_total_bytes: int,
) -> ZkMetadata:
    meta = ZkMetadata(instance_id=None, layout="", spec=spec)
    reader = _Reader(client, timeout, max_znode_bytes, max_children, max_total_bytes, meta)
    try:
        meta.layout = _layout(reader, spec)
        meta.instance_id = _instance_id(reader, meta, spec.root)
        _cookies(reader, meta, spec.root)
        paths = _ledger_paths(reader, meta, spec.root)
        for path, data, _st, why in reader.many(list(paths)):
            if data is None:
                meta.unread[paths[path]] = why
                meta.problem(f"{path}: ledger {paths[path]}: {why}")
            else:
                meta.ledgers[paths[path]] = data
    except reader.NoNodeError as exc:  # the root or a level vanished mid-read
        raise ZooKeeperError(f"{spec}: a znode vanished while being read ({exc})") from None
    if meta._dropped:
        meta.problems.append(f"... and {meta._dropped} more problems")
    return meta
