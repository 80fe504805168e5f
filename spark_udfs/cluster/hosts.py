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


def _volume_rows(volumes: Any) -> List[Dict[str, Any]]:
    """The volumes table's datanode/host/ran_on/volume values: a Spark DataFrame (collected:
    one row per volume, small), a pyarrow Table, or rows (dicts or Row objects; a missing key
    is None)."""
    keys = ("datanode", "host", "ran_on", "volume")
    if hasattr(volumes, "select") and hasattr(volumes, "collect"):  # a Spark DataFrame
        volumes = volumes.select(*[k for k in keys if k in volumes.columns]).distinct().collect()
    elif hasattr(volumes, "to_pylist"):  # a pyarrow Table
        volumes = volumes.to_pylist()
    out = []
    for r in volumes:
        d = r if isinstance(r, Mapping) else r.asDict()
        out.append({k: d.get(k) for k in keys})
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
        if r["datanode"]:
            datanodes.add(datanode_identity(r["datanode"]))
        for name in (r["host"], r["ran_on"]):
            h = inventory.host_named(name) if name else None
            if h is not None:
                hosts.add(id(h))
        h = inventory.host_named(r["host"]) if r["host"] else None
        if h is not None and r["volume"]:
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
    (names the hosts of datanodes whose tables name none). Without tables: an empty index."""
    from pyspark.sql import functions as F

    pairs: Set[Tuple[str, str]] = set()
    for df in (replicas, volumes):
        if df is not None and "host" in df.columns and "datanode" in df.columns:
            named = F.col("host").isNotNull() & F.col("datanode").isNotNull()
            if "status" in df.columns:  # a volume the inventory does not give that host
                named = named & (F.col("status") != F.lit(NOT_IN_INVENTORY))  # names no one
            for r in df.filter(named).select("datanode", "host").distinct().collect():
                pairs.add((r["datanode"], r["host"]))
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
    if replicas is not None and "datanode" in replicas.columns:
        # every datanode of the scan is in the index (its host maybe unknown)
        for r in replicas.select("datanode").distinct().collect():
            idx.hosts.setdefault(r["datanode"], None)
    if volumes is not None:
        volumes = volumes_with_inventory(spark, volumes, inventory)
        _volume_facts(idx, volumes, first)
    elif inventory is not None:
        rows = unscanned_hosts(
            [{"datanode": d, "host": h} for d, h in idx.hosts.items()], inventory
        )
        if rows:
            _volume_facts(idx, spark.createDataFrame(rows, _volume_schema()), first)
    return idx


def _volume_schema() -> str:
    from spark_udfs.jobs.scan import VOLUME_SCHEMA

    return VOLUME_SCHEMA


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
        volumes = volumes.unionByName(spark.createDataFrame(extra, _volume_schema()))
    return volumes


def _volume_facts(idx: HostIndex, volumes: Any, first: int) -> None:
    """Fill idx's counts, first unverified volumes and unverified hosts/datanodes."""
    from pyspark.sql import functions as F

    idx.counts = {r["status"]: int(r["count"]) for r in volumes.groupBy("status").count().collect()}
    bad = volumes.filter(F.col("status") != F.lit(SCANNED))
    idx.unverified = [
        {
            "datanode": r["datanode"],
            "host": r["host"] or idx.host_of(r["datanode"]),
            "volume": r["volume"],
            "status": r["status"],
            "detail": r["detail"],
        }
        for r in bad.orderBy("status", "host", "datanode", "volume").limit(max(first, 1)).collect()
    ][:first]
    # per host (per datanode where no host is known): was any of its volumes read?
    per = (
        volumes.withColumn("who", F.coalesce(F.col("host"), F.col("datanode")))
        .groupBy("who")
        .agg(
            F.max((F.col("status") == F.lit(SCANNED)).cast("int")).alias("ok"),
            F.first(F.col("host"), ignorenulls=True).alias("host"),
            F.sort_array(F.collect_set("datanode")).alias("datanodes"),
            F.sort_array(F.collect_set("status")).alias("statuses"),
        )
    )
    for r in per.filter(F.col("ok") == 0).orderBy("who").collect():
        idx.hosts_unverified.append(
            {"host": r["host"], "datanodes": list(r["datanodes"]), "statuses": list(r["statuses"])}
        )
    per_dn = (
        volumes.filter(F.col("datanode").isNotNull())
        .groupBy("datanode")
        .agg(F.max((F.col("status") == F.lit(SCANNED)).cast("int")).alias("ok"))
    )
    idx.datanodes_unverified = {r["datanode"] for r in per_dn.filter(F.col("ok") == 0).collect()}
    unread = (
        volumes.filter(F.col("datanode").isNotNull() & F.col("status").isin(*UNREAD_STATUSES))
        .groupBy("datanode")
        .agg(
            F.sort_array(
                F.collect_set(
                    F.concat(
                        F.coalesce(F.col("volume"), F.lit("(no volume)")),
                        F.lit(" ("),
                        F.col("status"),
                        F.lit(")"),
                    )
                )
            ).alias("v")
        )
    )
    idx.unread_volumes = {r["datanode"]: list(r["v"]) for r in unread.collect()}
