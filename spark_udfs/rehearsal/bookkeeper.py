"""The simulated hosts' bookies (spark_udfs.rehearsal.simhosts with generate={"layout":
"bookkeeper", ...}): generated bookies whose cookies name the paths where each simulated
host mounts its ledger directories, and each bookie's identity and directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

__all__ = ["generate_bookie_hosts"]


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
