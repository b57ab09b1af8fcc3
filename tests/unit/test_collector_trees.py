"""LinuxCollector over time-stepped /proc + /sys fixture trees, with hand-computed goldens.

Each scenario lives in ``tests/fixtures/proc_trees/<scenario>/`` (see the README there for
the arithmetic behind every expected value): ``steps/NNN/`` holds the ``diskstats`` (and
``stat``, ``uptime``) the kernel would show at step NNN, ``sys/`` the sysfs tree, and
``scenario.toml`` the monotonic and wall clock read at each step. :class:`Player` copies a
step's files into a temporary procfs root before each ``prime()``/``sample()`` call and
feeds the collector the clocks of that step.

Expected values are literal numbers computed by hand from the sysstat 12.x formulas of
[sysstat] (Δt in seconds, Δn = counter n of the step minus the previous step):
r/s = Δ1/Δt, rkB/s = Δ3/2/Δt, r_await = Δ4/Δ1, rareq-sz = Δ3/2/Δ1, %rrqm = Δ2/(Δ1+Δ2)·100,
aqu-sz = Δ11/(Δt·1000), %util = Δ10/(Δt·1000)·100, await = (Δ4+Δ8+Δ15)/(Δ1+Δ5+Δ12).
"""

from __future__ import annotations

import math
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from iogauge.collector.derive import DERIVED_COLUMNS
from iogauge.collector.linux import (
    HOST_COLUMNS,
    IntervalResult,
    LinuxCollector,
    frame_from_results,
    parse_pressure,
    pressure_shares,
)
from iogauge.errors import CollectorError
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

TREES = Path(__file__).resolve().parent.parent / "fixtures" / "proc_trees"
SCENARIOS = sorted(p.name for p in TREES.iterdir() if (p / "scenario.toml").is_file())
REL = 1e-12


# ---------------------------------------------------------------------------------------------
# the scenario player
# ---------------------------------------------------------------------------------------------
@dataclass
class Step:
    dir: Path
    monotonic: float
    wall: float


@dataclass
class Scenario:
    name: str
    root: Path
    description: str
    steps: list[Step]
    collector: dict[str, Any] = field(default_factory=dict)

    @property
    def sys(self) -> Path:
        return self.root / "sys"


def load_scenario(name: str) -> Scenario:
    root = TREES / name
    with (root / "scenario.toml").open("rb") as fh:
        meta = tomllib.load(fh)
    steps = [Step(root / "steps" / s["dir"], float(s["monotonic"]), float(s["wall"]))
             for s in meta["steps"]]
    return Scenario(name, root, meta["description"], steps, dict(meta.get("collector", {})))


class Player:
    """Runs a LinuxCollector over a scenario, one step per prime()/sample() call."""

    def __init__(self, name: str, tmp_path: Path, **overrides: Any) -> None:
        self.scenario = load_scenario(name)
        self.proc = tmp_path / "proc"
        self.proc.mkdir(parents=True)
        self.index = -1
        self._mono = math.nan
        self._wall = math.nan
        opts = {**self.scenario.collector, **overrides}
        self.collector = LinuxCollector(self.proc, self.scenario.sys,
                                        monotonic=lambda: self._mono, wall=lambda: self._wall,
                                        **opts)

    @property
    def diskstats_path(self) -> str:
        return str(self.proc / "diskstats")

    def goto(self, index: int) -> None:
        """Make the procfs root show step ``index`` exactly (files absent there are removed)."""
        step = self.scenario.steps[index]
        for old in self.proc.iterdir():
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        for src in step.dir.iterdir():
            if src.is_dir():  # pressure/io
                shutil.copytree(src, self.proc / src.name)
            else:
                shutil.copyfile(src, self.proc / src.name)
        self._mono, self._wall = step.monotonic, step.wall
        self.index = index

    def prime(self) -> list[str]:
        self.goto(0)
        return self.collector.prime()

    def sample(self) -> IntervalResult:
        self.goto(self.index + 1)
        return self.collector.sample()

    def since_boot(self, index: int = 0) -> IntervalResult:
        self.goto(index)
        return self.collector.since_boot()

    def run(self) -> list[IntervalResult]:
        """prime() on step 000, then one sample() per further step."""
        self.prime()
        return [self.sample() for _ in self.scenario.steps[1:]]


def row(res: IntervalResult, device: str) -> dict[str, Any]:
    """One reported device of a result, NaN spelled None."""
    assert device in res.devices, f"{device} not reported; got {res.devices}"
    i = res.devices.index(device)
    out: dict[str, Any] = {name: None if np.isnan(arr[i]) else float(arr[i])
                           for name, arr in res.metrics.items()}
    out.update(interval_s=float(res.interval_s[i]), reset=bool(res.reset[i]),
               kind=res.kinds[i], parent=res.parents[i])
    return out


def assert_row(res: IntervalResult, device: str, expected: dict[str, float | None], *,
               complete: bool = False) -> None:
    """Every expected metric equals the golden (rel 1e-12); None means null."""
    got = row(res, device)
    if complete:
        assert set(expected) == set(DERIVED_COLUMNS)
    for name, want in expected.items():
        if want is None:
            assert got[name] is None, f"{device}.{name}: expected null, got {got[name]}"
        else:
            assert got[name] is not None, f"{device}.{name}: expected {want}, got null"
            assert got[name] == pytest.approx(want, rel=REL), f"{device}.{name}"


def assert_all_null(res: IntervalResult, device: str) -> None:
    got = row(res, device)
    assert got["reset"] is True
    assert all(got[m] is None for m in DERIVED_COLUMNS), got


TS_0 = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z in µs: wall 1700000000.0 s * 10**6


# ---------------------------------------------------------------------------------------------
# every scenario: well-formed fixture, frame validates
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_fixture_is_well_formed(name: str) -> None:
    sc = load_scenario(name)
    assert sc.description
    assert [s.dir.name for s in sc.steps] == [f"{i:03d}" for i in range(len(sc.steps))]
    assert sorted(p.name for p in (sc.root / "steps").iterdir()) == [s.dir.name for s in sc.steps]
    monos = [s.monotonic for s in sc.steps]
    assert monos == sorted(monos)
    assert len(set(monos)) == len(monos)


@pytest.mark.parametrize("name", [s for s in SCENARIOS if s != "unreadable_proc"])
def test_every_scenario_builds_a_valid_sampleframe(name: str, tmp_path: Path) -> None:
    player = Player(name, tmp_path)
    results = player.run()
    frame = frame_from_results(results, host="fixture")
    frame.validate()
    assert len(frame) == sum(len(r) for r in results)
    # A reset row has every measure null; any other row of these fixtures has r_iops.
    df = frame.df
    assert df.filter(pl.col("reset"))["r_iops"].null_count() == df["reset"].sum()
    assert df.filter(~pl.col("reset"))["r_iops"].null_count() == 0


def test_scenario_names() -> None:
    assert set(SCENARIOS) >= {
        "steady_17", "wrap32", "counters_backwards", "remove_readd", "appear_midrun",
        "kernel26_old_layout", "layouts_mixed", "malformed_line", "subsecond",
        "major_minor_change", "unreadable_proc"}


# ---------------------------------------------------------------------------------------------
# steady_17
# ---------------------------------------------------------------------------------------------
# Interval 1 (step 000 -> 001, Δt = 1001.0 - 1000.0 = 1 s). sda deltas:
#   Δ1..Δ17 = 120 30 7680 600 | 80 20 2560 1600 | in_flight 3 | 450 2300 | 4 1 4096 40 | 10 25
SDA_STEADY_1: dict[str, float | None] = {
    "r_iops": 120.0,  # 120/1
    "w_iops": 80.0,  # 80/1
    "d_iops": 4.0,  # 4/1
    "f_iops": 10.0,  # 10/1
    "iops": 204.0,  # (120+80+4)/1, flushes excluded
    "r_kBps": 3840.0,  # 7680/2/1
    "w_kBps": 1280.0,  # 2560/2/1
    "d_kBps": 2048.0,  # 4096/2/1
    "kBps": 7168.0,  # (7680+2560+4096)/2/1 = 14336/2
    "r_merged_ps": 30.0,  # 30/1
    "w_merged_ps": 20.0,  # 20/1
    "d_merged_ps": 1.0,  # 1/1
    "r_rqm_pct": 20.0,  # 30/(120+30)*100
    "w_rqm_pct": 20.0,  # 20/(80+20)*100
    "d_rqm_pct": 20.0,  # 1/(4+1)*100
    "r_await_ms": 5.0,  # 600/120
    "w_await_ms": 20.0,  # 1600/80
    "d_await_ms": 10.0,  # 40/4
    "f_await_ms": 2.5,  # 25/10
    "await_ms": 10.980392156862745,  # (600+1600+40)/(120+80+4) = 2240/204
    "r_areq_kB": 32.0,  # 7680/2/120
    "w_areq_kB": 16.0,  # 2560/2/80
    "d_areq_kB": 512.0,  # 4096/2/4
    "areq_kB": 35.13725490196079,  # 14336/2/204 = 7168/204
    "aqu_sz": 2.3,  # 2300/(1*1000)
    "util_pct": 45.0,  # 450/(1*1000)*100
    "inflight": 3.0,  # field 9 at step 001 (a gauge)
}

# Interval 2 (step 001 -> 002, Δt = 1003.0 - 1001.0 = 2 s). sda deltas:
#   0 0 0 0 | 500 100 32000 2500 | in_flight 0 | 1000 3000 | 0 0 0 0 | 20 10
SDA_STEADY_2: dict[str, float | None] = {
    "r_iops": 0.0,
    "w_iops": 250.0,  # 500/2
    "d_iops": 0.0,
    "f_iops": 10.0,  # 20/2
    "iops": 250.0,  # (0+500+0)/2
    "r_kBps": 0.0,
    "w_kBps": 8000.0,  # 32000/2/2
    "d_kBps": 0.0,
    "kBps": 8000.0,  # 32000/2/2
    "r_merged_ps": 0.0,
    "w_merged_ps": 50.0,  # 100/2
    "d_merged_ps": 0.0,
    "r_rqm_pct": 0.0,  # 0/(0+0): no request -> 0 (sysstat)
    "w_rqm_pct": 16.666666666666664,  # 100/(500+100)*100
    "d_rqm_pct": 0.0,
    "r_await_ms": 0.0,  # no read completed -> 0.00 as iostat prints
    "w_await_ms": 5.0,  # 2500/500
    "d_await_ms": 0.0,
    "f_await_ms": 0.5,  # 10/20
    "await_ms": 5.0,  # (0+2500+0)/(0+500+0)
    "r_areq_kB": 0.0,
    "w_areq_kB": 32.0,  # 32000/2/500
    "d_areq_kB": 0.0,
    "areq_kB": 32.0,  # 32000/2/500
    "aqu_sz": 1.5,  # 3000/(2*1000)
    "util_pct": 50.0,  # 1000/(2*1000)*100
    "inflight": 0.0,
}


def test_steady_sda_all_metrics_both_intervals(tmp_path: Path) -> None:
    r1, r2 = Player("steady_17", tmp_path).run()
    assert_row(r1, "sda", SDA_STEADY_1, complete=True)
    assert_row(r2, "sda", SDA_STEADY_2, complete=True)
    assert row(r1, "sda")["interval_s"] == 1.0
    assert row(r2, "sda")["interval_s"] == 2.0
    assert r1.ts_us == TS_0 + 1_000_000  # wall 1700000001.0
    assert r2.ts_us == TS_0 + 3_000_000  # wall 1700000003.0
    assert not r1.reset.any()
    assert not r2.reset.any()


def test_steady_partitions_dm_md(tmp_path: Path) -> None:
    r1, r2 = Player("steady_17", tmp_path).run()
    assert r1.devices == ["loop0", "sda", "sda1", "sda2", "sdb", "sdb1", "dm-0", "md0"]
    assert r1.kinds == ["loop", "disk", "partition", "partition", "disk", "partition", "dm",
                        "md"]
    assert r1.parents == [None, None, "sda", "sda", None, "sdb", None, None]
    # sda1, interval 1: Δ = 20 5 1280 100 | 20 5 640 200 | 1 | 150 300 | 0 0 0 0 | 0 0
    assert_row(r1, "sda1", {
        "r_iops": 20.0, "w_iops": 20.0, "d_iops": 0.0, "f_iops": 0.0,
        "iops": 40.0,  # 20+20
        "r_kBps": 640.0,  # 1280/2
        "w_kBps": 320.0,  # 640/2
        "d_kBps": 0.0,
        "kBps": 960.0,  # (1280+640)/2
        "r_merged_ps": 5.0, "w_merged_ps": 5.0, "d_merged_ps": 0.0,
        "r_rqm_pct": 20.0,  # 5/25*100
        "w_rqm_pct": 20.0,  # 5/25*100
        "d_rqm_pct": 0.0,  # 0/0 -> 0
        "r_await_ms": 5.0,  # 100/20
        "w_await_ms": 10.0,  # 200/20
        "d_await_ms": 0.0, "f_await_ms": 0.0,
        "await_ms": 7.5,  # (100+200)/40
        "r_areq_kB": 32.0,  # 1280/2/20
        "w_areq_kB": 16.0,  # 640/2/20
        "d_areq_kB": 0.0,
        "areq_kB": 24.0,  # 1920/2/40
        "aqu_sz": 0.3,  # 300/1000
        "util_pct": 15.0,  # 150/1000*100
        "inflight": 1.0,
    }, complete=True)
    # sda1, interval 2 (2 s): Δ = 0 0 0 0 | 100 0 1600 800 | 0 | 400 800
    assert_row(r2, "sda1", {
        "r_iops": 0.0,
        "w_iops": 50.0,  # 100/2
        "w_kBps": 400.0,  # 1600/2/2
        "w_rqm_pct": 0.0,  # 0/(100+0)*100
        "w_await_ms": 8.0,  # 800/100
        "w_areq_kB": 8.0,  # 1600/2/100
        "iops": 50.0, "await_ms": 8.0, "areq_kB": 8.0,
        "aqu_sz": 0.4,  # 800/2000
        "util_pct": 20.0,  # 400/2000*100
    })
    # sda2, interval 1: Δ = 100 25 6400 500 | 60 15 1920 1400 | 2 | 300 2000 | 4 1 4096 40
    assert_row(r1, "sda2", {
        "r_iops": 100.0, "w_iops": 60.0, "d_iops": 4.0, "f_iops": 0.0,
        "iops": 164.0,  # 100+60+4
        "r_kBps": 3200.0,  # 6400/2
        "w_kBps": 960.0,  # 1920/2
        "d_kBps": 2048.0,  # 4096/2
        "kBps": 6208.0,  # (6400+1920+4096)/2 = 12416/2
        "r_rqm_pct": 20.0,  # 25/125*100
        "w_rqm_pct": 20.0,  # 15/75*100
        "d_rqm_pct": 20.0,  # 1/5*100
        "r_await_ms": 5.0,  # 500/100
        "w_await_ms": 23.333333333333332,  # 1400/60
        "d_await_ms": 10.0,  # 40/4
        "f_await_ms": 0.0,
        "await_ms": 11.829268292682928,  # (500+1400+40)/164 = 1940/164
        "r_areq_kB": 32.0, "w_areq_kB": 16.0, "d_areq_kB": 512.0,
        "areq_kB": 37.853658536585364,  # 12416/2/164 = 6208/164
        "aqu_sz": 2.0,  # 2000/1000
        "util_pct": 30.0,  # 300/1000*100
        "inflight": 2.0,
    })
    # sdb (SSD), interval 1: Δ = 1000 0 64000 200 | 500 100 40000 400 | 4 | 800 610 |
    #   0 0 0 0 | 50 5
    assert_row(r1, "sdb", {
        "r_iops": 1000.0, "w_iops": 500.0, "d_iops": 0.0, "f_iops": 50.0,
        "iops": 1500.0,
        "r_kBps": 32000.0,  # 64000/2
        "w_kBps": 20000.0,  # 40000/2
        "kBps": 52000.0,  # 104000/2
        "r_rqm_pct": 0.0,  # 0/(1000+0)*100
        "w_rqm_pct": 16.666666666666664,  # 100/600*100
        "r_await_ms": 0.2,  # 200/1000
        "w_await_ms": 0.8,  # 400/500
        "d_await_ms": 0.0,  # no discard completed
        "f_await_ms": 0.1,  # 5/50
        "await_ms": 0.4,  # (200+400+0)/1500
        "r_areq_kB": 32.0,  # 64000/2/1000
        "w_areq_kB": 40.0,  # 40000/2/500
        "areq_kB": 34.666666666666664,  # 104000/2/1500 = 52000/1500
        "aqu_sz": 0.61,  # 610/1000
        "util_pct": 80.0,  # 800/1000*100
        "inflight": 4.0,
    })
    # sdb, interval 2 (2 s): Δ = 2000 0 16000 400 | 0 0 0 0 | 0 | 1000 400 | 0.. | 0 0
    assert_row(r2, "sdb", {
        "r_iops": 1000.0,  # 2000/2
        "r_kBps": 4000.0,  # 16000/2/2
        "r_await_ms": 0.2,  # 400/2000
        "r_areq_kB": 4.0,  # 16000/2/2000
        "w_iops": 0.0, "w_await_ms": 0.0, "f_iops": 0.0, "f_await_ms": 0.0,
        "iops": 1000.0, "await_ms": 0.2,
        "aqu_sz": 0.2,  # 400/2000
        "util_pct": 50.0,  # 1000/2000*100
    })
    # sdb1, interval 1: Δ = 20 0 1280 4 | 20 5 640 16 | 0 | 30 20
    assert_row(r1, "sdb1", {
        "r_iops": 20.0, "r_kBps": 640.0,
        "r_await_ms": 0.2,  # 4/20
        "w_await_ms": 0.8,  # 16/20
        "w_rqm_pct": 20.0,  # 5/25*100
        "await_ms": 0.5,  # 20/40
        "areq_kB": 24.0,  # 1920/2/40
        "util_pct": 3.0,  # 30/1000*100
        "aqu_sz": 0.02,  # 20/1000
    })
    # sdb1, interval 2: Δ = 0 0 0 0 | 100 0 1600 80 | 0 | 90 80 over 2 s
    assert_row(r2, "sdb1", {
        "w_iops": 50.0, "w_kBps": 400.0,
        "w_await_ms": 0.8,  # 80/100
        "util_pct": 4.5,  # 90/2000*100
        "aqu_sz": 0.04,  # 80/2000
    })
    # dm-0, interval 1: Δ = 125 0 6400 625 | 75 0 1920 1800 | 2 | 310 2450 | 4 0 4096 44
    assert_row(r1, "dm-0", {
        "r_iops": 125.0, "w_iops": 75.0, "d_iops": 4.0, "iops": 204.0,
        "r_kBps": 3200.0, "w_kBps": 960.0, "d_kBps": 2048.0,
        "kBps": 6208.0,  # (6400+1920+4096)/2
        "r_merged_ps": 0.0, "r_rqm_pct": 0.0, "d_rqm_pct": 0.0,
        "r_await_ms": 5.0,  # 625/125
        "w_await_ms": 24.0,  # 1800/75
        "d_await_ms": 11.0,  # 44/4
        "await_ms": 12.102941176470589,  # (625+1800+44)/204 = 2469/204
        "r_areq_kB": 25.6,  # 6400/2/125
        "w_areq_kB": 12.8,  # 1920/2/75
        "d_areq_kB": 512.0,
        "areq_kB": 30.431372549019606,  # 12416/2/204 = 6208/204
        "aqu_sz": 2.45,  # 2450/1000
        "util_pct": 31.0,  # 310/1000*100
        "inflight": 2.0,
    })
    # dm-0, interval 2: Δ = 0 0 0 0 | 500 0 30400 2000 | 0 | 620 2400 over 2 s
    assert_row(r2, "dm-0", {
        "w_iops": 250.0,  # 500/2
        "w_kBps": 7600.0,  # 30400/2/2
        "w_await_ms": 4.0,  # 2000/500
        "w_areq_kB": 30.4,  # 30400/2/500
        "util_pct": 31.0,  # 620/2000*100
        "aqu_sz": 1.2,  # 2400/2000
    })
    # md0 (md accounts no ticks here): Δ = 40 0 2560 0 | 20 0 640 0 | 0 | 0 0
    assert_row(r1, "md0", {
        "r_iops": 40.0, "w_iops": 20.0, "iops": 60.0,
        "r_kBps": 1280.0, "w_kBps": 320.0, "kBps": 1600.0,
        "r_await_ms": 0.0, "w_await_ms": 0.0, "await_ms": 0.0,
        "r_areq_kB": 32.0,  # 2560/2/40
        "w_areq_kB": 16.0,  # 640/2/20
        "areq_kB": 26.666666666666668,  # 3200/2/60 = 1600/60
        "util_pct": 0.0, "aqu_sz": 0.0,
    })
    assert_row(r2, "md0", {"w_iops": 50.0, "w_kBps": 400.0, "w_areq_kB": 8.0})


def test_steady_device_with_no_io_in_interval_is_zero_not_null(tmp_path: Path) -> None:
    r1, _ = Player("steady_17", tmp_path).run()
    got = row(r1, "loop0")
    # All 17 fields were printed and did not move: every measure is 0.0 (measured), not null.
    assert {m: got[m] for m in DERIVED_COLUMNS} == dict.fromkeys(DERIVED_COLUMNS, 0.0)


def test_steady_idle_device_hidden_unless_include_idle(tmp_path: Path) -> None:
    r1, _ = Player("steady_17", tmp_path / "a").run()
    assert "sr0" not in r1.devices  # iostat hides a device with no I/O since boot
    r1, _ = Player("steady_17", tmp_path / "b", include_idle=True).run()
    assert "sr0" in r1.devices
    assert row(r1, "sr0")["util_pct"] == 0.0


def test_steady_partitions_hidden_by_default_and_devices_filter(tmp_path: Path) -> None:
    r1, _ = Player("steady_17", tmp_path / "a", partitions=False).run()
    assert r1.devices == ["loop0", "sda", "sdb", "dm-0", "md0"]
    player = Player("steady_17", tmp_path / "b", devices=["/dev/sda1", "dm-0", "nvme9n1"])
    msgs = player.prime()
    assert msgs == [(f"device nvme9n1 is not in {player.diskstats_path}; it will be reported "
                    "if it appears")]
    r1 = player.sample()
    assert r1.devices == ["sda1", "dm-0"]
    assert_row(r1, "sda1", {"r_iops": 20.0})


def test_steady_cpu_shares(tmp_path: Path) -> None:
    r1, r2 = Player("steady_17", tmp_path).run()
    # /proc/stat cpu Δ (user nice system idle iowait irq softirq steal guest guest_nice),
    # interval 1: 120 10 60 250 40 5 5 10 20 0; total = 120+10+60+250+40+5+5+10 = 500
    # (guest is already inside user, so not added to the total; iostat's %user keeps it).
    assert r1.cpu == pytest.approx({
        "cpu_user_pct": 24.0,  # 120/500*100
        "cpu_nice_pct": 2.0,  # 10/500*100
        "cpu_system_pct": 14.0,  # (60+5+5)/500*100
        "cpu_iowait_pct": 8.0,  # 40/500*100
        "cpu_steal_pct": 2.0,  # 10/500*100
        "cpu_idle_pct": 50.0,  # 250/500*100
        # /proc/pressure/io totals (us): some 1,000,000 -> 1,250,000, full 400,000 ->
        # 500,000 over 1 s
        "psi_io_some_pct": 25.0,
        "psi_io_full_pct": 10.0,
    }, rel=REL)
    # interval 2: 200 0 100 600 80 10 10 0 0 0; total 1000
    assert r2.cpu == pytest.approx({
        "cpu_user_pct": 20.0,  # 200/1000*100
        "cpu_nice_pct": 0.0,
        "cpu_system_pct": 12.0,  # (100+10+10)/1000*100
        "cpu_iowait_pct": 8.0,  # 80/1000*100
        "cpu_steal_pct": 0.0,
        "cpu_idle_pct": 60.0,  # 600/1000*100
        "psi_io_some_pct": 0.5,  # 10,000 us of 2 s
        "psi_io_full_pct": 0.0,
    }, rel=REL)
    frame = frame_from_results([r1, r2], host="h")
    assert frame.df["cpu_iowait_pct"].to_list() == [8.0] * len(r1) + [8.0] * len(r2)
    assert frame.df["psi_io_some_pct"].to_list() == [25.0] * len(r1) + [0.5] * len(r2)


def test_no_pressure_file_gives_null_stall_shares(tmp_path: Path) -> None:
    """A kernel without PSI (before 4.20, or psi=0): the columns stay null."""
    r1, _ = Player("wrap32", tmp_path).run()
    assert r1.cpu["psi_io_some_pct"] is None and r1.cpu["psi_io_full_pct"] is None


def test_pressure_parsing() -> None:
    text = ("some avg10=1.00 avg60=0.50 avg300=0.10 total=123\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=45\n")
    assert parse_pressure(text) == (123, 45)
    assert parse_pressure("some avg10=1.00 total=5\n") is None   # no full line
    assert pressure_shares((100, 50), (600_100, 50), 2.0) == {
        "psi_io_some_pct": 30.0, "psi_io_full_pct": 0.0}
    # a total that went back gives no value, never a negative share
    assert pressure_shares((100, 50), (50, 60), 1.0)["psi_io_some_pct"] is None


def test_steady_metadata(tmp_path: Path) -> None:
    player = Player("steady_17", tmp_path)
    player.run()
    info = player.collector.device_info()
    sda = info["sda"]
    assert (sda.kind, sda.parent, sda.major, sda.minor) == ("disk", None, 8, 0)
    assert sda.rotational is True
    assert sda.scheduler == "mq-deadline"  # "[mq-deadline] kyber bfq none"
    assert (sda.model, sda.vendor) == ("ST4000NM0035-1V4", "ATA")  # "ATA     " stripped
    assert (sda.queue_depth, sda.nr_requests) == (32, 64)
    assert sda.size_bytes == 4000787030016  # 7814037168 sectors * 512
    sda1 = info["sda1"]
    assert (sda1.kind, sda1.parent, sda1.major, sda1.minor) == ("partition", "sda", 8, 1)
    # queue and device attributes of a partition are its disk's
    assert (sda1.rotational, sda1.scheduler, sda1.model) == (True, "mq-deadline",
                                                             "ST4000NM0035-1V4")
    assert sda1.size_bytes == 536870912  # 1048576 * 512
    assert info["sda2"].size_bytes == 4000249110528  # 7812986544 * 512
    sdb = info["sdb"]
    assert (sdb.rotational, sdb.scheduler, sdb.nr_requests) == (False, "none", 256)
    assert sdb.size_bytes == 1000204886016  # 1953525168 * 512
    assert info["sdb1"].parent == "sdb"
    dm = info["dm-0"]
    assert (dm.kind, dm.dm_name, dm.slaves, dm.display_name) == ("dm", "vg0-root", ("sda2",),
                                                                  "vg0-root")
    assert (dm.major, dm.minor, dm.scheduler, dm.model, dm.queue_depth) == (253, 0, "none",
                                                                            None, None)
    assert dm.size_bytes == 4000248233984  # 7812984832 * 512
    md = info["md0"]
    assert (md.kind, md.md_level, md.slaves) == ("md", "raid1", ("sda1", "sdb1"))
    assert md.size_bytes == 535822336  # 1046528 * 512
    assert info["loop0"].backing_file == "/var/lib/images/disk.img"
    assert info["loop0"].kind == "loop"
    assert (info["sr0"].model, info["sr0"].vendor) == ("DVD-RAM UJ8E2", "MATSHITA")


def test_steady_since_boot(tmp_path: Path) -> None:
    player = Player("steady_17", tmp_path)
    res = player.since_boot(0)  # no prime needed; uptime 1000.00 s
    assert res.since_boot is True
    assert res.devices == ["loop0", "sda", "sda1", "sda2", "sdb", "sdb1", "dm-0", "md0"]
    assert res.ts_us == TS_0
    # sda counters at step 000 over 1000 s:
    #   1000 100 80000 5000 | 2000 500 160000 20000 | 0 | 30000 26000 | 10 0 2048 50 | 100 300
    assert_row(res, "sda", {
        "r_iops": 1.0,  # 1000/1000
        "w_iops": 2.0,  # 2000/1000
        "d_iops": 0.01,  # 10/1000
        "f_iops": 0.1,  # 100/1000
        "iops": 3.01,  # 3010/1000
        "r_kBps": 40.0,  # 80000/2/1000
        "w_kBps": 80.0,  # 160000/2/1000
        "d_kBps": 1.024,  # 2048/2/1000
        "kBps": 121.024,  # 242048/2/1000
        "r_merged_ps": 0.1, "w_merged_ps": 0.5, "d_merged_ps": 0.0,
        "r_rqm_pct": 9.090909090909092,  # 100/1100*100
        "w_rqm_pct": 20.0,  # 500/2500*100
        "d_rqm_pct": 0.0,
        "r_await_ms": 5.0,  # 5000/1000
        "w_await_ms": 10.0,  # 20000/2000
        "d_await_ms": 5.0,  # 50/10
        "f_await_ms": 3.0,  # 300/100
        "await_ms": 8.322259136212624,  # (5000+20000+50)/3010 = 25050/3010
        "r_areq_kB": 40.0, "w_areq_kB": 40.0,
        "d_areq_kB": 102.4,  # 2048/2/10
        "areq_kB": 40.20730897009967,  # 242048/2/3010 = 121024/3010
        "aqu_sz": 0.026,  # 26000/(1000*1000)
        "util_pct": 3.0,  # 30000/(1000*1000)*100
        "inflight": 0.0,
    }, complete=True)
    assert row(res, "sda")["interval_s"] == 1000.0
    frame = frame_from_results([res], host="h")
    assert frame.df["since_boot"].all()


def test_since_boot_without_uptime_is_a_collector_error(tmp_path: Path) -> None:
    player = Player("wrap32", tmp_path)  # no uptime file in this scenario
    with pytest.raises(CollectorError, match=r"cannot read .*uptime"):
        player.since_boot(0)


# ---------------------------------------------------------------------------------------------
# wrap32
# ---------------------------------------------------------------------------------------------
def test_wrap32(tmp_path: Path) -> None:
    r1, r2 = Player("wrap32", tmp_path).run()
    # sda: rd_ticks 4294967000 -> 704: Δ = (2**32 - 4294967000) + 704 = 296 + 704 = 1000
    #      io_ticks 4294967200 -> 704: Δ = 96 + 704 = 800
    #      time_in_queue 4294966296 -> 2000: Δ = 1000 + 2000 = 3000
    #      rd_ios +200, rd_sectors +12800, wr_ios +100, wr_sectors +6400, wr_ticks +500
    assert_row(r1, "sda", {
        "r_iops": 200.0,
        "r_kBps": 6400.0,  # 12800/2
        "r_await_ms": 5.0,  # 1000/200
        "r_areq_kB": 32.0,  # 12800/2/200
        "w_iops": 100.0,
        "w_kBps": 3200.0,  # 6400/2
        "w_await_ms": 5.0,  # 500/100
        "iops": 300.0,
        "await_ms": 5.0,  # (1000+500)/300
        "areq_kB": 32.0,  # 19200/2/300
        "util_pct": 80.0,  # 800/1000*100
        "aqu_sz": 3.0,  # 3000/1000
        "inflight": 2.0,
        "d_iops": 0.0, "d_await_ms": 0.0, "f_iops": 0.0, "f_await_ms": 0.0,
    })
    assert not row(r1, "sda")["reset"]
    # after the wrap it continues normally: Δ = 100 0 800 300 | 0 .. | 250 300
    assert_row(r2, "sda", {
        "r_iops": 100.0, "r_kBps": 400.0,  # 800/2
        "r_await_ms": 3.0,  # 300/100
        "r_areq_kB": 4.0,  # 800/2/100
        "util_pct": 25.0,  # 250/1000*100
        "aqu_sz": 0.3,  # 300/1000
    })
    # sdb: rd_ios 4294967000 -> 4294967496 is a 64-bit count passing 2**32: Δ = 496.
    #      wr_ticks 4294967290 -> 410: Δ = 6 + 410 = 416; dc_ticks 4294967295 -> 9: 1 + 9 = 10
    #      fl_ticks 4294967294 -> 8: 2 + 8 = 10
    #      Δ = 496 0 3968 496 | 100 0 800 416 | 0 | 500 2000 | 2 0 1024 10 | 10 10
    assert_row(r1, "sdb", {
        "r_iops": 496.0,
        "r_kBps": 1984.0,  # 3968/2
        "r_await_ms": 1.0,  # 496/496
        "r_areq_kB": 4.0,  # 3968/2/496
        "w_iops": 100.0,
        "w_kBps": 400.0,  # 800/2
        "w_await_ms": 4.16,  # 416/100
        "w_areq_kB": 4.0,
        "d_iops": 2.0,
        "d_kBps": 512.0,  # 1024/2
        "d_await_ms": 5.0,  # 10/2
        "d_areq_kB": 256.0,  # 1024/2/2
        "f_iops": 10.0,
        "f_await_ms": 1.0,  # 10/10
        "iops": 598.0,  # 496+100+2
        "kBps": 2896.0,  # (3968+800+1024)/2 = 5792/2
        "await_ms": 1.5418060200668897,  # (496+416+10)/598 = 922/598
        "areq_kB": 4.842809364548495,  # 5792/2/598 = 2896/598
        "util_pct": 50.0,  # 500/1000*100
        "aqu_sz": 2.0,  # 2000/1000
    }, complete=False)
    # no I/O in interval 2: every measure 0, not null
    got = row(r2, "sdb")
    assert all(got[m] == 0.0 for m in DERIVED_COLUMNS)


# ---------------------------------------------------------------------------------------------
# counters_backwards
# ---------------------------------------------------------------------------------------------
def test_counters_backwards_reset_row_then_normal(tmp_path: Path) -> None:
    r1, r2, r3 = Player("counters_backwards", tmp_path).run()
    # interval 1 normal: Δ = 100 0 800 100 | 0.. | 1 | 100 100
    assert_row(r1, "sda", {"r_iops": 100.0, "r_kBps": 400.0, "r_await_ms": 1.0,
                           "r_areq_kB": 4.0, "util_pct": 10.0, "aqu_sz": 0.1,
                           "inflight": 1.0})
    # interval 2: every sda counter went backwards -> reset row, every measure null
    assert_all_null(r2, "sda")
    assert row(r2, "sda")["interval_s"] == 1.0
    assert ("device sda: counters went backwards (statistics reset); interval reported as "
            "reset with no values") in r2.messages
    # the control disk is unaffected: Δ = 10 0 80 10 | 10 0 80 30 | 0 | 40 40
    assert_row(r2, "sdb", {"r_iops": 10.0, "r_kBps": 40.0, "r_await_ms": 1.0,
                           "w_await_ms": 3.0, "await_ms": 2.0,  # (10+30)/20
                           "util_pct": 4.0, "aqu_sz": 0.04})
    assert not row(r2, "sdb")["reset"]
    # interval 3 from the 002 baseline: Δ = 50 5 400 100 | 40 10 320 200 | 0 | 150 300
    assert_row(r3, "sda", {
        "r_iops": 50.0, "w_iops": 40.0, "iops": 90.0,
        "r_kBps": 200.0,  # 400/2
        "w_kBps": 160.0,  # 320/2
        "kBps": 360.0,  # 720/2
        "r_merged_ps": 5.0, "w_merged_ps": 10.0,
        "r_rqm_pct": 9.090909090909092,  # 5/55*100
        "w_rqm_pct": 20.0,  # 10/50*100
        "r_await_ms": 2.0,  # 100/50
        "w_await_ms": 5.0,  # 200/40
        "await_ms": 3.3333333333333335,  # 300/90
        "r_areq_kB": 4.0, "w_areq_kB": 4.0,
        "areq_kB": 4.0,  # 720/2/90
        "util_pct": 15.0,  # 150/1000*100
        "aqu_sz": 0.3,  # 300/1000
        "inflight": 0.0,
    })
    assert not row(r3, "sda")["reset"]
    assert not any("backwards" in m for m in r3.messages)
    frame = frame_from_results([r1, r2, r3], host="h")
    resets = frame.df.filter(pl.col("reset"))
    assert resets["device"].to_list() == ["sda"]
    assert resets.select(pl.col(list(DERIVED_COLUMNS)).null_count()).row(0) == (1,) * len(
        DERIVED_COLUMNS)


# ---------------------------------------------------------------------------------------------
# remove_readd
# ---------------------------------------------------------------------------------------------
SDA_HALF_SECOND = {  # Δ = 10 0 80 10 | 10 0 80 30 | 0 | 40 40 over 0.5 s
    "r_iops": 20.0,  # 10/0.5
    "r_kBps": 80.0,  # 80/2/0.5
    "r_await_ms": 1.0,  # 10/10
    "r_areq_kB": 4.0,  # 80/2/10
    "w_iops": 20.0,
    "w_kBps": 80.0,
    "w_await_ms": 3.0,  # 30/10
    "w_areq_kB": 4.0,
    "iops": 40.0,  # 20/0.5
    "kBps": 160.0,  # 160/2/0.5
    "await_ms": 2.0,  # (10+30)/20
    "areq_kB": 4.0,
    "util_pct": 8.0,  # 40/(0.5*1000)*100
    "aqu_sz": 0.08,  # 40/(0.5*1000)
}


def test_remove_then_readd(tmp_path: Path) -> None:
    player = Player("remove_readd", tmp_path)
    assert player.prime() == []
    r1 = player.sample()
    # sdb, Δ = 20 0 160 40 | 0 .. | 0 | 30 40 over 0.5 s
    assert_row(r1, "sdb", {
        "r_iops": 40.0,  # 20/0.5
        "r_kBps": 160.0,  # 160/2/0.5
        "r_await_ms": 2.0,  # 40/20
        "r_areq_kB": 4.0,  # 160/2/20
        "util_pct": 6.0,  # 30/500*100
        "aqu_sz": 0.08,  # 40/500
    })
    r2 = player.sample()  # sdb unplugged
    assert r2.devices == ["sda"]
    assert r2.messages == ["device sdb disappeared; the other devices are still collected"]
    assert "sdb" not in player.collector.device_info()
    assert_row(r2, "sda", SDA_HALF_SECOND)
    r3 = player.sample()  # sdb back with fresh counters
    assert r3.messages == ["device sdb re-appeared; its counters restart (reset row)"]
    assert r3.devices == ["sda", "sdb"]
    assert_all_null(r3, "sdb")
    # the reset row covers the time since the previous sample (301.5 - 301.0 s)
    assert row(r3, "sdb")["interval_s"] == 0.5
    assert_row(r3, "sda", SDA_HALF_SECOND)
    assert player.collector.device_info()["sdb"].model == "Ultra USB 3.0"
    r4 = player.sample()
    assert r4.messages == []
    # sdb from the 003 baseline: Δ = 10 0 80 10 | 0.. | 0 | 10 10 over 0.5 s
    assert_row(r4, "sdb", {
        "r_iops": 20.0, "r_kBps": 80.0, "r_await_ms": 1.0, "r_areq_kB": 4.0,
        "util_pct": 2.0,  # 10/500*100
        "aqu_sz": 0.02,  # 10/500
    })
    assert not row(r4, "sdb")["reset"]
    assert row(r4, "sdb")["interval_s"] == 0.5
    assert r4.ts_us == TS_0 + 302_000_000  # wall 1700000302.0
    assert r3.ts_us == TS_0 + 301_500_000  # wall 1700000301.5


# ---------------------------------------------------------------------------------------------
# appear_midrun
# ---------------------------------------------------------------------------------------------
def test_device_appearing_mid_run(tmp_path: Path) -> None:
    player = Player("appear_midrun", tmp_path)
    assert player.prime() == []
    r1 = player.sample()
    assert r1.devices == ["sda"]
    assert r1.messages == [
        "device sdc appeared; baselined, reported from the next sample",
        "device sdc1 appeared; baselined, reported from the next sample",
    ]
    info = player.collector.device_info()
    assert info["sdc"].model == "QEMU HARDDISK"
    assert info["sdc"].scheduler == "bfq"
    assert (info["sdc1"].kind, info["sdc1"].parent) == ("partition", "sdc")
    r2 = player.sample()
    assert r2.devices == ["sda", "sdc", "sdc1"]
    assert r2.messages == []
    # sdc: Δ = 50 0 400 50 | 0.. | 0 | 50 50 over 1 s
    assert_row(r2, "sdc", {"r_iops": 50.0, "r_kBps": 200.0, "r_await_ms": 1.0,
                           "r_areq_kB": 4.0, "util_pct": 5.0, "aqu_sz": 0.05})
    # sdc1: Δ = 40 0 320 40 | 0.. | 0 | 40 40
    assert_row(r2, "sdc1", {"r_iops": 40.0, "r_kBps": 160.0, "r_await_ms": 1.0,
                            "r_areq_kB": 4.0, "util_pct": 4.0, "aqu_sz": 0.04})
    assert row(r2, "sdc1")["parent"] == "sdc"
    # sda at 1 s steps: Δ = 10 0 80 10 | 10 0 80 30 | 0 | 40 40
    assert_row(r2, "sda", {"r_iops": 10.0, "r_kBps": 40.0, "w_await_ms": 3.0,
                           "await_ms": 2.0, "util_pct": 4.0, "aqu_sz": 0.04})


# ---------------------------------------------------------------------------------------------
# kernel26_old_layout
# ---------------------------------------------------------------------------------------------
OLD_PARTITION_NULLS = ("r_merged_ps", "w_merged_ps", "r_rqm_pct", "w_rqm_pct", "r_await_ms",
                       "w_await_ms", "await_ms", "aqu_sz", "util_pct", "inflight", "d_iops",
                       "d_kBps", "d_merged_ps", "d_rqm_pct", "d_await_ms", "d_areq_kB",
                       "f_iops", "f_await_ms")
DISCARD_FLUSH = ("d_iops", "d_kBps", "d_merged_ps", "d_rqm_pct", "d_await_ms", "d_areq_kB",
                 "f_iops", "f_await_ms")


def test_kernel26_old_partition_layout(tmp_path: Path) -> None:
    player = Player("kernel26_old_layout", tmp_path)
    (r1,) = player.run()
    assert r1.devices == ["hda", "hda1", "hda2", "sda", "sda1"]
    # no sysfs: kinds from names, partition parents guessed from names
    assert r1.kinds == ["disk", "partition", "partition", "disk", "partition"]
    assert r1.parents == [None, "hda", "hda", None, "sda"]
    # hda (11 fields): Δ = 100 10 8000 500 | 50 10 4000 1000 | 1 | 600 1600
    assert_row(r1, "hda", {
        "r_iops": 100.0, "w_iops": 50.0, "iops": 150.0,
        "r_kBps": 4000.0,  # 8000/2
        "w_kBps": 2000.0,  # 4000/2
        "kBps": 6000.0,  # 12000/2
        "r_merged_ps": 10.0, "w_merged_ps": 10.0,
        "r_rqm_pct": 9.090909090909092,  # 10/110*100
        "w_rqm_pct": 16.666666666666664,  # 10/60*100
        "r_await_ms": 5.0,  # 500/100
        "w_await_ms": 20.0,  # 1000/50
        "await_ms": 10.0,  # (500+1000)/150, discards absent count as 0
        "r_areq_kB": 40.0,  # 8000/2/100
        "w_areq_kB": 40.0,  # 4000/2/50
        "areq_kB": 40.0,  # 12000/2/150
        "util_pct": 60.0,  # 600/1000*100
        "aqu_sz": 1.6,  # 1600/1000
        "inflight": 1.0,
        **dict.fromkeys(DISCARD_FLUSH),
    }, complete=True)
    # hda1 (4 fields: reads, sectors read, writes, sectors written): Δ = 84 6720 50 4000
    assert_row(r1, "hda1", {
        "r_iops": 84.0, "w_iops": 50.0,
        "iops": 134.0,  # 84+50
        "r_kBps": 3360.0,  # 6720/2
        "w_kBps": 2000.0,  # 4000/2
        "kBps": 5360.0,  # 10720/2
        "r_areq_kB": 40.0,  # 6720/2/84
        "w_areq_kB": 40.0,  # 4000/2/50
        "areq_kB": 40.0,  # 10720/2/134
        **dict.fromkeys(OLD_PARTITION_NULLS),
    }, complete=True)
    # hda2: its 32-bit read count wraps: 4294967290 -> 10 is Δ = 6 + 10 = 16, not a reset
    assert_row(r1, "hda2", {
        "r_iops": 16.0,
        "r_kBps": 640.0,  # 1280/2
        "r_areq_kB": 40.0,  # 1280/2/16
        "w_iops": 0.0, "w_kBps": 0.0,
        "w_areq_kB": 0.0,  # no write: 0 as sysstat
        "iops": 16.0, "kBps": 640.0, "areq_kB": 40.0,
        **dict.fromkeys(OLD_PARTITION_NULLS),
    }, complete=True)
    assert not row(r1, "hda2")["reset"]
    # sda (11 fields): Δ = 10 0 80 20 | 0 0 0 0 | 0 | 20 20
    assert_row(r1, "sda", {"r_iops": 10.0, "r_kBps": 40.0, "r_await_ms": 2.0,
                           "r_areq_kB": 4.0, "r_rqm_pct": 0.0, "w_iops": 0.0,
                           "w_await_ms": 0.0, "await_ms": 2.0, "util_pct": 2.0,
                           "aqu_sz": 0.02, "inflight": 0.0, **dict.fromkeys(DISCARD_FLUSH)})
    # sda1 (4 fields): Δ = 10 80 0 0
    assert_row(r1, "sda1", {"r_iops": 10.0, "r_kBps": 40.0, "r_areq_kB": 4.0,
                            "w_iops": 0.0, "w_areq_kB": 0.0,
                            **dict.fromkeys(OLD_PARTITION_NULLS)})
    # no /proc/stat in this tree: CPU unknown, not 0
    assert r1.cpu == dict.fromkeys(HOST_COLUMNS)
    info = player.collector.device_info()
    assert info["hda1"].rotational is None
    assert info["hda1"].model is None
    assert (info["hda1"].major, info["hda1"].minor) == (3, 1)


# ---------------------------------------------------------------------------------------------
# layouts_mixed
# ---------------------------------------------------------------------------------------------
# Every device: Δ1..11 = 100 25 800 200 | 50 50 1600 300 | 2 | 400 700 over 1 s;
# discards (15+ fields) Δ = 2 2 2048 10; flushes (17+) Δ = 5 5.
COMMON_11 = {
    "r_iops": 100.0, "w_iops": 50.0,
    "r_kBps": 400.0,  # 800/2
    "w_kBps": 800.0,  # 1600/2
    "r_merged_ps": 25.0, "w_merged_ps": 50.0,
    "r_rqm_pct": 20.0,  # 25/125*100
    "w_rqm_pct": 50.0,  # 50/100*100
    "r_await_ms": 2.0,  # 200/100
    "w_await_ms": 6.0,  # 300/50
    "r_areq_kB": 4.0,  # 800/2/100
    "w_areq_kB": 16.0,  # 1600/2/50
    "util_pct": 40.0,  # 400/1000*100
    "aqu_sz": 0.7,  # 700/1000
    "inflight": 2.0,
}
DISCARDS = {
    "d_iops": 2.0, "d_merged_ps": 2.0,
    "d_kBps": 1024.0,  # 2048/2
    "d_rqm_pct": 50.0,  # 2/(2+2)*100
    "d_await_ms": 5.0,  # 10/2
    "d_areq_kB": 512.0,  # 2048/2/2
    "iops": 152.0,  # 100+50+2
    "kBps": 2224.0,  # (800+1600+2048)/2
    "await_ms": 3.3552631578947367,  # (200+300+10)/152 = 510/152
    "areq_kB": 14.631578947368421,  # 4448/2/152 = 2224/152
}
FLUSHES = {"f_iops": 5.0, "f_await_ms": 1.0}  # 5/1, 5/5


def test_layouts_11_15_17_and_future(tmp_path: Path) -> None:
    (r1,) = Player("layouts_mixed", tmp_path).run()
    assert r1.devices == ["sda", "sdb", "nvme0n1", "sdc"]
    # 11 fields: discards and flushes not printed -> null; totals count discards as 0
    assert_row(r1, "sda", {
        **COMMON_11, **dict.fromkeys(DISCARD_FLUSH),
        "iops": 150.0,  # 100+50
        "kBps": 1200.0,  # (800+1600)/2
        "await_ms": 3.3333333333333335,  # (200+300)/150
        "areq_kB": 8.0,  # 2400/2/150
    }, complete=True)
    # 15 fields: discards measured, flushes null
    assert_row(r1, "sdb", {**COMMON_11, **DISCARDS, "f_iops": None, "f_await_ms": None},
               complete=True)
    # 17 fields: everything
    assert_row(r1, "nvme0n1", {**COMMON_11, **DISCARDS, **FLUSHES}, complete=True)
    # 20 fields: the first 17 used; the 3 unknown fields (two of which went backwards)
    # neither reset the row nor change anything
    assert_row(r1, "sdc", {**COMMON_11, **DISCARDS, **FLUSHES}, complete=True)
    assert not r1.reset.any()
    assert r1.messages == []


# ---------------------------------------------------------------------------------------------
# malformed_line
# ---------------------------------------------------------------------------------------------
def test_malformed_lines_keep_other_devices_and_longer_interval(tmp_path: Path) -> None:
    player = Player("malformed_line", tmp_path)
    assert player.prime() == []
    r1 = player.sample()
    path = player.diskstats_path
    assert r1.messages == [
        f"{path}:2: device sdb: counter '84x0' is not a non-negative integer",
        f"{path}:3: device sdc: 6 counters; known layouts have 4, 11, 15 or 17+",
        f"{path}:4: expected 'major minor name counters...', got 1 field(s)",
    ]
    assert r1.devices == ["sda"]  # still collected; no "disappeared" for sdb/sdc
    # sda: Δ = 10 0 80 10 | 0.. | 0 | 10 10 over 1 s
    assert_row(r1, "sda", {"r_iops": 10.0, "r_kBps": 40.0, "r_await_ms": 1.0,
                           "util_pct": 1.0, "aqu_sz": 0.01})
    assert set(player.collector.device_info()) == {"sda", "sdb", "sdc"}
    r2 = player.sample()
    assert r2.messages == []
    assert r2.devices == ["sda", "sdb", "sdc"]
    assert row(r2, "sda")["interval_s"] == 1.0
    # sdb and sdc are derived from their step-000 state over 802 - 800 = 2 s
    assert row(r2, "sdb")["interval_s"] == 2.0
    assert row(r2, "sdc")["interval_s"] == 2.0
    # sdb: Δ = 100 0 800 200 | 0.. | 0 | 300 400 over 2 s
    assert_row(r2, "sdb", {
        "r_iops": 50.0,  # 100/2
        "r_kBps": 200.0,  # 800/2/2
        "r_await_ms": 2.0,  # 200/100
        "r_areq_kB": 4.0,  # 800/2/100
        "util_pct": 15.0,  # 300/2000*100
        "aqu_sz": 0.2,  # 400/2000
    })
    # sdc: Δ = 60 0 480 100 | 0.. | 0 | 200 200 over 2 s
    assert_row(r2, "sdc", {
        "r_iops": 30.0,  # 60/2
        "r_kBps": 120.0,  # 480/2/2
        "r_await_ms": 1.6666666666666667,  # 100/60
        "r_areq_kB": 4.0,  # 480/2/60
        "util_pct": 10.0,  # 200/2000*100
        "aqu_sz": 0.1,  # 200/2000
    })
    assert not r2.reset.any()


# ---------------------------------------------------------------------------------------------
# subsecond
# ---------------------------------------------------------------------------------------------
def test_subsecond_intervals(tmp_path: Path) -> None:
    results = Player("subsecond", tmp_path).run()
    assert len(results) == 3
    for k, res in enumerate(results, start=1):
        # Δ = 5 0 80 10 | 2 0 16 6 | 1 | 60 25 over 0.1 s
        assert row(res, "nvme0n1")["interval_s"] == pytest.approx(0.1, rel=REL)
        assert_row(res, "nvme0n1", {
            "r_iops": 50.0,  # 5/0.1
            "w_iops": 20.0,  # 2/0.1
            "iops": 70.0,  # 7/0.1
            "r_kBps": 400.0,  # 80/2/0.1
            "w_kBps": 80.0,  # 16/2/0.1
            "kBps": 480.0,  # 96/2/0.1
            "r_await_ms": 2.0,  # 10/5
            "w_await_ms": 3.0,  # 6/2
            "await_ms": 2.2857142857142856,  # 16/7
            "r_areq_kB": 8.0,  # 80/2/5
            "w_areq_kB": 4.0,  # 16/2/2
            "areq_kB": 6.857142857142857,  # 96/2/7 = 48/7
            "util_pct": 60.0,  # 60/(0.1*1000)*100
            "aqu_sz": 0.25,  # 25/(0.1*1000)
            "inflight": 1.0,
        }, complete=False)
        assert res.ts_us == TS_0 + 900_000_000 + k * 100_000  # wall 1700000900.k


# ---------------------------------------------------------------------------------------------
# major_minor_change
# ---------------------------------------------------------------------------------------------
def test_major_minor_change_is_a_reset(tmp_path: Path) -> None:
    player = Player("major_minor_change", tmp_path)
    r1, r2 = player.run()
    assert r1.messages == ["device sdb changed from 8:16 to 8:32; counters restart (reset row)"]
    assert_all_null(r1, "sdb")
    assert row(r1, "sdb")["interval_s"] == 1.0
    assert (player.collector.device_info()["sdb"].major,
            player.collector.device_info()["sdb"].minor) == (8, 32)
    # from the 001 baseline: Δ = 40 0 320 80 | 0.. | 0 | 40 80
    assert_row(r2, "sdb", {"r_iops": 40.0, "r_kBps": 160.0,
                           "r_await_ms": 2.0,  # 80/40
                           "r_areq_kB": 4.0, "util_pct": 4.0, "aqu_sz": 0.08})
    assert not row(r2, "sdb")["reset"]


# ---------------------------------------------------------------------------------------------
# unreadable_proc
# ---------------------------------------------------------------------------------------------
def test_unreadable_proc_raises_collector_error(tmp_path: Path) -> None:
    player = Player("unreadable_proc", tmp_path)
    player.prime()
    with pytest.raises(CollectorError) as info:
        player.sample()
    assert str(info.value) == (f"cannot read {player.diskstats_path}: No such file or "
                               "directory; is /proc mounted and readable?")


def test_unreadable_proc_at_prime_and_diskstats_not_a_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CollectorError, match=r"cannot read .*diskstats: No such file"):
        LinuxCollector(empty, tmp_path / "nosys").prime()
    weird = tmp_path / "weird"
    (weird / "diskstats").mkdir(parents=True)
    with pytest.raises(CollectorError, match=r"Is a directory; is /proc mounted"):
        LinuxCollector(weird, tmp_path / "nosys").sample()


def test_frame_from_results_identity_columns(tmp_path: Path) -> None:
    r1, r2 = Player("steady_17", tmp_path).run()
    frame = frame_from_results([r1, r2], host="db01")
    assert isinstance(frame, SampleFrame)
    df = frame.df
    first = df.row(0, named=True)
    assert (first["source"], first["host"], first["device"]) == ("linux-diskstats", "db01",
                                                                 "loop0")
    assert first["ts"].isoformat() == "2023-11-14T22:13:21+00:00"
    sda = df.filter(pl.col("device") == "sda").sort("ts")
    assert sda["interval_s"].to_list() == [1.0, 2.0]
    assert sda["await_ms"].to_list() == pytest.approx([10.980392156862745, 5.0], rel=REL)
    # partition parents carried through; absent measures are null, never NaN
    assert df.filter(pl.col("device") == "sda1")["parent"].to_list() == ["sda", "sda"]
    assert df.select(pl.col(list(DERIVED_COLUMNS)).is_nan().any()).row(0) == (False,) * len(
        DERIVED_COLUMNS)
    # records carry the same values
    rec = next(r for r in r1.to_records(host="db01") if r["device"] == "sda")
    assert rec["r_await_ms"] == 5.0
    assert rec["ts"] == "2023-11-14T22:13:21.000000+00:00"


def _write(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text)


def test_reset_row_of_readded_idle_device_is_not_hidden(tmp_path: Path) -> None:
    """A device re-added with all-zero counters still shows its reset row (never hidden by
    the iostat-style 'no I/O since boot' filter)."""
    proc = tmp_path / "proc"
    proc.mkdir()
    clock = iter([0.0, 1.0, 2.0, 3.0])
    col = LinuxCollector(proc, tmp_path / "nosys", monotonic=lambda: next(clock),
                         wall=lambda: 1.7e9)
    _write(proc, "diskstats", "8 0 sda 10 0 80 5 0 0 0 0 0 5 5\n")
    col.prime()
    _write(proc, "diskstats", "")
    assert "disappeared" in " ".join(col.sample().messages)
    _write(proc, "diskstats", "8 0 sda 0 0 0 0 0 0 0 0 0 0 0\n")
    r = col.sample()
    assert r.devices == ["sda"]
    assert bool(r.reset[0])
    assert np.isnan(r.metrics["r_iops"][0])


def test_dm_device_selected_by_its_dm_name(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    sys_ = tmp_path / "sys"
    (sys_ / "block" / "dm-0" / "dm").mkdir(parents=True)
    (sys_ / "block" / "dm-0" / "dm" / "name").write_text("vg0-root\n")
    clock = iter([0.0, 1.0])
    col = LinuxCollector(proc, sys_, devices=["vg0-root"], monotonic=lambda: next(clock),
                         wall=lambda: 1.7e9)
    _write(proc, "diskstats",
           "253 0 dm-0 10 0 80 5 0 0 0 0 0 5 5\n8 0 sda 1 0 8 1 0 0 0 0 0 1 1\n")
    assert col.prime() == []
    _write(proc, "diskstats",
           "253 0 dm-0 20 0 160 10 0 0 0 0 0 10 10\n8 0 sda 2 0 16 2 0 0 0 0 0 2 2\n")
    r = col.sample()
    assert r.devices == ["dm-0"]
    assert r.metrics["r_iops"][0] == 10.0


def test_device_filter_reads_sysfs_only_for_the_selected_devices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a filter, the dozen sysfs files of a device are read only for devices it
    selects (by kernel name, or a dm device by its dm name): start-up with a thousand
    devices took 0.3-0.5 s otherwise. device_info() holds the selected devices only."""
    import iogauge.collector.linux as linux_mod

    proc = tmp_path / "proc"
    proc.mkdir()
    sys_ = tmp_path / "sys"
    for i, lv in ((0, "vg0-root"), (1, "vg0-swap")):
        (sys_ / "block" / f"dm-{i}" / "dm").mkdir(parents=True)
        (sys_ / "block" / f"dm-{i}" / "dm" / "name").write_text(f"{lv}\n")
    for name in ("sda", "sdb"):
        (sys_ / "block" / name / "queue").mkdir(parents=True)
        (sys_ / "block" / name / "queue" / "rotational").write_text("1\n")
    full: list[str] = []
    real = linux_mod.read_device_info

    def counting(name: str, *args: Any, **kwargs: Any) -> DeviceInfo:
        full.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(linux_mod, "read_device_info", counting)
    stats = ("253 0 dm-0 10 0 80 5 0 0 0 0 0 5 5\n253 1 dm-1 10 0 80 5 0 0 0 0 0 5 5\n"
             "8 0 sda 1 0 8 1 0 0 0 0 0 1 1\n8 16 sdb 1 0 8 1 0 0 0 0 0 1 1\n")
    _write(proc, "diskstats", stats)
    clock = iter([0.0, 1.0, 2.0, 3.0])
    col = LinuxCollector(proc, sys_, devices=["vg0-swap", "sdb"],
                         monotonic=lambda: next(clock), wall=lambda: 1.7e9)
    assert col.prime() == []
    assert sorted(full) == ["dm-1", "sdb"]
    assert sorted(col.device_info()) == ["dm-1", "sdb"]
    assert col.device_info()["dm-1"].dm_name == "vg0-swap"
    assert col.device_info()["sdb"].rotational is True
    _write(proc, "diskstats", stats.replace(" 10 0 80 ", " 20 0 160 "))
    assert col.sample().devices == ["dm-1", "sdb"]
    assert sorted(full) == ["dm-1", "sdb"]  # nothing read again
    # Without a filter every device is read, as before.
    full.clear()
    LinuxCollector(proc, sys_, monotonic=lambda: next(clock), wall=lambda: 1.7e9).prime()
    assert sorted(full) == ["dm-0", "dm-1", "sda", "sdb"]


def test_inflight_gauge_needs_only_the_current_snapshot() -> None:
    from iogauge.collector.derive import counter_deltas
    from iogauge.collector.diskstats import IDX, N_FIELDS

    prev = np.zeros((1, N_FIELDS), dtype=np.int64)
    cur = np.zeros((1, N_FIELDS), dtype=np.int64)
    cur[0, IDX["in_flight"]] = 7
    prev_present = np.zeros((1, N_FIELDS), dtype=np.bool_)
    prev_present[0, :4] = True  # the previous read lacked in_flight
    cur_present = np.ones((1, N_FIELDS), dtype=np.bool_)
    d = counter_deltas(prev, cur, prev_present, cur_present)
    assert d.delta[0, IDX["in_flight"]] == 7.0
    assert np.isnan(d.delta[0, IDX["io_ticks_ms"]])
