"""Sampling interval too long to see peaks ([Yuge]).

[Yuge] (z/OS RMF, DS8000): long intervals hide peaks - a 30-minute RMF interval averages a
saturating burst with the quiet minutes around it; it recommends intervals of at most
5 minutes, and 1 minute when investigating a problem. The same holds for every source:
``sar``'s default 10-minute interval, perfmon logs at 15 minutes, Prometheus scrapes with
long ranges.

One finding per data set - per (source format, host) - about the whole span of its data,
with ``device`` None (the interval is a property of how the data was collected, not of one
device). The interval is the median of the rows' ``interval_s`` (weighted by rows, so a
stray long interval after a gap does not decide):

* **info**: median interval > 5 min (300 s): peaks shorter than the interval are averaged
  away; the findings about latency and busy are judged on means that long;
* **warning**: median interval >= 30 min (1,800 s), the length [Yuge] shows hiding a rank
  saturation - a "healthy" verdict from such data is weak.

The suggestion names how to collect at 1 min for the source at hand.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from iogauge.analysis.context import AnalysisContext
from iogauge.analysis.rules._common import fmt_num, span_finding
from iogauge.analysis.types import Evidence, Finding, RuleRole, Severity

RULE_ID = "interval_too_coarse"
ROLE = RuleRole.CONTEXT
DESCRIPTION = ("Sampling interval longer than 5 min (info) or 30 min (warning): peaks are "
               "averaged away; collect at <= 5 min, 1 min when investigating ([Yuge]).")

#: Longest interval that still shows peaks ([Yuge]: <= 5 min).
MAX_INTERVAL_S = 300.0
#: Interval [Yuge] shows hiding a saturation (30-min RMF intervals).
HIDES_PEAKS_S = 1800.0

SOURCE = ("[Yuge] (RMF: 30-minute intervals hide peaks; use <= 5 min, 1 min when "
          "investigating)")

#: How to sample every minute, by source format.
_HOW: dict[str, str] = {
    "rmf": "set the RMF Monitor I INTERVAL to 1 minute (SMF type 70-78 records) for the "
           "period under investigation",
    "sar": "run sadc every minute (sysstat: SA1_OPTIONS / the sysstat-collect.timer "
           "OnCalendar=*:00/1) or iostat -x -t 60",
    "sa": "run sadc every minute (the sysstat-collect.timer OnCalendar=*:00/1)",
    "sadf": "run sadc every minute (the sysstat-collect.timer OnCalendar=*:00/1)",
    "unix-sar": "run sar -d 60 (or sa1 every minute from cron) during the investigation",
    "perfmon": "set the data collector's sample interval to 1 minute or less "
               "(logman update counter NAME -si 00:01:00)",
}
_DEFAULT_HOW = "collect at 1-minute intervals (e.g. iostat -x -t 60, or iogauge's collector)"


def _fmt_interval(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{fmt_num(seconds / 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{fmt_num(seconds / 60)} min"
    return f"{fmt_num(seconds)} s"


def _weighted_median(counts: dict[float, int]) -> float:
    """Median of values given as value -> count."""
    total = sum(counts.values())
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if 2 * seen >= total:
            return value
    return max(counts)  # pragma: no cover - unreachable with a non-empty dict


def check(ctx: AnalysisContext) -> list[Finding]:
    """One finding per (source, host) whose data is sampled coarser than 5 min."""
    counts: dict[tuple[str, str], dict[float, int]] = defaultdict(lambda: defaultdict(int))
    spans: dict[tuple[str, str], list[datetime]] = defaultdict(list)
    devices: dict[tuple[str, str], list[str]] = defaultdict(list)
    for dev in ctx.devices.values():
        if dev.windows.height == 0 or dev.start is None or dev.end is None:
            continue
        key = (dev.source, dev.host)
        # value_counts: a handful of distinct intervals per device, whatever the row count.
        vc = dev.select_rows("interval_s")["interval_s"].value_counts()
        for value, n in vc.iter_rows():
            counts[key][float(value)] += int(n)
        spans[key].extend([dev.start, dev.end])
        devices[key].append(dev.key)
    out: list[Finding] = []
    for key, cnt in counts.items():
        median = _weighted_median(cnt)
        if median <= MAX_INTERVAL_S:
            continue
        source, host = key
        rows = sum(cnt.values())
        longest = max(cnt)
        severity: Severity = "warning" if median >= HIDES_PEAKS_S else "info"
        evidence = [
            Evidence("interval_s", median, "s", threshold=MAX_INTERVAL_S, op=">",
                     note="median sampling interval of the data set"),
            Evidence("longest_interval_s", longest, "s"),
            Evidence("rows", float(rows), "intervals",
                     note=f"{len(devices[key])} device(s) from {source} on {host}"),
            Evidence("analysis_window_s", ctx.window_s, "s",
                     note="each analysis window is at least one interval long"),
        ]
        if severity == "warning":
            evidence[0] = Evidence("interval_s", median, "s", threshold=HIDES_PEAKS_S, op=">=",
                                   note="median sampling interval of the data set")
        title = (f"{host} ({source}): sampled every {_fmt_interval(median)} - peaks shorter "
                 "than that are averaged away")
        explanation = (f"Each sample is a {_fmt_interval(median)} mean. A burst that saturates "
                       "a device for a few minutes is diluted by the quiet minutes around it, "
                       "so busy, response time and queue look lower than the application "
                       "felt them; every judgement on this data is a judgement on those "
                       "means. [Yuge] shows 30-minute RMF intervals hiding a rank "
                       "saturation and recommends at most 5 minutes, 1 minute when "
                       "investigating.")
        if severity == "warning":
            explanation += " A 'healthy' verdict from data this coarse is weak evidence."
        suggestion = (f"For the period under investigation, {_HOW.get(source, _DEFAULT_HOW)}; "
                      "then analyse again.")
        start = min(spans[key])
        end = max(spans[key])
        out.append(span_finding(RULE_ID, None, (start, end), severity=severity, title=title,
                                evidence=evidence, explanation=explanation,
                                suggestion=suggestion, source=SOURCE))
    return out
