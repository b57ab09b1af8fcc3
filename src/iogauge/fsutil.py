"""Small filesystem helpers shared by the store and the guarantee's state file."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a rename/unlink in ``directory`` durable (best effort: some filesystems refuse).

    A file's own fsync does not persist its directory entry; after a crash the new name
    could be missing without this (fsync(2), "Calling fsync() does not necessarily ensure
    that the entry in the directory containing the file has also reached disk").
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def lock_with_pid(fd: int) -> str | None:
    """Take an exclusive ``flock`` on ``fd`` without waiting and write this process's PID
    in the file, for the refusal message of the next comer. None when taken; else the PID
    the holder wrote ("?" if none), with ``fd`` closed. The kernel drops the lock when its
    holder dies (``kill -9`` included), so a crash never leaves a stale lock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            return os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        finally:
            os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return None
