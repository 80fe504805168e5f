"""The package layout is an API too: the public names stay reachable from the package roots, and
the layers only import downwards (core <- trees <- replica <- cli), checked from the import graph
of the source files (every import statement, at module level or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, Set

import pytest

import merkle
import spark_udfs

ROOT = Path(merkle.__file__).resolve().parent.parent

# What the README shows and earlier releases exported: a later move may add names, never drop one.
MERKLE_PUBLIC = {
    "BackendUnavailableError", "BlockMetaError", "CRC32", "CRC32C", "ContainerIDMismatchError",
    "ContainerTree",
    "ContainerWriter", "DiffReport", "GIL_RELEASE_THRESHOLD", "ReconcileResult", "ReplicaError",
    "ReplicaLockedError", "ReplicaReport", "ScanError", "ScanResult", "TreeBuilder",
    "TreeFileError", "available_backends", "backend", "checksum_each", "checksum_windows",
    "combine_many", "compare_replicas", "compiled_backends", "crc32", "crc32_combine", "crc32c",
    "crc32c_combine", "diff", "generate_cluster", "merge", "ozone", "read_tree", "reconcile",
    "reconcile_round", "scan_container", "set_backend", "using_backend", "write_tree",
}
SPARK_PUBLIC = {
    "block_value_udf", "build_report", "checksum_udf", "container_value_udf", "crc32_udf",
    "crc32c_udf", "diff_chunks", "diff_scan", "format_text", "get_session", "leaf_udf",
    "map_in_arrow_checksum", "register", "repair_plan", "scan_replicas", "window_checksums_udf",
}


@pytest.mark.parametrize("package, names", [(merkle, MERKLE_PUBLIC), (spark_udfs, SPARK_PUBLIC)],
                         ids=["merkle", "spark_udfs"])
def test_public_names_are_kept_and_resolve(package, names):
    missing = names - set(package.__all__)
    assert not missing, f"{package.__name__}.__all__ lost {sorted(missing)}"
    for name in package.__all__:
        assert getattr(package, name) is not None, name


def test_readme_imports_work():
    from merkle import ozone  # noqa: F401  (the README's form)

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
                anchor = anchor[:len(anchor) - (node.level - 1)]
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
ALLOWED_FROM_ROOT = {"merkle._native", "merkle.__version__"}


def _violates(target: str, forbidden: str) -> bool:
    if target in ALLOWED_FROM_ROOT or target.startswith("merkle._native"):
        return False
    if forbidden == "merkle":  # the bare root package (or a name imported from it)
        return target == "merkle" or (target.startswith("merkle.") and _layer_of(target) ==
                                      "other" and target.count(".") == 1 and
                                      not target.startswith("merkle._"))
    return target == forbidden or target.startswith(forbidden + ".")


def test_layers_only_import_downwards():
    graph = _graph()
    assert len([m for m in graph if _layer_of(m) == "merkle.trees"]) >= 5
    assert len([m for m in graph if _layer_of(m) == "merkle.replica"]) >= 10
    bad = []
    for module, targets in graph.items():
        for forbidden in FORBIDDEN.get(_layer_of(module), ()):
            bad += [f"{module} imports {t}" for t in sorted(targets) if _violates(t, forbidden)
                    and _layer_of(t) != _layer_of(module)]
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
    assert "merkle.trees.model" in {t.rpartition(".")[0] for t in graph["merkle.trees.treefile"]} \
        | graph["merkle.trees.treefile"]


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
    from merkle.replica.layouts import layout_of, layout_named
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
        assert v.datanode == ov.root.parent.name and v.problem is None
        assert [r.path for r in layout.replicas(v)] == [str(r.root)
                                                          for r in replicas_under(ov, inner)]
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
    assert all(res.tree.data_checksum == full.tree.data_checksum
               for (_, res, _), (_, full, _) in zip(trees, scanned))
    # the same replica directory reached twice in one job is scanned once
    seen: dict = {}
    again = list(layout.scan(refs[:1] * 2, seen=seen))
    assert again[0][2] is not None and "same device and inode" in str(again[0][2])
    assert again[1][2] is None and again[1][1].ok
