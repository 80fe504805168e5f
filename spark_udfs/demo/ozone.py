"""The demo's one Ozone-only need, in a module named for the system (its front end may import
Ozone's layout package; tests/test_layout.py): the true bytes of a key of a generated
cluster's OM DB (`crcmerkle generate --layout ozone --om-db`). Not part of any layout role:
the shared interface (merkle.replica.layout) knows no OM DB."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

__all__ = ["generated_key_bytes"]


def generated_key_bytes(cluster: Path, key: Dict[str, Any]) -> bytes:
    """The true bytes of `key` (an entry of the generated manifest's `keys`), read from the
    replicas under `cluster` that still hold them (merkle.replica.ozone.omkeys.key_bytes:
    one line, a GeneratorError, when none does)."""
    from merkle.replica.ozone.omkeys import key_bytes

    return key_bytes(cluster, key)
