"""The `.container` file of an Ozone replica: `metadata/<containerID>.container`.

A YAML document written by the datanode (SnakeYAML), first line the local tag
`!<KeyValueContainerData>`, fields sorted by name, null fields left out, and a `checksum` field
over the file itself. Ozone computes that checksum by dumping the object with the checksum set
to 64 NUL characters (which SnakeYAML prints as a two-line `!!binary` literal) and taking
hex(SHA-256(SHA-256(dump))). Offline, the same bytes come from the file text with the
`checksum:` line replaced by that placeholder; everything else stays byte for byte. A file whose
recorded checksum differs is an error for that replica (Ozone does not even load it).

SnakeYAML's dump never writes an anchor or an alias, so a `.container` holding one was not
written by a datanode: it is refused before anything is built from it (a few aliases nest
into millions of items, whose repr in a message would exhaust memory). The fields used are
type-checked before any of them is formatted into a message, and values shown are cut short.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping

import yaml

__all__ = [
    "ContainerFile",
    "ContainerFileError",
    "TAG",
    "checksum_of",
    "parse_container_file",
    "render_container_file",
    "SCANNED_STATES",
    "STATES",
]

TAG = "!<KeyValueContainerData>"
#: Ozone's ContainerDataProto.State names
STATES = (
    "OPEN",
    "CLOSING",
    "QUASI_CLOSED",
    "CLOSED",
    "UNHEALTHY",
    "INVALID",
    "DELETED",
    "RECOVERING",
)
#: the states whose data Ozone's scanner verifies (KeyValueContainer.shouldScanData)
SCANNED_STATES = frozenset({"CLOSED", "QUASI_CLOSED", "UNHEALTHY"})

#: SnakeYAML's rendering of the 64-NUL placeholder (base64 of 64 zero bytes, wrapped at 86)
_PLACEHOLDER = "checksum: !!binary |-\n  " + "A" * 86 + "==\n"
_CHECKSUM_LINE = re.compile(r"^checksum: ([^\n]*)\n", re.MULTILINE)
#: a .container file is a few hundred bytes; refuse to parse anything absurdly large
MAX_SIZE = 1 << 20
#: flow collections ([..], {..}) nested deeper than this are refused before YAML reads them: no
#: datanode writes more than two levels, and PyYAML's pure-Python scanner (used when libyaml is
#: missing) is quadratic in the depth (5,000 levels took 45 s of one scan before its
#: RecursionError)
MAX_NESTING = 64
_FLOW_BRACKETS = re.compile(r"[\[\]{}]")


class ContainerFileError(ValueError):
    """Unreadable, foreign or inconsistent `.container` content (the reason as text)."""


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader (libyaml's when PyYAML has it: ~20x faster) that reads Ozone's local tag
    as a plain mapping and nothing else exotic."""


_Loader.add_constructor(
    "KeyValueContainerData", lambda loader, node: loader.construct_mapping(node)
)


@dataclass(frozen=True)
class ContainerFile:
    """The fields crcmerkle uses, plus every field as parsed (`fields`)."""

    container_id: int
    state: str
    layout_version: int
    schema_version: str
    checksum: str
    checksum_ok: bool
    fields: Dict[str, Any]

    @property
    def file_per_block(self) -> bool:
        return self.layout_version == 2


def checksum_of(text: str) -> str:
    """The checksum Ozone computes for the file `text` (its `checksum:` line is ignored)."""
    body = _CHECKSUM_LINE.sub(lambda m: _PLACEHOLDER, text, count=1)
    inner = hashlib.sha256(body.encode("utf-8")).digest()
    return hashlib.sha256(inner).hexdigest()


def parse_container_file(data: bytes) -> ContainerFile:
    """Parse and verify `.container` bytes; ContainerFileError says what is wrong."""
    if len(data) > MAX_SIZE:
        raise ContainerFileError(f"{len(data)} bytes: not a .container file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ContainerFileError("not UTF-8 text") from None
    if not text.startswith(TAG):
        raise ContainerFileError(f"first line is not {TAG}")
    try:
        _refuse_deep_nesting(text)
        _refuse_aliases(text)
        doc = yaml.load(text, Loader=_Loader)  # noqa: S506 (SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ContainerFileError(f"YAML: {_shown(str(exc).splitlines()[0])}") from None
    except RecursionError:  # PyYAML's pure-Python loader on deep nesting (libyaml caps it)
        raise ContainerFileError("YAML nested too deeply") from None
    if not isinstance(doc, dict):
        raise ContainerFileError("not a YAML mapping")
    for key in ("containerID", "layOutVersion", "state", "maxSize"):
        if key not in doc:
            raise ContainerFileError(f"required field {key} is missing")
    cid, layout = doc["containerID"], doc["layOutVersion"]
    if type(cid) is not int or type(layout) is not int or layout not in (1, 2):
        raise ContainerFileError("containerID and layOutVersion (1 or 2) must be integers")
    state = doc["state"]
    if not isinstance(state, str):
        raise ContainerFileError(f"state is a {type(state).__name__}, not a name")
    if state not in STATES:
        raise ContainerFileError(f"unknown state {_shown(state)}")
    db_type = doc.get("containerDBType", "RocksDB")
    if db_type != "RocksDB":
        raise ContainerFileError(f"containerDBType {_shown(db_type)} is not RocksDB")
    schema = doc.get("schemaVersion", "1")
    if type(schema) not in (str, int):
        raise ContainerFileError(f"schemaVersion is a {type(schema).__name__}, not a version")
    recorded = doc.get("checksum")
    recorded = recorded if isinstance(recorded, str) else ""
    return ContainerFile(
        container_id=cid,
        state=state,
        layout_version=layout,
        schema_version=str(schema),
        checksum=recorded,
        checksum_ok=bool(recorded) and recorded == checksum_of(text),
        fields=doc,
    )


def _refuse_deep_nesting(text: str) -> None:
    """ContainerFileError when brackets open more than MAX_NESTING deep. Counted over every
    bracket, quoted or not (a quoted value of 64 unclosed brackets is no datanode's either):
    linear in the file's size, and never more than MAX_SIZE characters."""
    depth = 0
    for m in _FLOW_BRACKETS.finditer(text):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_NESTING:
            raise ContainerFileError(f"YAML nested too deeply (more than {MAX_NESTING} levels)")


def _refuse_aliases(text: str) -> None:
    """ContainerFileError at the first anchor or alias (see the module docstring). Only the
    event stream is read: nothing is built, so this is linear in the file's size."""
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ContainerFileError(
                "YAML anchors and aliases are never written by a datanode (refused unread)"
            )


def _shown(value: Any, limit: int = 80) -> str:
    """A value read from the file for a one-line message: a string or number quoted and cut
    short; any other type by its type name alone (never its repr)."""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return f"<a {type(value).__name__}>"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"
    s = str(value)
    # SnakeYAML quotes strings that would read back as another type (schemaVersion '3')
    if re.fullmatch(r"[-+]?[0-9][0-9_.]*|true|false|null|~|", s):
        return f"'{s}'"
    return s


def render_container_file(fields: Mapping[str, Any]) -> bytes:
    """`.container` bytes as a datanode writes them: the tag, fields sorted by name, null
    fields left out, and the checksum computed over the result."""
    body = {k: v for k, v in fields.items() if v is not None and k != "checksum"}
    body["checksum"] = "0" * 64
    lines = [TAG] + [f"{k}: {_scalar(body[k])}" for k in sorted(body)]
    text = "\n".join(lines) + "\n"
    text = _CHECKSUM_LINE.sub(lambda m: f"checksum: {checksum_of(text)}\n", text, count=1)
    return text.encode("utf-8")
