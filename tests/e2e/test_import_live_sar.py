"""sar / sadf / binary sa imports of files captured live from this machine's sysstat.

A fresh sa file is recorded with ``sadc -S DISK 1 5`` while ``dd`` does direct I/O; then
``sar -d -p -f``, ``sar -u -d -f``, ``sadf -d`` and ``sadf -j`` print it. Every import must
hold every device-interval the tool printed, with the values it printed (read back here by
an independent, deliberately simple parser), and the binary file imported through the
``sa`` format must equal the ``sadf -j`` import.

This module also rebuilds the static sysstat fixtures of tests/fixtures/{sa,sar,sadf}
(``python -m tests.e2e.test_import_live_sar --rebuild-fixtures``, as root): the same tools,
plus POSIX TZ zones that put a local midnight and a DST fall-back hour inside the data.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from tests.helpers.importing import as_printed

from iogauge.errors import InputFormatError
from iogauge.importers.registry import import_file
from iogauge.importers.sa_binary import find_sadc
from iogauge.model.sampleframe import SampleFrame

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: sar -d 12.x column -> SampleFrame column (the mapping under test, spelled out again).
SAR_TO_FRAME = {"tps": "iops", "rkB/s": "r_kBps", "wkB/s": "w_kBps", "dkB/s": "d_kBps",
                "areq-sz": "areq_kB", "aqu-sz": "aqu_sz", "await": "await_ms",
                "%util": "util_pct"}
JSON_TO_FRAME = {"tps": "iops", "rkB": "r_kBps", "wkB": "w_kBps", "dkB": "d_kBps",
                 "areq-sz": "areq_kB", "aqu-sz": "aqu_sz", "await": "await_ms",
                 "util-percent": "util_pct"}


def run(args: list[str | Path], *, env: dict[str, str] | None = None,
        out: Path | None = None) -> str:
    """Run a sysstat tool in the C locale and UTC (unless ``env`` says otherwise)."""
    full_env = {**os.environ, "LC_ALL": "C", "TZ": "UTC", **(env or {})}
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=True,
                         env=full_env)
    if out is not None:
        out.write_text(res.stdout, encoding="utf-8")
    return res.stdout


@contextlib.contextmanager
def disk_load(where: Path) -> Iterator[None]:
    """Direct writes and reads of a 4 MiB file under ``where`` so the disk is not idle; the
    whole process group is killed and the file removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="iogauge-sar-load-", dir=where))
    script = (f"while :; do dd if=/dev/zero of={work}/w bs=64k count=64 oflag=direct "
              f"conv=fsync status=none; dd if={work}/w of=/dev/null bs=16k iflag=direct "
              "status=none; done")
    proc = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def load_dir() -> Path:
    """Where the load writes: a real disk, not tmpfs (IOGAUGE_E2E_BACKING_DIR, /var/tmp)."""
    wanted = Path(os.environ.get("IOGAUGE_E2E_BACKING_DIR") or "/var/tmp")
    return wanted if wanted.is_dir() else Path(tempfile.gettempdir())


# ---- the live capture --------------------------------------------------------------------


@dataclass(frozen=True)
class Capture:
    """One sa file and what the tools printed for it."""

    dir: Path
    sa: Path
    sar_dp: Path  # sar -d -p -f (C locale, UTC)
    sar_ud: Path  # sar -u -d -f
    sar_dp_tokyo: Path  # TZ=Asia/Tokyo sar -d -p -f
    sadf_d: Path  # sadf -d -- -d -p
    sadf_j: Path  # sadf -j -- -d -p
    sadf_j_du: Path  # sadf -j -- -d -u (what the sa importer runs)


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    sadc = find_sadc()
    missing = [n for n in ("sar", "sadf") if shutil.which(n) is None]
    if sadc is None or missing:
        pytest.skip(f"needs sysstat's sadc, sar and sadf (missing: "
                    f"{', '.join(missing + ([] if sadc else ['sadc']))}; Debian: "
                    "apt-get install sysstat, sadc is /usr/lib/sysstat/sadc)")
    d = tmp_path_factory.mktemp("sysstat")
    sa = d / "live.sa"
    with disk_load(load_dir()):
        run([sadc, "-S", "DISK", "1", "5", sa])
    cap = Capture(d, sa, d / "sar-dp.txt", d / "sar-ud.txt", d / "sar-dp-tokyo.txt",
                  d / "sadf-d.csv", d / "sadf-j.json", d / "sadf-j-du.json")
    run(["sar", "-d", "-p", "-f", sa], out=cap.sar_dp)
    run(["sar", "-u", "-d", "-f", sa], out=cap.sar_ud)
    run(["sar", "-d", "-p", "-f", sa], env={"TZ": "Asia/Tokyo"}, out=cap.sar_dp_tokyo)
    run(["sadf", "-d", sa, "--", "-d", "-p"], out=cap.sadf_d)
    run(["sadf", "-j", sa, "--", "-d", "-p"], out=cap.sadf_j)
    run(["sadf", "-j", sa, "--", "-d", "-u"], out=cap.sadf_j_du)
    return cap


def printed_sar_dp(text: str) -> tuple[str, dict[tuple[str, str], dict[str, float]]]:
    """(banner date, {(HH:MM:SS, device): {frame column: value}}) from ``sar -d -p`` text:
    a header line names the columns, DEV last; 'Average:' lines are not samples."""
    lines = text.splitlines()
    banner_date = lines[0].split()[3]
    cols: list[str] = []
    out: dict[tuple[str, str], dict[str, float]] = {}
    for line in lines[1:]:
        parts = line.split()
        if not parts or parts[0] == "Average:":
            continue
        if parts[-1] == "DEV":
            cols = parts[1:-1]
            continue
        out[(parts[0], parts[-1])] = {SAR_TO_FRAME[c]: float(v)
                                      for c, v in zip(cols, parts[1:-1], strict=True)}
    return banner_date, out


def frame_values(frame: SampleFrame, fmt: str = "%H:%M:%S"
                 ) -> dict[tuple[str, str], dict[str, float]]:
    return {(r["ts"].strftime(fmt), r["device"]): {c: r[c] for c in SAR_TO_FRAME.values()}
            for r in frame.df.iter_rows(named=True)}


def test_sar_dp_holds_every_printed_device_interval(capture: Capture) -> None:
    banner_date, printed = printed_sar_dp(capture.sar_dp.read_text(encoding="utf-8"))
    result = import_file(capture.sar_dp)
    assert result.format == "sar"
    assert len(printed) >= 4 * 1  # 4 intervals x at least one device
    assert frame_values(result.frame) == printed  # every device-interval, exact values
    assert {d.strftime("%m/%d/%y") for d in result.frame.df["ts"]} == {banner_date}
    assert set(result.frame.df["interval_s"]) == {1.0}
    assert result.frame.df["svctm_ms"].null_count() == len(result.frame)


def test_sar_in_another_zone(capture: Capture) -> None:
    plain = import_file(capture.sar_dp).frame
    tokyo = import_file(capture.sar_dp_tokyo, tz=ZoneInfo("Asia/Tokyo")).frame
    assert tokyo.df.drop("host").equals(plain.df.drop("host"))


def test_sar_u_d_has_cpu_context(capture: Capture) -> None:
    frame = import_file(capture.sar_ud).frame
    cpu: dict[str, float] = {}
    for line in capture.sar_ud.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 8 and parts[1] == "all" and parts[0] != "Average:":
            cpu[parts[0]] = float(parts[7])  # %idle
    assert cpu and {r["ts"].strftime("%H:%M:%S"): r["cpu_idle_pct"]
                    for r in frame.df.iter_rows(named=True)} == cpu
    plain = import_file(capture.sar_dp).frame
    assert frame_values(frame) == frame_values(plain)


def test_sadf_d_holds_every_printed_row(capture: Capture) -> None:
    lines = capture.sadf_d.read_text(encoding="utf-8").splitlines()
    header = lines[0].lstrip("# ").split(";")
    printed: dict[tuple[str, str], dict[str, float]] = {}
    intervals: dict[tuple[str, str], float] = {}
    for line in lines[1:]:
        f = line.split(";")
        if line.startswith("#") or "LINUX-RESTART" in line:
            continue
        key = (f[2].removesuffix(" UTC"), f[3])
        printed[key] = {SAR_TO_FRAME[c]: float(v) for c, v in zip(header[4:], f[4:],
                                                                    strict=True)}
        intervals[key] = float(f[1])
    result = import_file(capture.sadf_d)
    assert result.format == "sadf"
    assert frame_values(result.frame, "%Y-%m-%d %H:%M:%S") == printed
    assert {(r["ts"].strftime("%Y-%m-%d %H:%M:%S"), r["device"]): r["interval_s"]
            for r in result.frame.df.iter_rows(named=True)} == intervals


def test_sadf_j_holds_every_printed_object(capture: Capture) -> None:
    doc = json.loads(capture.sadf_j.read_text(encoding="utf-8"))
    printed: dict[tuple[str, str], dict[str, float]] = {}
    for stat in doc["sysstat"]["hosts"][0]["statistics"]:
        ts = stat["timestamp"]
        assert ts["utc"] == 1
        for disk in stat["disk"]:
            printed[(f"{ts['date']} {ts['time']}", disk["disk-device"])] = {
                col: float(disk[key]) for key, col in JSON_TO_FRAME.items()}
    result = import_file(capture.sadf_j)
    assert result.format == "sadf"
    assert frame_values(result.frame, "%Y-%m-%d %H:%M:%S") == printed


def test_text_csv_and_json_agree(capture: Capture) -> None:
    cols = ["device", "ts", "interval_s", *SAR_TO_FRAME.values()]
    sar = import_file(capture.sar_dp).frame.df.select(cols).sort("ts", "device")
    for path in (capture.sadf_d, capture.sadf_j):
        other = import_file(path).frame.df.select(cols).sort("ts", "device")
        assert other.equals(sar), path.name


def test_binary_sa_file_equals_its_sadf_import(capture: Capture) -> None:
    binary = import_file(capture.sa)
    assert binary.format == "sa"
    via_sadf = import_file(capture.sadf_j_du)
    assert set(binary.frame.df["source"]) == {"sa"}
    # (the native reader keeps full precision, sadf printed two decimals; interval_s is
    # the uptime difference in 1/100 s, which sadf -j prints as whole seconds)
    assert as_printed(binary.frame).df.drop("source", "interval_s").equals(
        via_sadf.frame.df.drop("source", "interval_s"))
    gap = (binary.frame.df["interval_s"] - via_sadf.frame.df["interval_s"]).abs().max()
    assert isinstance(gap, float) and gap < 1
    assert binary.frame.df["cpu_idle_pct"].null_count() == 0
    # and it holds what sar printed for the same file
    _, printed = printed_sar_dp(capture.sar_dp.read_text(encoding="utf-8"))
    assert frame_values(as_printed(binary.frame)) == printed


def test_sar_a_of_every_activity(capture: Capture, tmp_path: Path) -> None:
    sadc = find_sadc()
    assert sadc is not None
    sa = tmp_path / "xall.sa"
    with disk_load(load_dir()):
        run([sadc, "-S", "XALL", "1", "3", sa])
    text_a = tmp_path / "sar-A.txt"
    run(["sar", "-A", "-f", sa], out=text_a)
    json_a = tmp_path / "sadf-j-A.json"  # every activity, in sadf's own layout
    run(["sadf", "-j", sa, "--", "-A"], out=json_a)
    everything = import_file(text_a).frame
    disks = as_printed(import_file(sa).frame)
    # (interval_s left out: the native reader's is the uptime difference in 1/100 s, sar
    # prints whole seconds)
    cols = ["device", "ts", *SAR_TO_FRAME.values(), "cpu_user_pct",
            "cpu_iowait_pct", "cpu_idle_pct"]
    assert len(everything) == len(disks) > 0
    assert everything.df.select(cols).sort("ts", "device").equals(
        disks.df.select(cols).sort("ts", "device"))
    from_json = import_file(json_a)
    assert from_json.format == "sadf" and not from_json.skipped
    assert from_json.frame.df.select(cols).sort("ts", "device").equals(
        disks.df.select(cols).sort("ts", "device"))


def test_sa_file_without_disk_statistics(capture: Capture, tmp_path: Path) -> None:
    sadc = find_sadc()
    assert sadc is not None
    sa = tmp_path / "nodisk.sa"
    run([sadc, "1", "2", sa])  # without -S DISK sadc records no disks
    with pytest.raises(InputFormatError, match="-S DISK"):
        import_file(sa)


# ---- rebuilding the static fixtures ------------------------------------------------------


def _record_times(sa: Path) -> list[int]:
    stamps = {int(line.split(";")[2]) for line in
              run(["sadf", "-d", "-U", sa, "--", "-d"]).splitlines()
              if not line.startswith("#") and line.split(";")[2].isdigit()}
    return sorted(stamps)


def _posix_offset(name: str, local_minus_utc_s: int) -> str:
    """A POSIX TZ string whose local time is UTC + ``local_minus_utc_s`` (POSIX inverts the
    sign)."""
    sign = "-" if local_minus_utc_s >= 0 else "+"
    v = abs(local_minus_utc_s)
    return f"{name}{sign}{v // 3600:02d}:{v % 3600 // 60:02d}:{v % 60:02d}"


def rebuild_fixtures(root: Path = FIXTURES) -> dict[str, str]:
    """Record and print the sysstat fixtures; returns the POSIX zones used (the unit tests
    hold them as constants)."""
    sadc = find_sadc()
    if sadc is None:
        sys.exit("sadc not found")
    sa_dir, sar_dir, sadf_dir = root / "sa", root / "sar", root / "sadf"
    for d in (sa_dir, sar_dir, sadf_dir):
        d.mkdir(parents=True, exist_ok=True)
    v = "sysstat" + run(["sar", "-V"]).split()[2]
    main = sa_dir / f"{v}-disk-restart.sa"
    main.unlink(missing_ok=True)
    with disk_load(load_dir()):
        run([sadc, "-S", "DISK", "1", "5", main])
        time.sleep(1)
        run([sadc, "-S", "DISK", main])  # no interval and count: the LINUX RESTART mark
        time.sleep(1)
        run([sadc, "-S", "DISK", "1", "5", main])
    run(["sar", "-u", "-d", "-f", main], out=sar_dir / f"{v}-sar-u-d-restart.txt")
    run(["sar", "-d", "-p", "-f", main], env={"LC_ALL": "en_US.UTF-8"},
        out=sar_dir / f"{v}-sar-dp-en_US.txt")
    run(["sar", "-u", "ALL", "-d", "-f", main],
        env={"LC_ALL": "de_DE.UTF-8", "TZ": "Europe/Berlin"},
        out=sar_dir / f"{v}-sar-uALL-d-de_DE-Berlin.txt")
    run(["sadf", "-d", main, "--", "-d", "-u"], out=sadf_dir / f"{v}-sadf-d-u.csv")
    run(["sadf", "-d", "-U", main, "--", "-d", "-p", "-u", "ALL"],
        env={"LC_ALL": "de_DE.UTF-8"}, out=sadf_dir / f"{v}-sadf-d-U-uALL-de_DE.csv")
    run(["sadf", "-j", main, "--", "-d", "-u", "ALL"], out=sadf_dir / f"{v}-sadf-j-uALL.json")
    run(["sadf", "-j", "-T", main, "--", "-d", "-u"], env={"TZ": "Asia/Tokyo"},
        out=sadf_dir / f"{v}-sadf-j-T-Tokyo.json")
    times = _record_times(main)
    half = len(times) // 2
    midnight = (times[1] + times[2]) // 2
    zones = {"midnight_tz": _posix_offset("MID", -(midnight % 86400))}
    run(["sar", "-u", "-d", "-f", main], env={"TZ": zones["midnight_tz"]},
        out=sar_dir / f"{v}-sar-u-d-midnight.txt")
    fold = (times[half + 1] + times[half + 2]) // 2
    tm = time.gmtime(fold)
    julian = tm.tm_yday - 1 if tm.tm_year % 4 == 0 and tm.tm_yday > 59 else tm.tm_yday
    end = (fold + 2 * 3600) % 86400  # POSIX: the DST end time is in local (DST) time
    zones["fold_tz"] = (f"FST-1FDT-2,J1/0,J{julian}/{end // 3600:02d}:{end % 3600 // 60:02d}"
                        f":{end % 60:02d}")
    run(["sar", "-d", "-p", "-f", main], env={"TZ": zones["fold_tz"]},
        out=sar_dir / f"{v}-sar-dp-dst-fold.txt")
    # sadc writing into a directory switches files at local midnight (the daily rotation)
    zones["rotation_tz"] = _posix_offset("ROT", -((int(time.time()) + 6) % 86400))
    with tempfile.TemporaryDirectory() as tmp, disk_load(load_dir()):
        run([sadc, "-S", "DISK", "1", "10", tmp], env={"TZ": zones["rotation_tz"]})
        days = sorted(Path(tmp).glob("sa[0-9]*"))
        if len(days) != 2:
            sys.exit(f"rotation produced {len(days)} files instead of 2: run again")
        for n, day in enumerate(days, 1):
            shutil.copyfile(day, sa_dir / f"{v}-rotation-day{n}.sa")
            run(["sar", "-d", "-p", "-f", day], env={"TZ": zones["rotation_tz"]},
                out=sar_dir / f"{v}-sar-dp-rotation-day{n}.txt")
    with tempfile.TemporaryDirectory() as tmp, disk_load(load_dir()):
        xall = Path(tmp) / "xall.sa"
        run([sadc, "-S", "XALL", "1", "3", xall])
        run(["sar", "-A", "-f", xall], out=sar_dir / f"{v}-sar-A.txt")
        run(["sadf", "-j", xall, "--", "-A"], out=sadf_dir / f"{v}-sadf-j-A.json")
        run(["sar", "-u", "-d", "1", "3"], out=sar_dir / f"{v}-sar-u-d-live.txt")
    return zones


if __name__ == "__main__":
    if sys.argv[1:] != ["--rebuild-fixtures"]:
        sys.exit("usage: python -m tests.e2e.test_import_live_sar --rebuild-fixtures")
    print(json.dumps(rebuild_fixtures(), indent=1))
    print("now update the zone constants in tests/unit/importers/test_sar_text.py",
          datetime.now(UTC).isoformat())
