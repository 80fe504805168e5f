"""Create a new replica of a container from a good one: the copy a decommission plan asks for
(`crcmerkle replicate SOURCE TARGET`, `crcmerkle replicate --report PLAN.json`).

The job asks every registered layout first whether it lets a copy read or write where asked
(merkle.replica.layout.replicate_refusal: nothing is written into an Ozone datanode's volume,
nor into a layout crcmerkle only reads); the copy itself is the source's layout's
(RepairableLayout.copy_replica).
For crcmerkle's layout that is merkle.replica.crcmerkle.copier: the source verified against
its recorded checksums window by window while it is copied into a staging directory beside the
target, through directory descriptors, never a link, then renamed into place in one step (its
docstring says how, and what a crash leaves).

A plan's commands (`plan_commands`, `check_copy_command`) are run only when the plan's
digest of its command list matches, each command's argv is exactly `crcmerkle replicate
SOURCE TARGET` of its fields, and source and target lie under the roots the scan read, on
volumes of one cluster (merkle.replica.commandlist).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from merkle.replica.commandlist import command_int
from merkle.replica.errors import ReplicaError, SourceNotGoodError, TargetExistsError
from merkle.replica.layout import repairer_of, replicate_refusal
from merkle.replica.layouts import layout_of, layouts
from merkle.replica.results import ReplicateResult

__all__ = [
    "PLAN_FORMAT",
    "PlanCommand",
    "ReplicateResult",
    "SourceNotGoodError",
    "TargetExistsError",
    "check_copy_command",
    "commands_from_plan",
    "plan_commands",
    "replicate",
    "replicate_all",
]

PathLike = Union[str, "os.PathLike[str]"]
#: Called after each step with (step, detail): "block", "metadata", "tree", "rename".
StepHook = Callable[[str, Any], None]

#: the "format" of the JSON `crcmerkle spark plan --json` writes
PLAN_FORMAT = "crcmerkle-spark-plan"


def replicate(
    source: PathLike, target: PathLike, *, on_step: Optional[StepHook] = None
) -> ReplicateResult:
    """Create the replica `target` (a path `<volume>/<containerID>`) from the good replica
    `source` (see the module docstring). Raises SourceNotGoodError when the source's data
    does not verify, TargetExistsError when the target holds something else,
    ReplicaError/OSError when the work cannot be done (lock held, unreadable metadata)."""
    for role, path in (("source", source), ("target", target)):
        # before the lock: every layout guards its own volumes (nothing may be written into
        # an Ozone datanode's volume: Ozone makes its replicas itself)
        for layout in layouts():
            why = replicate_refusal(layout, os.fspath(path), role)
            if why:
                raise ReplicaError(why, os.fspath(path))
    copier = repairer_of(layout_of(os.fspath(source)), os.fspath(source))
    return copier.copy_replica(source, target, on_step=on_step)


def _plan_int(c: Dict[str, Any], key: str, high: int, source: str) -> int:
    value = command_int(c, key, high, source, "copy command")
    assert value is not None  # required
    return value


@dataclass(frozen=True)
class PlanCommand:
    """One copy command of a plan, validated: container, source replica, target replica."""

    round: int
    container: int
    source: str
    target: str


def plan_commands(plan: Any, source: str = "plan") -> List[PlanCommand]:
    """The copy commands of a `crcmerkle spark plan --json` plan, in round order, after
    checking them: the plan's digest of its command list ("copy_plan"."sha256",
    merkle.replica.commandlist.lines_digest), each command's numbers, paths and `argv`
    (what the operator approved: exactly `crcmerkle replicate SOURCE TARGET` of its
    fields). ReplicaError otherwise, before anything runs."""
    from merkle.replica import commandlist as cl

    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise ReplicaError(f'not a crcmerkle spark plan (no "format": "{PLAN_FORMAT}")', source)
    cp = plan.get("copy_plan")
    if not isinstance(cp, dict):
        cp = {}  # refused just below: no list of commands
    cmds = cp.get("commands")
    if not isinstance(cmds, list) or not all(isinstance(c, dict) for c in cmds):
        raise ReplicaError('the plan has no "copy_plan" list of commands', source)
    out: List[PlanCommand] = []
    for c in cmds:
        rnd = _plan_int(c, "round", cl.MAX_ROUND, source)
        cid = _plan_int(c, "container", cl.MAX_CONTAINER_ID, source)
        s, t = c.get("source_replica"), c.get("target_replica")
        if not (isinstance(s, str) and s and isinstance(t, str) and t):
            raise ReplicaError(
                f"container {cid}: the command lacks replica paths (the Spark scan records them)",
                source,
            )
        if c.get("argv") != ["crcmerkle", "replicate", s, t]:
            raise ReplicaError(
                f"container {cid}: its \"argv\" is not 'crcmerkle replicate' "
                f"with its source_replica and target_replica (what the "
                f"operator approves is what runs)",
                source,
            )
        out.append(PlanCommand(rnd, cid, s, t))
    digest = cl.check_digest_field(cp.get("sha256"), "the plan", source)
    if cl.lines_digest(cmds) != digest:
        raise ReplicaError(
            "the plan's copy commands do not match its digest (edited, or not this plan's)", source
        )
    return sorted(out, key=lambda c: c.round)  # stable: the plan's order within a round


def commands_from_plan(plan: Any, source: str = "plan") -> List[List[str]]:
    """[source replica, target replica] per copy command of a `crcmerkle spark plan --json`
    plan, in round order (plan_commands: digest, numbers, paths and argv checked);
    ReplicaError when it is not such a plan or a command is refused."""
    return [[c.source, c.target] for c in plan_commands(plan, source)]


def check_copy_command(cmd: PlanCommand, roots: Any, source: str) -> None:
    """Before a copy runs: its source is a replica of its container (its own metadata says
    so), source and target lie under the roots the scan read, on volumes of one cluster,
    named by the container, reached without links (merkle.replica.commandlist)."""
    from merkle.replica import commandlist as cl

    roots = cl.check_roots_field(roots, "the plan", source)
    src_root = cl.check_replica_path(cmd.source, cmd.container, roots, source)
    tgt_root = cl.check_replica_path(cmd.target, cmd.container, roots, source)
    if cl.cluster_of(src_root) != cl.cluster_of(tgt_root):
        raise ReplicaError(
            f"container {cmd.container}: the target {cmd.target} is not on a "
            f"volume of the source's cluster ({src_root})",
            source,
        )
    cl.check_replica_metadata(cmd.source, cmd.container)
    fd = cl.open_without_links(os.path.dirname(os.path.abspath(cmd.target)))
    os.close(fd)


def replicate_all(pairs: Sequence[Sequence[str]]) -> List[Any]:
    """Run [source, target] pairs in order; per pair a ReplicateResult or the exception."""
    out: List[Any] = []
    for s, t in pairs:
        try:
            out.append(replicate(s, t))
        except (ReplicaError, OSError) as exc:
            out.append(exc)
    return out
