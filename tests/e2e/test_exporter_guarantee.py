"""`iogauge exporter` publishes what a running `iogauge guarantee` decides.

Both are the real commands: the controller (`--dry-run`, [Oe] §4's paper policy, 0.5 s
decisions into its store) and the exporter (`--guarantee-db` on that store, `--textfile`)
read the same stand-in kernel (the guarantee unit tests' FakeKernel: /proc/diskstats and
cgroup v1 counters in a temporary directory, through the hidden --procfs-root options),
whose protected group A does 60 IOPS and throttled group B 240 IOPS of the device's 300 at
80 % busy. The exporter's textfile must carry A's floor and delivered IOPS, B's IOPS, and
the limit and X the controller itself recorded (`iogauge guarantee show --json`). About ten
seconds.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.e2e.test_guarantee_live_store import _iogauge, _show, _tree
from tests.unit.guarantee.cgroup_fixtures import SYSFS, FakeKernel

pytestmark = pytest.mark.slow

FLOOR_IOPS = 10


def _figures(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    return {s.name: s.value for fam in text_string_to_metric_families(path.read_text())
            for s in fam.samples if s.name.startswith("iogauge_guarantee_")
            and s.labels.get("device") == "sda"}


def test_exporter_publishes_the_guarantee_decisions(tmp_path: Path) -> None:
    a, b, mounts = _tree(tmp_path)
    out = tmp_path / "textfile"
    out.mkdir()
    db = tmp_path / "g.duckdb"
    (tmp_path / "g.toml").write_text("flush_s = 0.5\n")
    with FakeKernel(tmp_path / "proc", r_iops=300, w_iops=0, util_pct=80, await_ms=3,
                    groups={a: (60, 0), b: (240, 0)}):
        ctl = subprocess.Popen(
            [*_iogauge(), "guarantee", "--device", "sda", "--protect", f"{a}:{FLOOR_IOPS}",
             "--throttle", str(b), "--dry-run", "--interval", "0.5", "--policy", "paper",
             "--config", str(tmp_path / "g.toml"), "--db", str(db), "--state",
             str(tmp_path / "state.json"), "--procfs-root", str(tmp_path / "proc"),
             "--sysfs-root", str(SYSFS), "--mounts-file", str(mounts), "--duration", "6"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        exporter = subprocess.run(
            [*_iogauge(), "exporter", "--no-http", "--textfile", str(out), "--interval", "0.5",
             "--judge-every", "0", "--duration", "5", "--guarantee-db", str(db),
             "--procfs-root", str(tmp_path / "proc"), "--sysfs-root", str(SYSFS), "sda"],
            capture_output=True, text=True, timeout=120, check=False)
        assert ctl.wait(timeout=60) == 0, ctl.communicate()[1][-3000:]
    assert exporter.returncode == 0, exporter.stderr[-3000:]
    got = _figures(out / "iogauge.prom")
    print(f"\n  {got}")
    assert got["iogauge_guarantee_floor_iops"] == FLOOR_IOPS
    assert got["iogauge_guarantee_protected_iops"] == pytest.approx(60, rel=0.1)
    assert got["iogauge_guarantee_throttled_iops"] == pytest.approx(240, rel=0.1)
    # the run's cost figures (guarantee/figures.py): A always busy above its floor, so no
    # wake-up and no reserved IOPS left unused; B never measured while A slept
    assert got["iogauge_guarantee_wakeups"] == 0
    assert got["iogauge_guarantee_reserved_unused_iops"] == 0
    assert "iogauge_guarantee_idle_share_ratio" not in got
    # B's limit and X as the controller recorded them in one decision: the exporter stops
    # before the controller, whose later decisions may have moved on
    same = [d for d in _show(db)
            if d["b_riops_limit"] == got["iogauge_guarantee_throttled_read_limit_iops"]]
    assert same, _show(db)[-3:]
    assert any(got["iogauge_guarantee_target_busy_ratio"] == pytest.approx(d["x_pct"] / 100)
               for d in same)
