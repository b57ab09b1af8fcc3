"""`iogauge import`: read the statistics people already have into SampleFrames."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl
import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from iogauge.cli.common import err, out, user_errors, warn
from iogauge.errors import IogaugeError
from iogauge.importers.base import ImportResult
from iogauge.importers.registry import FORMATS, expand, import_file
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame
from iogauge.store import Store


def _json_default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _write_json_rows(df: pl.DataFrame, *, keep: tuple[str, ...]) -> None:
    """One JSON object per row; null measures are left out (null = not measured)."""
    write = sys.stdout.write
    for row in df.iter_rows(named=True):
        obj: dict[str, Any] = {k: v for k, v in row.items() if v is not None or k in keep}
        write(json.dumps(obj, default=_json_default) + "\n")


def _summary(results: list[ImportResult]) -> Table:
    table = Table(title="imported", title_justify="left", header_style="bold")
    for col in ("file", "format", "rows", "devices", "from", "to", "skipped", "MB/s"):
        table.add_column(col, justify="right" if col in ("rows", "devices", "skipped", "MB/s")
                         else "left")
    for r in results:
        df = r.frame.df
        span = ("-", "-")
        if df.height:
            span = (str(df["ts"].min()), str(df["ts"].max()))
        fmt = r.format + ("" if r.detected else " (forced)")
        if r.compression:
            fmt += f", {r.compression}"
        rows = f"{df.height:,}"
        if len(r.waits):
            rows += f" + {len(r.waits):,} waits"
        speed = r.input_bytes / 1e6 / r.seconds if r.seconds > 0 else 0.0
        table.add_row(r.path, fmt, rows, str(df["device"].n_unique() if df.height else 0),
                      *span, str(r.skipped), f"{speed:,.0f}")
    return table


def import_(
    files: list[str] = typer.Argument(..., help="Files or glob patterns (quote globs: "
                                      "'logs/*.gz'). Compressed .gz/.xz/.bz2/.zst are read "
                                      "transparently."),
    fmt: str | None = typer.Option(None, "--format", "-f", help="Force a format instead of "
                                   f"sniffing: {', '.join(FORMATS)}."),
    tz: str | None = typer.Option(None, "--tz", help="Time zone of timestamps that carry no "
                                  "offset, e.g. Europe/Paris (default: the file's own zone if "
                                  "it states one, else UTC)."),
    lenient: bool = typer.Option(False, "--lenient", help="Skip lines that cannot be read "
                                 "(and report how many) instead of failing."),
    host: str | None = typer.Option(None, "--host", help="Host name for files that do not "
                                    "name one (default: the file name)."),
    start: str | None = typer.Option(None, "--start", help="When the collection started "
                                     "(ISO-8601, e.g. 2026-11-22T02:00), for outputs without "
                                     "time stamps (iostat without -t/-T) or with times of day "
                                     "only. No offset = the --tz zone."),
    interval: float | None = typer.Option(None, "--interval", min=0.001, help="Sampling "
                                          "interval in seconds the command was run with, for "
                                          "outputs that do not print it."),
    date_order: str | None = typer.Option(None, "--date-order", help="MDY, DMY or YMD for "
                                          "dates such as 01/02/2024 that the file cannot "
                                          "decide (default: inferred, with a note when it is "
                                          "a guess)."),
    as_json: bool = typer.Option(False, "--json", help="Write one JSON object per "
                                 "SampleFrame row to stdout instead of storing."),
    parquet: Path | None = typer.Option(None, "--parquet", help="Write the rows to this "
                                        "Parquet file instead of storing."),
    db: Path | None = typer.Option(None, "--db", help="Store file (default: "
                                   "$XDG_DATA_HOME/iogauge/iogauge.duckdb)."),
) -> None:
    """Import iostat, sar, sadf, sa, Solaris/AIX/HP-UX, perfmon, RMF, Oracle, fio or
    diskstats files into the store (or JSON / Parquet).

    The format is sniffed per file (--format forces one). Rows already in the store with the
    same source, host, device and time are replaced, so importing a file twice is harmless.
    All files are read before anything is written: one unreadable file stores nothing.

    Example: `iogauge import /var/log/sa/sa2* --db web1.duckdb`, or
    `iogauge import iostat.log.gz --tz Asia/Tokyo --json | jq .r_await_ms`.
    """
    if as_json and parquet is not None:
        err.print("[bold red]error:[/] --json and --parquet are exclusive")
        raise typer.Exit(2)
    with user_errors():
        zone = None
        if tz is not None:
            try:
                zone = ZoneInfo(tz)
            except (ZoneInfoNotFoundError, ValueError):
                raise IogaugeError(f"--tz {tz!r}: unknown time zone (use an IANA name such "
                                   "as UTC, Europe/Paris, America/New_York)") from None
        start_dt = None
        if start is not None:
            try:
                start_dt = datetime.fromisoformat(start.strip())
            except ValueError:
                raise IogaugeError(f"--start {start!r}: not an ISO-8601 time (e.g. "
                                   "2026-11-22T02:00 or 2026-11-22T02:00+09:00)") from None
        if date_order is not None and date_order.upper() not in ("MDY", "DMY", "YMD"):
            raise IogaugeError(f"--date-order {date_order!r}: use MDY, DMY or YMD")
        paths = expand(files)
        results: list[ImportResult] = []
        failures: list[str] = []
        with Progress(TextColumn("importing {task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total} files"), TimeElapsedColumn(),
                      console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("", total=len(paths))
            for p in paths:
                progress.update(task, description=p.name)
                try:
                    results.append(import_file(p, fmt=fmt, tz=zone, lenient=lenient,
                                               host=host, start=start_dt,
                                               interval_s=interval,
                                               date_order=date_order.upper()
                                               if date_order else None))
                except IogaugeError as exc:
                    failures.append(str(exc))
                progress.advance(task)
        if failures:
            for f in failures:
                err.print(f"[bold red]error:[/] {f}", markup=True, highlight=False)
            err.print(f"{len(failures)} of {len(paths)} file(s) failed; nothing was written")
            raise typer.Exit(2)
        for r in results:
            for n in r.notes:
                warn(f"{r.path}: {n}")
            if r.skipped:
                warn(f"{r.path}: skipped {r.skipped} unreadable line(s) (--lenient)")
                for ex in r.skipped_examples:
                    err.print(f"    {ex}", markup=False)
        frame = SampleFrame.concat([r.frame for r in results])
        waits = WaitEventFrame.concat([r.waits for r in results if len(r.waits)])
        if as_json:
            _write_json_rows(frame.df, keep=("parent",))
            _write_json_rows(waits.df, keep=())
            err.print(_summary(results))
            return
        if parquet is not None:
            frame.to_parquet(parquet)
            if len(waits):
                wpath = parquet.with_name(parquet.stem + ".waits.parquet")
                waits.df.write_parquet(wpath, compression="zstd")
                err.print(f"wait events written to {wpath}")
            out.print(_summary(results))
            out.print(f"{len(frame):,} rows written to {parquet}")
            return
        with Store.open(db) as store:
            store.append(frame, replace=True)
            store.append_waits(waits)
            path = store.path
        out.print(_summary(results))
        out.print(f"{len(frame):,} rows stored in {path}")
