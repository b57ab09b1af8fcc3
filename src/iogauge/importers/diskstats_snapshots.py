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

A file with a single snapshot is a since-boot report: the counters are totals since boot
and the uptime is not in the file, so rates, %util and aqu-sz are null and only the ratios
that need no time are given (await, request sizes, merge shares, the in-flight gauge);
``since_boot`` is true, ``interval_s`` is a nominal 1 s (noted), and ``ts`` is its ``TS``
line, else ``--start``, else the file's modification time (noted).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.collector.derive import DERIVED_COLUMNS, counter_deltas, derive_metrics
from iogauge.collector.diskstats import N_FIELDS, OLD_PARTITION_MAP, parse_line
from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
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
        n = len(line.split()) - 3
        if n not in (4, 11, 15) and n < 17:
            return False
        stats += 1
        if stats >= 3:
            return True
    return stats > 0


# ---- reading -----------------------------------------------------------------------------


def _lines(data: bytes) -> pl.DataFrame:
    """Every line as a row: ``line`` (text, null if blank) and ``line_no`` (1-based)."""
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


def parse(data: bytes, source: Source) -> SampleFrame:
    """Derive every device-interval of the capture (see the module documentation)."""
    df = _lines(data)
    ts_match = pl.col("line").str.contains(_TS_BARE_RE) | pl.col("line").str.contains(
        _TS_TAGGED_RE)
    stat_match = pl.col("line").str.contains(_STAT_RE)
    df = df.filter(pl.col("line").str.strip_chars().str.len_bytes() > 0).with_columns(
        ts_match.alias("is_ts"), (stat_match & ~ts_match).alias("is_stat"))
    if df.height == 0:
        raise InputFormatError(source.path, None, "empty file")
    # Snapshot numbers: k = TS lines up to and including this one. Timestamps before their
    # snapshot: a stat line belongs to TS k; after: to TS k + 1.
    ts_first = bool(df["is_ts"][0])
    df = df.with_columns(pl.col("is_ts").cast(pl.Int64).cum_sum().alias("k"))
    df = df.with_columns(pl.when(pl.col("is_ts") | pl.lit(ts_first)).then(pl.col("k"))
                         .otherwise(pl.col("k") + 1).alias("snap"))
    # Lines that are neither: refused; their device (if named) keeps its previous state.
    unreadable: set[tuple[int, str]] = set()
    for line_no, snap, line in df.filter(~pl.col("is_ts") & ~pl.col("is_stat")).select(
            "line_no", "snap", "line").iter_rows():
        _bad(source, int(line_no), str(line), source.path)
        parts = str(line).split()
        if len(parts) >= 3:
            unreadable.add((int(snap), parts[2]))
    ts_rows = df.filter(pl.col("is_ts")).select(
        "snap", "line_no",
        _microseconds(pl.col("line").str.extract(_TS_RE, 1),
                      pl.col("line").str.extract(_TS_RE, 2)).alias("ts_us"))
    stats = _stat_table(df.filter(pl.col("is_stat")), source, unreadable)
    if ts_rows.height == 0:
        return _lone_snapshot(stats, None, source)
    ts_rows = _increasing(ts_rows, source)
    stats = stats.join(ts_rows.select("snap", "ts_us"), on="snap", how="left")
    orphans = stats.filter(pl.col("ts_us").is_null())
    if orphans.height:
        source.note(f"diskstats: {orphans['snap'].n_unique()} snapshot(s) without a usable "
                    "timestamp line (cut off before its closing TS line, or its TS refused) "
                    "ignored")
        stats = stats.filter(pl.col("ts_us").is_not_null())
    if stats.height == 0:
        raise InputFormatError(source.path, None, "no diskstats line under a timestamp")
    if stats["snap"].n_unique() == 1:
        return _lone_snapshot(stats, int(stats["ts_us"][0]), source)
    source.note("diskstats: the first snapshot is the baseline (a device's first line gives "
                "no row); partitions and idle devices are all imported")
    return _derive(stats, ts_rows, unreadable, source)


def _increasing(ts_rows: pl.DataFrame, source: Source) -> pl.DataFrame:
    """Refuse (lenient: drop) timestamps that do not advance."""
    while True:
        back = ts_rows.filter(pl.col("ts_us").diff() <= 0)
        if back.height == 0:
            return ts_rows
        for line_no in back["line_no"].to_list():
            source.bad_line(int(line_no), "timestamp is not after the previous one")
        ts_rows = ts_rows.filter(~pl.col("line_no").is_in(back["line_no"].implode()))


def _stat_table(lines: pl.DataFrame, source: Source,
                unreadable: set[tuple[int, str]]) -> pl.DataFrame:
    """Split the diskstats lines into ``major minor name`` and the 17 counters (vectorised);
    lines the collector's parser would refuse are bad lines (added to ``unreadable``)."""
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
    t = lines.select(
        "line_no", "snap", "line",
        tok.list.get(0).cast(pl.Int64, strict=False).alias("major"),
        tok.list.get(1).cast(pl.Int64, strict=False).alias("minor"),
        tok.list.get(2).alias("name"),
        n.cast(pl.Int64).alias("n"),
        *counters)
    layout_ok = pl.col("n").is_in([4, 11, 15]) | (pl.col("n") >= N_FIELDS)
    in_range = pl.all_horizontal([
        pl.col(f"f{j}").is_null().and_(pl.col("n") > j).not_()
        & pl.col(f"f{j}").fill_null(0).le(_I64_MAX) for j in range(N_FIELDS)])
    ok = layout_ok & in_range & pl.col("major").is_not_null() & pl.col("minor").is_not_null()
    t = t.with_columns(ok.alias("ok"))
    for line_no, snap, name, line in t.filter(~pl.col("ok")).select(
            "line_no", "snap", "name", "line").iter_rows():
        _bad(source, int(line_no), str(line), source.path)
        unreadable.add((int(snap), str(name)))
    t = t.filter(pl.col("ok"))
    dup = t.select(pl.struct("snap", "name").is_first_distinct().not_().alias("d"))["d"]
    for line_no, name in t.filter(dup).select("line_no", "name").iter_rows():
        source.bad_line(int(line_no), f"device {name} listed twice in one snapshot (separate "
                        "snapshots with a 'TS <epoch seconds>' line)")
    return t.filter(~dup).drop("ok", "line")


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


def _kinds(names: list[str], old: B) -> tuple[list[str], list[str | None]]:
    """Kind and parent from the kernel names (no sysfs of the captured host): the
    collector's name rules (sda1 -> sda, nvme0n1p1 -> nvme0n1), else a name that is another
    captured device's name plus a partition number (cciss/c0d0p1 -> cciss/c0d0). A 4-field
    line is a partition whatever its name: 2.6 kernels printed that layout only for them."""
    known = set(names)
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


def _identity(names: list[str], old: B) -> pl.DataFrame:
    """One row per device (in ``names`` order): ``device``, ``device_kind``, ``parent``."""
    kinds, parents = _kinds(names, old)
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


def _derive(t: pl.DataFrame, ts_rows: pl.DataFrame, unreadable: set[tuple[int, str]],
            source: Source) -> SampleFrame:
    """Pair every device line with the device's line in its previous snapshot and derive
    all intervals in one call."""
    host = source.host or Path(source.path).stem
    snap_ids = np.sort(ts_rows["snap"].to_numpy().astype(np.int64))
    snap_ts = ts_rows.sort("snap")["ts_us"].to_numpy().astype(np.int64)
    names = t["name"].unique().sort().to_list()
    # Device codes (index into the sorted ``names``) and snapshot positions; rows ordered
    # by device, then time (numpy on two integer keys, not a sort of the whole table).
    dev = t.select(pl.col("name").replace_strict(names, list(range(len(names))),
                                                 return_dtype=pl.Int64))["name"].to_numpy()
    pos = np.searchsorted(snap_ids, t["snap"].to_numpy().astype(np.int64))
    order = np.lexsort((pos, dev))
    dev, pos = dev[order].astype(np.int64), pos[order].astype(np.int64)
    values, present, old = _arrays(t)
    values, present, old = values[order], present[order], old[order]
    major = t["major"].to_numpy().astype(np.int64)[order]
    minor = t["minor"].to_numpy().astype(np.int64)[order]
    n = len(dev)

    # The previous line of the same device (sorted by device, then time).
    has_prev = np.zeros(n, dtype=np.bool_)
    has_prev[1:] = dev[1:] == dev[:-1]
    prev_idx = np.arange(n) - 1
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
    changed = has_prev & ((major != major[prev_idx]) | (minor != minor[prev_idx]))
    paired = has_prev & ~reappeared & ~changed

    cur_ts = snap_ts[pos]
    prev_ts = np.where(reappeared, snap_ts[np.maximum(pos - 1, 0)],
                       snap_ts[np.maximum(prev_pos, 0)])
    interval_s = (cur_ts - prev_ts) / 1e6
    deltas = counter_deltas(values[prev_idx], values, present[prev_idx] & paired[:, None],
                            present, old)
    reset = (deltas.reset & paired) | reappeared | changed
    delta = deltas.delta
    delta[reset] = np.nan
    safe_iv = np.where(interval_s > 0, interval_s, 1.0)
    metrics = derive_metrics(delta, safe_iv)

    n_back = int((deltas.reset & paired).sum())
    if n_back:
        source.note(f"diskstats: {n_back} interval(s) where counters went backwards "
                    "(device re-created or statistics reset): reset rows, no values")
    if reappeared.any() or changed.any():
        source.note(f"diskstats: {int(reappeared.sum() + changed.sum())} device(s) came back "
                    "or changed major:minor: reset rows, no values")
    if deltas.wrapped.any():
        source.note(f"diskstats: {int(deltas.wrapped.sum())} interval(s) with a millisecond "
                    "counter that wrapped at 2**32 (unwrapped)")
    old_dev = np.zeros(len(names), dtype=np.bool_)
    old_dev[dev[old]] = True
    # Output in time order, devices by name within a snapshot.
    keep = np.flatnonzero(has_prev)
    keep = keep[np.lexsort((dev[keep], cur_ts[keep]))]
    return _frame(host, _identity(names, old_dev), dev[keep], cur_ts[keep], safe_iv[keep],
                  {k: v[keep] for k, v in metrics.items()}, reset[keep], since_boot=False)


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
