"""Dry run: validate and read like the real hierarchy, print every write instead of doing it.

Reads (limits in force, counters) go to the real files, so a dry run shows what the
controller would decide on this machine right now; writes are printed as the exact line
that would be written and to which file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from iogauge.guarantee.actuators.base import DevNum, Hierarchy, IoKey
from iogauge.guarantee.actuators.cgroup_v1 import FILES as V1_FILES
from iogauge.guarantee.policy import MAX_LIMIT_IOPS, GroupLimit


class DryRun:
    """Wraps a real :class:`Hierarchy`; ``say`` receives one line per would-be write."""

    kind = "dry-run"

    def __init__(self, inner: Hierarchy, say: Callable[[str], None]) -> None:
        self.inner = inner
        self.root = inner.root
        self.say = say
        self.writes: list[tuple[Path, str]] = []

    def check_group(self, group: Path) -> None:
        self.inner.check_group(group)

    def read_limit(self, group: Path, dev: DevNum) -> GroupLimit:
        return self.inner.read_limit(group, dev)

    def write_limit(self, group: Path, dev: DevNum, key: IoKey, value: int | None) -> None:
        if self.inner.kind == "cgroup-v1":
            path = group / V1_FILES[key]
            line = f"{dev} {0 if value is None else min(max(value, 1), MAX_LIMIT_IOPS)}"
        else:
            path = group / "io.max"
            v = "max" if value is None else str(min(max(value, 1), MAX_LIMIT_IOPS))
            line = f"{dev} {key}={v}"
        self.writes.append((path, line))
        self.say(f"dry run: would write {line!r} to {path}")

    def read_counts(self, group: Path, dev: DevNum) -> tuple[int, int]:
        return self.inner.read_counts(group, dev)

    def read_stall_us(self, group: Path) -> int | None:
        return self.inner.read_stall_us(group)


__all__ = ["DryRun"]
