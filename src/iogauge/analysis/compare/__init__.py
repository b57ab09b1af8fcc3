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
p95) being one sample (see :func:`.samples._batches`). That also bounds the cost of the tests.

No SciPy: the t distribution's tail comes from the regularised incomplete beta function
(continued fraction, Numerical Recipes 3rd ed. §6.4) and the normal tail from ``math.erfc``;
unit tests check them against closed forms and table values. The sample work is vectorised
across all device pairs at once: means, variances, batch sums and quantiles in polars, ranks
and ties from one sort plus numpy run arithmetic; Python only loops over (pair, metric)
results.

Notes that need several metrics (:func:`.samples._cross_notes`): IOPS that moved opposite to the
request size is ``changed``, not better or worse ([Goodus]: read-ahead turns many small reads
into few large ones); a latency change that comes with a request-size change says so; and
throughput and latency moving the same way is flagged as a possible change of offered load.
"""

from __future__ import annotations

from iogauge.analysis.compare.frames import compare
from iogauge.analysis.compare.results import (
    ALPHA,
    IDLE_EVENTS,
    MAX_SAMPLES,
    METRICS,
    METRICS_BY_NAME,
    MIN_EFFECT_PCT,
    MWU_MIN_N,
    P95_MIN_EXPECTED,
    SINGLE_VALUE_NOTE,
    CompareError,
    Comparison,
    DevicePair,
    Direction,
    MetricChange,
    MetricSpec,
    TestName,
    WaitChange,
)
from iogauge.analysis.compare.stats import (
    betainc,
    chi2_2x2_p,
    mann_whitney_p,
    normal_two_sided_p,
    t_two_sided_p,
    welch_p,
)
from iogauge.analysis.compare.waits import compare_waits

__all__ = ["ALPHA", "IDLE_EVENTS", "MAX_SAMPLES", "METRICS", "METRICS_BY_NAME", "MIN_EFFECT_PCT",
           "MWU_MIN_N", "P95_MIN_EXPECTED", "SINGLE_VALUE_NOTE", "CompareError", "Comparison",
           "DevicePair", "Direction", "MetricChange", "MetricSpec", "TestName", "WaitChange",
           "betainc", "chi2_2x2_p", "compare", "compare_waits", "mann_whitney_p",
           "normal_two_sided_p", "t_two_sided_p", "welch_p"]
