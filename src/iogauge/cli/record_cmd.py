"""`iogauge record` (live statistics into the DuckDB store) and `iogauge export` (to Parquet)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from iogauge.cli.common import err, user_errors, warn
from iogauge.cli.defaults import RECORD_MAX_FLUSH_S as MAX_FLUSH_S

_DB_HELP = ("DuckDB file of the store. Default: $XDG_DATA_HOME/iogauge/iogauge.duckdb "
            "(~/.local/share/iogauge/iogauge.duckdb without XDG_DATA_HOME).")


def record(
    devices: list[str] = typer.Argument(None, help="Kernel device names (sda, nvme0n1, "
                                         "dm-0). Default: every whole device that has done "
                                         "I/O since boot, as iostat does."),
    db: Path | None = typer.Option(None, "--db", help=_DB_HELP, show_default=False),
    interval: float = typer.Option(1.0, "--interval", "-i", min=0.1,
                                   help="Seconds between samples (0.1 or more)."),
    duration: float = typer.Option(0.0, "--duration", "-d", min=0.0,
                                   help="Stop after this many seconds; 0 = until SIGINT "
                                   "(Ctrl-C) or SIGTERM."),
    flush: float = typer.Option(MAX_FLUSH_S, "--flush", min=0.1, max=MAX_FLUSH_S,
                                help="Commit buffered samples every this many seconds (at "
                                "most 5): the most a crash or kill -9 can lose."),
    partitions: bool = typer.Option(False, "--partitions", "-p",
                                    help="Also record partitions (iostat -p ALL)."),
    include_idle: bool = typer.Option(False, "--all", help="Also record devices that never "
                                      "did I/O (iostat hides them)."),
    procfs_root: Path = typer.Option(Path("/proc"), hidden=True),
    sysfs_root: Path = typer.Option(Path("/sys"), hidden=True),
) -> None:
    """Record live per-device statistics (iostat -x metrics) into the store.

    Example: `iogauge record --interval 1 --duration 3600 sda nvme0n1`
    or `iogauge record --db /var/lib/iogauge/night.duckdb` (stop: Ctrl-C).

    Samples are committed every --flush seconds as one segment file in
    <db>.live/, so a crash or `kill -9` loses at most that much and the store
    always opens again. analyze, report and export --db read the store while
    it records, up to the last flush; a second record on the same store is
    refused. SIGINT and SIGTERM finish the current sample, commit, and exit 0
    with a one-line summary on stderr. Device metadata (model, rotational,
    scheduler, ...) is stored too. Collector warnings (a device appeared or
    vanished, a malformed line) go to stderr and recording continues.
    """
    # imported here, not at start-up: the collector and the store pull in polars, numpy and
    # DuckDB
    from iogauge.collector.linux import LinuxCollector
    from iogauge.collector.recorder import Recorder
    from iogauge.store.live import LiveStore

    with user_errors():
        collector = LinuxCollector(procfs_root, sysfs_root, devices=devices or None,
                                   partitions=partitions, include_idle=include_idle)
        store = LiveStore.open(db)
        if store.note:
            err.print(f"note: {store.note}", markup=False)
        what = ", ".join(devices) if devices else "active devices"

        def started() -> None:
            err.print(f"recording {escape(what)} every {interval:g} s into "
                      f"{escape(str(store.path))} (committed every {flush:g} s); "
                      "Ctrl-C or SIGTERM stops", markup=True)

        recorder = Recorder(collector, store, interval_s=interval, flush_s=flush,
                            duration_s=duration or None, on_message=warn, on_start=started)
        try:
            summary = recorder.run()
        finally:
            if recorder.summary.stopped_by == "error":
                err.print(recorder.summary.line(), markup=False)
        err.print(summary.line(), markup=False)


def export(
    db: Path | None = typer.Option(None, "--db", help=_DB_HELP, show_default=False),
    parquet: Path = typer.Option(..., "--parquet", help="Parquet file to write (replaced "
                                 "atomically; zstd). Reads back with "
                                 "SampleFrame.read_parquet or any Parquet reader."),
    device: list[str] = typer.Option(None, "--device", help="Only this device; repeat for "
                                     "several."),
    host: str | None = typer.Option(None, "--host", help="Only rows of this host."),
    start: str | None = typer.Option(None, "--from", help="First interval end to include, "
                                     "ISO-8601 (2024-05-01T02:00:00Z; no offset = UTC)."),
    end: str | None = typer.Option(None, "--to", help="Last interval end to include, "
                                   "ISO-8601."),
) -> None:
    """Export stored samples to Parquet with the SampleFrame schema.

    Example: `iogauge export --db night.duckdb --parquet sda.parquet
    --device sda --from 2024-05-01T02:00Z --to 2024-05-01T03:00Z`

    The store is opened read-only. DuckDB refuses while `iogauge record`
    holds the file, so stop the recording first (the error names it).
    """
    from iogauge.store.duckdb_store import Store, default_db_path, parse_time

    try:
        lo, hi = parse_time(start), parse_time(end)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from/--to") from None
    if lo is not None and hi is not None and lo > hi:
        raise typer.BadParameter(f"--from {lo.isoformat()} is after --to {hi.isoformat()}",
                                 param_hint="--from/--to")
    with user_errors():
        path = default_db_path() if db is None else db
        with Store.open(path, read_only=True) as store:
            rows = store.export_parquet(parquet, device=device or None, start=lo, end=hi,
                                        host=host)
        if rows == 0:
            warn("no rows matched; the Parquet file holds the schema only")
        err.print(f"exported {rows} rows from {store.path} to {parquet}", markup=False)
