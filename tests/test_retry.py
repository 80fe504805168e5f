"""A failed `generate` or demo can be run again: a failed run removes what it wrote, and a
directory holding only an earlier run of its own (its marker file) is accepted and replaced;
anything else in the directory is refused and left alone."""

from __future__ import annotations

import json

import pytest

from merkle.cli import CLIError, main
from merkle.replica import generate as gen
from merkle.replica.generate import MARKER_NAME, GeneratorError, generate_cluster

SMALL = dict(
    containers=2,
    block_size=48 * 1024,
    chunk_size=16 * 1024,
    bytes_per_checksum=4096,
    min_blocks=2,
    max_blocks=3,
)


def test_rerun_replaces_an_earlier_run(tmp_path, capsys):
    root = tmp_path / "c"
    m1 = generate_cluster(root, seed=1, **SMALL)
    assert (root / MARKER_NAME).is_file()
    m2 = generate_cluster(root, seed=2, **SMALL)  # accepted: only our own earlier run
    assert m2 == json.loads((root / "manifest.json").read_text()) and m1 != m2
    m3 = generate_cluster(root, seed=1, **SMALL)
    assert m3 == m1  # same seed, same cluster, nothing left of the seed-2 run
    # from the CLI: a run that fails (too small for the default faults) leaves the marker
    # only, and the next run goes through
    assert main(["generate", str(root), "--containers", "2", "--layout", "crcmerkle"]) == 2
    assert sorted(p.name for p in root.iterdir()) == [MARKER_NAME]
    assert (
        main(
            [
                "generate",
                str(root),
                "--containers",
                "2",
                "--faults",
                "none",
                "--layout",
                "crcmerkle",
            ]
        )
        == 0
    )


def test_foreign_content_is_refused_and_kept(tmp_path):
    root = tmp_path / "c"
    generate_cluster(root, seed=1, **SMALL)
    (root / "notes.txt").write_text("mine")
    with pytest.raises(GeneratorError, match="not empty"):
        generate_cluster(root, seed=1, **SMALL)
    assert (root / "notes.txt").read_text() == "mine" and (root / "manifest.json").exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "dn0").mkdir()  # looks like ours, but no marker: not ours
    with pytest.raises(GeneratorError):
        generate_cluster(plain, seed=1, **SMALL)
    assert (plain / "dn0").is_dir()


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt])
def test_failed_run_cleans_up_then_rerun_works(tmp_path, monkeypatch, exc):
    def fail(self):
        raise exc

    monkeypatch.setattr(gen._Cluster, "inject", fail)
    new = tmp_path / "new"
    with pytest.raises(type(exc) if isinstance(exc, BaseException) else exc):
        generate_cluster(new, seed=1, **SMALL)
    assert not new.exists()  # it created the directory: it removes it
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(type(exc) if isinstance(exc, BaseException) else exc):
        generate_cluster(empty, seed=1, **SMALL)
    assert sorted(p.name for p in empty.iterdir()) == [MARKER_NAME]  # the user's dir stays
    monkeypatch.undo()
    generate_cluster(new, seed=1, **SMALL)
    generate_cluster(empty, seed=1, **SMALL)
    assert (empty / "manifest.json").exists()


# ---- the demo's directory (no Spark needed) -------------------------------------------------
def test_demo_dir_rules(tmp_path):
    from spark_udfs.cli.demodir import (
        DEMO_MARKER,
        _clean_failed_demo,
        check_demo_dir,
        prepare_demo_dir,
    )

    work = tmp_path / "demo"
    assert prepare_demo_dir(str(work)) is True and (work / DEMO_MARKER).is_file()
    (work / "cluster").mkdir()
    (work / "report.json").write_text("{}")
    check_demo_dir(str(work))  # an earlier demo: accepted
    assert prepare_demo_dir(str(work)) is False
    assert sorted(p.name for p in work.iterdir()) == [DEMO_MARKER]  # replaced
    (work / "scan").mkdir()
    _clean_failed_demo(str(work), created=False)  # a failed run in the user's directory
    assert sorted(p.name for p in work.iterdir()) == [DEMO_MARKER]
    _clean_failed_demo(str(work), created=True)  # a failed run in a directory it created
    assert not work.exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep")
    with pytest.raises(CLIError, match="not empty"):
        check_demo_dir(str(foreign))
    (foreign / DEMO_MARKER).write_text("")
    with pytest.raises(CLIError, match="not empty"):  # a marker does not make it all ours
        prepare_demo_dir(str(foreign))
    assert (foreign / "thesis.tex").read_text() == "keep"
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(CLIError, match="not a directory"):
        check_demo_dir(str(f))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert prepare_demo_dir(str(empty)) is False


def test_demo_refuses_foreign_dir_before_spark(tmp_path, capsys, monkeypatch):
    from spark_udfs.cli import common

    def no_spark(args):
        raise AssertionError("Spark started for a refused directory")

    monkeypatch.setattr(common, "_session", no_spark)  # every verb starts Spark through it
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("")
    assert main(["spark", "demo", "--dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crcmerkle: error: ") and err.count("\n") == 1


def test_rerun_on_the_ozone_layout(tmp_path):
    pytest.importorskip("rocksdict")
    root = tmp_path / "oz"
    m1 = generate_cluster(root, seed=1, layout="ozone", **SMALL)
    m2 = generate_cluster(root, seed=1, layout="ozone", **SMALL)  # replaced, staging included
    assert m1 == m2 and not (root / ".staging").exists()
