"""The controller loop and the monitor on fixture trees: limits written through the state file
and restored at the end, stale limits restored first, dry run writes nothing, decisions
recorded, and the clear errors (not root, mixed hierarchies, infeasible floor refused)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from cgroup_fixtures import SYSFS, FakeKernel, KernelEmu

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators import DevNum, resolve_device
from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1
from iogauge.guarantee.actuators.cgroup_v2 import CgroupV2
from iogauge.guarantee.config import GuaranteeConfig, ProtectSpec
from iogauge.guarantee.controller import Controller
from iogauge.guarantee.monitor import GroupHandle, Monitor
from iogauge.guarantee.safety import LimitEntry, StateDoc, StateFile
from iogauge.store.duckdb_store import Store

SDA = DevNum(8, 0)


def _cfg(tmp_path: Path, root: Path, **kw: object) -> GuaranteeConfig:
    base: dict[str, object] = {
        "device": "sda", "protect": (ProtectSpec(root / "a", 50.0),),
        "throttle": (root / "b",), "interval_s": 0.2, "duration_s": 2.0,
        "state": tmp_path / "run" / "g.json", "db": tmp_path / "g.duckdb", "flush_s": 0.3}
    base.update(kw)
    return GuaranteeConfig(**base)  # type: ignore[arg-type]


class Lines(list[str]):
    def __call__(self, line: str) -> None:
        self.append(line)


def _controller(cfg: GuaranteeConfig, tmp_path: Path, mounts: Path, say: Lines,
                uid: int = 0) -> Controller:
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text("b1\n")
    return Controller(cfg, say=say, procfs_root=tmp_path / "proc", sysfs_root=SYSFS,
                      mounts_file=mounts, geteuid=lambda: uid)


def test_limits_are_written_recorded_and_restored(tmp_path: Path, v1_root: Path,
                                                  mounts_file: Path, kernel: KernelEmu) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.write_iops_device").write_text("8:0 900\n")  # pre-existing limit
    cfg = _cfg(tmp_path, v1_root)
    seen_during: list[str] = []
    say = Lines()

    def watch(line: str) -> None:
        say(line)
        if "[" in line and "]" in line:  # a decision line: snapshot the kernel file
            seen_during.append((b / "blkio.throttle.read_iops_device").read_text())

    ctl = _controller(cfg, tmp_path, mounts_file, say)
    ctl.say = watch
    with FakeKernel(tmp_path / "proc", r_iops=300, w_iops=100, util_pct=70, await_ms=4,
                    groups={v1_root / "a": (60, 0), b: (240, 100)}):
        summary = ctl.run()
    assert summary.stopped_by == "duration"
    assert summary.decisions >= 8
    assert summary.writes >= 2 and summary.restored is not None and summary.restored.ok
    # During the run B had a read limit on the disk; A never had one.
    assert any(s.startswith("8:0 ") for s in seen_during)
    assert (v1_root / "a" / "blkio.throttle.read_iops_device").read_text() == ""
    assert all(p.parent == b for p, _ in kernel.writes)
    # Afterwards everything is as it was, and the state file is gone.
    assert (b / "blkio.throttle.read_iops_device").read_text() == ""
    assert (b / "blkio.throttle.write_iops_device").read_text() == "8:0 900\n"
    assert not cfg.state.exists()
    # Every decision is in the store.
    with Store.open(cfg.db, read_only=True) as store:
        df = store.read_guarantee(summary.run_id).df
    assert df.height == summary.decisions == summary.recorded
    row = df.row(-1, named=True)
    assert row["device"] == "sda" and row["policy"] == "adaptive"
    assert row["actuator"] == "cgroup-v1" and row["a_floor_iops"] == 50.0
    assert row["b_riops_limit"] is not None
    # The fake kernel's counters follow the clock; a reading can be a few ms stale, so the
    # rates are compared as medians over the run.
    assert df["util_pct"].median() == pytest.approx(70, rel=0.15)
    assert df["a_iops"].median() == pytest.approx(60, rel=0.15)
    assert df["b_iops"].median() == pytest.approx(340, rel=0.15)
    assert str(b) in row["groups_json"] and '"role": "protected"' in row["groups_json"]
    assert any(line.startswith("guaranteeing") for line in say)


def test_stale_limits_of_a_crashed_run_are_restored_first(
        tmp_path: Path, v1_root: Path, mounts_file: Path, kernel: KernelEmu) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.read_iops_device").write_text("8:0 33\n")
    cfg = _cfg(tmp_path, v1_root, duration_s=0.5)
    cfg.state.parent.mkdir(parents=True)
    doc = StateDoc(1, 999999, "b1", "earlier")
    doc.entries.append(LimitEntry("cgroup-v1", str(v1_root), str(b), "8:0", "riops", None, 33))
    StateFile(cfg.state).save(doc)
    say = Lines()
    with FakeKernel(tmp_path / "proc", r_iops=100, w_iops=0, util_pct=30, await_ms=2,
                    groups={v1_root / "a": (50, 0), b: (50, 0)}):
        _controller(cfg, tmp_path, mounts_file, say).run()
    assert kernel.writes[0] == (b / "blkio.throttle.read_iops_device", "8:0 0\n")
    first_stale = next(i for i, s in enumerate(say) if s.startswith("stale state: restored"))
    banner = next(i for i, s in enumerate(say) if s.startswith("guaranteeing"))
    assert first_stale < banner
    assert (b / "blkio.throttle.read_iops_device").read_text() == ""


def test_dry_run_writes_nothing_and_needs_no_state(tmp_path: Path, v2_root: Path,
                                                   mounts_file: Path, kernel: KernelEmu) -> None:
    cfg = _cfg(tmp_path, v2_root, dry_run=True, duration_s=0.6, record=False)
    say = Lines()
    with FakeKernel(tmp_path / "proc", r_iops=200, w_iops=50, util_pct=60, await_ms=3,
                    groups={v2_root / "a": (60, 0), v2_root / "b": (140, 50)},
                    hierarchy="v2"):
        summary = _controller(cfg, tmp_path, mounts_file, say, uid=1000).run()
    assert kernel.writes == []
    assert any(s.startswith("dry run: would write '8:0 riops=") and s.endswith("io.max")
               for s in say)
    assert summary.writes >= 1 and summary.recorded == 0
    assert not cfg.state.exists() and not cfg.state.parent.exists()


def test_stop_event_ends_the_run_and_restores(tmp_path: Path, v1_root: Path,
                                             mounts_file: Path, kernel: KernelEmu) -> None:
    cfg = _cfg(tmp_path, v1_root, duration_s=None)
    stop = threading.Event()
    threading.Timer(0.8, stop.set).start()
    with FakeKernel(tmp_path / "proc", r_iops=300, w_iops=0, util_pct=80, await_ms=3,
                    groups={v1_root / "a": (50, 0), v1_root / "b": (250, 0)}):
        summary = _controller(cfg, tmp_path, mounts_file, Lines()).run(stop)
    assert summary.stopped_by == "signal"
    assert (v1_root / "b" / "blkio.throttle.read_iops_device").read_text() == ""
    assert "every limit restored" in summary.line()


def test_not_root_is_refused_before_anything(tmp_path: Path, v1_root: Path,
                                             mounts_file: Path) -> None:
    cfg = _cfg(tmp_path, v1_root)
    with pytest.raises(GuaranteeError, match=r"needs root \(running as uid 1000\)"):
        _controller(cfg, tmp_path, mounts_file, Lines(), uid=1000).run()
    assert not cfg.state.exists()


def test_groups_in_two_hierarchies_are_refused(tmp_path: Path, v1_root: Path, v2_root: Path,
                                               mounts_file: Path) -> None:
    cfg = _cfg(tmp_path, v1_root, throttle=(v2_root / "b",))
    with pytest.raises(GuaranteeError, match="all groups must be in the hierarchy"):
        _controller(cfg, tmp_path, mounts_file, Lines()).setup()


def test_infeasible_floor_refused_up_front(tmp_path: Path, v1_root: Path,
                                           mounts_file: Path, kernel: KernelEmu) -> None:
    cfg = _cfg(tmp_path, v1_root, protect=(ProtectSpec(v1_root / "a", 500.0),),
               capacity_iops=300.0, on_infeasible="refuse")
    with pytest.raises(GuaranteeError, match=r"A's floors total 500 IOPS .* about 300 IOPS at "
                                             r"100 % busy, 285 at the target 95%"):
        _controller(cfg, tmp_path, mounts_file, Lines()).run()
    assert kernel.writes == [] and not cfg.state.exists()
    say = Lines()
    warn = _cfg(tmp_path, v1_root, protect=(ProtectSpec(v1_root / "a", 500.0),),
                capacity_iops=300.0)
    _controller(warn, tmp_path, mounts_file, say).setup()
    assert any(s.startswith("warning: infeasible floor") for s in say)


def test_partition_limits_its_disk(tmp_path: Path, v1_root: Path, mounts_file: Path) -> None:
    say = Lines()
    s = _controller(_cfg(tmp_path, v1_root, device="sda2"), tmp_path, mounts_file,
                    say).setup()
    assert s.device.devnum == SDA and s.device.disk == "sda"
    assert "sda2 is a partition: limits and statistics apply to its disk sda (8:0)" in say


def test_capacity_model_follows_the_device(tmp_path: Path, v1_root: Path,
                                           mounts_file: Path) -> None:
    def parallel(**kw: object) -> bool:
        s = _controller(_cfg(tmp_path, v1_root, **kw), tmp_path, mounts_file, Lines()).setup()
        return s.policy.targets.device_parallel

    assert not parallel(device="sda")            # rotational: %util is capacity
    assert parallel(device="sdb")                # SSD: latency knee
    assert parallel(device="sda", capacity_model="latency")
    assert not parallel(device="sdb", capacity_model="util")


# ---- the monitor, step by step --------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_monitor_rates_are_exact_over_the_monotonic_interval(tmp_path: Path,
                                                             v2_root: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    a, b = v2_root / "a", v2_root / "b"

    def world(reads: int, ticks: int, a_r: int, b_w: int, stall: int) -> None:
        (proc / "diskstats").write_text(
            f"   8       0 sda {reads} 0 {reads * 8} {reads * 2} 100 0 800 300 0 {ticks} "
            f"{reads * 2 + 300} 0 0 0 0 0 0\n")
        (a / "io.stat").write_text(f"8:0 rbytes=0 wbytes=0 rios={a_r} wios=0 dbytes=0 dios=0\n")
        (b / "io.stat").write_text(f"8:0 rbytes=0 wbytes=0 rios=0 wios={b_w} dbytes=0 dios=0\n")
        (a / "io.pressure").write_text(f"some avg10=0 avg60=0 avg300=0 total={stall}\n")

    clock = Clock()
    groups = [GroupHandle(str(a), a, "protected"), GroupHandle(str(b), b, "throttled")]
    mon = Monitor(resolve_device("sda", SYSFS), groups, CgroupV2(v2_root), procfs_root=proc,
                  sysfs_root=SYSFS, monotonic=clock, wall=lambda: 1.7e9)
    world(1000, 5000, 100, 10, 0)
    assert mon.prime() == []
    clock.t += 2.0
    world(1400, 6500, 180, 50, 500_000)
    s = mon.sample()
    o = s.obs
    assert s.interval_s == 2.0 and o.interval_s == 2.0
    assert o.r_iops == 200.0 and o.w_iops == 0.0
    assert o.util_pct == 75.0  # 1500 ms busy of 2000
    assert o.await_ms == 2.0  # 800 ms / 400 reads
    assert o.groups[str(a)].r_iops == 40.0 and o.groups[str(a)].stall_pct == 25.0
    assert o.groups[str(b)].w_iops == 20.0 and o.groups[str(b)].stall_pct is None
    # A counter going backwards (cgroup re-created) is an idle interval, with a message.
    clock.t += 1.0
    world(1500, 7000, 5, 60, 600_000)
    s = mon.sample()
    assert s.obs.groups[str(a)].iops == 0.0
    assert any("went backwards" in m for m in s.messages)
    # A group that disappears is reported once and treated as idle.
    (b / "io.stat").unlink()
    clock.t += 1.0
    world_no_b = (proc / "diskstats")
    world_no_b.write_text("   8       0 sda 1600 0 12800 3200 100 0 800 300 0 7500 3500 0 0 "
                          "0 0 0 0\n")
    s = mon.sample()
    assert any("throttled cgroup" in m and "treated as idle" in m for m in s.messages)
    assert s.obs.groups[str(b)].iops == 0.0
    clock.t += 1.0
    s = mon.sample()
    assert not any("throttled cgroup" in m for m in s.messages)


def test_monitor_v1_counts(tmp_path: Path, v1_root: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    b = v1_root / "b"
    clock = Clock()
    mon = Monitor(resolve_device("sda", SYSFS), [GroupHandle(str(b), b, "throttled")],
                  CgroupV1(v1_root), procfs_root=proc, sysfs_root=SYSFS, monotonic=clock)
    line = "   8       0 sda {r} 0 0 0 0 0 0 0 0 {t} 0 0 0 0 0 0 0\n"
    (proc / "diskstats").write_text(line.format(r=0, t=0))
    (b / "blkio.throttle.io_serviced_recursive").write_text("8:0 Read 10\n8:0 Write 4\n")
    mon.prime()
    clock.t += 0.5
    (proc / "diskstats").write_text(line.format(r=60, t=250))
    (b / "blkio.throttle.io_serviced_recursive").write_text("8:0 Read 40\n8:0 Write 9\n")
    o = mon.sample().obs
    assert o.r_iops == 120.0 and o.util_pct == 50.0
    assert (o.groups[str(b)].r_iops, o.groups[str(b)].w_iops) == (60.0, 10.0)


def test_floors_change_mid_run_on_request(tmp_path: Path, v1_root: Path, mounts_file: Path,
                                          kernel: KernelEmu) -> None:
    a = v1_root / "a"
    cfg = _cfg(tmp_path, v1_root, duration_s=1.6)
    say = Lines()
    ctl = _controller(cfg, tmp_path, mounts_file, say)
    ctl._reload_floors = lambda: {str(a): 120.0}
    with pytest.raises(GuaranteeError, match="exactly the protected cgroups"):
        ctl.set_floors({"/elsewhere": 5.0})
    threading.Timer(0.7, ctl.request_reload).start()
    with FakeKernel(tmp_path / "proc", r_iops=300, w_iops=0, util_pct=60, await_ms=3,
                    groups={a: (60, 0), v1_root / "b": (240, 0)}):
        summary = ctl.run()
    assert f"floors changed: {a} >= 120 IOPS" in say
    with Store.open(cfg.db, read_only=True) as store:
        floors = store.read_guarantee(summary.run_id).df["a_floor_iops"].to_list()
    assert floors[0] == 50.0 and floors[-1] == 120.0
    assert floors == sorted(floors)
