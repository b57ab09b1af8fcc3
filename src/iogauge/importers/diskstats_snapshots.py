"""Sequences of ``/proc/diskstats`` snapshots, as pt-diskstats, pt-stalk and shell loops save
them, derived exactly as the live collector derives them.

Accepted layouts (each snapshot is the kernel's text, every line ``major minor name``
followed by 4, 11, 15 or 17+ counters -- see :mod:`iogauge.collector.diskstats`):

* ``TS <epoch seconds>[ <date text>]`` *before* each snapshot: pt-diskstats
  ``--save-samples`` and pt-stalk (``TS 1327510177.628000 2012-01-25T10:49:37``);
* snapshots each *followed* by a ``TS <epoch>`` line, the file ending with one: the older
  aspersa/pt-diskstats format ("<contents of /proc/diskstats> TS <timestamp> ... must end
  with a TS line");
* a bare ``<epoch seconds>`` line instead of ``TS ...``: ``date +%s.%N; cat /proc/diskstats``
  in a loop.

Which one: a file whose first non-blank line is a timestamp has timestamps before the
snapshots; otherwise after. Snapshot times are read to the microsecond from the text
(not through a float).

Derivation: every (device, snapshot) line is paired with the same device's line in its
previous snapshot, all pairs at once (sorted by device, then time; shifted), and the
counters go through :func:`~iogauge.collector.derive.counter_deltas` and
:func:`~iogauge.collector.derive.derive_metrics` -- the live collector's own functions -- so
an imported capture gives the numbers ``iogauge iostat`` would have printed at the same
instants, to the last bit. The same rules as the collector's apply:

* the first snapshot only sets the baseline (a device that appears later is baselined
  where it appears);
* a counter that goes backwards, a device that disappears and comes back, or whose
  major:minor changes, gives a ``reset`` row with every measure null -- never a negative
  rate; a millisecond field that wrapped at 2**32 is unwrapped;
* a line that cannot be read is a bad line; with ``--lenient`` it is skipped and the
  device's next line is derived against its last good one, over the longer interval.

Every device is imported -- partitions, idle devices, loop and ram devices included (iostat
hides some by default; analyses can filter). Kinds and parents come from the names (no
sysfs of the captured host): ``sda1`` is a partition of ``sda``, ``dm-0`` is ``dm``,
``md0`` is ``md``.

A capture is read a piece of :data:`CHUNK_BYTES` at a time (:func:`iter_parse`), cut where
a snapshot ends; each device's last line is carried to the next piece, so every line is
derived against the same line as in one read of the whole file, and memory does not grow
with the capture: 100 MB captures (7 devices, a second apart) import to Parquet at
0.24-0.25 GB peak, where one read of the whole took 1.42-1.73 GB. A last line without its
line break is not read (a note says so): cut short, a counter would give a wrong rate or
pass for a 4-field partition line.

A file with a single snapshot is a since-boot report: the counters are totals since boot
and the uptime is not in the file, so rates, %util and aqu-sz are null and only the ratios
that need no time are given (await, request sizes, merge shares, the in-flight gauge);
``since_boot`` is true, ``interval_s`` is a nominal 1 s (noted), and ``ts`` is its ``TS``
line, else ``--start``, else the file's modification time (noted).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.collector.derive import (
    DERIVED_COLUMNS,
    Deltas,
    counter_deltas,
    derive_metrics,
)
from iogauge.collector.diskstats import (
    N_FIELDS,
    OLD_PARTITION_MAP,
    parse_line,
    partial_layout_note,
    used_counters,
)
from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.errors import InputFormatError
from iogauge.importers._lines import LineCarry, line_frames
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.model.sampleframe import TS_DTYPE, SampleFrame

NAME = "diskstats"
DESCRIPTION = ("/proc/diskstats snapshot sequences with TS <epoch> lines (pt-diskstats, "
               "pt-stalk, date +%s.%N loops), derived as the live collector does")
EXPECTS = ("/proc/diskstats lines 'major minor name counters...' (4, 11, 15 or 17+ "
           "counters), snapshots separated by 'TS <epoch seconds>' lines")

#: A timestamp line: ``TS <epoch>[ anything]`` or a bare ``<epoch>``.
_TS_RE = r"^\s*(?:TS\s+)?(?P<sec>\d+)(?:\.(?P<frac>\d+))?(?:\s+.*)?$"
_TS_BARE_RE = r"^\s*\d+(?:\.\d+)?\s*$"
_TS_TAGGED_RE = r"^\s*TS\s+\d+(?:\.\d+)?(?:\s.*)?$"
#: A diskstats line: two numbers, a name, then only unsigned integers.
_STAT_RE = r"^\s*\d+\s+\d+\s+\S+(?:\s+\d+)+\s*$"
_STAT_LINE = re.compile(_STAT_RE)
_TS_LINE = re.compile(f"{_TS_BARE_RE}|{_TS_TAGGED_RE}")
_I64_MAX = (1 << 63) - 1
#: Placeholder length of a lone snapshot's "interval" (its rates are null anyway).
LONE_SNAPSHOT_INTERVAL_S = 1.0

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


def sniff(head: str) -> bool:
    """The first few meaningful lines are diskstats lines, optionally with TS lines."""
    stats = 0
    for line in head.splitlines()[:50]:
        if not line.strip():
            continue
        if _TS_LINE.match(line):
            continue
        if not _STAT_LINE.match(line):
            return False
        if used_counters(len(line.split()) - 3) is None:
            return False
        stats += 1
        if stats >= 3:
            return True
    return stats > 0


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


# ---- reading -----------------------------------------------------------------------------


def _lines(data: bytes | list[bytes]) -> pl.DataFrame:
    """Every line as a row: ``line`` (text, null if blank) and ``line_no`` (1-based). A
    one-item list hands the bytes over (they are let go once read)."""
    if isinstance(data, list):
        data = data.pop()
    if not data:
        return pl.DataFrame({"line_no": [], "line": []},
                            schema={"line_no": pl.UInt32(), "line": pl.String()})
    df = pl.read_csv(data, has_header=False, separator="\x1f", quote_char=None,
                     new_columns=["line"], schema={"line": pl.String()})
    return df.with_row_index("line_no", offset=1)


def _microseconds(sec: pl.Expr, frac: pl.Expr) -> pl.Expr:
    """Epoch seconds text (and fraction digits, up to nanoseconds) to integer microseconds,
    rounded to the nearest as the collector rounds its clock; exact, no float."""
    nanos = frac.fill_null("").str.slice(0, 9).str.pad_end(9, "0").cast(pl.Int64)
    return sec.cast(pl.Int64) * 1_000_000 + (nanos + 500) // 1000


def _bad(source: Source, line_no: int, line: str, path: str) -> None:
    """Refuse a line with the collector parser's own reason."""
    try:
        parse_line(line, path=path, line_no=line_no)
    except InputFormatError as exc:
        source.bad_line(line_no, exc.reason)
        return
    source.bad_line(line_no, "not a diskstats line")


#: Bytes read per piece by :func:`iter_parse`. The working set is some 50x a piece (tokens,
#: 17 counters and their deltas per line, 30 metrics per row): at 100 MB, 2 MiB pieces took
#: 4.7-4.9 s and 0.25 GB, 3 MiB 4.3 s and 0.29-0.30 GB, 4 MiB 4.1 s and 0.31 GB.
CHUNK_BYTES = 2 << 20


@dataclass
class _Carry(LineCarry):
    """What the pieces of a capture hand on (:func:`iter_parse`), besides the lines of the
    snapshot a piece ends inside, read again with the next piece.

    Attributes:
        ts_first: timestamps come before their snapshot (None: not known yet).
        ts_lines: timestamp lines read so far (the next snapshot numbers follow on).
        last_ts: the last timestamp kept (µs), which the next must pass.
        snaps, snap_ts: number and time of every snapshot with a usable timestamp, in order
            (a device's gap is checked against them).
        base: each device's last line so far (the baseline its next line is derived from).
        unreadable: (snapshot, device) of refused lines (the device keeps its state).
        known: every device name read; old: those printed in the 4-field layout.
        orphans, backwards, reappeared, wrapped: counts for the notes at the end.
        pieces: snapshots read in the pieces so far (>1 in one piece: rows derived).
    """

    ts_first: bool | None = None
    ts_lines: int = 0
    last_ts: int | None = None
    snaps: list[int] = field(default_factory=list)
    snap_ts: list[int] = field(default_factory=list)
    base: _Base | None = None
    unreadable: set[tuple[int, str]] = field(default_factory=set)
    known: set[str] = field(default_factory=set)
    old: set[str] = field(default_factory=set)
    orphans: int = 0
    backwards: int = 0
    reappeared: int = 0
    wrapped: int = 0
    #: the only snapshot with lines so far, and the timestamps read with it (a lone
    #: snapshot if the file ends with them)
    first: tuple[pl.DataFrame, pl.DataFrame] | None = None


@dataclass
class _Base:
    """Each device's last line: name, major, minor, position among the snapshots, counters
    (17), present (17), 4-field layout."""

    names: list[str]
    major: I64
    minor: I64
    pos: I64
    values: I64
    present: B
    old: B


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, a piece of about ``chunk_bytes`` at a time, in file order.

    A piece is cut where a snapshot ends: before its last ``TS`` line when the timestamps
    lead their snapshots, after it when they close them; the lines after the cut are read
    again with the next piece. Each device's last line is carried to the next piece, so
    every line is derived against the same line as in one read of the whole file."""
    carry = _Carry()
    for piece, last, cut in line_frames(stream, chunk_bytes, carry, source.path, _lines):
        lines = piece
        del piece
        if cut:  # a last line without its line break may be cut short: a counter cut to
            # fewer digits would give a wrong rate, so it is not read
            partial = lines.filter(pl.col("line_no") == carry.lines_read)["line"]
            if partial.len() and partial[0] is not None and partial[0].strip():
                source.note(f"diskstats: the file ends inside line {carry.lines_read} (no "
                            "line break after it): that line was not read")
            lines = lines.filter(pl.col("line_no") != carry.lines_read)
        text = lines.filter(pl.col("line").str.strip_chars().str.len_bytes() > 0)
        if carry.ts_first is None and text.height:
            carry.ts_first = bool(_TS_LINE.match(str(text["line"][0])))
        if not last:
            need = 2 if carry.ts_first else 1
            ts_at = _last_ts_lines(text, need)
            if carry.ts_first is None or ts_at.len() < need:
                carry.lines = lines  # no snapshot ends in this piece: read on
                continue
            # (ts first: the last TS starts a snapshot that may go on; else the last TS
            # closes one)
            at = int(ts_at[-1]) if carry.ts_first else int(ts_at[-1]) + 1
            carry.lines = lines.filter(pl.col("line_no") >= at)
            lines = lines.filter(pl.col("line_no") < at)
        frame = _piece(lines, source, carry, final=last)
        del lines
        if frame is not None and len(frame):
            yield frame
    if carry.first is not None:  # one snapshot in the whole file
        yield _lone_snapshot(carry.first[0], int(carry.first[0]["ts_us"][0]), source)
    elif carry.base is None and carry.ts_lines == 0:
        return  # (_piece said it all: a lone snapshot without a TS line, or an error)
    elif not carry.snaps:
        raise InputFormatError(source.path, None, "no diskstats line under a timestamp")
    _notes(carry, source)


def _last_ts_lines(text: pl.DataFrame, need: int) -> pl.Series:
    """Line numbers of the timestamp lines among the last of ``text`` (at least ``need`` of
    them if the piece has so many): looked for in its tail first, so that the lines
    :func:`_piece` classifies anyway are not all matched twice."""
    ts = pl.col("line").str.contains(_TS_BARE_RE) | pl.col("line").str.contains(_TS_TAGGED_RE)
    found = text.tail(4096).filter(ts)["line_no"]
    if found.len() >= need or text.height <= 4096:
        return found
    return text.filter(ts)["line_no"]


def parse(data: bytes, source: Source) -> SampleFrame:
    """Derive every device-interval of the capture (see the module documentation). Files
    longer than :data:`CHUNK_BYTES` are read a piece at a time (:func:`iter_parse`)."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def _notes(carry: _Carry, source: Source) -> None:
    """The notes on the whole capture (counts over every piece)."""
    if carry.orphans:
        source.note(f"diskstats: {carry.orphans} snapshot(s) without a usable timestamp line "
                    "(cut off before its closing TS line, or its TS refused) ignored")
    if len(carry.snaps) > 1:
        source.note("diskstats: the first snapshot is the baseline (a device's first line "
                    "gives no row); partitions and idle devices are all imported")
    if carry.backwards:
        source.note(f"diskstats: {carry.backwards} interval(s) where counters went backwards "
                    "(device re-created or statistics reset): reset rows, no values")
    if carry.reappeared:
        source.note(f"diskstats: {carry.reappeared} device(s) came back or changed "
                    "major:minor: reset rows, no values")
    if carry.wrapped:
        source.note(f"diskstats: {carry.wrapped} interval(s) with a millisecond counter that "
                    "wrapped at 2**32 (unwrapped)")


def _piece(lines: pl.DataFrame, source: Source, carry: _Carry, *, final: bool
           ) -> SampleFrame | None:
    """The rows of the snapshots in ``lines`` (whole snapshots, or the end of the file)."""
    df = lines
    ts_match = pl.col("line").str.contains(_TS_BARE_RE) | pl.col("line").str.contains(
        _TS_TAGGED_RE)
    stat_match = pl.col("line").str.contains(_STAT_RE)
    df = df.filter(pl.col("line").str.strip_chars().str.len_bytes() > 0).with_columns(
        ts_match.alias("is_ts"), (stat_match & ~ts_match).alias("is_stat"))
    if df.height == 0:
        if final and not carry.seen_text:
            raise InputFormatError(source.path, None, "empty file")
        if final and carry.ts_lines == 0 and carry.base is None and carry.first is None:
            raise InputFormatError(source.path, None, "no whole line in the file (its only "
                                   "line is cut short)")
        return None
    # Snapshot numbers: k = TS lines up to and including this one. Timestamps before their
    # snapshot: a stat line belongs to TS k; after: to TS k + 1.
    df = df.with_columns((pl.col("is_ts").cast(pl.Int64).cum_sum() + carry.ts_lines)
                         .alias("k"))
    df = df.with_columns(pl.when(pl.col("is_ts") | pl.lit(bool(carry.ts_first)))
                         .then(pl.col("k")).otherwise(pl.col("k") + 1).alias("snap"))
    carry.ts_lines += int(df["is_ts"].sum())
    # Lines that are neither: refused; their device (if named) keeps its previous state.
    for line_no, snap, line in df.filter(~pl.col("is_ts") & ~pl.col("is_stat")).select(
            "line_no", "snap", "line").iter_rows():
        _bad(source, int(line_no), str(line), source.path)
        parts = str(line).split()
        if len(parts) >= 3:
            carry.unreadable.add((int(snap), parts[2]))
    ts_rows = df.filter(pl.col("is_ts")).select(
        "snap", "line_no",
        _microseconds(pl.col("line").str.extract(_TS_RE, 1),
                      pl.col("line").str.extract(_TS_RE, 2)).alias("ts_us"))
    stats = _stat_table(df.filter(pl.col("is_stat")), source, carry.unreadable)
    del df
    if ts_rows.height == 0 and carry.ts_lines == 0:
        # (no TS line in the whole file: it was read as one piece)
        return _lone_snapshot(stats, None, source)
    ts_rows = _increasing(ts_rows, source, carry.last_ts)
    if ts_rows.height:
        carry.last_ts = int(ts_rows["ts_us"][-1])
    stats = stats.join(ts_rows.select("snap", "ts_us"), on="snap", how="left")
    orphans = stats.filter(pl.col("ts_us").is_null())
    if orphans.height:
        carry.orphans += orphans["snap"].n_unique()
        stats = stats.filter(pl.col("ts_us").is_not_null())
    if stats.height == 0:  # (snapshots without lines still count: their devices vanished)
        if carry.first is not None:
            carry.first = (carry.first[0], pl.concat([carry.first[1], ts_rows]))
        elif carry.base is not None:
            carry.snaps += ts_rows["snap"].cast(pl.Int64).to_list()
            carry.snap_ts += ts_rows["ts_us"].cast(pl.Int64).to_list()
        return None
    # the capture's first snapshot waits: alone in the file, it is a since-boot report
    if carry.first is not None:
        stats = pl.concat([carry.first[0], stats], how="vertical_relaxed")
        ts_rows = pl.concat([carry.first[1], ts_rows], how="vertical_relaxed")
        carry.first = None
    if carry.base is None and stats["snap"].n_unique() == 1:
        carry.first = (stats, ts_rows)
        return None
    return _derive(stats, ts_rows, carry, source)


def _increasing(ts_rows: pl.DataFrame, source: Source, last_us: int | None
                ) -> pl.DataFrame:
    """Refuse (lenient: drop) timestamps that do not advance (past ``last_us``, the last
    one kept before these)."""
    if last_us is not None:  # (a row before the others, never refused: its diff is null)
        ts_rows = pl.concat([pl.DataFrame({"snap": [-1], "line_no": [0], "ts_us": [last_us]},
                                          schema=ts_rows.schema), ts_rows])
    while True:
        back = ts_rows.filter(pl.col("ts_us").diff() <= 0)
        if back.height == 0:
            return ts_rows.filter(pl.col("snap") >= 0)
        for line_no in back["line_no"].to_list():
            source.bad_line(int(line_no), "timestamp is not after the previous one")
        ts_rows = ts_rows.filter(~pl.col("line_no").is_in(back["line_no"].implode()))


#: Lines split into tokens at a time: the token lists take some 15x the text (16 MB of
#: lines took 250 MB more RSS split at once; the fields taken from them are small).
_SPLIT_ROWS = 20_000


def _fields(lines: pl.DataFrame) -> pl.DataFrame:
    """``line_no``, ``snap``, ``line``, ``major``, ``minor``, ``name``, ``n`` (counters on
    the line) and the 17 counters ``f0``… of diskstats lines."""
    # Split once (materialised: every field below reads the same token list); runs of
    # spaces (the kernel pads major and minor: "%4d %7d %s") give empty tokens, dropped.
    lines = lines.with_columns(
        pl.col("line").str.replace_all("\t", " ", literal=True).str.strip_chars()
        .str.split(" ").list.eval(pl.element().filter(pl.element().str.len_bytes() > 0))
        .alias("tok"))
    tok = pl.col("tok")
    n = tok.list.len() - 3
    counters = [tok.list.get(3 + j, null_on_oob=True).cast(pl.UInt64, strict=False)
                .alias(f"f{j}") for j in range(N_FIELDS)]
    return lines.select(
        "line_no", "snap", "line",
        tok.list.get(0).cast(pl.Int64, strict=False).alias("major"),
        tok.list.get(1).cast(pl.Int64, strict=False).alias("minor"),
        tok.list.get(2).alias("name"),
        n.cast(pl.Int64).alias("n"),
        *counters)


def _stat_table(lines: pl.DataFrame, source: Source,
                unreadable: set[tuple[int, str]]) -> pl.DataFrame:
    """Split the diskstats lines into ``major minor name`` and the 17 counters (vectorised);
    lines the collector's parser would refuse are bad lines (added to ``unreadable``)."""
    t = pl.concat([_fields(lines.slice(at, _SPLIT_ROWS))
                   for at in range(0, max(lines.height, 1), _SPLIT_ROWS)])
    # counters read per line: the collector's rule (12-14 and 16 read as sysstat does)
    used = pl.when(pl.col("n") >= N_FIELDS).then(N_FIELDS).otherwise(pl.col("n").replace_strict(
        {k: used_counters(k) for k in range(N_FIELDS)}, default=None, return_dtype=pl.Int64))
    t = t.with_columns(used.alias("used"))
    layout_ok = pl.col("used").is_not_null()
    in_range = pl.all_horizontal([
        pl.col(f"f{j}").is_null().and_(pl.col("n") > j).not_()
        & pl.col(f"f{j}").fill_null(0).le(_I64_MAX) for j in range(N_FIELDS)])
    ok = layout_ok & in_range & pl.col("major").is_not_null() & pl.col("minor").is_not_null()
    # (each filter copies every column: only when something is refused)
    refused = t.filter(~ok)
    if refused.height:
        for line_no, snap, name, line in refused.select(
                "line_no", "snap", "name", "line").iter_rows():
            _bad(source, int(line_no), str(line), source.path)
            unreadable.add((int(snap), str(name)))
        t = t.filter(ok)
    del refused
    partial = t.filter((pl.col("used") < pl.col("n")) & (pl.col("n") < N_FIELDS))
    if partial.height:
        source.note(partial_layout_note(partial["name"].to_list()))
        t = t.with_columns(
            [pl.when(pl.col("used") > j).then(pl.col(f"f{j}")).alias(f"f{j}")
             for j in range(11, N_FIELDS)],
            n=pl.col("used"))
    t = t.drop("used")
    dup = t.select(pl.struct("snap", "name").is_first_distinct().not_().alias("d"))["d"]
    if dup.any():
        for line_no, name in t.filter(dup).select("line_no", "name").iter_rows():
            source.bad_line(int(line_no), f"device {name} listed twice in one snapshot "
                            "(separate snapshots with a 'TS <epoch seconds>' line)")
        t = t.filter(~dup)
    return t.drop("line")


def _arrays(t: pl.DataFrame) -> tuple[I64, B, B]:
    """(values N x 17, present N x 17, old 4-field layout N) as the collector holds them."""
    n_fields = t["n"].to_numpy()
    raw = np.ascontiguousarray(t.select([pl.col(f"f{j}").fill_null(0).cast(pl.Int64)
                                         for j in range(N_FIELDS)]).to_numpy(),
                               dtype=np.int64)
    old = n_fields == 4
    values = raw.copy()
    present = np.arange(N_FIELDS)[None, :] < np.minimum(n_fields, N_FIELDS)[:, None]
    if old.any():
        values[old] = 0
        present[old] = False
        for src, pos in enumerate(OLD_PARTITION_MAP):
            values[old, pos] = raw[old, src]
            present[old, pos] = True
    return values, np.asarray(present, dtype=np.bool_), np.asarray(old, dtype=np.bool_)


_PARTITION_SUFFIX = re.compile(r"^(?P<disk>.+\d)p\d+$|^(?P<disk2>.+\D)\d+$")


def _kinds(names: list[str], old: B, known: set[str] | None = None
           ) -> tuple[list[str], list[str | None]]:
    """Kind and parent from the kernel names (no sysfs of the captured host): the
    collector's name rules (sda1 -> sda, nvme0n1p1 -> nvme0n1), else a name that is another
    captured device's name (``known``, default ``names``) plus a partition number
    (cciss/c0d0p1 -> cciss/c0d0). A 4-field line is a partition whatever its name: 2.6
    kernels printed that layout only for them."""
    known = known if known is not None else set(names)
    kinds: list[str] = []
    parents: list[str | None] = []
    for name, is_old in zip(names, old.tolist(), strict=True):
        parent = guess_parent(name)
        if parent is None:
            m = _PARTITION_SUFFIX.match(name)
            cand = (m["disk"] or m["disk2"]) if m else None
            parent = cand if cand in known else None
        parents.append(parent)
        kinds.append("partition" if parent or is_old else kind_from_name(name))
    return kinds, parents


def _identity(names: list[str], old: B, known: set[str] | None = None) -> pl.DataFrame:
    """One row per device (in ``names`` order): ``device``, ``device_kind``, ``parent``."""
    kinds, parents = _kinds(names, old, known)
    return pl.DataFrame({"device": names, "device_kind": kinds, "parent": parents},
                        schema={"device": pl.String(), "device_kind": pl.String(),
                                "parent": pl.String()})


def _frame(host: str, ident: pl.DataFrame, codes: npt.NDArray[np.int64], ts_us: I64,
           interval_s: npt.NDArray[np.float64], metrics: dict[str, npt.NDArray[np.float64]],
           reset: B, *, since_boot: bool) -> SampleFrame:
    """The rows: device identity gathered by code, constants as literals."""
    cols: dict[str, object] = {"ts": ts_us, "interval_s": interval_s, "reset": reset}
    for name in DERIVED_COLUMNS:
        cols[name] = metrics[name]
    df = pl.DataFrame(cols, nan_to_null=True)
    df = pl.concat([ident[pl.Series(codes, dtype=pl.UInt32)], df], how="horizontal")
    df = df.with_columns(
        pl.lit(NAME, pl.String()).alias("source"), pl.lit(host, pl.String()).alias("host"),
        pl.lit(since_boot).alias("since_boot"),
        pl.col("ts").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").cast(TS_DTYPE))
    return SampleFrame(df)


def _derive(t: pl.DataFrame, ts_rows: pl.DataFrame, carry: _Carry,
            source: Source) -> SampleFrame:
    """Pair every device line with the device's line in its previous snapshot (in this
    piece, else the one ``carry.base`` holds) and derive all intervals in one call."""
    host = source.host or Path(source.path).stem
    ts_rows = ts_rows.sort("snap")
    offset = len(carry.snaps)
    carry.snaps += ts_rows["snap"].cast(pl.Int64).to_list()
    carry.snap_ts += ts_rows["ts_us"].cast(pl.Int64).to_list()
    snap_ids = np.asarray(carry.snaps, dtype=np.int64)
    snap_ts = np.asarray(carry.snap_ts, dtype=np.int64)
    names = sorted(set(t["name"].unique().to_list())
                   | set(carry.base.names if carry.base else []))
    ln = _device_lines(t, names, snap_ids[offset:], offset, carry.base)
    pr = _pair(ln, snap_ids, names, carry.unreadable)

    cur_ts = snap_ts[ln.pos]
    prev_ts = np.where(pr.reappeared, snap_ts[np.maximum(ln.pos - 1, 0)],
                       snap_ts[np.maximum(pr.prev_pos, 0)])
    interval_s = (cur_ts - prev_ts) / 1e6
    deltas = counter_deltas(ln.values[pr.prev_idx], ln.values,
                            ln.present[pr.prev_idx] & pr.paired[:, None], ln.present, ln.old)
    reset = (deltas.reset & pr.paired) | pr.reappeared | pr.changed
    delta = deltas.delta
    delta[reset] = np.nan
    safe_iv = np.where(interval_s > 0, interval_s, 1.0)
    metrics = derive_metrics(delta, safe_iv)

    _hand_on(carry, ln, pr, deltas, names)
    old_dev = np.array([x in carry.old for x in names], dtype=np.bool_)
    # Output in time order, devices by name within a snapshot.
    keep = np.flatnonzero(pr.has_prev & ~ln.is_base)
    keep = keep[np.lexsort((ln.dev[keep], cur_ts[keep]))]
    return _frame(host, _identity(names, old_dev, carry.known), ln.dev[keep], cur_ts[keep],
                  safe_iv[keep], {k: v[keep] for k, v in metrics.items()}, reset[keep],
                  since_boot=False)


@dataclass
class _Lines:
    """A piece's device lines (after the previous piece's baseline lines, ``is_base``)
    ordered by device, then time: device code (index into the sorted names), position
    among every snapshot so far, counters (17), present (17), 4-field layout, major,
    minor."""

    dev: I64
    pos: I64
    values: I64
    present: B
    old: B
    major: I64
    minor: I64
    is_base: B


def _device_lines(t: pl.DataFrame, names: list[str], piece_snaps: I64, offset: int,
                  base: _Base | None) -> _Lines:
    """The lines of ``t`` (and ``base``'s) as arrays, sorted by device then snapshot
    (numpy on two integer keys); ``piece_snaps`` are this piece's snapshot numbers, which
    start at position ``offset``."""
    dev = t.select(pl.col("name").replace_strict(names, list(range(len(names))),
                                                 return_dtype=pl.Int64))["name"].to_numpy()
    pos = offset + np.searchsorted(piece_snaps, t["snap"].to_numpy().astype(np.int64))
    values, present, old = _arrays(t)
    major = t["major"].to_numpy().astype(np.int64)
    minor = t["minor"].to_numpy().astype(np.int64)
    is_base = np.zeros(len(dev), dtype=np.bool_)
    if base is not None:  # each device's last line before this piece, first
        code = {name: i for i, name in enumerate(names)}
        dev = np.concatenate([np.array([code[x] for x in base.names], dtype=np.int64), dev])
        pos = np.concatenate([base.pos, pos])
        values = np.concatenate([base.values, values])
        present = np.concatenate([base.present, present])
        old = np.concatenate([base.old, old])
        major = np.concatenate([base.major, major])
        minor = np.concatenate([base.minor, minor])
        is_base = np.concatenate([np.ones(len(base.names), dtype=np.bool_), is_base])
    order = np.lexsort((pos, dev))
    return _Lines(dev[order].astype(np.int64), pos[order].astype(np.int64), values[order],
                  present[order], old[order], major[order], minor[order], is_base[order])


@dataclass
class _Pairs:
    """Each line against its device's previous line (``prev_idx``: 0 where there is none,
    ``prev_pos``: -1): derived from it (``paired``) unless the device vanished in between
    (``reappeared``) or came back as another major:minor (``changed``)."""

    has_prev: B
    prev_idx: I64
    prev_pos: I64
    reappeared: B
    changed: B
    paired: B


def _pair(ln: _Lines, snap_ids: I64, names: list[str],
          unreadable: set[tuple[int, str]]) -> _Pairs:
    """Each line's previous line of the same device (the lines are sorted by device, then
    time) and whether the two may be derived against each other."""
    n = len(ln.dev)
    dev, pos = ln.dev, ln.pos
    has_prev = np.zeros(n, dtype=np.bool_)
    has_prev[1:] = dev[1:] == dev[:-1]
    prev_idx = np.arange(n, dtype=np.int64) - 1
    prev_idx[~has_prev] = 0
    prev_pos = np.where(has_prev, pos[prev_idx], -1)

    # A gap means the device was absent from some snapshot: it vanished and came back
    # (reset, as the collector reports it) unless its line there was unreadable (then the
    # collector kept its state and derives over the longer interval).
    gap = has_prev & (pos - prev_pos > 1)
    reappeared = np.zeros(n, dtype=np.bool_)
    for i in np.flatnonzero(gap):
        missing = range(int(prev_pos[i]) + 1, int(pos[i]))
        name = names[int(dev[i])]
        reappeared[i] = any((int(snap_ids[p]), name) not in unreadable for p in missing)
    changed = has_prev & ((ln.major != ln.major[prev_idx]) | (ln.minor != ln.minor[prev_idx]))
    return _Pairs(has_prev, prev_idx, prev_pos, reappeared, changed,
                  has_prev & ~reappeared & ~changed)


def _hand_on(carry: _Carry, ln: _Lines, pr: _Pairs, deltas: Deltas, names: list[str]
             ) -> None:
    """The counts for the notes, and each device's last line: the next piece's baseline."""
    carry.backwards += int((deltas.reset & pr.paired).sum())
    carry.reappeared += int(pr.reappeared.sum() + pr.changed.sum())
    carry.wrapped += int(deltas.wrapped.sum())
    last = np.flatnonzero(np.append(ln.dev[1:] != ln.dev[:-1], True))
    carry.base = _Base([names[int(d)] for d in ln.dev[last]], ln.major[last], ln.minor[last],
                       ln.pos[last], ln.values[last], ln.present[last], ln.old[last])
    carry.known.update(names)
    carry.old.update(names[int(d)] for d in np.unique(ln.dev[ln.old & ~ln.is_base]))


def _lone_snapshot(t: pl.DataFrame, ts_us: int | None, source: Source) -> SampleFrame:
    """A single snapshot: counters since boot; only time-free ratios can be given."""
    host = source.host or Path(source.path).stem
    if ts_us is None:
        ts_us = _lone_time(source)
    t = t.sort("name", maintain_order=True)
    values, present, old = _arrays(t)
    names = t["name"].to_list()
    zeros = np.zeros_like(values)
    deltas = counter_deltas(zeros, values, present, present, old)
    metrics = derive_metrics(deltas.delta, np.full(len(names), LONE_SNAPSHOT_INTERVAL_S))
    # Rates and time shares need the uptime, which a snapshot does not carry.
    for name in ("r_iops", "w_iops", "d_iops", "f_iops", "iops", "r_kBps", "w_kBps",
                 "d_kBps", "kBps", "r_merged_ps", "w_merged_ps", "d_merged_ps", "aqu_sz",
                 "util_pct"):
        metrics[name] = np.full(len(names), np.nan)
    source.note("diskstats: a single snapshot holds counters since boot and not the uptime: "
                "rows are since_boot, rates, %util and aqu-sz are null, interval_s is a "
                f"nominal {LONE_SNAPSHOT_INTERVAL_S:g} s; capture at least two snapshots "
                "with 'TS <epoch seconds>' lines for rates")
    return _frame(host, _identity(names, old), np.arange(len(names), dtype=np.int64),
                  np.full(len(names), ts_us, dtype=np.int64),
                  np.full(len(names), LONE_SNAPSHOT_INTERVAL_S), metrics,
                  np.zeros(len(names), dtype=np.bool_), since_boot=True)


def _lone_time(source: Source) -> int:
    start: datetime | None = getattr(source, "start", None)
    if start is not None:
        if start.tzinfo is None:
            start = start.replace(tzinfo=source.tz or UTC)
        source.note("diskstats: the snapshot has no TS line; its time is --start")
        return round(start.timestamp() * 1_000_000)
    try:
        mtime_ns = Path(source.path).stat().st_mtime_ns
    except OSError:
        raise InputFormatError(source.path, None, "a single snapshot without a TS line and "
                               "the file's time cannot be read: give --start") from None
    source.note("diskstats: the snapshot has no TS line; its time is the file's modification "
                "time (give --start to set it)")
    return mtime_ns // 1000
