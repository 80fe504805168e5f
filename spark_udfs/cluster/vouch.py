"""Which scanned volumes may vouch for their replicas: the checks that only the whole cluster
(and its inventory) shows, one implementation for the data-local scan's driver
(spark_udfs.jobs.hostscan) and for the readers of tables written by `crcmerkle scan --emit`
(spark_udfs.tables.emit), which no driver checked when they were written.

A volume read on its host is still no good copy when (in this order, the first that holds
says why):

- NOT_IN_INVENTORY: with an inventory, its host is not in it, or the inventory does not give
  that host this volume (a disk nobody configured: planted, or another node's);
- WRONG_DATANODE: with an inventory, its VERSION names another datanode than the inventory
  puts on its host;
- DUPLICATE_DATANODE: one datanode identity on volumes of two hosts (with or without an
  inventory: which host is the datanode cannot be told);
- WRONG_DATANODE: a host whose volumes name two datanodes (Ozone would refuse the ones that
  are not its own; which those are cannot be told without an inventory), or a volume of
  another cluster than most volumes (that volume only: the host's real volumes stay counted).

Such a volume's row gets that status and its rows leave the tables that compare replicas:
none of its replicas counts as a good copy, none vouches for a key. Everything here is per
volume (small: one row each), never per replica.
"""

from __future__ import annotations

import posixpath
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from merkle.replica.inventory import Inventory, _name_key
from merkle.replica.layout import datanode_identity

__all__ = [
    "DUPLICATE_DATANODE",
    "NOT_IN_INVENTORY",
    "SCANNED",
    "Verdict",
    "WRONG_DATANODE",
    "check_volumes",
    "same_volume",
]

#: the volumes table's statuses these checks use (spark_udfs.jobs.scan.VOLUME_STATUSES; repeated
#: so that this module imports no Spark job)
SCANNED = "SCANNED"
WRONG_DATANODE = "WRONG_DATANODE"
DUPLICATE_DATANODE = "DUPLICATE_DATANODE"
NOT_IN_INVENTORY = "NOT_IN_INVENTORY"

#: a volume's key: (host, volume) as its row names them
Key = Tuple[str, str]


@dataclass(frozen=True)
class Verdict:
    """Why a SCANNED volume may not vouch: its new status, one line, and the datanode its
    row is shown as when that is not what its VERSION claims (the inventory's, for a volume
    of an inventory host), else None."""

    status: str
    detail: str
    datanode: Optional[str] = None


def same_volume(path: Optional[str]) -> str:
    """A volume path as the checks compare them (the inventory normalises its own)."""
    return "/" + posixpath.normpath(path or "").lstrip("/")


def check_volumes(
    rows: Iterable[Mapping[str, Any]], inventory: Optional[Inventory] = None
) -> Dict[Key, Verdict]:
    """{(host, volume): Verdict} for each SCANNED row (datanode, host, volume, cluster_id,
    status) that must not vouch (see the module docstring). Rows without a host (a scan of
    one directory tree, which knows no hosts) are never judged here."""
    live = [dict(r) for r in rows if r.get("status") == SCANNED and r.get("host")]
    out: Dict[Key, Verdict] = {}
    if inventory is not None:
        out.update(_inventory_checks(live, inventory))
    live = [r for r in live if (r["host"], r["volume"]) not in out]
    for check in (_duplicate_datanodes, _two_datanodes_on_a_host, _other_clusters):
        found = check(live)
        out.update(found)
        live = [r for r in live if (r["host"], r["volume"]) not in found]
    return out


def _inventory_checks(rows: List[Dict[str, Any]], inventory: Inventory) -> Dict[Key, Verdict]:
    out: Dict[Key, Verdict] = {}
    for r in rows:
        key = (r["host"], r["volume"])
        h = inventory.host_named(r["host"])
        if h is None:
            out[key] = Verdict(
                NOT_IN_INVENTORY,
                (
                    f"{r['volume']} on {r['host']}: the inventory has no host {r['host']}: its "
                    f"datanode {r['datanode']} is not counted"
                ),
            )
            continue
        mine = h.uuid
        if same_volume(r["volume"]) not in {same_volume(v) for v in h.volumes}:
            out[key] = Verdict(
                NOT_IN_INVENTORY,
                (
                    f"{r['volume']} on {h.host} is not one of that host's volumes in the "
                    f"inventory (it names datanode {r['datanode']}): not counted"
                ),
                mine,
            )
        elif mine is not None and datanode_identity(r["datanode"]) != mine:
            out[key] = Verdict(
                WRONG_DATANODE,
                (
                    f"{r['volume']} on {h.host} belongs to datanode {r['datanode']}; the "
                    f"inventory puts {mine} there: not counted"
                ),
                mine,
            )
    return out


def _duplicate_datanodes(rows: List[Dict[str, Any]]) -> Dict[Key, Verdict]:
    """One datanode identity on two hosts: none of its volumes is counted as its."""
    hosts_of: Dict[str, Dict[str, str]] = defaultdict(dict)
    for r in rows:
        hosts_of[r["datanode"]].setdefault(_name_key(r["host"]), r["host"])
    out: Dict[Key, Verdict] = {}
    for r in rows:
        hosts = sorted(hosts_of[r["datanode"]].values())
        if len(hosts) > 1:
            out[(r["host"], r["volume"])] = Verdict(
                DUPLICATE_DATANODE,
                (
                    f"datanode {r['datanode']} is claimed by volumes on {len(hosts)} hosts "
                    f"({', '.join(hosts)}): counted as none of theirs"
                ),
            )
    return out


def _two_datanodes_on_a_host(rows: List[Dict[str, Any]]) -> Dict[Key, Verdict]:
    """A host whose volumes name two datanodes: none of them is counted."""
    by_host: Dict[str, Set[str]] = defaultdict(set)
    for r in rows:
        by_host[_name_key(r["host"])].add(r["datanode"])
    out: Dict[Key, Verdict] = {}
    for r in rows:
        dns = sorted(by_host[_name_key(r["host"])])
        if len(dns) > 1:
            out[(r["host"], r["volume"])] = Verdict(
                WRONG_DATANODE,
                (
                    f"the volumes of {r['host']} name {len(dns)} datanodes ({', '.join(dns)}): "
                    f"Ozone would refuse the ones that are not its own; none is counted"
                ),
            )
    return out


def _other_clusters(rows: List[Dict[str, Any]]) -> Dict[Key, Verdict]:
    """A volume of another cluster than most volumes: that volume (not its datanode's
    others). Without one cluster holding most, no cluster-bearing volume is counted."""
    clusters = Counter(r["cluster_id"] for r in rows if r.get("cluster_id"))
    if len(clusters) < 2:
        return {}
    (main, n), (_, second) = clusters.most_common(2)
    out: Dict[Key, Verdict] = {}
    for r in rows:
        cid = r.get("cluster_id")
        if not cid:
            continue
        if n == second:
            out[(r["host"], r["volume"])] = Verdict(
                WRONG_DATANODE,
                (
                    f"{r['volume']} on {r['host']} belongs to cluster {cid}, and no cluster "
                    f"holds most volumes ({len(clusters)} clusters): not counted"
                ),
            )
        elif cid != main:
            out[(r["host"], r["volume"])] = Verdict(
                WRONG_DATANODE,
                (
                    f"{r['volume']} on {r['host']} belongs to cluster {cid}, the others to "
                    f"{main}: not counted"
                ),
            )
    return out


# ---- the readers of emitted tables ------------------------------------------------------------

#: the file name column of Spark's file sources (the base name, as written)
_FILE = "_metadata.file_name"


def _emitted(name: Any) -> Any:
    from spark_udfs.tables.emit import FILE_PREFIX

    return name.startswith(FILE_PREFIX) & name.endswith(".parquet")


def vet_emitted(
    spark: Any, tables: Dict[str, Any], inventory: Optional[Inventory] = None
) -> Dict[str, Any]:
    """`tables` (a scan directory's DataFrames, as read back from Parquet) with the checks
    applied to the volumes `crcmerkle scan --emit` wrote (their files' names say so; the
    Spark scans' own tables were checked by their driver): each volume that may not vouch
    gets its status in the volumes table, and its rows, in files named as its volumes-table
    file (spark_udfs.tables.emit.file_name: one name per host and volume in every table), leave the
    other tables. Unchanged when there is no volumes table or nothing to take out."""
    from pyspark.sql import functions as F

    volumes = tables.get("volumes")
    if volumes is None:
        return tables
    name = F.col(_FILE)
    rows = [
        r.asDict()
        for r in volumes.select("*", name.alias("__file")).filter(_emitted(name)).collect()
    ]
    verdicts = check_volumes(rows, inventory)
    if not verdicts:
        return tables
    out = dict(tables)
    bad = sorted({r["__file"] for r in rows if (r["host"], r["volume"]) in verdicts})
    for t in ("chunks", "blocks", "containers", "errors"):
        if out.get(t) is not None:
            out[t] = out[t].filter(~F.col(_FILE).isin(bad))
    out["volumes"] = _rewritten(spark, volumes, verdicts)
    return out


def _rewritten(spark: Any, volumes: Any, verdicts: Dict[Key, Verdict]) -> Any:
    """The volumes table with each judged SCANNED row's status, detail and datanode."""
    from pyspark.sql import functions as F

    from spark_udfs.jobs.scan import VOLUME_COLUMNS

    changes = spark.createDataFrame(
        [(h, v, x.status, x.detail, x.datanode) for (h, v), x in sorted(verdicts.items())],
        "__h string, __v string, __status string, __detail string, __datanode string",
    )
    hit = (F.col("status") == F.lit(SCANNED)) & F.col("__status").isNotNull()
    cols = [
        F.when(hit, F.coalesce(F.col("__datanode"), F.col("datanode")))
        .otherwise(F.col("datanode"))
        .alias("datanode")
    ]
    for c in volumes.columns:
        if c in ("status", "detail"):
            cols.append(F.when(hit, F.col(f"__{c}")).otherwise(F.col(c)).alias(c))
        elif c != "datanode":
            cols.append(F.col(c))
    joined = volumes.join(
        F.broadcast(changes),
        (F.col("host") == F.col("__h")) & (F.col("volume") == F.col("__v")),
        "left",
    )
    return joined.select(*cols).select(*VOLUME_COLUMNS)
