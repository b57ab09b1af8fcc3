"""Derive iostat metrics from diskstats counters — the one place these formulas live.

The live collector and the diskstats importer both call :func:`counter_deltas` then
:func:`derive_metrics`, on numpy arrays with one row per device-interval, so a day of samples
is derived in one vectorised call and a live sample of a few devices costs microseconds.

Formulas are sysstat 12.x ``iostat -x`` (common.c ``compute_ext_disk_stats`` and iostat.c
``write_ext_stat``), with Δt in seconds and counter deltas Δ1..Δ17 ([sysstat])::

    r/s = Δ1/Δt            rrqm/s = Δ2/Δt         rkB/s = Δ3/2/Δt
    %rrqm = Δ2/(Δ1+Δ2)·100 (0 when no request)   r_await = Δ4/Δ1 (0 when Δ1 = 0)
    rareq-sz = Δ3/2/Δ1 (0 when Δ1 = 0)            (w: 5..8, d: 12..15, f/s = Δ16/Δt,
    f_await = Δ17/Δ16)
    aqu-sz = Δ11/(Δt·1000)  %util = Δ10/(Δt·1000)·100
    await = (Δ4+Δ8+Δ15)/(Δ1+Δ5+Δ12)   (flushes excluded, as sysstat)
    tps = (Δ1+Δ5+Δ12)/Δt

sysstat prints 0.00 for a latency or size when nothing completed; we do the same so live and
imported data agree (see SampleFrame). A field the kernel did not print (old layouts) gives
NaN here, null in the frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from iogauge.collector.diskstats import FIELDS, IDX, N_FIELDS

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

WRAP_32 = 1 << 32

#: Millisecond fields printed as 32-bit ``%u`` by the kernel: they wrap at 2**32.
MS_FIELDS: tuple[int, ...] = tuple(IDX[f] for f in FIELDS if f.endswith("_ms"))
#: Monotonic event counters: if one goes backwards the statistics were reset.
COUNT_FIELDS: tuple[int, ...] = tuple(
    IDX[f] for f in FIELDS if not f.endswith("_ms") and f != "in_flight")

_MS_MASK = np.zeros(N_FIELDS, dtype=np.bool_)
_MS_MASK[list(MS_FIELDS)] = True
_COUNT_MASK = np.zeros(N_FIELDS, dtype=np.bool_)
_COUNT_MASK[list(COUNT_FIELDS)] = True


@dataclass
class Deltas:
    """Counter deltas for N device-intervals.

    Attributes:
        delta: float64 (N x 17); NaN where a field is absent or the row was reset. The
            ``in_flight`` column holds the current gauge value, not a difference.
        reset: bool (N,): a counter went backwards; every derived metric is null.
        wrapped: bool (N,): a 32-bit field wrapped and was unwrapped.
    """

    delta: F64
    reset: B
    wrapped: B


def counter_deltas(prev: I64, cur: I64, prev_present: B, cur_present: B,
                   old_layout: B | None = None) -> Deltas:
    """Differences ``cur - prev`` with 32-bit wrap undone and resets detected.

    Args:
        prev, cur: int64 (N x 17) counters, rows aligned (same device).
        prev_present, cur_present: bool (N x 17), which fields each snapshot printed.
        old_layout: bool (N,), rows from 4-field partition lines whose *counts* are 32-bit
            too (2.6 ``struct hd_struct``); None means none.

    A millisecond field that went backwards while every event count went forwards has
    wrapped at 2**32 (the kernel prints it with ``%u``). An event count that went backwards
    means the device was re-created or its statistics cleared: that row is reset.
    """
    n = cur.shape[0]
    d = cur - prev
    present = prev_present & cur_present
    neg = (d < 0) & present
    if old_layout is None:
        old_layout = np.zeros(n, dtype=np.bool_)
    old_col = old_layout[:, None]
    count_back = neg & _COUNT_MASK[None, :] & ~old_col
    reset: B = np.asarray(count_back.any(axis=1), dtype=np.bool_)
    wrap = neg & (_MS_MASK[None, :] | (_COUNT_MASK[None, :] & old_col)) & ~reset[:, None]
    d = np.where(wrap, d + WRAP_32, d)
    out = d.astype(np.float64)
    out[~present] = np.nan
    # in_flight is a gauge of the current snapshot: it needs only the current field.
    inflight = IDX["in_flight"]
    out[:, inflight] = np.where(cur_present[:, inflight], cur[:, inflight], np.nan)
    out[reset] = np.nan
    return Deltas(out, reset, np.asarray(wrap.any(axis=1), dtype=np.bool_))


def _ratio(num: F64, den: F64, scale: float = 1.0) -> F64:
    """num/den*scale, 0 where den == 0 (sysstat), NaN where either side is absent."""
    out = np.zeros_like(num)
    ok = den > 0
    np.divide(num, den, out=out, where=ok)
    if scale != 1.0:
        out *= scale
    out[np.isnan(num) | np.isnan(den)] = np.nan
    return out


def derive_metrics(delta: F64, interval_s: F64) -> dict[str, F64]:
    """Every iostat -x metric from counter deltas; keys are SampleFrame column names.

    Args:
        delta: float64 (N x 17) from :func:`counter_deltas` (NaN = absent/reset).
        interval_s: float64 (N,) interval lengths in seconds, > 0.
    """
    def col(name: str) -> F64:
        return delta[:, IDX[name]]

    dt = interval_s.astype(np.float64)
    rd, rm, rs, rt = col("rd_ios"), col("rd_merges"), col("rd_sectors"), col("rd_ticks_ms")
    wr, wm, ws, wt = col("wr_ios"), col("wr_merges"), col("wr_sectors"), col("wr_ticks_ms")
    dc, dm, ds, dtk = col("dc_ios"), col("dc_merges"), col("dc_sectors"), col("dc_ticks_ms")
    fl, ft = col("fl_ios"), col("fl_ticks_ms")
    io_ticks, tiq = col("io_ticks_ms"), col("time_in_queue_ms")

    # Totals follow sysstat: a discard count absent on pre-4.18 kernels counts as 0 in
    # nr_ios (sysstat zero-fills the fields it did not read), so await/tps stay defined.
    dc0, ds0, dtk0 = (np.nan_to_num(x, nan=0.0) for x in (dc, ds, dtk))
    ios = rd + wr + dc0
    sectors = rs + ws + ds0
    ticks = rt + wt + dtk0

    return {
        "r_iops": rd / dt,
        "w_iops": wr / dt,
        "d_iops": dc / dt,
        "f_iops": fl / dt,
        "iops": ios / dt,
        "r_kBps": rs / 2.0 / dt,
        "w_kBps": ws / 2.0 / dt,
        "d_kBps": ds / 2.0 / dt,
        "kBps": sectors / 2.0 / dt,
        "r_merged_ps": rm / dt,
        "w_merged_ps": wm / dt,
        "d_merged_ps": dm / dt,
        "r_rqm_pct": _ratio(rm, rm + rd, 100.0),
        "w_rqm_pct": _ratio(wm, wm + wr, 100.0),
        "d_rqm_pct": _ratio(dm, dm + dc, 100.0),
        "r_await_ms": _ratio(rt, rd),
        "w_await_ms": _ratio(wt, wr),
        "d_await_ms": _ratio(dtk, dc),
        "f_await_ms": _ratio(ft, fl),
        "await_ms": _ratio(ticks, ios),
        "r_areq_kB": _ratio(rs, rd, 0.5),
        "w_areq_kB": _ratio(ws, wr, 0.5),
        "d_areq_kB": _ratio(ds, dc, 0.5),
        "areq_kB": _ratio(sectors, ios, 0.5),
        "aqu_sz": tiq / (dt * 1000.0),
        "util_pct": io_ticks / (dt * 1000.0) * 100.0,
        "inflight": delta[:, IDX["in_flight"]].copy(),
    }


#: SampleFrame columns :func:`derive_metrics` fills.
DERIVED_COLUMNS: tuple[str, ...] = (
    "r_iops", "w_iops", "d_iops", "f_iops", "iops", "r_kBps", "w_kBps", "d_kBps", "kBps",
    "r_merged_ps", "w_merged_ps", "d_merged_ps", "r_rqm_pct", "w_rqm_pct", "d_rqm_pct",
    "r_await_ms", "w_await_ms", "d_await_ms", "f_await_ms", "await_ms", "r_areq_kB",
    "w_areq_kB", "d_areq_kB", "areq_kB", "aqu_sz", "util_pct", "inflight",
)
