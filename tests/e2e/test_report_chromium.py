"""The HTML report in a real browser: Debian's headless Chromium, driven over DevTools.

The report is made from real fixtures — [Yuge]'s RMF report (volumes, rank, response-time
breakdown), a sysstat iostat capture, a Statspack report (wait events, datafiles) — plus a
synthetic day of 1 s samples on two devices (so the min/max envelope is drawn), a hostile
device name, guarantee-controller decisions and a comparison; it is analysed with
``analysis.engine.analyze`` (a hand-made result stands in if the engine cannot be imported).

Then, in Chromium (``tests/helpers/chromium.py``: the DevTools protocol over a pipe, no
Python dependency): every chart drew data, there is no console error and no exception, the
page made no network request (every request is recorded; the browser also resolves no host
name and proxies to a dead port), no script injected by the hostile name ran, zoom is
synchronised across a device's charts, the tooltip shows values, the filter hides devices,
and print media keeps the charts. A screenshot and a PDF are saved under ``artifacts/``
(ignored by git; ``IOGAUGE_ARTIFACTS`` moves it) and their paths printed.

Skipped with the reason when Chromium is not installed (``scripts/ensure-system-tools.sh``
installs Debian's ``chromium`` as root).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.helpers.chromium import Chromium, find_chromium

from iogauge.analysis.types import AnalysisResult, Attributes, DeviceReport
from iogauge.importers.registry import import_file
from iogauge.model.guaranteeframe import GuaranteeFrame
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame
from iogauge.reporting.html_report import render_report, write_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
ARTIFACTS = Path(os.environ.get("IOGAUGE_ARTIFACTS") or ROOT / "artifacts")
EVIL = "<img src=x onerror=alert(1)>"
DAY = datetime(2026, 11, 22, tzinfo=UTC)


def _synthetic_day(seconds: int = 86_400) -> pl.DataFrame:
    """Two disks, 1 s samples for a day: a diurnal load with noise and a few spikes."""
    rng = np.random.default_rng(7)
    t = np.arange(1, seconds + 1, dtype=np.float64)
    ts = pl.datetime_range(DAY + timedelta(seconds=1), DAY + timedelta(seconds=seconds), "1s",
                           time_zone="UTC", eager=True)
    parts = []
    for name, cap in (("sdb", 180.0), ("nvme0n1", 20_000.0)):
        load = np.clip((0.45 + 0.35 * np.sin(2 * np.pi * t / 86_400.0))
                       * rng.lognormal(0, 0.2, seconds), 0.01, 0.95)
        load[rng.choice(seconds, 12, replace=False)] = 0.99
        iops = load * cap
        svctm = 1000.0 / cap
        await_ms = svctm / (1 - load) * rng.lognormal(0, 0.1, seconds)
        parts.append(pl.DataFrame({
            "ts": ts, "r_iops": iops * 0.7, "w_iops": iops * 0.3, "r_kBps": iops * 0.7 * 8,
            "w_kBps": iops * 0.3 * 16, "r_areq_kB": np.full(seconds, 8.0),
            "w_areq_kB": np.full(seconds, 16.0), "r_await_ms": await_ms,
            "w_await_ms": await_ms * 0.5, "aqu_sz": iops * await_ms / 1000,
            "util_pct": np.minimum(100.0, iops * svctm / 10.0)})
            .with_columns(source=pl.lit("iostat"), host=pl.lit("day"), device=pl.lit(name),
                          device_kind=pl.lit("disk"), interval_s=pl.lit(1.0)))
    return pl.concat(parts, how="vertical_relaxed")


def _fallback_result(frame: SampleFrame) -> AnalysisResult:
    """A plain result (one healthy report per device) when the engine is not importable."""
    df = frame.df.filter(~pl.col("since_boot") & ~pl.col("reset"))
    reps = []
    multi = df["host"].n_unique() > 1
    for (host, dev, kind, src), g in df.group_by("host", "device", "device_kind", "source",
                                                 maintain_order=True):
        key = f"{host}:{dev}" if multi else str(dev)
        reps.append(DeviceReport(key, str(host), str(kind), None, str(src), "healthy", "ok",
                                 Attributes(intervals=g.height), None, None))
    return AnalysisResult(reps, [], 60.0, 1.0, df["ts"].min(), df["ts"].max())  # type: ignore[arg-type]


def _guarantee() -> pl.DataFrame:
    rows = [{"run_id": "run-1", "host": "day", "device": "sdb",
             "ts": DAY + timedelta(seconds=3600 + 20 * i), "interval_s": 20.0,
             "policy": "paper", "actuator": "dry-run", "util_pct": 70.0 + (i % 30),
             "iops": 150.0, "a_iops": 95.0 if i % 17 == 0 else 110.0, "a_floor_iops": 100.0,
             "b_iops": 40.0, "busy_per_iops": 0.6, "x_pct": 95.0 if i < 100 else 87.0,
             "b_riops_limit": 30, "b_wiops_limit": 10, "a_miss": i % 17 == 0,
             "state": "compute", "reason": "b = (X - a_busy) / busy_per_iops",
             "groups_json": "{}"} for i in range(180)]
    return GuaranteeFrame.from_records(rows).df


@dataclass
class Page:
    browser: Chromium
    session: str
    url: str
    data: dict[str, Any]
    analysed_by: str

    def js(self, expression: str) -> Any:
        return self.browser.evaluate(self.session, expression)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    exe = find_chromium()
    if exe is None:
        pytest.skip("Chromium is not installed: run scripts/ensure-system-tools.sh as root "
                    "(installs Debian's chromium)")
    imports = [import_file(FIX / "rmf" / "seed000_before_1rank.txt"),
               import_file(FIX / "iostat" / "iostat-tool-sysstat11.7.3-iostat-x-t.txt"),
               import_file(FIX / "statspack" / "sp_102_config5-1-2_hdd_cache128m.txt")]
    day = _synthetic_day()
    evil = day.filter(pl.col("device") == "sdb").head(600).with_columns(
        device=pl.lit(EVIL))
    frame = SampleFrame.concat([*(i.frame for i in imports), SampleFrame(day),
                                SampleFrame(evil)])
    waits = WaitEventFrame.concat([i.waits for i in imports if len(i.waits)])
    try:
        from iogauge.analysis.engine import analyze
    except ImportError:
        result, how = _fallback_result(frame), "hand-made result (engine not importable)"
    else:
        result, how = analyze(frame, waits), "analysis.engine.analyze"
    comparison = None
    try:
        from iogauge.analysis.compare import compare
    except ImportError:
        pass
    else:
        after = import_file(FIX / "rmf" / "seed000_after_2ranks.txt")
        comparison = compare(imports[0].frame, after.frame).to_dict()
    html = render_report(frame, result, title=f"e2e report {EVIL}", waits=waits.df,
                         comparison=comparison, guarantee=_guarantee())
    path = write_report(tmp_path_factory.mktemp("report") / "report.html", html)
    data = json.loads(re.search(r"id='iogauge-data'>(.*?)</script>", html, re.S)
                      .group(1))  # type: ignore[union-attr]
    with Chromium(exe, width=1400, height=1000) as browser:
        url = path.resolve().as_uri()
        session = browser.open(url, timeout=120)
        browser.wait_for(session, "document.body.dataset.complete === '1'", timeout=120)
        yield Page(browser, session, url, data, how)


def test_every_chart_rendered_with_data(page: Page) -> None:
    figs = page.js("Array.from(document.querySelectorAll('figure.chart')).map(f => "
                   "[f.id, f.dataset.rendered || '', Number(f.dataset.points || 0)])")
    expected = [c["el"] for d in page.data["devices"] for c in d["charts"]]
    expected += [c["el"] for g in page.data["guarantee"] for c in g["charts"]]
    assert sorted(f[0] for f in figs) == sorted(expected)
    assert len(figs) > 100, page.analysed_by  # RMF volumes, sda, datafiles, a day, guarantee
    empty = [f for f in figs if f[1] != "1" or f[2] <= 0]
    assert empty == []
    body = page.js("Object.assign({}, document.body.dataset)")
    assert body["chartsRendered"] == body["chartsTotal"] == str(len(figs))
    assert "jsErrors" not in body
    assert page.js("document.getElementById('js-errors').hidden") is True
    # the day-long devices are drawn as min/max envelopes of at most 1,200 columns
    day = [d for d in page.data["devices"] if d["key"] in ("sdb", "nvme0n1", "day:sdb",
                                                          "day:nvme0n1")]
    assert len(day) == 2
    assert all(d["ts"]["mode"] == "minmax" and len(d["ts"]["t"]) <= 1200 for d in day)
    fig = next(c["el"] for c in day[0]["charts"] if c["type"] == "ts")
    assert page.js(f"Number(document.getElementById('{fig}').dataset.points)") >= 1000
    print(f"\n{len(figs)} charts drawn in {body['renderMs']} ms; analysis: {page.analysed_by}")


def test_no_console_error_no_exception_no_injected_script(page: Page) -> None:
    b, s = page.browser, page.session
    assert b.page_events(s, "Runtime.exceptionThrown") == []
    bad = [e["params"] for e in b.page_events(s, "Runtime.consoleAPICalled")
           if e["params"]["type"] in ("error", "assert", "warning")]
    assert bad == []
    logged = [e["params"]["entry"] for e in b.page_events(s, "Log.entryAdded")
              if e["params"]["entry"]["level"] in ("error", "warning")]
    assert logged == []
    assert b.page_events(s, "Page.javascriptDialogOpening") == []  # no alert() ran
    # the hostile name is text, never an element
    assert page.js("document.querySelectorAll('img').length") == 0
    assert page.js("document.querySelectorAll('script').length") == 3
    assert page.js("document.title") == f"e2e report {EVIL}"
    assert page.js(f"Array.from(document.querySelectorAll('section.device h2')).some("
                   f"h => h.textContent.includes({json.dumps(EVIL)}))") is True


def test_no_network_request(page: Page) -> None:
    b, s = page.browser, page.session
    urls = [e["params"]["request"]["url"] for e in b.page_events(s, "Network.requestWillBeSent")]
    assert urls == [page.url]  # the report itself, nothing else
    assert b.page_events(s, "Network.webSocketCreated") == []
    assert b.page_events(s, "Network.loadingFailed") == []


def test_zoom_is_synchronised_and_tooltip_shows_values(page: Page) -> None:
    dev = next(d for d in page.data["devices"] if d["key"].endswith("sdb")
               and d["ts"] is not None and d["ts"]["mode"] == "minmax")
    ts_charts = [c["el"] for c in dev["charts"] if c["type"] == "ts"]
    assert len(ts_charts) == 5  # IOPS, MB/s, latency, %util, queue
    first = ts_charts[0]
    box = page.js(f"(() => {{ const p = document.querySelector('#{first} .plot'); "
                  "p.scrollIntoView({block: 'center'}); const r = p.getBoundingClientRect(); "
                  "return [r.left, r.top, r.width, r.height]; })()")
    x0, y0, w, h = box
    y = y0 + h / 2
    mouse = {"button": "left", "clickCount": 1}
    # hover: the tooltip names the time (UTC) and the series with their values
    page.browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x0 + w * 0.3,
                                                   "y": y}, session=page.session)
    tip = page.js("(() => { const t = document.querySelector('div.tip'); "
                  "return t.hidden ? '' : t.textContent; })()")
    assert re.search(r"2026-11-22 \d\d:\d\d:\d\dZ", tip)
    assert "read IOPS:" in tip
    assert "samples: min\u2013max" in tip
    # drag from 30 % to 50 % of the plot: every time chart of the device shows that range
    for kind, fx in (("mousePressed", 0.3), ("mouseMoved", 0.4), ("mouseReleased", 0.5)):
        page.browser.send("Input.dispatchMouseEvent", {"type": kind, "x": x0 + w * fx, "y": y,
                                                       **mouse}, session=page.session)
    views = page.js("[" + ",".join(f"document.getElementById('{el}').dataset.view"
                                   for el in ts_charts) + "]")
    assert len(set(views)) == 1
    assert views[0]
    a, b = (float(v) for v in views[0].split(","))
    # the plot spans the day (86,400 s from 00:00 with a 60 px left margin): 20 % of the
    # plot width is ~4.7 h
    assert 3.5 * 3600 < b - a < 5.5 * 3600
    # double-click resets all of them
    for kind in ("mousePressed", "mouseReleased"):
        page.browser.send("Input.dispatchMouseEvent", {"type": kind, "x": x0 + w * 0.5,
                                                       "y": y, "button": "left",
                                                       "clickCount": 2},
                          session=page.session)
    views = page.js("[" + ",".join(f"document.getElementById('{el}').dataset.view"
                                   for el in ts_charts) + "]")
    assert views == [""] * len(ts_charts)


def test_filter_hides_devices_and_print_keeps_every_chart(page: Page) -> None:
    n = len(page.data["devices"])
    shown = page.js("(() => { const f = document.getElementById('dev-filter'); "
                    "f.value = 'DB2D0'; f.dispatchEvent(new Event('input')); "
                    "return document.querySelectorAll('section.device:not([hidden])').length; "
                    "})()")
    assert shown == 8  # DB2D01 .. DB2D08
    page.browser.send("Emulation.setEmulatedMedia", {"media": "print"}, session=page.session)
    try:
        printed = page.js("(() => { const secs = Array.from(document.querySelectorAll("
                          "'section.device')); return [secs.filter(s => getComputedStyle(s)"
                          ".display !== 'none').length, getComputedStyle(document."
                          "querySelector('nav.toolbar')).display, Array.from(document."
                          "querySelectorAll('canvas.base')).filter(c => c.getBoundingClientRect()"
                          ".width > 0).length]; })()")
    finally:
        page.browser.send("Emulation.setEmulatedMedia", {"media": ""}, session=page.session)
        page.js("(() => { const f = document.getElementById('dev-filter'); f.value = ''; "
                "f.dispatchEvent(new Event('input')); })()")
    assert printed[0] == n  # filtered-out devices are printed too
    assert printed[1] == "none"  # no toolbar on paper
    assert printed[2] == len(page.js("document.querySelectorAll('figure.chart')"))


def test_empty_report_opens_without_errors(page: Page, tmp_path: Path) -> None:
    html = render_report(SampleFrame.empty(), AnalysisResult([], [], 60.0, None, None, None),
                         title="empty")
    path = write_report(tmp_path / "empty.html", html)
    b = page.browser
    s = b.open(path.resolve().as_uri())
    b.wait_for(s, "document.body.dataset.complete === '1'")
    assert b.evaluate(s, "[document.body.dataset.chartsTotal, document.body.dataset.jsErrors "
                         "|| '']") == ["0", ""]
    assert b.page_events(s, "Runtime.exceptionThrown") == []
    urls = [e["params"]["request"]["url"] for e in b.page_events(s, "Network.requestWillBeSent")]
    assert urls == [path.resolve().as_uri()]


def test_screenshot_and_pdf_artifacts(page: Page) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.js("window.scrollTo(0, 0)")
    png = page.browser.screenshot(page.session, ARTIFACTS / "report-chromium.png")
    pdf = page.browser.pdf(page.session, ARTIFACTS / "report-chromium.pdf")
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(head[16:20], "big")
    assert width == 1400
    assert png.stat().st_size > 100_000  # a page of tables and charts, not a blank
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert pdf.stat().st_size > 200_000
    print(f"\nscreenshot: {png}\nPDF: {pdf}")
