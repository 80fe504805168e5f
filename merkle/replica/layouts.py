"""The registry of replica layouts: which layout a path has, and the layout of a name.

The two shipped layouts are registered here (Ozone's first: a path on an Ozone volume is
Ozone's even where crcmerkle's rules would also match it); `register` adds another (a test's,
a program's). Jobs ask `layout_of(path)` / `layout_named(name)` and then speak only the
merkle.replica.layout.Layout interface.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from merkle.replica.layout import (
    REPAIR_OFFLINE,
    GeneratedLayout,
    Layout,
    OwnerCommands,
    RepairableLayout,
)

__all__ = [
    "LayoutError",
    "layout_named",
    "layout_of",
    "layouts",
    "owner_repairing",
    "register",
    "unregister",
]


class LayoutError(ValueError):
    """No layout for a path (and no default registered), or no layout of that name."""


_REGISTERED: Dict[str, Layout] = {}
_DEFAULT: Optional[str] = None


def register(layout: Layout, *, first: bool = False, default: bool = False) -> None:
    """Add `layout` (replacing one of the same name). `first`: asked before the others;
    `default`: the layout of a path no layout recognises."""
    global _REGISTERED, _DEFAULT
    if default:
        _DEFAULT = layout.name
    rest = {n: lay for n, lay in _REGISTERED.items() if n != layout.name}
    _REGISTERED = {layout.name: layout, **rest} if first else {**rest, layout.name: layout}


def unregister(name: str) -> None:
    global _DEFAULT
    _REGISTERED.pop(name, None)
    if _DEFAULT == name:
        _DEFAULT = None


def layouts() -> List[Layout]:
    """The registered layouts, in the order they are asked."""
    return list(_REGISTERED.values())


def layout_named(name: str) -> Layout:
    try:
        return _REGISTERED[name]
    except KeyError:
        raise LayoutError(
            f"no replica layout named {name!r} (known: {', '.join(_REGISTERED)})"
        ) from None


def layout_of(root: str) -> Layout:
    """The first registered layout that recognises `root`, else the default layout (the
    one registered with default=True: it then reports what it cannot find there, as
    "no container replica here")."""
    for layout in _REGISTERED.values():
        if layout.recognises(root):
            return layout
    if _DEFAULT is None:
        raise LayoutError(f"{root}: no replica layout recognises this path")
    return _REGISTERED[_DEFAULT]


def owner_repairing(paths: Iterable[Optional[str]]) -> Optional[OwnerCommands]:
    """The layout whose replicas' owner repairs them in service (REPAIR_OFFLINE: Ozone's
    datanodes reconcile and re-replicate their own) when one of `paths` (replica or volume
    paths as a scan recorded them; None skipped) has its shape (Layout.recorded_here: from
    the string alone), else None: crcmerkle's own commands do the work. Its owner commands
    (OwnerCommands) are what the report or plan gives: a layout without them is never it."""
    owners = [
        layout
        for layout in _REGISTERED.values()
        if layout.repair == REPAIR_OFFLINE and isinstance(layout, OwnerCommands)
    ]
    for path in paths:
        for layout in owners:
            if path and layout.recorded_here(str(path)):
                return layout
    return None


# ---- the shipped layouts: Ozone's first (a path on an Ozone volume is Ozone's even where
# crcmerkle's rules would also match it), then HDFS datanodes and BookKeeper's bookies (both
# read-only; each recognised by its own current/VERSION), crcmerkle's the default
from merkle.replica.bookkeeper.interface import LAYOUT as _BOOKKEEPER  # noqa: E402
from merkle.replica.crcmerkle.interface import LAYOUT as _CRCMERKLE  # noqa: E402
from merkle.replica.hdfs.interface import LAYOUT as _HDFS  # noqa: E402
from merkle.replica.ozone.interface import LAYOUT as _OZONE  # noqa: E402

register(_OZONE)
register(_HDFS)
register(_BOOKKEEPER)
register(_CRCMERKLE, default=True)

# mypy checks each shipped layout against the roles it implements (register checks the
# reading role; tests/test_layout.py checks at run time that each has these and no other):
# BookKeeper's reads only
_ROLES: Tuple[GeneratedLayout, RepairableLayout, GeneratedLayout, RepairableLayout, OwnerCommands]
_ROLES = (_CRCMERKLE, _CRCMERKLE, _OZONE, _OZONE, _OZONE)
