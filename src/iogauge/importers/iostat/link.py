"""Phase B: linking the pieces' scans in file order — runs (one per ``Linux …`` banner),
report boundaries across pieces, the leading fragment and a cut last report — and handing
complete reports to :mod:`.times` and :mod:`.assemble`.

Report boundaries, runs and times are linked across pieces by counting the starts above
each line in the sorted indices of the few structural lines. Two cuts are *not* errors,
because logs are routinely copied while iostat is still writing them or trimmed with
``tail``: lines before the first complete report, and a last report that is incomplete (its
last line has no newline, or it has fewer lines than the report before it and no closing
blank line) are dropped with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from iogauge.importers.base import MAX_LISTED_SKIPS, Source
from iogauge.importers.first_report import FirstReport
from iogauge.importers.iostat.assemble import assemble
from iogauge.importers.iostat.columns import CPU_TARGETS, PART_RE, Layout
from iogauge.importers.iostat.lines import BANNER, BANNER_RE, BLANK, CPUH, DEVH, TS
from iogauge.importers.iostat.scan import NOT_UNDERSTOOD, Scan, stack
from iogauge.importers.iostat.times import Run, Times, first_of_each
from iogauge.model.sampleframe import SampleFrame


@dataclass
class _Pending:
    rows: list[pl.DataFrame] = field(default_factory=list)
    reports: list[pl.DataFrame] = field(default_factory=list)


class Parser:
    """Phase B: the state that crosses pieces — runs, report boundaries, times — and the
    assembly of SampleFrames from the pieces' scans, in file order."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.next_report = 1
        self.open_report: int | None = None  # report whose end has not been seen yet
        self.open_start = -1  # its first line
        self.runs: dict[int, Run] = {0: Run(0)}
        self.times = Times(source, self.runs)
        self.banner_i: list[int] = []  # line index of each banner, in order
        self.banner_run: list[int] = []
        self.current_run = 0
        self.started = False  # a report start has been seen
        self.layouts: dict[str, Layout] = {}
        self.pending = _Pending()
        # parts of the open report, carried to the next piece
        self.carry_struct: list[pl.DataFrame] = []
        self.carry_rows: list[pl.DataFrame] = []
        self.carry_cpu: list[pl.DataFrame] = []
        self.bad: list[tuple[int, str]] = []
        self.lead_lines = 0
        self.first_start: int | None = None  # first line of the file's first report
        self.dropped_tail = False
        self.last_size: tuple[int, int] | None = None  # (run, body lines) of the last report
        self.reports_out = 0
        self.unclean = False  # a value read as text may be NaN, infinite or negative

    # ---- runs and report boundaries -------------------------------------------------------
    def add(self, scan: Scan, *, final: bool) -> None:
        """Take a piece's scan (pieces in file order); complete reports go to pending."""
        for note in scan.notes:
            self.source.note(note)
        self.unclean |= scan.unclean
        self.bad.extend(scan.bad)
        self.bad.extend((int(i) + 1, NOT_UNDERSTOOD) for i in scan.orphans.to_list())
        self._open_runs(scan.struct)
        run_of = self._run_of(scan.struct["i"])
        struct = scan.struct.with_columns(run_of.alias("run"))
        starts = self._starts(struct, run_of.to_numpy())
        number = _Numbering(starts, self.next_report, self.open_report,
                            max(int(f["i"][-1]) for f in (struct, scan.rows, scan.cpu)
                                if f.height) if starts.size else 0)
        struct, rows, cpu = (number.of(f) for f in (struct, scan.rows, scan.cpu))
        if starts.size:
            if self.first_start is None:
                self.first_start = int(starts[0])
            self.next_report += int(starts.size)
            self.open_report = self.next_report - 1
            self.open_start = int(starts[-1])
        struct, rows, cpu = self._drop_lead(struct, rows, cpu, scan.orphans)
        self.carry_struct.append(struct)
        self.carry_rows.append(rows)
        self.carry_cpu.append(cpu)
        all_struct = stack(self.carry_struct)
        all_rows = stack(self.carry_rows)
        all_cpu = stack(self.carry_cpu)
        self.carry_struct, self.carry_rows, self.carry_cpu = [], [], []
        if self.open_report is not None and (not final or self._cut(all_struct, all_rows,
                                                                    scan)):
            all_struct, all_rows, all_cpu = self._hold_open(all_struct, all_rows, all_cpu,
                                                            final=final)
        self._collect(all_struct, all_rows, all_cpu)

    def _open_runs(self, struct: pl.DataFrame) -> None:
        """A new run at each ``Linux … (host) date`` banner of ``struct``."""
        for row in struct.filter(pl.col("kind") == BANNER).iter_rows(named=True):
            m = re.match(BANNER_RE, row["line"])
            if m is None:  # pragma: no cover - classified with the same pattern
                continue
            self.runs[self.current_run].closed = True
            rid = max(self.runs) + 1
            self.runs[rid] = Run(rid, host=m.group("host").strip() or None,
                                 banner_date=m.group("date").strip(),
                                 banner_line=int(row["i"]) + 1)
            self.banner_i.append(int(row["i"]))
            self.banner_run.append(rid)
            self.current_run = rid

    def _starts(self, struct: pl.DataFrame, run_id: np.ndarray) -> np.ndarray:
        """Line indices of the report starts among ``struct`` (runs ``run_id``).

        A report starts at its -t stamp, else its avg-cpu header, else its first table
        (not a -p ALL partition table's header, which follows its disks' table)."""
        kind = struct["kind"].to_numpy()
        for rid in np.unique(run_id[kind == TS]).tolist():
            self.runs[int(rid)].has_ts = True
        for rid in np.unique(run_id[kind == CPUH]).tolist():
            self.runs[int(rid)].has_cpu = True
        ts_runs = [r for r, run in self.runs.items() if run.has_ts]
        cpu_runs = [r for r, run in self.runs.items() if run.has_cpu]
        start = (kind == TS) | ((kind == CPUH) & ~np.isin(run_id, ts_runs))
        devh = np.flatnonzero((kind == DEVH) & ~np.isin(run_id, ts_runs + cpu_runs))
        if devh.size:
            part = struct["line"].gather(devh).str.contains(PART_RE).to_numpy()
            start[devh[~part]] = True
        starts: np.ndarray = struct["i"].to_numpy()[start]
        return starts

    def _drop_lead(self, struct: pl.DataFrame, rows: pl.DataFrame, cpu: pl.DataFrame,
                   orphans: pl.Series) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """The frames without the lines before the file's first report start: a fragment's
        leading partial report (a prefix of each frame, whose report is null), counted."""
        lead_struct = struct["report"].null_count()
        lead_rows = rows["report"].null_count()
        lead_cpu = cpu["report"].null_count()
        lead_orphans = (orphans.len() if self.first_start is None
                        else int((orphans < self.first_start).sum()))
        self.lead_lines += (struct.head(lead_struct).filter(pl.col("kind") != BANNER).height
                            + lead_rows + lead_orphans)
        if not self.started and self.first_start is not None:
            self.started = True
            self._leading(self.first_start)
        return struct.slice(lead_struct), rows.slice(lead_rows), cpu.slice(lead_cpu)

    def _hold_open(self, struct: pl.DataFrame, rows: pl.DataFrame, cpu: pl.DataFrame, *,
                   final: bool) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """The frames without the open report (the last one: a suffix of each frame), which
        waits for the next piece; at the end it is a cut report, dropped with what could
        not be read of it."""
        if final:
            self.bad = [(ln, r) for ln, r in self.bad if ln - 1 < self.open_start]
        split = [int(f["report"].search_sorted(self.open_report, side="left"))
                 for f in (struct, rows, cpu)]
        if not final:
            self.carry_struct = [struct.slice(split[0])]
            self.carry_rows = [rows.slice(split[1])]
            self.carry_cpu = [cpu.slice(split[2])]
        return struct.head(split[0]), rows.head(split[1]), cpu.head(split[2])

    def _run_of(self, idx: pl.Series) -> pl.Series:
        """Run id of lines ``idx`` (the run of the last banner at or above, else run 0)."""
        if not self.banner_i:
            return pl.Series("run", np.zeros(idx.len(), dtype=np.int64))
        runs = np.array([0, *self.banner_run], dtype=np.int64)
        at = np.searchsorted(np.array(self.banner_i, dtype=np.int64), idx.to_numpy(),
                             side="right")
        return pl.Series("run", runs[at])

    def _leading(self, first_start: int) -> None:
        """Notes about the lines before the file's first complete report."""
        if self.lead_lines:
            self.source.note(f"the file starts in the middle of a report: {self.lead_lines} "
                             f"line(s) before line {first_start + 1}, the first complete "
                             "report, were not imported")
        run = self._run_of(pl.Series([first_start], dtype=pl.Int64))[0]
        if (self.runs[int(run)].banner_line is None
                and self.source.first_report is FirstReport.AUTO):
            self.source.note("no 'Linux … (host) date' banner before the first report: the "
                             "file looks like a fragment of a longer log, so no report is "
                             "taken as iostat's since-boot summary")

    def _cut(self, struct: pl.DataFrame, rows: pl.DataFrame, scan: Scan) -> bool:
        """Whether the file's last report was cut (see the module docstring); notes it."""
        rep = self.open_report
        if rep is None:
            return False
        body = struct.filter((pl.col("report") == rep) & (pl.col("kind") != BANNER))
        last_rows = rows.filter(pl.col("report") == rep)
        if body.height == 0:
            return False
        size = body.height + last_rows.height
        cut = False
        if not scan.newline and scan.last_row >= 0 and \
                scan.last_row >= int(body["i"].max()):  # type: ignore[arg-type]
            cut = True  # the last line has no newline: written while iostat was printing it
        elif scan.last_kind != BLANK:
            # no closing blank line: a cut if it has fewer lines than the report before
            # (in this batch, or the last one of the previous batch)
            prev_body = struct.filter((pl.col("report") == rep - 1)
                                      & (pl.col("kind") != BANNER))
            prev = self.last_size
            if prev_body.height:
                prev = (int(prev_body["run"][0]), prev_body.height
                        + rows.filter(pl.col("report") == rep - 1).height)
            cut = prev is not None and prev[0] == int(body["run"][0]) and size < prev[1]
        if cut:
            self.source.note(f"the last report (from line {self.open_start + 1}) is "
                             "incomplete — the file was probably copied while iostat was "
                             "still writing it — and was not imported "
                             f"({last_rows.height} device line(s) dropped)")
            self.dropped_tail = True
        return cut

    def close_open(self) -> SampleFrame | None:
        """Link the open report as complete (the next piece starts with a report)."""
        if self.open_report is None:
            return None
        struct, rows, cpu = (stack(x) for x in (self.carry_struct, self.carry_rows,
                                                 self.carry_cpu))
        self.carry_struct, self.carry_rows, self.carry_cpu = [], [], []
        self.open_report = None
        self._collect(struct, rows, cpu)
        return self.flush(final=False)

    # ---- complete reports ------------------------------------------------------------------
    def _collect(self, struct: pl.DataFrame, rows: pl.DataFrame, cpu: pl.DataFrame) -> None:
        if struct.height == 0 and rows.height == 0:
            return
        reports = self._reports(struct, cpu)
        if reports.height == 0:
            return
        # size of the last complete report (to judge a cut last report against)
        last = int(reports["report"][-1])
        tail = struct.slice(int(struct["report"].search_sorted(last, side="left")))
        body = tail.height - int((tail["kind"] == BANNER).sum())
        n_rows = rows.height - int(rows["report"].search_sorted(last, side="left"))
        self.last_size = (int(reports["run"][-1]), body + n_rows)
        self.pending.reports.append(reports)
        if rows.height:
            if rows["part"].any():
                measures = [c for c in rows.columns if c not in ("i", "report", "device",
                                                                  "part")]
                rows = (rows.group_by(["report", "device"], maintain_order=True)
                        .agg(pl.col("i").min(), *[pl.col(c).drop_nulls().first()
                                                  for c in measures]).sort("i"))
            self.pending.rows.append(rows.drop("part", strict=False))

    def _reports(self, struct: pl.DataFrame, cpu: pl.DataFrame) -> pl.DataFrame:
        # Frames are in file order, so report (and run) ids never decrease: a report's
        # first line is where its id first appears.
        # (positions found with numpy: a filter and a join per column cost more here than
        # the arithmetic)
        srep = struct["report"].to_numpy()
        firsts = first_of_each(srep)
        ids = srep[firsts]
        rep = struct.select(pl.col("report", "run").gather(firsts),
                            (pl.col("i").gather(firsts) + 1).alias("start_line"))
        # the first -t stamp line of each report, and the first avg-cpu values
        tsp = np.flatnonzero(struct["kind"].to_numpy() == TS)
        tsp = tsp[first_of_each(srep[tsp])]
        at = np.searchsorted(ids, srep[tsp])
        line, i = struct["line"].gather(tsp), struct["i"].gather(tsp) + 1
        cols = [spread(line.alias("ts_text"), at, ids.size),
                spread(i.alias("ts_line"), at, ids.size)]
        cpu_cols = [c for c in CPU_TARGETS if c in cpu.columns]
        crep = cpu["report"].to_numpy()
        cfirst = first_of_each(crep)
        at = np.searchsorted(ids, crep[cfirst])
        mine = at < ids.size
        mine[mine] = ids[at[mine]] == crep[cfirst][mine]  # reports of this frame only
        cols += [spread(cpu[c].gather(cfirst[mine]), at[mine], ids.size) for c in cpu_cols]
        rep = rep.with_columns(cols)
        # ordinal of each report in its run (runs continue across pieces)
        run = rep["run"].to_numpy()
        at = np.arange(run.size)
        new_run = np.ones(run.size, dtype=bool)
        new_run[1:] = run[1:] != run[:-1]
        run_start = np.maximum.accumulate(np.where(new_run, at, 0))
        offsets = np.array([self.runs[int(r)].reports for r in run[new_run]], dtype=np.int64)
        ordinal = at - run_start + offsets[np.cumsum(new_run) - 1]
        rep = rep.with_columns(pl.Series("ordinal", ordinal, dtype=pl.Int64))
        for r, cnt in zip(run[new_run].tolist(), np.diff(np.append(at[new_run], run.size))
                          .tolist(), strict=True):
            self.runs[int(r)].reports += int(cnt)
        self.times.see_dates(rep["ts_text"])  # dates matter until the order is decided
        return rep

    # ---- resolution: times, intervals, since-boot, then assembly -----------------------------
    def flush(self, *, final: bool) -> SampleFrame | None:
        """Rows whose times can be decided now as a SampleFrame (None if nothing yet)."""
        self._report_bad(final=final)
        if not self.pending.reports:
            return None
        if not self.times.decide_order(final=final):
            return None
        reports = stack(self.pending.reports).sort("report")
        if not final and not self.times.intervals_known(reports):
            return None
        if self.times.order is not None and self.times.order.note:
            self.source.note(self.times.order.note)
        resolved = self.times.resolve(reports)
        rows = (stack(self.pending.rows)
                if self.pending.rows else None)
        self.pending = _Pending()
        if rows is None or rows.height == 0:
            return None
        return self.assemble(rows, resolved)

    def assemble(self, rows: pl.DataFrame, reports: pl.DataFrame,
                 names: list[str] | None = None) -> SampleFrame:
        """:func:`.assemble.assemble` of complete reports, counted."""
        self.reports_out += int(reports.height)
        return assemble(rows, reports, self.source, unclean=self.unclean, names=names)

    def _report_bad(self, *, final: bool) -> None:
        """Refuse (or count) the unreadable lines of complete reports, in file order.

        Lines of the open report wait (it may turn out to be a cut last report, whose
        damage is not an error); lines before the file's first report belong to a leading
        fragment (noted, not an error).
        """
        if not self.bad:
            return
        limit = None if final or self.open_report is None else self.open_start
        ready = sorted(b for b in self.bad if limit is None or b[0] - 1 < limit)
        self.bad = [b for b in self.bad if not (limit is None or b[0] - 1 < limit)]
        fs = self.first_start
        ready = [b for b in ready if fs is not None and b[0] - 1 >= fs]
        listed = 0
        for ln, reason in ready:
            if listed >= MAX_LISTED_SKIPS and self.source.lenient:
                break
            self.source.bad_line(ln, reason)
            listed += 1
        rest = len(ready) - listed
        if rest > 0:
            self.source.skip(None, "further unreadable lines", count=rest)


class _Numbering:
    """The report of each line of a piece, from the line indices of its report starts.

    Frames are in file order and report ids consecutive, so the report of a line is the
    number of starts at or above it, offset; the lines before the first start belong to the
    open report (null before the file's first report: a fragment's lead)."""

    def __init__(self, starts: np.ndarray, first_id: int, open_id: int | None,
                 top: int) -> None:
        self.starts, self.first_id, self.open_id = starts, first_id, open_id
        self.count = np.zeros(0, dtype=np.int64)  # starts at or above each line from the first
        if starts.size:
            marks = np.zeros(top - int(starts[0]) + 1, dtype=np.int64)
            marks[starts - starts[0]] = 1
            self.count = np.cumsum(marks)

    def of(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with the ``report`` of each of its lines (``i``)."""
        starts = self.starts
        i = frame["i"].to_numpy()
        before = int(np.searchsorted(i, starts[0])) if starts.size else i.size
        rep = np.empty(i.size, dtype=np.int64)
        if before < i.size:
            rep[before:] = self.count[i[before:] - starts[0]] + (self.first_id - 1)
        out = pl.Series("report", rep)
        if before:
            out = pl.concat([pl.Series("report", [self.open_id] * before, dtype=pl.Int64),
                             out.slice(before)])
        return frame.with_columns(out)


def spread(values: pl.Series, at: np.ndarray, n: int) -> pl.Series:
    """``values`` placed at positions ``at`` of a series of ``n`` nulls (a left join on
    positions already found)."""
    if at.size == n:  # every position filled: ``at`` is 0..n-1 (sorted, distinct)
        return values
    out = pl.Series(values.name, [None] * n, dtype=values.dtype)
    return out.scatter(at, values) if at.size else out
