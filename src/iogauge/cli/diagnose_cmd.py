"""`iogauge diagnose`: sample this machine's disks live and summarise each one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from iogauge.analysis.summary import summarize
from iogauge.cli.common import err, out, paced, user_errors, warn
from iogauge.collector.linux import IntervalResult, LinuxCollector, frame_from_results
from iogauge.reporting.html_summary import render_html, write_html
from iogauge.reporting.terminal import print_summary


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
    html_out: Path | None = typer.Option(None, "--html", help="Also write a self-contained "
                                         "HTML report to this file."),
    procfs_root: Path = typer.Option(Path("/proc"), hidden=True),
    sysfs_root: Path = typer.Option(Path("/sys"), hidden=True),
) -> None:
    """Sample the disks live and summarise load, latency and busy per device.

    Example: `iogauge diagnose --duration 30 --html report.html`. Latency means are
    weighted by IOPS; %util is flagged where it is not a capacity measure (SSD, NVMe,
    dm/md, loop).
    """
    with user_errors():
        col = LinuxCollector(procfs_root, sysfs_root, devices=devices or None,
                             partitions=partitions)
        for m in col.prime():
            warn(m)
        count = max(1, round(duration / interval))
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
        host = col.host
        frame = frame_from_results(results, host=host)
        infos = col.device_info()
        summaries = summarize(frame, infos)
        title = f"iogauge diagnosis of {host}"
        if as_json:
            doc = {"host": host, "duration_s": duration, "interval_s": interval,
                   "devices": [{**s.to_dict(), "info": infos[s.device].to_dict()
                                if s.device in infos else None} for s in summaries]}
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            if not summaries:
                out.print("no device to summarise (none has done I/O since boot?)")
            print_summary(out, summaries, infos, title)
        if html_out is not None:
            p = write_html(html_out, render_html(frame, summaries, infos, host=host,
                                                 title=title))
            err.print(f"HTML report written to {p}")
