"""The Spark commands' progress line: the formatter and the feeder, without Spark or a TTY
(a stand-in tracker and stream); nothing is written to a stream that is not a terminal."""

from __future__ import annotations

import io
import time
from collections import namedtuple

from spark_udfs.cluster.progress import SparkProgress, StageView, format_line, read_stages


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_format_line():
    st = [
        StageView(3, "scan", 14, 32, running=2, input_bytes=118 * 1024 * 1024),
        StageView(1, "list", 1, 1),
    ]
    line = format_line("scan", st, 7.9)
    assert line == (
        "scan  stage 1: 1/1 tasks | stage 3: 14/32 tasks (2 running)  118.0 MiB read  0:07"
    )
    assert (
        format_line("diff", [StageView(5, "x", 0, 4, failed=1)], 3725)
        == "diff  stage 5: 0/4 tasks (1 failed)  1:02:05"
    )
    assert format_line("demo", [], 0) == "demo  starting  0:00"
    assert len(format_line("scan", st, 1, width=30)) == 30


SparkStageInfo = namedtuple(
    "SparkStageInfo",
    "stageId currentAttemptId name numTasks numActiveTasks numCompletedTasks numFailedTasks",
)


class FakeTracker:
    def __init__(self):
        self.stages = {}

    def getActiveStageIds(self):
        return list(self.stages)

    def getStageInfo(self, sid):
        return self.stages.get(sid)


def test_read_stages_from_a_tracker():
    t = FakeTracker()
    assert read_stages(t) == []
    t.stages[2] = SparkStageInfo(2, 0, "mapInArrow", 8, 2, 5, 0)
    t.stages[4] = None  # finished between the two calls
    assert read_stages(t) == [StageView(2, "mapInArrow", 5, 8, 2, 0, None)]


def test_tick_draws_then_erases_on_a_terminal():
    stream = TTY()
    stages = [StageView(0, "s", 1, 4, 1)]
    p = SparkProgress("scan", lambda: stages, stream=stream)
    assert p.enabled
    p._t0 = time.monotonic()
    p.tick()
    assert stream.getvalue().startswith("\r\x1b[2Kscan  stage 0: 1/4 tasks (1 running)")
    stages.clear()
    p.tick()  # no stage runs: the line is erased, so the command's own output starts clean
    assert stream.getvalue().endswith("\r\x1b[2K")
    n = len(stream.getvalue())
    p.tick()
    assert len(stream.getvalue()) == n  # nothing more to erase


def test_thread_feeds_the_line_and_clears_it_at_the_end():
    stream = TTY()
    polls = []

    def source():
        polls.append(1)
        return [StageView(7, "s", len(polls), 100)]

    with SparkProgress("diff", source, stream=stream, interval=0.01):
        deadline = time.monotonic() + 10
        while len(polls) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    text = stream.getvalue()
    assert "diff  stage 7: 1/100 tasks" in text and "stage 7: 2/100" in text
    assert text.endswith("\r\x1b[2K")


def test_nothing_on_a_stream_that_is_not_a_terminal():
    # redirected stderr (whatever the caller asks), or a terminal with --json (enabled=False)
    for stream, on in ((io.StringIO(), True), (io.StringIO(), False), (TTY(), False)):
        polls = []
        with SparkProgress(
            "scan",
            lambda polls=polls: polls.append(1) or [StageView(0, "s", 0, 1)],
            stream=stream,
            enabled=on,
            interval=0.01,
        ) as p:
            time.sleep(0.1)
        assert not p.enabled and stream.getvalue() == "" and polls == []


def test_a_failing_source_is_skipped():
    stream = TTY()

    def source():
        raise RuntimeError("session stopping")

    p = SparkProgress("scan", source, stream=stream)
    p.tick()
    assert stream.getvalue() == ""


def test_the_line_shows_the_bytes_scanned():
    st = [StageView(3, "scan", 14, 32, running=2)]
    assert (
        format_line("scan", st, 7.9, scanned=1288490189)
        == "scan  stage 3: 14/32 tasks (2 running)  1.2 GiB scanned  0:07"
    )
    assert (
        format_line("scan", st, 7.9, scanned=0) == "scan  stage 3: 14/32 tasks (2 running)  0:07"
    )  # nothing read yet: not shown
    stream = TTY()
    read = [0]
    p = SparkProgress("scan", lambda: st, stream=stream, scanned=lambda: read[0])
    p._t0 = time.monotonic()
    read[0] = 5 * 1024 * 1024
    p.tick()
    assert "(2 running)  5.0 MiB scanned  0:00" in stream.getvalue()


class FakeAccumulator:
    def __init__(self):
        self.value = 0

    def add(self, n):
        self.value += n


class FakeContext:
    def statusTracker(self):
        return FakeTracker()

    def accumulator(self, value):
        return FakeAccumulator()


def test_for_session_counts_what_the_accumulators_gained_while_it_ran():
    from spark_udfs.cluster.progress import bytes_accumulator

    sc = FakeContext()
    older = bytes_accumulator(sc)
    older.add(1000)  # an earlier scan's bytes: not this block's
    spark = type("S", (), {"sparkContext": sc})()
    with SparkProgress.for_session(spark, "scan", stream=TTY(), interval=60) as p:
        newer = bytes_accumulator(sc)
        newer.add(300)
        older.add(20)
        assert p.scanned() == 320


def test_the_scan_function_adds_each_replicas_bytes_to_the_accumulator():
    pa = __import__("pytest").importorskip("pyarrow")
    from spark_udfs.jobs.scan import _OUT_ARROW, _counting, _rows

    def fn(batches):
        for _ in batches:
            yield from _rows("REPLICA", 2, {"bytes_read": [100, 23]}).to_batches()
            yield from _rows("CHUNK", 1, {"length": [999]}).to_batches()

    acc = FakeAccumulator()
    out = list(_counting(fn, acc)(iter([pa.record_batch([], schema=pa.schema([]))])))
    assert acc.value == 123 and all(b.schema == _OUT_ARROW for b in out)
