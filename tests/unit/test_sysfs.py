"""Device metadata from sysfs trees (fixture trees and trees built in tmp_path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iogauge.collector.sysfs import (
    guess_parent,
    kind_from_name,
    read_device_info,
    read_diskseq,
    sysfs_name,
)
from iogauge.model.device import DeviceInfo

STEADY_SYS = (Path(__file__).resolve().parent.parent / "fixtures" / "proc_trees" / "steady_17"
              / "sys")


def put(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


# ---------------------------------------------------------------------------------------------
# the steady_17 fixture tree
# ---------------------------------------------------------------------------------------------
def test_whole_disk_every_attribute() -> None:
    info = read_device_info("sda", STEADY_SYS)
    assert info == DeviceInfo(
        name="sda", kind="disk", major=8, minor=0, parent=None, dm_name=None, slaves=(),
        md_level=None, rotational=True, model="ST4000NM0035-1V4", vendor="ATA",
        queue_depth=32, nr_requests=64, scheduler="mq-deadline",
        size_bytes=4000787030016,  # 7814037168 * 512
        backing_file=None)
    assert info.display_name == "sda"


def test_partition_found_under_its_disk_without_class_links() -> None:
    info = read_device_info("sda2", STEADY_SYS)
    assert (info.kind, info.parent, info.major, info.minor) == ("partition", "sda", 8, 2)
    assert info.size_bytes == 4000249110528  # 7812986544 * 512
    # queue/device attributes are the disk's
    assert (info.rotational, info.scheduler, info.nr_requests) == (True, "mq-deadline", 64)
    assert (info.model, info.vendor, info.queue_depth) == ("ST4000NM0035-1V4", "ATA", 32)
    assert read_device_info("sdb1", STEADY_SYS).parent == "sdb"
    assert read_device_info("sdb1", STEADY_SYS).rotational is False


def test_dm_md_loop() -> None:
    dm = read_device_info("dm-0", STEADY_SYS)
    assert (dm.kind, dm.dm_name, dm.slaves, dm.display_name) == ("dm", "vg0-root", ("sda2",),
                                                                  "vg0-root")
    assert (dm.model, dm.vendor, dm.queue_depth) == (None, None, None)
    assert (dm.scheduler, dm.nr_requests) == ("none", 128)
    md = read_device_info("md0", STEADY_SYS)
    assert (md.kind, md.md_level, md.slaves, md.major, md.minor) == ("md", "raid1",
                                                                     ("sda1", "sdb1"), 9, 0)
    loop = read_device_info("loop0", STEADY_SYS)
    assert (loop.kind, loop.backing_file) == ("loop", "/var/lib/images/disk.img")
    assert loop.size_bytes == 1073741824  # 2097152 * 512


def test_given_major_minor_win_over_the_dev_file() -> None:
    info = read_device_info("sda", STEADY_SYS, major=65, minor=0)
    assert (info.major, info.minor) == (65, 0)


def test_to_dict() -> None:
    d = read_device_info("md0", STEADY_SYS).to_dict()
    assert d["slaves"] == ["sda1", "sdb1"]
    assert d["md_level"] == "raid1"
    assert d["kind"] == "md"


# ---------------------------------------------------------------------------------------------
# trees built here
# ---------------------------------------------------------------------------------------------
def test_real_sysfs_layout_with_class_block_symlinks(tmp_path: Path) -> None:
    sys = tmp_path / "sys"
    dev = sys / "devices" / "pci0000:00" / "0000:00:17.0" / "ata1" / "host0" / "block"
    put(dev, "sda/dev", "8:0")
    put(dev, "sda/queue/rotational", "0")
    put(dev, "sda/queue/scheduler", "[none] mq-deadline")
    put(dev, "sda/sda3/partition", "3")
    put(dev, "sda/sda3/dev", "8:3")
    put(dev, "sda/sda3/size", "2048")
    (sys / "block").mkdir(parents=True)
    (sys / "block" / "sda").symlink_to(dev / "sda")
    (sys / "class" / "block").mkdir(parents=True)
    (sys / "class" / "block" / "sda3").symlink_to(dev / "sda" / "sda3")
    (sys / "class" / "block" / "sda").symlink_to(dev / "sda")
    info = read_device_info("sda3", sys)
    assert (info.kind, info.parent, info.major, info.minor) == ("partition", "sda", 8, 3)
    assert (info.rotational, info.scheduler, info.size_bytes) == (False, "none", 1048576)


def test_cciss_names_use_bang_in_sysfs(tmp_path: Path) -> None:
    assert sysfs_name("cciss/c0d0p1") == "cciss!c0d0p1"
    put(tmp_path, "block/cciss!c0d0/dev", "104:0")
    put(tmp_path, "block/cciss!c0d0/queue/rotational", "1")
    put(tmp_path, "block/cciss!c0d0/cciss!c0d0p1/partition", "1")
    put(tmp_path, "block/cciss!c0d0/cciss!c0d0p1/dev", "104:1")
    disk = read_device_info("cciss/c0d0", tmp_path)
    assert (disk.kind, disk.major, disk.rotational) == ("disk", 104, True)
    part = read_device_info("cciss/c0d0p1", tmp_path)
    assert (part.kind, part.parent, part.minor, part.rotational) == ("partition", "cciss/c0d0",
                                                                     1, True)


@pytest.mark.parametrize(("text", "expected"), [
    ("[mq-deadline] kyber bfq none", "mq-deadline"),
    ("noop deadline [cfq]", "cfq"),
    ("none", "none"),
    ("[none] mq-deadline", "none"),
])
def test_scheduler_is_the_bracketed_entry(tmp_path: Path, text: str, expected: str) -> None:
    put(tmp_path, "block/vda/queue/scheduler", text)
    assert read_device_info("vda", tmp_path).scheduler == expected


def test_missing_or_garbage_attributes_give_none(tmp_path: Path) -> None:
    put(tmp_path, "block/vda/queue/rotational", "maybe")
    put(tmp_path, "block/vda/size", "")
    put(tmp_path, "block/vda/dev", "garbage")
    put(tmp_path, "block/vda/device/model", "   ")
    info = read_device_info("vda", tmp_path)
    assert info == DeviceInfo(name="vda", kind="disk")


def test_no_sysfs_at_all(tmp_path: Path) -> None:
    nosys = tmp_path / "absent"
    assert read_device_info("dm-3", nosys) == DeviceInfo(name="dm-3", kind="dm")
    # an 11+-field partition line without sysfs: no guess (it could be a whole device)
    assert read_device_info("sda1", nosys).parent is None
    assert read_device_info("sda1", nosys).kind == "disk"
    # an old 4-field partition line: the parent is guessed from the name
    info = read_device_info("hda2", nosys, major=3, minor=2, old_layout=True)
    assert info == DeviceInfo(name="hda2", kind="partition", major=3, minor=2, parent="hda")
    # a 4-field line whose name has no partition pattern stays a whole device
    assert read_device_info("dm-0", nosys, old_layout=True).kind == "dm"


@pytest.mark.parametrize(("name", "parent"), [
    ("sda1", "sda"), ("sdab12", "sdab"), ("hda2", "hda"), ("vdb3", "vdb"), ("xvda1", "xvda"),
    ("nvme0n1p2", "nvme0n1"), ("nvme12n3p10", "nvme12n3"), ("mmcblk0p1", "mmcblk0"),
    ("loop3p1", "loop3"), ("md0p1", "md0"), ("nbd0p2", "nbd0"),
    ("sda", None), ("nvme0n1", None), ("dm-0", None), ("md0", None), ("mmcblk0", None),
    ("sr0", None), ("loop3", None),
])
def test_guess_parent(name: str, parent: str | None) -> None:
    assert guess_parent(name) == parent


@pytest.mark.parametrize(("name", "kind"), [
    ("dm-0", "dm"), ("md0", "md"), ("md127", "md"), ("md_d0", "md"), ("loop7", "loop"),
    ("zram0", "ram"), ("ram0", "ram"), ("sda", "disk"), ("nvme0n1", "disk"), ("sr0", "disk"),
    ("mdx", "disk"),
])
def test_kind_from_name(name: str, kind: str) -> None:
    assert kind_from_name(name) == kind


def test_read_diskseq(tmp_path: Path) -> None:
    assert read_diskseq("sda", tmp_path) is None
    put(tmp_path, "block/sda/diskseq", "9")
    assert read_diskseq("sda", tmp_path) == 9
    put(tmp_path, "class/block/sda/diskseq", "12")
    assert read_diskseq("sda", tmp_path) == 12  # class/block is read first
