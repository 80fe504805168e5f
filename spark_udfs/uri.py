"""Locations the jobs take: local paths or URIs, and what of them may be shown: the module
moved to merkle.replica.uri (the CLI's error line and the crcmerkle layout's remote discovery
use it too, below spark_udfs); its public names stay reachable here."""

from merkle.replica.uri import Location, child, display, is_uri, redact

__all__ = ["Location", "child", "display", "is_uri", "redact"]
