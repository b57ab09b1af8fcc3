"""`iogauge iostat`: a live `iostat -x`, exact to sysstat 12.x, with JSON and 0.1 s intervals."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from iogauge.cli.common import err, out, paced, user_errors, warn

if TYPE_CHECKING:
    # imported when the command runs: the collector pulls in polars and numpy
    from iogauge.collector.linux import IntervalResult

#: iostat -x (sysstat 12.x) columns: title, SampleFrame column, decimals.
IOSTAT_X_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("r/s", "r_iops", 2), ("rkB/s", "r_kBps", 2), ("rrqm/s", "r_merged_ps", 2),
    ("%rrqm", "r_rqm_pct", 2), ("r_await", "r_await_ms", 2), ("rareq-sz", "r_areq_kB", 2),
    ("w/s", "w_iops", 2), ("wkB/s", "w_kBps", 2), ("wrqm/s", "w_merged_ps", 2),
    ("%wrqm", "w_rqm_pct", 2), ("w_await", "w_await_ms", 2), ("wareq-sz", "w_areq_kB", 2),
    ("d/s", "d_iops", 2), ("dkB/s", "d_kBps", 2), ("drqm/s", "d_merged_ps", 2),
    ("%drqm", "d_rqm_pct", 2), ("d_await", "d_await_ms", 2), ("dareq-sz", "d_areq_kB", 2),
    ("f/s", "f_iops", 2), ("f_await", "f_await_ms", 2), ("aqu-sz", "aqu_sz", 2),
    ("%util", "util_pct", 2),
)


def _fmt(v: float, decimals: int) -> str:
    return "-" if math.isnan(v) else f"{v:.{decimals}f}"


def render_table(res: IntervalResult) -> str:
    """Fixed-width text like iostat -x (greppable, no terminal width games)."""
    from iogauge.collector.linux import iso_utc

    name_w = max([len("Device"), *(len(d) for d in res.devices)])
    head = f"{'Device':<{name_w}}" + "".join(f" {t:>9}" for t, _c, _d in IOSTAT_X_COLUMNS)
    lines = [f"{iso_utc(res.ts_us)}  interval {_fmt(float(res.interval_s.max()), 3)} s"
             if len(res) else iso_utc(res.ts_us), head]
    for i, dev in enumerate(res.devices):
        if res.reset[i]:
            lines.append(f"{dev:<{name_w}} (counters reset: no values this interval)")
            continue
        cells = "".join(f" {_fmt(float(res.metrics[c][i]), d):>9}"
                        for _t, c, d in IOSTAT_X_COLUMNS)
        lines.append(f"{dev:<{name_w}}{cells}")
    return "\n".join(lines) + "\n"


def iostat(
    devices: list[str] = typer.Argument(None, help="Kernel device names (sda, nvme0n1, "
                                         "loop0). Default: every whole device that has "
                                         "done I/O since boot, as iostat does."),
    interval: float = typer.Option(1.0, "--interval", "-i", min=0.05,
                                   help="Seconds between reports; sub-second works (0.1)."),
    count: int = typer.Option(0, "--count", "-c", min=0,
                              help="Number of reports; 0 = until interrupted."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per device per "
                                 "interval on stdout, keys are SampleFrame column names."),
    partitions: bool = typer.Option(False, "--partitions", "-p",
                                    help="Also report partitions (iostat -p ALL)."),
    include_idle: bool = typer.Option(False, "--all", help="Also report devices that "
                                      "never did I/O (iostat hides them)."),
    since_boot: bool = typer.Option(False, "--since-boot", help="Start with iostat's "
                                    "since-boot report (marked since_boot=true)."),
    procfs_root: Path = typer.Option(Path("/proc"), hidden=True),
    sysfs_root: Path = typer.Option(Path("/sys"), hidden=True),
) -> None:
    """Live per-device statistics computed exactly as sysstat's `iostat -x`.

    Example: `iogauge iostat -i 0.5 -c 10 sda` or `iogauge iostat --json | jq .util_pct`.
    Unlike iostat the first report is a measured interval (like `iostat -y`); use
    --since-boot for iostat's first report.
    """
    from iogauge.collector.linux import LinuxCollector

    with user_errors():
        col = LinuxCollector(procfs_root, sysfs_root, devices=devices or None,
                             partitions=partitions, include_idle=include_idle)
        host = col.host
        for m in col.prime():
            warn(m)

        def emit(res: IntervalResult) -> None:
            for m in res.messages:
                warn(m)
            if as_json:
                for rec in res.to_records(host=host):
                    sys.stdout.write(json.dumps(rec) + "\n")
                sys.stdout.flush()
            else:
                out.print(render_table(res), markup=False)

        try:
            if since_boot:
                emit(col.since_boot())
            for _ in paced(interval, count or None):
                emit(col.sample())
        except KeyboardInterrupt:
            err.print("interrupted")
        except BrokenPipeError:
            # `iogauge iostat --json | head` closes the pipe: a normal way to stop.
            sys.stderr.close()
