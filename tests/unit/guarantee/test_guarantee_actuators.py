"""Actuators against fixture cgroup trees: exact lines written, ``max``/0 removal, exact
restoration, counters, detection, partition -> disk, and the clear errors."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cgroup_fixtures import SYSFS, KernelEmu, make_v2_group

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators import (
    DevNum,
    Mount,
    check_layout,
    detect,
    read_mounts,
    resolve_device,
    write_text,
)
from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1, parse_limits, parse_serviced
from iogauge.guarantee.actuators.cgroup_v2 import CgroupV2, parse_nested, parse_stall_total
from iogauge.guarantee.actuators.dry_run import DryRun
from iogauge.guarantee.policy import GroupLimit

SDA = DevNum(8, 0)


# ---- cgroup v1 ---------------------------------------------------------------------------
def test_v1_writes_one_major_minor_line_per_limit(v1_root: Path, kernel: KernelEmu) -> None:
    h = CgroupV1(v1_root)
    b = v1_root / "b"
    h.check_group(b)
    h.write_limit(b, SDA, "riops", 120)
    h.write_limit(b, SDA, "wiops", 40)
    assert kernel.writes == [(b / "blkio.throttle.read_iops_device", "8:0 120\n"),
                             (b / "blkio.throttle.write_iops_device", "8:0 40\n")]
    assert h.read_limit(b, SDA) == GroupLimit(120, 40)
    h.write_limit(b, SDA, "riops", None)  # removal is "MAJ:MIN 0"
    assert kernel.writes[-1] == (b / "blkio.throttle.read_iops_device", "8:0 0\n")
    assert h.read_limit(b, SDA) == GroupLimit(None, 40)


def test_v1_other_devices_lines_are_kept(v1_root: Path, kernel: KernelEmu) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.read_iops_device").write_text("8:16 77\n")
    h = CgroupV1(v1_root)
    h.write_limit(b, SDA, "riops", 5)
    assert parse_limits((b / "blkio.throttle.read_iops_device").read_text()) == {
        SDA: 5, DevNum(8, 16): 77}
    assert h.read_limit(b, DevNum(8, 16)).riops == 77


def test_v1_limits_are_clamped_to_what_the_kernel_stores(v1_root: Path,
                                                         kernel: KernelEmu) -> None:
    h = CgroupV1(v1_root)
    b = v1_root / "b"
    h.write_limit(b, SDA, "riops", 5_000_000_000)  # would wrap to 705032704 in a real kernel
    assert kernel.writes[-1][1] == f"8:0 {2**32 - 2}\n"
    h.write_limit(b, SDA, "wiops", 0)  # never "0" (= remove) for a limit: at least 1
    assert kernel.writes[-1][1] == "8:0 1\n"


def test_v1_counters_read_and_write_of_the_device() -> None:
    text = ("8:16 Read 5\n8:16 Write 6\n8:0 Read 1234\n8:0 Write 567\n8:0 Sync 1801\n"
            "8:0 Async 0\n8:0 Discard 0\n8:0 Total 1801\nTotal 1812\n")
    assert parse_serviced(text, SDA) == (1234, 567)
    assert parse_serviced(text, DevNum(7, 0)) == (0, 0)


def test_v1_prefers_the_recursive_counters(v1_root: Path) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.io_serviced_recursive").write_text("8:0 Read 10\n8:0 Write 3\n")
    (b / "blkio.throttle.io_serviced").write_text("8:0 Read 1\n8:0 Write 1\n")
    assert CgroupV1(v1_root).read_counts(b, SDA) == (10, 3)
    assert CgroupV1(v1_root).read_stall_us(b) is None


def test_v1_unknown_group_and_missing_throttling(v1_root: Path) -> None:
    h = CgroupV1(v1_root)
    with pytest.raises(GuaranteeError, match=r"unknown cgroup .*nope: no such directory"):
        h.check_group(v1_root / "nope")
    c = v1_root / "c"
    c.mkdir()
    (c / "cgroup.procs").write_text("")
    with pytest.raises(GuaranteeError, match="CONFIG_BLK_DEV_THROTTLING"):
        h.check_group(c)


# ---- cgroup v2 ---------------------------------------------------------------------------
def test_v2_touches_only_riops_and_wiops(v2_root: Path, kernel: KernelEmu) -> None:
    b = v2_root / "b"
    (b / "io.max").write_text("8:0 rbps=2097152 wbps=max riops=max wiops=120\n")
    h = CgroupV2(v2_root)
    h.check_group(b)
    assert h.read_limit(b, SDA) == GroupLimit(None, 120)
    h.write_limit(b, SDA, "riops", 300)
    assert kernel.writes[-1] == (b / "io.max", "8:0 riops=300\n")
    assert (b / "io.max").read_text() == "8:0 rbps=2097152 wbps=max riops=300 wiops=120\n"
    # Restoring the previous values exactly: riops back to max, the byte limit untouched.
    h.write_limit(b, SDA, "riops", None)
    assert kernel.writes[-1] == (b / "io.max", "8:0 riops=max\n")
    assert (b / "io.max").read_text() == "8:0 rbps=2097152 wbps=max riops=max wiops=120\n"


def test_v2_all_max_removes_the_line(v2_root: Path, kernel: KernelEmu) -> None:
    b = v2_root / "b"
    h = CgroupV2(v2_root)
    h.write_limit(b, SDA, "wiops", 50)
    assert (b / "io.max").read_text() == "8:0 rbps=max wbps=max riops=max wiops=50\n"
    h.write_limit(b, SDA, "wiops", None)
    assert (b / "io.max").read_text() == ""
    assert h.read_limit(b, SDA) == GroupLimit(None, None)


def test_v2_counters_and_pressure(v2_root: Path) -> None:
    a = v2_root / "a"
    (a / "io.stat").write_text("8:16 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n"
                               "8:0 rbytes=1459200 wbytes=314773504 rios=192 wios=353 "
                               "dbytes=0 dios=0\n")
    (a / "io.pressure").write_text("some avg10=1.50 avg60=0.20 avg300=0.05 total=7654321\n"
                                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=1000\n")
    h = CgroupV2(v2_root)
    assert h.read_counts(a, SDA) == (192, 353)
    assert h.read_counts(a, DevNum(253, 0)) == (0, 0)
    assert h.read_stall_us(a) == 7654321
    assert h.read_stall_us(v2_root / "b") is None  # no io.pressure (no PSI)
    assert parse_stall_total("full avg10=0 total=5\n") is None
    assert parse_nested("garbage\n8:0 riops=5\n") == {SDA: {"riops": "5"}}


def test_v2_io_not_available_names_the_reason(tmp_path: Path) -> None:
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")  # io bound to v1
    (root / "cgroup.subtree_control").write_text("")
    g = root / "b"
    g.mkdir()
    with pytest.raises(GuaranteeError, match=r"no io controller .* bound to a cgroup v1 blkio"):
        CgroupV2(root).check_group(g)


def test_v2_io_not_enabled_says_what_to_write(v2_root: Path) -> None:
    (v2_root / "cgroup.subtree_control").write_text("memory\n")
    g = v2_root / "svc"
    g.mkdir()
    (g / "io.stat").write_text("")
    with pytest.raises(GuaranteeError, match=r"echo \+io > .*cgroup2/cgroup.subtree_control"):
        CgroupV2(v2_root).check_group(g)


def test_v2_root_has_no_io_max(v2_root: Path) -> None:
    with pytest.raises(GuaranteeError, match="root cgroup"):
        CgroupV2(v2_root).check_group(v2_root)


# ---- detection, layout, device resolution ------------------------------------------------
def test_detect_picks_the_hierarchy_of_the_mount(mounts_file: Path, v1_root: Path,
                                                 v2_root: Path, tmp_path: Path) -> None:
    mounts = read_mounts(mounts_file)
    assert [m.fstype for m in mounts] == ["cgroup", "cgroup", "cgroup2"]
    assert detect(v1_root / "b", mounts).kind == "cgroup-v1"
    assert detect(v2_root / "b", mounts).kind == "cgroup-v2"
    with pytest.raises(GuaranteeError, match="no blkio controller; the blkio hierarchy is"):
        detect(tmp_path / "cgroup" / "cpu" / "x", mounts)
    with pytest.raises(GuaranteeError, match="not inside a cgroup mount"):
        detect(tmp_path / "elsewhere", mounts)
    with pytest.raises(GuaranteeError, match="absolute path"):
        detect(Path("relative/b"), mounts)


def test_mount_points_with_escaped_spaces(tmp_path: Path) -> None:
    p = tmp_path / "mounts"
    p.write_text("cgroup2 /sys/fs/my\\040cgroup cgroup2 rw 0 0\n")
    assert read_mounts(p) == [Mount(Path("/sys/fs/my cgroup"), "cgroup2", ("rw",))]


def test_layout_refuses_throttling_a_or_mixing_counters() -> None:
    a, b = Path("/cg/app"), Path("/cg/backup")
    check_layout([a], [b])
    with pytest.raises(GuaranteeError, match="both protected and throttled"):
        check_layout([a], [a])
    with pytest.raises(GuaranteeError, match="contains protected cgroup"):
        check_layout([Path("/cg/backup/inner")], [b])
    with pytest.raises(GuaranteeError, match="would include B's I/O"):
        check_layout([a], [Path("/cg/app/batch")])


def test_partition_resolves_to_its_disk() -> None:
    d = resolve_device("sda1", SYSFS)
    assert (d.name, d.disk, d.devnum, d.partition) == ("sda1", "sda", SDA, "sda1")
    assert d.info.rotational is True and not d.parallel
    d = resolve_device("8:17", SYSFS)
    assert (d.disk, d.devnum, d.partition) == ("sdb", DevNum(8, 16), "sdb1")
    assert d.parallel  # non-rotational: %util is no capacity measure
    assert resolve_device("sda", SYSFS).partition is None
    assert resolve_device("md0", SYSFS).parallel
    assert not resolve_device("loop0", SYSFS).parallel
    assert not resolve_device("dm-0", SYSFS).parallel  # one member, rotational


def test_unknown_device_lists_the_known_ones() -> None:
    with pytest.raises(GuaranteeError, match=r"unknown device 'sdz'.*sda, sdb"):
        resolve_device("sdz", SYSFS)
    with pytest.raises(GuaranteeError, match="no block device 8:99"):
        resolve_device("8:99", SYSFS)
    with pytest.raises(GuaranteeError, match="not a block device"):
        resolve_device("/dev/null", SYSFS)


def test_dev_path_resolves_through_stat() -> None:
    import os
    dev = Path("/dev/loop0")
    if not dev.exists():
        pytest.skip("no /dev/loop0 on this machine")
    st = dev.stat()
    d = resolve_device(str(dev), "/sys")
    assert d.devnum == DevNum(os.major(st.st_rdev), os.minor(st.st_rdev))
    assert d.disk == "loop0"


# ---- dry run and the raw writer ----------------------------------------------------------
def test_dry_run_prints_the_exact_line_and_writes_nothing(v1_root: Path, v2_root: Path) -> None:
    said = io.StringIO()
    d1 = DryRun(CgroupV1(v1_root), lambda s: said.write(s + "\n"))
    d1.write_limit(v1_root / "b", SDA, "riops", 55)
    d1.write_limit(v1_root / "b", SDA, "wiops", None)
    d2 = DryRun(CgroupV2(v2_root), lambda s: said.write(s + "\n"))
    d2.write_limit(v2_root / "b", SDA, "wiops", 9)
    assert said.getvalue().splitlines() == [
        f"dry run: would write '8:0 55' to {v1_root / 'b' / 'blkio.throttle.read_iops_device'}",
        f"dry run: would write '8:0 0' to {v1_root / 'b' / 'blkio.throttle.write_iops_device'}",
        f"dry run: would write '8:0 wiops=9' to {v2_root / 'b' / 'io.max'}",
    ]
    assert (v1_root / "b" / "blkio.throttle.read_iops_device").read_text() == ""
    assert (v2_root / "b" / "io.max").read_text() == ""
    assert d2.read_limit(v2_root / "b", SDA) == GroupLimit(None, None)


def test_write_text_is_one_write_and_names_missing_files(tmp_path: Path) -> None:
    f = tmp_path / "io.max"
    f.write_text("old\n")
    write_text(f, "8:0 riops=5\n", SDA)
    assert f.read_text() == "8:0 riops=5\n"
    with pytest.raises(GuaranteeError, match=r"does not exist .was the cgroup removed"):
        write_text(tmp_path / "gone" / "io.max", "8:0 riops=5\n", SDA)


def test_v2_group_files_built_by_helper_are_complete(v2_root: Path) -> None:
    g = make_v2_group(v2_root, "extra", io_max="8:0 riops=7 wiops=max\n")
    assert CgroupV2(v2_root).read_limit(g, SDA) == GroupLimit(7, None)
