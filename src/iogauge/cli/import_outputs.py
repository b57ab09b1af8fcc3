"""Where ``iogauge import`` puts the rows: the store, a Parquet file, or JSON on stdout.

Each output takes the SampleFrames of every file as they come (:meth:`consume`), hears when
a file begins and ends (the store replaces an earlier file's rows with a later one's), is
told to :meth:`discard` what it wrote when any file failed, and otherwise :meth:`finish`-es:
the rows put in place and the summary printed. Nothing is visible before ``finish``:

* :class:`StoreOutput` -- one transaction into a side file of the store, swapped in at the
  commit (:class:`~iogauge.store.importing.StoreImport`), so readers are never refused;
* :class:`ParquetOutput` -- a temporary file beside the target, renamed into place;
* :class:`JsonOutput` -- the rows held, since a failure must print nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iogauge.cli.common import err, out, warn
from iogauge.errors import IogaugeError

if TYPE_CHECKING:
    import polars as pl
    from rich.table import Table

    from iogauge.cli.import_cmd import _Read
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.model.waitevents import WaitEventFrame
    from iogauge.store.importing import StoreImport

#: ``M_MMAP_THRESHOLD`` of glibc's malloc.h, and the value set by :func:`_fix_mmap_threshold`.
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 1 << 20


def _fix_mmap_threshold() -> None:
    """Keep glibc from serving large blocks out of the heap later in the import.

    glibc raises its mmap threshold to the size of every mmapped block that is freed (up to
    32 MiB on 64-bit; mallopt(3), M_MMAP_THRESHOLD "dynamic mmap threshold"), so after the
    parser frees its first multi-MiB numpy buffers the next ones come from the heap, and the
    heap keeps what the process no longer uses. Setting the threshold turns that adjustment
    off: blocks of 1 MiB and more are mapped and unmapped, returned at once (peak RSS of
    ``import --db`` of the 100 MB benchmark log: benchmarks/README.md). Linux with glibc
    only; elsewhere (musl has no such threshold, other systems have other allocators)
    nothing is done.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this interpreter runs on
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)


def summary_table(reads: list[_Read], interval_s: float | None = None) -> Table:
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


def _all_waits(reads: list[_Read]) -> WaitEventFrame:
    from iogauge.model.waitevents import WaitEventFrame

    return WaitEventFrame.concat([r.waits for r in reads if len(r.waits)])


class ImportOutput(ABC):
    """One import's destination (see the module docstring). Use as a context manager."""

    def __enter__(self) -> ImportOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def begin_file(self) -> None:
        """The frames from now on come from the next file."""
        return  # a hook: most outputs need nothing here

    def end_file(self, path: Path) -> None:
        """``path``'s frames have all been consumed."""
        return  # a hook: most outputs need nothing here

    @abstractmethod
    def consume(self, frames: Iterator[SampleFrame]) -> None:
        """Take the frames of the file being read (or of the whole source)."""

    def discard(self) -> None:
        """A file failed: nothing of the import is to be written."""
        return  # a hook: most outputs need nothing here

    @abstractmethod
    def finish(self, reads: list[_Read], interval_s: float | None) -> None:
        """Write what the files ``reads`` gave, and say so."""

    @abstractmethod
    def finish_rows(self, what: str) -> None:
        """Write what was consumed from a source that is not files (``what`` describes
        it)."""


class StoreOutput(ImportOutput):
    """Into the store ``db`` (see :class:`~iogauge.store.importing.StoreImport`)."""

    def __init__(self, db: Path | None) -> None:
        # Only for the store, the one path near the 3x memory target: mapping and unmapping
        # every large block costs page faults elsewhere (--parquet ran slower with it).
        _fix_mmap_threshold()
        self._db = db
        self._stack = contextlib.ExitStack()
        self._target: StoreImport | None = None
        self._before = 0
        #: Per file: rows of earlier files of this import its rows replaced (same key).
        self.replaced: dict[Path, int] = {}

    def __enter__(self) -> StoreOutput:
        # DuckDB is loaded only for the store (--parquet and --json do without it)
        from iogauge.store.importing import StoreImport

        # Opened before the first file, so that an unusable --db is said before any reading;
        # rolled back unless committed.
        self._target = self._stack.enter_context(StoreImport(self._db, replace=True))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def target(self) -> StoreImport:
        if self._target is None:
            raise IogaugeError("the store output is not open")
        return self._target

    def begin_file(self) -> None:
        # A later file's rows replace an earlier one's with the same key, as importing the
        # files one after the other would.
        self.target.next_source()
        self._before = self.target.replaced_earlier

    def end_file(self, path: Path) -> None:
        gone = self.target.replaced_earlier - self._before
        if gone:
            self.replaced[path] = gone

    def consume(self, frames: Iterator[SampleFrame]) -> None:
        for frame in frames:
            self.target.add(frame)
            del frame  # not held while the next one is parsed

    def finish(self, reads: list[_Read], interval_s: float | None) -> None:
        from iogauge.store.duckdb_store import latest_waits

        waits, dropped = latest_waits([r.waits for r in reads])
        for p, count in self.replaced.items():
            warn(f"{p}: {count:,} row(s) replaced those of an earlier file of this import "
                 "with the same format, host, device and time (the data is stored once, as "
                 "importing the files one after the other would)")
        for r, gone in zip(reads, dropped, strict=True):
            if gone:
                warn(f"{r.path}: {gone:,} wait event row(s) replaced those of an earlier "
                     "file of this import with the same key")
        stored = self.target.commit(waits)
        out.print(summary_table(reads, interval_s))
        out.print(f"{stored:,} rows stored in {self.target.path}")

    def finish_rows(self, what: str) -> None:
        self.target.commit(None)
        err.print(f"{what} stored in {self.target.path}")


class ParquetOutput(ImportOutput):
    """Into the Parquet file ``path`` (zstd, statistics, as :meth:`SampleFrame.to_parquet`),
    streamed: the frames are parsed in a thread of their own while polars writes
    (:func:`iogauge.store.parquet.write_frames`), none held; wait events, if any, beside
    it in ``<stem>.waits.parquet``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")

    def consume(self, frames: Iterator[SampleFrame]) -> None:
        import polars as pl

        from iogauge.store.parquet import write_frames

        try:
            write_frames(frames, self._tmp)
        except (OSError, pl.exceptions.PolarsError) as exc:
            self.discard()
            raise IogaugeError(f"{self._tmp}: cannot write Parquet: {exc}") from exc
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        self._tmp.unlink(missing_ok=True)

    def finish(self, reads: list[_Read], interval_s: float | None) -> None:
        self._tmp.replace(self.path)
        waits = _all_waits(reads)
        if len(waits):
            wpath = self.path.with_name(self.path.stem + ".waits.parquet")
            waits.df.write_parquet(wpath, compression="zstd")
            err.print(f"wait events written to {wpath}")
        out.print(summary_table(reads, interval_s))
        out.print(f"{sum(r.rows for r in reads):,} rows written to {self.path}")

    def finish_rows(self, what: str) -> None:
        self._tmp.replace(self.path)
        err.print(f"{what} written to {self.path}")


class JsonOutput(ImportOutput):
    """One JSON object per row on stdout, samples then wait events; the summary on stderr.
    JSON needs every row before its first line is written (nothing is printed for a failed
    import), so the rows are held."""

    def __init__(self) -> None:
        self._kept: list[SampleFrame] = []

    def consume(self, frames: Iterator[SampleFrame]) -> None:
        self._kept = list(frames)

    def discard(self) -> None:
        self._kept = []

    def finish(self, reads: list[_Read], interval_s: float | None) -> None:
        frame = _concat(self._kept)
        self._kept = []
        _write_json_rows(frame.df, keep=("parent",))
        _write_json_rows(_all_waits(reads).df, keep=())
        err.print(summary_table(reads, interval_s))

    def finish_rows(self, what: str) -> None:
        frame = _concat(self._kept)
        self._kept = []
        _write_json_rows(frame.df, keep=("parent",))
        err.print(f"{what} written to stdout")


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
