"""A real ZooKeeper on 127.0.0.1 for the tests: Debian's `zookeeper` package (its jars under
/usr/share/java), started standalone from a generated zoo.cfg in a private temporary directory.

    with ZooKeeperServer() as zk:               # skips (or, under CI=true, fails) when absent
        load_znode_tree(zk.client(), GOLDEN_ZK)   # every `<path>/_data` file -> znode `/<path>`
        zk.hosts                                   # "127.0.0.1:PORT"

Nothing of the machine's ZooKeeper configuration is used (/etc/zookeeper is not read): the data
directory, the log and zoo.cfg live in the temporary directory, removed by stop(). The admin
server is off; of the four-letter words only `conf` is on (the readiness probe: it names the
data directory, so the server answering is this one).
`jute_maxbuffer` raises the server's request limit so a test can plant a znode larger than a
client's own bound (ZooKeeper's default, 1 MiB, would refuse it before any reader saw it).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

__all__ = [
    "GOLDEN_ZK",
    "ZOOKEEPER_JAR",
    "ZooKeeperServer",
    "load_znode_tree",
    "require_zookeeper",
    "znode_snapshot",
]

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"  # its manifest's Class-Path names its deps
# the znodes of the golden BookKeeper cluster (../shared/bookkeeper-golden/zookeeper, copied with
# their lines in tests/data/bookkeeper-golden/MANIFEST.sha256)
GOLDEN_ZK = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "bookkeeper-golden", "zookeeper"
)
_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
_QUIET = logging.getLogger("tests.zookeeper_server.kazoo")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
_START_TIMEOUT = 60.0  # a JVM on a loaded 2-core machine; the probe returns as soon as it is up


def require_zookeeper() -> str:
    """The java binary to run ZooKeeper with; a skip with the reason when the package or Java
    is missing, a failure under CI (which installs both: a skip there would hide the tests)."""
    java = shutil.which("java")
    missing = [
        what
        for what, ok in (
            ("Debian package zookeeper (" + ZOOKEEPER_JAR + ")", os.path.isfile(ZOOKEEPER_JAR)),
            ("java on PATH", java is not None),
        )
        if not ok
    ]
    try:
        import kazoo  # noqa: F401
    except ImportError:
        missing.append("kazoo (pip install kazoo)")
    if missing:
        reason = "a real ZooKeeper needs " + ", ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(
                reason + " -- CI installs them (apt-get install zookeeper), so this "
                "must not be skipped",
                pytrace=False,
            )
        pytest.skip(reason)
    assert java is not None
    return java


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serves(port: int, data_dir: str) -> bool:
    """Whether the ZooKeeper on `port` is up and is ours: `conf` names its dataDir (another
    process that took the port between our probe and the JVM's bind is not mistaken for it)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"conf")
            reply = b""
            while len(reply) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return False
    return f"dataDir={data_dir}".encode() in reply


class ZooKeeperServer:
    """One standalone ZooKeeper; stop() (or the with) kills it and removes its directory."""

    def __init__(self, jute_maxbuffer: Optional[int] = None) -> None:
        self.java = require_zookeeper()
        self.jute_maxbuffer = jute_maxbuffer
        self.dir = tempfile.mkdtemp(prefix="crcmerkle-zk-")
        self._proc: Optional[subprocess.Popen[bytes]] = None
        self._clients: List[Any] = []
        try:
            for _attempt in range(3):  # another process may take the free port first
                self.port = _free_port()
                if self._start():
                    break
            else:
                raise RuntimeError("ZooKeeper did not start: " + self.log_tail())
        except BaseException:
            self.stop()
            raise
        self.hosts = f"127.0.0.1:{self.port}"

    def _start(self) -> bool:
        data = os.path.join(self.dir, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(
                f"tickTime=2000\ndataDir={data}\nclientPort={self.port}\n"
                f"clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                f"4lw.commands.whitelist=conf\nmaxClientCnxns=0\n"
                f"autopurge.purgeInterval=0\n"
            )
        props = [
            "-Dzookeeper.admin.enableServer=false",
            "-Xmx256m",
            f"-Dzookeeper.log.dir={self.dir}",
            "-Dzookeeper.root.logger=WARN,CONSOLE",
        ]
        if self.jute_maxbuffer:
            props.append(f"-Djute.maxbuffer={self.jute_maxbuffer}")
        with open(os.path.join(self.dir, "server.log"), "ab") as log:
            self._proc = subprocess.Popen(
                [self.java, *props, "-cp", ZOOKEEPER_JAR, _MAIN, cfg],
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False  # it exited: most likely the port was taken
            if _serves(self.port, data):
                return True
            time.sleep(0.1)
        self._kill()
        raise RuntimeError(f"ZooKeeper not ready in {_START_TIMEOUT:g} s: " + self.log_tail())

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                text = f.read()[-8192:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        return " | ".join(text.strip().splitlines()[-lines:])

    def client(self, **kwargs: Any) -> Any:
        """A started kazoo client of this server, stopped by stop()."""
        from kazoo.client import KazooClient

        kwargs.setdefault("logger", _QUIET)  # kazoo's "connection dropped" at stop()
        c = KazooClient(hosts=self.hosts, timeout=30.0, **kwargs)
        c.start(timeout=30.0)
        self._clients.append(c)
        return c

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=15)
        self._proc = None

    def stop(self) -> None:
        for c in self._clients:
            try:
                c.stop()
                c.close()
            except Exception:
                pass
        self._clients = []
        self._kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        return self

    def __exit__(self, *exc: Optional[BaseException]) -> None:
        self.stop()


def load_znode_tree(client: Any, top: str = GOLDEN_ZK, under: str = "") -> List[str]:
    """Create a znode for every `<dir>/_data` file below `top`, at `under + "/" + <dir>` with
    exactly the file's bytes (parents without a `_data` file are created empty); returns the
    znode paths written, parents first."""
    written: List[str] = []
    found: List[Tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        if "_data" in filenames:
            rel = os.path.relpath(dirpath, top).replace(os.sep, "/")
            found.append((under + "/" + rel, os.path.join(dirpath, "_data")))
    for path, file in sorted(found, key=lambda pf: (pf[0].count("/"), pf[0])):
        with open(file, "rb") as f:
            data = f.read()
        if client.exists(path):
            client.set(path, data)
        else:
            client.create(path, data, makepath=True)
        written.append(path)
    return written


def walk_znodes(client: Any, path: str = "/") -> Iterator[str]:
    """Every znode path at and below `path`, ZooKeeper's own `/zookeeper` subtree excluded."""
    yield path
    for name in sorted(client.get_children(path)):
        child = path.rstrip("/") + "/" + name
        if child != "/zookeeper":
            yield from walk_znodes(client, child)


def znode_snapshot(client: Any) -> Dict[str, Tuple[bytes, Tuple[int, ...]]]:
    """Every znode's bytes and stat (czxid, mzxid, pzxid, version, cversion, aversion, the
    ephemeral owner, children): equal before and after a reader iff it changed nothing."""
    snap: Dict[str, Tuple[bytes, Tuple[int, ...]]] = {}
    for path in walk_znodes(client):
        data, st = client.get(path)
        snap[path] = (
            data,
            (
                st.czxid,
                st.mzxid,
                st.pzxid,
                st.version,
                st.cversion,
                st.aversion,
                st.ephemeralOwner,
                st.numChildren,
            ),
        )
    return snap
