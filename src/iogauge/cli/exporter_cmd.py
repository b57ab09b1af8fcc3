"""`iogauge exporter`: serve iogauge's judgement of each disk to Prometheus."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import typer

from iogauge.cli.common import MEDIA_HELP, err, user_errors, warn


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


def exporter(
    devices: list[str] = typer.Argument(None, help="Kernel device names (sda, nvme0n1, "
                                         "loop3). Default: every whole device that has done "
                                         "I/O since boot, as iostat shows them."),
    listen: str = typer.Option("127.0.0.1:9595", "--listen", help="HOST:PORT of the /metrics "
                               "endpoint ([::1]:9595 for IPv6)."),
    no_http: bool = typer.Option(False, "--no-http", help="Serve no /metrics (with "
                                 "--textfile: node_exporter publishes the file)."),
    interval: float = typer.Option(5.0, "--interval", "-i", min=0.1,
                                   help="Seconds between samples of /proc/diskstats."),
    judge_every: float = typer.Option(15.0, "--judge-every", min=0.0,
                                      help="Seconds between judgements of the window (each "
                                      "analyses all of it: ~0.3 s of CPU for 15 min of 5 s "
                                      "samples of 9 devices); 0 = after every sample."),
    window: float = typer.Option(900.0, "--window", "-w", min=1.0,
                                 help="Seconds of samples each judgement covers (a sliding "
                                 "window; default 15 min)."),
    textfile: Path | None = typer.Option(None, "--textfile", help="Directory of "
                                         "node_exporter's textfile collector: iogauge.prom is "
                                         "replaced there atomically after every judgement.",
                                         show_default=False),
    db: Path | None = typer.Option(None, "--db", help="Judge what `iogauge record --db` "
                                   "writes to this store (this host's rows; its live "
                                   "segments are read while it records) instead of "
                                   "sampling /proc/diskstats here.", show_default=False),
    guarantee_db: Path | None = typer.Option(None, "--guarantee-db", help="Decision store of "
                                             "`iogauge guarantee` (its --db): its latest "
                                             "floor, A's IOPS and B's limits are published "
                                             "while it runs. Default: the default store, "
                                             "when it exists.", show_default=False),
    media: list[str] = typer.Option(None, "--media", help=MEDIA_HELP),
    duration: float = typer.Option(0.0, "--duration", "-d", min=0.0,
                                   help="Stop after this many seconds; 0 = until SIGINT "
                                   "(Ctrl-C) or SIGTERM."),
    procfs_root: Path = typer.Option(Path("/proc"), hidden=True),
    sysfs_root: Path = typer.Option(Path("/sys"), hidden=True),
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
    from iogauge.exporter.service import (
        ExporterOptions,
        make_exporter,
        serve_http,
        store_exporter,
    )

    with user_errors():
        if no_http and textfile is None:
            raise typer.BadParameter("nothing to publish: give --textfile with --no-http",
                                     param_hint="--no-http")
        if textfile is not None and not textfile.is_dir():
            raise typer.BadParameter(f"{textfile}: not a directory", param_hint="--textfile")
        gdb = guarantee_db
        if gdb is None:
            from iogauge.store.duckdb_store import default_db_path

            gdb = default_db_path()
        opts = ExporterOptions(interval_s=interval, window_s=window, judge_every_s=judge_every,
                               media=parse_media(media),
                               guarantee_db=gdb, textfile_dir=textfile)

        def say(line: str) -> None:
            if line.startswith("warning: "):
                warn(line.removeprefix("warning: "))
            else:
                err.print(line, markup=False)

        if db is not None:
            exp = store_exporter(db, devices or None, opts, say=say)
        else:
            exp = make_exporter(devices or None, opts, procfs_root=procfs_root,
                                sysfs_root=sysfs_root, say=say)
        server = None
        if not no_http:
            server, _thread = serve_http(listen, lambda: exp.current)
        where = [] if no_http else [f"http://{listen}/metrics"]
        if textfile is not None:
            where.append(str(textfile / "iogauge.prom"))
        what = ", ".join(devices) if devices else "active devices"
        source = f"reading {db}" if db is not None else f"sampling {what}"
        err.print(f"exporter: {source} every {interval:g} s, judging the last {window:g} s "
                  f"every {max(judge_every, interval):g} s; publishing on "
                  f"{' and '.join(where)}; Ctrl-C or SIGTERM stops", markup=False)
        try:
            with _stop_on_signals() as stop:
                steps = exp.run(stop, duration or None)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
        err.print(f"exporter stopped after {steps} sample(s) and {exp.judgements} "
                  "judgement(s)", markup=False)
