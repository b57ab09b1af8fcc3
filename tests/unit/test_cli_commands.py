"""CLI behaviour on fixture trees: clear errors for bad input, JSON keys, summaries."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from iogauge.cli.main import app
from iogauge.model.sampleframe import SCHEMA

DISKSTATS = """\
   8       0 sda 1000 10 80000 500 2000 20 160000 4000 0 3000 4500 0 0 0 0 0 0
   8       1 sda1 900 10 72000 450 1900 20 150000 3900 0 2900 4350 0 0 0 0 0 0
 254       0 vda 5 0 40 1 0 0 0 0 0 1 1 0 0 0 0 0 0
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"""


def _tree(tmp_path: Path, diskstats: str = DISKSTATS) -> tuple[Path, Path]:
    proc = tmp_path / "proc"
    sys_ = tmp_path / "sys"
    proc.mkdir()
    (proc / "diskstats").write_text(diskstats)
    (proc / "stat").write_text("cpu  100 0 50 1000 10 0 0 0 0 0\n")
    (proc / "uptime").write_text("1000.00 1900.00\n")
    (sys_ / "block" / "sda" / "queue").mkdir(parents=True)
    (sys_ / "block" / "sda" / "queue" / "rotational").write_text("1\n")
    (sys_ / "block" / "sda" / "sda1").mkdir()
    (sys_ / "block" / "sda" / "sda1" / "partition").write_text("1\n")
    return proc, sys_


def test_unreadable_proc_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["iostat", "-c", "1", "--procfs-root",
                                   str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "cannot read" in res.output
    assert str(tmp_path / "nope" / "diskstats") in res.output
    assert "Traceback" not in res.output


def test_iostat_json_keys_are_sampleframe_columns(tmp_path: Path) -> None:
    proc, sys_ = _tree(tmp_path)
    res = CliRunner().invoke(app, ["iostat", "--json", "-i", "0.05", "-c", "2",
                                   "--procfs-root", str(proc), "--sysfs-root", str(sys_)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    # Two reports x two used whole devices (sda, vda); loop0 never did I/O, sda1 is a
    # partition: both hidden as iostat hides them.
    assert [r["device"] for r in rows] == ["sda", "vda", "sda", "vda"]
    for r in rows:
        assert set(r) <= set(SCHEMA)
        # The same counters twice: a measured interval with nothing happening.
        assert r["r_iops"] == 0.0
        assert r["util_pct"] == 0.0
        assert r["interval_s"] > 0


def test_iostat_since_boot_report(tmp_path: Path) -> None:
    proc, sys_ = _tree(tmp_path)
    res = CliRunner().invoke(app, ["iostat", "--json", "--since-boot", "-c", "1", "-i", "0.05",
                                   "-p", "--procfs-root", str(proc), "--sysfs-root", str(sys_)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    boot = {r["device"]: r for r in rows if r["since_boot"]}
    assert set(boot) == {"sda", "sda1", "vda"}
    # sda: 1000 reads over 1000 s of uptime; 80000 sectors = 40000 kB; 500 ms / 1000 reads.
    assert boot["sda"]["r_iops"] == 1.0
    assert boot["sda"]["r_kBps"] == 40.0
    assert boot["sda"]["r_await_ms"] == 0.5
    assert boot["sda1"]["parent"] == "sda"
    assert boot["sda1"]["device_kind"] == "partition"


def test_iostat_table_has_iostat_columns(tmp_path: Path) -> None:
    proc, sys_ = _tree(tmp_path)
    res = CliRunner().invoke(app, ["iostat", "-c", "1", "-i", "0.05", "sda",
                                   "--procfs-root", str(proc), "--sysfs-root", str(sys_)])
    assert res.exit_code == 0, res.output
    header = next(line for line in res.stdout.splitlines() if line.startswith("Device"))
    assert header.split()[1:] == ["r/s", "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz",
                                  "w/s", "wkB/s", "wrqm/s", "%wrqm", "w_await", "wareq-sz",
                                  "d/s", "dkB/s", "drqm/s", "%drqm", "d_await", "dareq-sz",
                                  "f/s", "f_await", "aqu-sz", "%util"]


def test_missing_device_is_announced_not_fatal(tmp_path: Path) -> None:
    proc, sys_ = _tree(tmp_path)
    res = CliRunner().invoke(app, ["iostat", "--json", "-c", "1", "-i", "0.05", "sda", "sdz",
                                   "--procfs-root", str(proc), "--sysfs-root", str(sys_)])
    assert res.exit_code == 0, res.output
    assert "device sdz is not in" in res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [r["device"] for r in rows] == ["sda"]


def test_malformed_line_is_reported_and_others_collected(tmp_path: Path) -> None:
    bad = DISKSTATS + "   8      16 sdb 1 2 x 4 5 6 7 8 9 10 11\n"
    proc, sys_ = _tree(tmp_path, bad)
    res = CliRunner().invoke(app, ["iostat", "--json", "-c", "1", "-i", "0.05",
                                   "--procfs-root", str(proc), "--sysfs-root", str(sys_)])
    assert res.exit_code == 0, res.output
    assert f"{proc / 'diskstats'}:5: device sdb: counter 'x' is not a non-negative integer" in (
        res.stderr.replace("\n", ""))
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert {r["device"] for r in rows} == {"sda", "vda"}


def test_diagnose_json_and_html(tmp_path: Path) -> None:
    proc, sys_ = _tree(tmp_path)
    html = tmp_path / "out" / "d.html"
    res = CliRunner().invoke(app, ["diagnose", "--json", "-d", "0.1", "-i", "0.05",
                                   "--html", str(html),
                                   "--procfs-root", str(proc), "--sysfs-root", str(sys_)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    devs = {d["device"]: d for d in doc["devices"]}
    assert set(devs) == {"sda", "vda"}
    assert devs["sda"]["util_is_capacity"] is True
    assert any("idle" in n for n in devs["sda"]["notes"])
    page = html.read_text()
    assert page.startswith("<!doctype html>")
    # the interactive report: scripts inlined, nothing loaded from anywhere
    # (cited sources may carry URLs as text; no resource is loaded from one)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page  # the page's own CSP forbids network access
    assert "id='iogauge-result'" in page
    assert {d["device"] for d in doc["analysis"]["devices"]} == {"sda", "vda"}
