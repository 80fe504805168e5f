"""JSON values read one at a time from a file of any size, in bounded memory: a file may hold
several documents one after another (saved pages, JSON lines) and a top-level array is
walked element by element, so a listing of a billion objects never sits in memory whole.
One value (a page of 1,000 objects is ~2 MB) may take at most `max_value` characters.

A syntax error cannot be resynchronised (where would the next value start?): it ends the
walk with a one-line ValueError naming the character offset; so does a value nested deeper
than the decoder's recursion limit (never a RecursionError).
"""

from __future__ import annotations

import codecs
import json
from typing import Any, BinaryIO, Iterator, Tuple

#: the largest single JSON value (a page, an item) accepted, in characters
MAX_VALUE = 64 << 20
_CHUNK = 1 << 20
_WS = " \t\r\n"


class JsonStream:
    def __init__(self, raw: BinaryIO, max_value: int = MAX_VALUE) -> None:
        self._raw = raw
        # listings are UTF-8; a broken byte becomes U+FFFD rather than ending the walk
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""
        self._pos = 0
        self._base = 0  # characters dropped before _buf, for messages
        self._eof = False
        self._max = max_value
        self._json = json.JSONDecoder()

    def _more(self) -> bool:
        if self._eof:
            return False
        data = self._raw.read(_CHUNK)
        if not data:
            self._eof = True
            self._buf = self._buf[self._pos :] + self._decoder.decode(b"", final=True)
        else:
            self._buf = self._buf[self._pos :] + self._decoder.decode(data)
        self._base += self._pos
        self._pos = 0
        return True

    def _skip_ws(self) -> str:
        """The next non-blank character ('' at the end), not consumed."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in _WS:
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return ""

    def _error(self, what: str) -> ValueError:
        return ValueError(f"malformed JSON at character {self._base + self._pos}: {what}")

    def _value(self) -> Any:
        while True:
            try:
                value, end = self._json.raw_decode(self._buf, self._pos)
            except RecursionError:
                # arrays or objects nested deeper than the decoder's stack (a planted
                # `[[[[...`): no listing nests more than a few levels
                raise self._error("values nested too deep") from None
            except json.JSONDecodeError as exc:
                if len(self._buf) - self._pos > self._max:
                    raise self._error(f"a value longer than {self._max} characters") from None
                if self._more():
                    continue
                raise self._error(exc.msg) from None
            # a number or literal cut by the buffer's end would decode short: read on
            if end == len(self._buf) and not self._eof:
                if len(self._buf) - self._pos > self._max:
                    raise self._error(f"a value longer than {self._max} characters")
                self._more()
                continue
            self._pos = end
            return value

    def values(self) -> Iterator[Tuple[bool, Any]]:
        """(in_array, value) for each top-level value, and for each element of a top-level
        array (in_array True)."""
        while True:
            c = self._skip_ws()
            if not c:
                return
            if c != "[":
                yield False, self._value()
                continue
            self._pos += 1
            if self._skip_ws() == "]":
                self._pos += 1
                continue
            while True:
                if not self._skip_ws():
                    raise self._error("the array is not closed")
                yield True, self._value()
                c = self._skip_ws()
                if c == ",":
                    self._pos += 1
                elif c == "]":
                    self._pos += 1
                    break
                else:
                    raise self._error("expected ',' or ']' after an array element")
