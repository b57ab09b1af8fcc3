"""One response-time standard: each latency class through ``analyze``, the slow-without-load
finding, and the real captures the standard was built against (RHEL 6 iostat, HP-UX and AIX
sar; NOTICE in tests/fixtures)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from iogauge.analysis.engine import AnalysisOptions, analyze
from iogauge.analysis.service_model import ServiceModel
from iogauge.analysis.types import AnalysisResult, DeviceReport, Finding
from iogauge.cli.main import app
from iogauge.importers.registry import import_file
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _frame(device: str, n: int = 10, *, source: str = "iostat", **cols: float) -> SampleFrame:
    """n one-minute intervals of one device with constant measures."""
    rows: list[dict[str, Any]] = []
    for i in range(n):
        r: dict[str, Any] = {"source": source, "host": "h", "device": device,
                             "device_kind": "disk", "interval_s": 60.0,
                             "ts": T0 + timedelta(minutes=i + 1)}
        r.update(cols)
        rows.append(r)
    return SampleFrame.from_records(rows)


def _load(r_iops: float, r_await: float, w_iops: float, w_await: float, util: float,
          ) -> dict[str, float]:
    iops = r_iops + w_iops
    await_ms = (r_iops * r_await + w_iops * w_await) / iops
    return {"r_iops": r_iops, "w_iops": w_iops, "iops": iops, "r_await_ms": r_await,
            "w_await_ms": w_await, "await_ms": await_ms, "util_pct": util,
            "aqu_sz": iops * await_ms / 1000.0, "r_areq_kB": 8.0, "w_areq_kB": 8.0,
            "r_kBps": 8.0 * r_iops, "w_kBps": 8.0 * w_iops, "kBps": 8.0 * iops}


def _run(frame: SampleFrame, infos: dict[str, DeviceInfo] | None = None,
         media: dict[str, ServiceModel] | None = None) -> AnalysisResult:
    return analyze(frame, None, infos, AnalysisOptions(strict=True, media=media or {}))


def _dev(res: AnalysisResult, name: str) -> DeviceReport:
    return next(d for d in res.devices if d.device == name)


def _findings(res: AnalysisResult, name: str, rule: str) -> list[Finding]:
    return [f for f in res.findings if f.device == name and f.rule == rule]


def _exp(d: DeviceReport) -> dict[str, Any]:
    assert d.expectation is not None
    return d.expectation.to_dict()


# ---- one test per latency class -----------------------------------------------------------
def test_hdd_by_its_rotational_flag_is_judged_against_goodus_30_ms() -> None:
    info = {"sdb": DeviceInfo(name="sdb", kind="disk", rotational=True,
                              model="ST4000NM0035-1V4107")}
    res = _run(_frame("sdb", **_load(40.0, 9.0, 10.0, 6.0, 55.0)), info)
    d = _dev(res, "sdb")
    assert _exp(d)["class"] == "hard disk" and _exp(d)["read_ms"] == 30.0
    assert _exp(d)["decided_by"] == "catalog profile hdd-7200"
    assert d.verdict == "healthy"
    assert "reads 9.0 ms and writes 6.0 ms within the 30 ms expected of a hard disk" in (
        d.verdict_reason)
    assert "[Goodus] §3.4" in d.verdict_basis


def test_ssd_by_its_label_warns_above_10_ms_under_load() -> None:
    info = {"sdc": DeviceInfo(name="sdc", kind="disk", rotational=False,
                              model="Samsung SSD 860 EVO 1TB")}
    res = _run(_frame("sdc", **_load(400.0, 15.0, 0.0, 0.0, 40.0)), info)
    d = _dev(res, "sdc")
    assert _exp(d)["class"] == "SSD"
    [f] = [f for f in _findings(res, "sdc", "response_time_target") if f.severity != "info"]
    assert f.severity == "warning"
    assert f.title.startswith("Reads 15 ms against the 10 ms expected of an SSD")
    assert d.verdict == "near limit"


def test_nvme_by_its_name_is_healthy_at_a_fifth_of_a_millisecond() -> None:
    res = _run(_frame("nvme0n1", **_load(5000.0, 0.2, 1000.0, 0.05, 30.0)))
    d = _dev(res, "nvme0n1")
    assert _exp(d)["class"] == "NVMe SSD"  # the catalog knows nvme* names too
    assert d.verdict == "healthy"
    assert "within the 10 ms expected of an NVMe SSD" in d.verdict_reason


def test_array_lun_judges_writes_against_its_write_cache() -> None:
    """Reads 15 ms are within a LUN's 20 ms; writes 14 ms are not within its 10 ms: the
    write cache should have answered them."""
    res = _run(_frame("sdd", **_load(200.0, 15.0, 100.0, 14.0, 50.0)),
               media={"sdd": ServiceModel.PARALLEL})
    d = _dev(res, "sdd")
    assert (_exp(d)["class"], _exp(d)["read_ms"], _exp(d)["write_ms"]) == (
        "array LUN", 20.0, 10.0)
    [f] = [f for f in _findings(res, "sdd", "response_time_target") if f.severity != "info"]
    assert f.title.startswith("Writes 14 ms against the 10 ms expected of an array LUN")
    assert d.verdict == "near limit"


def test_cloud_volume_on_a_virtual_disk_uses_the_25_ms_guidance() -> None:
    res = _run(_frame("xvdf", **_load(300.0, 30.0, 0.0, 0.0, 45.0)),
               media={"xvdf": ServiceModel.PARALLEL})
    d = _dev(res, "xvdf")
    assert (_exp(d)["class"], _exp(d)["read_ms"]) == ("cloud volume", 25.0)
    [f] = [f for f in _findings(res, "xvdf", "response_time_target") if f.severity != "info"]
    assert "against the 25 ms expected of a cloud volume" in f.title


def test_unknown_device_falls_back_on_goodus_bands() -> None:
    slow = _run(_frame("sdz", **_load(100.0, 35.0, 0.0, 0.0, 40.0)))
    d = _dev(slow, "sdz")
    assert (_exp(d)["class"], _exp(d)["kind"]) == ("device of unknown media", "guidance")
    [f] = _findings(slow, "sdz", "solaris_service_time")
    assert f.title.startswith("Reads 35 ms at 40 % busy: above [Goodus]'s normal 30 ms")
    assert d.verdict == "near limit"
    # 1.5 ms: too fast for a spindle's positioning, so the samples decide nothing either
    fine = _dev(_run(_frame("sdz", **_load(100.0, 1.5, 0.0, 0.0, 40.0))), "sdz")
    assert fine.verdict == "healthy"
    assert fine.verdict_reason.startswith("reads 1.5 ms within [Goodus]'s 30 ms normal")
    assert fine.verdict_basis.startswith("response times against platform guidance "
                                         "([Goodus] §3.4)")


def test_windows_data_without_profile_uses_the_windows_guidance() -> None:
    res = _run(_frame("E:", source="perfmon", **_load(100.0, 5.0, 0.0, 0.0, 40.0)))
    d = _dev(res, "E:")
    assert (_exp(d)["kind"], _exp(d)["read_ms"]) == ("windows", 25.0)
    assert "within the 25 ms Windows guidance" in d.verdict_reason


# ---- latency without load ------------------------------------------------------------------
def test_slow_writes_at_low_load_are_neither_bottleneck_nor_healthy() -> None:
    """50 fast reads and 1 write of 120 ms a second at 17 % busy: the combined await (3.3 ms)
    would hide the writes; each write is slow by itself (no queue)."""
    load = _load(50.0, 1.0, 1.0, 120.0, 17.0)
    assert load["await_ms"] == pytest.approx(3.33, abs=0.01)
    res = _run(_frame("sdw", **load))
    d = _dev(res, "sdw")
    assert d.verdict == "slow, not busy"
    [f] = _findings(res, "sdw", "latency_without_load")
    assert f.title.startswith("Writes 120 ms at 17 % busy: slow without load, above ")
    assert "30 ms" in f.title  # a spindle's, or [Goodus]'s normal
    assert "write cache" in f.explanation
    q = next(e for e in f.evidence if e.metric == "requests_in_service_while_busy")
    assert q.value == pytest.approx(1.0, abs=0.01) and q.op == "<"
    assert not [x for x in res.findings if x.device == "sdw" and x.severity != "info"
                and x.rule != "latency_without_load"]


def test_bursts_at_low_load_are_told_from_a_slow_device() -> None:
    """5 writes a second at 70 ms and 6 % busy: 5.8 requests in service whenever busy."""
    load = _load(0.0, 0.0, 5.0, 70.0, 6.0) | {"r_iops": 0.0, "r_await_ms": 0.0}
    res = _run(_frame("sdv", **load))
    [f] = _findings(res, "sdv", "latency_without_load")
    assert "requests queue in bursts (5.8 in service while busy)" in f.title
    assert _dev(res, "sdv").verdict == "slow, not busy"


def test_almost_idle_30_to_50_ms_is_normal_but_not_above_the_critical_line() -> None:
    quiet = _run(_frame("sdu", **_load(2.0, 40.0, 0.0, 0.0, 4.0)))
    assert not _findings(quiet, "sdu", "latency_without_load")
    slow = _run(_frame("sdu", **_load(2.0, 60.0, 0.0, 0.0, 4.0)))
    [f] = _findings(slow, "sdu", "latency_without_load")
    assert f.severity == "critical"
    assert _dev(slow, "sdu").verdict == "slow, not busy"  # critical, yet not a bottleneck


# ---- the captures the standard was built against -----------------------------------------
def test_rhel6_capture_write_bursts_through_the_cli() -> None:
    out = CliRunner().invoke(app, ["analyze", "--json",
                                   str(FIX / "iostat" / "iostat-tool-rhel6-iostat-x-t-mb.txt")])
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    devs = {d["device"]: d for d in res["devices"]}
    for name in ("sdd", "sda"):
        assert devs[name]["verdict"] == "slow, not busy"
        found = [f for f in res["findings"]
                 if f["device"] == name and f["rule"] == "latency_without_load"]
        assert found and all(f["title"].startswith("Writes ") for f in found)
        w = next(e for e in found[0]["evidence"] if e["metric"] == "w_await_ms")
        assert w["value"] > 50.0 and w["threshold"] == 30.0
        assert not [f for f in res["findings"] if f["device"] == name
                    and f["severity"] != "info" and f["rule"] != "latency_without_load"]


def test_hpux_luns_at_one_to_six_ms_are_not_bottlenecks() -> None:
    res = analyze(import_file(FIX / "unix-sar" / "ksar-hpux11.31-sar.txt").frame)
    for name in ("disk101", "disk103", "disk105"):
        d = _dev(res, name)
        assert d.verdict == "busy, not the bottleneck", (name, d.verdict_reason)
        assert "%busy alone does not make a bottleneck" in d.verdict_reason
        assert "overruled by the response times" in d.verdict_basis
    assert not [d.device for d in res.devices if d.verdict == "bottleneck"]


def test_aix_hdisk20_and_30_keep_their_bottleneck_at_20_percent_busy() -> None:
    res = analyze(import_file(FIX / "unix-sar" / "ksar-aix7.2-sar.txt").frame)
    for name, ms in (("hdisk20", "84"), ("hdisk30", "78.9")):
        d = _dev(res, name)
        assert d.verdict == "bottleneck"
        [f] = [f for f in _findings(res, name, "solaris_service_time")
               if f.severity == "critical"]
        assert f.title.startswith(f"Bottleneck: response {ms} ms at 20 % busy")
    # 57.9 ms at 6 % busy: slow without load, not near its limit
    assert _dev(res, "hdisk26").verdict == "slow, not busy"
