"""The inventory of datanode hosts a data-local scan runs on (`--datanodes FILE`).

Two formats, told apart by their keys:

* the exact output of `ozone admin datanode list --json` (a JSON array of Ozone's
  `BasicDatanodeInfo`: `id`, `hostName`, `ipAddress`, `opState`, `healthState`,
  `failedVolumes`, ...; other fields ignored). It names no volume directories: they come from
  `hdds.datanode.dir` in an `ozone-site.xml` (`--ozone-conf`), as on the datanodes themselves;
* a plain JSON list of hosts, `[{"host": "dn1.example", "uuid": "...", "volumes": [...]}]`,
  `uuid` and `address` optional, `volumes` optional when `--ozone-conf` gives them. For
  BookKeeper's bookies (a scan with ledger metadata) the same list names each bookie host's
  ledger directories as its `volumes` and, optionally, the bookie ID expected there
  (`"bookie": "bk1.example:3181"`, the cookie's bookieHost).

Everything read here is attacker-controlled (crcmerkle runs as root): both files are size-capped
before they are parsed, the XML parser never sees a DTD (a DOCTYPE is refused outright, so no
entity is ever declared, let alone expanded or fetched) and follows no XInclude, no host count
or volume count is trusted, host names and volume paths are checked before anything uses them
(a volume path is data to open later, never joined with anything here), and every message that
quotes the file escapes what it quotes, so an error stays one line.
"""

from __future__ import annotations

import ipaddress
import json
import posixpath
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from merkle.replica.errors import ReplicaError
from merkle.replica.safeopen import read_named

__all__ = [
    "DATANODE_LIST",
    "HOST_LIST",
    "Host",
    "Inventory",
    "InventoryError",
    "MAX_HOSTS",
    "MAX_INVENTORY_BYTES",
    "MAX_OZONE_SITE_BYTES",
    "MAX_VOLUMES_PER_HOST",
    "MAX_VOLUMES_TOTAL",
    "inventory_json",
    "load_inventory",
    "parse_inventory",
    "read_datanode_dirs",
]

#: Inventory.source of each format.
DATANODE_LIST = "ozone datanode list"
HOST_LIST = "host list"

#: Caps on what a file may make us hold. A datanode-list entry is ~1.3 KB of pretty JSON, so
#: 64 MiB is ~50,000 datanodes, far above the largest Ozone clusters.
MAX_INVENTORY_BYTES = 64 << 20
MAX_OZONE_SITE_BYTES = 4 << 20
MAX_HOSTS = 100_000
MAX_VOLUMES_PER_HOST = 4096
#: All volumes listed in one inventory file together (defaults from --ozone-conf are shared by
#: every host that takes them, so they count once).
MAX_VOLUMES_TOTAL = 1_000_000
#: Non-fatal problems kept (the rest are counted).
MAX_PROBLEMS = 1000
#: Longest volume path accepted (Linux PATH_MAX).
MAX_PATH_CHARS = 4096

HDDS_DATANODE_DIR = "hdds.datanode.dir"
#: Hadoop's deprecated name of hdds.datanode.dir (OzoneConfiguration's DeprecationDelta): read
#: into the same key, so whichever of the two comes last in the file wins, as in Hadoop.
DFS_DATANODE_DATA_DIR = "dfs.datanode.data.dir"

#: Hadoop's StorageType names, the only ones a `[TYPE]` prefix may carry (Ozone turns any
#: other into a failed volume; we refuse the file instead).
STORAGE_TYPES = frozenset({"RAM_DISK", "SSD", "DISK", "ARCHIVE", "PROVIDED", "NVDIMM"})

#: Ozone's NodeOperationalState and NodeState (hdds.proto). Another value is kept as given and
#: reported as a problem: a newer Ozone may add states.
OP_STATES = frozenset(
    {"IN_SERVICE", "ENTERING_MAINTENANCE", "IN_MAINTENANCE", "DECOMMISSIONING", "DECOMMISSIONED"}
)
HEALTH_STATES = frozenset({"HEALTHY", "STALE", "DEAD", "HEALTHY_READONLY"})

_XINCLUDE_NS = "{http://www.w3.org/2001/XInclude}"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: One label of a host name: ASCII letters, digits and '-' only (a host name is printed in
#: commands an operator pastes into a root shell), not starting with '-'.
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}", re.ASCII)
_STATE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
#: Hadoop's StorageLocation: `[TYPE]location` (Java's \w is ASCII).
_STORAGE_PREFIX = re.compile(r"\[(\w*)\](.+)", re.ASCII | re.DOTALL)
#: Hadoop's StringUtils.getTrimmedStrings separator.
_CONF_SPLIT = re.compile(r"\s*[,\n]\s*", re.ASCII)
#: Keys of the plain host list (inventory_json writes them all).
_HOST_KEYS = (
    "host",
    "address",
    "uuid",
    "bookie",
    "volumes",
    "op_state",
    "health",
    "failed_volumes",
)
#: A bookie ID (BookieId.validateBookieId: letters, digits, ':', '.', '_' and '-'; a cookie's
#: bookieHost is one), at most 255 characters: it is printed in commands an operator runs.
_BOOKIE_ID = re.compile(r"[A-Za-z0-9:._-]{1,255}", re.ASCII)


class InventoryError(ReplicaError):
    """The inventory or the ozone-site.xml cannot be used: one line, naming the file and entry."""


@dataclass(frozen=True)
class Host:
    """One datanode host as the inventory names it."""

    host: str
    address: Optional[str]
    uuid: Optional[str]
    volumes: Tuple[str, ...]
    op_state: Optional[str] = None
    health: Optional[str] = None
    #: Ozone's `failedVolumes` for this datanode (its HddsVolume dirs, `<volume>/hdds`), as given.
    failed_volumes: Tuple[str, ...] = ()
    #: the BookKeeper bookie ID expected on this host (the plain list's `bookie`), if given
    bookie: Optional[str] = None

    def names(self) -> Tuple[str, ...]:
        """The host name and the address: what an executor on this host may have registered as."""
        if self.address is None or _name_key(self.address) == _name_key(self.host):
            return (self.host,)
        return (self.host, self.address)

    def volume_failed(self, volume: str) -> bool:
        """Whether Ozone reported this volume directory (or its `hdds` dir) failed."""
        return (
            volume in self.failed_volumes or posixpath.join(volume, "hdds") in self.failed_volumes
        )


@dataclass(frozen=True)
class Inventory:
    """The hosts to scan, in the file's order, and what was wrong but not fatal."""

    hosts: Tuple[Host, ...]
    source: str
    problems: Tuple[str, ...] = ()
    _by_name: Dict[str, Host] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(self.hosts))
        object.__setattr__(self, "problems", tuple(self.problems))
        index: Dict[str, Host] = {}
        for h in self.hosts:
            for name in h.names():
                index.setdefault(_name_key(name), h)
        object.__setattr__(self, "_by_name", index)

    def by_uuid(self) -> Dict[str, Host]:
        """Hosts that carry a datanode UUID, by that UUID."""
        return {h.uuid: h for h in self.hosts if h.uuid is not None}

    def host_named(self, name: str) -> Optional[Host]:
        """The host known by this name or address (case-insensitive; any spelling of an IP
        address), None for a name the inventory does not know."""
        return self._by_name.get(_name_key(name))


# ---- helpers ------------------------------------------------------------------------------


def _show(value: Any, limit: int = 80) -> str:
    """A value read from a file, quoted and escaped for a one-line message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fail(where: str, message: str) -> InventoryError:
    return InventoryError(message, where or "inventory")


def _name_key(name: str) -> str:
    """The spelling two names are compared in: case-folded, no trailing root dot, an IP
    address in its canonical form."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name.lower().rstrip(".")


def _ip(value: str) -> Optional[str]:
    """The canonical form of a plain IP address literal, None if `value` is not one.

    Python's parser takes an IPv6 scope ID (`fe80::1%eth0`), whose text after '%' is
    anything at all: refused here, as no datanode is reached through a scope ID."""
    if "%" in value:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _check_host(value: Any) -> Optional[str]:
    """Why `value` is not a plausible host name or IP address, None if it is one.

    Stricter than "no '/', NUL or whitespace": ASCII letters, digits and '-' in dot-separated
    labels of 1-63 characters, no label starting with '-' (a host name ends up in command lines),
    at most 253 characters; or a plain IPv4/IPv6 address (no scope ID)."""
    if not isinstance(value, str):
        return f"host name {_show(value)} is not a string"
    if not value:
        return "empty host name"
    if len(value) > 253:
        return f"host name of {len(value)} characters (more than 253)"
    if _ip(value) is not None:
        return None
    labels = value[:-1].split(".") if value.endswith(".") else value.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        # an all-digit last label is a mistyped IP address (no top-level domain is numeric)
        return f"{_show(value)} is not a plausible host name or IP address"
    return None


def _check_uuid(value: Any) -> Optional[str]:
    if isinstance(value, str) and _UUID.fullmatch(value):
        return None
    return f"{_show(value)} is not a datanode UUID (8-4-4-4-12 hex digits)"


def _normal_volume(value: Any) -> str:
    """An absolute, normalised volume directory; ValueError saying why not."""
    if not isinstance(value, str):
        raise ValueError(f"volume {_show(value)} is not a string")
    if "\0" in value:
        raise ValueError(f"volume {_show(value)} contains NUL")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        # legal in a POSIX name, but never in a volume an operator configured; it would also
        # break the one-line reports that name the volume
        raise ValueError(f"volume {_show(value)} contains a control character")
    if not value.startswith("/"):
        raise ValueError(f"volume {_show(value)} is not an absolute path")
    if len(value) > MAX_PATH_CHARS:
        raise ValueError(f"volume path of {len(value)} characters (more than {MAX_PATH_CHARS})")
    if ".." in value.split("/"):
        raise ValueError(f"volume {_show(value)} has a '..' component")
    # normpath keeps a leading '//' (POSIX leaves its meaning open); Linux treats it as '/'
    return "/" + posixpath.normpath(value).lstrip("/")


def _volume_list(values: Iterable[Any], what: str) -> Tuple[str, ...]:
    """Validated volumes of one host, in order; ValueError on the first bad or repeated one."""
    out: List[str] = []
    seen: Dict[str, Any] = {}
    for raw in values:
        if len(out) >= MAX_VOLUMES_PER_HOST:
            raise ValueError(f"more than {MAX_VOLUMES_PER_HOST} volumes in {what}")
        path = _normal_volume(raw)
        if path in seen:
            raise ValueError(
                f"volume {path} listed twice in {what}"
                + ("" if seen[path] == raw else f" ({_show(seen[path])} and {_show(raw)})")
            )
        seen[path] = raw
        out.append(path)
    return tuple(out)


def _state(
    value: Any, known: frozenset, key: str, entry: str, problems: List[str]
) -> Optional[str]:
    """An Ozone state name: None when absent; an unknown name kept, and reported."""
    if value is None:
        return None
    if not isinstance(value, str) or not _STATE.fullmatch(value):
        raise ValueError(f"{key} {_show(value)} is not a state name")
    if value not in known:
        problems.append(f"{entry}: unknown {key} {value} (kept as given)")
    return value


def _failed_volumes(value: Any, entry: str, problems: List[str]) -> Tuple[str, ...]:
    """Ozone's failedVolumes: informative only, so a bad one is reported and dropped."""
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{entry}: failed volumes {_show(value)} is not a list (ignored)")
        return ()
    out: Dict[str, None] = {}
    for raw in value[:MAX_VOLUMES_PER_HOST]:
        try:
            out.setdefault(_normal_volume(raw))
        except ValueError as exc:
            problems.append(f"{entry}: failed {exc} (ignored)")
    return tuple(out)


class _Problems(List[str]):
    """The non-fatal findings, the first MAX_PROBLEMS of them kept: a hostile file must not
    make us hold millions of messages."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def append(self, message: str) -> None:
        if len(self) < MAX_PROBLEMS:
            super().append(message)
        else:
            self.dropped += 1

    def listed(self) -> Tuple[str, ...]:
        tail = [f"{self.dropped} more problems not listed"] if self.dropped else []
        return tuple(self) + tuple(tail)


def _no_duplicate_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """json object hook: a key given twice is refused (which of them counts is ambiguous)."""
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {_show(key)} given twice in one object")
        out[key] = value
    return out


# ---- the two formats ----------------------------------------------------------------------


def _kind(entry: Dict[str, Any]) -> Optional[str]:
    if "host" in entry and "hostName" not in entry:
        return HOST_LIST
    if "hostName" in entry and "host" not in entry:
        return DATANODE_LIST
    return None


def _datanode_entry(
    e: Dict[str, Any], entry: str, default_volumes: Tuple[str, ...], problems: List[str]
) -> Host:
    why = _check_host(e.get("hostName"))
    if why:
        raise ValueError(f"hostName: {why}")
    why = _check_uuid(e.get("id"))
    if why:
        raise ValueError(f"id: {why}")
    address = e.get("ipAddress")
    if address in (None, ""):
        address = None
    else:
        if not isinstance(address, str) or _ip(address) is None:
            raise ValueError(f"ipAddress {_show(address)} is not an IP address")
        address = _ip(address)
    return Host(
        host=e["hostName"],
        address=address,
        uuid=e["id"].lower(),
        volumes=default_volumes,
        op_state=_state(e.get("opState"), OP_STATES, "opState", entry, problems),
        health=_state(e.get("healthState"), HEALTH_STATES, "healthState", entry, problems),
        failed_volumes=_failed_volumes(e.get("failedVolumes"), entry, problems),
    )


def _near(key: str) -> Optional[str]:
    """The known host-list key that `key` may misspell ('volumse': 'volumes'), or None."""
    import difflib

    near = difflib.get_close_matches(key, _HOST_KEYS, n=1, cutoff=0.75)
    return near[0] if near else None


def _unknown_keys(keys: Sequence[str]) -> str:
    """The unknown keys of a host entry as messages name them: 'volumse' (volumes?)."""
    return ", ".join(_show(k) + (f" ({_near(k)}?)" if _near(k) else "") for k in keys[:5])


def _host_entry(
    e: Dict[str, Any], entry: str, default_volumes: Tuple[str, ...], problems: List[str]
) -> Host:
    why = _check_host(e.get("host"))
    if why:
        raise ValueError(why)
    unknown = sorted(k for k in e if k not in _HOST_KEYS)
    if "volumes" not in e and any(_near(k) == "volumes" for k in unknown):
        # a misspelt "volumes" would silently give the host --ozone-conf's volumes (or none):
        # the wrong disks scanned, so it is refused, named
        raise ValueError(f"unknown key(s) {_unknown_keys(unknown)} and no 'volumes'")
    try:
        return _host_fields(e, entry, default_volumes, problems, unknown)
    except ValueError as exc:
        if unknown:  # the typo is most likely why the entry is unusable: name it
            raise ValueError(f"{exc} (unknown key(s) {_unknown_keys(unknown)} ignored)") from None
        raise


def _host_fields(
    e: Dict[str, Any],
    entry: str,
    default_volumes: Tuple[str, ...],
    problems: List[str],
    unknown: List[str],
) -> Host:
    """_host_entry's Host once the name and the keys are checked."""
    if unknown:
        problems.append(
            f"{entry}: unknown key(s) {', '.join(_show(k) for k in unknown[:5])} ignored"
        )
    address = e.get("address")
    if address is not None:
        if not isinstance(address, str) or _ip(address) is None:
            raise ValueError(f"address {_show(address)} is not an IP address")
        address = _ip(address)
    uuid = e.get("uuid")
    if uuid is not None:
        why = _check_uuid(uuid)
        if why:
            raise ValueError(f"uuid: {why}")
        uuid = uuid.lower()
    bookie = e.get("bookie")
    if bookie is not None and (
        not isinstance(bookie, str) or not _BOOKIE_ID.fullmatch(bookie) or bookie == "readonly"
    ):
        raise ValueError(f"bookie {_show(bookie)} is not a bookie ID (such as bk1.example:3181)")
    if "volumes" in e:
        raw = e["volumes"]
        if not isinstance(raw, list):
            raise ValueError(f"volumes {_show(raw)} is not a list of directories")
        if not raw:
            raise ValueError("empty volumes list")
        volumes = _volume_list(raw, "this host")
    elif default_volumes:
        volumes = default_volumes
    else:
        raise ValueError(f"no volumes, and no --ozone-conf gave {HDDS_DATANODE_DIR}")
    return Host(
        host=e["host"],
        address=address,
        uuid=uuid,
        volumes=volumes,
        op_state=_state(e.get("op_state"), OP_STATES, "op_state", entry, problems),
        health=_state(e.get("health"), HEALTH_STATES, "health", entry, problems),
        failed_volumes=_failed_volumes(e.get("failed_volumes"), entry, problems),
        bookie=bookie,
    )


def parse_inventory(text: str, default_volumes: Sequence[str] = (), where: str = "") -> Inventory:
    """The hosts of an inventory's JSON text (either format; see the module's docstring).

    `default_volumes` (hdds.datanode.dir) are every datanode-list host's volumes, and a plain
    list's hosts' when they give none. `where` names the file in messages. InventoryError on
    anything that makes the inventory unusable or ambiguous; what is only odd is in
    `Inventory.problems`."""
    if len(text) > MAX_INVENTORY_BYTES:
        raise _fail(where, f"larger than {MAX_INVENTORY_BYTES} bytes (not read)")
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise _fail(where, "not JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, a repeated key, an integer too long
        raise _fail(where, f"not JSON: {' '.join(str(exc).split())}") from None
    if not isinstance(data, list):
        raise _fail(
            where,
            "not a JSON array of hosts (the output of `ozone admin datanode "
            'list --json`, or [{"host": ..., "volumes": [...]}, ...])',
        )
    if not data:
        raise _fail(where, "lists no hosts")
    if len(data) > MAX_HOSTS:
        raise _fail(where, f"lists {len(data)} hosts, more than {MAX_HOSTS}")
    try:
        defaults = _volume_list(default_volumes, HDDS_DATANODE_DIR)
    except ValueError as exc:
        raise _fail(where, str(exc)) from None

    source: Optional[str] = None
    problems = _Problems()
    hosts: List[Host] = []
    listed = 0
    for i, e in enumerate(data, 1):
        entry = f"entry {i}"
        if not isinstance(e, dict):
            raise _fail(where, f"{entry} is not an object but {type(e).__name__}")
        kind = _kind(e)
        if kind is None:
            raise _fail(
                where,
                f"{entry} has "
                + (
                    "both 'host' and 'hostName'"
                    if "host" in e
                    else "no host: neither 'host' (a host list) nor 'hostName' "
                    "(`ozone admin datanode list --json`)"
                ),
            )
        if source is None:
            source = kind
            if kind == DATANODE_LIST and not defaults:
                raise _fail(
                    where,
                    "`ozone admin datanode list` output names no volumes: "
                    f"give --ozone-conf (an ozone-site.xml with "
                    f"{HDDS_DATANODE_DIR})",
                )
        elif kind != source:
            raise _fail(where, f"{entry} is a {kind} entry, but entry 1 is a {source} entry")
        for key in ("volumes", "failed_volumes", "failedVolumes"):
            if isinstance(e.get(key), list):
                listed += len(e[key])
        if listed > MAX_VOLUMES_TOTAL:
            raise _fail(where, f"{entry}: more than {MAX_VOLUMES_TOTAL} volumes in the inventory")
        name = e.get("host" if kind == HOST_LIST else "hostName")
        if isinstance(name, str) and _check_host(name) is None:
            entry = f"{entry} ({name})"
        try:
            parse = _host_entry if kind == HOST_LIST else _datanode_entry
            hosts.append(parse(e, entry, defaults, problems))
        except ValueError as exc:
            raise _fail(where, f"{entry}: {exc}") from None
    assert source is not None
    _check_unique(hosts, where)
    return Inventory(hosts=tuple(hosts), source=source, problems=problems.listed())


def _check_unique(hosts: Sequence[Host], where: str) -> None:
    """Each host, name, address and UUID at most once: an executor's host, or a volume's
    datanode UUID, must lead to exactly one entry."""
    by_host: Dict[str, int] = {}
    by_name: Dict[str, Host] = {}
    by_uuid: Dict[str, Host] = {}
    by_bookie: Dict[str, Host] = {}
    for i, h in enumerate(hosts, 1):
        key = _name_key(h.host)
        if key in by_host:
            raise _fail(where, f"two entries for host {h.host}: entries {by_host[key]} and {i}")
        by_host[key] = i
    for h in hosts:
        for name in h.names():
            other = by_name.setdefault(_name_key(name), h)
            if other is not h:
                raise _fail(where, f"two hosts answer to {name}: {other.host} and {h.host}")
        if h.uuid is not None:
            other = by_uuid.setdefault(h.uuid, h)
            if other is not h:
                raise _fail(
                    where, f"two hosts claim datanode UUID {h.uuid}: {other.host} and {h.host}"
                )
        if h.bookie is not None:
            other = by_bookie.setdefault(h.bookie, h)
            if other is not h:
                raise _fail(where, f"two hosts claim bookie {h.bookie}: {other.host} and {h.host}")


def inventory_json(inv: Inventory) -> str:
    """The plain host-list form of an inventory (every host with its volumes written out), which
    parse_inventory reads back to the same hosts."""
    rows = []
    for h in inv.hosts:
        row: Dict[str, Any] = {"host": h.host}
        if h.address is not None:
            row["address"] = h.address
        if h.uuid is not None:
            row["uuid"] = h.uuid
        if h.bookie is not None:
            row["bookie"] = h.bookie
        row["volumes"] = list(h.volumes)
        if h.op_state is not None:
            row["op_state"] = h.op_state
        if h.health is not None:
            row["health"] = h.health
        if h.failed_volumes:
            row["failed_volumes"] = list(h.failed_volumes)
        rows.append(row)
    return json.dumps(rows, indent=2) + "\n"


def _read_text(path: str, limit: int, what: str) -> str:
    try:
        data = read_named(path, limit)
    except OSError as exc:
        raise InventoryError(f"cannot read the {what}: {exc.strerror or exc}", path) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InventoryError(f"the {what} is not UTF-8 (byte {exc.start})", path) from None


def load_inventory(path: str, ozone_conf: Optional[str] = None) -> Inventory:
    """The inventory in file `path` (`--datanodes`), volumes defaulting to hdds.datanode.dir of
    `ozone_conf` (`--ozone-conf`): required for `ozone admin datanode list` output."""
    text = _read_text(path, MAX_INVENTORY_BYTES, "inventory")
    defaults = read_datanode_dirs(ozone_conf) if ozone_conf is not None else []
    return parse_inventory(text, defaults, where=path)


# ---- ozone-site.xml -----------------------------------------------------------------------


class _NoDoctype(ET.TreeBuilder):
    """Refuses a DOCTYPE as the parser meets it: the second guard behind the text check."""

    def doctype(self, name: str, pubid: Optional[str], system: Optional[str]) -> None:
        raise ValueError("has a DOCTYPE")


def _java_trim(s: str) -> str:
    """Java's String.trim: strips characters up to U+0020, nothing else."""
    lo, hi = 0, len(s)
    while lo < hi and s[lo] <= " ":
        lo += 1
    while hi > lo and s[hi - 1] <= " ":
        hi -= 1
    return s[lo:hi]


def _conf_properties(text: str, where: str) -> Dict[str, str]:
    """The hdds.datanode.dir value of a Hadoop configuration file, read the way Hadoop's
    Configuration does: `<property>` with `<name>`/`<value>`/`<final>` children or the
    same as attributes; a property without a value sets nothing; a later property overrides an
    earlier one unless that one was final; dfs.datanode.data.dir is read into hdds.datanode.dir."""
    # The cheap guard first: in UTF-8 text no DTD can hide from this search, and with no DTD
    # there is no entity to expand or fetch. (A "<!DOCTYPE" inside a comment is refused too.)
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise InventoryError(
            "has a DOCTYPE or entity declaration (refused: an ozone-site.xml needs none)", where
        )
    parser = ET.XMLParser(target=_NoDoctype())
    try:
        parser.feed(text)
        root = parser.close()
    except ValueError as exc:  # ET.ParseError is a SyntaxError, caught below
        raise InventoryError(f"refused: {exc}", where) from None
    except ET.ParseError as exc:
        raise InventoryError(f"not XML: {exc}", where) from None
    if root.tag != "configuration":
        raise InventoryError(
            f"not a Hadoop configuration file (root element {_show(root.tag)})", where
        )
    values: Dict[str, str] = {}
    final: set = set()
    for elem in root.iter():
        if isinstance(elem.tag, str) and elem.tag.startswith(_XINCLUDE_NS):
            raise InventoryError(
                "uses XInclude, which crcmerkle does not follow: give "
                f"a file that sets {HDDS_DATANODE_DIR} itself",
                where,
            )
        if elem.tag != "property":
            continue
        name = elem.get("name")
        value = elem.get("value")
        is_final = elem.get("final") == "true"
        for child in elem:
            text_of = "".join(child.itertext())
            if child.tag == "name" and text_of:
                name = text_of.strip()
            elif child.tag == "value" and text_of:
                value = text_of
            elif child.tag == "final":
                is_final = text_of == "true"
        if name == DFS_DATANODE_DATA_DIR:
            name = HDDS_DATANODE_DIR
        if name != HDDS_DATANODE_DIR:
            continue
        if value is not None and name not in final:
            values[name] = value
        if is_final:
            final.add(name)
    return values


def _storage_dir(raw: str, where: str) -> str:
    """One hdds.datanode.dir entry as a volume directory, the way Hadoop's
    StorageLocation.parse and Path read it: `[TYPE]` prefix dropped, a `file:` URI to its path
    (Path takes the text literally: no %-decoding), '.' and repeated '/' normalised."""
    location = raw
    m = _STORAGE_PREFIX.fullmatch(raw)
    if m:
        if m.group(1) and m.group(1).upper() not in STORAGE_TYPES:
            raise InventoryError(
                f"{HDDS_DATANODE_DIR} entry {_show(raw)}: unknown storage type {m.group(1)}", where
            )
        location = _java_trim(m.group(2))
    colon, slash = location.find(":"), location.find("/")
    if colon != -1 and (slash == -1 or colon < slash):
        scheme, rest = location[:colon], location[colon + 1 :]
        if scheme.lower() != "file":
            raise InventoryError(
                f"{HDDS_DATANODE_DIR} entry {_show(raw)} is not a local "
                f"directory (scheme {_show(scheme)})",
                where,
            )
        if rest.startswith("//") and len(rest) > 2:
            end = rest.find("/", 2)
            authority, rest = (rest[2:], "") if end < 0 else (rest[2:end], rest[end:])
            if authority not in ("", "localhost"):
                raise InventoryError(
                    f"{HDDS_DATANODE_DIR} entry {_show(raw)} names "
                    f"another host ({_show(authority)})",
                    where,
                )
        location = rest
    try:
        return _normal_volume(location)
    except ValueError as exc:
        raise InventoryError(f"{HDDS_DATANODE_DIR} entry {_show(raw)}: {exc}", where) from None


def read_datanode_dirs(ozone_site: str) -> List[str]:
    """The volume directories of `hdds.datanode.dir` (or its old name dfs.datanode.data.dir)
    in an ozone-site.xml, in order, each once, as absolute normalised paths.

    Split and trimmed as Ozone's getTrimmedStringCollection does (on ',' and newlines, empty
    entries dropped, repeats merged), each entry read as Hadoop's StorageLocation reads it.
    Refused (InventoryError): a file over MAX_OZONE_SITE_BYTES, a DOCTYPE or entity, XInclude,
    a missing or empty key, a `${...}` substitution (crcmerkle does not expand them), an entry
    that is not a local absolute path without '..'."""
    text = _read_text(ozone_site, MAX_OZONE_SITE_BYTES, "ozone-site.xml")
    value = _conf_properties(text, ozone_site).get(HDDS_DATANODE_DIR)
    if value is None:
        raise InventoryError(
            f"sets no {HDDS_DATANODE_DIR} (nor {DFS_DATANODE_DATA_DIR})", ozone_site
        )
    if "${" in value:
        raise InventoryError(
            f"{HDDS_DATANODE_DIR} uses ${{...}} substitution, which "
            "crcmerkle does not expand: write the directories out",
            ozone_site,
        )
    entries = [e for e in _CONF_SPLIT.split(_java_trim(value)) if e]
    if not entries:
        raise InventoryError(f"{HDDS_DATANODE_DIR} is empty", ozone_site)
    out: Dict[str, None] = {}  # an ordered set: a list's `in` would be quadratic
    for raw in dict.fromkeys(entries):  # repeats merged, first place kept (LinkedHashSet)
        out.setdefault(_storage_dir(raw, ozone_site))
        if len(out) > MAX_VOLUMES_PER_HOST:
            raise InventoryError(
                f"{HDDS_DATANODE_DIR} lists more than {MAX_VOLUMES_PER_HOST} directories",
                ozone_site,
            )
    return list(out)
