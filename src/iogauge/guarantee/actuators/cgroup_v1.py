"""cgroup v1 ``blkio`` throttling (Documentation/admin-guide/cgroup-v1/blkio-controller.rst).

Files, per cgroup directory:

* ``blkio.throttle.read_iops_device`` / ``blkio.throttle.write_iops_device`` — one line
  ``MAJ:MIN IOPS`` per limited device. Writing ``MAJ:MIN N`` sets the limit, ``MAJ:MIN 0``
  removes it (block/blk-throttle.c ``tg_set_conf``: 0 means unlimited); other devices'
  lines are untouched. Values are ``unsigned int``: larger numbers wrap, so callers clamp.
* ``blkio.throttle.io_serviced_recursive`` (``io_serviced`` on kernels without it) — lines
  ``MAJ:MIN Read N``, ``Write``, ``Sync``, ``Async``, ``Discard``, ``Total`` and a final
  ``Total N``: I/Os of the cgroup *and its descendants* that passed the throttle.

v1 throttles I/O issued in the cgroup's context: direct I/O and reads; buffered writes are
flushed by writeback threads in the root cgroup and escape it (v2's cgroup writeback fixes
that). v1 has no per-cgroup pressure (PSI) files.
"""

from __future__ import annotations

from pathlib import Path

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators.base import DevNum, IoKey, parse_int_value, read_text, write_text
from iogauge.guarantee.policy import MAX_LIMIT_IOPS, GroupLimit

FILES: dict[IoKey, str] = {
    "riops": "blkio.throttle.read_iops_device",
    "wiops": "blkio.throttle.write_iops_device",
}
SERVICED = ("blkio.throttle.io_serviced_recursive", "blkio.throttle.io_serviced")


def parse_limits(text: str) -> dict[DevNum, int]:
    """``MAJ:MIN N`` lines -> {device: limit}; malformed lines are skipped."""
    out: dict[DevNum, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        try:
            dev = DevNum.parse(parts[0])
            v = parse_int_value(parts[1])
        except ValueError:
            continue
        if v is not None:
            out[dev] = v
    return out


def parse_serviced(text: str, dev: DevNum) -> tuple[int, int]:
    """(Read, Write) of ``dev`` from an io_serviced file; (0, 0) when it has no line yet."""
    reads = writes = 0
    key = str(dev)
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == key and parts[2].isdigit():
            if parts[1] == "Read":
                reads = int(parts[2])
            elif parts[1] == "Write":
                writes = int(parts[2])
    return reads, writes


class CgroupV1:
    """A v1 hierarchy with the blkio controller, mounted at ``root``."""

    kind = "cgroup-v1"

    def __init__(self, root: Path) -> None:
        self.root = root

    def check_group(self, group: Path) -> None:
        if not group.is_dir():
            raise GuaranteeError(f"unknown cgroup {group}: no such directory (create it with "
                                 f"mkdir and move the workload's processes into its "
                                 "cgroup.procs)")
        if not (group / FILES["riops"]).exists():
            if (group / "blkio.weight").exists() or (group / "cgroup.procs").exists():
                raise GuaranteeError(f"{group} has no {FILES['riops']}: the kernel lacks "
                                     "blk-throttle (CONFIG_BLK_DEV_THROTTLING)")
            raise GuaranteeError(f"{group} is not a blkio cgroup directory")
        self._serviced(group)

    def read_limit(self, group: Path, dev: DevNum) -> GroupLimit:
        r = parse_limits(read_text(group / FILES["riops"])).get(dev)
        w = parse_limits(read_text(group / FILES["wiops"])).get(dev)
        return GroupLimit(r, w)

    def write_limit(self, group: Path, dev: DevNum, key: IoKey, value: int | None) -> None:
        v = 0 if value is None else min(max(int(value), 1), MAX_LIMIT_IOPS)
        write_text(group / FILES[key], f"{dev} {v}\n", dev)

    def read_counts(self, group: Path, dev: DevNum) -> tuple[int, int]:
        return parse_serviced(read_text(self._serviced(group)), dev)

    def read_stall_us(self, group: Path) -> int | None:
        return None

    def _serviced(self, group: Path) -> Path:
        for name in SERVICED:
            p = group / name
            if p.exists():
                return p
        raise GuaranteeError(f"{group} has no {SERVICED[0]} (nor {SERVICED[1]}): cannot "
                             "count its I/O")


__all__ = ["FILES", "SERVICED", "CgroupV1", "parse_limits", "parse_serviced"]
