"""Every PromQL expression iogauge sends, written down once.

The engine does the per-sample work next to the data: for every node_exporter
``node_disk_*`` counter [node_exporter] (``collector/diskstats_linux.go``), each one a
/proc/diskstats field [iostats], it returns the counter's *increase* over each analysis
window W -- one value per (instance, device, window) however many samples the window holds.
iogauge applies sysstat's formulas [sysstat] (``compute_ext_disk_stats``) to those
increases with :func:`iogauge.collector.derive.derive_metrics`, the code the live collector
and the diskstats importer use, so a fleet's r_await is computed exactly as a local one::

    r/s = Δreads / W              r_await = Δread_time / Δreads
    %util = Δio_time / W           aqu-sz = Δio_time_weighted / W
    rareq-sz = Δread_bytes / Δreads   %rrqm = Δmerged / (Δmerged + Δreads)

Why the ratios are not PromQL as well: an expression cannot name a sub-expression, so the
27 iostat columns written as PromQL make the engine take 59 counter increases per batch
where 16 hold the same information (measured in benchmarks/README.md, ``fleet_scale.py``).
The PromQL forms of the formulas, for dashboards, are the recording rules in
``deploy/prometheus/iogauge-rules.yml``, checked against sysstat's figures by promtool.

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
(tests/e2e/test_prometheus_exactness.py).

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

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Counter:
    """One node_exporter counter and the /proc/diskstats field behind it.

    Attributes:
        field: the field's name in :data:`iogauge.collector.diskstats.FIELDS`.
        metric: node_exporter's series [node_exporter].
        note: the field's number and meaning [iostats].
        to_kernel: factor from node_exporter's unit back to the kernel's: the
            ``_seconds_total`` series are the kernel's milliseconds / 1000, the
            ``_bytes_total`` ones 512-byte sectors x 512; ``discarded_sectors`` stays in
            sectors.
    """

    field: str
    metric: str
    note: str
    to_kernel: float = 1.0


_MS = 1000.0
_SECTORS = 1 / 512

COUNTERS: tuple[Counter, ...] = (
    Counter("rd_ios", "node_disk_reads_completed_total", "field 1, reads completed"),
    Counter("rd_merges", "node_disk_reads_merged_total", "field 2, reads merged"),
    Counter("rd_sectors", "node_disk_read_bytes_total", "field 3, sectors read x 512",
            _SECTORS),
    Counter("rd_ticks_ms", "node_disk_read_time_seconds_total",
            "field 4, ms spent reading / 1000", _MS),
    Counter("wr_ios", "node_disk_writes_completed_total", "field 5, writes completed"),
    Counter("wr_merges", "node_disk_writes_merged_total", "field 6, writes merged"),
    Counter("wr_sectors", "node_disk_written_bytes_total", "field 7, sectors written x 512",
            _SECTORS),
    Counter("wr_ticks_ms", "node_disk_write_time_seconds_total",
            "field 8, ms spent writing / 1000", _MS),
    Counter("io_ticks_ms", "node_disk_io_time_seconds_total",
            "field 10, ms doing I/O / 1000", _MS),
    Counter("time_in_queue_ms", "node_disk_io_time_weighted_seconds_total",
            "field 11, weighted ms doing I/O / 1000", _MS),
    Counter("dc_ios", "node_disk_discards_completed_total",
            "field 12, discards completed (4.18+)"),
    Counter("dc_merges", "node_disk_discards_merged_total", "field 13, discards merged"),
    Counter("dc_sectors", "node_disk_discarded_sectors_total", "field 14, sectors discarded"),
    Counter("dc_ticks_ms", "node_disk_discard_time_seconds_total",
            "field 15, ms spent discarding / 1000", _MS),
    Counter("fl_ios", "node_disk_flush_requests_total", "field 16, flush requests (5.5+)"),
    Counter("fl_ticks_ms", "node_disk_flush_requests_time_seconds_total",
            "field 17, ms spent flushing / 1000", _MS),
)
#: The gauge of requests in flight (field 9) [node_exporter].
IO_NOW = "node_disk_io_now"
#: Device metadata: the label ``model`` [node_exporter].
DISK_INFO = "node_disk_info"
#: udev's ID_ATA_ROTATION_RATE_RPM, where node_exporter can read udev's data: 0 = solid
#: state, > 0 = a spinning disk [node_exporter].
ROTATION = "node_disk_ata_rotation_rate_rpm"
#: The counter whose windows say which rows exist, and whose labels which hosts do.
PRESENCE = COUNTERS[0]
CPU = "node_cpu_seconds_total"

#: iostat's avg-cpu shares from ``node_cpu_seconds_total`` modes [sysstat]: %system holds
#: system, irq and softirq, as iostat adds them.
CPU_MODES: dict[str, tuple[str, ...]] = {
    "cpu_user_pct": ("user",),
    "cpu_nice_pct": ("nice",),
    "cpu_system_pct": ("system", "irq", "softirq"),
    "cpu_iowait_pct": ("iowait",),
    "cpu_steal_pct": ("steal",),
    "cpu_idle_pct": ("idle",),
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


def counter_expression(counter: Counter, matchers: tuple[Matcher, ...],
                       window_s: float) -> str:
    """The PromQL of one counter's increase per window, for the series ``matchers``
    select (in node_exporter's unit: ``counter.to_kernel`` converts)."""
    return counter_delta(selector(counter.metric, matchers), window_s)


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


def cpu_expression(matchers: tuple[Matcher, ...], host_label: str, window_s: float) -> str:
    """A host's CPU seconds per mode over the window, all CPUs added (increases taken as for
    the disks: :func:`counter_delta`); the shares are :data:`CPU_MODES` over the sum."""
    base = tuple(m for m in matchers if m.label not in ("device", "mode", "cpu"))
    return f"sum by ({host_label}, mode) ({counter_delta(selector(CPU, base), window_s)})"


def info_expression(metric: str, matchers: tuple[Matcher, ...], span_s: float) -> str:
    """A metadata series as last seen in the span (an instant query at its end)."""
    return f"last_over_time({selector(metric, matchers)}[{window_text(max(span_s, 1))}])"
