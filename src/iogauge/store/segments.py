"""Append-only Parquet segments beside the DuckDB file: what live writers add.

``iogauge record`` and ``iogauge guarantee`` run for days while ``analyze``, ``report``,
``export`` and ``guarantee show`` read the same store. DuckDB lets one process hold a database
file for writing and no other process open it meanwhile, so live writers never open the
DuckDB file after start-up: every flush becomes one Parquet file in ``<db>.live/``, written
under a temporary name, fsynced and renamed into place (readers see a whole flush or none of
it; a ``kill -9`` leaves at most a stray temporary file). Readers (:class:`Store` opened
read-only) read the DuckDB tables and these files together. The choice was measured
(benchmarks/README.md, ``store_live.py``): a writer that opens the DuckDB file only to
commit refuses readers for tens to hundreds of ms a flush, and a reader holding the file
(a user's DuckDB session: for hours) blocks that writer past the loss bound.

Naming: ``<table>.<first>-<last>.parquet`` (12-digit flush numbers). A flush writes
``n-n``; compaction (a log-structured merge with fan-out :data:`FANOUT`) merges the newest
:data:`FANOUT` segments of one level into ``first-last`` of the next. A segment whose range
another segment covers is *superseded*: readers skip it, and the writer deletes it
:data:`GRACE_S` seconds later (a reader that listed it before the merge may still be reading
it). ``<table>.000000000000-000000000000.parquet`` has no rows: it
gives a glob in a plain DuckDB view something to match and the column types.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from iogauge.errors import StoreBusyError, StoreError
from iogauge.fsutil import fsync_dir, lock_with_pid

LIVE_SUFFIX = ".live"
#: Segments of one level merged into one of the next.
FANOUT = 16
#: Highest level compaction builds: 16**3 flushes (5.7 h at 5 s) per file. Level-3 files are
#: then kept as they are (about 4 a day), so a merge never reads more than 16**3 flushes.
MAX_LEVEL = 3
#: Seconds a superseded segment stays for readers that listed it before the merge.
GRACE_S = 60.0
_DIGITS = 12
_NAME_RE = re.compile(r"^(?P<table>[a-z_]+)\.(?P<first>\d{12})-(?P<last>\d{12})\.parquet$")


def live_dir(db: Path) -> Path:
    """The directory of live segments of the store file ``db``."""
    return db.with_name(db.name + LIVE_SUFFIX)


@dataclass(frozen=True, order=True)
class Segment:
    """One segment file: flushes ``first`` to ``last`` of its table."""

    first: int
    last: int
    path: Path

    @property
    def level(self) -> int:
        span = self.last - self.first + 1
        return int(math.log(span, FANOUT) + 1e-9) if span > 0 else 0


def _name(table: str, first: int, last: int) -> str:
    return f"{table}.{first:0{_DIGITS}d}-{last:0{_DIGITS}d}.parquet"


def all_segments(directory: Path, table: str) -> list[Segment]:
    """Every segment file of ``table`` (superseded ones too), oldest first."""
    out: list[Segment] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            m = _NAME_RE.match(entry.name)
            if m and m["table"] == table:
                out.append(Segment(int(m["first"]), int(m["last"]), Path(entry.path)))
    return sorted(out)


def _split(segs: list[Segment]) -> tuple[list[Segment], list[Segment]]:
    """(live, superseded) of ``segs``. In (first ascending, last descending) order a
    segment is covered exactly when an earlier one reaches as far: one pass."""
    live: list[Segment] = []
    superseded: list[Segment] = []
    reach = -1
    for s in sorted(segs, key=lambda s: (s.first, -s.last)):
        if s.last <= reach:
            superseded.append(s)
        else:
            live.append(s)
            reach = s.last
    return live, superseded


def live_segments(directory: Path, table: str) -> list[Segment]:
    """The segments a reader reads: none superseded, the empty one excluded, oldest first."""
    return _split([s for s in all_segments(directory, table) if s.last > 0])[0]


def glob_sql(directory: Path, table: str) -> str:
    """A glob for DuckDB matching every segment file of ``table`` (quoted for SQL)."""
    text = str(directory.resolve() / f"{table}.*.parquet")
    return "'" + text.replace("'", "''") + "'"


def _write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Run ``write(tmp)``, fsync ``tmp``, rename it to ``path``, fsync the directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_empty(directory: Path, table: str, empty: pl.DataFrame) -> None:
    """The empty segment of ``table`` (flush 0), unless it exists."""
    path = directory / _name(table, 0, 0)
    if not path.exists():
        _write_atomically(path, lambda p: empty.write_parquet(p, compression="zstd"))


class WriterLock:
    """An exclusive ``flock`` on ``<dir>/<family>.lock`` for a writer's whole life.

    The kernel drops it when the process dies (``kill -9`` included), so a crash never
    leaves a stale lock; the holder's PID is written in the file for the refusal message.
    """

    def __init__(self, directory: Path, family: str, db: Path, *, what: str | None = None
                 ) -> None:
        self.path = directory / f"{family}.lock"
        self._fd: int | None = None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        holder = lock_with_pid(fd)
        if holder is not None:
            raise StoreBusyError(
                f"{db}: another process (PID {holder}) is already writing {what or family} "
                f"to this store (lock {self.path}); one writer per store: stop it or use "
                "another --db. Readers (analyze, report, export, guarantee show) need no lock.")
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock


class SegmentLog:
    """The writer's side of one table's segments (the caller holds the :class:`WriterLock`)."""

    def __init__(self, directory: Path, table: str, empty: pl.DataFrame,
                 clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self.table = table
        self._clock = clock
        for stale in directory.glob(f".{table}.*.tmp"):  # a writer killed mid-write
            stale.unlink(missing_ok=True)
        write_empty(directory, table, empty)
        segs = all_segments(directory, table)
        self._next = max((s.last for s in segs), default=0) + 1
        #: Live segments, oldest first, kept in step with the directory by this writer.
        self._live = _split([s for s in segs if s.last > 0])[0]
        #: Superseded segments and when they may go (a crash's leftovers: after the grace).
        now = clock()
        self._doomed = [(s, now + GRACE_S) for s in _split(segs)[1]]

    def write(self, df: pl.DataFrame) -> Path:
        """One flush: a new segment with ``df``'s rows, then compaction if due."""
        path = self.directory / _name(self.table, self._next, self._next)
        try:
            # lz4 without statistics: a flush's file is small and soon merged (zstd), and
            # this costs 4.0 ms CPU a flush against 4.6 with zstd (benchmarks/README.md).
            _write_atomically(path, lambda p: df.write_parquet(p, compression="lz4",
                                                               statistics=False))
        except OSError as exc:
            raise StoreError(f"{path}: cannot write {len(df)} rows: "
                             f"{exc.strerror or exc}") from exc
        self._next += 1
        self._live.append(Segment(self._next - 1, self._next - 1, path))
        self.compact()
        return path

    def compact(self) -> None:
        """Merge the newest :data:`FANOUT` live segments while they share a level below
        :data:`MAX_LEVEL`, then delete superseded segments past their grace time."""
        while True:
            tail = self._live[-FANOUT:]
            if (len(tail) < FANOUT or tail[0].level >= MAX_LEVEL
                    or any(s.level != tail[0].level for s in tail)):
                break
            merged = self._merge(tail)
            del self._live[-FANOUT:]
            self._live.append(merged)
            until = self._clock() + GRACE_S
            self._doomed.extend((s, until) for s in tail)
        self._sweep()

    def _merge(self, segs: list[Segment]) -> Segment:
        out = self.directory / _name(self.table, segs[0].first, segs[-1].last)
        frames = [pl.scan_parquet(s.path) for s in segs]

        def write(p: Path) -> None:
            pl.concat(frames, how="diagonal_relaxed").sink_parquet(p, compression="zstd")

        try:
            _write_atomically(out, write)
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise StoreError(f"{out}: cannot merge {len(segs)} segments: {exc}") from exc
        return Segment(segs[0].first, segs[-1].last, out)

    def _sweep(self) -> None:
        """Delete the superseded segments whose grace time has passed."""
        if not self._doomed:
            return
        now = self._clock()
        keep = []
        for seg, until in self._doomed:
            if now < until:
                keep.append((seg, until))
            else:
                seg.path.unlink(missing_ok=True)
        self._doomed = keep
