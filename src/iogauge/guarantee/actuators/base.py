"""What every actuator shares: device numbers, the two limit keys, the kernel-file reads and
writes, and the :class:`Hierarchy` protocol (apart from the package, so the cgroup modules
and the package's detection do not import each other)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.policy import GroupLimit

IoKey = Literal["riops", "wiops"]
IO_KEYS: tuple[IoKey, ...] = ("riops", "wiops")


@dataclass(frozen=True, order=True)
class DevNum:
    """A block device number, written ``major:minor`` as cgroup files spell it."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}:{self.minor}"

    @classmethod
    def parse(cls, text: str) -> DevNum:
        """``"8:16"`` -> DevNum(8, 16); ValueError otherwise."""
        a, sep, b = text.strip().partition(":")
        if not sep or not a.isdigit() or not b.isdigit():
            raise ValueError(f"{text!r} is not a major:minor device number")
        return cls(int(a), int(b))


def read_text(path: Path) -> str:
    """A cgroup file's text; GuaranteeError naming the file and the reason otherwise."""
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        raise GuaranteeError(f"{path} does not exist (was the cgroup removed?)") from None
    except PermissionError:
        raise GuaranteeError(f"permission denied reading {path}: iogauge guarantee needs "
                             "root") from None
    except OSError as exc:
        raise GuaranteeError(f"cannot read {path}: {exc.strerror or exc}") from exc


def write_text(path: Path, text: str, dev: DevNum | None = None) -> None:
    """Write ``text`` with one write(2), as cgroup files require; clear errors by errno."""
    data = text.encode("ascii")
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        raise GuaranteeError(f"{path} does not exist (was the cgroup removed?)") from None
    except PermissionError:
        raise GuaranteeError(f"permission denied writing {path}: iogauge guarantee needs "
                             "root (or use --dry-run)") from None
    except OSError as exc:
        raise GuaranteeError(f"cannot open {path}: {exc.strerror or exc}") from exc
    try:
        n = os.write(fd, data)
        if n != len(data):
            raise GuaranteeError(f"short write to {path}: {n} of {len(data)} bytes")
    except OSError as exc:
        if exc.errno == errno.ENODEV:
            raise GuaranteeError(f"the kernel refused device {dev} in {path} (ENODEV): it is "
                                 "not a whole disk with a request queue, or it is gone"
                                 ) from exc
        if exc.errno in (errno.EPERM, errno.EACCES):
            raise GuaranteeError(f"permission denied writing {path}: iogauge guarantee "
                                 "needs root (or use --dry-run)") from exc
        raise GuaranteeError(f"the kernel refused {text.strip()!r} in {path}: "
                             f"{exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def parse_int_value(text: str) -> int | None:
    """A limit value from a cgroup file: ``max`` (v2) or 0 (v1 never prints 0) -> None."""
    if text == "max":
        return None
    v = int(text)
    return None if v == 0 else v


# ---- the hierarchy interface -------------------------------------------------------------
class Hierarchy(Protocol):
    """One cgroup hierarchy that can throttle block I/O (v1 blkio or v2 io).

    Attributes:
        kind: ``"cgroup-v1"``, ``"cgroup-v2"`` or ``"dry-run"``.
        root: the hierarchy's mount point.
    """

    kind: str
    root: Path

    def check_group(self, group: Path) -> None:
        """Raise GuaranteeError unless limits can be set and counters read in ``group``."""
        ...

    def read_limit(self, group: Path, dev: DevNum) -> GroupLimit:
        """The riops/wiops limits currently in force for ``dev`` in ``group`` (None = none)."""
        ...

    def write_limit(self, group: Path, dev: DevNum, key: IoKey, value: int | None) -> None:
        """Set one limit (None removes it); nothing else in the file changes."""
        ...

    def read_counts(self, group: Path, dev: DevNum) -> tuple[int, int]:
        """Cumulative (reads, writes) of ``group`` and its descendants on ``dev``."""
        ...

    def read_stall_us(self, group: Path) -> int | None:
        """Cumulative µs some task of ``group`` stalled on I/O (PSI), None if unavailable."""
        ...


__all__ = ["IO_KEYS", "DevNum", "Hierarchy", "IoKey", "parse_int_value", "read_text",
           "write_text"]
