"""The FUSE file system: one file, disk.img, whose reads and writes go through the
dispatcher and take the model's time.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import time
from typing import Any

from iogauge.lab.emu.dispatcher import Dispatcher
from iogauge.lab.emu.timing import PreciseSleeper, _libc

#: Name of the one file the FUSE file system exposes.
IMAGE_NAME = "disk.img"

#: Outstanding FUSE background requests the kernel allows (its default is 12). Loop's
#: direct I/O is asynchronous: each block request is a FUSE background request, so this
#: caps the queue depth the emulated device can see. 128 = loop's default hw_queue_depth.
MAX_BACKGROUND = 128


#: fallocate(2) modes (linux/falloc.h) the loop device sends for discard/write-zeroes.
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_FALLOC_FL_ZERO_RANGE = 0x10


def _fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    res = _libc().fallocate(ctypes.c_int(fd), ctypes.c_int(mode), ctypes.c_longlong(offset),
                          ctypes.c_longlong(length))
    if res != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class DiskFileSystem:
    """FUSE operations (mfusepy, ``raw_fi=True``): ``/`` holding one file, ``disk.img``.

    Only the image's reads and writes go through the dispatcher; metadata operations are
    answered at once (a block device has no metadata, and the loop driver sends none).
    Operations not defined here are left unimplemented in libfuse (ENOSYS).
    """

    use_ns = True  # mfusepy: times as integer nanoseconds

    def __init__(self, dispatcher: Dispatcher, backing_fd: int, size_bytes: int,
                 sleeper: PreciseSleeper) -> None:
        self.dispatcher = dispatcher
        self.fd = backing_fd
        self.size = size_bytes
        self.sleeper = sleeper
        self.clock = time.monotonic
        self._mtime_ns = time.time_ns()

    # -- metadata ------------------------------------------------------------------------
    def init_with_config(self, conn: Any, config: Any) -> None:
        if conn is not None:
            conn.max_background = MAX_BACKGROUND
            conn.congestion_threshold = MAX_BACKGROUND * 3 // 4
        if config is not None:
            config.direct_io = 1  # no page cache for any opener of the image

    def getattr(self, path: str, fh: Any = None) -> dict[str, int]:
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o700, "st_nlink": 2,
                    "st_mtime": self._mtime_ns, "st_ctime": self._mtime_ns,
                    "st_atime": self._mtime_ns}
        if path == "/" + IMAGE_NAME:
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": self.size,
                    "st_blksize": 4096, "st_blocks": (self.size + 511) // 512,
                    "st_mtime": self._mtime_ns, "st_ctime": self._mtime_ns,
                    "st_atime": self._mtime_ns}
        raise OSError(errno.ENOENT, "no such file")

    def readdir(self, path: str, fh: Any) -> list[str]:
        if path != "/":
            raise OSError(errno.ENOTDIR, "not a directory")
        return [".", "..", IMAGE_NAME]

    def access(self, path: str, amode: int) -> int:
        self.getattr(path)
        return 0

    def open(self, path: str, fi: Any) -> int:
        if path != "/" + IMAGE_NAME:
            raise OSError(errno.ENOENT, "no such file")
        # FOPEN_DIRECT_IO: every read/write of this open file reaches us, never the page
        # cache; loop's O_DIRECT requests would bypass it anyway, this covers other openers.
        fi.direct_io = 1
        fi.keep_cache = 0
        fi.fh = 0
        return 0

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        if length != self.size:
            raise OSError(errno.EPERM, "the emulated disk has a fixed size")
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": self.size // 4096,
                "f_bfree": 0, "f_bavail": 0, "f_files": 1, "f_ffree": 0, "f_namemax": 255}

    def flush(self, path: str, fh: Any) -> int:
        return 0

    def release(self, path: str, fh: Any) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: Any) -> int:
        # A cache flush of the emulated disk. The models have no flush operation, and the
        # backing file is scratch space deleted on destroy: syncing it would add the host
        # disk's latency to the emulated disk's, so nothing is done.
        return 0

    def fallocate(self, path: str, mode: int, offset: int, size: int, fh: Any) -> int:
        # The loop device turns discard and write-zeroes into fallocate(PUNCH_HOLE |
        # KEEP_SIZE) / ZERO_RANGE on its backing file. Passed to the sparse backing file
        # untimed: the disk models have no discard operation.
        if offset < 0 or size < 0 or offset + size > self.size:
            raise OSError(errno.EINVAL, "range beyond the device")
        if mode & (_FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_ZERO_RANGE):
            _fallocate(self.fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, size)
            return 0
        if mode in (0, _FALLOC_FL_KEEP_SIZE):
            return 0  # allocation within a fixed-size device: nothing to do
        raise OSError(errno.EOPNOTSUPP, f"fallocate mode {mode:#x} not supported")

    # -- data ---------------------------------------------------------------------------
    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        if offset >= self.size or size <= 0:
            return b""
        size = min(size, self.size - offset)
        ticket = self.dispatcher.admit("read", offset, size)
        failed = True
        try:
            data = os.pread(self.fd, size, offset)
            if len(data) < size:  # never past EOF (ftruncated to size): holes read as 0
                data += bytes(size - len(data))
            failed = False
        finally:
            self.sleeper.sleep_until(ticket.reply_at)
            self.dispatcher.done(ticket, self.clock(), failed=failed)
        return data

    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        if offset + len(data) > self.size:
            raise OSError(errno.ENOSPC, "write beyond the end of the emulated disk")
        ticket = self.dispatcher.admit("write", offset, len(data))
        failed = True
        try:
            view = memoryview(data)
            done = 0
            while done < len(data):
                done += os.pwrite(self.fd, view[done:], offset + done)
            failed = False
        finally:
            self.sleeper.sleep_until(ticket.reply_at)
            self.dispatcher.done(ticket, self.clock(), failed=failed)
        return len(data)
