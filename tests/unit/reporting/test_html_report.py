"""The HTML report: one self-contained file, every device and chart with its data, escaped.

Analysis results are built by hand here (realistic values for the fixtures' data), so these
tests check the report, not the analysis engine.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from iogauge.analysis.types import (
    AnalysisResult,
    Attributes,
    Capability,
    CapacityEstimate,
    DeviceReport,
    Evidence,
    Finding,
    WindowRef,
)
from iogauge.importers.registry import import_file
from iogauge.model.guaranteeframe import GuaranteeFrame
from iogauge.model.sampleframe import SampleFrame
from iogauge.reporting.html_report import (
    ReportError,
    render_report,
    round_sig,
    write_report,
)
from iogauge.reporting.metrics import (
    ALL_FORMATS,
    SERIES_FORMATS,
    SUMMARY_FORMATS,
    markdown_table,
    metric_format,
)

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures"
SDA = FIX / "iostat" / "iostat-tool-sysstat11.7.3-iostat-x-t.txt"
RMF = FIX / "rmf" / "seed000_before_1rank.txt"
STATSPACK = FIX / "statspack" / "sp_102_config5-1-2_hdd_cache128m.txt"
T0 = datetime(2021, 9, 26, 3, 35, 19, tzinfo=UTC)  # start of sda's first measured interval


def _data(page: str) -> dict[str, Any]:
    m = re.search(r"<script type='application/json' id='iogauge-data'>(.*?)</script>", page,
                  re.S)
    assert m is not None
    return json.loads(m.group(1))  # type: ignore[no-any-return]


def _embedded_result(page: str) -> dict[str, Any]:
    m = re.search(r"<script type='application/json' id='iogauge-result'>(.*?)</script>", page,
                  re.S)
    assert m is not None
    return json.loads(m.group(1))  # type: ignore[no-any-return]


def _report(device: str, verdict: str, reason: str, *, host: str = "h", kind: str = "disk",
            attributes: Attributes | None = None, capability: Capability | None = None,
            capacity: CapacityEstimate | None = None, worst: list[WindowRef] | None = None,
            counts: dict[str, int] | None = None, source: str = "iostat") -> DeviceReport:
    return DeviceReport(device, host, kind, None, source, verdict, reason,
                        attributes or Attributes(), capability, capacity, worst or [],
                        counts or {"critical": 0, "warning": 0, "info": 0})


def _sda() -> tuple[SampleFrame, AnalysisResult]:
    """sysstat 11.7.3 `iostat -x -t 1`: sda writing ~128 kB sequentially at up to 99.9 %."""
    frame = import_file(SDA).frame
    host = frame.df["host"][0]
    peak = T0 + timedelta(seconds=54)  # 03:36:13, 5,934 w/s at 99.9 %util
    finding = Finding(
        "saturation", "warning", "sda", T0, T0 + timedelta(seconds=81),
        "sda at 99.9 % busy while writing 5,934 IO/s",
        [Evidence("util_pct", 99.9, "%", 90.0, ">=", "worst interval"),
         Evidence("w_iops", 5934.0, "IO/s")],
        "The disk was busy nearly all the time.", "Check whether the writes can be spread.",
        "[Oe] (Microsoft Learn https://learn.microsoft.com/azure/virtual-machines/"
        "disks-performance)")
    rep = _report(
        "sda", "near limit", "99.9 % busy at 5,934 IO/s", host=str(host),
        attributes=Attributes(intervals=81, span_s=81.0, iops_mean=2245.2, iops_peak=6128.0,
                              MBps_mean=279.99, read_pct=0.27, await_ms=0.19,
                              util_peak_pct=99.9, util_mean_pct=37.6),
        capability=Capability("hdd-7200", "7,200 rpm HDD", "rotational=1", parallel=False,
                              expected_iops=6000.0, used_pct=102.1,
                              sources=["vendor data sheet"]),
        capacity=CapacityEstimate("util-linear", "rotational single disk",
                                  busy_per_iops=0.01728, knee_util_pct=85.0, knee_iops=4919.0,
                                  max_iops=5787.0, current_iops=6128.0, headroom_iops=0.0,
                                  headroom_pct=0.0, confidence=0.8, r2=0.97, points=81),
        worst=[WindowRef(peak - timedelta(seconds=1), peak, "util_pct", 99.9, "%")],
        counts={"critical": 0, "warning": 1, "info": 0})
    return frame, AnalysisResult([rep], [finding], 60.0, 1.0, T0, T0 + timedelta(seconds=81))


def _rmf() -> tuple[SampleFrame, AnalysisResult]:
    """[Yuge]'s RMF report: one report per device, the rank a bottleneck."""
    frame = import_file(RMF).frame
    names = frame.df.select("device", "device_kind").unique(maintain_order=True).rows()
    start = datetime(2016, 6, 13, 10, 0, tzinfo=UTC)
    reps, findings = [], []
    for name, kind in names:
        verdict = "bottleneck" if kind == "rank" else "healthy"
        reps.append(_report(name, verdict, f"{name}: judged", host="SYSA", kind=kind,
                            source="rmf", attributes=Attributes(intervals=2, span_s=120.0)))
    findings.append(Finding("capability_exceeded", "critical", "RANK:0000@ABCD1", start,
                            start + timedelta(minutes=2), "rank beyond ~600 MB/s mixed",
                            [Evidence("MBps", 442.1, "MB/s", 318.7, ">=")], "why", "do",
                            "[Yuge]"))
    return frame, AnalysisResult(reps, findings, 60.0, 60.0, start,
                                 start + timedelta(minutes=2))


# ---- self-contained, offline --------------------------------------------------------------
def test_report_is_one_file_with_no_network_reference() -> None:
    frame, result = _sda()
    page = render_report(frame, result, title="sda")
    assert page.startswith("<!doctype html>")
    assert page.count("<html") == 1
    # nothing to fetch: no src attribute, every href is an in-page anchor, no CSS url()
    assert re.search(r"\ssrc\s*=", page, re.I) is None
    hrefs = re.findall(r"href\s*=\s*['\"]([^'\"]*)['\"]", page, re.I)
    assert hrefs
    assert all(h.startswith("#") for h in hrefs)
    for bad in ("url(", "@import", "<link", "<iframe", "<img", "<object", "<embed",
                "XMLHttpRequest", "fetch(", "WebSocket", "sendBeacon"):
        assert bad not in page, bad
    # and the browser is told to refuse any load anyway
    assert "content=\"default-src 'none';" in page
    # the finding's source cites a URL: as text only
    assert page.count("https://learn.microsoft.com") == 2  # the finding card + embedded JSON
    assert "[Oe] (Microsoft Learn https://learn.microsoft.com/" in page


def test_every_device_has_a_section_and_every_chart_its_data() -> None:
    frame, result = _rmf()
    page = render_report(frame, result, title="RMF")
    data = _data(page)
    assert len(data["devices"]) == len(result.devices) == 18  # (SG:SGDB2 among them)
    for i, rep in enumerate(result.devices):
        sec = re.search(rf"<section class='device [^']*' id='dev-d{i}' data-dev='{i}' "
                        rf"data-key='([^']*)'", page)
        assert sec is not None, rep.device
        assert sec.group(1) == rep.device
        dev = data["devices"][i]
        assert dev["key"] == rep.device
        for spec in dev["charts"]:
            assert f"id='{spec['el']}'" in page
            if spec["type"] == "ts":
                ts = dev["ts"]
                for name in spec["series"]:
                    lo = ts["series"][name]["lo"]
                    assert len(lo) == len(ts["t"])
                    assert any(v is not None for v in lo)
            elif spec["type"] == "scatter":
                assert spec["data"]["total"] > 0
                assert len(spec["data"]["x"]) == len(spec["data"]["y"]) > 0
            elif spec["type"] == "stack":
                assert all(len(v) == len(spec["data"]["t"]) for v in
                           spec["data"]["parts"].values())
    # golden values: volume DB2D01's first interval (10:00-10:01) breaks down as
    # IOSQ 0 + PEND 0.145 + DISC 0.600 + CONN 0.745 = 1.49 ms (the fixture's RMF line)
    i = next(i for i, r in enumerate(result.devices) if r.device == "DB2D01")
    rmf = next(s for s in data["devices"][i]["charts"] if s["type"] == "stack")["data"]
    assert [rmf["parts"][k][0] for k in ("iosq_ms", "pend_ms", "disc_ms", "conn_ms")] == [
        0, 0.145, 0.6, 0.745]
    assert rmf["iv"] == [60, 60]
    # the finding is listed and marked on the rank's charts
    j = next(i for i, r in enumerate(result.devices) if r.device == "RANK:0000@ABCD1")
    assert data["devices"][j]["marks"]["findings"] == [[0, 0, 120, "critical"]]
    assert "id='f0' data-dev='" + str(j) + "'" in page


def test_timeseries_scatter_and_mix_carry_the_fixture_values() -> None:
    frame, result = _sda()
    data = _data(render_report(frame, result, title="sda"))
    dev = data["devices"][0]
    ts = dev["ts"]
    assert data["base"] == int(T0.timestamp())
    assert ts["mode"] == "raw"  # 81 samples fit in 1,200 columns: every sample kept
    assert ts["t"][:3] == [1, 2, 3]  # 03:35:20, :21, :22 as seconds from 03:35:19
    assert ts["t0"] == 0
    assert ts["iv"] == [1] * 81
    assert ts["breaks"] == []
    s = ts["series"]
    assert s["r_iops"]["lo"][:7] == [0, 2, 0, 0, 0, 5, 36]
    assert s["w_iops"]["lo"][5] == 5578
    assert s["w_MBps"]["lo"][5] == 692.5  # 709,160.96 kB/s / 1024, 4 significant digits
    assert max(s["util_pct"]["lo"]) == 99.9
    assert "d_iops" not in s  # sysstat 11.7 prints no discard columns: not measured
    charts = {c["el"]: c for c in dev["charts"]}
    assert list(charts) == ["d0-iops", "d0-mbps", "d0-lat", "d0-util", "d0-queue",
                            "d0-sc-util", "d0-sc-lat", "d0-mix", "d0-sizes"]
    assert charts["d0-iops"]["series"] == ["r_iops", "w_iops"]
    util = charts["d0-sc-util"]
    assert util["data"]["total"] == 81
    assert util["fit"] == {"method": "util-linear", "busy_per_iops": 0.01728,
                           "knee_iops": 4919.0, "knee_util_pct": 85.0, "max_iops": 5787.0,
                           "current_iops": 6128.0}
    mix = charts["d0-mix"]["data"]
    assert mix["ops"] == [485.0, 181376.23, None]  # sum of r/s and w/s over 81 x 1 s
    assert mix["kB"][:2] == [34560.0, 23189585.92]
    # operations by mean request size: reads mostly 32-64 kB, writes all 64-128 kB but 2
    assert charts["d0-sizes"]["data"] == {"r": [0, 0, 4, 6, 293, 182, 0, 0, 0, 0],
                                          "w": [0, 2, 0, 0, 0, 181400, 0, 0, 0, 0]}
    assert dev["marks"]["worst"] == [[53, 54, "util_pct", 99.9, "%"]]


def test_long_series_is_a_min_max_envelope_that_keeps_the_spike() -> None:
    # 20,000 1 s samples of 100 IOPS with one 1 s spike of 4,321 IOPS and one dip to 3
    start = datetime(2026, 11, 22, tzinfo=UTC)
    n = 20_000
    iops = np.full(n, 100.0)
    iops[12_345] = 4321.0
    iops[777] = 3.0
    frame = SampleFrame(pl.DataFrame({
        "source": "iostat", "host": "h", "device": "nvme0n1", "device_kind": "disk",
        "ts": pl.datetime_range(start + timedelta(seconds=1), start + timedelta(seconds=n),
                                "1s", time_zone="UTC", eager=True),
        "interval_s": 1.0, "r_iops": iops, "w_iops": np.zeros(n)}))
    result = AnalysisResult([_report("nvme0n1", "healthy", "ok")], [], 60.0, 1.0, start,
                            start + timedelta(seconds=n))
    page = render_report(frame, result, title="long", width_px=500)
    ts = _data(page)["devices"][0]["ts"]
    assert ts["mode"] == "minmax"
    assert len(ts["t"]) == 500  # one bucket per pixel column
    assert sum(ts["n"]) == n
    assert ts["dt"] == round((n - 1) / 500, 3)
    r = ts["series"]["r_iops"]
    assert max(r["hi"]) == 4321
    assert min(r["lo"]) == 3
    k = r["hi"].index(4321)
    assert ts["t"][k] <= 12_346 <= ts["t"][k] + ts["dt"]  # the spike's own column
    assert sorted(set(r["hi"])) == [100, 4321]  # nothing averaged: no 100 < value < 4321
    assert "min\u2013max band of the samples in each 40 s column" in page


def test_device_names_and_finding_text_are_escaped() -> None:
    evil = "<script>alert(1)</script>"
    t = datetime(2026, 1, 1, tzinfo=UTC)
    frame = SampleFrame.from_records([
        {"source": "iostat", "host": "h", "device": evil, "device_kind": "disk",
         "ts": t + timedelta(seconds=i), "interval_s": 1.0, "r_iops": 10.0 * i,
         "util_pct": 5.0 * i} for i in range(1, 4)])
    finding = Finding("queueing", "critical", evil, t, t + timedelta(seconds=3),
                      "<img src=x onerror=alert(2)>", [Evidence("<b>m</b>", "<i>v</i>")],
                      "</script><script>alert(3)</script>", "a & b", "<a href='x'>s</a>")
    rep = _report(evil, "bottleneck", "<svg onload=alert(4)>", kind="disk")
    result = AnalysisResult([rep], [finding], 60.0, 1.0, t, t + timedelta(seconds=3),
                            notes=["<u>note</u>"])
    page = render_report(frame, result, title="<title>x</title>")
    assert page.count("<script") == 3  # ours: the data block, the result block, the code
    for raw in (evil, "<img", "<svg", "</script><script>alert(3)", "<b>m</b>", "<i>v</i>",
                "<a href='x'>", "<u>note", "<title>x</title>"):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "a &amp; b" in page
    # inside the JSON blocks '<' is \u003c, and the JSON still reads back to the names
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page
    assert _data(page)["devices"][0]["key"] == evil
    assert _embedded_result(page)["findings"][0]["explanation"] == (
        "</script><script>alert(3)</script>")


def test_empty_analysis_still_makes_a_page() -> None:
    page = render_report(SampleFrame.empty(), AnalysisResult([], [], 60.0, None, None, None),
                         title="nothing")
    assert "<p class='muted'>No device.</p>" in page
    assert "No finding: no rule saw a problem." in page
    data = _data(page)
    assert data["devices"] == []
    assert data["guarantee"] == []


def test_embedded_result_is_the_analyze_json() -> None:
    frame, result = _sda()
    page = render_report(frame, result, title="sda")
    assert _embedded_result(page) == json.loads(json.dumps(result.to_dict()))


def test_parent_synthesised_by_the_analysis_is_charted_from_its_parts() -> None:
    # partitions sda1 (10, 11, 12 r/s) and sda2 (5, 6, 7 r/s) of an unreported disk sda:
    # the analysis judges "sda" (aggregate.add_aggregates); the report rebuilds its rows
    t = datetime(2026, 1, 1, tzinfo=UTC)
    frame = SampleFrame.from_records([
        {"source": "iostat", "host": "h", "device": dev, "device_kind": "partition",
         "parent": "sda", "ts": t + timedelta(seconds=i + 1), "interval_s": 1.0,
         "r_iops": r + i, "w_iops": 1.0} for i in range(3) for dev, r in (("sda1", 10.0),
                                                                             ("sda2", 5.0))])
    result = AnalysisResult([_report("sda", "healthy", "ok"), _report("sda1", "idle", "-",
                                                                       kind="partition")],
                            [], 60.0, 1.0, t, t + timedelta(seconds=3))
    data = _data(render_report(frame, result, title="parts"))
    assert data["devices"][0]["ts"]["series"]["r_iops"]["lo"] == [15, 17, 19]
    assert data["devices"][0]["ts"]["series"]["w_iops"]["lo"] == [2, 2, 2]
    assert data["devices"][1]["ts"]["series"]["r_iops"]["lo"] == [10, 11, 12]


def test_waits_table_lists_each_event_once_per_interval() -> None:
    imp = import_file(STATSPACK)
    t = imp.frame.df["ts"].min()
    result = AnalysisResult([_report(d, "healthy", "ok", host="dbsrv01", kind=k)
                             for d, k in imp.frame.df.select("device", "device_kind")
                             .unique(maintain_order=True).rows()], [], 61.0, 61.0,
                            t - timedelta(seconds=61), t)  # type: ignore[operator]
    page = render_report(imp.frame, result, title="sp", waits=imp.waits.df)
    waits = page[page.index("<section id='waits'>"):]
    waits = waits[:waits.index("</section>")]
    # 'db file sequential read' is in two sections of the report: one row, the seed's
    # 659 waits, 342 s, 519 ms per wait ([Insight-SSD9], config 5-1-2)
    row = re.findall(r"<tr class=io><td>db file sequential read</td>.*?</tr>", waits)
    assert len(row) == 1
    assert "<td class='num'>659</td><td class='num'>342.0 s</td>" in row[0]
    assert "519.00 ms" in row[0]
    assert "27.0 %" in row[0]  # its share of DB time, from the top-events section
    # most time waited first: 'read by other session' (468 s) heads the table
    assert waits.index("read by other session") < waits.index("db file sequential read")


def test_compare_view_highlights_the_changes_beyond_noise() -> None:
    frame, result = _sda()
    comparison = {
        "alpha": 0.01, "min_effect_pct": 5.0,
        "pairs": [{"device_before": "sd0", "device_after": "sd0", "how": "name",
                   "kind_before": "disk", "kind_after": "disk"}],
        "changes": [
            {"device_before": "sd0", "device_after": "sd0", "metric": "iops", "unit": "1/s",
             "before": 28.0, "after": 86.0, "change_pct": 207.1, "ratio": 3.07,
             "direction": "better", "significant": True, "test": "welch-t",
             "p_value": 0.00002, "n_before": 5, "n_after": 5, "note": ""},
            {"device_before": "sd0", "device_after": "sd0", "metric": "await_ms",
             "unit": "ms", "before": 40.1, "after": 39.5, "change_pct": -1.5, "ratio": 0.985,
             "direction": "same", "significant": False, "test": "welch-t", "p_value": 0.7,
             "n_before": 5, "n_after": 5, "note": ""}],
        "wait_changes": [
            {"event": "db file scattered read", "wait_class": "User I/O", "unit": "ms",
             "before": 7.4, "after": 3.7, "change_pct": -50.0, "ratio": 0.5,
             "direction": "better", "significant": False, "test": "single value",
             "p_value": None, "n_before": 1, "n_after": 1, "waits_before": 20078.0,
             "waits_after": 20004.0, "time_waited_s_before": 148.0,
             "time_waited_s_after": 74.0, "note": "single value"}],
        "notes": ["<devices paired by name>"]}
    page = render_report(frame, result, title="cmp", comparison=comparison)
    sec = page[page.index("<section id='compare'>"):]
    sec = sec[:sec.index("</section>")]
    assert sec.count("<tr class='sig'>") == 1
    assert sec.count("<tr class='nosig'>") == 2
    assert "1 of 3 change(s) beyond noise" in sec
    sig = re.search(r"<tr class='sig'>(.*?)</tr>", sec)
    assert sig is not None
    assert "<td>IOPS (IO/s)</td>" in sig.group(1)
    assert "+207.1 %" in sig.group(1)
    assert "\u00d73.07" in sig.group(1)
    assert "<td class='num'>&lt; 0.0001</td>" in sig.group(1)  # p = 2e-05
    assert "20,078 / 20,004" in sec
    assert "&lt;devices paired by name&gt;" in sec
    assert "href='#compare'" in page


def test_guarantee_view_charts_a_b_and_x_and_counts_misses() -> None:
    frame, result = _sda()
    t = T0
    rows = []
    for i in range(6):
        rows.append({
            "run_id": "r1", "host": "h", "device": "sda", "ts": t + timedelta(seconds=20 * (i + 1)),
            "interval_s": 20.0, "policy": "paper", "actuator": "dry-run",
            "util_pct": 80.0 + i, "iops": 150.0, "a_iops": 90.0 if i in (2, 3) else 110.0,
            "a_floor_iops": 100.0, "b_iops": 40.0, "busy_per_iops": 0.6, "x_pct": 95.0 - i,
            "b_riops_limit": 30, "b_wiops_limit": 10 + i, "a_miss": i in (2, 3),
            "state": "compute", "reason": "b = (X - a_busy) / busy_per_iops",
            "groups_json": "{}"})
    g = GuaranteeFrame.from_records(rows)
    page = render_report(frame, result, title="g", guarantee=g.df)
    sec = page[page.index("<section id='guarantee'>"):]
    assert "<td class='num'>6</td><td class='num'>2 (33.3 %)</td>" in sec
    assert "95.0 % → 90.0 % (min 90.0 %)" in sec
    gd = _data(page)["guarantee"][0]
    assert [c["el"] for c in gd["charts"]] == ["g0-a", "g0-b", "g0-x"]
    assert gd["misses"] == [2, 3]
    assert gd["series"]["b_limit_iops"]["lo"] == [40, 41, 42, 43, 44, 45]
    assert gd["t"] == [20, 40, 60, 80, 100, 120]  # from the report base 03:35:19
    for el in ("g0-a", "g0-b", "g0-x"):
        assert f"id='{el}'" in page


def test_write_report_is_atomic_and_reports_errors(tmp_path: Path) -> None:
    frame, result = _sda()
    page = render_report(frame, result, title="sda")
    out = write_report(tmp_path / "sub" / "r.html", page)
    assert out.read_text(encoding="utf-8") == page
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]  # no temporary left
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ReportError, match="cannot write the report"):
        write_report(blocker / "r.html", page)


def test_round_sig_gives_short_decimals() -> None:
    a = np.array([0.0, 1234.5, 12345.6, 0.0123456, 1.23456e-7, 999.96, 123456789.0, np.nan])
    out = round_sig(a).tolist()
    assert out[:7] == [0.0, 1234.0, 12350.0, 0.01235, 1.235e-07, 1000.0, 123500000.0]
    assert np.isnan(out[7])
    assert [repr(v) for v in out[:7]] == ["0.0", "1234.0", "12350.0", "0.01235", "1.235e-07",
                                          "1000.0", "123500000.0"]


def test_metric_formats_are_defined_once_and_documented() -> None:
    doc = (ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    for table in ALL_FORMATS:
        assert markdown_table(table) in doc, table
    assert list(SUMMARY_FORMATS) == ["iops_mean", "iops_peak", "MBps_mean", "MBps_peak",
                                     "r_await_ms", "w_await_ms", "await_peak_ms", "areq_kB",
                                     "aqu_sz_mean", "util_mean_pct", "util_peak_pct"]
    assert SERIES_FORMATS["util_pct"].fmt_unit(87.04) == "87.0 %"
    assert SERIES_FORMATS["r_await_ms"].fmt_unit(12.345) == "12.35 ms"
    assert SERIES_FORMATS["r_iops"].label() == "read IOPS (IO/s)"
    assert metric_format("svc_t_ms").unit == "ms"  # evidence names get their unit
    # the page's metric table is the Python one
    frame, result = _sda()
    data = _data(render_report(frame, result, title="sda"))
    assert data["metrics"]["w_MBps"] == {"title": "write MB/s", "unit": "MB/s", "decimals": 2}


def test_report_command_writes_html_and_prints_json(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from iogauge.analysis import engine
    from iogauge.cli.report_cmd import report

    _frame, result = _sda()
    seen: dict[str, Any] = {}

    def fake_analyze(frame_in: Any, waits: Any = None, infos: Any = None,
                     options: Any = None) -> AnalysisResult:
        seen["rows"], seen["options"] = len(frame_in), options
        return result

    monkeypatch.setattr(engine, "analyze", fake_analyze)
    app = typer.Typer()
    app.command()(report)
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, [str(SDA), "-o", str(out), "--json", "--from",
                                   "2021-09-26T03:36:00Z", "--device", "sda"])
    assert res.exit_code == 0, res.output
    doc, want = json.loads(res.stdout), json.loads(json.dumps(result.to_dict()))
    assert {k: v for k, v in doc.items() if k != "notes"} == {
        k: v for k, v in want.items() if k != "notes"}
    # the import's notes come first (which first report was assumed, and why)
    assert doc["notes"][len(doc["notes"]) - len(want["notes"]):] == want["notes"]
    assert any("since-boot average" in n for n in doc["notes"])
    assert seen["rows"] == 82  # the whole file (with its since-boot report) went to analyze
    assert seen["options"].devices == ("sda",)
    assert seen["options"].start == datetime(2021, 9, 26, 3, 36, tzinfo=UTC)
    page = out.read_text(encoding="utf-8")
    ts = _data(page)["devices"][0]["ts"]
    assert ts["t"][0] == 41  # the report charts only 03:36:00 on (41 s after the base)
    assert len(ts["t"]) == 41
    assert "report written to" in res.stderr
    # without --json: the terminal summary, and the default file name in the cwd
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, [str(SDA)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "near limit" in res.stdout
    assert (tmp_path / "iogauge-report.html").is_file()
