"""Statistics per (device pair, metric, side), vectorised across all pairs in polars and numpy,
the batch means that bound the cost and the autocorrelation, and the verdict per change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from iogauge.analysis.compare.results import (
    _LATENCY,
    _SIZE_OF,
    _TESTED,
    _THROUGHPUT,
    METRICS,
    MWU_MIN_N,
    P95_MIN_EXPECTED,
    SINGLE_VALUE_NOTE,
    Direction,
    MetricChange,
    MetricSpec,
    TestName,
    WaitChange,
)
from iogauge.analysis.compare.stats import chi2_2x2_p, mann_whitney_p, welch_p


@dataclass(frozen=True)
class _Side:
    """Samples of one side of one group: how many, their plain mean and variance."""

    n: int
    mean: float
    var: float


@dataclass(frozen=True)
class _Tested:
    test: TestName
    p: float | None


def _valid(spec: MetricSpec) -> pl.Expr:
    """Rows that carry a value of ``spec``: not null, and for a per-request value an
    interval in which requests completed (or whose operation count is unknown)."""
    ok = pl.col(spec.column).is_not_null()
    if spec.weight is not None:
        ok &= pl.col(spec.weight).is_null() | (pl.col(spec.weight) > 0)
    return ok


_SUMMED = tuple(m for m in METRICS if m.kind != "p95")
_P95 = tuple(m for m in METRICS if m.kind == "p95")


def _sums(spec: MetricSpec) -> list[pl.Expr]:
    """Sufficient statistics of a weighted mean, per row (before any grouping): the valid
    flag, value x weight, weight, and the value (for the plain-mean fallback of a per-request
    metric whose operation counts are all 0 or unknown)."""
    ok = _valid(spec)
    v = pl.when(ok).then(pl.col(spec.column)).otherwise(0.0)
    if spec.kind == "rate":
        w = pl.when(ok).then(pl.col("dt")).otherwise(0.0)
    else:
        w = pl.when(ok).then(pl.col(spec.weight or "dt").fill_null(0.0) * pl.col("dt"))\
            .otherwise(0.0)
    out = [ok.cast(pl.Int64).alias(f"n:{spec.name}"), (v * w).alias(f"vw:{spec.name}"),
           w.alias(f"w:{spec.name}")]
    if spec.kind == "per_op":  # a rate's weight (interval_s) is never 0: no fallback
        out.append(v.alias(f"v:{spec.name}"))
    return out


def _from_sums(spec: MetricSpec) -> pl.Expr:
    """The weighted mean from summed sufficient statistics; null where nothing was valid."""
    n, vw, w = (pl.col(f"{p}:{spec.name}") for p in ("n", "vw", "w"))
    mean = pl.when(n == 0).then(None).when(w > 0).then(vw / w)
    if spec.kind == "per_op":
        return mean.otherwise(pl.col(f"v:{spec.name}") / n).alias(spec.name)
    return mean.otherwise(None).alias(spec.name)


def _batches(stacked: pl.DataFrame, max_samples: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(samples, raw): the samples the tests use, one row per (group, side, batch) with every
    metric, and the whole-side summary per (group, side) with ``n:<metric>`` counts.

    Consecutive intervals of disk statistics are correlated (a busy second is followed by
    a busy second), so a day of 1 s samples is not 86,400 independent observations. When a
    side of a pair has more than ``max_samples`` intervals, both sides are cut into batches
    of consecutive intervals of one common duration (the longer side's span /
    ``max_samples``) and each batch's summary (its weighted mean, or its p95) is one sample:
    the method of batch means (Law & Kelton, Simulation Modeling and Analysis, 3rd ed.,
    §9.5.3), which also bounds the cost of the tests. Equal durations keep the two sides'
    samples alike. Pairs with fewer intervals keep one sample per interval; column
    ``batched`` says which. The whole-side means are summed from the batches' sufficient
    statistics (one pass over the intervals); only the p95 needs the intervals again.
    """
    gs = ["g", "side"]
    t = pl.col("ts").dt.epoch("us")
    width = (pl.when(pl.len().over(gs) > max_samples)
             .then((t.max().over(gs) - t.min().over(gs) + max_samples) // max_samples))
    keyed = stacked.with_columns(_w=width.max().over("g") if stacked.height else width)
    sums = [e for spec in _SUMMED for e in _sums(spec)]
    sum_cols = [e.meta.output_name() for e in sums]
    p95 = [pl.when(_valid(m)).then(pl.col(m.column)) for m in _P95]

    big = keyed.filter(pl.col("_w").is_not_null())
    small = keyed.filter(pl.col("_w").is_null())
    parts: list[pl.DataFrame] = []
    if big.height:
        b = (t - t.min().over(gs)) // pl.col("_w")
        parts.append(big.with_columns(b.alias("_b"), *sums)
                     .group_by("g", "side", "_b")
                     .agg(pl.lit(value=True).alias("batched"),
                          *[pl.col(c).sum() for c in sum_cols],
                          *[e.quantile(0.95, interpolation="linear").alias(m.name)
                            for e, m in zip(p95, _P95, strict=True)]))
    if small.height:
        parts.append(small.select(
            "g", "side", t.alias("_b"), pl.lit(value=False).alias("batched"),
            *sums, *[e.alias(m.name) for e, m in zip(p95, _P95, strict=True)]))
    cells = pl.concat(parts, how="vertical_relaxed")
    samples = cells.select("g", "side", "_b", "batched",
                           *[_from_sums(m) for m in _SUMMED], *[m.name for m in _P95])
    raw = (cells.group_by(gs).agg(*[pl.col(c).sum() for c in sum_cols])
           .with_columns(*[_from_sums(m) for m in _SUMMED]))
    # the p95 of the side's intervals (not of its batches)
    raw_p95 = stacked.group_by(gs).agg(
        *[e.quantile(0.95, interpolation="linear").alias(m.name) for e, m in
          zip(p95, _P95, strict=True)],
        *[_valid(m).sum().alias(f"n:{m.name}") for m in _P95])
    return samples, raw.join(raw_p95, on=gs, how="left")


def _raw_dict(raw: pl.DataFrame) -> dict[tuple[str, int, int], tuple[int, float]]:
    """(metric, group, side) -> (intervals with a value, whole-side value)."""
    out: dict[tuple[str, int, int], tuple[int, float]] = {}
    for r in raw.iter_rows(named=True):
        for spec in METRICS:
            n, v = r[f"n:{spec.name}"], r[spec.name]
            if n and v is not None:
                out[(spec.name, r["g"], r["side"])] = (int(n), float(v))
    return out


def _sample_stats(sub: pl.DataFrame) -> dict[tuple[int, int], _Side]:
    """Per (group, side) of ``sub`` (columns g, side, v): n, mean, variance (ddof 1)."""
    stats = sub.group_by("g", "side").agg(
        pl.len().alias("n"), pl.col("v").mean().alias("mean"),
        pl.col("v").var(ddof=1).fill_null(0.0).alias("var"))
    return {(r["g"], r["side"]): _Side(r["n"], r["mean"], r["var"])
            for r in stats.iter_rows(named=True)}


def _mwu(sub: pl.DataFrame, groups: list[int]) -> dict[int, tuple[float, float]]:
    """Per group: (rank sum of the before side, tie term sum(t^3 - t)).

    One sort by (group, value) serves both: runs of equal values are the ties, and a run's
    average rank is its start within the group plus (length + 1) / 2. The run arithmetic is
    done on the sorted columns with numpy (no per-row Python), far cheaper than a windowed
    rank plus a group-by on float values.
    """
    if not groups:
        return {}
    part = (sub.filter(pl.col("g").is_in(groups)).select("g", "side", "v")
            .sort(["g", "v"]))
    g = part["g"].to_numpy()
    v = part["v"].to_numpy()
    before = part["side"].to_numpy() == 0
    n = g.shape[0]
    new_group = np.empty(n, dtype=bool)
    new_group[0] = True
    np.not_equal(g[1:], g[:-1], out=new_group[1:])
    new_run = new_group.copy()
    new_run[1:] |= v[1:] != v[:-1]
    run_start = np.flatnonzero(new_run)
    run_len = np.diff(np.append(run_start, n))
    group_start = np.flatnonzero(new_group)
    # index of each run's group, and the run's start position within its group (0-based)
    run_group = np.searchsorted(group_start, run_start, side="right") - 1
    run_rank = run_start - group_start[run_group] + (run_len + 1) / 2.0
    rank = np.repeat(run_rank, run_len)
    group_of_row = np.repeat(run_group, run_len)
    rank_sum_b = np.bincount(group_of_row, weights=np.where(before, rank, 0.0),
                             minlength=group_start.shape[0])
    t = run_len.astype(np.float64)
    tie = np.bincount(run_group, weights=t * t * t - t, minlength=group_start.shape[0])
    ids = g[group_start]
    return {int(ids[i]): (float(rank_sum_b[i]), float(tie[i])) for i in range(ids.shape[0])}


def _above_p95(sub: pl.DataFrame, groups: list[int]) -> dict[int, tuple[int, int]]:
    """Per group: samples of (before, after) above the pooled 95th percentile."""
    if not groups:
        return {}
    part = sub.filter(pl.col("g").is_in(groups))
    q = pl.col("v").quantile(0.95, interpolation="linear").over("g")
    counts = (part.with_columns(above=pl.col("v") > q)
              .group_by("g").agg(
                  (pl.col("above") & (pl.col("side") == 0)).sum().alias("ab"),
                  (pl.col("above") & (pl.col("side") == 1)).sum().alias("aa")))
    return {r["g"]: (int(r["ab"]), int(r["aa"])) for r in counts.iter_rows(named=True)}


def _test_groups(sub: pl.DataFrame, kind: str, stats: dict[tuple[int, int], _Side],
                 batched: frozenset[int] = frozenset()) -> dict[int, _Tested]:
    """Choose and run the test for every group with samples on both sides.

    ``sub``: the samples (g, side, v); ``batched``: groups whose samples are batch summaries
    (for those, the p95 samples are per-batch p95s and Mann-Whitney compares them).
    """
    groups = sorted({g for g, s in stats if s == 0 and (g, 1) in stats})
    out: dict[int, _Tested] = {}
    mwu_groups: list[int] = []
    p95_groups: list[int] = []
    for g in groups:
        b, a = stats[(g, 0)], stats[(g, 1)]
        if min(b.n, a.n) < 2:
            out[g] = _Tested("single value", None)
        elif kind == "p95" and g not in batched:
            p95_groups.append(g)
        elif min(b.n, a.n) >= MWU_MIN_N:
            mwu_groups.append(g)
        else:
            out[g] = _Tested("welch-t", welch_p(b.mean, b.var, b.n, a.mean, a.var, a.n))
    for g, (rb, tie) in _mwu(sub, mwu_groups).items():
        out[g] = _Tested("mann-whitney",
                         mann_whitney_p(rb, stats[(g, 0)].n, stats[(g, 1)].n, tie))
    for g, (ab, aa) in _above_p95(sub, p95_groups).items():
        nb, na = stats[(g, 0)].n, stats[(g, 1)].n
        share = (ab + aa) / (nb + na)
        if min(nb, na) * share >= P95_MIN_EXPECTED:
            out[g] = _Tested("p95-chi2", chi2_2x2_p(ab, nb, aa, na))
        else:
            out[g] = _Tested("effect size only", None)
    return out


@dataclass(frozen=True)
class _Verdict:
    change_pct: float | None
    ratio: float | None
    direction: Direction
    significant: bool
    note: str


def _judge(better: str, before: float, after: float, tested: _Tested, alpha: float,
           min_effect_pct: float, resolution: float = 0.0) -> _Verdict:
    """Change, ratio, direction and significance of one metric. ``resolution``: how far
    apart the two values may be from the rounding of the report alone (a printed "0" ms
    average is anything below 0.5 ms); a difference within it is no change."""
    if before != 0.0:
        change_pct: float | None = (after - before) / abs(before) * 100.0
        ratio: float | None = after / before
    elif after == 0.0:
        change_pct, ratio = 0.0, 1.0
    else:
        change_pct, ratio = None, None
    big = change_pct is None or abs(change_pct) >= min_effect_pct
    notes: list[str] = []
    if big and resolution > 0.0 and abs(after - before) <= resolution:
        big = False
        notes.append(f"the difference is within the report's rounding (+-{resolution:.3g})")
    if change_pct is None:
        notes.append("was 0 before")
    if tested.test in _TESTED:
        p = tested.p if tested.p is not None else 1.0
        significant = p < alpha and big
        beyond = significant
        if p < alpha and not big:
            notes.append(f"detectable (p={p:.2g}) but smaller than the {min_effect_pct:g} % "
                         "minimum effect: not a finding")
        elif big and p >= alpha and change_pct is not None:
            notes.append(f"{change_pct:+.1f} % is within the noise (p={p:.2g} >= "
                         f"alpha={alpha:g})")
    else:
        significant = False
        beyond = big
        if tested.test == "single value":
            notes.append(SINGLE_VALUE_NOTE)
        else:
            notes.append("too few samples above the 95th percentile to test a peak change; "
                         "judged by the size of the change")
    direction: Direction
    if not beyond:
        direction = "same"
    elif better == "neutral":
        direction = "changed"
    elif (after < before) == (better == "lower"):
        direction = "better"
    else:
        direction = "worse"
    return _Verdict(change_pct, ratio, direction, significant, "; ".join(notes))


def _add_note(c: MetricChange | WaitChange, text: str) -> None:
    c.note = f"{c.note}; {text}" if c.note else text


def _cross_notes(changes: list[MetricChange]) -> None:
    """Notes that need several metrics of one pair: a request-size change makes IOPS and
    per-request latency incomparable ([Goodus]: read-ahead turns many small requests into
    few large ones), and throughput and latency moving together may be a load change."""
    by = {c.metric: c for c in changes}

    def moved(m: str) -> MetricChange | None:
        c = by.get(m)
        return c if c is not None and c.direction != "same" else None

    size = moved("areq_kB")
    sized: set[str] = set()
    for m, size_metric in _SIZE_OF.items():
        c, s = moved(m), moved(size_metric) or size
        if c is None or s is None or c.ratio is None or s.ratio is None:
            continue
        if (c.ratio < 1.0) != (s.ratio < 1.0):
            # Opposite moves: the same data in fewer, larger requests (or more, smaller
            # ones). IOPS alone is then neither better nor worse.
            c.direction = "changed"
            how = "fewer, larger" if c.ratio < 1.0 else "more, smaller"
            _add_note(c, f"{how} requests ({s.metric} {s.before:.1f} -> {s.after:.1f} kB, "
                      f"x{_fmt_ratio(s.ratio)}): IOPS alone is not comparable; compare MB/s")
            sized.add(m)
    lat = [c for m in _LATENCY if (c := moved(m)) is not None]
    thr = [c for m in _THROUGHPUT if (c := moved(m)) is not None and m not in sized]
    for c in lat:
        if size is not None:
            _add_note(c, f"mean request size changed ({size.before:.1f} -> {size.after:.1f} "
                      "kB): a larger request takes longer, a smaller one less")
    if size is not None:
        return  # the size change explains latency and throughput moving together
    # Throughput and latency moving the same way is the signature of a load change (more
    # offered load raises both: queueing); throughput up with latency down is the device.
    for t in lat:
        same_way = [c for c in thr if t.ratio is not None and c.ratio is not None
                    and (t.ratio > 1.0) == (c.ratio > 1.0)]
        if not same_way:
            continue
        verb = "rose" if (t.ratio or 0.0) > 1.0 else "fell"
        _add_note(t, "the load " + verb + " too (" + ", ".join(
            f"{c.metric} {_fmt_pct(c.change_pct)}" for c in same_way[:2])
            + "): part of this may be the load, not the device")
        for c in same_way:
            if "offered load" not in c.note:
                _add_note(c, f"latency {verb} too ({t.metric} {_fmt_pct(t.change_pct)}): a "
                          "throughput change may just be a change of the offered load")


def _fmt_pct(v: float | None) -> str:
    return "from 0" if v is None else f"{v:+.1f} %"


def _fmt_ratio(v: float | None) -> str:
    return "inf" if v is None else f"{v:.2f}"
