"""busy_not_bottleneck with the kernel's I/O stall shares (PSI) ahead of %iowait, through
``analyze``: [Insight-SSD9]'s question -- busy, or the bottleneck? -- answered by whether
tasks waited for I/O, which %iowait only hints at on a multi-core host."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from iogauge.analysis.engine import AnalysisOptions, analyze
from iogauge.model.sampleframe import SampleFrame


def _frame(util: float, some: float | None, full: float | None, *, user: float,
           iowait: float, n: int = 120) -> SampleFrame:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    rows = {
        "source": ["linux-diskstats"] * n, "host": ["h"] * n, "device": ["sdb"] * n,
        "device_kind": ["disk"] * n, "ts": [t0 + timedelta(seconds=i + 1) for i in range(n)],
        "interval_s": [1.0] * n, "r_iops": [150.0] * n, "w_iops": [0.0] * n,
        "iops": [150.0] * n, "util_pct": [util] * n, "r_await_ms": [6.0] * n,
        "w_await_ms": [0.0] * n, "await_ms": [6.0] * n, "aqu_sz": [0.9] * n,
        "r_kBps": [600.0] * n, "w_kBps": [0.0] * n, "kBps": [600.0] * n,
        "r_areq_kB": [4.0] * n, "cpu_user_pct": [user] * n, "cpu_iowait_pct": [iowait] * n,
        "cpu_system_pct": [5.0] * n, "cpu_idle_pct": [100.0 - user - iowait - 5.0] * n,
        "psi_io_some_pct": [some] * n, "psi_io_full_pct": [full] * n,
    }
    return SampleFrame(pl.DataFrame(rows, strict=False))


def _findings(frame: SampleFrame) -> tuple[str, list[str]]:
    res = analyze(frame, None, None, AnalysisOptions(strict=True))
    titles = [f.title for f in res.findings if f.rule == "busy_not_bottleneck"]
    return res.devices[0].verdict, titles


def test_busy_but_nothing_stalls_is_not_the_bottleneck() -> None:
    """88 % busy, tasks stalled 0.4 % of the time, CPUs busy in the application: not the
    bottleneck -- on a host whose %iowait (6 %) would have kept the %iowait rule silent."""
    verdict, titles = _findings(_frame(88.0, 0.4, 0.0, user=85.0, iowait=6.0))
    assert verdict == "busy, not the bottleneck"
    assert titles == [("sdb busy, not the bottleneck: 88 % util, but tasks stalled on I/O "
                       "0.4 % of the time")]
    verdict, _ = _findings(_frame(88.0, None, None, user=85.0, iowait=6.0))
    assert verdict != "busy, not the bottleneck"


def test_no_stall_with_idle_cpus_is_no_verdict_of_cpu_bound_work() -> None:
    """A task waiting for asynchronous I/O (libaio) is no I/O stall to PSI: a quiet stall
    share with the CPUs mostly idle does not say the work is CPU-bound."""
    verdict, titles = _findings(_frame(88.0, 0.4, 0.0, user=30.0, iowait=0.0))
    assert verdict != "busy, not the bottleneck"
    assert not any("not the bottleneck" in t for t in titles)


def test_stalls_make_it_the_bottleneck_when_iowait_is_hidden() -> None:
    """A CPU-bound competitor hides %iowait (it counts idle CPUs only); PSI still sees the
    tasks waiting: critical, not "busy, not the bottleneck"."""
    verdict, titles = _findings(_frame(95.0, 45.0, 20.0, user=90.0, iowait=0.5))
    assert verdict == "bottleneck"
    assert titles[0].startswith("sdb is the bottleneck: 95 % busy, tasks stalled on I/O "
                                "45 % of the time (20 % all at once)")
    # without the stall columns the same CPU figures say the opposite
    verdict, _ = _findings(_frame(95.0, None, None, user=90.0, iowait=0.5))
    assert verdict == "busy, not the bottleneck"
