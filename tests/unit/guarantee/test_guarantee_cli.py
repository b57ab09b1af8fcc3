"""`iogauge guarantee` on the command line: the callback runs the controller, `release` and
`show` are subcommands, and each works on fixture trees."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from cgroup_fixtures import SYSFS, FakeKernel, KernelEmu
from typer.testing import CliRunner

from iogauge.cli.guarantee_cmd import guarantee_app
from iogauge.guarantee.safety import LimitEntry, StateDoc, StateFile

app = typer.Typer()
app.add_typer(guarantee_app, name="guarantee")


@app.callback()
def _root() -> None:
    """Test wrapper (main.py registers guarantee_app the same way)."""


def _run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args), terminal_width=200)
    return res.exit_code, res.stdout, res.stderr


def test_help_shows_the_run_options_and_both_subcommands() -> None:
    code, out, _ = _run("guarantee", "--help")
    assert code == 0
    for word in ("--device", "--protect", "--throttle", "--interval", "--policy", "--state",
                 "--db", "--dry-run", "--config", "release", "show", "Example"):
        assert word in out, word
    code, out, _ = _run("guarantee", "release", "--help")
    assert code == 0 and "--state" in out and "Example" in out


def test_release_without_a_state_file(tmp_path: Path) -> None:
    code, _, err = _run("guarantee", "release", "--state", str(tmp_path / "none.json"))
    assert code == 0 and "nothing to restore" in err


def test_release_restores_what_a_dead_controller_left(tmp_path: Path, v1_root: Path,
                                                      kernel: KernelEmu) -> None:
    b = v1_root / "b"
    (b / "blkio.throttle.write_iops_device").write_text("8:0 12\n")
    state = tmp_path / "g.json"
    doc = StateDoc(1, 4242, None, "earlier")
    doc.entries.append(LimitEntry("cgroup-v1", str(v1_root), str(b), "8:0", "wiops", 300, 12))
    StateFile(state).save(doc)
    code, _, err = _run("guarantee", "release", "--state", str(state))
    assert code == 0, err
    assert f"restored {b} 8:0 wiops: 12 -> 300" in err and "released: 1 limit(s)" in err
    assert (b / "blkio.throttle.write_iops_device").read_text() == "8:0 300\n"
    assert not state.exists()


def test_release_refuses_while_a_controller_holds_the_state(tmp_path: Path) -> None:
    state = tmp_path / "g.json"
    StateFile(state).save(StateDoc(1, 1, None, "t"))
    holder = StateFile(state)
    holder.lock()
    try:
        code, _, err = _run("guarantee", "release", "--state", str(state))
    finally:
        holder.unlock()
    assert code == 2 and "in use by a running iogauge guarantee" in err


def test_run_dry_run_then_show(tmp_path: Path, v1_root: Path, mounts_file: Path,
                               kernel: KernelEmu) -> None:
    a, b = v1_root / "a", v1_root / "b"
    db = tmp_path / "g.duckdb"
    with FakeKernel(tmp_path / "proc", r_iops=300, w_iops=0, util_pct=80, await_ms=3,
                    groups={a: (60, 0), b: (240, 0)}):
        code, out, err = _run(
            "guarantee", "--device", "sda", "--protect", f"{a}:50", "--throttle", str(b),
            "--interval", "0.2", "--duration", "1.2", "--dry-run", "--db", str(db),
            "--policy", "paper", "--procfs-root", str(tmp_path / "proc"),
            "--sysfs-root", str(SYSFS), "--mounts-file", str(mounts_file))
    assert code == 0, err
    assert kernel.writes == []
    assert "dry run: would write '8:0 " in err and "guaranteeing" in err
    assert "[compute]" in out or "[counting]" in out
    assert "guarantee stopped (duration)" in err
    code, out, err = _run("guarantee", "show", "--db", str(db), "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows and all(r["policy"] == "paper" and r["actuator"] == "dry-run" for r in rows)
    assert rows[-1]["a_floor_iops"] == 50.0 and rows[-1]["x_pct"] == 95.0
    code, out, _ = _run("guarantee", "show", "--db", str(db), "--last", "3")
    assert code == 0 and "bpi" in out and "(paper, dry-run)" in out


def test_run_errors_are_one_line_and_exit_2(tmp_path: Path, v1_root: Path,
                                            mounts_file: Path) -> None:
    code, _, err = _run("guarantee", "--device", "sda", "--throttle", str(v1_root / "b"),
                        "--dry-run")
    assert code == 2 and "no protected cgroup" in err
    code, _, err = _run("guarantee", "--device", "nosuch", "--protect", f"{v1_root / 'a'}:5",
                        "--throttle", str(v1_root / "b"), "--dry-run", "--sysfs-root",
                        str(SYSFS), "--mounts-file", str(mounts_file), "--no-record")
    assert code == 2 and "unknown device 'nosuch'" in err
    code, _, err = _run("guarantee", "--device", "sda", "--protect", "a:x",
                        "--throttle", "/b")
    assert code == 2 and "not a number of IOPS" in err


def test_sighup_rereads_the_floors_from_the_config(tmp_path: Path, v1_root: Path,
                                                   mounts_file: Path,
                                                   kernel: KernelEmu) -> None:
    import os
    import signal
    import threading

    a, b = v1_root / "a", v1_root / "b"
    conf = tmp_path / "g.toml"
    body = ('device = "sda"\ndry_run = true\nrecord = false\ninterval_s = 0.2\n'
            '[[throttle]]\ncgroup = "{b}"\n[[protect]]\ncgroup = "{a}"\niops = {iops}\n')
    conf.write_text(body.format(a=a, b=b, iops=50))

    def bump() -> None:
        conf.write_text(body.format(a=a, b=b, iops=75))
        os.kill(os.getpid(), signal.SIGHUP)

    threading.Timer(0.7, bump).start()
    with FakeKernel(tmp_path / "proc", r_iops=300, w_iops=0, util_pct=80, await_ms=3,
                    groups={a: (60, 0), b: (240, 0)}):
        code, out, err = _run("guarantee", "--config", str(conf), "--duration", "1.6",
                              "--procfs-root", str(tmp_path / "proc"),
                              "--sysfs-root", str(SYSFS), "--mounts-file", str(mounts_file))
    assert code == 0, err
    assert f"floors changed: {a} >= 75 IOPS" in out + err
    assert "/50 " in out and "/75 " in out
