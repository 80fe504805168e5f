"""Opening a saved listing file (gs://...?listing=, hdfs://...?listing=) and reading the
query of a target URI."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO, Dict
from urllib.parse import parse_qsl

from merkle.copies.targets.base import TargetError

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def query_of(uri: str) -> Dict[str, str]:
    """The query parameters of a URI (the last of a repeated name wins); percent-decoded."""
    query = uri.partition("?")[2].partition("#")[0]
    return dict(parse_qsl(query, keep_blank_values=True))


def open_listing(path: str, shown: str) -> BinaryIO:
    """The listing file the operator named, opened for reading: it must be a regular file
    (a FIFO or device would block or never end). The path itself is the operator's (links
    in it are followed, as for any command-line path); its content is untrusted."""
    if not path:
        raise TargetError(f"target {shown}: no listing file (add ?listing=PATH)")
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise TargetError(f"target {shown}: cannot open the listing file: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TargetError(f"target {shown}: the listing file is not a regular file")
        os.set_blocking(fd, True)
        return open(fd, "rb", buffering=1 << 20)
    except BaseException:
        os.close(fd)
        raise
