"""Helpers shared by the rule modules: runs of matched windows, worst-run choice, evidence.

Every rule follows the same shape (see ``rules/__init__.py``): for each device it computes,
*vectorised over the device's windows*, a **level** per window (0 = no match, 1, 2, ... =
matched, higher = worse) and a **score** (how bad, for ranking), groups consecutive matched
windows into runs (:func:`find_runs`), keeps the worst runs (at most
:data:`MAX_FINDINGS_PER_DEVICE`: findings should be few and meaningful) and turns
each into a :class:`~iogauge.analysis.types.Finding` that names its window and says how many
windows matched in total (:func:`run_finding`)::

    w = dev.windows
    wt = w.lazy().with_columns(                 # one query per device: polars calls cost
        _level=level_expr(critical=c(w, "await_ms") >= 50, warning=c(w, "await_ms") > 30),
        _score=c(w, "await_ms")).collect()
    found = find_runs(wt, "_level", "_score", window_s=ctx.window_s)
    for run in found.runs:                      # worst first
        out.append(run_finding(RULE_ID, dev, run, found, title=..., evidence=[...],
                               explanation=..., suggestion=..., source=...))

The run search is numpy over the aligned level/score arrays and :class:`Run`'s statistics
are numpy over the run's few windows (no polars query per run), and rules evaluate their
per-window expressions in one lazy query per device: each polars query costs ~0.1-1 ms of
fixed overhead, and a day of data for 100 devices must analyse in seconds.

Column access goes through :func:`c` (a missing column reads as null) and the derived
expressions :func:`iops_expr`, :func:`await_expr`, :func:`kBps_expr`, :func:`areq_kB_expr`,
which fall back on the parts a source reports (perfmon logs may carry r/s but no total).

Stable API (other rule modules rely on it; add, do not change):
``MAX_FINDINGS_PER_DEVICE``, ``SUSTAINED_MIN_INTERVALS``, ``SUSTAINED_MIN_S``,
``ACTIVE_IOPS``, ``Run``, ``Matches``, ``find_runs``, ``level_expr``, ``c``, ``has``,
``iops_expr``, ``await_expr``, ``kBps_expr``, ``areq_kB_expr``, ``matched_evidence``,
``run_finding``, ``span_finding``, ``whole_span``, ``judged_via_parent``,
``latency_targets``, ``latency_target_exprs``, ``may_have_target``,
``window_local_time``,
``WINDOWS_GUIDANCE_MS``, ``fmt_num``, ``fmt_ms``, ``fmt_pct``, ``fmt_rate``, ``fmt_ratio``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.analysis.context import PART_KINDS, AnalysisContext, DeviceContext
from iogauge.analysis.latency_standard import WINDOWS_FIGURES, ExpectationKind
from iogauge.analysis.summary import IDLE_IOPS
from iogauge.analysis.types import Evidence, Finding, Severity
from iogauge.analysis.windows import window_label
from iogauge.model.timeline import RelativeTimeline

#: At most this many findings per rule per device: the worst runs (preamble contract).
MAX_FINDINGS_PER_DEVICE = 3

#: A run is *sustained* when it covers at least this many sampling intervals ...
#: One sample can be a transient; three in a row is a pattern ([Oe] reacts to
#: %util = 100 "in >= 3 of the last 10 samples").
SUSTAINED_MIN_INTERVALS = 3
#: ... or at least this many seconds of averaged data: a single 5-min (or longer) interval
#: is already a mean that smooths transients ([Yuge] recommends <= 5 min intervals).
SUSTAINED_MIN_S = 300.0

#: Below this many operations per second a window is idle: a mean latency over a handful
#: of requests says little (same threshold as ``summary.IDLE_IOPS``).
ACTIVE_IOPS = IDLE_IOPS

#: Default severity of a run level (rules may choose another when they build the finding).
LEVEL_SEVERITY: dict[int, Severity] = {1: "warning", 2: "critical"}


# ------------------------------------------------------------------------------------------
# column access and derived per-window expressions
# ------------------------------------------------------------------------------------------
def c(windows: pl.DataFrame, name: str) -> pl.Expr:
    """``pl.col(name)``, or a null Float64 literal when ``windows`` lacks the column."""
    if name in windows.columns:
        return pl.col(name)
    return pl.lit(None, dtype=pl.Float64).alias(name)


def has(windows: pl.DataFrame, name: str) -> bool:
    """Whether ``windows`` has the column with at least one non-null value."""
    return name in windows.columns and windows[name].null_count() < windows.height


def _sum_parts(windows: pl.DataFrame, parts: Sequence[str]) -> pl.Expr:
    """Sum of the present parts; null when every part is null (not measured, never 0)."""
    cols = [c(windows, p) for p in parts]
    any_present = pl.any_horizontal([x.is_not_null() for x in cols])
    return pl.when(any_present).then(pl.sum_horizontal(cols)).otherwise(None)


def iops_expr(windows: pl.DataFrame) -> pl.Expr:
    """Operations per second: ``iops``, else r + w + d (flushes excluded, as sysstat tps)."""
    return pl.coalesce(c(windows, "iops"), _sum_parts(windows, ("r_iops", "w_iops", "d_iops")))


def kBps_expr(windows: pl.DataFrame) -> pl.Expr:  # noqa: N802 - unit kB in the name
    """kB/s moved: ``kBps``, else r + w + d kB/s."""
    return pl.coalesce(c(windows, "kBps"),
                       _sum_parts(windows, ("r_kBps", "w_kBps", "d_kBps")))


def await_expr(windows: pl.DataFrame) -> pl.Expr:
    """Mean response time (ms): ``await_ms``, else the op-weighted mean of r/w await."""
    r, w = c(windows, "r_await_ms"), c(windows, "w_await_ms")
    ri, wi = c(windows, "r_iops").fill_null(0.0), c(windows, "w_iops").fill_null(0.0)
    num = r.fill_null(0.0) * ri + w.fill_null(0.0) * wi
    den = pl.when(r.is_not_null()).then(ri).otherwise(0.0) + pl.when(
        w.is_not_null()).then(wi).otherwise(0.0)
    mixed = pl.when(den > 0).then(num / den).otherwise(None)
    return pl.coalesce(c(windows, "await_ms"), mixed)


def areq_kB_expr(windows: pl.DataFrame) -> pl.Expr:  # noqa: N802 - unit kB in the name
    """Mean request size (kB): ``areq_kB``, else kB/s / IO/s (Solaris -x has no size column)."""
    iops = iops_expr(windows)
    derived = pl.when(iops > 0).then(kBps_expr(windows) / iops).otherwise(None)
    return pl.coalesce(c(windows, "areq_kB"), derived)


def level_expr(critical: pl.Expr | None = None, warning: pl.Expr | None = None,
               info: pl.Expr | None = None) -> pl.Expr:
    """Per-window level: 2 where ``critical``, else 1 where ``warning`` (or ``info``), else 0.

    Null conditions count as false. ``info`` is for rules whose only outcome is context: it
    maps to level 1 like ``warning``; the rule sets the finding's severity itself.
    """
    conds = [(cond, lvl) for cond, lvl in ((critical, 2), (warning, 1), (info, 1))
             if cond is not None]
    if not conds:
        return pl.lit(0, dtype=pl.Int8)
    chain: Any = pl
    for cond, lvl in conds:
        chain = chain.when(cond.fill_null(value=False)).then(pl.lit(lvl, dtype=pl.Int8))
    return chain.otherwise(pl.lit(0, dtype=pl.Int8))  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------------
# response-time expectations per window (shared by response_time_target / solaris_service_time)
# ------------------------------------------------------------------------------------------
#: Windows guidance ([MS-Azure-JP], quoting Microsoft TechNet Magazine "Measuring Server
#: Performance"): response times should stay within 25 ms in general.
WINDOWS_GUIDANCE_MS = WINDOWS_FIGURES.read_ms


def window_local_time(windows: pl.DataFrame, ctx: AnalysisContext) -> pl.Expr:
    """Wall-clock time (in ``ctx.tz``) of each window's midpoint, as ``ctx.local_time``
    gives it for one timestamp. The midpoint decides which daily target covers a window, so
    a 30-min window 00:45-01:15 belongs to a target starting at 01:00."""
    if ctx.tz.key is None:  # a zone built from a file has no key polars can use
        times = [ctx.local_time(s + (e - s) / 2) for s, e in
                 zip(windows["window_start"], windows["window_end"], strict=True)]
        return pl.lit(pl.Series("local", times, dtype=pl.Time))
    mid = pl.col("window_start") + (pl.col("window_end") - pl.col("window_start")) / 2
    return mid.dt.convert_time_zone(ctx.tz.key).dt.time()


def latency_target_exprs(ctx: AnalysisContext, dev: DeviceContext) -> tuple[pl.Expr, ...]:
    """Expressions over ``dev.windows`` giving ``target_ms`` (any I/O), ``target_r_ms``,
    ``target_w_ms`` (reads, writes), ``target_kind`` and ``target_src`` (see
    :func:`latency_targets`), to be evaluated in the rule's own ``with_columns`` chain."""
    w = dev.windows
    ms: Any = None
    kind: Any = None
    src: Any = None
    local = window_local_time(w, ctx)
    for t in ctx.target_for(dev.key):
        if t.start is None or t.end is None:
            cover = pl.lit(value=True)
        elif t.start <= t.end:
            cover = (local >= t.start) & (local < t.end)
        else:
            cover = (local >= t.start) | (local < t.end)
        text = f"user target --target {t.text or t.device_glob + '=' + fmt_num(t.ms)}"
        chain_ms, chain_kind, chain_src = (pl, pl, pl) if ms is None else (ms, kind, src)
        ms = chain_ms.when(cover).then(pl.lit(t.ms))
        kind = chain_kind.when(cover).then(pl.lit("user"))
        src = chain_src.when(cover).then(pl.lit(text))
    d_any, d_r, d_w, d_kind, d_src = _default_target(dev)
    lits = [pl.lit(v, dtype=pl.Float64) for v in (d_any, d_r, d_w)]
    lit_kind = pl.lit(d_kind, dtype=pl.String)
    lit_src = pl.lit(d_src, dtype=pl.String)
    if ms is None:
        values = [*lits, lit_kind, lit_src]
    else:
        # a user target covers reads and writes alike
        values = [ms.otherwise(x) for x in lits] + [kind.otherwise(lit_kind),
                                                    src.otherwise(lit_src)]
    names = ("target_ms", "target_r_ms", "target_w_ms", "target_kind", "target_src")
    types = (pl.Float64, pl.Float64, pl.Float64, pl.String, pl.String)
    return tuple(v.cast(t).alias(n) for v, t, n in zip(values, types, names, strict=True))


#: ``target_kind`` of each expectation kind (the words findings quote).
_TARGET_KIND = {ExpectationKind.PROVIDER: "design", ExpectationKind.WINDOWS: "windows",
                ExpectationKind.CLASS: "expected"}


def _default_target(dev: DeviceContext) -> tuple[float | None, float | None, float | None,
                                                  str | None, str | None]:
    """The device's own expectation as a target, unless [Goodus]'s busy bands judge it."""
    exp = dev.expectation
    if exp is None or exp.uses_busy_bands:
        return None, None, None, None, None
    src = f"{exp.phrase()}: {exp.decided_by} ({exp.source})"
    return exp.any_ms, exp.read_ms, exp.write_ms, _TARGET_KIND[exp.kind], src


def may_have_target(ctx: AnalysisContext, dev: DeviceContext) -> bool:
    """Whether any window of ``dev`` can have an explicit response-time expectation (a user
    target matching it, or an expectation not judged by [Goodus]'s busy bands): a cheap
    test before :func:`latency_target_exprs`."""
    exp = dev.expectation
    return bool(ctx.target_for(dev.key)) or (exp is not None and not exp.uses_busy_bands)


def latency_targets(ctx: AnalysisContext, dev: DeviceContext) -> pl.DataFrame:
    """The response-time expectation of every window of ``dev``, most specific first.

    Returns a frame aligned with ``dev.windows`` with ``target_ms``, ``target_r_ms``,
    ``target_w_ms`` (Float64; null = no target for that window), ``target_kind`` (``user``,
    ``design``, ``windows``, ``expected`` or null) and ``target_src`` (text cited in
    findings):

    1. ``user``: the first ``--target`` matching the device whose daily window covers the
       window's midpoint (``LatencyTarget.covers``; [MS-Azure-JP]: "a nightly backup
       reaching 100 ms can be acceptable" - expectations depend on the system's needs);
    2. the device's expectation from ``latency_standard``: a profile's design latency
       (``design``), the Windows 25 ms guidance (``windows``) or its latency class
       (``expected``).

    Windows with no target (null: spindles, and devices nothing is known of) are judged by
    ``solaris_service_time`` with [Goodus]'s bands, the same standard's figures read with
    %busy, so each window's response time is judged by one rule.
    """
    w = dev.windows
    names = ("target_ms", "target_r_ms", "target_w_ms", "target_kind", "target_src")
    if w.height == 0:
        return pl.DataFrame(schema={n: pl.String if n in ("target_kind", "target_src")
                                    else pl.Float64 for n in names})
    # with_columns broadcasts literals to the frame's height (select would give one row).
    return w.with_columns(*latency_target_exprs(ctx, dev)).select(*names)


# ------------------------------------------------------------------------------------------
# runs of matched windows
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """Consecutive matched windows of one device (no gap in the data between them).

    Attributes:
        part: the run's windows (rows of ``DeviceContext.windows``, time order).
        level: the highest window level in the run (see :func:`level_expr`).
        score: the highest window score in the run (rule-defined "how bad").
        worst: the run's window with the highest score, as a row dict.
    """

    part: pl.DataFrame
    level: int
    score: float
    worst: dict[str, Any]

    @property
    def start(self) -> datetime:
        """UTC start of the run's first interval."""
        return self.part["window_start"].min()  # type: ignore[return-value]

    @property
    def end(self) -> datetime:
        """UTC end of the run's last interval."""
        return self.part["window_end"].max()  # type: ignore[return-value]

    @property
    def windows(self) -> int:
        return self.part.height

    @property
    def intervals(self) -> int:
        """Sampling intervals (rows) the run covers."""
        return int(self.part["intervals"].sum())

    @property
    def span_s(self) -> float:
        """Seconds of data the run covers."""
        return float(self.part["span_s"].sum())

    @property
    def sustained(self) -> bool:
        """At least :data:`SUSTAINED_MIN_INTERVALS` samples or :data:`SUSTAINED_MIN_S` s."""
        return is_sustained(self.intervals, self.span_s)

    @property
    def severity(self) -> Severity:
        """Default severity for the run's level (1 warning, 2 or more critical)."""
        return LEVEL_SEVERITY[min(self.level, 2)] if self.level >= 1 else "info"

    def _values(self, col: str | pl.Expr) -> npt.NDArray[np.float64] | None:
        """A column (or expression) of the run as floats (null -> NaN), or None when the
        column is absent."""
        if not isinstance(col, str):
            return self.part.select(col.cast(pl.Float64)).to_series().to_numpy()
        if col not in self.part.columns:
            return None
        return self.part[col].cast(pl.Float64).to_numpy()

    def wmean(self, col: str, rate_col: str) -> float | None:
        """Mean of a per-operation column over the run, weighted by operations completed
        (``rate_col`` x window seconds): an idle window's 0.00 await weighs nothing."""
        v, r = self._values(col), self._values(rate_col)
        if v is None or r is None:
            return None
        w = r * self.part["span_s"].to_numpy()
        ok = np.isfinite(v) & np.isfinite(w)
        den = float(w[ok].sum())
        return float((v[ok] * w[ok]).sum()) / den if den > 0 else None

    def tmean(self, col: str | pl.Expr) -> float | None:
        """Time-weighted mean of a rate or gauge (column name or expression) over the run."""
        v = self._values(col)
        if v is None:
            return None
        w = self.part["span_s"].to_numpy()
        ok = np.isfinite(v)
        den = float(w[ok].sum())
        return float((v[ok] * w[ok]).sum()) / den if den > 0 else None

    def max(self, col: str | pl.Expr) -> float | None:
        """Highest value of a column or expression over the run's windows (None if all null)."""
        v = self._values(col)
        if v is None:
            return None
        v = v[np.isfinite(v)]
        return float(v.max()) if v.size else None


def is_sustained(intervals: int, span_s: float) -> bool:
    """Whether ``intervals`` samples covering ``span_s`` seconds count as sustained."""
    return intervals >= SUSTAINED_MIN_INTERVALS or span_s >= SUSTAINED_MIN_S


@dataclass(frozen=True)
class Matches:
    """The outcome of :func:`find_runs` on one device.

    Attributes:
        runs: the worst runs, worst first (highest level, then highest score), at most
            the ``limit`` given.
        matched_windows: windows in every counted run (not only the reported ones).
        run_count: number of counted runs.
        total_windows: the device's windows.
        window_s: window length (for the evidence note).
    """

    runs: list[Run]
    matched_windows: int
    run_count: int
    total_windows: int
    window_s: float

    def __bool__(self) -> bool:
        return bool(self.runs)


def _aligned(windows: pl.DataFrame, x: pl.Expr | pl.Series | str) -> pl.Series:
    if isinstance(x, pl.Series):
        return x
    if isinstance(x, str):
        return windows[x]
    return windows.select(x).to_series()


def find_runs(windows: pl.DataFrame, level: pl.Expr | pl.Series | str,
              score: pl.Expr | pl.Series | str | None = None, *, window_s: float,
              limit: int = MAX_FINDINGS_PER_DEVICE, sustained_only: bool = False,
              min_level: int = 1) -> Matches:
    """Group consecutive windows with ``level >= min_level`` into runs and keep the worst.

    Args:
        windows: one device's windows (``DeviceContext.windows``: sorted, with ``window``,
            ``window_start``, ``window_end``, ``intervals``, ``span_s``), possibly with
            extra columns the rule added (they stay in each run's ``part``).
        level: per-window level - an expression over ``windows``, an aligned Series, or the
            name of a column of ``windows``; null = 0.
        score: per-window badness (same forms) for ranking runs and picking each run's
            worst window; None ranks by level, then by time.
        window_s: the analysis window length (``AnalysisContext.window_s``).
        limit: how many runs to return.
        sustained_only: count and return only sustained runs (:attr:`Run.sustained`).
        min_level: windows below this level do not match.

    Two windows are consecutive when their ``window`` indexes differ by one, exactly as
    ``windows.runs`` decides. A run's level is its highest window level. The run search is
    numpy over the aligned arrays (no query per run): cheap for thousands of windows.
    """
    total = windows.height
    if total == 0:
        return Matches([], 0, 0, 0, window_s)
    lvl = _aligned(windows, level).cast(pl.Int64).fill_null(0).to_numpy()
    m = lvl >= min_level
    if not m.any():
        return Matches([], 0, 0, total, window_s)
    if score is None:
        sc = np.zeros(total)
    else:
        sc = _aligned(windows, score).cast(pl.Float64).fill_null(-math.inf).to_numpy().copy()
        sc[np.isnan(sc)] = -math.inf
    idx = windows["window"].cast(pl.Int64).to_numpy()
    step = np.diff(idx) == 1
    starts = np.flatnonzero(m & ~np.r_[False, m[:-1] & step])
    ends = np.flatnonzero(m & ~np.r_[m[1:] & step, False])
    # Neutral values outside the runs, so reduceat over [start, next start) sees only the run.
    iv = np.where(m, windows["intervals"].cast(pl.Float64).to_numpy(), 0.0)
    span = np.where(m, windows["span_s"].cast(pl.Float64).to_numpy(), 0.0)
    run_level = np.maximum.reduceat(np.where(m, lvl, 0), starts)
    run_score = np.maximum.reduceat(np.where(m, sc, -math.inf), starts)
    run_iv = np.add.reduceat(iv, starts)
    run_span = np.add.reduceat(span, starts)
    keep = np.ones(starts.size, dtype=bool)
    if sustained_only:
        keep = (run_iv >= SUSTAINED_MIN_INTERVALS) | (run_span >= SUSTAINED_MIN_S)
    starts, ends = starts[keep], ends[keep]
    run_level, run_score = run_level[keep], run_score[keep]
    matched = int((ends - starts + 1).sum())
    order = np.lexsort((starts, -run_score, -run_level))[:limit]
    runs = []
    for k in order:
        s0, e0 = int(starts[k]), int(ends[k])
        worst = s0 + int(np.argmax(sc[s0:e0 + 1]))
        runs.append(Run(part=windows.slice(s0, e0 - s0 + 1), level=int(run_level[k]),
                        score=float(run_score[k]), worst=windows.row(worst, named=True)))
    return Matches(runs, matched, int(starts.size), total, window_s)


# ------------------------------------------------------------------------------------------
# evidence and findings
# ------------------------------------------------------------------------------------------
def matched_evidence(found: Matches, run: Run | None = None,
                     timeline: RelativeTimeline | None = None) -> Evidence:
    """Evidence ``windows_matched``: how many windows matched, in how many runs, and how
    long the reported run is (the preamble: a finding says how many windows matched)."""
    label = window_label(found.window_s, timeline)
    note = (f"{found.matched_windows} of {found.total_windows} {label} windows in "
            f"{found.run_count} run(s)")
    if run is not None:
        note += f"; this run: {run.windows} window(s), {run.intervals} sample(s)"
    if found.run_count > len(found.runs):
        note += f"; the worst {len(found.runs)} run(s) reported"
    return Evidence("windows_matched", float(found.matched_windows), "windows", note=note)


def run_finding(rule: str, dev: DeviceContext, run: Run, found: Matches, *, title: str,
                evidence: Sequence[Evidence], explanation: str, suggestion: str,
                source: str, severity: Severity | None = None) -> Finding:
    """A finding about one run: its window is the run's span, ``windows_matched`` evidence
    is appended, severity defaults to the run's (:attr:`Run.severity`)."""
    return Finding(rule=rule, severity=severity or run.severity, device=dev.key,
                   window_start=run.start, window_end=run.end, title=title,
                   evidence=[*evidence, matched_evidence(found, run, dev.timeline)],
                   explanation=explanation, suggestion=suggestion, source=source)


def whole_span(dev: DeviceContext) -> tuple[datetime, datetime] | None:
    """(first interval's start, last interval's end) of a device's data; None when empty."""
    if dev.start is None or dev.end is None:
        return None
    return dev.start, dev.end


def span_finding(rule: str, device: str | None, span: tuple[datetime, datetime], *,
                 severity: Severity, title: str, evidence: Sequence[Evidence],
                 explanation: str, suggestion: str, source: str) -> Finding:
    """A finding about a whole span (a data set, or a "cannot judge" note)."""
    return Finding(rule=rule, severity=severity, device=device, window_start=span[0],
                   window_end=span[1], title=title, evidence=list(evidence),
                   explanation=explanation, suggestion=suggestion, source=source)


def devices_to_judge(ctx: AnalysisContext, excluded: frozenset[str] = frozenset()
                     ) -> list[DeviceContext]:
    """The devices a per-device rule judges: with windows, not of an ``excluded`` kind, and
    not a part whose parent carries the same I/O (:func:`judged_via_parent`)."""
    return [d for d in ctx.devices.values()
            if d.windows.height and d.kind not in excluded and not judged_via_parent(ctx, d)]


def judged_via_parent(ctx: AnalysisContext, dev: DeviceContext) -> bool:
    """True for a partition or datafile whose parent device is in the data too: the parent
    carries the same I/O, so judging both would report one problem twice."""
    if dev.kind not in PART_KINDS or dev.parent is None:
        return False
    return any(d.device == dev.parent and d.host == dev.host for d in ctx.devices.values())


# ------------------------------------------------------------------------------------------
# number formatting for titles (evidence keeps the raw numbers)
# ------------------------------------------------------------------------------------------
def subject(dev: DeviceContext) -> str:
    """A title's opening ``sdb: ``; a name that ends in a colon itself (Windows drives ``D:``)
    takes only the space, so a title never reads ``D:: 60 % busy``."""
    return f"{dev.key} " if dev.key.endswith(":") else f"{dev.key}: "


def fmt_num(v: float | None, digits: int = 1) -> str:
    """``1,246.4``; integers without decimals (``5,000``); ``n/a`` for None."""
    if v is None or not math.isfinite(v):
        return "n/a"
    if abs(v - round(v)) < 10 ** -(digits + 1) and abs(v) >= 1:
        return f"{round(v):,}"
    return f"{v:,.{digits}f}"


def fmt_ms(v: float | None) -> str:
    """``137.8 ms``."""
    return f"{fmt_num(v)} ms"


def fmt_pct(v: float | None) -> str:
    """``100 %``, ``4.3 %``."""
    return f"{fmt_num(v)} %"


def fmt_rate(v: float | None, unit: str = "IO/s") -> str:
    """``5,000 IO/s``."""
    return f"{fmt_num(v)} {unit}"


def fmt_ratio(v: float | None) -> str:
    """``2.4x``."""
    return f"{fmt_num(v)}x"
