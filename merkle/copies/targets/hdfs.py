"""An HDFS directory as a copy, from saved `hdfs dfs -checksum` output:
`hdfs://namenode[:port]/path?listing=FILE` (or `hdfs:///path?listing=FILE`).

Hadoop's FsShell (`Display.Checksum`) prints one line per file: the path as shown
(`hdfs://nn:8020/p/f` or `/p/f`, as the argument was written), the checksum's algorithm
name, and its bytes in lower-case hex, tab-separated (`PATH\\tNONE\\t` when the file system
gives none); `-v` adds a fourth column with the block size (accepted and ignored).
With dfs.checksum.combine.mode=COMPOSITE_CRC the algorithm is `COMPOSITE-CRC32C` or
`COMPOSITE-CRC32` and the bytes are the whole file's CRC (4 bytes, big-endian): those fill
crc32c / crc32. The default MD5MD5CRC (`MD5-of-<n>MD5-of-<m>CRC32C`) depends on the block
layout and goes to `other`. The lines carry no size (null).

The file is untrusted: a line that does not parse, a relative path or another file
system's path is skipped and counted (`skips`); a bad hex value is a row with `error`.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional
from urllib.parse import unquote

import pyarrow as pa

from merkle.copies.targets._listing import open_listing, query_of
from merkle.copies.targets._rows import BATCH_ROWS, Rows, hex_bytes, short, under
from merkle.copies.targets.base import Target

#: the longest line read (a path is at most a few KiB in HDFS; the rest is cut off)
MAX_LINE = 1 << 20
_ALGORITHM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_BLOCK_SIZE = re.compile(r"(?:BlockSize=)?[0-9]{1,19}")
_LOWER_HEX = re.compile(r"[0-9a-f]*")
_COMPOSITE = {"COMPOSITE-CRC32C": "crc32c", "COMPOSITE-CRC32": "crc32"}


def _is_algorithm(text: str) -> bool:
    """An algorithm's name (COMPOSITE-CRC32C, MD5-of-0MD5-of-512CRC32C, NONE), never a hex
    value (Hadoop prints those in lower case): tells the columns apart when a path holds
    tabs or -v added the block size."""
    return bool(_ALGORITHM.fullmatch(text)) and not _LOWER_HEX.fullmatch(text)


class HdfsTarget(Target):
    kind = "hdfs"
    reads_data = False
    PARAMETERS = frozenset({"listing"})

    def preflight(self) -> None:
        open_listing(self.listing, self.display).close()

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        rest = uri.partition("://")[2].partition("#")[0].partition("?")[0]
        authority, slash, path = rest.partition("/")
        if "@" in authority:
            authority = authority.rpartition("@")[2]
        self.authority = authority
        self.root = "/" + unquote(path).strip("/") if slash else "/"
        self.listing = query_of(uri).get("listing", "")
        if not self.listing:
            raise ValueError(
                f"target {self.display}: an HDFS target is read from saved "
                f"`hdfs dfs -checksum` output: add ?listing=FILE"
            )

    def list(self) -> Iterator[pa.RecordBatch]:
        rows = Rows()
        with open_listing(self.listing, self.display) as raw:
            while True:
                line = raw.readline(MAX_LINE)
                if not line:
                    break
                if len(line) == MAX_LINE and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # drop the rest of it
                        line = raw.readline(MAX_LINE)
                    self.skips.add("a line longer than 1 MiB")
                    continue
                self._line(rows, line.decode("utf-8", errors="replace").rstrip("\r\n"))
                if len(rows) >= BATCH_ROWS:
                    yield rows.take()
        if len(rows):
            yield rows.take()

    def _line(self, rows: Rows, line: str) -> None:
        if not line.strip():
            return
        fields = line.split("\t")
        # -v: PATH ALGORITHM HEX BLOCKSIZE; a path may itself hold tabs: parse from the right
        if (
            len(fields) >= 4
            and _BLOCK_SIZE.fullmatch(fields[-1])
            and not _is_algorithm(fields[-2])
            and _is_algorithm(fields[-3])
        ):
            fields = fields[:-1]
        if len(fields) < 3 or not _is_algorithm(fields[-2]):
            self.skips.add("a line that is not `PATH<tab>ALGORITHM<tab>HEX`")
            return
        path, algorithm, text = "\t".join(fields[:-2]), fields[-2], fields[-1]
        name = self._name(path)
        if name is None:
            return
        if algorithm == "NONE":
            rows.add(name, other="hdfs NONE (no file checksum)", requests=0, bytes_read=0)
            return
        try:
            value = hex_bytes(text, f"{algorithm} value")
        except ValueError as exc:
            rows.add(name, requests=0, bytes_read=0, error=str(exc))
            return
        column = _COMPOSITE.get(algorithm)
        if column is None:
            rows.add(name, other=f"hdfs {algorithm}", requests=0, bytes_read=0)
        elif len(value) != 4:
            rows.add(
                name,
                requests=0,
                bytes_read=0,
                error=f"{algorithm} value: {len(value)} bytes, not 4: {short(text)}",
            )
        else:
            rows.add(name, **{column: value}, requests=0, bytes_read=0)

    def _name(self, path: str) -> Optional[str]:
        """The path relative to the root, or None (counted) when it lies elsewhere. Paths
        are data: '..' stays a name."""
        if "://" in path:
            scheme, _, rest = path.partition("://")
            authority, slash, inner = rest.partition("/")
            if scheme.lower() != "hdfs" or (
                self.authority and authority and authority != self.authority
            ):
                self.skips.add("another file system")
                return None
            path = "/" + inner
        elif path.startswith("hdfs:/"):
            path = path[len("hdfs:") :]
        if not path.startswith("/"):
            self.skips.add("a relative path (run hdfs dfs -checksum with absolute paths)")
            return None
        name = under(path.strip("/") if path != "/" else "", self.root.strip("/"))
        if name is None:
            self.skips.add("outside the root")
        return name
