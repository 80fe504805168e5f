"""Polite I/O (merkle.replica.politeio): the idle I/O class, the page cache dropped on exactly
what a scan read, identical findings, and `crcmerkle scan`'s --bytes-per-second, --idle-io and
--keep-cache reaching the scanner."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import merkle.replica.scan as scan_module
from merkle.cli import main
from merkle.replica import politeio
from merkle.replica.files import LocalBlockFile
from merkle.replica.layouts import layout_of
from merkle.replica.replicadir.writer import ContainerWriter
from merkle.replica.scan import scan_container, scan_paths

from replica_helpers import found_keys, make_cluster, scan_all

PAGE = os.sysconf("SC_PAGE_SIZE")


# ---- the idle I/O class ----------------------------------------------------------------------


def _in_thread(fn: Any) -> Any:
    """fn() run in a fresh thread (its I/O class is its own: the test process keeps its)."""
    out: Dict[str, Any] = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_idle_class_is_set_read_back_and_inherited_by_later_threads() -> None:
    main_before = politeio.io_priority()
    if main_before is None:
        pytest.skip("ioprio_get is not available here (not Linux, or an unknown CPU)")

    def body() -> Tuple[Optional[str], Any, Any, Any, Any]:
        before = politeio.io_priority()
        why = politeio.set_idle_io_priority()
        after = politeio.io_priority()
        child = _in_thread(politeio.io_priority)  # started after: inherits the class
        restored = politeio.set_io_priority(before)
        return why, before, after, child, (restored, politeio.io_priority())

    why, before, after, child, (restored, back) = _in_thread(body)
    if why is not None:
        pytest.skip(f"the kernel refused the idle I/O class: {why}")
    assert before != (politeio.IOPRIO_CLASS_IDLE, 0)  # so the switch below is observed
    assert after == (politeio.IOPRIO_CLASS_IDLE, 0)
    assert child == (politeio.IOPRIO_CLASS_IDLE, 0)
    assert restored is None and back == before
    assert politeio.io_priority() == main_before  # another thread's class was never touched


def test_a_refusal_is_one_line_and_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(politeio, "_syscall", lambda *a: (-1, errno.EPERM))
    monkeypatch.setattr(politeio.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(politeio.sys, "platform", "linux")
    why = politeio.set_idle_io_priority()
    assert why is not None and "\n" not in why and os.strerror(errno.EPERM) in why
    assert politeio.io_priority() is None  # ioprio_get's -1 is "cannot tell"
    monkeypatch.setattr(politeio.platform, "machine", lambda: "sparc64")
    why = politeio.set_idle_io_priority()
    assert why is not None and "sparc64" in why
    monkeypatch.setattr(politeio.sys, "platform", "darwin")
    assert "darwin" in (politeio.set_idle_io_priority() or "")
    assert politeio.io_priority() is None

    def broken(*a: Any) -> Any:
        raise OSError("no libc")

    monkeypatch.setattr(politeio.sys, "platform", "linux")
    monkeypatch.setattr(politeio.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(politeio, "_syscall", broken)
    assert "no libc" in (politeio.set_idle_io_priority() or "")


def test_scheduler_note_names_disks_whose_scheduler_ignores_classes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        politeio, "schedulers_of", lambda p: {"sda": "bfq", "nvme0n1": "none", "vdb": "mq-deadline"}
    )
    note = politeio.scheduler_note(["/data/disk1"])
    assert note is not None and "nvme0n1 (none)" in note and "sda" not in note
    monkeypatch.setattr(politeio, "schedulers_of", lambda p: {"sda": "bfq"})
    assert politeio.scheduler_note(["/data/disk1"]) is None


def test_schedulers_of_reads_the_disk_of_a_path(tmp_path: Path) -> None:
    found = politeio.schedulers_of(os.fspath(tmp_path))
    if not found:
        pytest.skip("tmp_path's filesystem has no single block device with a scheduler here")
    for dev, sched in found.items():
        text = Path(f"/sys/block/{dev}/queue/scheduler").read_text()
        assert f"[{sched}]" in text or text.strip() == sched


# ---- the page cache dropped on exactly what was read ----------------------------------------


def _replica(root: Path, *, chunk: int = 3000, bpc: int = 1000) -> Path:
    """A replica whose chunks are not page-aligned (3000-byte chunks, 1000-byte windows)."""
    with ContainerWriter.create(
        root, algorithm="crc32", chunk_size=chunk, bytes_per_checksum=bpc
    ) as w:
        w.write_block(1, os.urandom(20000))
        w.write_block(2, os.urandom(7000))
        w.write_block(3, os.urandom(1))
    return root


class _Log:
    """Every block read (LocalBlockFile.pread_into) and every posix_fadvise call, per thread,
    in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: List[Tuple[Any, ...]] = []
        self._lock = threading.Lock()
        real_read = LocalBlockFile.pread_into
        log = self

        def pread_into(f: LocalBlockFile, view: memoryview, offset: int) -> int:
            got = real_read(f, view, offset)
            log.add("read", f.fileno(), offset, got, os.readlink(f"/proc/self/fd/{f.fileno()}"))
            return got

        def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
            log.add("drop", fd, offset, length, advice, os.readlink(f"/proc/self/fd/{fd}"))

        monkeypatch.setattr(LocalBlockFile, "pread_into", pread_into)
        monkeypatch.setattr(os, "posix_fadvise", fadvise)

    def add(self, *event: Any) -> None:
        with self._lock:
            self.events.append((threading.get_ident(),) + event)

    def by_thread(self) -> Dict[int, List[Tuple[Any, ...]]]:
        out: Dict[int, List[Tuple[Any, ...]]] = {}
        for e in self.events:
            out.setdefault(e[0], []).append(e[1:])
        return out


def _check_each_read_dropped(log: _Log) -> int:
    """Each read of n > 0 bytes is followed, in its thread, by DONTNEED on the same file, on
    the extent read of it so far, from the start of its first page; nothing else is dropped.
    Returns the bytes read."""
    total = 0
    for events in log.by_thread().values():
        extent: Dict[str, Tuple[int, int]] = {}
        i = 0
        while i < len(events):
            kind, fd, offset, got, path = events[i]
            assert kind == "read", events[i]
            i += 1
            if got == 0:
                continue
            total += got
            lo, hi = extent.get(path, (offset, offset + got))
            lo, hi = min(lo, offset), max(hi, offset + got)
            extent[path] = (lo, hi)
            start = lo - lo % PAGE
            assert events[i] == ("drop", fd, start, hi - start, os.POSIX_FADV_DONTNEED, path), (
                events[i - 1],
                events[i],
            )
            i += 1
    return total


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")
@pytest.mark.parametrize("workers", [1, 3])
def test_fadvise_on_exactly_the_ranges_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    root = _replica(tmp_path / "v" / "7")
    log = _Log(monkeypatch)
    r = scan_container(root, write_tree=False, workers=workers, buffer_size=2500, drop_cache=True)
    assert r.ok and r.bytes_read == 27001
    assert _check_each_read_dropped(log) == r.bytes_read
    assert any(e[3] % PAGE for e in log.events if e[1] == "read")  # unaligned reads met
    log.events.clear()
    r2 = scan_container(root, write_tree=False, workers=workers, buffer_size=2500)
    assert [e for e in log.events if e[1] == "drop"] == []  # off by default in the library
    assert r2.tree == r.tree


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")
def test_the_read_only_layout_scan_passes_drop_cache_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a Spark executor calls: Layout.scan without write_tree (read through
    open_files), the verifier's options passed on."""
    _replica(tmp_path / "v" / "7")
    volume_dir = os.fspath(tmp_path / "v")
    layout = layout_of(volume_dir)
    refs = [r for v in layout.volumes(volume_dir) for r in layout.replicas(v)]
    log = _Log(monkeypatch)
    ((_ref, r, exc),) = layout.scan(refs, drop_cache=True, buffer_size=2500)
    assert exc is None and r.ok
    assert _check_each_read_dropped(log) == r.bytes_read == 27001


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")
def test_ozone_file_per_chunk_drops_each_chunk_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("rocksdict")
    pytest.importorskip("yaml")
    from test_ozone_layout import make_volume

    chunks = [(0, os.urandom(5000)), (5000, os.urandom(3000))]
    make_volume(tmp_path / "vol", {1: {1: chunks}}, layout_version=1, bpc=1024)
    log = _Log(monkeypatch)
    (r,) = scan_paths([tmp_path / "vol"], drop_cache=True)
    assert r.ok and r.bytes_read == 8000
    drops = [(os.path.basename(e[6]), e[3], e[4]) for e in log.events if e[1] == "drop"]
    # the block's extent read so far, each time: the second read's covers both chunk files
    assert drops == [("1_chunk_1", 0, 5000), ("1_chunk_1", 0, 5000), ("1_chunk_2", 0, 3000)]


@pytest.mark.parametrize("layout", ["crcmerkle", "ozone"])
def test_a_scan_dropping_the_cache_finds_the_same(tmp_path: Path, layout: str) -> None:
    if layout == "ozone":
        pytest.importorskip("rocksdict")
        pytest.importorskip("yaml")
    make_cluster(tmp_path / "c", "default", containers=4, seed=5, min_blocks=3, layout=layout)
    a = scan_all(tmp_path / "c", write_tree=False)
    b = scan_all(tmp_path / "c", write_tree=False, drop_cache=True)
    c = scan_all(tmp_path / "c", write_tree=False, drop_cache=True, workers=3, buffer_size=5000)
    assert set(a) == set(b) == set(c) and a
    assert any(found_keys(r) for r in a.values())  # the faults are there to be found
    for rep in a:
        assert found_keys(a[rep]) == found_keys(b[rep]) == found_keys(c[rep]), rep
        assert a[rep].tree == b[rep].tree == c[rep].tree, rep
        assert a[rep].bytes_read == b[rep].bytes_read == c[rep].bytes_read, rep


def _resident(paths: List[Path]) -> int:
    """Bytes of `paths` in the page cache, by fincore (util-linux)."""
    out = subprocess.run(
        ["fincore", "--bytes", "--raw", "--noheadings", "--output", "RES"]
        + [os.fspath(p) for p in paths],
        capture_output=True,
        text=True,
        check=True,
    )
    return sum(int(x) for x in out.stdout.split())


def test_the_page_cache_is_really_dropped(tmp_path: Path) -> None:
    if shutil.which("fincore") is None:
        pytest.skip("fincore (util-linux) is not installed: page residency cannot be read")
    root = tmp_path / "v" / "9"
    with ContainerWriter.create(
        root, algorithm="crc32c", chunk_size=1 << 20, bytes_per_checksum=16384
    ) as w:
        for b in range(1, 5):
            w.write_block(b, os.urandom((3 << 20) + 777))
    blocks = sorted((root / "chunks").glob("*.block"))
    size = sum(p.stat().st_size for p in blocks)

    def cache_all() -> None:
        for p in blocks:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)  # dirty pages are never dropped: written back first
                while os.read(fd, 1 << 20):
                    pass
            finally:
                os.close(fd)

    cache_all()
    if _resident(blocks) < size:
        pytest.skip("the block files are not held in the page cache after a read here")
    probe = os.open(blocks[0], os.O_RDONLY)
    try:
        os.posix_fadvise(probe, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(probe)
    if _resident(blocks[:1]) > 0:
        pytest.skip("this filesystem keeps its pages on POSIX_FADV_DONTNEED (tmpfs?)")
    cache_all()
    r = scan_container(root, write_tree=False)
    assert r.ok and _resident(blocks) >= size - len(blocks) * PAGE  # the control: kept
    cache_all()
    r = scan_container(root, write_tree=False, drop_cache=True, buffer_size=300000)
    assert r.ok and r.bytes_read == size
    assert _resident(blocks) == 0


# ---- reads past the page cache (O_DIRECT) ----------------------------------------------------


def _twin_or_skip(fd: int) -> int:
    twin = politeio.direct_twin(fd)
    if twin is None:
        pytest.skip("this file system gives no O_DIRECT descriptor (tmpfs?)")
    return twin


def test_the_direct_twin_is_the_same_file_read_past_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(os.urandom(3 * politeio.DIRECT_ALIGN + 5))
    fd = os.open(path, os.O_RDONLY)
    twin = _twin_or_skip(fd)
    try:
        assert fcntl.fcntl(twin, fcntl.F_GETFL) & os.O_DIRECT
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT  # the caller's fd unchanged
        assert os.fstat(twin).st_ino == os.fstat(fd).st_ino
        # through /proc/self/fd: the open file, not its name (a rename cannot redirect it)
        os.rename(path, tmp_path / "moved")
        path.write_bytes(b"planted")
        other = politeio.direct_twin(fd)
        assert other is not None
        assert os.fstat(other).st_ino == os.fstat(fd).st_ino != path.stat().st_ino
        os.close(other)
    finally:
        os.close(twin)
        os.close(fd)
    r, w = os.pipe()
    try:
        assert politeio.direct_twin(r) is None  # a pipe: no O_DIRECT, None, never raises
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize("size", [1, 4095, 4096, 4097, 300_000, 1 << 20])
def test_direct_windows_equal_buffered_ones_at_every_alignment(tmp_path: Path, size: int) -> None:
    """WindowReader through the twin: windows widened to DIRECT_ALIGN and cut back give the
    bytes asked for at unaligned offsets and sizes, at and past the end of the file, and in
    windows larger than the reader's buffer; the reader stayed direct throughout."""
    from merkle.replica.bookkeeper.entrylog import WindowReader

    data = os.urandom(5 * politeio.DIRECT_ALIGN * 64 + 1234)
    path = tmp_path / "log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    twin = _twin_or_skip(fd)
    try:
        reader = WindowReader(size // 2 + 1, twin)
        for offset in (0, 1, 511, 4095, 4096, 4097, 70001, len(data) - size, len(data) - 1):
            offset = max(0, offset)
            got = reader.read(fd, size, offset)
            assert bytes(got) == data[offset : offset + size], (offset, size)
        assert bytes(reader.read(fd, size, len(data))) == b""
        assert bytes(reader.read(fd, size, len(data) + 4096)) == b""
        assert reader._direct == twin
    finally:
        os.close(twin)
        os.close(fd)


def test_a_refused_direct_read_falls_back_and_other_errors_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from merkle.replica.bookkeeper.entrylog import WindowReader

    data = os.urandom(100_000)
    path = tmp_path / "log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    twin = _twin_or_skip(fd)
    real = os.preadv
    fail = {"errno": errno.EINVAL}

    def preadv(f: int, bufs: Any, offset: int) -> int:
        if f == twin:
            raise OSError(fail["errno"], os.strerror(fail["errno"]))
        return real(f, bufs, offset)

    monkeypatch.setattr(os, "preadv", preadv)
    try:
        reader = WindowReader(1 << 16, twin)
        assert bytes(reader.read(fd, 5000, 333)) == data[333:5333]
        assert reader._direct is None  # buffered from then on
        fail["errno"] = errno.EIO
        with pytest.raises(OSError) as exc:
            WindowReader(1 << 16, twin).read(fd, 5000, 333)
        assert exc.value.errno == errno.EIO  # an I/O error stays an I/O error
    finally:
        os.close(twin)
        os.close(fd)


def test_direct_reads_leave_the_page_cache_as_it_was(tmp_path: Path) -> None:
    from merkle.replica.bookkeeper.entrylog import WindowReader

    if shutil.which("fincore") is None:
        pytest.skip("fincore (util-linux) is not installed: page residency cannot be read")
    path = tmp_path / "log"
    path.write_bytes(os.urandom(4 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        if _resident([path]) > 0:
            pytest.skip("this filesystem keeps its pages on POSIX_FADV_DONTNEED (tmpfs?)")
        twin = _twin_or_skip(fd)
        try:
            assert len(WindowReader(1 << 20, twin).read(fd, 4 << 20, 100)) == (4 << 20) - 100
        finally:
            os.close(twin)
        assert _resident([path]) == 0
        assert len(WindowReader(1 << 20).read(fd, 4 << 20, 100)) == (4 << 20) - 100
        assert _resident([path]) > 0  # the control: a buffered read fills it
    finally:
        os.close(fd)


# ---- crcmerkle scan's flags ------------------------------------------------------------------


class _Calls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, refuse: Optional[str] = None) -> None:
        self.scans: List[Dict[str, Any]] = []
        self.idle: List[str] = []
        self.restored: List[Any] = []
        real = scan_module.scan_paths

        def scan_paths(paths: Any, **kw: Any) -> Any:
            self.scans.append(kw)
            return real(paths, **kw)

        monkeypatch.setattr(scan_module, "scan_paths", scan_paths)
        monkeypatch.setattr(politeio, "io_priority", lambda: (2, 4))
        monkeypatch.setattr(
            politeio, "set_idle_io_priority", lambda: self.idle.append("set") or refuse
        )
        monkeypatch.setattr(politeio, "set_io_priority", lambda p: self.restored.append(p))


def _cli(capsys: pytest.CaptureFixture, *argv: Any) -> Tuple[int, str, str]:
    status = main([os.fspath(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_defaults_idle_io_and_drop_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    root = _replica(tmp_path / "v" / "7")
    calls = _Calls(monkeypatch)
    st, out, err = _cli(capsys, "scan", "--json", root)
    assert st == 0, err
    (kw,) = calls.scans
    assert kw["drop_cache"] is True and kw["bytes_per_second"] is None
    assert calls.idle == ["set"] and calls.restored == [(2, 4)]
    summary = json.loads(out)["summary"]
    assert (summary["idle_io"], summary["drop_cache"], summary["bytes_per_second"]) == (
        True,
        True,
        None,
    )


def test_cli_flags_reach_the_scanner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    root = _replica(tmp_path / "v" / "7")
    calls = _Calls(monkeypatch)
    st, out, err = _cli(
        capsys, "scan", "--json", "--bytes-per-second", "5MiB", "--no-idle-io", "--keep-cache", root
    )
    assert st == 0, err
    (kw,) = calls.scans
    assert kw["drop_cache"] is False and kw["bytes_per_second"] == 5 * 1024 * 1024
    assert calls.idle == [] and calls.restored == []
    summary = json.loads(out)["summary"]
    assert (summary["idle_io"], summary["drop_cache"]) == (False, False)
    st, _, err = _cli(capsys, "scan", "--rate", "1000000", "--no-write", root)
    assert st == 0, err
    assert calls.scans[-1]["bytes_per_second"] == 1000000  # --rate: the same option
    # 0 is unlimited, as in `spark scan` (issue 36 item 14): no limiter at all
    st, _, err = _cli(capsys, "scan", "--bytes-per-second", "0", "--no-write", root)
    assert st == 0, err
    assert calls.scans[-1]["bytes_per_second"] is None


def test_cli_explicit_idle_io_says_why_it_could_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    root = _replica(tmp_path / "v" / "7")
    calls = _Calls(monkeypatch, refuse="ioprio_set refused the idle I/O class: EPERM")
    st, _, err = _cli(capsys, "scan", "--idle-io", root)
    assert st == 0 and err.strip() == (
        "crcmerkle: note: ioprio_set refused the idle I/O class: EPERM"
    )
    assert calls.restored == []  # nothing was set: nothing to put back
    st, _, err = _cli(capsys, "scan", root)  # the default says nothing
    assert st == 0 and err == ""


def test_cli_scan_leaves_the_callers_io_class_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    if politeio.io_priority() is None:
        pytest.skip("ioprio_get is not available here (not Linux, or an unknown CPU)")
    root = _replica(tmp_path / "v" / "7")

    def body() -> Tuple[Any, int, Any, Any]:
        before = politeio.io_priority()
        seen: List[Any] = []
        real = scan_module.scan_paths

        def spy(paths: Any, **kw: Any) -> Any:
            seen.append(politeio.io_priority())
            return real(paths, **kw)

        scan_module.scan_paths = spy
        try:
            status = main(["scan", "--no-write", os.fspath(root)])
        finally:
            scan_module.scan_paths = real
        return before, status, seen, politeio.io_priority()

    before, status, seen, after = _in_thread(body)
    capsys.readouterr()
    assert status == 0 and after == before
    if seen != [(politeio.IOPRIO_CLASS_IDLE, 0)]:
        pytest.skip(f"the kernel did not set the idle class here (read {seen})")
