"""Times of ``iostat`` text reports: the date order of the file, each run's interval, and
every report's time (UTC), interval, since-boot flag and host.

``ts`` is the end of the report's interval, UTC:

* ``-t``: the printed time, read in the offset it states (``S_TIME_FORMAT=ISO``), else in
  ``--tz``, else as UTC with a note. Day/month order is decided from all dates of the file
  (:func:`.timestamps.infer_date_order`). ``interval_s`` is the run's sampling interval (the
  most frequent step between report times, or ``--interval``); a step more than one second
  longer is a real gap (iostat stopped, host suspended) and is kept as the interval.
* no ``-t``: start (``--start``, else midnight of the banner date) + k * interval, or the
  relative time line (:mod:`iogauge.model.timeline`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers import first_report
from iogauge.importers import timestamps as tsx
from iogauge.importers.base import Source
from iogauge.importers.first_report import FirstReport
from iogauge.importers.iostat import native
from iogauge.importers.iostat.columns import CPU_TARGETS
from iogauge.importers.iostat.lines import Lines
from iogauge.model import timeline

#: interval_s given to a since-boot-only report when the file has no interval at all.
UNKNOWN_INTERVAL_S = 1.0

#: Steps between report times needed before a streamed run's interval is fixed.
MIN_STEPS = 8


@dataclass
class Run:
    """One iostat invocation: the lines after a ``Linux …`` banner (or the file's start)."""

    run_id: int
    host: str | None = None
    banner_date: str | None = None
    banner_line: int | None = None
    reports: int = 0  # reports of this run seen so far
    has_ts: bool = False
    has_cpu: bool = False
    nominal_s: float | None = None
    nominal_fixed: bool = False
    last_utc: datetime | None = None
    anchor: datetime | None = None  # start of a run without -t stamps
    closed: bool = False




class Times:
    """The date order of a file and the times of its reports, decided as pieces come.

    Attributes:
        source: the input (``--tz``, ``--start``, ``--interval``, ``--date-order`` ...).
        runs: the parser's runs by id (shared with it).
        order: the date order once decided (None before).
        dates: distinct dates seen so far (they decide the order).
        host_default: ``--host``, else the file's name without extension.
    """

    def __init__(self, source: Source, runs: dict[int, Run]) -> None:
        self.source = source
        self.runs = runs
        self.order: tsx.DateOrder | None = None
        self.dates: list[pl.DataFrame] = []
        self.host_default = source.host or Path(source.path).stem

    def decided(self) -> bool:
        """Whether the date order is decided for good."""
        return self.order is not None and self.order.certain

    def see_dates(self, stamps: pl.Series) -> None:
        """Keep the dates of report stamps ``stamps`` until the date order is decided."""
        if not self.decided():
            texts = stamps.drop_nulls()
            if texts.len():
                self.dates.append(tsx.stamp_dates(texts))

    def decide_order(self, *, final: bool) -> bool:
        """Decide the date order from the dates seen (banner dates included); False: not
        yet (ambiguous so far and more may come)."""
        if self.decided():
            return True
        dates = [*self.dates]
        banner = self._banner_dates()
        if banner is not None:
            dates.append(banner)
        found = pl.concat(dates, how="vertical_relaxed") if dates else None
        if found is not None and found.height:
            try:
                order = tsx.infer_date_order(found, self.source.date_order)
            except ValueError as exc:
                raise InputFormatError(self.source.path, None, str(exc)) from exc
            if not order.certain and not final:
                return False
            self.order = order
        elif final:
            self.order = tsx.DateOrder(self.source.date_order or "MDY", True)
        return True

    def _banner_dates(self) -> pl.DataFrame | None:
        dates = [r.banner_date for r in self.runs.values() if r.banner_date]
        if not dates:
            return None
        return tsx.stamp_dates(pl.Series(dates, dtype=pl.String), kind="date")

    def intervals_known(self, reports: pl.DataFrame) -> bool:
        """Whether the interval of every run of ``reports`` can be decided now: a run with
        -t stamps waits for enough of them (the step they show decides, and --interval only
        when they cannot: however the file is cut into pieces, the same reports decide), a
        run without stamps for --interval or its end."""
        for rid in reports["run"].unique().to_list():
            run = self.runs[rid]
            if run.nominal_fixed or run.closed:
                continue
            if not run.has_ts:
                if self.source.interval_s is not None:
                    continue
                return False
            n = int(reports.filter(pl.col("run") == rid).height)
            if n < MIN_STEPS + 1:
                return False
        return True

    def resolve(self, reports: pl.DataFrame) -> pl.DataFrame:
        """ts, interval_s, since_boot, host and CPU columns of every pending report."""
        rep = reports
        runs = [int(r) for r in rep["run"].unique(maintain_order=True).to_list()]
        stamped = [r for r in runs if self.runs[r].has_ts]
        plain = [r for r in runs if not self.runs[r].has_ts]
        banner_runs = [r for r in runs if self.runs[r].banner_line is not None]
        hosts = {r: self.runs[r].host or self.host_default for r in runs}
        frames: list[pl.DataFrame] = []
        if stamped:
            frames.append(self._resolve_stamped(rep.filter(pl.col("run").is_in(stamped)),
                                                stamped))
        if plain:
            frames.append(self._resolve_plain(rep.filter(pl.col("run").is_in(plain)), plain))
        times = pl.concat(frames, how="vertical_relaxed")
        cpu_cols = [c for c in CPU_TARGETS if c in rep.columns]
        # a run's first report: since boot after a banner (checked for plausibility in
        # _assemble), unless --first-report decides (importers/first_report.py)
        choice = self.source.first_report
        if choice is not FirstReport.AUTO:
            first_report.since_boot(self.source, shown_by=None, busiest=None)  # (its note)
        first = pl.col("ordinal") == 0
        boot = (first if choice is FirstReport.SINCE_BOOT else pl.lit(False)
                if choice is FirstReport.MEASURED else first & pl.col("run").is_in(banner_runs))
        out = rep.select(
            "report", "run", boot.alias("since_boot"),
            pl.col("run").replace_strict(hosts, return_dtype=pl.String).alias("host"),
            *cpu_cols)
        return out.join(times, on="report", how="left")

    def _resolve_stamped(self, rep: pl.DataFrame, runs: list[int]) -> pl.DataFrame:
        """Reports with -t stamps: printed times; intervals from successive stamps."""
        utc = self._stamps_utc(rep)
        frame = rep.select("report", "run").with_columns(utc.alias("ts"))
        hint = self.source.interval_s
        open_runs = [r for r in runs if not self.runs[r].nominal_fixed]
        if open_runs:
            steps = (frame.filter(pl.col("run").is_in(open_runs))
                     .with_columns(pl.col("ts").diff().over("run").dt.total_microseconds()
                                   .alias("step"))
                     .filter(pl.col("step") > 0))
            counts = steps.group_by("run", "step").len()
            best = (counts.sort(["run", "len", "step"], descending=[False, True, False])
                    .group_by("run", maintain_order=True).first())
            found = {int(r): float(st) / 1e6 for r, st, _ in best.iter_rows()}
            for r in open_runs:
                run = self.runs[r]
                known = found.get(r)
                if hint is not None and known is not None and abs(known - hint) > 1.0:
                    self.source.note(f"--interval {hint:g} s differs from the {known:g} s "
                                     "between the report times; the report times are used")
                if known is None:
                    known = hint  # one report: only the hint can tell
                if known is not None:
                    run.nominal_s = known
                    run.nominal_fixed = True
        for r in runs:
            if self.runs[r].nominal_s is None:
                self.runs[r].nominal_s = self._no_interval(
                    self.runs[r], rep.filter(pl.col("run") == r))
        nominal = {r: float(self.runs[r].nominal_s or UNKNOWN_INTERVAL_S) for r in runs}
        utc_us = pl.Datetime("us", "UTC")
        if len(runs) == 1:  # the usual batch: one run, no window over runs needed
            prev0 = pl.lit(self.runs[runs[0]].last_utc, dtype=utc_us)
            prev = pl.when(pl.int_range(pl.len()) == 0).then(prev0).otherwise(
                pl.col("ts").shift(1))
            nom = pl.lit(nominal[runs[0]], dtype=pl.Float64)
        else:
            last = {r: self.runs[r].last_utc for r in runs if self.runs[r].last_utc is not None}
            prev_state = pl.DataFrame({"run": list(last), "prev0": list(last.values())},
                                      schema={"run": pl.Int64, "prev0": utc_us})
            frame = frame.join(prev_state, on="run", how="left", maintain_order="left")
            first = pl.int_range(pl.len()).over("run") == 0
            prev = pl.when(first).then(pl.col("prev0")).otherwise(
                pl.col("ts").shift(1).over("run"))
            nom = pl.col("run").replace_strict(nominal, return_dtype=pl.Float64)
        out = frame.select("report", "ts", interval(prev, nom, first=False).alias("interval_s"),
                           "run")
        # each run's last time (the next batch's first step is measured from it)
        stamped = out.filter(pl.col("ts").is_not_null())
        ends = first_of_each(stamped["run"].to_numpy()[::-1])  # runs never decrease
        for r, t in stamped.select("run", "ts").reverse()[ends].iter_rows():
            self.runs[int(r)].last_utc = t
        return out.drop("run")

    def _stamps_utc(self, rep: pl.DataFrame) -> pl.Series:
        order = self.order or tsx.DateOrder("MDY", True)  # decided before any stamp is read
        parsed = tsx.parse_local(rep["ts_text"], order.order)
        local = parsed["local"]
        if local.null_count() > rep["ts_text"].null_count():
            bad = rep.with_columns(local.alias("_l")).filter(
                pl.col("ts_text").is_not_null() & pl.col("_l").is_null())
            for ln, text in bad.select("ts_line", "ts_text").iter_rows():
                self.source.bad_line(int(ln), f"time stamp {text.strip()!r} is not a valid "
                                              f"date and time read as {order.order}")
        utc, note = tsx.to_utc(local, parsed["offset_min"], self.source.tz)
        if note:
            self.source.note(note)
        if utc.null_count() == local.null_count():
            return utc
        gap = rep.with_columns(local.alias("_l"), utc.alias("_u")).filter(
            pl.col("_l").is_not_null() & pl.col("_u").is_null())
        for ln, text in gap.select("ts_line", "ts_text").iter_rows():
            self.source.bad_line(int(ln), f"time stamp {text.strip()!r} does not exist in "
                                          f"zone {self.source.tz} (daylight-saving gap): is "
                                          "--tz the zone the log was written in?")
        return utc

    def _resolve_plain(self, rep: pl.DataFrame, runs: list[int]) -> pl.DataFrame:
        """Reports without -t stamps: start (or banner midnight) + k * interval.

        The since-boot report is printed when iostat starts (k = 0); report k ends k
        intervals later. A run without a banner has no since-boot report: its first report
        ends one interval after the start.
        """
        anchors: dict[int, datetime] = {}
        steps: dict[int, int] = {}
        shifts: dict[int, int] = {}
        nominal: dict[int, float] = {}
        for r in runs:
            run = self.runs[r]
            sub = rep.filter(pl.col("run") == r)
            relative = self._relative(run, sub)
            value = self.source.interval_s
            if value is None:
                value = timeline.NOMINAL_INTERVAL_S if relative else self._no_interval(run, sub)
            run.nominal_s = value
            if run.anchor is None:
                run.anchor = self._relative_anchor(run) if relative else self._anchor(run, value)
            anchors[r] = run.anchor
            steps[r] = round(value * 1e6)
            # (on the relative line report k of the file ends k intervals after its start)
            shifts[r] = 0 if run.banner_line is not None and not relative else 1
            nominal[r] = value
            last_ord = int(sub["ordinal"].max())  # type: ignore[arg-type]
            run.last_utc = run.anchor + timedelta(microseconds=(last_ord + shifts[r]) * steps[r])
        run_c = pl.col("run")
        offset = ((pl.col("ordinal") + run_c.replace_strict(shifts, return_dtype=pl.Int64))
                  * run_c.replace_strict(steps, return_dtype=pl.Int64))
        anchor = run_c.replace_strict(anchors, return_dtype=pl.Datetime("us", "UTC"))
        return rep.select("report", (anchor + pl.duration(microseconds=offset)).alias("ts"),
                          run_c.replace_strict(nominal, return_dtype=pl.Float64)
                          .alias("interval_s"))

    def _relative(self, run: Run, rep: pl.DataFrame) -> bool:
        """Whether a run without time stamps goes on the relative time line
        (``model.timeline``): no --start, and no interval, or no banner date to count from;
        a file holding only the since-boot summary keeps its banner date."""
        if self.source.start is not None or run.anchor is not None:
            return run.anchor is not None and timeline.is_relative(run.anchor)
        if self.source.interval_s is not None:
            return run.banner_date is None
        measured = rep.filter(~((pl.col("ordinal") == 0) & pl.lit(run.banner_line is not None)))
        return measured.height > 0 or run.banner_date is None

    def _relative_anchor(self, run: Run) -> datetime:
        """Start of a run on the relative line: the epoch, or where the run before ended."""
        self.source.note(timeline.placement_note(self.source.interval_s))
        prev_end = max((r.last_utc for r in self.runs.values()
                        if r.last_utc is not None and r.run_id < run.run_id), default=None)
        return prev_end if prev_end is not None else timeline.RELATIVE_EPOCH

    def _no_interval(self, run: Run, rep: pl.DataFrame) -> float:
        measured = rep.filter(~((pl.col("ordinal") == 0)
                                & pl.lit(run.banner_line is not None)))
        if measured.height:
            raise InputFormatError(
                self.source.path, int(measured["start_line"][0]),
                "the sampling interval of these iostat reports is not in the file (a single "
                "measured report, or reports without -t time stamps): give it with "
                "--interval SECONDS — the number after the options on the iostat command "
                "line, e.g. 5 for 'iostat -x 5'")
        if self.source.interval_s is None:
            self.source.note("the file holds only iostat's since-boot summary (no interval "
                             "on the command line): its rows are flagged since_boot with a "
                             f"nominal interval_s of {UNKNOWN_INTERVAL_S:g} s")
        return self.source.interval_s or UNKNOWN_INTERVAL_S

    def _anchor(self, run: Run, step_s: float) -> datetime:
        """Start of a run without time stamps: --start, else midnight of its banner date,
        but one interval after the previous run's last report when that is later (runs
        placed end to end, so no two reports share a time)."""
        prev_end = max((r.last_utc for r in self.runs.values()
                        if r.last_utc is not None and r.run_id < run.run_id), default=None)
        if self.source.start is not None and prev_end is None:
            start = self.source.start
            if start.tzinfo is None:
                utc, _ = tsx.to_utc(pl.Series([start], dtype=pl.Datetime("us")), None,
                                    self.source.tz)
                start = utc[0]
            return start.astimezone(UTC)
        if run.banner_date is None:
            raise InputFormatError(
                self.source.path, None,
                "the iostat reports carry no time stamps (iostat was run without -t) and the "
                "file has no 'Linux … (host) date' banner: give the start time with --start "
                "and the interval with --interval")
        order = self.order.order if self.order is not None else "MDY"
        parsed = tsx.parse_local(pl.Series([run.banner_date], dtype=pl.String), order,
                                 kind="date")
        utc, note = tsx.to_utc(parsed["local"], parsed["offset_min"], self.source.tz)
        if utc[0] is None:
            raise InputFormatError(self.source.path, run.banner_line,
                                   f"banner date {run.banner_date!r} is not a date")
        if note:
            self.source.note(note)
        anchor: datetime = utc[0]
        if self.source.start is None:
            self.source.note(
                "the log has no time stamps (iostat was run without -t): report times are "
                f"counted from midnight of the banner date ({run.banner_date}) in steps of the "
                "interval; only their spacing is real (give --start for the real start time)")
        if prev_end is not None and prev_end + timedelta(seconds=step_s) > anchor:
            anchor = prev_end + timedelta(seconds=step_s)
        return anchor

    def steady_stamps(self, lines: Lines, ts: np.ndarray) -> pl.Series | None:
        """UTC times of the stamp lines ``ts`` of a steady piece, read by the byte kernel
        ``ig_stamps`` when every stamp has the first one's shape, else (and without the
        kernels) by :func:`timestamps.parse_local`; None when any of them is not a possible
        time (impossible date, daylight-saving gap ...): the piece then takes the general
        path, which names the line (or, as it reads dates, judges the date order again)."""
        kern = native.kernels()
        order = self.order.order if self.order is not None else "MDY"
        shape = None if kern is None else tsx.fixed_shape(lines.text(ts[:1])[0], order)
        local: pl.Series | None = None
        offset: pl.Series | None = None
        if kern is not None and shape is not None:
            us, ok = kern.stamps(lines.arr, lines.starts, lines.ends, ts, shape.template,
                                 shape.classes, list(shape.at), shape.ampm)
            if ok.all():
                local = pl.Series("local", us).cast(pl.Datetime("us"))
        if local is None:
            parsed = tsx.parse_local(lines.text(ts), order)
            local, offset = parsed["local"], parsed["offset_min"]
            if local.null_count():
                return None
        utc, note = tsx.to_utc(local, offset, self.source.tz)
        if utc.null_count():
            return None
        if note:
            self.source.note(note)
        return utc



def interval(prev: pl.Expr, nominal: pl.Expr, *, first: bool = True) -> pl.Expr:
    """interval_s of stamped reports (column ``ts``): the step from the time before, unless
    it is within 1 s of the run's ``nominal`` interval (iostat's stamps have one-second
    resolution), not positive or unknown. ``prev``: the time before each report, or with
    ``first`` the time before the first one (the others follow ``ts``)."""
    if first:
        prev = pl.when(pl.int_range(pl.len()) == 0).then(prev).otherwise(pl.col("ts").shift(1))
    step = (pl.col("ts") - prev).dt.total_microseconds().cast(pl.Float64) / 1e6
    return (pl.when(step.is_null() | (step <= 0) | ((step - nominal).abs() <= 1.0))
            .then(nominal).otherwise(step))


def first_of_each(ids: np.ndarray) -> np.ndarray:
    """Positions where each value of the non-decreasing ``ids`` first appears."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.empty(ids.size, dtype=bool)
    change[0] = True
    np.not_equal(ids[1:], ids[:-1], out=change[1:])
    return np.flatnonzero(change)
