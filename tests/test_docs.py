"""The documentation site (docs/, mkdocs.yml) and README.md against the code: the tables that
must equal the code are generated or checked here (the findings' levels: tests/test_levels.py).

- docs/reference/cli.md is `tools/gen_cli_docs.py`'s output: every command's real --help;
- the exit-status table of docs/findings.md is the one of merkle.cli (EXIT_*, EXIT_STATUS_HELP);
- README.md stays a few screens long, keeps command 1 where CI reads it, and refers to nothing
  outside the repository.

Like every test of the checkout's own text, these skip in the wheel suite (no checkout)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict

import pytest

import merkle.cli as cli

from checkout import ROOT, checkout_text


def _tool():
    """tools/gen_cli_docs.py, imported from the checkout."""
    import importlib.util

    path = ROOT / "tools" / "gen_cli_docs.py"
    if not path.is_file():
        pytest.skip("tools/ is not beside tests/ (the wheel suite runs without the checkout)")
    spec = importlib.util.spec_from_file_location("gen_cli_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the CLI reference page ------------------------------------------------------------------


def test_the_cli_page_is_every_real_help() -> None:
    page = checkout_text("docs/reference/cli.md")
    if not (3, 10) <= sys.version_info[:2] <= (3, 12):
        pytest.skip(
            "argparse lays help out differently before 3.10 and from 3.13; the page "
            "is generated with the layout of 3.10-3.12"
        )
    expected = _tool().render()
    assert page == expected, "docs/reference/cli.md is stale: run python tools/gen_cli_docs.py"


def test_the_cli_page_has_every_command() -> None:
    page = checkout_text("docs/reference/cli.md")
    commands = [c for c, _ in _tool().helps()]
    assert "crcmerkle spark copycheck" in commands and "crcmerkle tree diff" in commands
    headings = re.findall(r"^## `(crcmerkle[^`]*)`$", page, re.M)
    assert headings == commands


# ---- the exit-status table -------------------------------------------------------------------


def _help_meanings() -> Dict[int, str]:
    """status -> its words in EXIT_STATUS_HELP (continuation lines joined)."""
    meanings: Dict[int, str] = {}
    last = None
    for line in cli.EXIT_STATUS_HELP.splitlines()[1:]:
        m = re.match(r"^  (\d+)\s+(.*)$", line)
        if m:
            last = int(m.group(1))
            meanings[last] = m.group(2)
        elif line.startswith("    ") and last is not None:
            meanings[last] += " " + line.strip()
        else:
            last = None
    return meanings


def test_the_exit_status_table_is_the_code_table() -> None:
    text = checkout_text("docs/findings.md")
    section = text[text.index("## Exit status") :]
    cells = re.findall(r"^\| (\d+) \| ((?:[^|\\]|\\.)+) \|", section, re.M)  # \| is a pipe
    rows = {int(s): m.strip().replace("\\|", "|") for s, m in cells}
    codes = {v for k, v in vars(cli).items() if k.startswith("EXIT_") and isinstance(v, int)}
    assert set(rows) == codes
    helps = _help_meanings()
    assert set(helps) == codes
    for status, meaning in rows.items():
        # the help's words before its first parenthesis or colon begin the table's meaning
        key = re.split(r"[(:]", helps[status])[0].strip()
        assert key and meaning.startswith(key), (status, meaning, helps[status])


# ---- README.md -------------------------------------------------------------------------------


def test_the_readme_fits_on_a_few_screens() -> None:
    readme = checkout_text("README.md")
    assert len(readme.splitlines()) <= 250


def test_the_readme_keeps_command_1_where_ci_reads_it() -> None:
    readme = checkout_text("README.md")
    lines = [ln for ln in readme.splitlines() if ln.startswith("python3 -m venv .venv && ")]
    assert lines[0] == (
        'python3 -m venv .venv && .venv/bin/pip install ".[spark]" && '
        ".venv/bin/crcmerkle spark demo"
    )
    assert "\nbash .ci/fast\n" in readme and "bash .ci/run" in readme


def test_the_readme_refers_to_nothing_outside_the_repository() -> None:
    readme = checkout_text("README.md")
    assert not re.search(r"\bhttps?://", readme)
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert links, "README: no link into the documentation"
    for target in links:
        assert not target.startswith("/") and ".." not in Path(target).parts, target
        assert (ROOT / target).exists(), f"README links to {target}, which is not here"


def test_the_cluster_recipe_is_where_ci_reads_it() -> None:
    """.ci/run's cluster step and bench/spark_cluster_rates.py run the two lines of the
    ```bash block under the page's "Running on a cluster" heading."""
    text = checkout_text("docs/operations/cluster.md")
    section = text[re.search(r"^#+ Running on a cluster$", text, re.M).start() :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [
        ln
        for ln in block.splitlines()
        if ln.startswith(("python -m venv env ", "env/bin/venv-pack "))
    ]
    assert len(lines) == 2, lines


# ---- the site's structure (the CI docs step builds it with --strict; this is the quick check) --


def _nav_pages(node) -> list:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for item in node for p in _nav_pages(item)]


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load(checkout_text("mkdocs.yml"))
    nav = _nav_pages(config["nav"])
    assert len(nav) == len(set(nav)), "a page twice in mkdocs.yml's nav"
    docs = ROOT / "docs"
    pages = {
        p.relative_to(docs).as_posix()
        for p in docs.rglob("*.md")
        if "_incoming" not in p.relative_to(docs).parts
    }
    assert set(nav) == pages


def test_links_between_pages_name_pages_that_exist() -> None:
    checkout_text("mkdocs.yml")
    docs = ROOT / "docs"
    for page in docs.rglob("*.md"):
        if "_incoming" in page.relative_to(docs).parts:
            continue
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", text):
            assert (page.parent / target).resolve().is_file(), (page.name, target)
