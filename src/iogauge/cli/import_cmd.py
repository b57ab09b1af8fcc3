"""`iogauge import`: read the statistics people already have into SampleFrames.

Files are read one after the other. A format whose importer reads a stream piece by piece
(``iter_parse``, e.g. iostat text) is never held in memory whole: its SampleFrames go to the
output as they come, so with ``--parquet`` or into the store a log of any size imports in
memory bounded by the pieces in flight (see benchmarks/import_speed.py for the figures);
other formats are read whole (``parse``). Each SampleFrame is let go as soon as it is written,
before the next is parsed.

Nothing is written until every file has been read without error; the outputs (the store,
Parquet, JSON) are the classes of :mod:`iogauge.cli.import_outputs`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo

import typer

from iogauge.cli import prometheus_source as prom_opts
from iogauge.cli.common import err, user_errors, warn
from iogauge.cli.defaults import FORMAT_IDS as FORMATS
from iogauge.cli.import_outputs import ImportOutput, JsonOutput, ParquetOutput, StoreOutput
from iogauge.cli.inputs import FIRST_REPORT_OPTION, parse_start, parse_time, parse_zone
from iogauge.cli.prometheus_source import PromArgs
from iogauge.errors import IogaugeError
from iogauge.importers.first_report import FirstReport

if TYPE_CHECKING:
    # imported where they are used: polars, the importers' model and the DuckDB store cost
    # ~0.3 s, which every other command (and --version) would pay at start-up
    from iogauge.importers.base import Source
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.model.waitevents import WaitEventFrame


def _no_waits() -> WaitEventFrame:
    from iogauge.model.waitevents import WaitEventFrame

    return WaitEventFrame.empty()


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

    @classmethod
    def parse(cls, *, fmt: str | None, tz: str | None, lenient: bool, host: str | None,
              start: str | None, interval_s: float | None, date_order: str | None,
              first_report: FirstReport) -> _Options:
        """The command's options as given, checked and parsed."""
        zone = parse_zone(tz)
        start_dt = parse_start(start)
        if date_order is not None and date_order.upper() not in ("MDY", "DMY", "YMD"):
            raise IogaugeError(f"--date-order {date_order!r}: use MDY, DMY or YMD")
        return cls(fmt=fmt, tz=zone, lenient=lenient, host=host, start=start_dt,
                   interval_s=interval_s,
                   date_order=date_order.upper() if date_order else None,
                   first_report=first_report)


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
    """Sniff (or take ``--format``) and return the file's summary and its SampleFrames
    (:func:`iogauge.importers.registry.open_file`, as the library reads a file); the summary
    is complete once the frames are exhausted. Errors (unknown format, a bad line) raise from
    either call."""
    from iogauge.importers.registry import open_file

    opened = open_file(path, fmt=opts.fmt, tz=opts.tz, lenient=opts.lenient, host=opts.host,
                       start=opts.start, interval_s=opts.interval_s,
                       date_order=opts.date_order, first_report=opts.first_report)
    read = _Read(path=str(path), format=opened.format, detected=opened.detected,
                 compression=opened.compression)

    def frames() -> Iterator[SampleFrame]:
        t0 = time.perf_counter()
        for piece in opened.frames():
            read.count(piece)
            yield piece
            del piece  # let go before the next piece is parsed: the consumer has written it
        read.input_bytes = opened.input_bytes
        read.finish(opened.source, t0)

    return read, frames()


_FilesArgument = Annotated[list[str] | None, typer.Argument(
    help="Files or glob patterns (quote globs: 'logs/*.gz'). Compressed .gz/.xz/.bz2/.zst are "
    "read transparently.")]
_FormatOption = Annotated[str | None, typer.Option(
    "--format", "-f", help=f"Force a format instead of sniffing: {', '.join(FORMATS)}.")]
_TzOption = Annotated[str | None, typer.Option(
    "--tz", help="Time zone of timestamps that carry no offset, e.g. Europe/Paris (default: "
    "the file's own zone if it states one, else UTC).")]
_LenientOption = Annotated[bool, typer.Option(
    "--lenient", help="Skip lines that cannot be read (and report how many) instead of "
    "failing.")]
_HostOption = Annotated[str | None, typer.Option(
    "--host", help="Host name for files that do not name one (default: the file name).")]
_StartOption = Annotated[str | None, typer.Option(
    "--start", help="When the collection started (ISO-8601, e.g. 2026-11-22T02:00), for "
    "outputs without time stamps (iostat without -t/-T) or with times of day only. No "
    "offset = the --tz zone.")]
_IntervalOption = Annotated[float | None, typer.Option(
    "--interval", min=0.001, help="Sampling interval in seconds the command was run with, "
    "for outputs that do not print it.")]
_DateOrderOption = Annotated[str | None, typer.Option(
    "--date-order", help="MDY, DMY or YMD for dates such as 01/02/2024 that the file cannot "
    "decide (default: inferred, with a note when it is a guess).")]
_JsonOption = Annotated[bool, typer.Option(
    "--json", help="Write one JSON object per SampleFrame row to stdout instead of storing.")]
_ParquetOption = Annotated[Path | None, typer.Option(
    "--parquet", help="Write the rows to this Parquet file instead of storing (streamed: "
    "iostat logs of Linux, Solaris and AIX of any size in bounded memory).")]
_DbOption = Annotated[Path | None, typer.Option(
    "--db", help="Store file (default: $XDG_DATA_HOME/iogauge/iogauge.duckdb).")]
_FromOption = Annotated[str | None, typer.Option(
    "--from", help="With --prometheus: start of the span to read (ISO-8601; no offset = "
    "--tz).")]
_ToOption = Annotated[str | None, typer.Option(
    "--to", help="With --prometheus: end of the span to read.")]
_WindowOption = Annotated[float, typer.Option(
    "--window", min=1.0, help="With --prometheus: seconds per row (the window each increase "
    "is taken over).")]


def import_(
    files: _FilesArgument = None,
    fmt: _FormatOption = None,
    tz: _TzOption = None,
    lenient: _LenientOption = False,
    host: _HostOption = None,
    start: _StartOption = None,
    interval: _IntervalOption = None,
    date_order: _DateOrderOption = None,
    first_report: FirstReport = FIRST_REPORT_OPTION,
    as_json: _JsonOption = False,
    parquet: _ParquetOption = None,
    db: _DbOption = None,
    prometheus: str | None = prom_opts.PROMETHEUS_OPTION,
    match: str | None = prom_opts.MATCH_OPTION,
    host_label: str = prom_opts.HOST_LABEL_OPTION,
    header: list[str] = prom_opts.HEADER_OPTION,
    hosts_per_batch: int = prom_opts.BATCH_OPTION,
    span_from: _FromOption = None,
    span_to: _ToOption = None,
    window: _WindowOption = 60.0,
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
                               _output(as_json, parquet, db))
            return
        if not files:
            raise IogaugeError("give files to import, or --prometheus URL")
    from iogauge.importers.registry import expand

    with user_errors():
        opts = _Options.parse(fmt=fmt, tz=tz, lenient=lenient, host=host, start=start,
                              interval_s=interval, date_order=date_order,
                              first_report=first_report)
        paths = expand(files)
        _import_files(paths, opts, _output(as_json, parquet, db))


def _import_files(paths: list[Path], opts: _Options, output: ImportOutput) -> None:
    """All the files into ``output``, or nothing when one fails (each failure named)."""
    with output:
        reads, failures = _read_all(paths, opts, output)
        if failures:
            output.discard()
            for f in failures:
                err.print(f"[bold red]error:[/] {f}", markup=True, highlight=False)
            err.print(f"{len(failures)} of {len(paths)} file(s) failed; nothing was "
                      "written")
            raise typer.Exit(2)
        _warn_skipped(reads)
        output.finish(reads, opts.interval_s)


def _read_all(paths: list[Path], opts: _Options, output: ImportOutput
              ) -> tuple[list[_Read], list[str]]:
    """Every file's frames into ``output``, in order; returns the files read and the
    failures. After a failure the files left are still read (so that every failure is
    named) but their rows go nowhere."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    reads: list[_Read] = []
    failures: list[str] = []
    with Progress(TextColumn("importing {task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} files"),
                  TimeElapsedColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as progress:
        task = progress.add_task("", total=len(paths))

        def frames() -> Iterator[SampleFrame]:
            for p in paths:
                progress.update(task, description=p.name)
                try:
                    if not failures:
                        output.begin_file()
                    read, batches = _open(p, opts)
                    for frame in batches:
                        if not failures:
                            yield frame
                        del frame  # not held while the next one is parsed
                    reads.append(read)
                    if not failures:
                        output.end_file(p)
                except IogaugeError as exc:
                    failures.append(str(exc))
                progress.advance(task)

        output.consume(frames())
    return reads, failures


def _warn_skipped(reads: list[_Read]) -> None:
    """The importers' notes and the lines --lenient skipped, per file."""
    for r in reads:
        for n in r.notes:
            warn(f"{r.path}: {n}")
        if r.skipped:
            warn(f"{r.path}: skipped {r.skipped} unreadable line(s) (--lenient)")
            for ex in r.skipped_examples:
                err.print(f"    {ex}", markup=False)


def _output(as_json: bool, parquet: Path | None, db: Path | None) -> ImportOutput:
    return (JsonOutput() if as_json else ParquetOutput(parquet) if parquet is not None
            else StoreOutput(db))


def _import_prometheus(prom: PromArgs, start: datetime | None, end: datetime | None,
                       window_s: float, output: ImportOutput) -> None:
    """``import --prometheus``: the fleet's rows, batch by batch, to the store, Parquet or
    JSON (all or nothing, as for files)."""
    from iogauge.cli.prometheus_source import frames
    from iogauge.sources.prometheus import PromRead

    client, sel = prom.open(start, end, window_s)
    read = PromRead()
    with output:
        output.begin_file()
        output.consume(frames(client, sel, read))
        for n in read.notes:
            warn(n)
        output.finish_rows(f"{read.rows:,} rows of {len(read.hosts)} host(s) from "
                           f"{prom.described()} ({read.batches} batch(es))")
