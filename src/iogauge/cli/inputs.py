"""Loading what a command analyses: files (any importable format) or the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from iogauge.errors import IogaugeError
from iogauge.importers.first_report import FirstReport

if TYPE_CHECKING:
    # Only for annotations: the commands import this module at start-up (parse_zone), and
    # these pull in polars and DuckDB; load_inputs imports them when it runs.
    import polars as pl

    from iogauge.model.device import DeviceInfo
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.model.waitevents import WaitEventFrame


@dataclass
class Inputs:
    """Samples, database waits and device metadata to analyse.

    Attributes:
        frame: the samples; waits: wait events (may be empty).
        infos: sysfs metadata by kernel device name (from the store's devices table, for
            data recorded live on one host); empty for imported files.
        notes: what the loading found worth saying (per-file notes, lines skipped).
        described: what was loaded, for titles ("3 files", "store /path").
    """

    frame: SampleFrame
    waits: WaitEventFrame
    infos: dict[str, DeviceInfo] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    described: str = ""


#: ``--first-report`` of the commands that import files (import, analyze, report).
#: Options that `analyze` and `report` share, with the same meaning and help.
FROM_OPTION = typer.Option(None, "--from", help="Only intervals ending at or after this time "
                           "(ISO-8601; no offset = --tz).")
TO_OPTION = typer.Option(None, "--to", help="Only intervals ending at or before this time.")
DEVICE_OPTION = typer.Option(None, "--device", "-d", help="Only these devices (repeatable; "
                             "globs such as 'sd*').")
TZ_OPTION = typer.Option(None, "--tz", help="Zone of --from/--to/--target times and of "
                         "imported files without one (default UTC).")
WINDOW_OPTION = typer.Option(None, "--window", min=1.0, help="Analysis window in seconds "
                             "(default 60, or the data's interval when longer).")

FIRST_REPORT_OPTION = typer.Option(
    FirstReport.AUTO, "--first-report", case_sensitive=False,
    help="How to read an iostat file's first report: 'since-boot' (iostat's average since "
    "boot, left out), 'measured' (an interval like the others: an excerpt), or 'auto' "
    "(since-boot where the file shows a whole capture and the figures are plausible as an "
    "average since boot).")


def parse_zone(tz: str | None) -> ZoneInfo | None:
    """``--tz`` text to a zone; None stays None."""
    if tz is None:
        return None
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise IogaugeError(f"--tz {tz!r}: unknown time zone (use an IANA name such as UTC, "
                           "Europe/Paris, America/New_York)") from None


def parse_start(text: str | None) -> datetime | None:
    """``--start`` of the import commands: ISO-8601, kept naive when it has no offset (the
    importer reads it in the file's zone or ``--tz``, as it reads the file's own times)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise IogaugeError(f"--start {text!r}: not an ISO-8601 time (e.g. 2026-11-22T02:00 "
                           "or 2026-11-22T02:00+09:00)") from None


def parse_time(text: str | None, option: str, zone: ZoneInfo | None) -> datetime | None:
    """``--from``/``--to`` ISO-8601 text; no offset = ``zone`` (else UTC)."""
    if text is None:
        return None
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise IogaugeError(f"{option} {text!r}: not an ISO-8601 time (e.g. 2026-11-22T02:00 "
                           "or 2026-11-22T02:00+09:00)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=zone or UTC)
    return dt.astimezone(UTC)


def _infos_from_store(df: pl.DataFrame) -> dict[str, DeviceInfo]:
    from iogauge.model.device import DeviceInfo

    if df.height == 0 or df["host"].n_unique() != 1:
        return {}
    fields = set(DeviceInfo.__dataclass_fields__)
    infos: dict[str, DeviceInfo] = {}
    for row in df.iter_rows(named=True):
        kw = {k: v for k, v in row.items() if k in fields}
        kw["slaves"] = tuple(kw.get("slaves") or ())
        infos[str(row["name"])] = DeviceInfo(**kw)
    return infos


def load_inputs(files: list[str] | None, db: Path | None, *, zone: ZoneInfo | None = None,
                lenient: bool = False, fmt: str | None = None,
                start: datetime | None = None, interval_s: float | None = None,
                first_report: FirstReport = FirstReport.AUTO) -> Inputs:
    """Import ``files`` (globs allowed), or read the store at ``db`` (default store when
    neither is given). Files and ``--db`` together are refused: say which one you mean.
    ``start``/``interval_s`` are for outputs without time stamps (as ``iogauge import``)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from iogauge.cli.common import err
    from iogauge.importers.registry import expand, import_file
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.model.waitevents import WaitEventFrame
    from iogauge.store import Store

    if files and db is not None:
        raise IogaugeError("give files or --db, not both")
    if not files:
        with Store.open(db, read_only=True) as store:
            frame = store.read()
            waits = store.read_waits()
            infos = _infos_from_store(store.read_devices())
            path = store.path
        if len(frame) == 0:
            raise IogaugeError(f"{path}: the store has no samples (record or import first)")
        return Inputs(frame, waits, infos, [], f"store {path}")
    paths = expand(files)
    frames: list[SampleFrame] = []
    waits_l: list[WaitEventFrame] = []
    notes: list[str] = []
    with Progress(TextColumn("reading {task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} files"), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("", total=len(paths))
        for p in paths:
            progress.update(task, description=p.name)
            r = import_file(p, fmt=fmt, tz=zone, lenient=lenient, start=start,
                            interval_s=interval_s, first_report=first_report)
            frames.append(r.frame)
            if len(r.waits):
                waits_l.append(r.waits)
            notes.extend(f"{r.path}: {n}" for n in r.notes)
            if r.skipped:
                notes.append(f"{r.path}: skipped {r.skipped} unreadable line(s) (--lenient)")
            progress.advance(task)
    frame = SampleFrame.concat(frames)
    waits = WaitEventFrame.concat(waits_l)
    what = paths[0].name if len(paths) == 1 else f"{len(paths)} files"
    return Inputs(frame, waits, {}, notes, what)
