"""The state file: recorded before written, restored exactly, stale limits of a crashed run
restored, someone else's later change respected, one controller per state file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cgroup_fixtures import KernelEmu

from iogauge.guarantee import GuaranteeError
from iogauge.guarantee.actuators import DevNum
from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1
from iogauge.guarantee.actuators.cgroup_v2 import CgroupV2
from iogauge.guarantee.policy import GroupLimit
from iogauge.guarantee.safety import (
    LimitEntry,
    LimitGuard,
    StateDoc,
    StateFile,
    read_boot_id,
    restore_state,
)

SDA = DevNum(8, 0)


def _procfs(tmp_path: Path, boot_id: str = "boot-1") -> Path:
    p = tmp_path / "proc"
    (p / "sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (p / "sys/kernel/random/boot_id").write_text(boot_id + "\n")
    return p


def test_every_write_is_recorded_with_the_value_it_replaced(
        v1_root: Path, kernel: KernelEmu, tmp_path: Path) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.read_iops_device").write_text("8:0 500\n")  # an admin's own limit
    sf = StateFile(tmp_path / "run" / "g.json")
    sf.lock()
    guard = LimitGuard(sf, CgroupV1(v1_root), [v1_root / "a"], procfs_root=_procfs(tmp_path))
    guard.set(b, SDA, "riops", 120)
    guard.set(b, SDA, "wiops", 30)
    guard.set(b, SDA, "riops", 90)
    doc = json.loads(sf.path.read_text())
    assert doc["boot_id"] == "boot-1" and doc["pid"] == os.getpid()
    assert [(e["key"], e["original"], e["written"]) for e in doc["entries"]] == [
        ("riops", 500, 90), ("wiops", None, 30)]
    assert all(e["group"] == str(b) and e["device"] == "8:0" for e in doc["entries"])
    rep = guard.restore()
    assert rep.ok and rep.count == 2
    assert CgroupV1(v1_root).read_limit(b, SDA) == GroupLimit(500, None)
    assert (b / "blkio.throttle.read_iops_device").read_text() == "8:0 500\n"
    assert kernel.writes[-2:] == [(b / "blkio.throttle.read_iops_device", "8:0 500\n"),
                                  (b / "blkio.throttle.write_iops_device", "8:0 0\n")]
    assert not sf.path.exists()
    sf.unlock()
    assert not sf.lock_path.exists()


def test_v2_restore_puts_back_exact_values(v2_root: Path, kernel: KernelEmu,
                                           tmp_path: Path) -> None:
    b = v2_root / "b"
    (b / "io.max").write_text("8:0 rbps=1048576 wbps=max riops=max wiops=250\n")
    sf = StateFile(tmp_path / "g.json")
    sf.lock()
    guard = LimitGuard(sf, CgroupV2(v2_root), [v2_root / "a"], procfs_root=_procfs(tmp_path))
    guard.set(b, SDA, "riops", 10)
    guard.set(b, SDA, "wiops", 20)
    assert (b / "io.max").read_text() == "8:0 rbps=1048576 wbps=max riops=10 wiops=20\n"
    guard.restore()
    assert (b / "io.max").read_text() == "8:0 rbps=1048576 wbps=max riops=max wiops=250\n"
    sf.unlock()


def test_the_protected_group_is_never_written(v1_root: Path, kernel: KernelEmu,
                                             tmp_path: Path) -> None:
    sf = StateFile(tmp_path / "g.json")
    sf.lock()
    guard = LimitGuard(sf, CgroupV1(v1_root), [v1_root / "a"], procfs_root=_procfs(tmp_path))
    with pytest.raises(GuaranteeError, match="refusing to write a limit"):
        guard.set(v1_root / "a", SDA, "riops", 5)
    with pytest.raises(GuaranteeError, match="contains\\) the protected cgroup"):
        guard.set(v1_root, SDA, "riops", 5)  # the parent of A
    assert kernel.writes == []
    sf.unlock()


def test_a_crashed_run_is_restored_by_the_next_one(v1_root: Path, kernel: KernelEmu,
                                                   tmp_path: Path) -> None:
    b = v1_root / "b"
    proc = _procfs(tmp_path)
    state = tmp_path / "g.json"
    # A controller in another process writes a limit, then dies by SIGKILL.
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path[:0] = {sys.path!r}
        from pathlib import Path
        from iogauge.guarantee.actuators import DevNum
        from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1
        from iogauge.guarantee.safety import LimitGuard, StateFile
        sf = StateFile({str(state)!r}); sf.lock()
        g = LimitGuard(sf, CgroupV1(Path({str(v1_root)!r})), [], procfs_root={str(proc)!r})
        g.set(Path({str(b)!r}), DevNum(8, 0), "riops", 33)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False)
    assert res.returncode == -9, res.stderr
    assert (b / "blkio.throttle.read_iops_device").read_text() == "8:0 33\n"
    # The dead process's flock is gone: the next controller gets the lock and restores.
    sf = StateFile(state)
    sf.lock()
    rep = restore_state(sf, procfs_root=proc)
    sf.unlock()
    assert rep.ok and rep.restored == [f"{b} 8:0 riops: 33 -> unlimited"]
    assert (b / "blkio.throttle.read_iops_device").read_text() == ""
    assert not state.exists()


def test_restore_leaves_a_limit_someone_else_changed(v1_root: Path, kernel: KernelEmu,
                                                    tmp_path: Path) -> None:
    b = v1_root / "b"
    proc = _procfs(tmp_path)
    sf = StateFile(tmp_path / "g.json")
    sf.lock()
    guard = LimitGuard(sf, CgroupV1(v1_root), [], procfs_root=proc)
    guard.set(b, SDA, "riops", 40)
    guard.set(b, SDA, "wiops", 40)
    (b / "blkio.throttle.read_iops_device").write_text("8:0 999\n")  # the admin, meanwhile
    rep = guard.restore()
    assert rep.left == [f"{b} 8:0 riops: now 999, we wrote 40, it was unlimited"]
    assert rep.restored == [f"{b} 8:0 wiops: 40 -> unlimited"]
    assert (b / "blkio.throttle.read_iops_device").read_text() == "8:0 999\n"
    sf.unlock()


def test_crash_between_record_and_write_is_harmless(v1_root: Path, kernel: KernelEmu,
                                                    tmp_path: Path) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.read_iops_device").write_text("8:0 70\n")
    proc = _procfs(tmp_path)
    sf = StateFile(tmp_path / "g.json")
    doc = StateDoc(1, 12345, "boot-1", "2024-05-01T00:00:00+00:00")
    doc.entries.append(LimitEntry("cgroup-v1", str(v1_root), str(b), "8:0", "riops", 70, 5))
    sf.save(doc)
    sf.lock()
    rep = restore_state(sf, procfs_root=proc)
    assert rep.unchanged == [f"{b} 8:0 riops = 70"] and rep.restored == []
    assert (b / "blkio.throttle.read_iops_device").read_text() == "8:0 70\n"
    assert not sf.path.exists()
    sf.unlock()


def test_a_removed_cgroup_is_reported_gone(v1_root: Path, kernel: KernelEmu,
                                           tmp_path: Path) -> None:
    sf = StateFile(tmp_path / "g.json")
    doc = StateDoc(1, 1, None, "t")
    doc.entries.append(LimitEntry("cgroup-v1", str(v1_root), str(v1_root / "gone"), "8:0",
                                  "riops", None, 5))
    sf.save(doc)
    rep = restore_state(sf, procfs_root=_procfs(tmp_path))
    assert rep.gone == [f"{v1_root / 'gone'} 8:0 riops"] and rep.ok


def test_a_state_file_from_an_earlier_boot_is_discarded(v1_root: Path, kernel: KernelEmu,
                                                         tmp_path: Path) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.read_iops_device").write_text("8:0 5\n")
    sf = StateFile(tmp_path / "g.json")
    doc = StateDoc(1, 1, "boot-0", "yesterday")
    doc.entries.append(LimitEntry("cgroup-v1", str(v1_root), str(b), "8:0", "riops", None, 5))
    sf.save(doc)
    rep = restore_state(sf, procfs_root=_procfs(tmp_path, "boot-1"))
    assert "earlier boot" in rep.notes[0]
    assert kernel.writes == [] and not sf.path.exists()


def test_failed_restores_stay_in_the_state_file(v1_root: Path, tmp_path: Path) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.read_iops_device").write_text("8:0 5\n")
    sf = StateFile(tmp_path / "g.json")
    doc = StateDoc(1, 1, None, "t")
    doc.entries.append(LimitEntry("cgroup-v1", str(v1_root), str(b), "8:0", "riops", None, 5))
    sf.save(doc)
    (b / "blkio.throttle.read_iops_device").unlink()  # reading it now fails
    (b / "blkio.throttle.read_iops_device").mkdir()
    rep = restore_state(sf, procfs_root=_procfs(tmp_path))
    assert not rep.ok and "cannot read" in rep.failed[0]
    assert len(json.loads(sf.path.read_text())["entries"]) == 1


def test_one_controller_per_state_file(tmp_path: Path) -> None:
    a = StateFile(tmp_path / "g.json")
    a.lock()
    b = StateFile(tmp_path / "g.json")
    with pytest.raises(GuaranteeError, match=f"in use by a running iogauge guarantee "
                                             f"\\(pid {os.getpid()}\\)"):
        b.lock()
    a.unlock()
    b.lock()
    b.unlock()


def test_unreadable_state_file_is_a_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "g.json"
    p.write_text("{not json")
    with pytest.raises(GuaranteeError, match="unreadable state file"):
        StateFile(p).load()
    p.write_text(json.dumps({"version": 1, "pid": 1, "started": "t",
                             "entries": [{"hierarchy": "cgroup-v9", "root": "/", "group": "/x",
                                          "device": "8:0", "key": "riops", "original": None,
                                          "written": 1}]}))
    with pytest.raises(GuaranteeError, match="unreadable state file"):
        StateFile(p).load()
    p.write_text(json.dumps({"version": 99, "pid": 1, "started": "t"}))
    with pytest.raises(GuaranteeError, match="newer than this iogauge"):
        StateFile(p).load()


def test_boot_id_is_read_from_procfs(tmp_path: Path) -> None:
    assert read_boot_id(_procfs(tmp_path, "abc")) == "abc"
    assert read_boot_id(tmp_path / "nowhere") is None
