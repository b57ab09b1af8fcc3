"""`iogauge diagnose`: sample this machine's disks live and summarise each one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from iogauge.cli.common import MEDIA_HELP, err, out, paced, user_errors, warn

if TYPE_CHECKING:
    from iogauge.collector.linux import IntervalResult, LinuxCollector


def diagnose(
    devices: list[str] = typer.Argument(None, help="Kernel device names; default: every "
                                         "whole device that has done I/O since boot."),
    duration: float = typer.Option(10.0, "--duration", "-d", min=0.05,
                                   help="Seconds to sample."),
    interval: float = typer.Option(1.0, "--interval", "-i", min=0.05,
                                   help="Seconds between samples (0.1 works)."),
    partitions: bool = typer.Option(False, "--partitions", "-p",
                                    help="Also summarise partitions."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    media: list[str] = typer.Option(None, "--media", help=MEDIA_HELP),
    html_out: Path | None = typer.Option(None, "--html", help="Also write the self-contained "
                                         "interactive HTML report (as `iogauge report`) to "
                                         "this file."),
    procfs_root: Path = typer.Option(Path("/proc"), hidden=True),
    sysfs_root: Path = typer.Option(Path("/sys"), hidden=True),
) -> None:
    """Sample the disks live, summarise each device and give the verdict.

    Example: `iogauge diagnose --duration 30 --html report.html`. Latency means are
    weighted by IOPS; %util is flagged where it is not a capacity measure (SSD, NVMe,
    dm/md, loop). Ends with `iogauge analyze` on what was sampled: verdict, capability,
    headroom and findings per device.
    """
    # imported here, not at start-up: the collector, the engine and the report pull in
    # polars, numpy, the catalog and every rule
    from iogauge.analysis.engine import AnalysisOptions, analyze
    from iogauge.analysis.summary import summarize
    from iogauge.cli.analyze_cmd import parse_media
    from iogauge.collector.linux import LinuxCollector, frame_from_results
    from iogauge.reporting.analysis_terminal import print_analysis
    from iogauge.reporting.html_report import render_report, write_report
    from iogauge.reporting.terminal import print_summary

    with user_errors():
        col = LinuxCollector(procfs_root, sysfs_root, devices=devices or None,
                             partitions=partitions)
        for m in col.prime():
            warn(m)
        results = _sample(col, max(1, round(duration / interval)), interval)
        host = col.host
        frame = frame_from_results(results, host=host)
        infos = col.device_info()
        title = f"iogauge diagnosis of {host}"
        # The verdict: the analysis engine on what was just sampled (windows as long as the
        # run when it is shorter than a minute, so a 10 s diagnosis is one window). Its
        # service-model decisions (from the samples) drive the summary's notes and kinds.
        result = analyze(frame, None, infos, AnalysisOptions(
            window_s=min(60.0, max(interval, duration)), media=parse_media(media)))
        summaries = summarize(frame, infos, {d.device: d.service for d in result.devices
                                             if d.service is not None})
        if as_json:
            doc = {"host": host, "duration_s": duration, "interval_s": interval,
                   "devices": [{**s.to_dict(), "info": infos[s.device].to_dict()
                                if s.device in infos else None} for s in summaries],
                   "analysis": result.to_dict()}
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            if not summaries:
                out.print("no device to summarise (none has done I/O since boot?)")
            print_summary(out, summaries, infos, title)
            if result.devices:
                out.print()
                print_analysis(out, result, f"verdict for {host}")
        if html_out is not None:
            p = write_report(html_out, render_report(frame, result, title=title))
            err.print(f"HTML report written to {p}")


def _sample(col: LinuxCollector, count: int, interval: float) -> list[IntervalResult]:
    """``count`` samples ``interval`` seconds apart, with a progress bar on a terminal;
    Ctrl-C keeps what was sampled so far."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    results: list[IntervalResult] = []
    with Progress(TextColumn("sampling"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total} samples"), TimeRemainingColumn(), console=err,
                  transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("sampling", total=count)
        try:
            for _ in paced(interval, count):
                res = col.sample()
                for m in res.messages:
                    warn(m)
                results.append(res)
                progress.advance(task)
        except KeyboardInterrupt:
            err.print("interrupted: summarising what was sampled")
    return results
