"""Who each datanode is, where it runs, and which of its volumes were not verified.

A datanode is its identity (Ozone: the datanodeUuid of its volumes' VERSION; the crcmerkle
layout: its directory name), never a path; an operator knows it by its host name. The names
come from the scan tables' `host` column (where the datanode was scanned) and, for datanodes
whose tables name no host (a scan of one directory tree), from an inventory (`--datanodes
FILE`, merkle.replica.inventory). The volumes table says what became of each volume; every
host or UUID of the inventory with no row there at all is added as NOT_SCANNED
(`unscanned_hosts`). Everything collected here is small: one row per (datanode, host), the
first `first` unverified volumes, one count per status.

A host name read from a table is data: it is shown escaped (one line), and it names a host
in a command (`ozone admin datanode decommission HOST`) only when it is a plausible host
name or address (merkle.replica.inventory's rule: no label starts with '-').
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from merkle.replica.inventory import Inventory, _check_host, _name_key
from merkle.replica.layout import UNKNOWN_DATANODE, datanode_identity
from spark_udfs.cluster.errors import TableError
from spark_udfs.cluster.vouch import NOT_IN_INVENTORY, same_volume

__all__ = ["HostIndex", "command_host", "host_index", "unscanned_hosts"]

#: the volumes table's statuses (spark_udfs.jobs.scan.VOLUME_STATUSES; repeated here so that this
#: module does not import the scan job)
SCANNED = "SCANNED"
NOT_SCANNED = "NOT_SCANNED"
#: the statuses of a datanode's own volumes that were not read (its others may have been);
#: the rest (WRONG_DATANODE, DUPLICATE_DATANODE, NOT_IN_INVENTORY) are volumes that are not
#: the datanode's to serve
UNREAD_STATUSES = ("VOLUME_FAILED", NOT_SCANNED, "WRONG_HOST", "NO_EXECUTOR")


def command_host(host: Optional[str]) -> Optional[str]:
    """`host` when it may name a host in a command line, else None."""
    return host if isinstance(host, str) and _check_host(host) is None else None


#: the volumes table is collected to the driver once per command (one row per volume); a table
#: with more rows than this is no scan's volumes table (10,000 hosts of 60 disks are 600,000)
MAX_VOLUME_ROWS = 1_000_000
#: the volumes table's columns the driver reads (VOLUME_SCHEMA's others are counts and times)
_VOLUME_KEYS = ("datanode", "host", "volume", "status", "detail", "ran_on")


def _volume_rows(volumes: Any) -> List[Dict[str, Any]]:
    """The volumes table's rows as dicts of the _VOLUME_KEYS it has (a key the table lacks is
    absent): a Spark DataFrame (collected in one job, at most MAX_VOLUME_ROWS rows, else
    TableError), a pyarrow Table, or rows (dicts or Row objects)."""
    if hasattr(volumes, "select") and hasattr(volumes, "collect"):  # a Spark DataFrame
        cols = [k for k in _VOLUME_KEYS if k in volumes.columns]
        volumes = volumes.select(*cols).limit(MAX_VOLUME_ROWS + 1).collect()
        if len(volumes) > MAX_VOLUME_ROWS:
            raise TableError(
                f"the volumes table has more than {MAX_VOLUME_ROWS:,} rows: not the volumes "
                "table of a scan (one row per volume)"
            )
    elif hasattr(volumes, "to_pylist"):  # a pyarrow Table
        volumes = volumes.to_pylist()
    out = []
    for r in volumes:
        d = r if isinstance(r, Mapping) else r.asDict()
        out.append({k: d[k] for k in _VOLUME_KEYS if k in d})
    return out


def unscanned_hosts(volumes: Any, inventory: Optional[Inventory]) -> List[Tuple]:
    """VOLUME_SCHEMA rows (status NOT_SCANNED) for every inventory host of which `volumes`
    (the volumes table: a DataFrame, an Arrow table or rows) holds no row at all: matched by
    its datanode UUID, else by its host name or address (in `host` or `ran_on`). One row per
    volume the inventory gives it (one with no volume when it gives none). And for a host
    that has rows naming it (`host`), one row per volume of it that no row names: a volume
    nobody emitted is reported by name, never silently absent."""
    if inventory is None:
        return []
    datanodes: Set[str] = set()
    hosts: Set[int] = set()
    #: id(host) -> the volumes its rows name (rows naming the host in `host`)
    seen: Dict[int, Set[str]] = {}
    for r in _volume_rows(volumes):
        if r.get("datanode"):
            datanodes.add(datanode_identity(r["datanode"]))
        for name in (r.get("host"), r.get("ran_on")):
            h = inventory.host_named(name) if name else None
            if h is not None:
                hosts.add(id(h))
        h = inventory.host_named(r["host"]) if r.get("host") else None
        if h is not None and r.get("volume"):
            seen.setdefault(id(h), set()).add(same_volume(r["volume"]))
    out: List[Tuple] = []
    for h in inventory.hosts:
        uuid = datanode_identity(h.uuid) if h.uuid else None
        if id(h) in seen:
            for vol in h.volumes:
                if same_volume(vol) not in seen[id(h)]:
                    out.append(
                        (
                            uuid or UNKNOWN_DATANODE,
                            h.host,
                            vol,
                            None,
                            NOT_SCANNED,
                            f"volume {vol} of {h.host} is in the inventory, but the scan "
                            f"tables hold no row of it: nothing of it was scanned or "
                            f"emitted (its replicas are UNVERIFIED)",
                            None,
                            None,
                            None,
                            None,
                        )
                    )
            continue
        if (uuid is not None and uuid in datanodes) or id(h) in hosts:
            continue
        detail = (
            f"in the inventory, but the scan tables hold no volume of datanode "
            f"{uuid or '(no UUID)'} or host {h.host}: nothing was scanned or emitted there"
        )
        for named in h.volumes or (None,):
            out.append(
                (
                    uuid or UNKNOWN_DATANODE,
                    h.host,
                    named,
                    None,
                    NOT_SCANNED,
                    detail,
                    None,
                    None,
                    None,
                    None,
                )
            )
    return out


@dataclass
class HostIndex:
    """The host of each datanode, and the volumes that were not verified (see the module
    docstring). `hosts`: datanode -> its one known host (a datanode seen on two hosts has
    none: the name would be a guess)."""

    hosts: Dict[str, Optional[str]] = field(default_factory=dict)
    #: datanode -> every host it was seen on, when more than one
    conflicts: Dict[str, List[str]] = field(default_factory=dict)
    #: the first `first` volumes whose status is not SCANNED (datanode, host, volume, status,
    #: detail), sorted
    unverified: List[Dict[str, Any]] = field(default_factory=list)
    #: volumes per status (every status present), and in all
    counts: Dict[str, int] = field(default_factory=dict)
    #: hosts (or, with no host known, datanodes) none of whose volumes was SCANNED
    hosts_unverified: List[Dict[str, Any]] = field(default_factory=list)
    #: datanodes none of whose volumes was SCANNED (their replicas are no verified copies)
    datanodes_unverified: Set[str] = field(default_factory=set)
    #: datanode -> its own volumes that were not read (UNREAD_STATUSES: failed, never
    #: scanned or emitted, no executor, the task elsewhere) as "VOLUME (STATUS)", sorted: the
    #: containers there are unknown, so the datanode may not leave before they are scanned
    unread_volumes: Dict[str, List[str]] = field(default_factory=dict)
    inventory: Optional[Inventory] = None

    @property
    def volumes_unverified(self) -> int:
        return sum(n for s, n in self.counts.items() if s != SCANNED)

    @property
    def degraded(self) -> bool:
        """Some volume or host was not verified: containers may have replicas nobody read."""
        return self.volumes_unverified > 0

    @property
    def knows_hosts(self) -> bool:
        return any(h is not None for h in self.hosts.values()) or bool(self.conflicts)

    def host_of(self, datanode: Optional[str]) -> Optional[str]:
        return None if datanode is None else self.hosts.get(datanode)

    def hosts_of(self, datanodes: Optional[Sequence[Optional[str]]]) -> List[Optional[str]]:
        return [self.host_of(d) for d in datanodes or []]

    def who(self, datanode: Optional[str], host: Optional[str] = None) -> str:
        """A datanode as the text output names it: `UUID on HOST` (`on unknown host` when
        the report knows hosts but not this one's; the identity alone when it knows none)."""
        host = host or self.host_of(datanode)
        if host is None and not self.knows_hosts:
            return str(datanode)
        return f"{datanode} on {host or 'unknown host'}"

    def resolve(self, name: str, known: Iterable[str]) -> List[str]:
        """The datanodes `name` means among `known` (and the inventory's UUIDs): the identity
        itself (exactly, then case-insensitively), else every datanode on the host of that
        name (case-insensitive; the inventory's name or address too). [] when none."""
        known = set(known) | set(self.hosts)
        if name in known:
            return [name]
        folded = [d for d in known if d.lower() == name.lower()]
        if folded:
            return sorted(folded)
        key = _name_key(name)
        on = sorted(d for d, h in self.hosts.items() if h is not None and _name_key(h) == key)
        if on:
            return on
        if self.inventory is not None:
            h = self.inventory.host_named(name)
            if h is not None and h.uuid is not None:
                return [h.uuid]
        return []


def host_index(
    spark: Any,
    *,
    replicas: Any = None,
    volumes: Any = None,
    inventory: Optional[Inventory] = None,
    first: int = 100,
) -> HostIndex:
    """The HostIndex of a scan's tables: `replicas` (the containers table, whose `host`
    column names where each replica was scanned), `volumes` (the volumes table, with the
    inventory's NOT_SCANNED hosts added by `volumes_with_inventory` or here), `inventory`
    (names the hosts of datanodes whose tables name none). Without tables: an empty index.

    Two Spark jobs at most: the (datanode, host) pairs of the containers table, and the
    volumes table collected once (small: one row per volume), whose facts are worked out on
    the driver; each collect is a job, and a job costs a report far more than these rows."""
    pairs: Set[Tuple[str, str]] = set()
    scanned: List[Any] = []  # every datanode of the containers table
    if replicas is not None and "datanode" in replicas.columns:
        cols = [c for c in ("datanode", "host", "status") if c in replicas.columns]
        for r in replicas.select(*cols).distinct().collect():
            d = r.asDict()
            scanned.append(d["datanode"])
            if "host" in d and _names_its_host(d):
                pairs.add((d["datanode"], d["host"]))
    rows = _volume_rows(volumes) if volumes is not None else None
    if rows and "host" in rows[0] and "datanode" in rows[0]:
        pairs.update((r["datanode"], r["host"]) for r in rows if _names_its_host(r))
    idx = HostIndex(inventory=inventory)
    seen: Dict[str, Set[str]] = {}
    for dn, h in pairs:
        seen.setdefault(dn, set()).add(h)
    for dn, hs in seen.items():
        if len({_name_key(h) for h in hs}) == 1:
            idx.hosts[dn] = sorted(hs)[0]
        else:
            idx.hosts[dn] = None
            idx.conflicts[dn] = sorted(hs)
    if inventory is not None:
        for uuid, entry in inventory.by_uuid().items():
            if idx.hosts.get(uuid) is None and uuid not in idx.conflicts:
                idx.hosts[uuid] = entry.host
    for dn in scanned:  # every datanode of the scan is in the index (its host maybe unknown)
        idx.hosts.setdefault(dn, None)
    if rows is not None:
        _volume_facts(idx, _with_inventory(rows, inventory), first)
    elif inventory is not None:
        known = [{"datanode": d, "host": h} for d, h in idx.hosts.items()]
        extra = unscanned_hosts(known, inventory)
        if extra:
            _volume_facts(idx, [_volume_row(t) for t in extra], first)
    return idx


def _names_its_host(row: Mapping[str, Any]) -> bool:
    """Does a table row say where its datanode ran (a volume the inventory does not give
    that host names no one; a row whose status is null says nothing, as in Spark's filter)."""
    if row.get("host") is None or row.get("datanode") is None:
        return False
    return "status" not in row or (row["status"] is not None and row["status"] != NOT_IN_INVENTORY)


def _volume_row(values: Tuple) -> Dict[str, Any]:
    """An `unscanned_hosts` row (VOLUME_SCHEMA's order) as a dict of _VOLUME_KEYS."""
    from spark_udfs.jobs.scan import VOLUME_COLUMNS  # when needed, as before (pyarrow)

    row = dict(zip(VOLUME_COLUMNS, values))
    return {k: row.get(k) for k in _VOLUME_KEYS}


def _with_inventory(
    rows: List[Dict[str, Any]], inventory: Optional[Inventory]
) -> List[Dict[str, Any]]:
    """`volumes_with_inventory` on collected rows: the inventory's host where a row names
    none (by its datanode's UUID), and the inventory's hosts with no row as NOT_SCANNED."""
    if inventory is None:
        return rows
    names: Dict[Any, Optional[str]] = {u: h.host for u, h in inventory.by_uuid().items()}
    filled = [
        r if r.get("host") is not None else {**r, "host": names.get(r.get("datanode"))}
        for r in rows
    ]
    return filled + [_volume_row(t) for t in unscanned_hosts(filled, inventory)]


def volumes_with_inventory(spark: Any, volumes: Any, inventory: Optional[Inventory]) -> Any:
    """The volumes table with the inventory's hosts filled in where a row names none (by its
    datanode's UUID) and its hosts missing from the table added as NOT_SCANNED."""
    from pyspark.sql import functions as F

    if inventory is None:
        return volumes
    names = sorted((u, h.host) for u, h in inventory.by_uuid().items())
    if names:
        m = spark.createDataFrame(names, "datanode string, inv_host string")
        volumes = (
            volumes.join(F.broadcast(m), "datanode", "left")
            .withColumn("host", F.coalesce(F.col("host"), F.col("inv_host")))
            .select(*volumes.columns)
        )
    extra = unscanned_hosts(volumes, inventory)
    if extra:
        from spark_udfs.jobs.scan import volume_frame

        volumes = volumes.unionByName(volume_frame(spark, extra))
    return volumes


def _nulls_first(*values: Optional[str]) -> Tuple[Tuple[bool, str], ...]:
    """A sort key ordering as Spark's ascending orderBy does: nulls first, then by value
    (Spark compares strings by their UTF-8 bytes, which is code point order, Python's)."""
    return tuple((v is not None, v or "") for v in values)


def _volume_facts(idx: HostIndex, volumes: List[Dict[str, Any]], first: int) -> None:
    """Fill idx's counts, first unverified volumes and unverified hosts/datanodes from the
    volumes table's rows (collected: one per volume)."""
    counts: Dict[Any, int] = {}  # a null status is counted too, as Spark's groupBy does
    for r in volumes:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    idx.counts = counts
    bad = sorted(
        (r for r in volumes if r.get("status") is not None and r["status"] != SCANNED),
        key=lambda r: _nulls_first(r["status"], r.get("host"), r.get("datanode"), r.get("volume")),
    )
    idx.unverified = [
        {
            "datanode": r.get("datanode"),
            "host": r.get("host") or idx.host_of(r.get("datanode")),
            "volume": r.get("volume"),
            "status": r["status"],
            "detail": r.get("detail"),
        }
        for r in bad[: max(first, 1)]
    ][:first]
    # per host (per datanode where no host is known): was any of its volumes read? (a null
    # status counts neither way, as in Spark's max over a null comparison)
    per: Dict[Optional[str], Dict[str, Any]] = {}
    for r in volumes:
        who = r.get("host") if r.get("host") is not None else r.get("datanode")
        g = per.setdefault(who, {"ok": None, "host": None, "datanodes": set(), "statuses": set()})
        if r.get("status") is not None:
            g["ok"] = max(g["ok"] or 0, int(r["status"] == SCANNED))
            g["statuses"].add(r["status"])
        if g["host"] is None and r.get("host") is not None:
            g["host"] = r["host"]
        if r.get("datanode") is not None:
            g["datanodes"].add(r["datanode"])
    for who in sorted(per, key=lambda w: _nulls_first(w)):
        g = per[who]
        if g["ok"] == 0:
            idx.hosts_unverified.append(
                {
                    "host": g["host"],
                    "datanodes": sorted(g["datanodes"]),
                    "statuses": sorted(g["statuses"]),
                }
            )
    ok: Dict[str, Optional[int]] = {}
    unread: Dict[str, Set[str]] = {}
    for r in volumes:
        dn, status = r.get("datanode"), r.get("status")
        if dn is None:
            continue
        ok.setdefault(dn, None)
        if status is not None:
            ok[dn] = max(ok[dn] or 0, int(status == SCANNED))
        if status in UNREAD_STATUSES:
            vol = r.get("volume") if r.get("volume") is not None else "(no volume)"
            unread.setdefault(dn, set()).add(f"{vol} ({status})")
    idx.datanodes_unverified = {dn for dn, v in ok.items() if v == 0}
    idx.unread_volumes = {dn: sorted(v) for dn, v in unread.items()}
