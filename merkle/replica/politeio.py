"""Polite I/O for scans of a live datanode: a byte rate, the page cache left as it was, and
the kernel's idle I/O class.

A datanode serves clients while it is scanned. A scan reads every byte of every disk once,
so unless it is held back it takes the disks' time, and the page cache it fills evicts the
data the datanode's clients are using. Three things keep it polite:

* a per-volume byte rate (DEFAULT_BYTES_PER_SECOND, merkle.replica.results.RateLimiter);
* `drop_cached`: POSIX_FADV_DONTNEED on each range once the scanner holds its bytes (the
  verifier's `drop_cache` option), so the scan leaves the page cache as it found it;
* `set_idle_io_priority`: the calling thread's I/O in the kernel's idle class, served only
  when no one else needs the disk, where the block device's scheduler honours classes
  (see its docstring and `scheduler_note`);
* `direct_twin`: a second descriptor of an open file that reads past the page cache
  (O_DIRECT), for scans that read whole files once: the disk DMAs into the scanner's buffer,
  so the read costs the kernel no page-cache pages and no copy (measured in a VM: 0.03-0.04
  CPU-seconds per GB against 0.35-0.8 buffered, bench/simhosts_bookie_rates.py), and
  leaves the cache as it was without a DONTNEED.

Every function here is best effort and never raises: a scan that cannot be polite in one of
these ways still runs, and the callers say why in one line.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = [
    "DEFAULT_BYTES_PER_SECOND",
    "IOPRIO_CLASS_BE",
    "IOPRIO_CLASS_IDLE",
    "IOPRIO_CLASS_NONE",
    "IOPRIO_CLASS_RT",
    "DIRECT_ALIGN",
    "direct_twin",
    "drop_cached",
    "io_priority",
    "schedulers_of",
    "scheduler_note",
    "set_idle_io_priority",
    "set_io_priority",
]

#: The default per-volume byte rate of a scan of a live datanode: 16 MiB/s.
#:
#: Its cost: one pass over a 16 TB disk takes 16e12 / 16 MiB/s = 954,000 s = 11.0 days
#: (Ozone's own scanner, hdds.container.scrub.volume.bytes.per.second = 5242880, 5 MiB/s,
#: takes 35.3 days; HDFS's block scanner, 1 MiB/s, 177 days). It is 8.4 % of a 200 MB/s
#: HDD's sequential bandwidth. On a disk also serving random client reads, each of the
#: scan's reads may cost a seek (about 8 ms on a 7200 rpm disk) on top of its transfer: at
#: the default 1 MiB reads that is 16 reads/s x (8 + 5) ms = about 21 % of the disk's time
#: at worst, less when the scan's reads are larger or the clients' are sequential. That is
#: the budget this default spends, 3.2 times Ozone's for a pass 3.2 times as fast; with the
#: idle I/O class on a scheduler that honours it, the clients' requests go first anyway.
#: The CPU it costs is small: measured on a 2-core Zen 3 VM, a cold scan of 547 MB at this
#: rate took 32.7 s and 0.45-0.59 CPU-seconds, 1.4-1.8 % of a core per volume (12 disks:
#: about 0.2 core).
DEFAULT_BYTES_PER_SECOND = 16 * 1024 * 1024

# ioprio_set(2) / ioprio_get(2): linux/ioprio.h
IOPRIO_CLASS_NONE = 0
IOPRIO_CLASS_RT = 1
IOPRIO_CLASS_BE = 2
IOPRIO_CLASS_IDLE = 3
_IOPRIO_CLASS_SHIFT = 13
_IOPRIO_PRIO_MASK = (1 << _IOPRIO_CLASS_SHIFT) - 1
_IOPRIO_WHO_PROCESS = 1

#: (ioprio_set, ioprio_get) by machine: x86_64's own table, and the generic table
#: (asm-generic/unistd.h) aarch64 uses
_SYSCALLS: Dict[str, Tuple[int, int]] = {
    "x86_64": (251, 252),
    "amd64": (251, 252),
    "aarch64": (30, 31),
    "arm64": (30, 31),
}

#: schedulers that honour the idle class: bfq fully (an idle queue is served only when no
#: other queue has had I/O for a moment); mq-deadline (Linux 5.14+, it then has
#: iosched/prio_aging_expire) dispatches idle requests after the others but ages them in
#: after prio_aging_expire (10 s by default); none and kyber ignore I/O classes
_HONOURING = ("bfq", "mq-deadline")


def _ioprio_value(klass: int, data: int) -> int:
    return (klass << _IOPRIO_CLASS_SHIFT) | data


def _syscall_numbers() -> Tuple[Optional[Tuple[int, int]], Optional[str]]:
    if not sys.platform.startswith("linux"):
        return None, f"I/O classes are a Linux feature (this is {sys.platform})"
    machine = platform.machine().lower()
    numbers = _SYSCALLS.get(machine)
    if numbers is None:
        return None, f"ioprio_set's syscall number is not known for {machine or 'this CPU'}"
    return numbers, None


def _syscall(number: int, *args: int) -> Tuple[int, int]:
    """(return value, errno) of syscall(number, *args) through libc."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.syscall
    fn.restype = ctypes.c_long
    ctypes.set_errno(0)
    ret = fn(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    return int(ret), ctypes.get_errno()


def set_idle_io_priority() -> Optional[str]:
    """Put the calling thread's I/O in the kernel's idle class (ioprio_set(IOPRIO_WHO_PROCESS,
    0, IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0))): None when done, else a one-line reason
    (not Linux, a CPU whose syscall number is not known here, EPERM...). Never raises.

    The class is the calling thread's: threads it starts afterwards inherit it (the verifier's
    worker threads are started per replica, after), threads already running keep theirs, so
    call it first. `set_io_priority(previous)` puts back what io_priority() read before (the
    best-effort and none classes need no privilege).

    Only some block schedulers honour it (scheduler_note says which a path's device uses):
    bfq serves an idle-class request only when no other class has I/O pending for a moment
    (under a constant client load the scan then waits: `--no-idle-io` when a scan must end);
    mq-deadline (Linux 5.14+) dispatches it after the other classes' requests, but lets it
    through once it has waited prio_aging_expire (10 s by default); with none (the usual
    choice for NVMe and virtual disks) and kyber the class changes nothing, and the byte
    rate is what holds the scan back.
    """
    try:
        numbers, why = _syscall_numbers()
        if numbers is None:
            return why
        ret, err = _syscall(numbers[0], _IOPRIO_WHO_PROCESS, 0, _ioprio_value(IOPRIO_CLASS_IDLE, 0))
        if ret == 0:
            return None
        return f"ioprio_set refused the idle I/O class: {os.strerror(err or errno.EINVAL)}"
    except (OSError, AttributeError, ValueError, TypeError) as exc:  # no libc, no syscall()
        return f"ioprio_set could not be called: {exc}"


def set_io_priority(priority: Tuple[int, int]) -> Optional[str]:
    """Set the calling thread's I/O (class, data), e.g. back to what io_priority() read before
    set_idle_io_priority: None when done, else a one-line reason. Never raises."""
    try:
        numbers, why = _syscall_numbers()
        if numbers is None:
            return why
        klass, data = int(priority[0]), int(priority[1])
        ret, err = _syscall(numbers[0], _IOPRIO_WHO_PROCESS, 0, _ioprio_value(klass, data))
        if ret == 0:
            return None
        return f"ioprio_set refused class {klass} data {data}: {os.strerror(err or errno.EINVAL)}"
    except (OSError, AttributeError, ValueError, TypeError, IndexError) as exc:
        return f"ioprio_set could not be called: {exc}"


def io_priority() -> Optional[Tuple[int, int]]:
    """The calling thread's I/O (class, data) from ioprio_get(IOPRIO_WHO_PROCESS, 0), or None
    where it cannot be read (see set_idle_io_priority). A thread that never set one reads
    as the kernel derives it (class NONE or BE, data from its nice value)."""
    try:
        numbers, _why = _syscall_numbers()
        if numbers is None:
            return None
        ret, _err = _syscall(numbers[1], _IOPRIO_WHO_PROCESS, 0)
    except (OSError, AttributeError, ValueError, TypeError):
        return None
    if ret < 0:
        return None
    return ret >> _IOPRIO_CLASS_SHIFT, ret & _IOPRIO_PRIO_MASK


def drop_cached(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to drop the page cache of `length` bytes of `fd` from `offset`
    (posix_fadvise POSIX_FADV_DONTNEED), once the caller holds the bytes it read: errors
    are ignored (not every filesystem supports it; tmpfs keeps its pages, which are its
    data). The kernel drops only pages wholly inside the range (and the last, partial page
    of the file), and never dirty or mapped ones. A zero or negative length does nothing
    (for fadvise, 0 would mean "to the end of the file")."""
    if length <= 0 or offset < 0:
        return
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    try:
        advise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except (OSError, ValueError, OverflowError):
        pass


#: the alignment of O_DIRECT reads (offset, length and buffer address): 4096 covers disks of
#: 512-byte and of 4096-byte logical blocks
DIRECT_ALIGN = 4096


def direct_twin(fd: int) -> Optional[int]:
    """A second read-only descriptor of the file `fd` has open, with O_DIRECT, or None where
    the system or the file system cannot give one (tmpfs, no /proc, not Linux).

    It is opened through `/proc/self/fd/N`, which names the open file itself, not a path: a
    link or rename planted since `fd` was opened cannot redirect it, and the twin is checked
    to be the same inode. Reads through it must be aligned (DIRECT_ALIGN: offset, length and
    buffer); before reading, the kernel writes back dirty cached pages of the range (the file
    owner's own writes, which it would write anyway), so the read sees what a buffered read
    would. The caller closes it."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag or not sys.platform.startswith("linux"):
        return None
    try:
        twin = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | flag | os.O_CLOEXEC | os.O_NOCTTY)
    except (OSError, ValueError):
        return None
    try:
        a, b = os.fstat(fd), os.fstat(twin)
    except OSError:
        os.close(twin)
        return None
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
        os.close(twin)
        return None
    return twin


# ---- which scheduler a path's disk uses ------------------------------------------------------


def _read_small(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("ascii", "replace").strip()
    except OSError:
        return None


def _active(text: str) -> str:
    """The active scheduler in a queue/scheduler line ("none [mq-deadline] kyber bfq")."""
    if "[" in text and "]" in text:
        return text[text.index("[") + 1 : text.index("]")]
    return text.split()[0] if text.split() else ""


def _device_schedulers(sysdir: str, depth: int, out: Dict[str, str]) -> None:
    """The scheduler of the block device at `sysdir` (a partition's: its disk's), or of the
    devices under it (dm, md: their `slaves/`), into `out` by device name."""
    name = os.path.basename(sysdir)
    queue = os.path.join(sysdir, "queue", "scheduler")
    if not os.path.exists(queue) and os.path.exists(os.path.join(sysdir, "partition")):
        sysdir = os.path.dirname(sysdir)
        name = os.path.basename(sysdir)
        queue = os.path.join(sysdir, "queue", "scheduler")
    slaves = os.path.join(sysdir, "slaves")
    try:
        under = sorted(os.listdir(slaves)) if depth < 4 else []
    except OSError:
        under = []
    if under:
        for dev in under[:64]:
            _device_schedulers(os.path.realpath(os.path.join(slaves, dev)), depth + 1, out)
        return
    text = _read_small(queue)
    if text is None:
        return
    active = _active(text)
    if active == "mq-deadline" and not os.path.exists(
        os.path.join(sysdir, "queue", "iosched", "prio_aging_expire")
    ):
        active = "mq-deadline (before Linux 5.14: no I/O classes)"
    out[name] = active


def schedulers_of(path: str) -> Dict[str, str]:
    """The active I/O scheduler of each block device under `path`'s filesystem (device name ->
    scheduler; a dm or md device's member disks), from /sys/block/*/queue/scheduler; {}
    when it cannot be told (not Linux, a filesystem without one block device: tmpfs, btrfs,
    NFS)."""
    try:
        st = os.stat(path)
    except OSError:
        return {}
    sysdir = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(sysdir):
        return {}
    out: Dict[str, str] = {}
    _device_schedulers(os.path.realpath(sysdir), 0, out)
    return out


def scheduler_note(paths: Iterable[str]) -> Optional[str]:
    """One line saying which of `paths`' disks ignore the idle I/O class (their scheduler
    honours no classes: none, kyber), or None when every disk that can be told honours it."""
    ignoring: List[str] = []
    for path in paths:
        for dev, sched in schedulers_of(path).items():
            if sched not in _HONOURING and f"{dev} ({sched})" not in ignoring:
                ignoring.append(f"{dev} ({sched})")
    if not ignoring:
        return None
    return (
        "the idle I/O class is ignored by the scheduler of "
        + ", ".join(ignoring[:8])
        + (" ..." if len(ignoring) > 8 else "")
        + ": only the byte rate holds the scan back there (bfq or mq-deadline honour it)"
    )
