"""spark_udfs._syspath: an unbuilt checkout in the current directory does not shadow the
installed package (the Spark workers run `python -m` there)."""

from __future__ import annotations

import sys
import types

import pytest

from spark_udfs._syspath import is_unbuilt_checkout, prefer_installed_packages


def _checkout(root, built=("_crc", "_native")):
    """A decoy source tree; `built`: which extensions it holds (False: none)."""
    (root / "merkle").mkdir(parents=True)
    (root / "merkle" / "__init__.py").write_text("raise ImportError('decoy imported')\n")
    for ext in built or ():
        (root / "merkle" / f"{ext}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    return root


def test_is_unbuilt_checkout(tmp_path):
    assert not is_unbuilt_checkout(str(tmp_path))
    assert is_unbuilt_checkout(str(_checkout(tmp_path / "a", built=False)))
    assert not is_unbuilt_checkout(str(_checkout(tmp_path / "b")))
    # built before merkle._crc existed: cannot be imported, so it is unbuilt
    assert is_unbuilt_checkout(str(_checkout(tmp_path / "old", built=("_native",))))
    (tmp_path / "c" / "merkle").mkdir(parents=True)  # a folder named merkle, not a package
    assert not is_unbuilt_checkout(str(tmp_path / "c"))


@pytest.fixture()
def isolated(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))


def test_drops_an_unbuilt_cwd_and_its_modules(tmp_path, monkeypatch, isolated):
    root = _checkout(tmp_path / "clone", built=False)
    monkeypatch.chdir(root)
    sys.path.insert(0, str(root))
    shadow = types.ModuleType("merkle.fake")
    shadow.__file__ = str(root / "merkle" / "fake.py")
    sys.modules["merkle.fake"] = shadow
    real = sys.modules["merkle"]
    assert prefer_installed_packages() is True
    assert str(root) not in sys.path[:1]
    assert "merkle.fake" not in sys.modules  # imported from the checkout: forgotten
    assert sys.modules["merkle"] is real  # imported from elsewhere: kept
    assert prefer_installed_packages() is False  # idempotent


def test_empty_sys_path_entry_means_cwd(tmp_path, monkeypatch, isolated):
    root = _checkout(tmp_path / "clone", built=False)
    monkeypatch.chdir(root)
    sys.path.insert(0, "")  # `python -c` / interactive
    assert prefer_installed_packages() is True and sys.path[0] != ""


@pytest.mark.parametrize("case", ["built", "not first", "not cwd", "no checkout"])
def test_leaves_the_path_alone_otherwise(case, tmp_path, monkeypatch, isolated):
    built = ("_crc", "_native") if case == "built" else False
    root = _checkout(tmp_path / "clone", built=built) if case != "no checkout" else tmp_path
    if case == "not cwd":
        monkeypatch.chdir(tmp_path)
    else:
        monkeypatch.chdir(root)
    if case == "not first":
        sys.path.insert(1, str(root))
    else:
        sys.path.insert(0, str(root))
    before = list(sys.path)
    assert prefer_installed_packages() is False
    assert sys.path == before
