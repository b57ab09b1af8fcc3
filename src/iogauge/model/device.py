"""Device metadata: what a device is, independent of its statistics."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceInfo:
    """Static facts about one block device, read from sysfs (or given by an importer).

    Attributes:
        name: kernel name as in /proc/diskstats (sda, sda1, dm-0, nvme0n1, md0, loop3).
        kind: one of ``sampleframe.DEVICE_KINDS``.
        major, minor: device numbers (what cgroup ``io.max`` and ``blkio`` expect).
        parent: partition -> its whole disk; None for whole devices.
        dm_name: device-mapper name (``/sys/block/dm-N/dm/name``), e.g. ``vg0-root``.
        slaves: devices a dm/md device is built on (``/sys/block/X/slaves``).
        md_level: RAID level of an md array (``/sys/block/mdN/md/level``), e.g. ``raid5``.
        rotational: True for spinning media (``queue/rotational``); None if unknown.
        model, vendor: ``device/model`` and ``device/vendor``, stripped.
        queue_depth: device queue depth (SCSI ``device/queue_depth``); None if absent.
        nr_requests: block-layer queue size (``queue/nr_requests``).
        scheduler: active I/O scheduler (the bracketed entry of ``queue/scheduler``).
        size_bytes: capacity in bytes (``size`` x 512).
        backing_file: for loop devices, the file behind it (``loop/backing_file``).
    """

    name: str
    kind: str
    major: int | None = None
    minor: int | None = None
    parent: str | None = None
    dm_name: str | None = None
    slaves: tuple[str, ...] = field(default_factory=tuple)
    md_level: str | None = None
    rotational: bool | None = None
    model: str | None = None
    vendor: str | None = None
    queue_depth: int | None = None
    nr_requests: int | None = None
    scheduler: str | None = None
    size_bytes: int | None = None
    backing_file: str | None = None

    @property
    def display_name(self) -> str:
        """The name an operator recognises: the dm name for dm devices, else the kernel name."""
        return self.dm_name or self.name

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["slaves"] = list(self.slaves)
        return d
