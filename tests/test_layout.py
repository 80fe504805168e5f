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
