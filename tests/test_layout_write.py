"""The write side of the replica-layout interface (issue 24): the generator, reconcile,
replicate and `crcmerkle reconcile --all` ask the layout (merkle.replica.layouts) instead of
branching on Ozone; the reconciler is a package of one-job modules that still exports every
name it did; safeopen's one walk down a chain of directories follows no link."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import merkle.replica.reconcile as rr
from merkle.cli import main
from merkle.replica import layouts as registry
from merkle.replica.crcmerkle.copier import open_in
from merkle.replica.crcmerkle.interface import CrcmerkleLayout
from merkle.replica.errors import ReplicaError
from merkle.replica.generate import GeneratorConfig, GeneratorError, generate_cluster, parse_faults
from merkle.replica.layout import REPAIR_NONE, REPAIR_OFFLINE
from merkle.replica.reconcile import datanode_of, reconcile, replica_groups
from merkle.replica.replicate import replicate
from merkle.replica.safeopen import NotRegularFileError, UnsafeNameError

from replica_helpers import SMALL, make_cluster

# ---- a registered layout that is not a shipped one ------------------------------------------


class _Fake(CrcmerkleLayout):
    """crcmerkle's replicas under `base`, claimed by another layout that records what the
    jobs ask of it (its repairs and peers are crcmerkle's, so they really work)."""

    title = "Fake"

    def __init__(self, name: str, base: Path, repair: str) -> None:
        self.name = name
        self.base = os.path.abspath(base)
        self.repair = repair
        self.asked: List[Tuple[str, Any]] = []

    def recognises(self, root: str) -> bool:
        p = os.path.abspath(root)
        return p == self.base or p.startswith(self.base + os.sep)

    # the owner's commands (merkle.replica.layout.OwnerCommands): its owner repairs in service
    owner_copies_note = "the fake owner copies"

    def owner_repair_argv(self, container_id: int) -> List[str]:
        return ["fake-owner", "repair", str(container_id)]

    def owner_leave_argv(self, host: str, maintenance: bool) -> List[str]:
        return ["fake-owner", "leave", host]

    def repair_refusal(self, path: str) -> str:
        self.asked.append(("repair_refusal", path))
        return f"{path}: a fake volume is repaired by its owner"

    def open_repair(self, path: str, *, dry_run: bool) -> Any:
        self.asked.append(("open_repair", path))
        return super().open_repair(path, dry_run=dry_run)

    def load_peer(self, path: str, container_id: int) -> Any:
        self.asked.append(("load_peer", path))
        return super().load_peer(path, container_id)

    def replica_groups(self, path: str, on_error: Any = None) -> Dict[int, List[Path]]:
        self.asked.append(("replica_groups", path))
        return super().replica_groups(path, on_error)

    def datanode_of(self, path: str) -> str:
        self.asked.append(("datanode_of", path))
        return "fake-datanode"

    def replicate_refusal(self, path: str, role: str) -> Optional[str]:
        self.asked.append(("replicate_refusal", role))
        return f"the {role} is on a fake volume" if self.recognises(path) else None

    def cluster_of(self, root: str) -> str:
        self.asked.append(("cluster_of", root))
        return "fake-cluster"

    def check_container_id(self, dir_fd: int, path: str, container_id: int) -> None:
        self.asked.append(("check_container_id", path))
        raise ReplicaError(f"the fake layout says this is not container {container_id}", path)

    def asked_for(self, what: str) -> List[Any]:
        return [arg for name, arg in self.asked if name == what]


@pytest.fixture
def fake_layout(tmp_path: Path) -> Iterator[Any]:
    """make(name, repair): a _Fake over tmp_path/<name>, registered first for the test."""
    made: List[str] = []

    def make(name: str, repair: str = REPAIR_OFFLINE) -> _Fake:
        layout = _Fake(name, tmp_path / name, repair)
        registry.register(layout, first=True)
        made.append(name)
        return layout

    yield make
    for name in made:
        registry.unregister(name)


def _stored_values(groups: Dict[int, List[Path]]) -> Dict[int, set]:
    from merkle.replica.scan import scan_container

    return {
        cid: {scan_container(r, write_tree=False).tree.data_checksum for r in reps}
        for cid, reps in groups.items()
    }


# ---- reconcile ------------------------------------------------------------------------------


def test_reconcile_refuses_with_the_layouts_reason_unless_offline(tmp_path, fake_layout):
    fake = fake_layout("fakevols")
    make_cluster(tmp_path / "fakevols", "bitflip", seed=3)
    reps = sorted((tmp_path / "fakevols").glob("dn*/vol*/*"))
    with pytest.raises(ReplicaError, match="a fake volume is repaired by its owner"):
        reconcile(reps[0], reps[1:])
    with pytest.raises(ReplicaError, match="a fake volume is repaired by its owner"):
        replica_groups(tmp_path / "fakevols")
    assert fake.asked_for("repair_refusal") and not fake.asked_for("open_repair")


def test_an_offline_repair_goes_through_the_layout_and_converges(tmp_path, fake_layout):
    fake = fake_layout("fakevols")
    make_cluster(tmp_path / "fakevols", "bitflip,missing-chunks", seed=5, containers=2)
    groups = replica_groups(tmp_path / "fakevols", offline=True)
    assert fake.asked_for("replica_groups") == [os.fspath(tmp_path / "fakevols")]
    assert groups and all(len(reps) == 3 for reps in groups.values())
    for reps in groups.values():
        for i, r in enumerate(reps):
            result = reconcile(r, reps[:i] + reps[i + 1 :], offline=True)
            assert not result.remaining
    assert len(fake.asked_for("open_repair")) == sum(len(r) for r in groups.values())
    assert len(fake.asked_for("load_peer")) == 2 * len(fake.asked_for("open_repair"))
    assert all(len(values) == 1 for values in _stored_values(groups).values())


def test_an_offline_repair_takes_peers_of_its_own_layout_only(tmp_path, fake_layout):
    fake_layout("fakevols")
    make_cluster(tmp_path / "fakevols", "none", seed=1)
    make_cluster(tmp_path / "plain", "none", seed=1)
    target = sorted((tmp_path / "fakevols").glob("dn*/vol*/*"))[0]
    stranger = sorted((tmp_path / "plain").glob("dn*/vol*/*"))[0]
    with pytest.raises(ReplicaError, match="an Fake replica is repaired from Fake replicas only"):
        reconcile(target, [stranger], offline=True)


def test_a_layout_that_repairs_nothing_is_refused_even_offline(tmp_path, fake_layout):
    fake_layout("frozen", repair=REPAIR_NONE)
    make_cluster(tmp_path / "frozen", "bitflip", seed=3)
    reps = sorted((tmp_path / "frozen").glob("dn*/vol*/*"))
    with pytest.raises(ReplicaError, match="repaired by its owner"):
        reconcile(reps[0], reps[1:], offline=True)


def test_the_vote_asks_the_layout_for_a_replicas_datanode(tmp_path, fake_layout):
    fake = fake_layout("fakevols")
    make_cluster(tmp_path / "fakevols", "none", seed=1)
    rep = sorted((tmp_path / "fakevols").glob("dn*/vol*/*"))[0]
    assert datanode_of(rep) == "fake-datanode"
    assert fake.asked_for("datanode_of") == [os.fspath(rep)]


def test_cli_reconcile_all_offline_walks_through_the_layout(tmp_path, fake_layout, capsys):
    fake = fake_layout("fakevols")
    make_cluster(tmp_path / "fakevols", "bitflip", seed=3)
    assert main(["reconcile", "--all", str(tmp_path / "fakevols")]) == 2
    assert "a fake volume is repaired by its owner" in capsys.readouterr().err
    assert main(["reconcile", "--all", "--offline", str(tmp_path / "fakevols")]) == 0
    assert fake.asked_for("replica_groups") and fake.asked_for("open_repair")


def test_report_commands_are_checked_against_the_disk_by_the_layout(tmp_path, fake_layout):
    from merkle.replica import commandlist as cl

    fake = fake_layout("fakevols")
    make_cluster(tmp_path / "fakevols", "none", seed=1)
    rep = sorted((tmp_path / "fakevols").glob("dn*/vol*/*"))[0]
    assert cl.cluster_of(os.fspath(tmp_path / "fakevols")) == "fake-cluster"
    with pytest.raises(ReplicaError, match="the fake layout says this is not container"):
        cl.check_replica_metadata(os.fspath(rep), int(rep.name))
    assert fake.asked_for("check_container_id") == [os.fspath(rep)]


def test_an_ozone_shaped_path_is_no_ozone_replica_unless_on_a_volume(tmp_path):
    """A crcmerkle replica under directories named like an Ozone volume's is checked as
    what it is: its metadata must record the container the command names."""
    from merkle.replica import commandlist as cl

    make_cluster(tmp_path / "c", "none", seed=1)
    rep = sorted((tmp_path / "c").glob("dn*/vol*/*"))[0]
    fake_home = tmp_path / "x" / "hdds" / "CID-1" / "current" / "containerDir0"
    fake_home.mkdir(parents=True)
    planted = fake_home / "99"
    shutil.copytree(rep, planted)  # records container rep.name, named 99
    with pytest.raises(ReplicaError, match="does not say it is container 99"):
        cl.check_replica_metadata(os.fspath(planted), 99)
    assert cl.cluster_of(os.fspath(tmp_path / "x" / "hdds" / "CID-1")) == "/" + "/".join(
        p for p in os.fspath(tmp_path / "x" / "hdds" / "CID-1").split("/") if p
    )


# ---- replicate ------------------------------------------------------------------------------


def test_replicate_asks_every_layout_before_writing(tmp_path, fake_layout):
    fake = fake_layout("fakevols")
    make_cluster(tmp_path / "plain", "none", seed=1)
    source = sorted((tmp_path / "plain").glob("dn*/vol*/*"))[0]
    volume = tmp_path / "fakevols" / "dn9" / "vol0"
    volume.mkdir(parents=True)
    target = volume / source.name  # not made yet: the layout still guards its volume
    with pytest.raises(ReplicaError, match="the target is on a fake volume"):
        replicate(source, target)
    assert fake.asked_for("replicate_refusal") == ["source", "target"]
    assert not target.exists()


def test_replicate_into_an_ozone_volume_is_refused_before_the_target_exists(tmp_path):
    """The Ozone layout guards its volumes for a target not made yet (layout_of would not
    recognise a path that does not exist: every layout is asked instead)."""
    pytest.importorskip("rocksdict")
    make_cluster(tmp_path / "plain", "none", seed=1)
    source = sorted((tmp_path / "plain").glob("dn*/vol*/*"))[0]
    generate_cluster(
        tmp_path / "oz", GeneratorConfig(**{**SMALL, "containers": 1, "layout": "ozone"})
    )
    container_dir = next((tmp_path / "oz").glob("dn*/vol*/hdds/*/current/containerDir0"))
    target = container_dir / source.name
    shutil.rmtree(target, ignore_errors=True)
    with pytest.raises(ReplicaError, match="the target is on an Ozone datanode volume"):
        replicate(source, target)
    assert not target.exists()


def test_open_in_keeps_its_refusals_through_safeopen(tmp_path):
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "d").mkdir()
    (tmp_path / "dlink").symlink_to(tmp_path / "d")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        with pytest.raises(ReplicaError, match=r"^link is a symbolic link \(refused\)"):
            open_in(fd, "link")
        with pytest.raises(ReplicaError, match=r"^d is not a regular file"):
            open_in(fd, "d")
        with pytest.raises(NotADirectoryError):
            open_in(fd, "dlink", directory=True)  # O_DIRECTORY|O_NOFOLLOW: ENOTDIR
        with pytest.raises(NotADirectoryError):
            open_in(fd, "real", directory=True)
        with pytest.raises(ValueError):
            open_in(fd, "..")
        os.close(open_in(fd, "real"))
        os.close(open_in(fd, "d", directory=True))
    finally:
        os.close(fd)


# ---- safeopen: one walk down a chain of directories -----------------------------------------


def test_open_dir_chain_refuses_a_link_mid_path(tmp_path):
    from merkle.replica.safeopen import open_dir_chain

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "elsewhere" / "c").mkdir(parents=True)
    (tmp_path / "a" / "linked").symlink_to(tmp_path / "elsewhere")
    base = os.open(tmp_path, os.O_RDONLY)
    try:
        fd = open_dir_chain(base, ["a", "b", "c"], start=tmp_path)
        try:
            assert os.path.samestat(os.fstat(fd), os.stat(tmp_path / "a" / "b" / "c"))
        finally:
            os.close(fd)
        with pytest.raises(NotRegularFileError, match="linked is a symbolic link"):
            open_dir_chain(base, ["a", "linked", "c"], start=tmp_path)
        with pytest.raises(UnsafeNameError):
            open_dir_chain(base, ["a", "..", "a"], start=tmp_path)
        with pytest.raises(FileNotFoundError) as missing:
            open_dir_chain(base, ["a", "nope"], start=tmp_path)
        assert missing.value.filename == os.fspath(tmp_path / "a" / "nope")
        os.fstat(base)  # the caller's descriptor stays open
    finally:
        os.close(base)


def test_the_ozone_volume_walk_follows_no_linked_cluster_directory(tmp_path):
    pytest.importorskip("rocksdict")
    from merkle.replica.ozone.layout import find_volumes

    out = tmp_path / "cluster"
    generate_cluster(
        out,
        GeneratorConfig(
            **{
                **SMALL,
                "containers": 1,
                "replicas": 1,
                "datanodes": 1,
                "volumes": 1,
                "layout": "ozone",
            }
        ),
    )
    ((volume, _),) = find_volumes(out / "dn0" / "vol0")
    assert volume.replicas()
    current = volume.id_dir / "current"
    moved = tmp_path / "moved-current"
    shutil.move(os.fspath(current), moved)
    current.symlink_to(moved)
    assert volume.replicas() == []  # a linked current/ is never followed


# ---- generate -------------------------------------------------------------------------------


class _FakeGenerated(CrcmerkleLayout):
    """A layout generated through a staging directory, with one fault of its own."""

    name = "fakegen"
    title = "FakeGen"
    fault_types = ("fake-fault",)
    generated_in_place = False
    records_mount_paths = False

    def __init__(self, refuse: str = "") -> None:
        self.refuse = refuse
        self.finished: List[Tuple[Path, Path, Dict[str, int]]] = []

    def recognises(self, root: str) -> bool:
        return False

    def check_can_generate(self) -> None:
        if self.refuse:
            raise GeneratorError(self.refuse)

    def finish_generation(
        self, staging: Path, out: Path, manifest: Dict[str, Any], cfg: Any, faults: Dict[str, int]
    ) -> Dict[str, Any]:
        self.finished.append((staging, out, dict(faults)))
        for entry in os.listdir(staging):
            os.rename(staging / entry, out / entry)
        os.rmdir(staging)
        return dict(manifest, layout=self.name)


@pytest.fixture
def fakegen() -> Iterator[Any]:
    made: List[str] = []

    def make(refuse: str = "") -> _FakeGenerated:
        layout = _FakeGenerated(refuse)
        registry.register(layout)
        made.append(layout.name)
        return layout

    yield make
    for name in made:
        registry.unregister(name)


def test_generate_asks_the_named_layout(tmp_path, fakegen):
    layout = fakegen()
    faults = parse_faults("bitflip,fake-fault=2", "fakegen")
    assert faults == {"bitflip": 1, "fake-fault": 2}
    assert "fake-fault" in parse_faults("default", "fakegen")
    with pytest.raises(GeneratorError, match=r"'fake-fault' \(an fakegen-layout fault\)"):
        parse_faults("fake-fault", "crcmerkle")
    out = tmp_path / "out"
    manifest = generate_cluster(
        out, GeneratorConfig(**{**SMALL, "layout": "fakegen", "faults": faults})
    )
    ((staging, where, own),) = layout.finished
    assert where == out and staging != out and own == {"fake-fault": 2}
    assert manifest["layout"] == "fakegen" and not staging.exists()
    assert sorted((out).glob("dn*/vol*/*"))


def test_generate_stops_when_the_layout_cannot_generate(tmp_path, fakegen):
    fakegen(refuse="the fake layout needs its extra")
    with pytest.raises(GeneratorError, match="the fake layout needs its extra"):
        generate_cluster(tmp_path / "out", GeneratorConfig(**{**SMALL, "layout": "fakegen"}))
    assert not (tmp_path / "out").exists()


def test_mount_paths_only_where_a_layout_records_them(tmp_path, fakegen):
    fakegen()
    with pytest.raises(GeneratorError, match="recorded by the ozone layout only"):
        GeneratorConfig(layout="fakegen", mount_path="/data/disk{volume}").validate()
    with pytest.raises(
        GeneratorError, match="layout must be one of bookkeeper, crcmerkle, fakegen, hdfs, ozone"
    ):
        GeneratorConfig(layout="nonesuch").validate()


# ---- the reconciler's modules ---------------------------------------------------------------

#: what merkle.replica.reconcile exported before the split (public) and what tests import
EXPORTED = {
    "ChunkCopy",
    "LoadedReport",
    "PeerOutcome",
    "Problem",
    "ReconcileResult",
    "ReportJob",
    "check_report_job",
    "datanode_of",
    "jobs_from_report",
    "load_report",
    "load_report_jobs",
    "reconcile",
    "reconcile_round",
    "report_commands",
    "report_jobs",
    "replica_groups",
    "refuse_ozone",
    "SPARK_REPORT_FORMAT",
    "COPY_BUFFER_SIZE",
    "StepHook",
    "PathLike",
    "_Copier",
    "_Peer",
    "_verify",
    "_Verifier",
    "_majority",
    "_rebuilt_tree",
    "_remaining",
    "_selected",
    "_runs",
    "_load_peer",
    "_peer_tree",
    "_report_commands",
    "_check_parts",
}


def test_the_reconciler_is_split_by_job_and_exports_what_it_did():
    assert EXPORTED <= set(dir(rr))
    assert set(rr.__all__) <= set(dir(rr))
    homes = {
        "planning": ["_selected", "_runs", "_majority", "_rebuilt_tree"],
        "copying": ["_Copier", "_Verifier", "_verify", "COPY_BUFFER_SIZE"],
        "verifying": ["_remaining"],
        "job": ["reconcile", "reconcile_round"],
        "reports": ["load_report", "report_commands", "check_report_job"],
        "peers": ["_Peer", "_load_peer", "datanode_of"],
        "results": ["ReconcileResult", "ChunkCopy", "Problem", "PeerOutcome"],
    }
    for module, names in homes.items():
        mod = importlib.import_module(f"merkle.replica.reconcile.{module}")
        for name in names:
            assert getattr(rr, name) is getattr(mod, name), (module, name)
        with open(mod.__file__, encoding="utf-8") as f:
            assert sum(1 for _ in f) < 600, module


def _imports(path: Path) -> List[str]:
    """Every module `path` imports, at module level or inside a function."""
    import ast

    out: List[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.extend([node.module] + [f"{node.module}.{a.name}" for a in node.names])
    return out


def test_no_job_module_imports_the_ozone_layout_or_branches_on_it():
    root = Path(rr.__file__).resolve().parents[2]
    jobs = [
        *sorted((root / "replica" / "reconcile").glob("*.py")),
        root / "replica" / "generate.py",
        root / "replica" / "replicate.py",
        root / "replica" / "soak.py",
        root / "cli" / "reconcile.py",
        root / "cli" / "generate.py",
        root / "cli" / "replicate.py",
        root / "cli" / "soak.py",
    ]
    for path in jobs:
        assert not [m for m in _imports(path) if m.startswith("merkle.replica.ozone")], path
        text = path.read_text(encoding="utf-8")
        assert '== "ozone"' not in text and "is_ozone" not in text, path


def test_reports_and_plans_ask_the_layouts_who_repairs() -> None:
    """The Spark report and plan tell an owner-repaired replica (Ozone's) from the path a
    scan recorded through the layouts (Layout.recorded_here), and take the owner's commands
    from its layout: a layout registered here is asked, and its commands are used."""
    from merkle.replica.layout import REPAIR_OFFLINE
    from merkle.replica.layouts import owner_repairing, register, unregister
    from spark_udfs.jobs.plan import _owner_steps, copy_commands

    class Owned:
        name = "owned"
        repair = REPAIR_OFFLINE
        owner_copies_note = "the owner copies"

        def recognises(self, root: str) -> bool:
            return False

        def recorded_here(self, path: str) -> bool:
            return "/owned-disk/" in path

        def owner_repair_argv(self, container_id: int) -> List[str]:
            return ["owner", "repair", str(container_id)]

        def owner_leave_argv(self, host: str, maintenance: bool) -> List[str]:
            return ["owner", "maintain" if maintenance else "retire", host]

        def repair_refusal(self, path: str) -> str:
            return "its owner repairs it"

    layout = Owned()
    register(layout, first=True)
    try:
        assert owner_repairing([None, "/x/a/vol0/7"]) is None  # crcmerkle's: no owner
        assert owner_repairing(["/x/a/vol0/7", "/owned-disk/a/7"]) is layout
        assert owner_repairing(["/d/hdds/CID-1/current/containerDir0/7"]).name == "ozone"
        needs = [
            {
                "container": 7,
                "good_copies": 1,
                "need": 1,
                "planned": 0,
                "bytes": 10,
                "sources": [("a", "/owned-disk/a/7", True)],
                "holders": {"a"},
            }
        ]
        (cmd,) = copy_commands(needs, ["b"], {"b": ["/owned-disk/b"]})
        assert cmd["by"] == "owned" and "argv" not in cmd and cmd["target_replica"] is None
        from spark_udfs.cluster.hosts import HostIndex

        # the command names the host, never the datanode's identity; none without a host
        idx = HostIndex(hosts={"a": "ha.example", "b": None})
        steps = _owner_steps(
            layout, {"a": "DECOMMISSIONING", "b": "ENTERING_MAINTENANCE"}, [7], idx
        )
        assert steps == {
            "note": "the owner copies",
            "reconcile_first": [{"containerID": 7, "argv": ["owner", "repair", "7"]}],
            "datanodes": [
                {"datanode": "a", "host": "ha.example", "argv": ["owner", "retire", "ha.example"]},
                {"datanode": "b", "host": None},
            ],
        }
    finally:
        unregister(layout.name)
    assert owner_repairing(["/owned-disk/a/7"]) is None
