"""Actuators: where B's IOPS limits are written, and the per-cgroup counters read beside them.

Three implementations of :class:`Hierarchy`:

* :class:`~iogauge.guarantee.actuators.cgroup_v2.CgroupV2` — ``io.max`` ``riops=``/``wiops=``
  and ``io.stat`` ``rios``/``wios`` (Documentation/admin-guide/cgroup-v2.rst, "IO").
* :class:`~iogauge.guarantee.actuators.cgroup_v1.CgroupV1` — ``blkio.throttle.read_iops_device``
  / ``write_iops_device`` and ``blkio.throttle.io_serviced_recursive``
  (Documentation/admin-guide/cgroup-v1/blkio-controller.rst). v1 throttles only I/O that
  reaches the device in the cgroup's context: direct I/O and reads, not buffered writes
  flushed later by writeback (that is v2's cgroup writeback).
* :class:`~iogauge.guarantee.actuators.dry_run.DryRun` — reads through to a real hierarchy,
  prints what it would write and writes nothing.

:func:`detect` picks v1 or v2 from the mount a cgroup directory lives on;
:func:`resolve_device` turns ``/dev/sdb1``, ``sdb1`` or ``8:17`` into the whole disk's
major:minor (throttling and per-cgroup statistics are per disk: the kernel refuses a
partition's number in ``io.max`` with ENODEV).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from iogauge.collector.sysfs import read_device_info, sysfs_name
from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators.base import (
    IO_KEYS,
    DevNum,
    Hierarchy,
    IoKey,
    parse_int_value,
    read_text,
    write_text,
)
from iogauge.model.device import DeviceInfo


@dataclass(frozen=True)
class BlockDevice:
    """The device to guarantee on, resolved to what the kernel throttles.

    Attributes:
        spec: what the user gave (``/dev/sdb1``, ``sdb1``, ``8:17``).
        name: kernel name of the device given (``sdb1``).
        disk: kernel name of the whole disk the limits apply to (``sdb``).
        devnum: the disk's major:minor, as written to io.max / blkio files.
        partition: the partition's name when one was given (its disk is throttled), else None.
        info: sysfs facts about the disk (rotational, kind, slaves...).
    """

    spec: str
    name: str
    disk: str
    devnum: DevNum
    partition: str | None
    info: DeviceInfo

    @property
    def parallel(self) -> bool:
        """True where %util is not a capacity measure ([sysstat] iostat(1)): the analysis'
        service model of the disk from its labels (``service_model.decide`` without
        samples: the controller starts before it has any). Non-rotational media (SSD,
        NVMe), md arrays and dm devices over several members are parallel; a rotational
        disk, a loop device, or a dm device over one device of unknown media counts as one
        spindle. ``--capacity-model`` overrides it."""
        from iogauge.analysis.service_model import (  # noqa: PLC0415 - polars/numpy only here
            ServiceModel,
            decide,
        )

        i = self.info
        return decide(i.name, i.kind, i, None, None, None).model is ServiceModel.PARALLEL


def _name_of_devnum(dev: DevNum, sysfs_root: Path) -> str | None:
    link = sysfs_root / "dev" / "block" / str(dev)
    try:
        return link.resolve(strict=True).name.replace("!", "/")
    except OSError:
        pass
    cls = sysfs_root / "class" / "block"
    candidates: Iterable[Path] = cls.iterdir() if cls.is_dir() else ()
    block = sysfs_root / "block"
    if block.is_dir():
        candidates = [*candidates, *block.iterdir(),
                      *(p for d in block.iterdir() if d.is_dir() for p in d.iterdir()
                        if (p / "partition").exists())]
    for p in candidates:
        try:
            if (p / "dev").read_text().strip() == str(dev):
                return p.name.replace("!", "/")
        except OSError:
            continue
    return None


def resolve_device(spec: str, sysfs_root: str | Path = "/sys") -> BlockDevice:
    """The whole disk to throttle for ``spec`` (a /dev path, a kernel name, or major:minor).

    Raises:
        GuaranteeError: the device does not exist or sysfs does not know it.
    """
    root = Path(sysfs_root)
    name: str | None
    if spec.startswith("/"):
        try:
            st = Path(spec).stat()
        except OSError as exc:
            raise GuaranteeError(f"device {spec}: {exc.strerror or exc}") from exc
        if not stat.S_ISBLK(st.st_mode):
            raise GuaranteeError(f"{spec} is not a block device")
        dev = DevNum(os.major(st.st_rdev), os.minor(st.st_rdev))
        name = _name_of_devnum(dev, root)
        if name is None:
            raise GuaranteeError(f"{spec} is block device {dev} but {root} does not list it")
    elif ":" in spec:
        try:
            dev = DevNum.parse(spec)
        except ValueError as exc:
            raise GuaranteeError(f"device {spec!r}: {exc}") from None
        name = _name_of_devnum(dev, root)
        if name is None:
            raise GuaranteeError(f"no block device {dev} in {root}/dev/block")
    else:
        name = spec
    sname = sysfs_name(name)
    if not ((root / "class" / "block" / sname).exists() or (root / "block" / sname).exists()
            or any((d / sname / "partition").exists() for d in _dirs(root / "block"))):
        known = sorted(p.name for p in _dirs(root / "block"))
        raise GuaranteeError(f"unknown device {spec!r}: not in {root}/class/block "
                             f"(block devices here: {', '.join(known) or 'none'})")
    info = read_device_info(name, root)
    partition = None
    disk = name
    if info.kind == "partition":
        if info.parent is None:
            raise GuaranteeError(f"{name} is a partition but its disk is unknown in {root}")
        partition, disk = name, info.parent
        info = read_device_info(disk, root)
    if info.major is None or info.minor is None:
        raise GuaranteeError(f"{disk}: {root}/block/{sysfs_name(disk)}/dev is missing or "
                             "unreadable; cannot tell its major:minor")
    return BlockDevice(spec, name, disk, DevNum(info.major, info.minor), partition, info)


def _dirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except OSError:
        return []


# ---- file access -------------------------------------------------------------------------
_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mounts that matters here."""

    mountpoint: Path
    fstype: str
    options: tuple[str, ...]


def read_mounts(mounts_file: str | Path = "/proc/self/mounts") -> list[Mount]:
    """cgroup and cgroup2 mounts (octal escapes such as ``\\040`` undone)."""
    text = read_text(Path(mounts_file))
    out: list[Mount] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[2] not in ("cgroup", "cgroup2"):
            continue
        mp = _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), parts[1])
        out.append(Mount(Path(mp), parts[2], tuple(parts[3].split(","))))
    return out


def detect(group: Path, mounts: Sequence[Mount]) -> Hierarchy:
    """The hierarchy ``group`` (an absolute cgroup directory) belongs to.

    Raises:
        GuaranteeError: not absolute, not on a cgroup mount, on a v1 hierarchy without the
            blkio controller, or on a cgroup2 mount whose io controller is unavailable.
    """
    # Imported here: both modules import DevNum & co. from this package (no cycle at load).
    from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1  # noqa: PLC0415
    from iogauge.guarantee.actuators.cgroup_v2 import CgroupV2  # noqa: PLC0415

    if not group.is_absolute():
        raise GuaranteeError(f"cgroup directory {group} must be an absolute path (e.g. "
                             "/sys/fs/cgroup/backup.slice or /sys/fs/cgroup/blkio/backup)")
    best: Mount | None = None
    for m in mounts:
        inside = group == m.mountpoint or m.mountpoint in group.parents
        if inside and (best is None or len(m.mountpoint.parts) > len(best.mountpoint.parts)):
            best = m
    if best is None:
        where = ", ".join(f"{m.mountpoint} ({m.fstype})" for m in mounts) or "none"
        raise GuaranteeError(f"{group} is not inside a cgroup mount (cgroup mounts: {where})")
    if best.fstype == "cgroup2":
        return CgroupV2(best.mountpoint)
    if "blkio" not in best.options:
        v1blk = [str(m.mountpoint) for m in mounts if m.fstype == "cgroup"
                 and "blkio" in m.options]
        hint = f"; the blkio hierarchy is {v1blk[0]}" if v1blk else ""
        ctl = ",".join(o for o in best.options if o not in ("rw", "ro", "relatime",
                                                            "nosuid", "nodev", "noexec"))
        raise GuaranteeError(f"{group} is in the cgroup v1 hierarchy {best.mountpoint} "
                             f"({ctl}), which has no blkio controller{hint}")
    return CgroupV1(best.mountpoint)


def check_layout(protected: Sequence[Path], throttled: Sequence[Path]) -> None:
    """Refuse group layouts that would throttle A or mix A's counters with B's.

    A throttled directory that is (or contains) a protected one would throttle A: limits
    are hierarchical in v2 and in v1's blk-throttle. A protected directory that contains a
    throttled one would count B's I/O as A's (io.stat and *_recursive are hierarchical).
    """
    for b in throttled:
        for a in protected:
            if a == b:
                raise GuaranteeError(f"{a} is both protected and throttled; A is never "
                                     "throttled")
            if b in a.parents:
                raise GuaranteeError(f"throttled cgroup {b} contains protected cgroup {a}: "
                                     "its limits would apply to A too")
            if a in b.parents:
                raise GuaranteeError(f"protected cgroup {a} contains throttled cgroup {b}: "
                                     "A's counters would include B's I/O; protect a sibling "
                                     "directory instead")


__all__ = [
    "IO_KEYS", "BlockDevice", "DevNum", "Hierarchy", "IoKey", "Mount", "check_layout", "detect",
    "parse_int_value", "read_mounts", "read_text", "resolve_device", "write_text",
]
