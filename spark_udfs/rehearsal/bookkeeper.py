"""The simulated hosts' bookies (spark_udfs.rehearsal.simhosts with generate={"layout":
"bookkeeper", ...}): generated bookies whose cookies name the paths where each simulated
host mounts its ledger directories, and each bookie's identity and directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

__all__ = ["generate_bookie_hosts", "write_rate_bookies"]


def generate_bookie_hosts(
    cluster_dir: Path, bookies: int, generate: Dict[str, Any], mount_template: str, dirs: int
) -> Tuple[Dict[str, Any], List[Tuple[str, str, List[Path]]]]:
    """(manifest, bookies in host order): generate_bookies with `generate`'s config fields
    (`faults` a spec or a dict), `dirs` ledger directories each, directory d named in the
    cookies as `mount_template.format(volume=d)`; bookie-(i+1) is item i: (its bookie ID,
    the instanceId, its ledger directories)."""
    from merkle.replica.bookkeeper.generate import generate_bookies, parse_faults

    args = {k: v for k, v in generate.items() if k != "layout"}
    faults = args.pop("faults", {})
    if isinstance(faults, str):
        faults = parse_faults(faults)
    manifest = generate_bookies(
        cluster_dir,
        bookies=bookies,
        ledger_dirs=dirs,
        mount_path=mount_template.replace("{volume}", "{dir}"),
        faults=faults,
        **args,
    )
    out = []
    names = sorted(manifest["bookies"], key=lambda n: int(n.rsplit("-", 1)[1]))
    for name in names:
        b = manifest["bookies"][name]
        sources = [cluster_dir / d for d in b["ledger_dirs"]]
        if len(sources) != dirs:
            raise RuntimeError(f"{name}: {len(sources)} ledger directories, not {dirs}")
        out.append((b["id"], manifest["instance_id"], sources))
    return manifest, out


def write_rate_bookies(
    cluster_dir: Path,
    bookies: int,
    mount_template: str,
    dirs: int,
    *,
    log_bytes: int,
    payload: int = 64 << 10,
) -> Tuple[Dict[str, Any], List[Tuple[str, str, List[Path]]]]:
    """Clean bookies sized for a rate measurement (what the generator, which builds every
    bookie in memory, does not make): bookie-(i+1) (ID 127.0.0.(i+2):3181) holds one ledger,
    i+1 (ensemble 1, CRC32C, closed), whose entries of `payload` bytes fill one entry log of
    about `log_bytes` in its first ledger directory (InterleavedLedgerStorage: the log, its
    ledgers map, the ledger's `.idx`), streamed to disk in BookKeeper's format; the metadata
    as `-dumptofile` files in `ledger-metadata/`. Returns what generate_bookie_hosts returns
    (a manifest with no expected findings)."""
    import hashlib
    import os
    import struct
    import uuid

    from merkle.replica.bookkeeper.entrylog import HEADER_SIZE, location
    from merkle.replica.bookkeeper.generate import DUMPS_DIR
    from merkle.replica.bookkeeper.write import (
        cookie_text,
        entry_bytes,
        idx_bytes,
        idx_relpath,
        ledger_metadata_v3,
        ledgers_map,
        log_header,
        master_key,
    )

    instance = str(uuid.UUID(int=0xB00C, version=4))
    per_log = max(1, (log_bytes - HEADER_SIZE) // (payload + 36))
    body = hashlib.shake_256(b"crcmerkle rate bookie").digest(payload)
    dumps = cluster_dir / DUMPS_DIR
    dumps.mkdir(parents=True, exist_ok=True)
    manifest: Dict[str, Any] = {
        "layout": "bookkeeper",
        "instance_id": instance,
        "metadata": {"dumps": DUMPS_DIR},
        "bookies": {},
        "expected_findings": [],
        "log_bytes": 0,
    }
    out = []
    for i in range(bookies):
        name, bid, lid = f"bookie-{i + 1}", f"127.0.0.{i + 2}:3181", i + 1
        rel = [f"{name}/ledgers-{d}" for d in range(dirs)]
        mounted = [mount_template.format(volume=d) for d in range(dirs)]
        journal = os.path.join(os.path.dirname(mounted[0]), "journal")
        cookie = cookie_text(bid, [journal], mounted, instance)
        currents = [cluster_dir / r / "current" for r in rel]
        for c in currents:
            c.mkdir(parents=True)
            (c / "VERSION").write_bytes(cookie)
            (c / "lastId").write_text("0\n")
        locations: Dict[int, int] = {}
        log = currents[0] / "0.log"
        with open(log, "wb") as f:
            f.write(log_header())
            pos = HEADER_SIZE
            for e in range(per_log):
                entry = entry_bytes(lid, e, e - 1, (e + 1) * payload, body, "CRC32C")
                f.write(struct.pack(">i", len(entry)))
                locations[e] = location(0, pos + 4)
                f.write(entry)
                pos += 4 + len(entry)
            f.write(ledgers_map({lid: pos - HEADER_SIZE}))
            f.seek(0)
            f.write(log_header(pos, 1))
        manifest["log_bytes"] += os.path.getsize(log)
        a, b, idx = idx_relpath(lid)
        (currents[0] / a / b).mkdir(parents=True)
        (currents[0] / a / b / idx).write_bytes(idx_bytes(master_key(b""), locations))
        (dumps / str(lid)).write_bytes(
            ledger_metadata_v3(
                ensemble_size=1,
                write_quorum=1,
                ack_quorum=1,
                state="CLOSED",
                last_entry_id=per_log - 1,
                length=per_log * payload,
                segments=[(0, [bid])],
                digest_type="CRC32C",
                password=b"",
            )
        )
        manifest["bookies"][name] = {"id": bid, "ledger_dirs": rel, "entries": per_log}
        out.append((bid, instance, [cluster_dir / r for r in rel]))
    return manifest, out
