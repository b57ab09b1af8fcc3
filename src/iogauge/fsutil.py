"""Small filesystem helpers shared by the store and the guarantee's state file."""

from __future__ import annotations

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
