"""`crcmerkle scan --state DIR --metrics-file FILE`: the periodic scan's figures in
Prometheus' exposition format (made by the `prometheus_client` library), written atomically
for node_exporter's textfile collector.

Per run: bytes read and replicas (read, or not read as unchanged) per volume (on bookies:
entry logs per ledger directory), the findings standing (carried ones included) by kind and
level, the entries that could not be read, and per volume the current byte rate, the age of
the oldest verification and the time a full pass of the volume takes at that rate. The file
is replaced through a private temporary in its own directory
(merkle.replica.safeopen.replace_atomic: no link followed, the directory
reached without links), so a scrape never sees half a file and nobody can redirect the write.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, Iterable, List

from merkle.cli import EXIT_ERROR, CLIError

__all__ = ["findings_registry", "scan_registry", "write_metrics_file"]


def scan_registry(results: List[Any], failed: List[Dict[str, str]], tracker: Any) -> Any:
    """A prometheus_client CollectorRegistry of one scan's figures (see the module
    docstring); `tracker` the run's merkle.replica.incremental.StateTracker."""
    return findings_registry([e for r in results for e in r.errors], len(failed), tracker)


def findings_registry(findings: Iterable[Any], failed: int, tracker: Any) -> Any:
    """The registry of scan_registry from the findings standing (each with `kind` and
    `severity`), the count of what could not be scanned, and `tracker`: anything with the
    per-volume figures (`volumes`: VolumeFigures by volume) and `max_age` (a bookie scan's
    merkle.replica.bookkeeper.state.LogStates is one)."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    vol = ("volume",)
    g_bytes = Gauge(
        "crcmerkle_scan_bytes_read", "Bytes of replica data this run read", vol, registry=reg
    )
    g_reps = Gauge(
        "crcmerkle_scan_replicas",
        "Replicas this run visited, read or not read (unchanged, verified within --max-age "
        "or in the pass in progress)",
        ("volume", "read"),
        registry=reg,
    )
    g_rate = Gauge(
        "crcmerkle_scan_bytes_per_second",
        "The rate this run read a volume at (its bytes over its replicas' scan seconds)",
        vol,
        registry=reg,
    )
    g_oldest = Gauge(
        "crcmerkle_scan_oldest_verification_age_seconds",
        "Age of the oldest verification among a volume's replicas at the end of this run",
        vol,
        registry=reg,
    )
    g_pass = Gauge(
        "crcmerkle_scan_full_pass_seconds",
        "Time a full pass over a volume's replica data takes at this run's rate",
        vol,
        registry=reg,
    )
    g_find = Gauge(
        "crcmerkle_scan_findings",
        "Findings standing after this run (those of replicas not read carried), by kind and level",
        ("kind", "level"),
        registry=reg,
    )
    g_err = Gauge(
        "crcmerkle_scan_read_errors",
        "Replicas, volumes and PATHs this run could not scan (I/O errors, locks, unusable volumes)",
        registry=reg,
    )
    g_end = Gauge(
        "crcmerkle_scan_last_run_end_timestamp_seconds",
        "When this run ended (Unix time)",
        registry=reg,
    )
    g_age = Gauge(
        "crcmerkle_scan_max_age_seconds",
        "The --max-age the run was given (0: none, only the pass in progress is skipped)",
        registry=reg,
    )
    now = time.time()
    for root, v in sorted(tracker.volumes.items()):
        g_bytes.labels(root).set(v.bytes_read)
        g_reps.labels(root, "true").set(v.read)
        g_reps.labels(root, "false").set(v.carried)
        if v.oldest is not None:
            g_oldest.labels(root).set(max(0.0, now - v.oldest))
        if v.bytes_read and v.seconds > 0:
            rate = v.bytes_read / v.seconds
            g_rate.labels(root).set(rate)
            g_pass.labels(root).set(v.bytes_total / rate)
    counts: Dict[Any, int] = {}
    for e in findings:
        counts[(e.kind, e.severity)] = counts.get((e.kind, e.severity), 0) + 1
    for (kind, level), n in sorted(counts.items()):
        g_find.labels(kind, level).set(n)
    g_err.set(failed)
    g_end.set(now)
    g_age.set(tracker.max_age or 0)
    return reg


def write_metrics_file(path: str, registry: Any) -> None:
    """Replace `path` by the registry's exposition text, atomically (module docstring)."""
    from prometheus_client import generate_latest

    from merkle.replica.safeopen import open_dir_nofollow_path, replace_atomic

    parent, name = os.path.split(os.path.abspath(path))
    try:
        fd = open_dir_nofollow_path(parent)
        try:
            replace_atomic(fd, name, generate_latest(registry), display=path)
        finally:
            os.close(fd)
    except OSError as exc:
        raise CLIError(
            f"--metrics-file {path}: {exc.strerror or exc} (the scan's results above stand)",
            EXIT_ERROR,
        ) from None
