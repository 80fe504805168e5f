"""The demo's working directory, made safe for a command that may run as root: absent, empty
or holding only an earlier demo (its marker and the entries a demo writes); owned by this
user or root and writable by nobody else, nor its parents; prepared, cleared and cleaned up
through a descriptor of the directory, never following a link (`crcmerkle spark demo --dir`,
also with --hosts).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from merkle.cli import CLIError

__all__ = ["DEMO_ENTRIES", "DEMO_MARKER", "check_demo_dir", "prepare_demo_dir"]


#: Marker file of a demo directory: a later demo may reuse a directory holding only this run.
DEMO_MARKER = ".crcmerkle-demo"


#: What a demo writes into its directory (anything else there is not ours: refuse it).
DEMO_ENTRIES = {
    DEMO_MARKER,
    "cluster",
    "scan",
    "rescan",
    "report.json",
    "report-after-repair.json",
    # the reports' full command lists (spark_udfs.jobs.report)
    "report.json.commands",
    "report-after-repair.json.commands",
    # the decommission step (spark_udfs.demo.decommission)
    "plan-cluster",
    "plan-scan",
    "plan-scan-after",
    "plan.json",
    # the copy-check step (spark_udfs.demo.copies)
    "copies",
    "copycheck",
    "copycheck.json",
    # --hosts: the inventory of the simulated hosts (spark_udfs.rehearsal.demo)
    "datanodes.json",
}


def check_demo_dir(work: str) -> None:
    """CLIError unless `work` is absent, empty, or holds only an earlier demo (its marker
    file and the entries a demo writes), and is a directory only this user (or root) can
    change: a directory another user prepared, or a link, is refused (they could swap its
    entries for links to root's files while the demo writes). Changes nothing."""
    try:
        st = os.lstat(work)
    except FileNotFoundError:
        _check_trusted_parents(work)
        return
    if stat.S_ISLNK(st.st_mode):
        raise CLIError(f"{work}: is a symbolic link (give --dir a real directory)")
    if not stat.S_ISDIR(st.st_mode):
        raise CLIError(f"{work}: exists and is not a directory (give --dir a new directory)")
    _check_trusted(work, st)
    _check_trusted_parents(work)
    entries = set(os.listdir(work))
    if entries and (DEMO_MARKER not in entries or not entries <= DEMO_ENTRIES):
        raise CLIError(
            f"{work}: exists and is not empty, and is not an earlier demo's "
            "directory (give --dir a new directory)"
        )


def _check_trusted(path: str, st: os.stat_result) -> None:
    """CLIError unless `path` (its lstat `st`) is owned by this user or root, and writable by
    nobody else unless sticky (as /tmp: others cannot rename or remove what is ours)."""
    if st.st_uid not in (os.geteuid(), 0):
        raise CLIError(
            f"{path}: --dir is owned by another user (uid {st.st_uid}); give "
            "--dir a directory of your own"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        raise CLIError(
            f"{path}: --dir is writable by other users; give --dir a directory of your own"
        )


def _check_trusted_parents(work: str) -> None:
    """The directories above `work` (as given, links resolved) must be owned by this user or
    root, and writable by nobody else unless sticky: whoever can rename an entry there can
    put a link where the demo writes."""
    parent = Path(os.path.abspath(work)).parent.resolve()
    for d in [parent, *parent.parents]:
        try:
            st = os.stat(d)
        except FileNotFoundError:
            continue  # made by this demo (mkdir -p)
        if st.st_uid not in (os.geteuid(), 0) or (
            st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX
        ):
            raise CLIError(
                f"{work}: its parent {d} can be changed by another user "
                f"(uid {st.st_uid}, mode {stat.filemode(st.st_mode)}); give --dir "
                "a directory of your own"
            )


def _open_demo_dir(work: str) -> int:
    """A descriptor of the demo directory, opened without following a link, and checked
    again on the descriptor (the path may have changed since check_demo_dir)."""
    try:
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise CLIError(f"{work}: {exc.strerror or exc} (give --dir a real directory)") from None
    try:
        _check_trusted(work, os.fstat(fd))
    except CLIError:
        os.close(fd)
        raise
    return fd


def _remove_at(dir_fd: int, name: str) -> None:
    """Remove the entry `name` of the directory `dir_fd`, a directory with its contents; a
    link is removed itself, never followed (each level is opened with O_NOFOLLOW)."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        for entry in os.listdir(fd):
            _remove_at(fd, entry)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def _write_marker(dir_fd: int) -> None:
    """The marker, created new (O_CREAT|O_EXCL|O_NOFOLLOW): never written through a link."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(DEMO_MARKER, dir_fd=dir_fd)
    fd = os.open(
        DEMO_MARKER,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
        dir_fd=dir_fd,
    )
    with os.fdopen(fd, "w") as f:
        f.write("written by 'crcmerkle spark demo'; a later demo may replace this directory\n")


def prepare_demo_dir(work: str) -> bool:
    """Make `work` ready for a demo (see check_demo_dir): create it, or clear an earlier
    demo from it, and write the marker, all through a descriptor of the directory: no link
    is followed. Returns True when this call created the directory (so a failed run may
    remove it)."""
    check_demo_dir(work)
    created = False
    if not os.path.lexists(work):
        os.makedirs(os.path.dirname(os.path.abspath(work)), exist_ok=True)
        try:
            os.mkdir(work, 0o755)
            created = True
        except FileExistsError:
            check_demo_dir(work)  # appeared meanwhile: judge it as any existing directory
    fd = _open_demo_dir(work)
    try:
        entries = set(os.listdir(fd))
        if entries and (DEMO_MARKER not in entries or not entries <= DEMO_ENTRIES):
            raise CLIError(
                f"{work}: exists and is not empty, and is not an earlier demo's "
                "directory (give --dir a new directory)"
            )
        for name in entries - {DEMO_MARKER}:  # an earlier demo: replace it
            _remove_at(fd, name)
        _write_marker(fd)
    except OSError as exc:
        raise CLIError(
            f"{work}: cannot prepare the demo directory: {exc.strerror or exc}"
        ) from None
    finally:
        os.close(fd)
    return created


def _clean_failed_demo(work: str, created: bool) -> None:
    """After a failed or interrupted demo: remove what it wrote (keep the marker, so the
    next run accepts the directory; remove the directory itself if this run created it).
    Through a descriptor of the directory: a link put in its place is removed, not followed."""
    try:
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # gone, or replaced by a link: nothing of ours to remove through it
    try:
        for name in sorted(DEMO_ENTRIES - {DEMO_MARKER} if not created else set(os.listdir(fd))):
            with contextlib.suppress(FileNotFoundError):
                _remove_at(fd, name)
    except OSError:
        pass  # best effort: the run's own error is what is reported
    finally:
        os.close(fd)
    if created:
        with contextlib.suppress(OSError):
            os.rmdir(work)
