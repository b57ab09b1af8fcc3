"""`iogauge exporter`: serve iogauge's judgement of each disk to Prometheus."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from iogauge.cli.common import err, user_errors, warn
from iogauge.cli.options import MediaOption, ProcfsRootOption, SysfsRootOption

if TYPE_CHECKING:
    from iogauge.exporter.service import Exporter, ExporterOptions


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event SIGTERM or SIGINT sets (the current judgement finishes first)."""
    stop = threading.Event()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


_DevicesArgument = Annotated[list[str] | None, typer.Argument(
    help="Kernel device names (sda, nvme0n1, loop3). Default: every whole device that has "
    "done I/O since boot, as iostat shows them.")]
_ListenOption = Annotated[str, typer.Option(
    "--listen", help="HOST:PORT of the /metrics endpoint ([::1]:9595 for IPv6).")]
_NoHttpOption = Annotated[bool, typer.Option(
    "--no-http", help="Serve no /metrics (with --textfile: node_exporter publishes the "
    "file).")]
_IntervalOption = Annotated[float, typer.Option(
    "--interval", "-i", min=0.1, help="Seconds between samples of /proc/diskstats.")]
_JudgeEveryOption = Annotated[float, typer.Option(
    "--judge-every", min=0.0, help="Seconds between judgements of the window (each analyses "
    "all of it: ~0.3 s of CPU for 15 min of 5 s samples of 9 devices); 0 = after every "
    "sample.")]
_WindowOption = Annotated[float, typer.Option(
    "--window", "-w", min=1.0, help="Seconds of samples each judgement covers (a sliding "
    "window; default 15 min).")]
_TextfileOption = Annotated[Path | None, typer.Option(
    "--textfile", help="Directory of node_exporter's textfile collector: iogauge.prom is "
    "replaced there atomically after every judgement.", show_default=False)]
_DbOption = Annotated[Path | None, typer.Option(
    "--db", help="Judge what `iogauge record --db` writes to this store (this host's rows; "
    "its live segments are read while it records) instead of sampling /proc/diskstats "
    "here.", show_default=False)]
_GuaranteeDbOption = Annotated[Path | None, typer.Option(
    "--guarantee-db", help="Decision store of `iogauge guarantee` (its --db): its latest "
    "floor, A's IOPS and B's limits are published while it runs. Default: the default "
    "store, when it exists.", show_default=False)]
_DurationOption = Annotated[float, typer.Option(
    "--duration", "-d", min=0.0, help="Stop after this many seconds; 0 = until SIGINT "
    "(Ctrl-C) or SIGTERM.")]


def exporter(
    devices: _DevicesArgument = None,
    listen: _ListenOption = "127.0.0.1:9595",
    no_http: _NoHttpOption = False,
    interval: _IntervalOption = 5.0,
    judge_every: _JudgeEveryOption = 15.0,
    window: _WindowOption = 900.0,
    textfile: _TextfileOption = None,
    db: _DbOption = None,
    guarantee_db: _GuaranteeDbOption = None,
    media: MediaOption = None,
    duration: _DurationOption = 0.0,
    procfs_root: ProcfsRootOption = Path("/proc"),
    sysfs_root: SysfsRootOption = Path("/sys"),
) -> None:
    """Publish each disk's verdict, service model and headroom as Prometheus metrics.

    Example: `iogauge exporter --listen 127.0.0.1:9595 --interval 5 --window 900 sda`
    or `iogauge exporter --no-http --textfile /var/lib/prometheus/node-exporter`.

    node_exporter publishes the counters; this publishes the judgement
    (iogauge_device_verdict, iogauge_device_service_model,
    iogauge_device_max_iops, iogauge_device_headroom_iops and _ratio,
    iogauge_device_busy_seconds_per_io, iogauge_device_knee_util_ratio, and
    the guarantee's floor and limits while `iogauge guarantee` runs). It samples
    /proc/diskstats itself and judges a sliding window of its own samples every
    --judge-every seconds, off the scrape path: a scrape only formats the latest
    judgement. Metric names follow the exporter rules (base units, ratios 0-1,
    no timestamps); see docs/fleet.md for the scrape config, rules and
    dashboard. SIGINT or SIGTERM stops it.
    """
    # imported here, not at start-up: the exporter pulls in prometheus_client, and each
    # judgement the collector, polars and the analysis engine
    from iogauge.cli.analyze_cmd import parse_media
    from iogauge.exporter.service import ExporterOptions, make_exporter, store_exporter

    with user_errors():
        _check_outputs(no_http, textfile)
        opts = ExporterOptions(interval_s=interval, window_s=window, judge_every_s=judge_every,
                               media=parse_media(media),
                               guarantee_db=_guarantee_db(guarantee_db), textfile_dir=textfile)
        if db is not None:
            exp = store_exporter(db, devices or None, opts, say=_say)
        else:
            exp = make_exporter(devices or None, opts, procfs_root=procfs_root,
                                sysfs_root=sysfs_root, say=_say)
        what = ", ".join(devices) if devices else "active devices"
        source = f"reading {db}" if db is not None else f"sampling {what}"
        _serve(exp, None if no_http else listen, textfile, source, opts, duration)


def _check_outputs(no_http: bool, textfile: Path | None) -> None:
    """Something to publish on, and a --textfile that is a directory."""
    if no_http and textfile is None:
        raise typer.BadParameter("nothing to publish: give --textfile with --no-http",
                                 param_hint="--no-http")
    if textfile is not None and not textfile.is_dir():
        raise typer.BadParameter(f"{textfile}: not a directory", param_hint="--textfile")


def _guarantee_db(given: Path | None) -> Path:
    """--guarantee-db, else the default store."""
    if given is not None:
        return given
    from iogauge.store.duckdb_store import default_db_path

    return default_db_path()


def _say(line: str) -> None:
    if line.startswith("warning: "):
        warn(line.removeprefix("warning: "))
    else:
        err.print(line, markup=False)


def _serve(exp: Exporter, listen: str | None, textfile: Path | None, source: str,
           opts: ExporterOptions, duration: float) -> None:
    """Run the exporter until a signal or ``duration``, serving /metrics on ``listen``
    (None: --no-http), then stop the HTTP server."""
    from iogauge.exporter.service import serve_http

    server = None
    if listen is not None:
        server, _thread = serve_http(listen, lambda: exp.current)
    where = [] if listen is None else [f"http://{listen}/metrics"]
    if textfile is not None:
        where.append(str(textfile / "iogauge.prom"))
    err.print(f"exporter: {source} every {opts.interval_s:g} s, judging the last "
              f"{opts.window_s:g} s every {max(opts.judge_every_s, opts.interval_s):g} s; "
              f"publishing on {' and '.join(where)}; Ctrl-C or SIGTERM stops", markup=False)
    try:
        with _stop_on_signals() as stop:
            steps = exp.run(stop, duration or None)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    err.print(f"exporter stopped after {steps} sample(s) and {exp.judgements} "
              "judgement(s)", markup=False)
