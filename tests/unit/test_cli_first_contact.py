"""First contact: `iogauge analyze` on an excerpt pasted from a ticket, with no options.

The excerpts (tests/fixtures/NOTICE): two Solaris `iostat -x` reports as [Goodus] prints them,
without time stamps (ssd2 137.8 ms at 100 %b, then sd0 1246.4 ms with %w 33), and the middle
of a Linux `iostat -x` log without -t. Their reports are numbered on a relative time line
(model/timeline.py); no output claims a clock time or a duration the file does not hold.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from iogauge.cli.main import app

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SOLARIS = FIX / "solaris-iostat" / "goodus-excerpt-two-reports.txt"
LINUX = FIX / "iostat" / "seed003-insert-excerpt-no-banner.txt"
NO_INTERVAL = "(interval not in the file)"
#: what would claim a clock time or a length of time: a date, a time of day, "1-min window"
CLOCK = re.compile(r"1970|\d\d:\d\d:\d\d|\d+-(min|s|h)\b| UTC\b")


def _json(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["analyze", *args, "--json"])
    assert res.exit_code == 0, res.output
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def _by_device(doc: dict[str, Any], device: str) -> list[dict[str, Any]]:
    return [f for f in doc["findings"] if f["device"] == device]


def _evidence(finding: dict[str, Any]) -> dict[str, Any]:
    return {e["metric"]: e["value"] for e in finding["evidence"]}


def _texts(doc: dict[str, Any]) -> list[str]:
    """Every sentence a reader sees about the findings (not the raw time fields)."""
    out = [*doc["notes"]]
    for f in doc["findings"]:
        out += [f["title"], f["when"], f["explanation"], f["suggestion"]]
        out += [e["note"] for e in f["evidence"]]
    return out


def test_solaris_excerpt_is_judged_with_no_options() -> None:
    doc = _json(str(SOLARIS))
    assert doc["timeline"] is not None and doc["timeline"]["reports"] == 2
    ssd2 = [f for f in _by_device(doc, "ssd2") if f["severity"] in ("warning", "critical")]
    sd0 = [f for f in _by_device(doc, "sd0") if f["severity"] in ("warning", "critical")]
    assert ssd2 and sd0
    e = _evidence(next(f for f in ssd2 if f["rule"] == "solaris_service_time"))
    assert (e["svc_t_ms"], e["busy_pct"]) == (137.8, 100.0)
    e = _evidence(next(f for f in sd0 if f["rule"] == "solaris_service_time"))
    assert (e["svc_t_ms"], e["busy_pct"], e["wait_pct"]) == (1246.4, 100.0, 33.0)
    assert next(f for f in ssd2)["when"] == f"report 1 of 2 {NO_INTERVAL}"
    assert next(f for f in sd0)["when"] == f"report 2 of 2 {NO_INTERVAL}"
    for idle in ("sd1", "sd6", "ssd0", "ssd1"):
        dev = next(d for d in doc["devices"] if d["device"] == idle)
        assert dev["verdict"] == "idle"
        assert all(f["severity"] == "info" for f in _by_device(doc, idle))
    # which first report was assumed, and why; nothing claims a time the file lacks
    assert any("measured interval" in n and "ssd2 is 100 % busy" in n for n in doc["notes"])
    assert not [t for t in _texts(doc) if CLOCK.search(t)]


def test_linux_excerpt_without_t_is_judged_with_no_options() -> None:
    doc = _json(str(LINUX))
    assert doc["timeline"]["reports"] == 2
    sdb = [f for f in _by_device(doc, "sdb") if f["severity"] in ("warning", "critical")]
    assert sdb
    assert any(_evidence(f).get("util_pct") == pytest.approx(98.9) for f in sdb)
    assert any(_evidence(f).get("await_ms") == pytest.approx(40.46) for f in sdb)
    assert all(f["when"] == f"reports 1-2 of 2 {NO_INTERVAL}" for f in sdb)
    assert any("fragment of a longer log" in n for n in doc["notes"])
    assert not [t for t in _texts(doc) if CLOCK.search(t)]


def test_terminal_and_html_name_reports_not_clock_times(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["analyze", str(SOLARIS)])
    assert res.exit_code == 0, res.output
    assert f"report 1 of 2 {NO_INTERVAL}" in res.stdout
    assert "1970" not in res.stdout and " UTC " not in res.stdout
    page = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", str(SOLARIS), "-o", str(page)])
    assert res.exit_code == 0, res.output
    html = page.read_text()
    assert f"report 2 of 2 {NO_INTERVAL}" in html
    assert "1970-01-01 " not in html  # no span printed as a clock time
    assert '"relative":{"interval":60.0}' in html  # the charts count reports


def test_start_and_interval_still_put_the_excerpt_on_the_clock() -> None:
    doc = _json(str(SOLARIS), "--start", "2008-02-21T10:00", "--interval", "5")
    assert doc["timeline"] is None
    f = next(f for f in _by_device(doc, "sd0") if f["severity"] == "critical")
    # (the two 5 s reports share the default 1-min window: the first measured one ends at
    # 10:00:05, not at --start, as the since-boot report of a whole capture would)
    assert f["when"] == "2008-02-21 10:00:00 - 10:00:10 UTC"


def test_first_report_option_overrides_the_evidence() -> None:
    doc = _json(str(SOLARIS), "--first-report", "since-boot")
    # ssd2's 137.8 ms report is then the since-boot average and left out
    assert not [f for f in _by_device(doc, "ssd2") if f["severity"] != "info"]
    assert any("--first-report since-boot" in n for n in doc["notes"])
    res = CliRunner().invoke(app, ["analyze", str(SOLARIS), "--first-report", "sometimes"])
    assert res.exit_code == 2


def test_a_longer_window_counts_reports_too() -> None:
    doc = _json(str(SOLARIS), "--window", "120")  # two nominal 60 s reports per window
    f = next(f for f in _by_device(doc, "sd0") if f["rule"] == "solaris_service_time")
    assert f["when"] == f"reports 1-2 of 2 {NO_INTERVAL}"
    assert any("2-report window" in e["note"] for e in f["evidence"])
    assert "analysis windows: 2 reports each" in " ".join(doc["notes"])
    assert not [t for t in _texts(doc) if CLOCK.search(t)]


def test_imported_into_the_store_it_stays_on_the_relative_line(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    res = CliRunner().invoke(app, ["import", str(SOLARIS), "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert f"report 2 {NO_INTERVAL}" in res.stdout and "1970" not in res.stdout
    doc = _json("--db", str(db))
    assert doc["timeline"]["reports"] == 2
    assert {f["when"] for f in doc["findings"] if f["severity"] == "critical"} == {
        f"report 1 of 2 {NO_INTERVAL}", f"report 2 of 2 {NO_INTERVAL}"}
