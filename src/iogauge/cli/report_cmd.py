"""`iogauge report`: analyse stored or imported data and write the self-contained HTML report."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import typer
from rich.markup import escape

from iogauge.cli import inputs as shared
from iogauge.cli import prometheus_source as prom_opts
from iogauge.cli.common import MEDIA_HELP, err, out, user_errors, warn
from iogauge.cli.prometheus_source import PromArgs
from iogauge.importers.first_report import FirstReport

if TYPE_CHECKING:
    import polars as pl

    from iogauge.analysis.engine import AnalysisOptions

#: Where the report goes when neither -o nor --json is given.
DEFAULT_OUTPUT = Path("iogauge-report.html")


def _in_span(df: pl.DataFrame, start: datetime | None, end: datetime | None) -> pl.DataFrame:
    """Rows whose interval end lies in [start, end] (the analysis selects the same way)."""
    import polars as pl

    if start is not None:
        df = df.filter(pl.col("ts") >= start)
    if end is not None:
        df = df.filter(pl.col("ts") <= end)
    return df


def report(
    files: list[str] = typer.Argument(None, help="Files to import and report on (any format "
                                      "`iogauge import` reads; globs allowed). Default: the "
                                      "store."),
    db: Path | None = typer.Option(None, "--db", help="Report on this store instead of files "
                                   "(default store: $XDG_DATA_HOME/iogauge/iogauge.duckdb). "
                                   "Its guarantee-controller decisions are shown too."),
    start: str | None = shared.FROM_OPTION,
    end: str | None = shared.TO_OPTION,
    device: list[str] = shared.DEVICE_OPTION,
    output: Path | None = typer.Option(None, "--output", "-o", help="HTML file to write "
                                       f"(default {DEFAULT_OUTPUT}; with --json, only when "
                                       "given)."),
    as_json: bool = typer.Option(False, "--json", help="Print the analysis as JSON on stdout "
                                 "(schema: docs/analysis.md) instead of the terminal summary."),
    title: str | None = typer.Option(None, "--title", help="Report title (default: what was "
                                     "analysed)."),
    profile: list[str] = typer.Option(None, "--profile", help="Capability profile for a "
                                      "device, DEVICE=NAME (repeatable), e.g. sdb=hdd-7200."),
    media: list[str] = typer.Option(None, "--media", help=MEDIA_HELP),
    target: list[str] = typer.Option(None, "--target", help="Response-time target, DEVICE=MS "
                                     "or DEVICE=MS@HH:MM-HH:MM (repeatable)."),
    tz: str | None = shared.TZ_OPTION,
    window: float | None = shared.WINDOW_OPTION,
    width: int = typer.Option(1200, "--width", min=200, max=20000, help="Pixel columns per "
                              "time chart: longer series are reduced to the min and max of "
                              "each column (peaks kept)."),
    lenient: bool = typer.Option(False, "--lenient", help="Skip unreadable input lines (and "
                                 "report how many) instead of failing."),
    first_report: FirstReport = shared.FIRST_REPORT_OPTION,
    all_findings: bool = typer.Option(False, "--all", help="Print every finding in the "
                                      "terminal summary, not only the top five (the report "
                                      "always has them all)."),
    prometheus: str | None = prom_opts.PROMETHEUS_OPTION,
    match: str | None = prom_opts.MATCH_OPTION,
    host_label: str = prom_opts.HOST_LABEL_OPTION,
    header: list[str] = prom_opts.HEADER_OPTION,
    hosts_per_batch: int = prom_opts.BATCH_OPTION,
) -> None:
    """Write one self-contained HTML report: verdict per device, findings with evidence,
    interactive charts (zoom, tooltips), waits, guarantee decisions.

    The file needs no network to open (everything is inlined) and prints. A day of 1 s
    samples on 20 devices makes a report of ~3.5 MB.

    With --prometheus, the page is the fleet view: every device of every host ranked
    (worst verdict, least headroom, longest time over --target) in a sortable table, each
    linking to its charts; ~8.6 MB for 1,000 hosts x 4 devices (benchmarks/README.md).

    Example: `iogauge report --db web1.duckdb --from 2026-11-22T00:00 -o web1.html`, or
    `iogauge report iostat.log.gz --device sdb -o sdb.html --json > sdb.json`.
    """
    # imported here: the analysis pulls in the catalog and every rule
    from iogauge.analysis.context import UTC, LatencyTarget
    from iogauge.analysis.engine import AnalysisOptions
    from iogauge.cli.analyze_cmd import parse_media, parse_profiles
    from iogauge.cli.inputs import parse_time, parse_zone

    with user_errors():
        zone = parse_zone(tz)
        lo, hi = parse_time(start, "--from", zone), parse_time(end, "--to", zone)
        opts = AnalysisOptions(
            start=lo, end=hi, devices=tuple(device or ()), profiles=parse_profiles(profile),
            media=parse_media(media), window_s=window, tz=zone or UTC,
            targets=tuple(LatencyTarget.parse(t) for t in target or ()))
        prom = PromArgs.of(prometheus, match, host_label, header, hosts_per_batch,
                           files=files, db=db)
        if prom is not None:
            _report_fleet(prom, opts, output=output, as_json=as_json, title=title)
            return
        _analyse_and_report(files, db, opts, zone=zone, lenient=lenient,
                            first_report=first_report, title=title, output=output,
                            as_json=as_json, width=width, all_findings=all_findings)


def _analyse_and_report(files: list[str] | None, db: Path | None, opts: AnalysisOptions, *,
                        zone: ZoneInfo | None, lenient: bool, first_report: FirstReport,
                        title: str | None, output: Path | None, as_json: bool, width: int,
                        all_findings: bool) -> None:
    """Load the inputs, analyse them, write the page and say what was written."""
    from iogauge.analysis.engine import analyze
    from iogauge.analysis.fleet import rank_hosts
    from iogauge.cli.inputs import load_inputs
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.reporting.analysis_terminal import print_analysis
    from iogauge.reporting.html_report import render_report, write_report
    from iogauge.store import Store

    lo, hi = opts.start, opts.end
    inputs = load_inputs(files, db, zone=zone, lenient=lenient, first_report=first_report)
    for n in inputs.notes:
        warn(n)
    result = analyze(inputs.frame, inputs.waits, inputs.infos, opts)
    rank_hosts(result, inputs.frame, opts)  # several hosts: the fleet's order
    # the page and the JSON state the import's notes too (the terminal has them above)
    stated = replace(result, notes=[*inputs.notes, *result.notes])
    guarantee = None
    if not files:
        with Store.open(db, read_only=True) as store:
            decisions = store.read_guarantee().df
        if decisions.height:
            guarantee = _in_span(decisions, lo, hi)
    frame = SampleFrame(_in_span(inputs.frame.df, lo, hi), validate=False)
    waits = _in_span(inputs.waits.df, lo, hi) if len(inputs.waits) else None
    what = title or f"iogauge report of {inputs.described}"
    path = None
    if output is not None or not as_json:
        page = render_report(frame, stated, title=what, waits=waits, guarantee=guarantee,
                             width_px=width)
        path = write_report(output or DEFAULT_OUTPUT, page)
    if as_json:
        sys.stdout.write(json.dumps(stated.to_dict(), indent=2) + "\n")
    elif result.devices:
        print_analysis(out, result, what, None if all_findings else 5)
    else:
        out.print("no device with data in the selection")
    if path is not None:
        size_mb = path.stat().st_size / 1e6
        err.print(f"report written to {escape(str(path))} ({size_mb:.1f} MB, "
                  f"{len(result.devices)} device(s), {len(result.findings)} finding(s))")


def _report_fleet(prom: PromArgs, opts: AnalysisOptions, *, output: Path | None,
                  as_json: bool, title: str | None) -> None:
    """``report --prometheus``: the fleet page (and the JSON, with --json)."""
    from iogauge.cli.prometheus_source import analyze_prometheus, require_span
    from iogauge.reporting.fleet_html import FleetCharts, render_fleet
    from iogauge.reporting.fleet_terminal import print_fleet
    from iogauge.reporting.html_report import write_report

    start, end = require_span(opts.start, opts.end)
    charts = FleetCharts(start, end) if output is not None or not as_json else None
    fleet, _ = analyze_prometheus(prom, opts, charts.on_batch if charts else None)
    what = title or f"iogauge fleet report of {prom.described()}"
    path = None
    if charts is not None:
        page = render_fleet(fleet, charts, title=what, source=prom.described())
        path = write_report(output or DEFAULT_OUTPUT, page)
    if as_json:
        sys.stdout.write(json.dumps(fleet.to_dict(), indent=2, default=str) + "\n")
    else:
        for n in fleet.result.notes:
            warn(n)
        print_fleet(out, fleet, what, 10)
    if path is not None:
        err.print(f"report written to {escape(str(path))} "
                  f"({path.stat().st_size / 1e6:.1f} MB, {fleet.hosts} host(s), "
                  f"{len(fleet.rows)} device(s))")
