"""Device metadata from sysfs (Documentation/ABI/stable/sysfs-block).

``/sys/class/block/<name>`` exists for every disk and partition (a '/' in the kernel name,
e.g. ``cciss/c0d0``, is '!' in sysfs). Whole devices are also ``/sys/block/<name>``;
a partition is the directory ``/sys/block/<disk>/<part>`` and carries a ``partition`` file.
Every read here is best effort: a missing attribute leaves the field None, because sysfs
differs between drivers (virtio has no ``device/model``, loop has no ``device`` at all).
"""

from __future__ import annotations

import re
from pathlib import Path

from iogauge.model.device import DeviceInfo

_PART_SUFFIX = re.compile(r"^(?P<disk>.*\d)p\d+$|^(?P<disk2>.*\D)\d+$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def sysfs_name(name: str) -> str:
    """Kernel device name as sysfs spells it ('/' becomes '!')."""
    return name.replace("/", "!")


def kind_from_name(name: str) -> str:
    """Device kind from a kernel name alone (used when sysfs says nothing)."""
    if name.startswith("dm-"):
        return "dm"
    if re.fullmatch(r"md\d+", name) or name.startswith("md_d"):
        return "md"
    if name.startswith("loop"):
        return "loop"
    if name.startswith(("zram", "ram")):
        return "ram"
    return "disk"


def guess_parent(name: str) -> str | None:
    """Parent disk of a partition from its name: sda1 -> sda, nvme0n1p2 -> nvme0n1.

    Only a fallback for trees without sysfs (old kernels, snapshots from another host).
    """
    if re.fullmatch(r"(nvme\d+n\d+|mmcblk\d+|loop\d+|md\d+|nbd\d+)p\d+", name):
        return name[: name.rindex("p")]
    m = re.fullmatch(r"((?:[shv]|xv)d[a-z]+)\d+", name)
    if m:
        return m.group(1)
    return None


def _find_sysfs_dir(sysfs_root: Path, name: str) -> tuple[Path | None, str | None]:
    """Directory of the device and, for partitions, the parent's name."""
    sname = sysfs_name(name)
    whole = sysfs_root / "block" / sname
    if whole.is_dir():
        return whole, None
    cls = sysfs_root / "class" / "block" / sname
    if cls.is_dir() and (cls / "partition").exists():
        parent = cls.resolve().parent.name.replace("!", "/")
        return cls, parent
    # Trees without the class symlinks (fixtures, chroots): look for block/<disk>/<part>.
    block = sysfs_root / "block"
    if block.is_dir():
        for disk in block.iterdir():
            cand = disk / sname
            if (cand / "partition").exists():
                return cand, disk.name.replace("!", "/")
    return None, None


def read_device_info(name: str, sysfs_root: str | Path = "/sys", *, major: int | None = None,
                     minor: int | None = None, old_layout: bool = False) -> DeviceInfo:
    """Everything sysfs says about device ``name`` (best effort, never raises)."""
    root = Path(sysfs_root)
    ddir, parent = _find_sysfs_dir(root, name)
    if ddir is None:
        parent = guess_parent(name) if old_layout else None
        kind = "partition" if parent else kind_from_name(name)
        return DeviceInfo(name=name, kind=kind, major=major, minor=minor, parent=parent)

    if parent is not None:
        kind = "partition"
        # Queue attributes live on the whole disk.
        qdir = root / "block" / sysfs_name(parent)
    else:
        kind = kind_from_name(name)
        qdir = ddir
    queue = qdir / "queue"
    dev = qdir / "device"

    rot = _read_int(queue / "rotational")
    sched_txt = _read(queue / "scheduler")
    scheduler = None
    if sched_txt:
        m = re.search(r"\[([^\]]+)\]", sched_txt)
        scheduler = m.group(1) if m else sched_txt.split()[0]
    slaves_dir = ddir / "slaves"
    slaves: tuple[str, ...] = ()
    if slaves_dir.is_dir():
        slaves = tuple(sorted(p.name.replace("!", "/") for p in slaves_dir.iterdir()))
    size = _read_int(ddir / "size")
    mm = _read(ddir / "dev")
    if mm and ":" in mm and (major is None or minor is None):
        a, b = mm.split(":", 1)
        if a.isdigit() and b.isdigit():
            major, minor = int(a), int(b)
    return DeviceInfo(
        name=name,
        kind=kind,
        major=major,
        minor=minor,
        parent=parent,
        dm_name=_read(ddir / "dm" / "name") or None,
        slaves=slaves,
        md_level=_read(ddir / "md" / "level") or None,
        rotational=None if rot is None else bool(rot),
        model=_read(dev / "model") or None,
        vendor=_read(dev / "vendor") or None,
        queue_depth=_read_int(dev / "queue_depth"),
        nr_requests=_read_int(queue / "nr_requests"),
        scheduler=scheduler,
        size_bytes=None if size is None else size * 512,
        backing_file=_read(ddir / "loop" / "backing_file") or None,
    )


def read_dm_name(name: str, sysfs_root: str | Path = "/sys") -> str | None:
    """The device-mapper name of ``name`` (``/sys/block/dm-N/dm/name``); None if it has none.

    One file, where :func:`read_device_info` reads a dozen: enough to tell whether a dm
    device is the one a filter names by its dm name."""
    root = Path(sysfs_root)
    sname = sysfs_name(name)
    return (_read(root / "block" / sname / "dm" / "name")
            or _read(root / "class" / "block" / sname / "dm" / "name") or None)


def read_diskseq(name: str, sysfs_root: str | Path = "/sys") -> int | None:
    """``diskseq`` (kernel 5.15+): changes when a device is re-created under the same name."""
    root = Path(sysfs_root)
    return _read_int(root / "class" / "block" / sysfs_name(name) / "diskseq") or _read_int(
        root / "block" / sysfs_name(name) / "diskseq")
