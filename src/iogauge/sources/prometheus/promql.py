"""Every PromQL expression iogauge sends, written down once.

Each SampleFrame measure is one expression of *increases* over the analysis window W, so the
engine does the per-sample arithmetic next to the data and iogauge receives one value per
(instance, device, window). The counters are node_exporter's ``node_disk_*`` series
[node_exporter] (``collector/diskstats_linux.go``), each one /proc/diskstats field
[iostats]; the formulas are sysstat's ``compute_ext_disk_stats`` [sysstat], the same ones
:mod:`iogauge.collector.derive` applies to live counters:

    r/s = Δreads / W              r_await = Δread_time / Δreads
    %util = Δio_time / W           aqu-sz = Δio_time_weighted / W
    rareq-sz = Δread_bytes / Δreads   %rrqm = Δmerged / (Δmerged + Δreads)

How an increase is taken, and why not with ``increase()`` or ``rate()``: the increase of
a counter over the window (t - W, t] is its last sample in that window less its last
sample in the window before (``last_over_time`` of each). Both engines answer that alike,
and the windows telescope: their increases add up to exactly the counter's change over the
whole span, as iostat's intervals do. ``increase()`` differs between the engines:
Prometheus extrapolates the samples *inside* the window to its edges (so the change between
the last sample of one window and the first of the next is estimated, not counted),
VictoriaMetrics starts from the last sample before the window and does not extrapolate.
Measured on a loop device under an unsteady fio load with 4 s windows at a 1 s scrape,
Prometheus's ``increase()`` put r/s 3.6 and 5.3 % under ``iogauge record`` (two runs);
VictoriaMetrics's, and the difference above on both engines, within 0.5 %
(tests/e2e/test_prometheus_exactness.py). The latencies, request sizes and merge shares are
ratios of two increases over the same two samples.

Each increase is kept only where it is honest (:func:`counter_delta`):

* it is >= 0: a counter that went down was reset (the device re-created) -- that window is
  null, never a negative or a wrapped-around huge value. The kernel prints the millisecond
  fields as 32-bit ``%u`` [iostats] (node_exporter divides them by 1000), so after ~49.7
  days of busy time they wrap to near zero: the window of the wrap has null latencies,
  %util and aqu-sz (its counts are still good), never a spike;
* the window and the one before it each hold a sample (``last_over_time`` of an empty
  window is absent): across a gap (the exporter or the scrape was down) a look-back to a
  sample from before the gap would pour the whole gap's I/O into one window. The windows
  of a gap and the first one after it are null rows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: node_exporter series -> the /proc/diskstats field behind it [node_exporter] [iostats].
#: Units as node_exporter exports them: the ``_seconds_total`` series are the kernel's
#: milliseconds / 1000, ``_bytes_total`` are sectors x 512, ``discarded_sectors`` stays in
#: 512-byte sectors.
COUNTERS: dict[str, tuple[str, str]] = {
    "rd_ios": ("node_disk_reads_completed_total", "field 1, reads completed"),
    "rd_merges": ("node_disk_reads_merged_total", "field 2, reads merged"),
    "rd_bytes": ("node_disk_read_bytes_total", "field 3, sectors read x 512"),
    "rd_time": ("node_disk_read_time_seconds_total", "field 4, ms spent reading / 1000"),
    "wr_ios": ("node_disk_writes_completed_total", "field 5, writes completed"),
    "wr_merges": ("node_disk_writes_merged_total", "field 6, writes merged"),
    "wr_bytes": ("node_disk_written_bytes_total", "field 7, sectors written x 512"),
    "wr_time": ("node_disk_write_time_seconds_total", "field 8, ms spent writing / 1000"),
    "io_time": ("node_disk_io_time_seconds_total", "field 10, ms doing I/O / 1000"),
    "tiq": ("node_disk_io_time_weighted_seconds_total",
            "field 11, weighted ms doing I/O / 1000"),
    "dc_ios": ("node_disk_discards_completed_total", "field 12, discards completed (4.18+)"),
    "dc_merges": ("node_disk_discards_merged_total", "field 13, discards merged"),
    "dc_sectors": ("node_disk_discarded_sectors_total", "field 14, sectors discarded"),
    "dc_time": ("node_disk_discard_time_seconds_total", "field 15, ms spent discarding / 1000"),
    "fl_ios": ("node_disk_flush_requests_total", "field 16, flush requests (5.5+)"),
    "fl_time": ("node_disk_flush_requests_time_seconds_total",
                "field 17, ms spent flushing / 1000"),
}
#: The gauge of requests in flight (field 9) [node_exporter].
IO_NOW = "node_disk_io_now"
#: Device metadata: the label ``model`` [node_exporter].
DISK_INFO = "node_disk_info"
#: udev's ID_ATA_ROTATION_RATE_RPM, where node_exporter can read udev's data: 0 = solid
#: state, > 0 = a spinning disk [node_exporter].
ROTATION = "node_disk_ata_rotation_rate_rpm"
#: The series whose labels say which hosts and devices exist.
PRESENCE = COUNTERS["rd_ios"][0]
CPU = "node_cpu_seconds_total"


@dataclass(frozen=True)
class Measure:
    """One SampleFrame column as a PromQL expression.

    Attributes:
        column: the SampleFrame column it fills.
        template: PromQL; ``{name}`` stands for the increase of COUNTERS[name] over the
            window (:func:`counter_delta`), ``{W}`` for the window in seconds.
        formula: the sysstat formula [sysstat] it implements, for readers.
        idle_zero: a ratio whose denominator is a count of requests: when nothing completed
            the engine returns NaN (0/0) and sysstat prints 0.00, so the row gets 0.0.
    """

    column: str
    template: str
    formula: str
    idle_zero: bool = False


def _opt(name: str) -> str:
    """A discard counter absent on kernels before 4.18 counts as 0 in the totals, as sysstat
    zero-fills the fields it did not read (``or`` falls back to a zero with the same labels)."""
    return f"({{{name}}} or {{rd_ios}} * 0)"


_IOS = f"({{rd_ios}} + {{wr_ios}} + {_opt('dc_ios')})"

MEASURES: tuple[Measure, ...] = (
    Measure("r_iops", "{rd_ios} / {W}", "r/s = Δreads / Δt"),
    Measure("w_iops", "{wr_ios} / {W}", "w/s = Δwrites / Δt"),
    Measure("d_iops", "{dc_ios} / {W}", "d/s = Δdiscards / Δt"),
    Measure("f_iops", "{fl_ios} / {W}", "f/s = Δflushes / Δt"),
    Measure("iops", f"{_IOS} / {{W}}", "tps = (Δreads + Δwrites + Δdiscards) / Δt"),
    Measure("r_kBps", "{rd_bytes} / 1024 / {W}", "rkB/s = Δsectors read / 2 / Δt"),
    Measure("w_kBps", "{wr_bytes} / 1024 / {W}", "wkB/s = Δsectors written / 2 / Δt"),
    Measure("d_kBps", "{dc_sectors} / 2 / {W}", "dkB/s = Δsectors discarded / 2 / Δt"),
    Measure("kBps", f"({{rd_bytes}} / 1024 + {{wr_bytes}} / 1024 + {_opt('dc_sectors')} / 2)"
            " / {W}", "kB/s read + written + discarded"),
    Measure("r_merged_ps", "{rd_merges} / {W}", "rrqm/s = Δreads merged / Δt"),
    Measure("w_merged_ps", "{wr_merges} / {W}", "wrqm/s = Δwrites merged / Δt"),
    Measure("d_merged_ps", "{dc_merges} / {W}", "drqm/s = Δdiscards merged / Δt"),
    Measure("r_rqm_pct", "100 * {rd_merges} / ({rd_merges} + {rd_ios})",
            "%rrqm = Δmerged / (Δmerged + Δreads) x 100", idle_zero=True),
    Measure("w_rqm_pct", "100 * {wr_merges} / ({wr_merges} + {wr_ios})",
            "%wrqm = Δmerged / (Δmerged + Δwrites) x 100", idle_zero=True),
    Measure("d_rqm_pct", "100 * {dc_merges} / ({dc_merges} + {dc_ios})",
            "%drqm = Δmerged / (Δmerged + Δdiscards) x 100", idle_zero=True),
    Measure("r_await_ms", "1000 * {rd_time} / {rd_ios}", "r_await = Δread ms / Δreads",
            idle_zero=True),
    Measure("w_await_ms", "1000 * {wr_time} / {wr_ios}", "w_await = Δwrite ms / Δwrites",
            idle_zero=True),
    Measure("d_await_ms", "1000 * {dc_time} / {dc_ios}", "d_await = Δdiscard ms / Δdiscards",
            idle_zero=True),
    Measure("f_await_ms", "1000 * {fl_time} / {fl_ios}", "f_await = Δflush ms / Δflushes",
            idle_zero=True),
    Measure("await_ms", f"1000 * ({{rd_time}} + {{wr_time}} + {_opt('dc_time')}) / {_IOS}",
            "await = (Δread + Δwrite + Δdiscard ms) / (Δreads + Δwrites + Δdiscards)",
            idle_zero=True),
    Measure("r_areq_kB", "{rd_bytes} / 1024 / {rd_ios}", "rareq-sz = Δsectors / 2 / Δreads",
            idle_zero=True),
    Measure("w_areq_kB", "{wr_bytes} / 1024 / {wr_ios}", "wareq-sz = Δsectors / 2 / Δwrites",
            idle_zero=True),
    Measure("d_areq_kB", "{dc_sectors} / 2 / {dc_ios}", "dareq-sz = Δsectors / 2 / Δdiscards",
            idle_zero=True),
    Measure("areq_kB", f"({{rd_bytes}} / 1024 + {{wr_bytes}} / 1024 + {_opt('dc_sectors')} / 2)"
            f" / {_IOS}", "areq-sz = Δsectors / 2 / (Δreads + Δwrites + Δdiscards)",
            idle_zero=True),
    Measure("aqu_sz", "{tiq} / {W}", "aqu-sz = Δweighted ms / (Δt x 1000)"),
    Measure("util_pct", "100 * {io_time} / {W}", "%util = Δio ms / (Δt x 1000) x 100"),
)

#: iostat's avg-cpu shares from ``node_cpu_seconds_total`` modes [sysstat]: %system holds
#: system, irq and softirq, as iostat adds them.
CPU_MODES: dict[str, str] = {
    "cpu_user_pct": "user",
    "cpu_nice_pct": "nice",
    "cpu_system_pct": "system|irq|softirq",
    "cpu_iowait_pct": "iowait",
    "cpu_steal_pct": "steal",
    "cpu_idle_pct": "idle",
}

_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a PromQL selector (``job="node"``, ``instance=~"db.*"``)."""

    label: str
    op: str
    value: str

    def text(self) -> str:
        return f'{self.label}{self.op}"{self.value}"'


def parse_selector(text: str | None) -> tuple[Matcher, ...]:
    """``--match`` text, ``{job="node",device=~"sd.*"}`` or without the braces, to matchers.

    Raises ValueError naming the part that is not a matcher.
    """
    if text is None or not text.strip():
        return ()
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out: list[Matcher] = []
    pos = 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if m is None:
            raise ValueError(f"not a label matcher at {body[pos:]!r} (expected e.g. "
                             'job="node" or instance=~"db.*")')
        out.append(Matcher(m.group(1), m.group(2), m.group(3)))
        pos = m.end()
        if pos < len(body):
            if body[pos] != ",":
                raise ValueError(f"expected ',' between matchers at {body[pos:]!r}")
            pos += 1
    return tuple(out)


def regex_escape(value: str) -> str:
    """A label value as a literal inside a PromQL ``=~"..."`` (RE2, in a double-quoted
    string: the regex escape's backslash is itself escaped)."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\\\1", value).replace('"', '\\"')


def selector(metric: str, matchers: tuple[Matcher, ...]) -> str:
    return metric + "{" + ",".join(m.text() for m in matchers) + "}"


def window_text(window_s: float) -> str:
    """A PromQL duration for ``window_s`` (whole milliseconds: both engines read ``ms``)."""
    ms = round(window_s * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def disk_expression(measure: Measure, matchers: tuple[Matcher, ...], window_s: float) -> str:
    """The PromQL of one measure for the series ``matchers`` select."""
    inc = {name: counter_delta(selector(metric, matchers), window_s)
           for name, (metric, _) in COUNTERS.items()}
    return measure.template.format(W=_number(window_s), **inc)


def counter_delta(series: str, window_s: float) -> str:
    """The increase of ``series`` over the window ending at each step, kept where it is
    honest (module docstring): not negative, a sample in this window and in the one
    before."""
    rng = window_text(window_s)
    # The window is (t - W, t]: a range of W less 1 ms, as Prometheus 2's ranges include
    # their left end (a sample exactly at t - W belongs to the window before).
    # last_over_time of an empty window is absent, so a gap needs no guard of its own.
    inner = window_text(window_s - 0.001)
    return (f"((last_over_time({series}[{inner}])"
            f" - last_over_time({series}[{inner}] offset {rng})) >= 0)")


def inflight_expression(matchers: tuple[Matcher, ...]) -> str:
    """Requests in flight at the window's end: the gauge's last value (field 9 [iostats])."""
    return selector(IO_NOW, matchers)


def cpu_expression(mode_regex: str, matchers: tuple[Matcher, ...], host_label: str,
                   window_s: float) -> str:
    """A host's share of CPU time in ``mode_regex`` over the window, in percent (increases
    taken as for the disks: :func:`counter_delta`)."""
    base = tuple(m for m in matchers if m.label not in ("device", "mode", "cpu"))
    part = counter_delta(selector(CPU, (*base, Matcher("mode", "=~", mode_regex))), window_s)
    whole = counter_delta(selector(CPU, base), window_s)
    return (f"100 * sum by ({host_label}) ({part}) / "
            f"sum by ({host_label}) ({whole})")


def info_expression(metric: str, matchers: tuple[Matcher, ...], span_s: float) -> str:
    """A metadata series as last seen in the span (an instant query at its end)."""
    return f"last_over_time({selector(metric, matchers)}[{window_text(max(span_s, 1))}])"


def _number(x: float) -> str:
    return str(int(x)) if math.isclose(x, round(x)) else repr(x)
