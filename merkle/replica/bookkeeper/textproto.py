"""A small, bounded reader of the protobuf text format and of the binary wire format.

BookKeeper writes its cookie (`current/VERSION`, layout 5) and v2 ledger metadata in protobuf
text format, and v3 ledger metadata as a length-delimited binary protobuf. The messages are
tiny and flat, so both are read here by hand: no generated code, every length checked against
the bytes actually present (never used to size memory), nesting and field counts bounded.
Anything that does not parse is a TextProtoError (one line), never a traceback.
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Tuple, Union

__all__ = ["MAX_FIELDS", "TextProtoError", "parse_text", "read_varint", "signed64", "wire_fields"]

#: more fields than any honest cookie or ledger metadata holds (a ledger with this many
#: ensemble segments is planted)
MAX_FIELDS = 100_000
_MAX_DEPTH = 4

Value = Union[str, bytes, "TextMessage"]
TextMessage = Dict[str, List[Value]]


class TextProtoError(ValueError):
    """Bytes that are not the protobuf message expected (one line)."""


# ---- text format ---------------------------------------------------------------------------

_TOKEN = re.compile(
    rb"""
    \s+ | \#[^\n]* |
    (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*') |
    (?P<word>[A-Za-z_][A-Za-z0-9_.]*|[-+]?[0-9][0-9A-Za-z_.+-]*|[-+]?inf|nan) |
    (?P<punct>[:{}<>;,\[\]])
""",
    re.X | re.S,
)

_ESCAPES = {
    ord("n"): 10,
    ord("t"): 9,
    ord("r"): 13,
    ord("a"): 7,
    ord("b"): 8,
    ord("f"): 12,
    ord("v"): 11,
    ord("\\"): 92,
    ord("'"): 39,
    ord('"'): 34,
    ord("?"): 63,
}


def _unescape(body: bytes) -> bytes:
    """A text-format string literal's bytes (C escapes, octal, \\x hex)."""
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != 0x5C:
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(body):
            raise TextProtoError("a string ends in a lone backslash")
        c = body[i]
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
            i += 1
        elif c in (ord("x"), ord("X")):
            m = re.match(rb"[0-9A-Fa-f]{1,2}", body[i + 1 :])
            if not m:
                raise TextProtoError("a \\x escape without hex digits")
            out.append(int(m.group(), 16))
            i += 1 + len(m.group())
        elif 0x30 <= c <= 0x37:
            m = re.match(rb"[0-7]{1,3}", body[i:])
            assert m is not None
            out.append(int(m.group(), 8) & 0xFF)
            i += len(m.group())
        else:
            raise TextProtoError(f"unknown string escape \\{chr(c)}")
    return bytes(out)


def _tokens(data: bytes) -> Iterator[Tuple[str, bytes]]:
    pos = 0
    while pos < len(data):
        m = _TOKEN.match(data, pos)
        if m is None:
            raise TextProtoError(f"unexpected character {data[pos : pos + 1]!r} at byte {pos}")
        pos = m.end()
        kind = m.lastgroup
        if kind is not None:
            yield kind, m.group(kind)


def parse_text(data: bytes) -> TextMessage:
    """A text-format message as {field name: [values]}: a scalar is its token as str (an enum
    name, a number), a string literal its bytes, a nested message a dict of the same kind.
    Adjacent string literals are concatenated, as protobuf does."""
    toks = list(_tokens(data))
    if len(toks) > 4 * MAX_FIELDS:
        raise TextProtoError(f"more than {MAX_FIELDS} fields")
    msg, pos = _message(toks, 0, 0, None)
    return msg


def _message(
    toks: List[Tuple[str, bytes]], pos: int, depth: int, close: object
) -> Tuple[TextMessage, int]:
    if depth > _MAX_DEPTH:
        raise TextProtoError("messages nested too deep")
    out: TextMessage = {}
    while pos < len(toks):
        kind, tok = toks[pos]
        if kind == "punct" and tok in (b"}", b">") and close is not None:
            if tok != close:
                raise TextProtoError(f"mismatched {tok.decode()}")
            return out, pos + 1
        if kind == "punct" and tok in (b";", b","):
            pos += 1
            continue
        if kind != "word":
            raise TextProtoError(f"expected a field name, found {tok[:20]!r}")
        name = tok.decode("ascii")
        pos += 1
        if pos < len(toks) and toks[pos] == ("punct", b":"):
            pos += 1
        if pos >= len(toks):
            raise TextProtoError(f"field {name} has no value")
        kind, tok = toks[pos]
        if kind == "punct" and tok in (b"{", b"<"):
            value, pos = _message(toks, pos + 1, depth + 1, b"}" if tok == b"{" else b">")
            out.setdefault(name, []).append(value)
        elif kind == "str":
            raw = bytearray()
            while pos < len(toks) and toks[pos][0] == "str":
                raw += _unescape(toks[pos][1][1:-1])
                pos += 1
            out.setdefault(name, []).append(bytes(raw))
        elif kind == "word":
            out.setdefault(name, []).append(tok.decode("ascii"))
            pos += 1
        else:
            raise TextProtoError(f"field {name}: unexpected {tok[:20]!r}")
    if close is not None:
        raise TextProtoError("a message is not closed")
    return out, pos


# ---- wire format ---------------------------------------------------------------------------


def read_varint(data: bytes, pos: int) -> Tuple[int, int]:
    """(value, next position) of the varint at `pos`; TextProtoError when truncated or longer
    than 10 bytes."""
    value = shift = 0
    for _ in range(10):
        if pos >= len(data):
            raise TextProtoError("a truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise TextProtoError("a varint longer than 10 bytes")


def wire_fields(data: bytes) -> Iterator[Tuple[int, int, Union[int, bytes]]]:
    """(field number, wire type, value) of each field of a binary message: varints and fixed
    ints as unsigned ints, length-delimited fields as bytes (their length checked against the
    bytes present). Groups are refused."""
    pos = 0
    count = 0
    while pos < len(data):
        count += 1
        if count > MAX_FIELDS:
            raise TextProtoError(f"more than {MAX_FIELDS} fields")
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise TextProtoError("field number 0")
        if wire == 0:
            value, pos = read_varint(data, pos)
            yield number, wire, value
        elif wire == 1 or wire == 5:
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                raise TextProtoError("a truncated fixed-width field")
            yield number, wire, int.from_bytes(data[pos : pos + width], "little")
            pos += width
        elif wire == 2:
            length, pos = read_varint(data, pos)
            if length > len(data) - pos:
                raise TextProtoError(
                    f"field {number} claims {length} bytes, {len(data) - pos} remain"
                )
            yield number, wire, bytes(data[pos : pos + length])
            pos += length
        else:
            raise TextProtoError(f"unsupported wire type {wire} (field {number})")


def signed64(value: int) -> int:
    """A varint's unsigned 64-bit value as the int64 it encodes."""
    return value - (1 << 64) if value >= 1 << 63 else value
