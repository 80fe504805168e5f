"""A one-line progress display for the Spark commands, fed from Spark's status tracker.

While a command runs, a thread polls `SparkContext.statusTracker()` (active stages, tasks
done/total/running/failed) and, when Spark's status store says so, the bytes the running
stages have read, and redraws one line on stderr:

    scan  stage 3: 14/32 tasks (2 running)  118.0 MiB read  0:07

Only on a terminal: with stderr redirected, or --json, nothing is drawn (the caller passes
enabled=False). The line is erased whenever no stage runs, so the commands' own output never
lands in the middle of it. `format_line` and `StageView` need no Spark (tests feed them).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, TextIO

__all__ = ["StageView", "format_line", "read_stages", "SparkProgress"]


class StageView(NamedTuple):
    """What the display shows of one running stage."""

    stage_id: int
    name: str
    done: int
    total: int
    running: int = 0
    failed: int = 0
    input_bytes: Optional[int] = None


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else \
        f"{s // 60}:{s % 60:02d}"


def format_line(label: str, stages: Sequence[StageView], elapsed: float,
                width: int = 100) -> str:
    """One display line: the label, each running stage's tasks done/total (running, failed),
    the bytes they read when known, and the elapsed time; cut to `width` characters."""
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
    line = f"{label}  {body}  {_clock(elapsed)}"
    return line if len(line) <= width else line[:max(0, width - 3)] + "..."


def _input_bytes(sc: Any, stage_id: int, attempt: int) -> Optional[int]:
    """Bytes read so far by a stage, from Spark's status store (JVM); None if unavailable
    (the store only counts finished tasks' metrics, and its API is internal)."""
    try:
        data = sc._jsc.sc().statusStore().stageAttempt(stage_id, attempt, False, None, None,
                                                       None, None)
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
        nbytes = _input_bytes(sc, info.stageId, info.currentAttemptId) if sc is not None \
            else None
        out.append(StageView(info.stageId, info.name, info.numCompletedTasks, info.numTasks,
                             info.numActiveTasks, info.numFailedTasks, nbytes))
    return out


class SparkProgress:
    """Context manager: draw the progress line on `stream` while the block runs.

    `source` returns the running stages (read_stages on the session's tracker by default).
    Draws nothing unless `enabled` and the stream is a terminal."""

    def __init__(self, label: str, source: Callable[[], Sequence[StageView]], *,
                 stream: Optional[TextIO] = None, enabled: bool = True,
                 interval: float = 0.5) -> None:
        self.label = label
        self.source = source
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(enabled and isatty is not None and isatty())
        self.interval = interval
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._shown = False
        self._t0 = 0.0

    @classmethod
    def for_session(cls, spark: Any, label: str, **kw: Any) -> "SparkProgress":
        sc = spark.sparkContext
        tracker = sc.statusTracker()
        with_bytes = [True]  # the status store's API is internal: stop asking once it fails

        def source() -> List[StageView]:
            stages = read_stages(tracker, sc if with_bytes[0] else None)
            if stages and all(st.input_bytes is None for st in stages):
                with_bytes[0] = False
            return stages

        return cls(label, source, **kw)

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
            line = format_line(self.label, stages, time.monotonic() - self._t0, self._width())
            self.stream.write("\r\x1b[2K" + line)
            self._shown = True
        elif self._shown:
            self.stream.write("\r\x1b[2K")
            self._shown = False
        self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def __enter__(self) -> "SparkProgress":
        self._t0 = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="crcmerkle-progress",
                                            daemon=True)
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
