"""A one-line progress display for the Spark commands, fed from Spark's status tracker.

While a command runs, a thread polls `SparkContext.statusTracker()` (active stages, tasks
done/total/running/failed), the bytes the running stages have read when Spark's status store
says so (Spark's input metrics: Parquet tables the JVM reads, as in diff and report), and the
bytes the scan job's executors have read from block files, and redraws one line on stderr:

    scan  stage 3: 14/32 tasks (2 running)  1.2 GiB scanned  0:07

The scan reads replicas in Python (spark_udfs.jobs.scan), which Spark's input metrics never
count: its bytes come from the job itself, a PySpark accumulator (`bytes_accumulator`) that
the scan function adds each replica's bytes_read to on the executors. Accumulator updates
reach the driver when a task finishes, not while it runs: the figure grows task by task (a
task holds up to spark_udfs.jobs.scan.REPLICAS_PER_TASK replicas), and a task that Spark retries
or recomputes adds its bytes again (the tables' bytes_read is the exact figure).

Only on a terminal: with stderr redirected, or --json, nothing is drawn (the caller passes
enabled=False). The line is erased whenever no stage runs, so the commands' own output never
lands in the middle of it. `format_line` and `StageView` need no Spark (tests feed them).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, TextIO

__all__ = [
    "StageView",
    "bytes_accumulator",
    "format_line",
    "read_stages",
    "scanned_bytes",
    "SparkProgress",
]


class StageView(NamedTuple):
    """What the display shows of one running stage."""

    stage_id: int
    name: str
    done: int
    total: int
    running: int = 0
    failed: int = 0
    input_bytes: Optional[int] = None


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _clock(seconds: float) -> str:
    s = int(seconds)
    return (
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


def format_line(
    label: str,
    stages: Sequence[StageView],
    elapsed: float,
    width: int = 100,
    scanned: Optional[int] = None,
) -> str:
    """One display line: the label, each running stage's tasks done/total (running, failed),
    the bytes they read when known, the bytes the scan's executors read (`scanned`, from
    bytes_accumulator) when any, and the elapsed time; cut to `width` characters."""
    parts = []
    for st in sorted(stages, key=lambda s: s.stage_id):
        extra = [f"{st.running} running"] if st.running else []
        if st.failed:
            extra.append(f"{st.failed} failed")
        part = f"stage {st.stage_id}: {st.done}/{st.total} tasks"
        if extra:
            part += f" ({', '.join(extra)})"
        if st.input_bytes:
            part += f"  {_size(st.input_bytes)} read"
        parts.append(part)
    body = " | ".join(parts) if parts else "starting"
    if scanned:
        body += f"  {_size(scanned)} scanned"
    line = f"{label}  {body}  {_clock(elapsed)}"
    return line if len(line) <= width else line[: max(0, width - 3)] + "..."


#: the scan jobs' byte accumulators of this driver (the newest few), read by SparkProgress
_COUNTERS: List[Any] = []
_KEEP = 16


def bytes_accumulator(sc: Any) -> Any:
    """A new accumulator (int, 0) for a scan job's executors to add the bytes they read to;
    every SparkProgress running on this driver shows what it gains while it runs."""
    acc = sc.accumulator(0)
    _COUNTERS.append(acc)
    del _COUNTERS[:-_KEEP]
    return acc


def scanned_bytes() -> Dict[int, int]:
    """{id: value} of the registered byte accumulators (driver side)."""
    out = {}
    for acc in list(_COUNTERS):
        try:
            out[id(acc)] = int(acc.value)
        except Exception:  # noqa: BLE001 - an accumulator of a stopped context
            continue
    return out


def _input_bytes(sc: Any, stage_id: int, attempt: int) -> Optional[int]:
    """Bytes read so far by a stage, from Spark's status store (JVM); None if unavailable
    (the store only counts finished tasks' metrics, and its API is internal)."""
    try:
        data = (
            sc._jsc.sc()
            .statusStore()
            .stageAttempt(stage_id, attempt, False, None, None, None, None)
        )
        return int(data._1().inputBytes())
    except Exception:  # noqa: BLE001 - an internal API: any failure means "not known"
        return None


def read_stages(tracker: Any, sc: Any = None) -> List[StageView]:
    """The running stages as StageViews, from a pyspark StatusTracker (or a stand-in with
    getActiveStageIds() and getStageInfo(id)). A stage that finished meanwhile is left out."""
    out = []
    for sid in tracker.getActiveStageIds():
        info = tracker.getStageInfo(sid)
        if info is None:
            continue
        nbytes = _input_bytes(sc, info.stageId, info.currentAttemptId) if sc is not None else None
        out.append(
            StageView(
                info.stageId,
                info.name,
                info.numCompletedTasks,
                info.numTasks,
                info.numActiveTasks,
                info.numFailedTasks,
                nbytes,
            )
        )
    return out


class SparkProgress:
    """Context manager: draw the progress line on `stream` while the block runs.

    `source` returns the running stages (read_stages on the session's tracker by default);
    `scanned` the bytes read so far by the scan jobs' executors (None: not shown; by
    default, for_session: what the byte accumulators gained since the block began).
    Draws nothing unless `enabled` and the stream is a terminal."""

    def __init__(
        self,
        label: str,
        source: Callable[[], Sequence[StageView]],
        *,
        stream: Optional[TextIO] = None,
        enabled: bool = True,
        interval: float = 0.5,
        scanned: Optional[Callable[[], Optional[int]]] = None,
    ) -> None:
        self.label = label
        self.source = source
        self.scanned = scanned
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(enabled and isatty is not None and isatty())
        self.interval = interval
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._shown = False
        self._t0 = 0.0
        self._on_enter: Callable[[], Any] = lambda: None

    @classmethod
    def for_session(cls, spark: Any, label: str, **kw: Any) -> SparkProgress:
        sc = spark.sparkContext
        tracker = sc.statusTracker()
        with_bytes = [True]  # the status store's API is internal: stop asking once it fails

        def source() -> List[StageView]:
            stages = read_stages(tracker, sc if with_bytes[0] else None)
            if stages and all(st.input_bytes is None for st in stages):
                with_bytes[0] = False
            return stages

        base: Dict[int, int] = {}

        def scanned() -> int:
            # accumulators created after __enter__ start at 0; older ones count from there
            return sum(v - base.get(k, 0) for k, v in scanned_bytes().items())

        progress = cls(label, source, scanned=scanned, **kw)
        progress._on_enter = lambda: base.update(scanned_bytes())
        return progress

    def _width(self) -> int:
        import shutil

        return max(20, shutil.get_terminal_size((100, 24)).columns - 1)

    def tick(self) -> None:
        """Poll once and redraw (or erase when no stage runs)."""
        try:
            stages = list(self.source())
        except Exception:  # noqa: BLE001 - the session may be stopping; skip this poll
            return
        if stages:
            try:
                nbytes = self.scanned() if self.scanned is not None else None
            except Exception:  # noqa: BLE001 - as above
                nbytes = None
            line = format_line(
                self.label, stages, time.monotonic() - self._t0, self._width(), scanned=nbytes
            )
            self.stream.write("\r\x1b[2K" + line)
            self._shown = True
        elif self._shown:
            self.stream.write("\r\x1b[2K")
            self._shown = False
        self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def __enter__(self) -> SparkProgress:
        self._t0 = time.monotonic()
        self._on_enter()
        if self.enabled:
            self._thread = threading.Thread(
                target=self._loop, name="crcmerkle-progress", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self._shown:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
                self._shown = False
