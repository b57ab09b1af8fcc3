"""`iogauge import`: read the statistics people already have into SampleFrames.

Files are read one after the other. A format whose importer reads a stream piece by piece
(``iter_parse``, e.g. iostat text) is never held in memory whole: its SampleFrames go to the
output as they come, so with ``--parquet`` or into the store a log of any size imports in
memory bounded by the pieces in flight (see benchmarks/import_speed.py for the figures);
other formats are read whole (``parse``). Each SampleFrame is let go as soon as it is written,
before the next is parsed.

Nothing is written until every file has been read without error: Parquet goes to a temporary
file in the target's directory, renamed into place after the last file (and deleted on
failure); the store receives the rows batch by batch in ONE transaction, committed after the
last file and rolled back on a failure (:class:`~iogauge.store.duckdb_store.StoreImport`; a
store that did not exist yet appears only at the commit), with what importing the files one
after the other would leave: a later file's rows replace an earlier file's with the same
key (``StoreImport.next_source``; the same for wait events: ``latest_waits``). JSON needs
every row before its first line is written (nothing is printed for a failed import), so
``--json`` holds them.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import typer

from iogauge.cli import prometheus_source as prom_opts
from iogauge.cli.common import err, out, user_errors, warn
from iogauge.cli.defaults import FORMAT_IDS as FORMATS
from iogauge.cli.inputs import FIRST_REPORT_OPTION, parse_start, parse_time, parse_zone
from iogauge.cli.prometheus_source import PromArgs
from iogauge.errors import InputFormatError, IogaugeError
from iogauge.importers.first_report import FirstReport
from iogauge.importers.io import (
    compression_of,
    is_read_error,
    open_binary,
    read_bytes,
    read_head,
)

if TYPE_CHECKING:
    # imported where they are used: polars, the importers' model and the DuckDB store cost
    # ~0.3 s, which every other command (and --version) would pay at start-up
    import polars as pl
    from rich.table import Table

    from iogauge.importers.base import Source
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.model.waitevents import WaitEventFrame

#: ``M_MMAP_THRESHOLD`` of glibc's malloc.h, and the value set by :func:`_fix_mmap_threshold`.
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 1 << 20


def _fix_mmap_threshold() -> None:
    """Keep glibc from serving large blocks out of the heap later in the import.

    glibc raises its mmap threshold to the size of every mmapped block that is freed (up to
    32 MiB on 64-bit; mallopt(3), M_MMAP_THRESHOLD "dynamic mmap threshold"), so after the
    parser frees its first multi-MiB numpy buffers the next ones come from the heap, and the
    heap keeps what the process no longer uses. Setting the threshold turns that adjustment
    off: blocks of 1 MiB and more are mapped and unmapped, returned at once. Measured on
    benchmarks/import_speed.py's 100 MB iostat log, peak RSS of ``import --db``: 261-263 MiB
    with it, 275-278 MiB without (four runs each). Linux with glibc only; elsewhere (musl has
    no such threshold, other systems have other allocators) nothing is done.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this interpreter runs on
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)


def _json_default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _no_waits() -> WaitEventFrame:
    from iogauge.model.waitevents import WaitEventFrame

    return WaitEventFrame.empty()


def _write_json_rows(df: pl.DataFrame, *, keep: tuple[str, ...]) -> None:
    """One JSON object per row; null measures are left out (null = not measured)."""
    write = sys.stdout.write
    for row in df.iter_rows(named=True):
        obj: dict[str, Any] = {k: v for k, v in row.items() if v is not None or k in keep}
        write(json.dumps(obj, default=_json_default) + "\n")


@dataclass
class _Options:
    """How every file of one ``iogauge import`` is read (the command's options)."""

    fmt: str | None
    tz: ZoneInfo | None
    lenient: bool
    host: str | None
    start: datetime | None
    interval_s: float | None
    date_order: str | None
    first_report: FirstReport = FirstReport.AUTO


@dataclass
class _Read:
    """One input file: what the summary shows, counted while its SampleFrames go by.

    Attributes:
        path: the file.
        format: the format id used; ``detected``: sniffed (False: ``--format``).
        compression: 'gzip', 'xz', 'bzip2', 'zstd' or None.
        rows, devices, first, last: rows, distinct devices and time span read.
        waits: database wait events (Statspack/AWR).
        skipped, skipped_examples, notes: from the file's :class:`Source`.
        seconds: wall time from opening the file to its last row.
        input_bytes: decompressed size.
    """

    path: str
    format: str
    detected: bool
    compression: str | None
    rows: int = 0
    devices: set[str] = field(default_factory=set)
    first: datetime | None = None
    last: datetime | None = None
    waits: WaitEventFrame = field(default_factory=_no_waits)
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    input_bytes: int = 0

    def count(self, frame: SampleFrame) -> None:
        df = frame.df
        if df.height == 0:
            return
        self.rows += df.height
        self.devices.update(df["device"].unique().to_list())
        lo, hi = df["ts"].min(), df["ts"].max()
        if isinstance(lo, datetime) and (self.first is None or lo < self.first):
            self.first = lo
        if isinstance(hi, datetime) and (self.last is None or hi > self.last):
            self.last = hi

    def finish(self, source: Source, t0: float) -> None:
        self.seconds = time.perf_counter() - t0
        from iogauge.model.waitevents import WaitEventFrame

        self.waits = WaitEventFrame.concat(source.waits)
        self.skipped = source.skipped
        self.skipped_examples = source.skipped_examples
        self.notes = source.notes


def _open(path: Path, opts: _Options) -> tuple[_Read, Iterator[SampleFrame]]:
    """Sniff (or take ``--format``) and return the file's summary and its SampleFrames.

    The frames come from the importer's ``iter_parse`` when it has one (the file is read a
    piece at a time), else from ``parse`` of the whole file; the summary is complete once
    the frames are exhausted. Errors (unknown format, a bad line) raise from either call.
    """
    from iogauge.importers.base import Source
    from iogauge.importers.registry import detect, importer_guard, load

    name = opts.fmt or detect(read_head(path), str(path))
    module = load(name)
    source = Source(path=str(path), tz=opts.tz, lenient=opts.lenient, host=opts.host,
                    start=opts.start, interval_s=opts.interval_s, date_order=opts.date_order,
                    first_report=opts.first_report)
    with path.open("rb") as fh:
        compression = compression_of(fh.read(8))
    read = _Read(path=str(path), format=name, detected=opts.fmt is None,
                 compression=compression)
    iter_parse: Callable[..., Iterator[SampleFrame]] | None = getattr(module, "iter_parse",
                                                                        None)

    def frames() -> Iterator[SampleFrame]:
        t0 = time.perf_counter()
        if iter_parse is None:
            data = [read_bytes(path)]
            read.input_bytes = len(data[0])
            with importer_guard(path, name):
                frame = module.parse(data.pop(), source)  # the parser holds the only reference
            read.count(frame)
            yield frame
            del frame
        else:
            stream, _ = open_binary(path)
            try:
                with importer_guard(path, name):
                    pieces = iter_parse(stream, source)
                while True:
                    with importer_guard(path, name):
                        piece = next(pieces, None)
                    if piece is None:
                        break
                    read.count(piece)
                    yield piece
                    # Let go before the next piece is parsed: the consumer has written it.
                    del piece
                read.input_bytes = stream.tell()
            except Exception as exc:
                if not is_read_error(exc):
                    raise
                raise InputFormatError(path, None, f"cannot read ({compression or 'plain'}):"
                                       f" {exc}") from exc
            finally:
                stream.close()
        read.finish(source, t0)

    return read, frames()


def _concat(frames: list[SampleFrame]) -> SampleFrame:
    """The rows of ``frames`` as one SampleFrame, columns that are null throughout a frame
    left out of the copy (they come back as constant nulls, not as allocated columns: a
    SampleFrame has some 40 measure columns and a format fills a dozen)."""
    import polars as pl

    from iogauge.model.sampleframe import SampleFrame

    if not frames:
        return SampleFrame.empty()
    slim = [f.df.select([c for c in f.df.columns if f.df[c].null_count() < f.df.height])
            for f in frames if f.df.height]
    if not slim:
        return SampleFrame.empty()
    return SampleFrame(pl.concat(slim, how="diagonal"), validate=False)


def _write_parquet(frames: Iterator[SampleFrame], path: Path) -> None:
    """Stream ``frames`` into the Parquet file ``path`` (zstd, statistics, as
    :meth:`SampleFrame.to_parquet`) without holding them, parsed in a thread of their own
    while polars writes (:func:`iogauge.store.parquet.write_frames`)."""
    import polars as pl

    from iogauge.store.parquet import write_frames

    try:
        write_frames(frames, path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise IogaugeError(f"{path}: cannot write Parquet: {exc}") from exc


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _summary(reads: list[_Read], interval_s: float | None = None) -> Table:
    """The per-file table; reports without time stamps are named by number (``interval_s``:
    ``--interval``, else the nominal spacing of the relative time line)."""
    from rich.table import Table

    from iogauge.model.timeline import NO_INTERVAL, NOMINAL_INTERVAL_S, RelativeTimeline

    table = Table(title="imported", title_justify="left", header_style="bold")
    for col in ("file", "format", "rows", "devices", "from", "to", "skipped", "MB/s"):
        table.add_column(col, justify="right" if col in ("rows", "devices", "skipped", "MB/s")
                         else "left")
    for r in reads:
        span = (str(r.first), str(r.last)) if r.rows else ("-", "-")
        line = RelativeTimeline.of(r.last, interval_s or NOMINAL_INTERVAL_S)
        if line is not None and r.first is not None and r.last is not None:
            span = (f"report {line.report(r.first)}",
                    f"report {line.report(r.last)} ({NO_INTERVAL})")
        fmt = r.format + ("" if r.detected else " (forced)")
        if r.compression:
            fmt += f", {r.compression}"
        rows = f"{r.rows:,}"
        if len(r.waits):
            rows += f" + {len(r.waits):,} waits"
        speed = r.input_bytes / 1e6 / r.seconds if r.seconds > 0 else 0.0
        table.add_row(r.path, fmt, rows, str(len(r.devices)), *span, str(r.skipped),
                      f"{speed:,.0f}")
    return table


def import_(
    files: list[str] = typer.Argument(None, help="Files or glob patterns (quote globs: "
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
    first_report: FirstReport = FIRST_REPORT_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Write one JSON object per "
                                 "SampleFrame row to stdout instead of storing."),
    parquet: Path | None = typer.Option(None, "--parquet", help="Write the rows to this "
                                        "Parquet file instead of storing (streamed: iostat "
                                        "logs of Linux, Solaris and AIX of any size in "
                                        "bounded memory)."),
    db: Path | None = typer.Option(None, "--db", help="Store file (default: "
                                   "$XDG_DATA_HOME/iogauge/iogauge.duckdb)."),
    prometheus: str | None = prom_opts.PROMETHEUS_OPTION,
    match: str | None = prom_opts.MATCH_OPTION,
    host_label: str = prom_opts.HOST_LABEL_OPTION,
    header: list[str] = prom_opts.HEADER_OPTION,
    hosts_per_batch: int = prom_opts.BATCH_OPTION,
    span_from: str | None = typer.Option(None, "--from", help="With --prometheus: start of "
                                         "the span to read (ISO-8601; no offset = --tz)."),
    span_to: str | None = typer.Option(None, "--to", help="With --prometheus: end of the "
                                       "span to read."),
    window: float = typer.Option(60.0, "--window", min=1.0, help="With --prometheus: "
                                 "seconds per row (the window each increase is taken "
                                 "over)."),
) -> None:
    """Import iostat, sar, sadf, sa, Solaris/AIX/HP-UX, perfmon, RMF, Oracle, fio or
    diskstats files into the store (or JSON / Parquet).

    Binary sysstat sa files (saDD) of sysstat 9.1.6 to 12.7.x (formats 0x2171, 0x2173,
    0x2175), written on little- or big-endian machines (x86_64, arm64, ppc64, s390x), are
    read natively, without sadf, on any OS \\[sysstat]; --format sa-sadf reads one with this
    machine's sadf instead (for a format newer than 12.7.x).

    The format is sniffed per file (--format forces one). Rows already in the store with the
    same source, host, device and time are replaced, so importing a file twice is harmless,
    and within one call a later file's rows replace an earlier file's in the same way (a log
    and its compressed copy are stored once, with a warning). All files are read before
    anything is written: one unreadable file stores nothing.

    With --prometheus URL --from T --to T, node_exporter's disk counters are read from a
    Prometheus or VictoriaMetrics query API instead of files (one row per host, device and
    --window).

    Example: `iogauge import /var/log/sa/sa2* --db web1.duckdb`, or
    `iogauge import iostat.log.gz --tz Asia/Tokyo --json | jq .r_await_ms`.
    """
    if as_json and parquet is not None:
        err.print("[bold red]error:[/] --json and --parquet are exclusive")
        raise typer.Exit(2)
    with user_errors():
        prom = PromArgs.of(prometheus, match, host_label, header, hosts_per_batch,
                           files=files)
        if prom is not None:
            zone = parse_zone(tz)
            _import_prometheus(prom, parse_time(span_from, "--from", zone),
                               parse_time(span_to, "--to", zone), window,
                               as_json=as_json, parquet=parquet, db=db)
            return
        if not files:
            raise IogaugeError("give files to import, or --prometheus URL")
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from iogauge.importers.registry import expand
    from iogauge.model.waitevents import WaitEventFrame

    with user_errors():
        zone = parse_zone(tz)
        start_dt = parse_start(start)
        if date_order is not None and date_order.upper() not in ("MDY", "DMY", "YMD"):
            raise IogaugeError(f"--date-order {date_order!r}: use MDY, DMY or YMD")
        opts = _Options(fmt=fmt, tz=zone, lenient=lenient, host=host, start=start_dt,
                        interval_s=interval,
                        date_order=date_order.upper() if date_order else None,
                        first_report=first_report)
        paths = expand(files)
        reads: list[_Read] = []
        failures: list[str] = []
        #: Per file read into the store: rows of earlier files its rows replaced (same key).
        replaced: dict[Path, int] = {}
        kept: list[SampleFrame] = []
        if parquet is None and not as_json:
            # Only for the store, the one path near the 3x memory target: mapping and
            # unmapping every large block costs page faults (100 MB log, --parquet: 3.0 s
            # with it, 2.4-2.7 s without, peak ~2.4-2.5x the log either way).
            _fix_mmap_threshold()
        with contextlib.ExitStack() as stack:
            # The store is opened before the first file (a locked or unusable --db is said
            # before any reading); its transaction is rolled back if the stack closes
            # without the commit below.
            target = None
            if parquet is None and not as_json:
                # DuckDB is loaded only for the store (--parquet and --json do without it)
                from iogauge.store.duckdb_store import StoreImport

                target = stack.enter_context(StoreImport(db, replace=True))
            with Progress(TextColumn("importing {task.description}"), BarColumn(),
                          TextColumn("{task.completed}/{task.total} files"),
                          TimeElapsedColumn(), console=err, transient=True,
                          disable=not err.is_terminal) as progress:
                task = progress.add_task("", total=len(paths))

                def frames() -> Iterator[SampleFrame]:
                    """Every file's frames in order; after a failure the files left are still
                    read (so that every failure is named) but their rows go nowhere."""
                    for p in paths:
                        progress.update(task, description=p.name)
                        try:
                            before = 0
                            if target is not None and not failures:
                                # A later file's rows replace an earlier one's with the same
                                # key, as importing the files one after the other would.
                                target.next_source()
                                before = target.replaced_earlier
                            read, batches = _open(p, opts)
                            for frame in batches:
                                if not failures:
                                    yield frame
                                del frame  # not held while the next one is parsed
                            reads.append(read)
                            if target is not None and target.replaced_earlier > before:
                                replaced[p] = target.replaced_earlier - before
                        except IogaugeError as exc:
                            failures.append(str(exc))
                        progress.advance(task)

                tmp = _temporary(parquet) if parquet is not None else None
                try:
                    if tmp is not None:
                        _write_parquet(frames(), tmp)
                    elif target is not None:
                        for frame in frames():
                            target.add(frame)
                            del frame
                    else:
                        kept = list(frames())
                except BaseException:
                    if tmp is not None:
                        tmp.unlink(missing_ok=True)
                    raise
            if failures:
                if tmp is not None:
                    tmp.unlink(missing_ok=True)
                for f in failures:
                    err.print(f"[bold red]error:[/] {f}", markup=True, highlight=False)
                err.print(f"{len(failures)} of {len(paths)} file(s) failed; nothing was "
                          "written")
                raise typer.Exit(2)
            for r in reads:
                for n in r.notes:
                    warn(f"{r.path}: {n}")
                if r.skipped:
                    warn(f"{r.path}: skipped {r.skipped} unreadable line(s) (--lenient)")
                    for ex in r.skipped_examples:
                        err.print(f"    {ex}", markup=False)
            rows = sum(r.rows for r in reads)
            if target is not None:
                from iogauge.store.duckdb_store import latest_waits

                waits, dropped = latest_waits([r.waits for r in reads])
                for p, count in replaced.items():
                    warn(f"{p}: {count:,} row(s) replaced those of an earlier file of this "
                         "import with the same format, host, device and time (the data is "
                         "stored once, as importing the files one after the other would)")
                for r, gone in zip(reads, dropped, strict=True):
                    if gone:
                        warn(f"{r.path}: {gone:,} wait event row(s) replaced those of an "
                             "earlier file of this import with the same key")
            else:
                waits = WaitEventFrame.concat([r.waits for r in reads if len(r.waits)])
            if parquet is not None and tmp is not None:
                tmp.replace(parquet)
                if len(waits):
                    wpath = parquet.with_name(parquet.stem + ".waits.parquet")
                    waits.df.write_parquet(wpath, compression="zstd")
                    err.print(f"wait events written to {wpath}")
                out.print(_summary(reads, opts.interval_s))
                out.print(f"{rows:,} rows written to {parquet}")
                return
            if target is None:  # --json
                frame = _concat(kept)
                del kept[:]
                _write_json_rows(frame.df, keep=("parent",))
                _write_json_rows(waits.df, keep=())
                err.print(_summary(reads, opts.interval_s))
                return
            stored = target.commit(waits)
        out.print(_summary(reads, opts.interval_s))
        out.print(f"{stored:,} rows stored in {target.path}")


def _import_prometheus(prom: PromArgs, start: datetime | None, end: datetime | None,
                       window_s: float, *, as_json: bool, parquet: Path | None,
                       db: Path | None) -> None:
    """``import --prometheus``: the fleet's rows, batch by batch, to the store, Parquet or
    JSON (all or nothing, as for files)."""
    from iogauge.cli.prometheus_source import frames
    from iogauge.sources.prometheus import PromRead

    client, sel = prom.open(start, end, window_s)
    read = PromRead()
    batches = frames(client, sel, read)
    if as_json:
        for frame in batches:
            _write_json_rows(frame.df, keep=("parent",))
        where = "stdout"
    elif parquet is not None:
        tmp = _temporary(parquet)
        try:
            _write_parquet(batches, tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(parquet)
        where = str(parquet)
    else:
        from iogauge.store.duckdb_store import StoreImport

        with StoreImport(db, replace=True) as target:
            for frame in batches:
                target.add(frame)
            target.commit(None)
            where = str(target.path)
    for n in read.notes:
        warn(n)
    err.print(f"{read.rows:,} rows of {len(read.hosts)} host(s) from {prom.described()} "
              f"written to {where} ({read.batches} batch(es))")
