"""Compare two datasets (before/after a change, HDD vs SSD): per device and metric, the change
and whether it is beyond noise.

[Goodus] §4.3-4.4 judges a tuning change (UFS ``maxcontig`` 6 -> 128) by putting the
``iostat -x`` lines of the two runs side by side; [Insight-SSD9] §2 compares HDD and SSD by the
average wait per ``db file scattered read`` (Time Waited / Waits). This module does that for
any two SampleFrames (and their Oracle wait events) and says, for every change, whether the
data can tell it from noise.

What is compared, per device pair (devices are matched by name; see :func:`compare` for
``device_map`` and the automatic pairing of the one busy device of each side):

* rates and gauges -- ``iops``, ``r_iops``, ``w_iops``, ``MBps``, ``util_pct``, ``aqu_sz``:
  time-weighted means (weight = ``interval_s``);
* per-request values -- ``await_ms``, ``r_await_ms``, ``w_await_ms``, ``svctm_ms``,
  ``areq_kB``, ``r_areq_kB``, ``w_areq_kB``: means weighted by the operations completed (an
  idle interval's 0.00 await is "nothing measured", not a fast request: SampleFrame), the
  same weighting as :mod:`iogauge.analysis.windows`;
* the peak ``await_p95_ms``: the 95th percentile of the per-interval await. [MS-Azure-JP] (Azure
  Standard SSD vs HDD): the same ~3-4 ms averages hide peaks of ~25 vs ~50 ms -- compare
  peaks, not only means.

Missing totals are derived per interval where the parts exist: ``iops`` = r + w + d,
``kBps`` = r + w + d, ``await_ms`` = the op-weighted mean of r_await and w_await,
``areq_kB`` = kBps / iops (Solaris ``iostat -x`` prints no request size; [Goodus]'s
read-ahead effect *is* a request-size change).

Beyond noise. Each interval is one sample (or each batch, below). With several samples on
both sides:

* both sides >= :data:`MWU_MIN_N` samples: Mann-Whitney U (normal approximation with tie and
  continuity correction). Rank-based, so one latency spike -- latency distributions are
  skewed -- cannot make or break a verdict;
* 2 .. 7 samples on the smaller side: Welch's t-test (unequal variances; Student's t
  distribution, so few samples give honest, wide p-values -- Mann-Whitney's smallest
  two-sided p for 3 vs 3 samples is 0.1 and could never reach alpha);
* the p95 peak: a quantile test (Mood's median test generalised to the 95th percentile):
  samples above the pooled p95 counted per side, chi-square on the 2x2 table with Yates'
  correction, when at least :data:`P95_MIN_EXPECTED` samples of each side are expected
  above it; otherwise the size of the change alone decides ("effect size only"). Batched
  pairs compare their per-batch p95s with Mann-Whitney instead.

A change is **significant** when p < alpha (:data:`ALPHA` = 0.01) *and* the relative change
is at least :data:`MIN_EFFECT_PCT` (5 %): with a million samples a 1 % shift is detectable
but is not a finding. With one value on a side (one report interval: a Statspack report, a
quoted iostat line) noise cannot be tested: the test is ``"single value"``, ``significant``
is False and the direction is judged by the size of the change only.

Per-interval samples of disk statistics are autocorrelated (a busy second is followed by a
busy second), which makes p-values optimistic. Two guards: the minimum effect size, and batch
means -- a pair with more than :data:`MAX_SAMPLES` intervals on a side is tested on that many
batches of consecutive intervals (one common duration on both sides), each batch's mean (or
p95) being one sample (see :func:`_batches`). That also bounds the cost of the tests.

No SciPy: the t distribution's tail comes from the regularised incomplete beta function
(continued fraction, Numerical Recipes 3rd ed. §6.4) and the normal tail from ``math.erfc``;
unit tests check them against closed forms and table values. The sample work is vectorised
across all device pairs at once: means, variances, batch sums and quantiles in polars, ranks
and ties from one sort plus numpy run arithmetic; Python only loops over (pair, metric)
results.

Notes that need several metrics (:func:`_cross_notes`): IOPS that moved opposite to the
request size is ``changed``, not better or worse ([Goodus]: read-ahead turns many small reads
into few large ones); a latency change that comes with a request-size change says so; and
throughput and latency moving the same way is flagged as a possible change of offered load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl

from iogauge.analysis.summary import IDLE_IOPS
from iogauge.errors import IogaugeError
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame

#: Significance level. 0.01 rather than 0.05: a comparison tests a dozen metrics on many
#: devices, and a reported change should survive that many looks.
ALPHA = 0.01
#: Smallest relative change (in %) that counts as a finding even when it is significant.
MIN_EFFECT_PCT = 5.0
#: Mann-Whitney's normal approximation is used from this many samples per side (below it
#: the approximation is poor and Welch's t is used instead).
MWU_MIN_N = 8
#: A side with more intervals than this is tested on this many batch means (see
#: :func:`_samples`).
MAX_SAMPLES = 1000
#: The p95 quantile test needs this many samples of each side expected above the pooled p95
#: (the usual chi-square rule: every expected cell count >= 5).
P95_MIN_EXPECTED = 5.0

#: The note of every change with one value on a side.
SINGLE_VALUE_NOTE = "single value: cannot test noise, judged by the size of the change"

Direction = Literal["better", "worse", "same", "changed"]
TestName = Literal["welch-t", "mann-whitney", "p95-chi2", "single value", "effect size only"]
_TESTED: frozenset[str] = frozenset({"welch-t", "mann-whitney", "p95-chi2"})


class CompareError(IogaugeError):
    """The two datasets cannot be compared (nothing in common, bad device map)."""


@dataclass(frozen=True)
class MetricSpec:
    """One compared metric.

    Attributes:
        name: the metric as reported (carries its unit).
        title: short column title for renderers.
        unit: unit spelled out.
        column: the per-interval column it is computed from.
        kind: ``rate`` (time-weighted mean), ``per_op`` (op-weighted mean) or ``p95`` (95th
            percentile of the per-interval values).
        weight: the operations column that weights a ``per_op`` value; an interval where it
            is 0 completed nothing and has no value of this metric.
        better: ``lower``, ``higher`` or ``neutral`` (a workload attribute such as request
            size is neither better nor worse: a change is ``changed``).
    """

    name: str
    title: str
    unit: str
    column: str
    kind: Literal["rate", "per_op", "p95"]
    weight: str | None
    better: Literal["lower", "higher", "neutral"]


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("iops", "IOPS", "1/s", "iops", "rate", None, "higher"),
    MetricSpec("r_iops", "r/s", "1/s", "r_iops", "rate", None, "higher"),
    MetricSpec("w_iops", "w/s", "1/s", "w_iops", "rate", None, "higher"),
    MetricSpec("MBps", "MB/s", "MB/s", "MBps", "rate", None, "higher"),
    MetricSpec("await_ms", "await", "ms", "await_ms", "per_op", "iops", "lower"),
    MetricSpec("await_p95_ms", "await p95", "ms", "await_ms", "p95", "iops", "lower"),
    MetricSpec("r_await_ms", "r_await", "ms", "r_await_ms", "per_op", "r_iops", "lower"),
    MetricSpec("w_await_ms", "w_await", "ms", "w_await_ms", "per_op", "w_iops", "lower"),
    MetricSpec("svctm_ms", "svctm", "ms", "svctm_ms", "per_op", "iops", "lower"),
    MetricSpec("util_pct", "%util", "%", "util_pct", "rate", None, "lower"),
    MetricSpec("aqu_sz", "aqu-sz", "requests", "aqu_sz", "rate", None, "lower"),
    MetricSpec("areq_kB", "req size", "kB", "areq_kB", "per_op", "iops", "neutral"),
    MetricSpec("r_areq_kB", "read size", "kB", "r_areq_kB", "per_op", "r_iops", "neutral"),
    MetricSpec("w_areq_kB", "write size", "kB", "w_areq_kB", "per_op", "w_iops", "neutral"),
)
METRICS_BY_NAME: dict[str, MetricSpec] = {m.name: m for m in METRICS}
_LATENCY = ("await_ms", "await_p95_ms", "r_await_ms", "w_await_ms", "svctm_ms")
_THROUGHPUT = ("iops", "r_iops", "w_iops", "MBps")
#: IOPS metric -> the request-size metric that explains a change of it.
_SIZE_OF = {"iops": "areq_kB", "r_iops": "r_areq_kB", "w_iops": "w_areq_kB"}

#: Oracle wait events of the Idle class (Oracle Database Reference, "Classes of Wait Events"
#: and V$EVENT_NAME WAIT_CLASS = 'Idle'): a session waiting for work, not for I/O. Reports
#: before 10g print no wait class, so they are recognised by name.
IDLE_EVENTS: frozenset[str] = frozenset({
    "SQL*Net message from client", "SQL*Net more data from client",
    "SQL*Net message from dblink", "rdbms ipc message", "pmon timer", "smon timer",
    "jobq slave wait", "wakeup time manager", "virtual circuit status", "dispatcher timer",
    "pipe get", "PX Idle Wait", "PX Deq: Execution Msg", "PX Deq: Table Q Normal",
    "Streams AQ: waiting for messages in the queue", "Streams AQ: qmn slave idle wait",
    "Streams AQ: qmn coordinator idle wait", "queue messages", "class slave wait",
    "DIAG idle wait", "Space Manager: slave idle wait", "PL/SQL lock timer",
    "gcs remote message", "ges remote message", "LogMiner: client waiting for transaction",
    "watchdog main loop", "VKTM Logical Idle Wait", "heartbeat redo informer",
    "AQPC idle", "LGWR worker group idle", "lreg timer", "pman timer", "Data Guard: Timer",
    "OFS idle", "shared server idle wait", "null event",
})
#: A report holds the same event in several sections; one is read, in this order: the
#: foreground list (what sessions waited for), the full list, the top-events table, and
#: the background list only for events that appear nowhere else.
_SECTION_RANK: dict[str, int] = {
    "foreground wait events": 0, "wait events": 1, "wait events (fg and bg)": 2,
    "top timed events": 3, "background wait events": 4,
}


# ---------------------------------------------------------------------------------------------
# result types
# ---------------------------------------------------------------------------------------------
def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


@dataclass
class MetricChange:
    """One metric of one device pair, before and after.

    Attributes:
        device_before, device_after: device keys on each side (``host:device`` when a side
            holds several hosts, else the device name).
        metric: a :data:`METRICS` name (carries the unit); unit: the unit spelled out.
        before, after: the summary value of each side (weighted means, or the p95).
        change_pct: (after - before) / before x 100; None when before is 0 and after is not.
        ratio: after / before; None when before is 0 and after is not.
        direction: ``better``, ``worse``, ``same`` (not beyond noise / below the minimum
            effect) or ``changed`` (beyond noise on a metric that is neither better nor
            worse, or IOPS that moved with the request size).
        significant: p < alpha and |change| >= the minimum effect. Always False for
            untested changes (``single value``, ``effect size only``).
        test: ``welch-t``, ``mann-whitney``, ``p95-chi2``, ``single value`` or
            ``effect size only``.
        p_value: two-sided p of the test; None when untested.
        n_before, n_after: samples (intervals) on each side.
        note: why the verdict is what it is, when that is not obvious.
    """

    device_before: str
    device_after: str
    metric: str
    unit: str
    before: float
    after: float
    change_pct: float | None
    ratio: float | None
    direction: Direction
    significant: bool
    test: TestName
    p_value: float | None
    n_before: int
    n_after: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))  # type: ignore[no-any-return]


@dataclass
class WaitChange:
    """One Oracle wait event, before and after ([Insight-SSD9]: Time Waited / Waits per event).

    Attributes:
        event, wait_class: the event (wait class when the report gives it).
        unit: ``ms``. before, after: average wait per wait over all intervals of each side
            (total time waited / total waits; the report's printed average where the time
            is missing).
        change_pct, ratio, direction, significant, test, p_value, n_before, n_after, note: as
            in :class:`MetricChange`; the samples are the per-interval averages.
        waits_before, waits_after: total waits; time_waited_s_before/after: total seconds.
    """

    event: str
    wait_class: str | None
    unit: str
    before: float
    after: float
    change_pct: float | None
    ratio: float | None
    direction: Direction
    significant: bool
    test: TestName
    p_value: float | None
    n_before: int
    n_after: int
    waits_before: float
    waits_after: float
    time_waited_s_before: float | None
    time_waited_s_after: float | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class DevicePair:
    """Two devices compared with each other and how they were paired (``name``, ``map`` or
    ``auto``)."""

    device_before: str
    device_after: str
    how: Literal["name", "map", "auto"]
    kind_before: str
    kind_after: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Comparison:
    """The result of :func:`compare`.

    Attributes:
        pairs: the device pairs compared, in order.
        changes: one :class:`MetricChange` per pair and metric both sides measured, grouped
            by pair in ``pairs`` order, metrics in :data:`METRICS` order.
        wait_changes: one :class:`WaitChange` per wait event both sides recorded, most time
            waited first.
        notes: what the comparison could not do or decided on its own (pairing, devices on
            one side only, idle devices skipped, since-boot reports used).
        alpha, min_effect_pct: the thresholds used.
    """

    pairs: list[DevicePair] = field(default_factory=list)
    changes: list[MetricChange] = field(default_factory=list)
    wait_changes: list[WaitChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    alpha: float = ALPHA
    min_effect_pct: float = MIN_EFFECT_PCT

    def for_pair(self, pair: DevicePair) -> list[MetricChange]:
        return [c for c in self.changes if (c.device_before, c.device_after)
                == (pair.device_before, pair.device_after)]

    def change(self, device_before: str, metric: str) -> MetricChange:
        """The change of ``metric`` for the pair whose before-side device is given."""
        for c in self.changes:
            if c.device_before == device_before and c.metric == metric:
                return c
        raise KeyError(f"{device_before}/{metric}")

    def wait(self, event: str) -> WaitChange:
        for w in self.wait_changes:
            if w.event == event:
                return w
        raise KeyError(event)

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "min_effect_pct": self.min_effect_pct,
            "pairs": [p.to_dict() for p in self.pairs],
            "changes": [c.to_dict() for c in self.changes],
            "wait_changes": [w.to_dict() for w in self.wait_changes],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------------
# distribution tails (no SciPy)
# ---------------------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; NR3 §6.4)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for a, b > 0, 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(ln_front)
    # The continued fraction converges fast for x < (a+1)/(a+b+2); use the symmetry
    # I_x(a,b) = 1 - I_{1-x}(b,a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided tail probability P(|T| >= |t|) of Student's t with ``df`` degrees of
    freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


def normal_two_sided_p(z: float) -> float:
    """Two-sided tail probability P(|Z| >= |z|) of the standard normal."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def welch_p(mean_b: float, var_b: float, n_b: int, mean_a: float, var_a: float,
            n_a: int) -> float:
    """Two-sided p of Welch's t-test (Welch-Satterthwaite degrees of freedom)."""
    sb, sa = var_b / n_b, var_a / n_a
    se2 = sb + sa
    if se2 <= 0.0:
        # Both sides constant: identical values are no change, different ones are certain.
        return 1.0 if mean_a == mean_b else 0.0
    t = (mean_a - mean_b) / math.sqrt(se2)
    df = se2 * se2 / ((sb * sb / (n_b - 1) if n_b > 1 else 0.0)
                      + (sa * sa / (n_a - 1) if n_a > 1 else 0.0))
    return t_two_sided_p(t, df)


def mann_whitney_p(rank_sum_b: float, n_b: int, n_a: int, tie_term: float) -> float:
    """Two-sided p of the Mann-Whitney U test by the normal approximation.

    ``rank_sum_b``: sum of the before side's ranks in the pooled sample (average ranks for
    ties); ``tie_term``: sum over groups of tied values of t^3 - t. Continuity correction 0.5,
    as SciPy's ``mannwhitneyu(method="asymptotic")``.
    """
    u_b = rank_sum_b - n_b * (n_b + 1) / 2.0
    mu = n_b * n_a / 2.0
    n = n_b + n_a
    var = n_b * n_a / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0.0:
        return 1.0  # every value tied: the two sides are indistinguishable
    z = max(abs(u_b - mu) - 0.5, 0.0) / math.sqrt(var)
    return normal_two_sided_p(z)


def chi2_2x2_p(above_b: int, n_b: int, above_a: int, n_a: int) -> float:
    """Two-sided p of the chi-square test (1 df, Yates' correction) on the 2x2 table
    above/not above x before/after."""
    below_b, below_a = n_b - above_b, n_a - above_a
    n = n_b + n_a
    above, below = above_b + above_a, below_b + below_a
    if above == 0 or below == 0:
        return 1.0
    diff = max(abs(above_b * below_a - below_b * above_a) - n / 2.0, 0.0)
    chi2 = n * diff * diff / (n_b * n_a * above * below)
    return math.erfc(math.sqrt(chi2 / 2.0))


# ---------------------------------------------------------------------------------------------
# preparing one side
# ---------------------------------------------------------------------------------------------
def _sum_present(*cols: str) -> pl.Expr:
    """Sum of the columns that are not null; null when all are."""
    exprs = [pl.col(c) for c in cols]
    return (pl.when(pl.any_horizontal([e.is_not_null() for e in exprs]))
            .then(pl.sum_horizontal(exprs)).otherwise(None))


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    """num / den per interval; 0.0 when den is 0 (sysstat prints 0.00 then); null if unknown."""
    return (pl.when(num.is_null() | den.is_null()).then(None)
            .when(den > 0).then(num / den).otherwise(0.0))


def _prepare(frame: SampleFrame, side: str, notes: list[str]) -> pl.DataFrame:
    """One side's intervals with a device key and every compared column (derived where the
    source lacks a total)."""
    used = ["source", "host", "device", "device_kind", "ts", "interval_s", "since_boot",
            "reset", "iops", "r_iops", "w_iops", "d_iops", "kBps", "r_kBps", "w_kBps",
            "d_kBps", "await_ms", "r_await_ms", "w_await_ms", "svctm_ms", "util_pct", "aqu_sz",
            "areq_kB", "r_areq_kB", "w_areq_kB"]
    # only the columns compared: a SampleFrame has ~60, most of them null here
    df = frame.df.select(used).filter(~pl.col("reset"))
    if df.height == 0:
        return df.with_columns(key=pl.col("device"))
    key = (pl.concat_str([pl.col("host"), pl.lit(":"), pl.col("device")])
           if df["host"].n_unique() > 1 else pl.col("device"))
    df = df.with_columns(key.alias("key"))
    # An iostat run's first report averages since boot. Drop those rows where the device has
    # measured intervals too; a device with since-boot rows only (a single quoted report, as
    # [Goodus]'s) is compared as it is, and the note says so.
    df = df.with_columns(_only_sb=pl.col("since_boot").all().over("key"))
    only_sb = sorted(df.filter(pl.col("_only_sb"))["key"].unique().to_list())
    if only_sb:
        notes.append(
            f"{side}: {_names(only_sb)} have only reports flagged since-boot (an iostat run's "
            "first report); they are compared as they are -- right if the lines were copied "
            "from a later report, otherwise they average everything since boot")
    df = df.filter(~pl.col("since_boot") | pl.col("_only_sb"))

    iops = pl.coalesce(pl.col("iops"), _sum_present("r_iops", "w_iops", "d_iops"))
    kbps = pl.coalesce(pl.col("kBps"), _sum_present("r_kBps", "w_kBps", "d_kBps"))
    # await from its parts where the source splits reads and writes only; a part that did
    # nothing (no await, 0 or unknown IOPS) does not block it, a part that did I/O with an
    # unknown await does.
    def part(kind: str) -> tuple[pl.Expr, pl.Expr, pl.Expr, pl.Expr]:
        lat, ops = pl.col(f"{kind}_await_ms"), pl.col(f"{kind}_iops")
        ok = lat.is_not_null() & ops.is_not_null()
        none = lat.is_null() & (ops.is_null() | (ops == 0))
        return (ok, none, pl.when(ok).then(lat * ops).otherwise(0.0),
                pl.when(ok).then(ops).otherwise(0.0))

    r_ok, r_none, r_num, r_den = part("r")
    w_ok, w_none, w_num, w_den = part("w")
    usable = (r_ok | r_none) & (w_ok | w_none) & (r_ok | w_ok)
    await_rw = (pl.when(usable & (r_den + w_den > 0)).then((r_num + w_num) / (r_den + w_den))
                .when(usable).then(0.0).otherwise(None))
    df = df.with_columns(iops=iops, kBps=kbps)
    return df.select(
        "key", "host", "device", "device_kind", "ts",
        pl.col("interval_s").alias("dt"),
        "iops", "r_iops", "w_iops",
        (pl.col("kBps") / 1024.0).alias("MBps"),
        pl.coalesce(pl.col("await_ms"), await_rw).alias("await_ms"),
        "r_await_ms", "w_await_ms", "svctm_ms", "util_pct", "aqu_sz",
        pl.coalesce(pl.col("areq_kB"), _ratio(pl.col("kBps"), pl.col("iops"))).alias("areq_kB"),
        pl.coalesce(pl.col("r_areq_kB"), _ratio(pl.col("r_kBps"), pl.col("r_iops")))
        .alias("r_areq_kB"),
        pl.coalesce(pl.col("w_areq_kB"), _ratio(pl.col("w_kBps"), pl.col("w_iops")))
        .alias("w_areq_kB"),
    )


@dataclass(frozen=True)
class _Dev:
    key: str
    kind: str
    iops: float | None  # time-weighted mean
    mbps: float | None

    @property
    def busy(self) -> bool:
        return (self.iops or 0.0) >= IDLE_IOPS

    @property
    def idle(self) -> bool:
        known = self.iops is not None or self.mbps is not None
        return known and (self.iops or 0.0) < IDLE_IOPS and (self.mbps or 0.0) == 0.0


def _devices(df: pl.DataFrame) -> dict[str, _Dev]:
    if df.height == 0:
        return {}

    def tw(c: str) -> pl.Expr:
        w = pl.when(pl.col(c).is_not_null()).then(pl.col("dt")).otherwise(None)
        return pl.when(w.sum() > 0).then((pl.col(c) * w).sum() / w.sum()).otherwise(None)

    per = (df.group_by("key", maintain_order=True)
           .agg(pl.col("device_kind").first(), tw("iops").alias("iops"),
                tw("MBps").alias("MBps")))
    return {r["key"]: _Dev(r["key"], r["device_kind"], r["iops"], r["MBps"])
            for r in per.iter_rows(named=True)}


def _names(keys: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _match(before: dict[str, _Dev], after: dict[str, _Dev],
           device_map: Mapping[str, str] | None, notes: list[str]) -> list[DevicePair]:
    pairs: list[DevicePair] = []
    used_b: set[str] = set()
    used_a: set[str] = set()

    def add(b: str, a: str, how: Literal["name", "map", "auto"]) -> None:
        pairs.append(DevicePair(b, a, how, before[b].kind, after[a].kind))
        used_b.add(b)
        used_a.add(a)

    for b, a in (device_map or {}).items():
        if b not in before:
            raise CompareError(f"device map {b}={a}: no device {b!r} before (devices: "
                               f"{_names(sorted(before))})")
        if a not in after:
            raise CompareError(f"device map {b}={a}: no device {a!r} after (devices: "
                               f"{_names(sorted(after))})")
        if b in used_b or a in used_a:
            raise CompareError(f"device map {b}={a}: a device may be paired only once")
        add(b, a, "map")
    for b in before:
        if b not in used_b and b in after and b not in used_a:
            add(b, b, "name")
    # Automatic pairing, per device kind (a tablespace is never paired with a datafile): the
    # one busy device left on each side is what the two runs were about ([Insight-SSD9]: the user
    # tablespace on HDD sdb, then on SSD sdc).
    left_b = [k for k in before if k not in used_b]
    left_a = [k for k in after if k not in used_a]
    unpaired_busy_b: list[str] = []
    unpaired_busy_a: list[str] = []
    for kind in dict.fromkeys([before[k].kind for k in left_b] + [after[k].kind for k in left_a]):
        busy_b = [k for k in left_b if before[k].busy and before[k].kind == kind]
        busy_a = [k for k in left_a if after[k].busy and after[k].kind == kind]
        if len(busy_b) == 1 and len(busy_a) == 1:
            b, a = busy_b[0], busy_a[0]
            add(b, a, "auto")
            notes.append(f"paired {b} (before) with {a} (after): the names differ and each is "
                         f"the only busy {kind} left on its side; give --map to pair "
                         "otherwise")
        elif busy_b and busy_a:
            unpaired_busy_b += busy_b
            unpaired_busy_a += busy_a
    if unpaired_busy_b:
        notes.append(f"busy devices with no partner by name: before {_names(unpaired_busy_b)}, "
                     f"after {_names(unpaired_busy_a)}; pair them with --map BEFORE=AFTER")
    left_b = [k for k in before if k not in used_b]
    left_a = [k for k in after if k not in used_a]
    if left_b:
        notes.append(f"only before (not compared): {_names(left_b)}")
    if left_a:
        notes.append(f"only after (not compared): {_names(left_a)}")
    return pairs


# ---------------------------------------------------------------------------------------------
# statistics per (group, side), vectorised
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# the public entry points
# ---------------------------------------------------------------------------------------------
def _stack(before: pl.DataFrame, after: pl.DataFrame, pairs: list[DevicePair]) -> pl.DataFrame:
    ids_b = pl.DataFrame({"key": [p.device_before for p in pairs],
                          "g": list(range(len(pairs)))}, schema={"key": pl.String,
                                                                 "g": pl.Int64})
    ids_a = pl.DataFrame({"key": [p.device_after for p in pairs],
                          "g": list(range(len(pairs)))}, schema={"key": pl.String,
                                                                 "g": pl.Int64})
    b = before.join(ids_b, on="key", how="inner").with_columns(side=pl.lit(0, pl.Int8))
    a = after.join(ids_a, on="key", how="inner").with_columns(side=pl.lit(1, pl.Int8))
    return pl.concat([b, a], how="vertical")


def compare(before: SampleFrame, after: SampleFrame,
            before_waits: WaitEventFrame | None = None,
            after_waits: WaitEventFrame | None = None,
            device_map: Mapping[str, str] | None = None, *,
            alpha: float = ALPHA, min_effect_pct: float = MIN_EFFECT_PCT,
            max_samples: int = MAX_SAMPLES) -> Comparison:
    """Compare two datasets per device and metric, and their Oracle wait events.

    Devices are paired by name (the device key: ``host:device`` when a side holds several
    hosts, else the device name). ``device_map`` pairs differently named devices
    (``{"sdb": "sdc"}``: HDD sdb before, SSD sdc after, [Insight-SSD9]). When, after that, exactly
    one busy device (>= 1 IOPS on average) is left unpaired on each side and both are of the
    same kind, they are paired automatically and a note says so. Pairs idle on both sides are
    skipped (with a note).

    Raises :class:`CompareError` when the device map names a device a side does not have,
    or when there is nothing at all to compare.
    """
    notes: list[str] = []
    pb = _prepare(before, "before", notes)
    pa = _prepare(after, "after", notes)
    devs_b, devs_a = _devices(pb), _devices(pa)
    pairs = _match(devs_b, devs_a, device_map, notes) if devs_b and devs_a else []
    if device_map and not (devs_b and devs_a):
        raise CompareError("a device map was given but a side has no device statistics")
    idle = [p for p in pairs if devs_b[p.device_before].idle and devs_a[p.device_after].idle]
    if idle:
        notes.append(f"idle on both sides (< {IDLE_IOPS:g} IOPS), not compared: "
                     f"{_names([p.device_before for p in idle])}")
    pairs = [p for p in pairs if p not in idle]

    result = Comparison(pairs=pairs, notes=notes, alpha=alpha, min_effect_pct=min_effect_pct)
    if pairs:
        stacked = _stack(pb, pa, pairs)
        samples, raw_frame = _batches(stacked, max_samples)
        raw = _raw_dict(raw_frame)
        batched = samples.filter(pl.col("batched")).group_by("g", "side").agg(
            pl.len().alias("batches"))
        batch_count = {(r["g"], r["side"]): r["batches"] for r in batched.iter_rows(named=True)}
        batched_groups = frozenset(g for g, _ in batch_count)
        per_pair: dict[int, list[MetricChange]] = {g: [] for g in range(len(pairs))}
        for spec in METRICS:
            sub = (samples.select("g", "side", pl.col(spec.name).alias("v"))
                   .filter(pl.col("v").is_not_null()))
            if sub.height == 0:
                continue
            stats = _sample_stats(sub)
            if spec.kind == "p95":
                # A percentile of fewer than two intervals is the value itself: the mean
                # row already shows it.
                stats = {k: st for k, st in stats.items()
                         if raw.get((spec.name, *k), (0, 0.0))[0] >= 2}
            for g, tested in _test_groups(sub, spec.kind, stats, batched_groups).items():
                if (spec.name, g, 0) not in raw or (spec.name, g, 1) not in raw:
                    continue
                (nb, b), (na, a) = raw[(spec.name, g, 0)], raw[(spec.name, g, 1)]
                v = _judge(spec.better, b, a, tested, alpha, min_effect_pct)
                pair = pairs[g]
                change = MetricChange(
                    pair.device_before, pair.device_after, spec.name, spec.unit, b, a,
                    v.change_pct, v.ratio, v.direction, v.significant, tested.test, tested.p,
                    nb, na, v.note)
                if g in batched_groups and tested.test in _TESTED:
                    kb = batch_count.get((g, 0), stats[(g, 0)].n)
                    ka = batch_count.get((g, 1), stats[(g, 1)].n)
                    what = "p95s" if spec.kind == "p95" else "means"
                    _add_note(change, f"tested on batch {what} ({kb} before, {ka} after) "
                              "because consecutive intervals are correlated")
                per_pair[g].append(change)
        for g in range(len(pairs)):
            _cross_notes(per_pair[g])
            result.changes.extend(per_pair[g])

    waits_b = before_waits is not None and len(before_waits) > 0
    waits_a = after_waits is not None and len(after_waits) > 0
    if before_waits is not None and after_waits is not None and waits_b and waits_a:
        result.wait_changes = compare_waits(before_waits, after_waits, notes, alpha=alpha,
                                            min_effect_pct=min_effect_pct)
    elif waits_b != waits_a:
        notes.append("wait events on one side only: not compared")
    if not (devs_b and devs_a) and not (waits_b and waits_a):
        raise CompareError("nothing to compare: the two sides have neither device statistics "
                           "nor wait events in common")
    if not result.changes and not result.wait_changes:
        notes.append("no metric was measured on both sides of any device pair")
    return result


#: Reports cut event names to their column (AWR 11.2's wait lists: 28 characters, "control
#: file sequential re"); a name at least this long that begins exactly one other name is
#: taken for it.
_MIN_CUT_NAME = 20


def _canonical_events(names: set[str]) -> dict[str, str]:
    """Map names cut short by a report to the full name found elsewhere (either side)."""
    out: dict[str, str] = {}
    for n in names:
        if len(n) < _MIN_CUT_NAME:
            continue
        longer = [m for m in names if len(m) > len(n) and m.startswith(n)]
        if len(longer) == 1:
            out[n] = longer[0]
    return out


def _is_idle(name: str) -> bool:
    return name in IDLE_EVENTS or (len(name) >= _MIN_CUT_NAME
                                   and any(e.startswith(name) for e in IDLE_EVENTS))


def _wait_side(w: WaitEventFrame, canon: Mapping[str, str]) -> pl.DataFrame:
    """Per interval and event: waits, time and average wait (ms), one section per event."""
    idle = sorted({n for n in w.df["event"].unique().to_list() if _is_idle(n)})
    df = w.df.filter(pl.col("waits").is_not_null() & ~pl.col("event").is_in(idle)
                     & (pl.col("wait_class").is_null() | (pl.col("wait_class") != "Idle")))
    df = df.with_columns(pl.col("event").replace(dict(canon)))
    rank = (pl.col("section").replace_strict(_SECTION_RANK, default=len(_SECTION_RANK),
                                             return_dtype=pl.Int64))
    ident = ["host", "instance", "ts", "event"]
    df = (df.with_columns(_r=rank)
          .filter(pl.col("_r") == pl.col("_r").min().over(ident))
          .unique(subset=[*ident, "_r"], keep="first", maintain_order=True))
    # Two roundings of the same average: Time Waited / Waits, and the printed Avg wait. Use
    # the one whose rounding interval is narrower. 8i: 147.73 s / 20004 waits = 7.385 ms
    # (+-0.00025 ms) where "Avg wait (ms)" prints 7 (+-0.5); 10g: 0 s / 23 waits says nothing
    # (+-22 ms) where the printed average is good to 0.5 ms.
    waits = pl.col("waits")
    time_ms = pl.col("time_waited_s") * 1000.0 / waits
    width_time = _unit(pl.col("time_waited_s")) * 1000.0 / waits
    width_avg = _unit(pl.col("avg_wait_ms"))
    use_time = pl.col("time_waited_s").is_not_null() & (
        pl.col("avg_wait_ms").is_null() | (width_time <= width_avg))
    avg = (pl.when(waits <= 0).then(None)
           .when(use_time).then(time_ms).otherwise(pl.col("avg_wait_ms")))
    half_width = pl.when(use_time).then(width_time).otherwise(width_avg) / 2.0
    return df.select("event", "wait_class", "interval_s", "waits", "time_waited_s",
                     avg.alias("avg_ms"), half_width.alias("res_ms"))


def _unit(x: pl.Expr) -> pl.Expr:
    """The last printed digit's unit of a value read from a report (224.0 -> 1, 147.73 ->
    0.01): the width of its rounding interval. Six decimals at most."""
    expr: pl.Expr = pl.lit(1e-6)
    for d in range(5, -1, -1):
        scaled = x * 10.0**d
        expr = pl.when((scaled - scaled.round(0)).abs() < 1e-6 * (1.0 + scaled.abs()))\
            .then(pl.lit(10.0**-d)).otherwise(expr)
    return expr


def compare_waits(before: WaitEventFrame, after: WaitEventFrame, notes: list[str], *,
                  alpha: float = ALPHA,
                  min_effect_pct: float = MIN_EFFECT_PCT) -> list[WaitChange]:
    """Average wait per event, before vs after (idle events left out). Samples are the
    per-interval averages; one report per side is a single value."""
    canon = _canonical_events(set(before.df["event"].unique().to_list())
                              | set(after.df["event"].unique().to_list()))
    sb, sa = _wait_side(before, canon), _wait_side(after, canon)
    totals = (pl.concat([sb.with_columns(side=pl.lit(0, pl.Int8)),
                         sa.with_columns(side=pl.lit(1, pl.Int8))])
              .group_by("event", "side").agg(
                  pl.col("wait_class").drop_nulls().first(),
                  pl.col("waits").sum().alias("waits"),
                  pl.when(pl.col("time_waited_s").null_count() == 0)
                  .then(pl.col("time_waited_s").sum()).otherwise(None).alias("time_s"),
                  # = total time / total waits when every interval's time was the precise one
                  ((pl.col("avg_ms") * pl.col("waits")).sum()
                   / pl.col("waits").filter(pl.col("avg_ms").is_not_null()).sum())
                  .alias("avg_w"),
                  ((pl.col("res_ms") * pl.col("waits")).sum()
                   / pl.col("waits").filter(pl.col("res_ms").is_not_null()).sum())
                  .alias("res")))
    tot = {(r["event"], r["side"]): r for r in totals.iter_rows(named=True)}
    ev_b = {e for e, s in tot if s == 0 and tot[(e, s)]["waits"] > 0}
    ev_a = {e for e, s in tot if s == 1 and tot[(e, s)]["waits"] > 0}
    only_b, only_a = sorted(ev_b - ev_a), sorted(ev_a - ev_b)
    if only_b:
        notes.append(f"wait events before only: {_names(only_b)}")
    if only_a:
        notes.append(f"wait events after only: {_names(only_a)}")
    events = sorted(ev_b & ev_a)
    if not events:
        return []
    gid = {e: i for i, e in enumerate(events)}
    samples = pl.concat([
        sb.with_columns(side=pl.lit(0, pl.Int8)), sa.with_columns(side=pl.lit(1, pl.Int8))])
    samples = (samples.filter(pl.col("event").is_in(events) & pl.col("avg_ms").is_not_null())
               .select(pl.col("event").replace_strict(gid, return_dtype=pl.Int64).alias("g"),
                       "side", pl.col("avg_ms").alias("v")))
    stats = _sample_stats(samples)
    tested = _test_groups(samples, "per_op", stats)
    out: list[WaitChange] = []
    for e in events:
        g = gid[e]
        if g not in tested:
            continue
        tb, ta = tot[(e, 0)], tot[(e, 1)]
        b = _wait_avg(tb)
        a = _wait_avg(ta)
        if b is None or a is None:
            continue
        res = float(tb["res"] or 0.0) + float(ta["res"] or 0.0)
        v = _judge("lower", b, a, tested[g], alpha, min_effect_pct, resolution=res)
        out.append(WaitChange(
            e, tb["wait_class"] or ta["wait_class"], "ms", b, a, v.change_pct, v.ratio,
            v.direction, v.significant, tested[g].test, tested[g].p, stats[(g, 0)].n,
            stats[(g, 1)].n, float(tb["waits"]), float(ta["waits"]), tb["time_s"],
            ta["time_s"], v.note))
    out.sort(key=lambda w: -max(w.time_waited_s_before or 0.0, w.time_waited_s_after or 0.0,
                                w.before * w.waits_before / 1000.0,
                                w.after * w.waits_after / 1000.0))
    return out


def _wait_avg(row: Mapping[str, Any]) -> float | None:
    """The waits-weighted mean of the per-interval averages (ms)."""
    avg = row["avg_w"]
    return None if avg is None or not math.isfinite(avg) else float(avg)
