"""oracle_file_reads through the product: an AWR report's tablespaces and datafiles judged
by their Av Rd(ms), and the verdict table following the findings (the SOE case of issue 38:
177.6 ms at 103 reads/s, judged healthy before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from iogauge.analysis.engine import analyze
from iogauge.analysis.types import AnalysisResult, Finding
from iogauge.cli.main import app
from iogauge.importers.registry import import_file

AWR = Path(__file__).resolve().parents[2] / "fixtures" / "awr"
AWR_HTML = AWR.parent / "awr-html"
SOE_TXT = AWR / "awr_11201_soe_swingbench_hostcpu.txt"
SOE_HTML = AWR_HTML / "awr_11201_soe_swingbench_hostcpu.html"


def _result(path: Path) -> AnalysisResult:
    res = import_file(path)
    return analyze(res.frame, res.waits)


def test_soe_tablespace_and_datafile_are_critical_with_evidence() -> None:
    result = _result(SOE_TXT)
    found = [f for f in result.findings if f.rule == "oracle_file_reads"]
    assert sorted(f.device or "" for f in found) == sorted(
        k for k in {d.device for d in result.devices}
        if k.endswith(("SOE", "soe01.dbf")))
    for f in found:
        assert f.severity == "critical"
        ev = {e.metric: e for e in f.evidence}
        assert ev["r_await_ms"].value == 177.6
        assert ev["r_await_ms"].threshold == 50.0
        assert ev["expected_ms"].value == 10.0
        assert ev["r_iops"].value == 103.0
    # SYSAUX's 12.4 ms over 0 reads/s (288 reads in ten minutes) is not judged
    assert not any(f.device and f.device.endswith("SYSAUX") for f in found)


def test_verdicts_never_disagree_with_the_findings() -> None:
    for path in (SOE_TXT, SOE_HTML):
        result = _result(path)
        worst: dict[str, str] = {}
        for f in result.findings:
            if f.device is not None and f.severity in ("critical", "warning"):
                worst[f.device] = max(worst.get(f.device, ""), f.severity)
        for d in result.devices:
            if worst.get(d.device) == "critical":
                assert d.verdict == "bottleneck", (d.device, d.verdict)
            elif worst.get(d.device) == "warning":
                assert d.verdict in ("near limit", "bottleneck"), (d.device, d.verdict)
        soe = next(d for d in result.devices if d.device.endswith("SOE"))
        assert soe.verdict == "bottleneck"
        assert "177.6 ms" in soe.verdict_reason


def test_cli_analyze_shows_soe_as_bottleneck() -> None:
    out = CliRunner().invoke(app, ["analyze", str(SOE_TXT)])
    assert out.exit_code == 0, out.output
    assert "oracle_file_reads" in out.output
    line = next(ln for ln in out.output.splitlines() if ln.startswith("│ SOE "))
    assert "bottleneck" in line


def _wait_finding(path: Path, event: str) -> Finding:
    return next(f for f in _result(path).findings if f.rule == "oracle_waits"
                and f.title.startswith(event))


def test_wait_finding_cites_the_wait_event_histogram() -> None:
    for path in (SOE_TXT, SOE_HTML):
        f = _wait_finding(path, "db file sequential read")
        ev = {e.metric: e for e in f.evidence}
        assert ev["waits_ge_32ms_pct"].value == 76.0
        assert "75.9 % of the 'db file sequential read' waits took 32 ms-1 s" in f.explanation


def test_wait_finding_cites_iostat_by_filetype() -> None:
    """The SOE report's IOStat by Filetype: Data File small reads 177.4 ms (the text's
    Small Read column; the HTML's cell), beside db file sequential read's 184 ms; redo
    waits get no data file figure."""
    for path in (SOE_TXT, SOE_HTML):
        f = _wait_finding(path, "db file sequential read")
        ev = {e.metric: e for e in f.evidence}
        assert ev["datafile_small_read_ms"].value == 177.4
        assert "Data File small reads took 177.4 ms" in f.explanation
        redo = _wait_finding(path, "log file sync")
        assert not any(e.metric.startswith("datafile_") for e in redo.evidence)


IOSTAT = AWR.parent / "iostat"
# host dbsrv01 in all three: the AWR report of config 5-1-1, sdb (HDD) and sdc (SSD)
_HDD_SSD = [str(AWR / "awr_112_config5-1-1_hdd_cache1024m.txt"),
            str(IOSTAT / "seed003-select-config5-1-1-hdd-cache1024m.txt"),
            str(IOSTAT / "seed003-select-config5-2-1-ssd-cache1024m.txt"),
            "--profile", "sdb=hdd-7200", "--profile", "sdc=sata-ssd", "--json"]


def _expected_notes(*extra: str) -> dict[str, str]:
    out = CliRunner().invoke(app, ["analyze", *_HDD_SSD, *extra])
    assert out.exit_code == 0, out.output
    found = [f for f in json.loads(out.stdout)["findings"] if f["rule"] == "oracle_file_reads"]
    return {f["device"]: next(e["note"] for e in f["evidence"] if e["metric"] == "expected_ms")
            for f in found}


def test_map_judges_a_tablespace_against_the_device_under_it() -> None:
    """Without --map, USER_DATA is judged against every device of its host (the slowest);
    --map USER_DATA=sdc judges it, and its datafile, against sdc alone."""
    plain = _expected_notes()
    assert "sdb (hdd-7200" in plain["USER_DATA"] and "sdc (sata-ssd" in plain["USER_DATA"]
    mapped = _expected_notes("--map", "USER_DATA=sdc")
    for device in ("USER_DATA", "/u02/oradata/ORCL/user_data01.dbf"):
        assert "sdc (sata-ssd" in mapped[device]
        assert "sdb" not in mapped[device]
        assert "--map USER_DATA=sdc" in mapped[device]


def test_map_a_datafile_alone() -> None:
    """FILE=DEV places one datafile; its tablespace keeps the host's devices."""
    dbf = "/u02/oradata/ORCL/user_data01.dbf"
    notes = _expected_notes("--map", f"{dbf}=sdc")
    assert f"--map {dbf}=sdc" in notes[dbf] and "sdb" not in notes[dbf]
    assert "--map" not in notes["USER_DATA"] and "sdb (hdd-7200" in notes["USER_DATA"]


def test_map_to_a_device_the_analysis_lacks_says_so() -> None:
    notes = _expected_notes("--map", "USER_DATA=sdz")
    assert notes["USER_DATA"].startswith("--map USER_DATA=sdz: sdz is not in this analysis")


def test_map_needs_tablespace_equals_device() -> None:
    out = CliRunner().invoke(app, ["analyze", *_HDD_SSD, "--map", "USER_DATA"])
    assert out.exit_code != 0
    assert "use TABLESPACE=DEV" in out.output


def test_soe_finding_says_the_host_waited_on_io() -> None:
    """The report's Operating System Statistics (IOWAIT_TIME 74.6 % of BUSY + IDLE, busy
    9.4 + 6.8 %) answer [Insight-SSD9]'s question from the AWR alone: I/O, not CPU."""
    for path in (SOE_TXT, SOE_HTML):
        f = next(f for f in _result(path).findings if f.rule == "oracle_file_reads"
                 and f.device == "SOE")
        ev = {e.metric: e for e in f.evidence}
        assert ev["cpu_iowait_pct"].value == pytest.approx(74.6, abs=0.01)
        assert "waited on I/O 74.6 % of the window and were busy 16.2 %" in f.explanation
