"""How a message line is made safe to print, for every command line and job that prints one
(merkle.cli's verbs, spark_udfs' report and plan): below both, so that neither imports the
other for it."""

from __future__ import annotations

from merkle.replica.uri import redact

__all__ = ["one_line"]


def one_line(text: str) -> str:
    """`text` with control characters escaped (a path may hold a newline): one line; and a
    URI's credentials removed (merkle.replica.uri.redact: a path a user typed may be a URI with
    its secret in it, and a printed line is as public as the error line)."""
    text = redact(text)
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )
