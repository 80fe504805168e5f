"""The package layout is an API too: the public names stay reachable from the package roots, and
the layers only import downwards (core <- trees <- replica <- cli), checked from the import graph
of the source files (every import statement, at module level or inside a function)."""

from __future__ import annotations

import ast
import itertools
import os
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest

import merkle
import spark_udfs

ROOT = Path(merkle.__file__).resolve().parent.parent
#: the directory holding tests/ (the checkout; in the wheel suite, the suite's copy): where
#: `tests.layouts.flat` is imported from
TESTS_PARENT = Path(__file__).resolve().parent.parent

# What the docs show and earlier releases exported: a later move may add names, never drop one.
MERKLE_PUBLIC = {
    "BackendUnavailableError",
    "BlockMetaError",
    "CRC32",
    "CRC32C",
    "ContainerIDMismatchError",
    "ContainerTree",
    "ContainerWriter",
    "DiffReport",
    "GIL_RELEASE_THRESHOLD",
    "ReconcileResult",
    "ReplicaError",
    "ReplicaLockedError",
    "ReplicaReport",
    "ScanError",
    "ScanResult",
    "TreeBuilder",
    "TreeFileError",
    "available_backends",
    "backend",
    "checksum_each",
    "checksum_windows",
    "combine_many",
    "compare_replicas",
    "compiled_backends",
    "crc32",
    "crc32_combine",
    "crc32c",
    "crc32c_combine",
    "diff",
    "full_object_crc",
    "generate_cluster",
    "merge",
    "ozone",
    "read_tree",
    "reconcile",
    "reconcile_round",
    "scan_container",
    "set_backend",
    "using_backend",
    "write_tree",
}
SPARK_PUBLIC = {
    "block_value_udf",
    "build_report",
    "checksum_udf",
    "container_value_udf",
    "crc32_udf",
    "crc32c_udf",
    "diff_chunks",
    "diff_scan",
    "format_text",
    "get_session",
    "leaf_udf",
    "map_in_arrow_checksum",
    "register",
    "repair_plan",
    "scan_replicas",
    "window_checksums_udf",
}


@pytest.mark.parametrize(
    "package, names",
    [(merkle, MERKLE_PUBLIC), (spark_udfs, SPARK_PUBLIC)],
    ids=["merkle", "spark_udfs"],
)
def test_public_names_are_kept_and_resolve(package, names):
    missing = names - set(package.__all__)
    assert not missing, f"{package.__name__}.__all__ lost {sorted(missing)}"
    for name in package.__all__:
        assert getattr(package, name) is not None, name


def test_readme_imports_work():
    from merkle import ozone  # noqa: F401  (the documented form: docs/formats/ozone.md)

    assert merkle.read_tree is merkle.trees.treefile.read_tree
    assert callable(ozone.leaf_checksum)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[str]:
    """Every module an import statement in `path` names (relative imports resolved)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from merkle import cli` names the module merkle.cli
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _graph() -> Dict[str, Set[str]]:
    graph = {}
    for package in ("merkle", "spark_udfs"):
        for path in sorted((ROOT / package).rglob("*.py")):
            graph[_module_name(path)] = set(_imports(path))
    return graph


def _layer_of(name: str) -> str:
    for prefix in ("merkle.trees", "merkle.replica", "merkle.cli"):
        if name == prefix or name.startswith(prefix + "."):
            return prefix
    if name == "spark_udfs" or name.startswith("spark_udfs."):
        return "spark_udfs"
    return "other"


# What each layer must never import (the root `merkle` package re-exports every layer, so a
# lower layer importing it, other than its native core, would import the layers above).
FORBIDDEN = {
    "merkle.trees": ("merkle.replica", "merkle.cli", "spark_udfs", "merkle"),
    "merkle.replica": ("merkle.cli", "spark_udfs", "merkle"),
}
ALLOWED_FROM_ROOT = {"merkle._native", "merkle._crc", "merkle.__version__"}


def _violates(target: str, forbidden: str) -> bool:
    if target in ALLOWED_FROM_ROOT or target.startswith(("merkle._native", "merkle._crc")):
        return False
    if forbidden == "merkle":  # the bare root package (or a name imported from it)
        return target == "merkle" or (
            target.startswith("merkle.")
            and _layer_of(target) == "other"
            and target.count(".") == 1
            and not target.startswith("merkle._")
        )
    return target == forbidden or target.startswith(forbidden + ".")


def test_layers_only_import_downwards():
    graph = _graph()
    assert len([m for m in graph if _layer_of(m) == "merkle.trees"]) >= 5
    assert len([m for m in graph if _layer_of(m) == "merkle.replica"]) >= 10
    bad = []
    for module, targets in graph.items():
        for forbidden in FORBIDDEN.get(_layer_of(module), ()):
            bad += [
                f"{module} imports {t}"
                for t in sorted(targets)
                if _violates(t, forbidden) and _layer_of(t) != _layer_of(module)
            ]
    assert not bad, "\n".join(bad)


def test_the_layering_check_can_fail():
    """The check above must see a violation when there is one (a test that cannot fail proves
    nothing): a trees module importing the replica layer, or the root package."""
    assert _violates("merkle.replica.scan", "merkle.replica")
    assert _violates("merkle.cli", "merkle.cli")
    assert _violates("merkle", "merkle")
    assert _violates("merkle.ContainerTree", "merkle")
    assert not _violates("merkle._native", "merkle")
    assert not _violates("merkle.trees.model", "merkle")


def test_model_does_not_import_the_file_format():
    graph = _graph()
    assert not any(t.startswith("merkle.trees.treefile") for t in graph["merkle.trees.model"])
    assert (
        "merkle.trees.model"
        in {t.rpartition(".")[0] for t in graph["merkle.trees.treefile"]}
        | graph["merkle.trees.treefile"]
    )


# ---- issue 24: the replica-layout interface ------------------------------------------------


def _cluster(root: Path, layout: str, containers: int = 2) -> Path:
    from merkle.replica.generate import GeneratorConfig, generate_cluster

    generate_cluster(root, GeneratorConfig(containers=containers, layout=layout))
    return root


def test_crcmerkle_layout_reads_through_the_interface(tmp_path: Path) -> None:
    from merkle.replica.crcmerkle.layout import find_containers
    from merkle.replica.files import LocalReplicaFiles
    from merkle.replica.layouts import layout_of

    root = _cluster(tmp_path / "c", "crcmerkle")
    layout = layout_of(str(root))
    assert layout.name == "crcmerkle" and layout.recognises(str(root))
    volumes = layout.volumes(str(root))
    refs = [r for v in volumes for r in layout.replicas(v)]
    assert sorted(r.path for r in refs) == sorted(str(loc.root) for loc in find_containers(root))
    assert {v.datanode for v in volumes} == {p.name for p in root.glob("dn*")}
    assert all(v.datanode_uuid is None and v.problem is None for v in volumes)
    files = layout.open_files(refs[0])
    assert isinstance(files, LocalReplicaFiles) and files.container_id == refs[0].container
    assert all(layout.data_bytes(r) > 0 for r in refs)
    scanned = list(layout.scan(refs))
    assert [r for r, _, _ in scanned] == refs
    assert all(exc is None and res.ok and res.bytes_read for _, res, exc in scanned)
    # one replica named directly: its volume, with the replica as where to look
    one = layout.volumes(refs[0].path)
    assert [r.path for v in one for r in layout.replicas(v)] == [refs[0].path]
    assert one[0].inner == refs[0].path
    # a URI is this layout's (read through pyarrow.fs), never Ozone's
    uri = "file://" + str(root)
    assert layout_of(uri).name == "crcmerkle"
    assert len([r for v in layout.volumes(uri) for r in layout.replicas(v)]) == len(refs)


def test_ozone_layout_reads_through_the_interface(tmp_path: Path) -> None:
    pytest.importorskip("rocksdict")
    pytest.importorskip("yaml")
    from merkle.replica.layouts import layout_named, layout_of
    from merkle.replica.ozone.layout import find_volumes, read_version, replicas_under

    root = _cluster(tmp_path / "o", "ozone")
    layout = layout_of(str(root))
    assert layout.name == "ozone" and not layout.recognises("file://" + str(root))
    assert not layout_named("ozone").recognises(str(tmp_path / "missing"))
    volumes = layout.volumes(str(root))
    want = [(v, inner) for v, inner in find_volumes(root)]
    assert [v.root for v in volumes] == [str(v.root) for v, _ in want]
    for v, (ov, inner) in zip(volumes, want):
        props = read_version(ov.root / "hdds" / "VERSION")
        assert v.datanode_uuid == props["datanodeUuid"] and v.cluster_id == props["clusterID"]
        # a datanode is its identity, never the directory above its volume
        assert v.datanode == props["datanodeUuid"] and v.problem is None
        assert [r.path for r in layout.replicas(v)] == [
            str(r.root) for r in replicas_under(ov, inner)
        ]
    refs = [r for v in volumes for r in layout.replicas(v)]
    assert refs and layout.data_bytes(refs[0]) is None
    files = layout.open_files(refs[0])
    try:
        assert files.load_meta().container_id == refs[0].container
    finally:
        files.close()
    scanned = list(layout.scan(refs))
    assert all(exc is None and res.ok for _, res, exc in scanned), scanned
    trees = list(layout.scan(refs, trees_only=True))
    assert all(
        res.tree.data_checksum == full.tree.data_checksum
        for (_, res, _), (_, full, _) in zip(trees, scanned)
    )
    # the same replica directory reached twice in one job is scanned once
    seen: dict = {}
    again = list(layout.scan(refs[:1] * 2, seen=seen))
    assert again[0][2] is not None and "same device and inode" in str(again[0][2])
    assert again[1][2] is None and again[1][1].ok


# ---- a third layout, known to no file outside tests/layouts/flat.py -------------------------


def flat_cluster(root: Path, containers: int = 2) -> Tuple[Path, Path, int]:
    """A clean generated cluster rewritten in the flat test layout (tests/layouts/flat.py),
    then one byte of one block file of dn0 flipped: (root, the damaged replica, its block)."""
    import shutil

    from merkle.replica.crcmerkle.layout import find_containers

    from replica_helpers import make_cluster

    source = root.parent / (root.name + "-crcmerkle")
    make_cluster(source, containers=containers, layout="crcmerkle")
    for loc in find_containers(source):
        cid = loc.container_id
        dest = root / loc.volume.parent.name / f"{cid}.replica"
        dest.mkdir(parents=True)
        shutil.copy(loc.paths.blockmeta, dest / "blocks")
        shutil.copy(loc.paths.tree, dest / "tree")
        for block in loc.paths.chunks_dir.glob("*.block"):
            shutil.copy(block, dest / (block.name[: -len(".block")] + ".data"))
    damaged = sorted((root / "dn0").glob("*.replica"))[0]
    data = sorted(damaged.glob("*.data"))[0]
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    return root, damaged, int(data.name[: -len(".data")])


@pytest.fixture
def flat_layout(monkeypatch: Any) -> Iterator[Any]:
    """The flat test layout, registered before the shipped ones for one test."""
    from merkle.replica.layouts import register, unregister

    monkeypatch.syspath_prepend(str(TESTS_PARENT))
    from tests.layouts.flat import LAYOUT

    register(LAYOUT, first=True)
    try:
        yield LAYOUT
    finally:
        unregister(LAYOUT.name)


def test_a_third_layout_is_scanned_by_scan_paths(tmp_path: Path, flat_layout: Any) -> None:
    from merkle.replica.layouts import layout_of
    from merkle.replica.scan import CORRUPT_CHUNK, scan_paths

    root, damaged, block = flat_cluster(tmp_path / "flat")
    assert layout_of(str(root)) is flat_layout
    results = {r.path: r for r in scan_paths([root])}
    assert len(results) == 2 * 3 and str(damaged) in results
    bad = results.pop(str(damaged))
    assert [(e.kind, e.block_id) for e in bad.errors] == [(CORRUPT_CHUNK, block)]
    assert all(r.ok and not r.errors and r.bytes_read for r in results.values())
    assert not any(r.tree_written for r in results.values())  # read-only: REPAIR_NONE
    # one replica, named directly
    (r,) = scan_paths([damaged])
    assert r.path == str(damaged) and not r.ok


def _members(role: Any) -> Set[str]:
    return {n for n in vars(role) if not n.startswith("_")} | set(role.__annotations__)


def test_every_layout_has_every_member_of_the_reading_role(flat_layout: Any) -> None:
    """merkle.replica.layout.Layout (the reading role, ReplicaReader) is what every layout
    provides (mypy checks the registry against it): the shipped layouts and a read-only test
    layout lack none of its names."""
    from merkle.replica.layout import Layout, ReplicaReader
    from merkle.replica.layouts import layouts

    assert Layout is ReplicaReader
    members = _members(Layout)
    assert {"scan", "recorded_here", "datanode_of", "cluster_of", "title"} <= members
    assert flat_layout in layouts()  # registered by the fixture: a reader only
    for layout in layouts():
        assert sorted(m for m in members if not hasattr(layout, m)) == [], layout.name


#: the roles each shipped layout implements, besides reading (issue 38)
SHIPPED_ROLES = {
    "bookkeeper": set(),
    "crcmerkle": {"GeneratedLayout", "RepairableLayout"},
    "ozone": {"GeneratedLayout", "OwnerCommands", "RepairableLayout"},
}


def test_each_shipped_layout_implements_its_roles_and_no_other() -> None:
    """Split by role: BookKeeper's layout reads only; crcmerkle's reads, is generated and
    repaired; Ozone's reads, is generated, repaired offline and has owner commands. Nothing of
    one system (an OM DB) is in a shared role."""
    from merkle.replica import layout as lay
    from merkle.replica.layouts import layout_named

    roles = (lay.OwnerCommands, lay.GeneratedLayout, lay.RepairableLayout)
    for name, want in SHIPPED_ROLES.items():
        layout = layout_named(name)
        assert isinstance(layout, lay.ReplicaReader), name
        assert {r.__name__ for r in roles if isinstance(layout, r)} == want, name
        for role in roles:  # a role it has, it has whole; one it lacks, it has nothing of
            has = {m for m in _members(role) - {"name"} if hasattr(layout, m)}
            assert has == (_members(role) - {"name"} if role.__name__ in want else set()), (
                name,
                role.__name__,
            )
    shared = set().union(*map(_members, (lay.ReplicaReader, *roles)))
    assert not [m for m in shared if "om_db" in m or "key_bytes" in m]
    assert not hasattr(lay, "ReadOnlyLayout")


def test_a_read_only_layout_asked_for_a_role_refuses_in_one_line(flat_layout: Any) -> None:
    from merkle.replica import layout as lay
    from merkle.replica.errors import ReplicaError
    from merkle.replica.layouts import layout_named

    read_only = (
        "bookkeeper-layout replicas are read-only here: crcmerkle scans and compares them, "
        "but does not write or repair them"
    )
    bookkeeper = layout_named("bookkeeper")
    with pytest.raises(ReplicaError) as got:
        lay.repairer_of(bookkeeper, "/b/current")
    assert str(got.value) == "/b/current: " + read_only
    with pytest.raises(ReplicaError, match="^bookies are generated by 'crcmerkle generate"):
        lay.generator_of(bookkeeper)  # what writes bookies instead, in one line
    with pytest.raises(ReplicaError) as got:
        lay.owner_of(bookkeeper)
    assert str(got.value) == f"no owner command repairs bookkeeper-layout replicas ({read_only})"
    with pytest.raises(ReplicaError, match="not by an owner command"):
        lay.owner_of(layout_named("crcmerkle"))
    assert lay.repair_refusal(bookkeeper, "/b") == read_only
    for error in (lay.repairer_of, lay.generator_of, lay.owner_of):
        with pytest.raises(ReplicaError) as got:
            error(flat_layout)
        assert "\n" not in str(got.value) and "flat-layout replicas are read-only" in str(got.value)
    with pytest.raises(ReplicaError) as got:
        lay.generator_of(flat_layout)
    assert str(got.value) == (
        "the generator does not write the flat layout (flat-layout replicas are read-only "
        "here: crcmerkle scans and compares them, but does not write or repair them)"
    )
    assert lay.owner_of(layout_named("ozone")) is layout_named("ozone")
    assert lay.generator_of(layout_named("crcmerkle")) is layout_named("crcmerkle")


def test_a_third_layout_is_scanned_by_the_cli(tmp_path: Path) -> None:
    """`crcmerkle scan` in a child process that registers the layout (the test's own entry:
    no plugin hook, no change to any file outside tests/)."""
    import json
    import subprocess
    import sys

    root, damaged, block = flat_cluster(tmp_path / "flat")
    entry = (
        "import sys; from merkle.replica.layouts import register; "
        "from tests.layouts.flat import LAYOUT; register(LAYOUT, first=True); "
        "from merkle.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", entry, "scan", "--json", str(root)],
        cwd=TESTS_PARENT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(TESTS_PARENT)},
    )
    assert run.returncode == 1, run.stderr
    out = json.loads(run.stdout)
    assert out["summary"]["replicas"] == 6 and out["failed"] == []
    bad = [r for r in out["replicas"] if not r["ok"]]
    assert [(r["path"], [(e["error"], e["block_id"]) for e in r["errors"]]) for r in bad] == [
        (str(damaged), [("CORRUPT_CHUNK", block)])
    ]


def test_a_third_layout_meets_every_writing_job_with_a_one_line_refusal(
    tmp_path: Path, flat_layout: Any, capsys: Any
) -> None:
    """A read-only layout (the reading role only): reconcile (one
    replica, --all, --offline), replicate (from it, into it) and generate each refuse in one
    line with exit 2; nothing is written."""
    from merkle.cli import main

    root, damaged, _ = flat_cluster(tmp_path / "flat")
    peer = root / "dn1" / damaged.name
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    runs = [
        ["reconcile", str(damaged), str(peer)],
        ["reconcile", "--all", str(root)],
        ["reconcile", "--offline", str(damaged), str(peer)],
        ["replicate", str(peer), str(tmp_path / "vol" / damaged.name)],
        ["replicate", str(peer), str(root / "dn9" / damaged.name)],
        ["generate", "--layout", "flat", str(tmp_path / "gen")],
    ]
    for argv in runs:
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusal
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and "unexpected" not in err, (argv, err)
        assert "read-only" in err or "invalid choice: 'flat'" in err, (argv, err)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "vol").exists() and not (root / "dn9").exists()
    assert not (tmp_path / "gen").exists()


# ---- issue 24: the import graph has no circle, and the layers hold --------------------------

#: the layers, lowest first; a module belongs to the layer of its longest matching prefix (a
#: package and its modules; with a trailing `*`, every module whose name starts so: the write
#: side may split a job into modules such as reconcile_plan)
LAYERS: List[Tuple[str, ...]] = [
    ("merkle._native", "merkle._crc"),
    ("merkle.trees",),
    # the replica core: what every layout and job shares, knowing no layout
    (
        "merkle.replica",
        "merkle.replica.errors",
        "merkle.replica.safeopen",
        "merkle.replica.fileio",
        "merkle.replica.levels",
        "merkle.replica.protokeep",
        "merkle.replica.layout",
        "merkle.replica.blocks",
        "merkle.replica.results",
        "merkle.replica.uri",
        "merkle.replica.rocksdb",
        # the scan state's database (knows no layout): the scans above use it, and so does
        # a layout whose unit of progress is its own (BookKeeper's entry logs)
        "merkle.replica.scanstate",
        "merkle.messages",
    ),
    # a container replica as a directory of block files, and its readers, verifier and lock:
    # the shape crcmerkle's layout and Ozone's container directories share, knowing neither
    (
        "merkle.replica.replicadir",
        "merkle.replica.files",
        "merkle.replica.verify",
        "merkle.replica.lock",
    ),
    # the layout packages (and Ozone's OM DB format: read by the copy check, written by the
    # ozone layout's generator, `generate --om-db`, merkle.replica.ozone.omkeys)
    (
        "merkle.replica.crcmerkle",
        "merkle.replica.ozone",
        "merkle.replica.bookkeeper",
        "merkle.replica.hdfs",
        "merkle.copies.om_pb2",
        "merkle.copies.omdb",
    ),
    ("merkle.replica.layouts",),  # the registry
    (
        "merkle.replica.scan*",
        "merkle.replica.incremental*",
        "merkle.replica.reconcile*",
        "merkle.replica.replicate*",
        "merkle.replica.generate*",
        "merkle.replica.soak*",
        "merkle.replica.commandlist*",
    ),
    ("merkle",),  # the package facade
    ("spark_udfs",),
    ("merkle.cli", "merkle.__main__", "spark_udfs.cli", "spark_udfs.__main__"),
]
_LAYOUT_PACKAGES = (
    "merkle.replica.crcmerkle",
    "merkle.replica.ozone",
    "merkle.replica.bookkeeper",
    "merkle.replica.hdfs",
)

#: a layout package importing the other one, and why it may
LAYOUT_TO_LAYOUT = {
    "merkle.replica.ozone.offline": "an Ozone container directory has crcmerkle's shape",
    "merkle.replica.ozone.generate": "converts a generated crcmerkle cluster",
}


def _module_graph() -> Dict[str, Set[str]]:
    """Module -> the modules of merkle/ and spark_udfs/ it imports (`from pkg import name`
    resolved to the module that defines `name`; merkle._native, the compiled core, is a
    module; the implicit import of a module's parent packages is not an edge)."""
    raw = _graph()
    known = set(raw) | {"merkle._native", "merkle._crc"}

    def resolve(name: str) -> Optional[str]:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: Dict[str, Set[str]] = {"merkle._native": set(), "merkle._crc": set()}
    for module, targets in raw.items():
        graph[module] = {t for t in map(resolve, targets) if t is not None and t != module}
    return graph


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The import circles: strongly connected components of more than one module."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _matches(module: str, prefix: str) -> bool:
    if prefix.endswith("*"):
        return module.startswith(prefix[:-1])
    return module == prefix or module.startswith(prefix + ".")


def _layer(module: str) -> int:
    best, layer = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if _matches(module, p) and len(p) > best:
                best, layer = len(p), i
    return layer


def _upward(graph: Dict[str, Set[str]]) -> Set[Tuple[str, str]]:
    return {(m, t) for m, ts in graph.items() for t in ts if _layer(t) > _layer(m)}


#: the registry: it registers the shipped layouts, and is how everything else finds them
_REGISTRY = "merkle.replica.layouts"


def _system_of(module: str) -> Optional[str]:
    """The layout package a module outside the layout packages is named for (a front end of
    one system: merkle.cli.bookkeeper, spark_udfs.jobs.bookkeeper), else None."""
    parts = module.split(".")
    for package in _LAYOUT_PACKAGES:
        if package.rsplit(".", 1)[1] in parts:
            return package
    return None


def _into_layouts(graph: Dict[str, Set[str]]) -> Set[Tuple[str, str]]:
    """Imports of a layout package's modules by a module outside them: none but the
    registry's and those of one system's front end into that system's package."""
    return {
        (m, t)
        for m, ts in graph.items()
        if not m.startswith(_LAYOUT_PACKAGES) and m != _REGISTRY
        for t in ts
        if t.startswith(_LAYOUT_PACKAGES)
        and not (_system_of(m) is not None and t.startswith(_system_of(m) + "."))  # type: ignore[operator]
    }


def test_every_module_has_a_layer() -> None:
    graph = _module_graph()
    assert len(graph) > 60
    assert not [m for m in graph if _layer(m) < 0]


def test_no_import_circle() -> None:
    graph = _module_graph()
    assert _cycles(graph) == [], "import circles"


def test_lower_layers_never_import_higher_ones() -> None:
    upward = _upward(_module_graph())
    assert sorted(upward) == []


def test_nothing_neutral_imports_a_layout() -> None:
    """No module outside the layout packages imports one (the jobs, the verifier, the
    generator, the CLI and spark_udfs reach a layout through the registry), with no named
    exceptions: only a module named for one system, its front end, imports that system's."""
    graph = _module_graph()
    assert sorted(_into_layouts(graph)) == []
    for module in ("merkle.replica.scan", "spark_udfs.jobs.scan", "merkle.cli.scan"):
        assert _REGISTRY in graph[module], module


def test_a_layout_package_does_not_import_the_other() -> None:
    graph = _module_graph()
    crossing = sorted(
        (m, t)
        for m, ts in graph.items()
        for t in ts
        for a, b in itertools.permutations(_LAYOUT_PACKAGES, 2)
        if m.startswith(a + ".") and t.startswith(b + ".")
    )
    assert [(m, t) for m, t in crossing if m not in LAYOUT_TO_LAYOUT] == []


def test_the_graph_checks_can_fail() -> None:
    """Each check sees a violation when there is one (a test that cannot fail proves
    nothing)."""
    circle = {
        "merkle.replica.scan": {"merkle.replica.ozone.scan"},
        "merkle.replica.ozone.scan": {"merkle.replica.verify"},
        "merkle.replica.verify": {"merkle.replica.scan"},
        "merkle.trees.model": set(),
    }
    assert _cycles(circle) == [sorted(circle)[:3]]
    assert _upward(circle) == {("merkle.replica.verify", "merkle.replica.scan")}
    assert _into_layouts(circle) == {("merkle.replica.scan", "merkle.replica.ozone.scan")}
    # a front end reaches its own system's package, never another's
    fronts = {
        "merkle.cli.bookkeeper": {"merkle.replica.bookkeeper.scan", "merkle.replica.ozone.rocks"}
    }
    assert _into_layouts(fronts) == {("merkle.cli.bookkeeper", "merkle.replica.ozone.rocks")}
    assert _layer("merkle.replica.layouts") > _layer("merkle.replica.ozone.interface")
    assert _layer("merkle.cli.scan") > _layer("spark_udfs.jobs.scan") > _layer("merkle")
    assert _layer("merkle.replica.reconcile_plan") == _layer("merkle.replica.scan")
    assert _layer("merkle.replica.scanner") == _layer("merkle.replica.scan")


#: spark_udfs's own top-level modules: the facade, `python -m spark_udfs`, the import-path
#: guard the worker daemon runs first, the column functions and their kernels (the package's
#: namesake) and the URI and filesystem helpers every part uses. A new job, cluster-side
#: module, table or verb goes into its subpackage (each package docstring says what it holds).
SPARK_TOP = {"__init__", "__main__", "_syspath", "kernels", "udfs", "uri"}
SPARK_SUBPACKAGES = {"cli", "cluster", "demo", "jobs", "rehearsal", "tables"}


def test_spark_udfs_keeps_its_parts_in_subpackages() -> None:
    top = ROOT / "spark_udfs"
    assert {p.stem for p in top.glob("*.py")} == SPARK_TOP
    assert {p.name for p in top.iterdir() if (p / "__init__.py").is_file()} == SPARK_SUBPACKAGES


def test_each_spark_verb_has_its_module() -> None:
    """`crcmerkle spark VERB` is added by spark_udfs.cli.VERB (`run` by report's module: it
    ends in the report), and nothing below the command line imports spark_udfs.cli."""
    import argparse
    import importlib

    from spark_udfs import cli

    for name in cli.VERB_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).add_parser(sub)
        verb = name.rpartition(".")[2]
        assert set(sub.choices) == {verb} | ({"run"} if verb == "report" else set()), name
    assert _below_the_cli(_module_graph()) == []


def _below_the_cli(graph: Dict[str, Set[str]]) -> List[Tuple[str, str]]:
    """Imports of spark_udfs.cli (or its modules) by a module that is not a command line."""
    above = ("spark_udfs.cli", "spark_udfs.__main__", "merkle.cli")
    return sorted(
        (m, t)
        for m, ts in graph.items()
        if not any(_matches(m, p) for p in above)
        for t in ts
        if _matches(t, "spark_udfs.cli")
    )


def test_the_spark_layout_checks_can_fail() -> None:
    assert _below_the_cli(
        {
            "spark_udfs.jobs.scan": {"spark_udfs.cli.common"},
            "spark_udfs.cli.scan": {"spark_udfs.cli.common"},
        }
    ) == [("spark_udfs.jobs.scan", "spark_udfs.cli.common")]


def _listed_packages(pyproject: str) -> Set[str]:
    """The packages [tool.setuptools] names (a plain list of strings: no TOML reader needed
    on CPython 3.9, where the wheel step runs the whole suite)."""
    block = re.search(r"^packages\s*=\s*\[(.*?)\]", pyproject, re.S | re.M)
    assert block, "pyproject.toml: no [tool.setuptools] packages list"
    return set(re.findall(r'"([^"]+)"', block.group(1)))


#: the checkout (the wheel step runs these tests against an installed wheel: ROOT is then
#: site-packages, and pyproject.toml is the checkout's)
CHECKOUT = Path(__file__).resolve().parents[1]


def _package_dirs() -> Set[str]:
    return {
        ".".join(p.parent.relative_to(CHECKOUT).parts)
        for top in ("merkle", "spark_udfs")
        for p in (CHECKOUT / top).rglob("__init__.py")
    }


def test_the_wheel_lists_every_package() -> None:
    """A package missing from pyproject's list is missing from every installed wheel (only
    the wheel step, near CI's end, would see it); a listed one that is gone fails the build.
    Not in the wheel step's suite (CRCMERKLE_EXPECT_INSTALLED=1: its tests are copied out of
    the checkout), whose every import of an installed package checks the wheel itself."""
    if os.environ.get("CRCMERKLE_EXPECT_INSTALLED") == "1":
        pytest.skip("the checkout's pyproject.toml and sources: not beside an installed wheel")
    listed = _listed_packages((CHECKOUT / "pyproject.toml").read_text())
    assert listed == _package_dirs()
    planted = 'packages = ["merkle",\n  "merkle.cli"]\n'
    assert _listed_packages(planted) == {"merkle", "merkle.cli"} != _package_dirs()
