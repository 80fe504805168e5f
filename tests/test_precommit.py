"""The lint and type checks as part of the test suite: the pre-commit hooks of
.pre-commit-config.yaml (ruff check and ruff format with pyproject's [tool.ruff], mypy with its
[tool.mypy] on merkle/ and spark_udfs/), so a lint, format or type error fails the fast tier as
it fails a commit.

The hooks are `repo: local` and run the tools of the virtualenv that runs the tests (`pip install
-e ".[dev]"`); without pre-commit, ruff and mypy are run directly. Skipped, with one line, when
the tools are not installed or the tests run outside a checkout (the wheel suite). The
formatter's hook rewrites files, so here the formatter runs as `ruff format --check`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".pre-commit-config.yaml"
PYPROJECT = ROOT / "pyproject.toml"
#: the hooks that check without rewriting anything
CHECK_HOOKS = ("ruff", "mypy")

if not (CONFIG.is_file() and PYPROJECT.is_file() and (ROOT / "merkle").is_dir()):
    pytest.skip("not a checkout: no .pre-commit-config.yaml beside tests/", allow_module_level=True)


def _tool(name: str) -> Optional[str]:
    """The tool beside this interpreter (the venv's), else on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name)


def _env(**extra: str) -> Dict[str, str]:
    """The hooks are language: system: this venv's bin first on PATH."""
    env = dict(os.environ, **extra)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _run(argv: List[str], cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=900
    )


def _need(*names: str) -> List[str]:
    found = [_tool(n) for n in names]
    if not all(found):
        missing = [n for n, f in zip(names, found) if not f]
        pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[dev]')")
    return [f for f in found if f]


def test_the_tree_passes_lint_and_types(tmp_path: Path) -> None:
    """`pre-commit run HOOK --all-files` for ruff and mypy (or the tools directly), and the
    formatter's check."""
    ruff, mypy = _need("ruff", "mypy")
    pre_commit = _tool("pre-commit")
    if pre_commit and (ROOT / ".git").exists() and shutil.which("git"):
        runs = [[pre_commit, "run", hook, "--all-files"] for hook in CHECK_HOOKS]
    else:
        runs = [[ruff, "check", "."], [mypy]]
    runs.append([ruff, "format", "--check", "."])  # the ruff-format hook, without rewriting
    for argv in runs:
        # pre-commit's store in the test's directory, not the user's home
        r = _run(
            argv, PRE_COMMIT_HOME=os.environ.get("PRE_COMMIT_HOME", str(tmp_path / "pre-commit"))
        )
        assert r.returncode == 0, f"{' '.join(argv[1:])} failed:\n{r.stdout}{r.stderr}"


def test_the_checks_catch_a_lint_and_a_type_error(tmp_path: Path) -> None:
    """The project's configuration reports what it must: an unused import, an undefined name,
    an unformatted line and a type error, in a file outside the tree (a check that cannot fail
    proves nothing)."""
    ruff, mypy = _need("ruff", "mypy")
    bad = tmp_path / "bad.py"
    bad.write_text(
        textwrap.dedent("""\
        import os


        def size(n: int) -> str:
            return n + undefined_name
        """)
    )
    r = _run([ruff, "check", "--no-cache", "--config", str(PYPROJECT), str(bad)], cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "F401" in r.stdout and "F821" in r.stdout
    unformatted = tmp_path / "unformatted.py"
    unformatted.write_text("x = {  'a':1 }\n")
    r = _run(
        [ruff, "format", "--check", "--config", str(PYPROJECT), str(unformatted)], cwd=tmp_path
    )
    assert r.returncode == 1 and "would be reformatted" in r.stdout + r.stderr, r.stdout + r.stderr
    bad.write_text("def size(n: int) -> str:\n    return n\n")
    r = _run(
        [mypy, "--config-file", str(PYPROJECT), "--cache-dir", str(tmp_path / "cache"), str(bad)],
        cwd=tmp_path,
    )
    assert r.returncode == 1 and "[return-value]" in r.stdout, r.stdout + r.stderr
