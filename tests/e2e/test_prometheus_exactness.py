"""`iogauge import --prometheus` against `iogauge record` on the same loaded loop device.

A real node_exporter is scraped every second by a real Prometheus and a real
VictoriaMetrics while fio saturates a loop device the kernel throttles to 300 reads and 100
writes a second (tests/helpers/system.CAPACITY_LOAD: steady rates, await 6.7/10 ms, aqu-sz
3, %util 100) and `iogauge record` samples the same device every second. Over the same span
inside the load, the means must agree: r/s and w/s within 3 %, r_await, w_await, aqu-sz and
%util within 5 % (IOPS-weighted latencies, time-weighted rest), for both engines.

Why the two engines agree although their ``increase`` differs (Prometheus extrapolates to
the window's edges, VictoriaMetrics starts from the last sample before the window): each
measure is an increase over the window divided by the window, or a ratio of two increases
over the same samples (see src/iogauge/sources/prometheus/promql.py), so the edge handling
cancels in the ratios and averages out in the rates; this test holds both to the same
tolerance against the collector.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.promstack import node_exporter, prometheus, victoria_metrics
from tests.helpers.system import (
    CAPACITY_LOAD,
    ThrottledLoop,
    iogauge_exe,
    iogauge_record,
    run_fio,
)

pytestmark = [pytest.mark.slow, pytest.mark.root]

WINDOW_S = 4
#: Windows compared (the load runs a few seconds longer on each side).
N_WINDOWS = 5
#: (measure, relative tolerance, weight column): rates time-weighted, latencies by IOPS.
COMPARED: tuple[tuple[str, float, str | None], ...] = (
    ("r_iops", 0.03, None), ("w_iops", 0.03, None),
    ("r_await_ms", 0.05, "r_iops"), ("w_await_ms", 0.05, "w_iops"),
    ("aqu_sz", 0.05, None), ("util_pct", 0.05, None))


def _mean(rows: list[dict[str, Any]], col: str, weight: str | None) -> float:
    num = den = 0.0
    for r in rows:
        w = r["interval_s"] * (r[weight] if weight else 1.0)
        num += r[col] * w
        den += w
    assert den > 0, f"no weight for {col}"
    return num / den


def _prom_rows(url: str, device: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
    res = subprocess.run([str(iogauge_exe()), "import", "--prometheus", url,
                          "--match", f'device="{device}"', "--from", start.isoformat(),
                          "--to", end.isoformat(), "--window", str(WINDOW_S), "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def _recorded(db: Path, device: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
    from iogauge.store import Store

    with Store.open(db, read_only=True) as store:
        frame = store.read(device)
    rows = [r for r in frame.to_dicts() if start < r["ts"] <= end and not r["reset"]]
    assert rows, "iogauge record stored nothing in the span"
    return rows


def test_prometheus_and_victoria_agree_with_record(throttled_loop: ThrottledLoop,
                                                    tmp_path: Path) -> None:
    tl = throttled_loop
    dev = tl.top.name
    db = tmp_path / "record.duckdb"
    with node_exporter(tmp_path) as ne, prometheus(tmp_path, [ne.target]) as prom, \
            victoria_metrics(tmp_path, [ne.target]) as vm:
        # both engines scrape a few times first: the first window compared needs a sample
        # in the window before it (promql.counter_delta)
        time.sleep(3.0)
        with iogauge_record(db, [dev]), \
                run_fio(tl.top.path, CAPACITY_LOAD, cgroup=tl.cgroup, settle_s=3.0,
                        runtime_s=N_WINDOWS * WINDOW_S + 12):
            start = datetime.fromtimestamp(time.time() + 1, UTC)
            end = datetime.fromtimestamp(start.timestamp() + N_WINDOWS * WINDOW_S, UTC)
            time.sleep(max(0.0, end.timestamp() - time.time()) + 2.0)
        time.sleep(3.0)  # the last scrapes are in both stores
        engines = {"prometheus": _prom_rows(prom.url, dev, start, end),
                   "victoria-metrics": _prom_rows(vm.url, dev, start, end)}
    ours = _recorded(db, dev, start, end)
    failures = []
    for engine, rows in engines.items():
        assert len(rows) == N_WINDOWS, f"{engine}: {len(rows)} rows, {rows}"
        assert all(r["host"] == ne.target and r["device"] == dev for r in rows)
        assert all(0 < r["cpu_idle_pct"] + r["cpu_user_pct"] <= 100.5 for r in rows)
        for col, tol, weight in COMPARED:
            theirs, mine = _mean(rows, col, weight), _mean(ours, col, weight)
            line = f"{engine} {col}: {theirs:.4g} vs record {mine:.4g}"
            print(line)
            if abs(theirs - mine) > tol * abs(mine):
                failures.append(f"{line} (> {tol:.0%})")
    assert not failures, "\n".join(failures)
