"""sar -d's and sar -u's figures from two records' counters, exactly as sysstat computes
them ([sysstat] pr_stats.c print_disk_stats and print_cpu_stats, rd_stats.c
compute_ext_disk_stats and get_per_cpu_interval, sa_common.c check_disk_reg).

The interval ``itv`` is the difference of the records' uptimes in 1/100 s (1 if they are
equal); a rate is ``(double)(now - before) / itv * 100`` with the difference taken in the
counter's own C type, so a 32-bit tick counter wraps as it does in sar. A device is matched
to the previous record's by major and minor; a new device, or one whose counters all went
back (re-created), is compared with zeros, as sar does. ``d_kBps`` is null (not measured)
for files whose disk layout has no discard counters (sysstat before 12.1.2), where sar
prints 0.00.
"""

from __future__ import annotations

import numpy as np

from iogauge.importers.sa.codecs import DiskCounters

#: SampleFrame columns of a disk row, in order.
DISK_COLUMNS = ("iops", "r_kBps", "w_kBps", "d_kBps", "areq_kB", "aqu_sz", "await_ms",
                "util_pct")
#: SampleFrame CPU columns (sar -u: %user %nice %system %iowait %steal %idle).
CPU_COLUMNS = ("cpu_user_pct", "cpu_nice_pct", "cpu_system_pct", "cpu_iowait_pct",
               "cpu_steal_pct", "cpu_idle_pct")
_U64_MAX = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
#: stats_cpu's counters, in order.
_USER, _NICE, _SYS, _IDLE, _IOWAIT, _STEAL, _HARDIRQ, _SOFTIRQ, _GUEST, _GNICE = range(10)
_TOTAL = (_USER, _NICE, _SYS, _IOWAIT, _IDLE, _STEAL, _HARDIRQ, _SOFTIRQ)


def _previous(prev: DiskCounters, curr: DiskCounters) -> dict[str, np.ndarray]:
    """The previous record's counters lined up with ``curr``'s devices (zeros where sar
    compares with zeros)."""
    cm, cn = curr.cols["major"], curr.cols["minor"]
    pm, pn = prev.cols["major"], prev.cols["minor"]
    if len(pm) == len(cm) and np.array_equal(pm, cm) and np.array_equal(pn, cn):
        found = np.ones(len(cm), bool)
        out = {k: v.copy() for k, v in prev.cols.items()}
    else:
        pkey = (pm.astype(np.uint64) << np.uint64(32)) | pn.astype(np.uint64)
        ckey = (cm.astype(np.uint64) << np.uint64(32)) | cn.astype(np.uint64)
        order = np.argsort(pkey, kind="stable")
        at = np.searchsorted(pkey[order], ckey)
        at_ok = np.minimum(at, max(len(order) - 1, 0))
        found = (at < len(order)) & (pkey[order][at_ok] == ckey) if len(order) else \
            np.zeros(len(ckey), bool)
        idx = order[at_ok] if len(order) else np.zeros(len(ckey), np.int64)
        out = {k: v[idx] if len(v) else np.zeros(len(ckey), v.dtype)
               for k, v in prev.cols.items()}
    c = curr.cols
    went_back = ((c["nr_ios"] < out["nr_ios"])
                 & ((out["rd_sect"] == 0) | (c["rd_sect"] < out["rd_sect"]))
                 & ((out["wr_sect"] == 0) | (c["wr_sect"] < out["wr_sect"]))
                 & ((out["dc_sect"] == 0) | (c["dc_sect"] < out["dc_sect"])))
    zero = ~found | went_back
    if bool(zero.any()):
        for v in out.values():
            v[zero] = 0
    return out


def disk_rates(prev: DiskCounters, curr: DiskCounters, itv_cs: int
               ) -> dict[str, np.ndarray]:
    """sar -d's columns (as SampleFrame names) for ``curr``'s devices."""
    p, c = _previous(prev, curr), curr.cols
    itv = float(itv_cs)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        d_ios = c["nr_ios"] - p["nr_ios"]  # (uint64: wraps as in C)
        f_ios = d_ios.astype(np.float64)
        more = c["nr_ios"] > p["nr_ios"]
        d_rd = c["rd_sect"] - p["rd_sect"]
        d_wr = c["wr_sect"] - p["wr_sect"]
        d_dc = c["dc_sect"] - p["dc_sect"]
        ticks = ((c["rd_ticks"] - p["rd_ticks"]) + (c["wr_ticks"] - p["wr_ticks"])
                 + (c["dc_ticks"] - p["dc_ticks"]))  # (uint32 sum, as in C)
        sectors = d_rd + d_wr + d_dc
        safe = np.where(more, f_ios, 1.0)
        util = np.where(c["tot_ticks"] < p["tot_ticks"], 0.0,
                        (c["tot_ticks"] - p["tot_ticks"]).astype(np.float64) / itv * 100)
        return {
            "iops": f_ios / itv * 100,
            "r_kBps": d_rd.astype(np.float64) / itv * 100 / 2,
            "w_kBps": d_wr.astype(np.float64) / itv * 100 / 2,
            "d_kBps": (d_dc.astype(np.float64) / itv * 100 / 2 if curr.discards
                       else np.full(len(f_ios), np.nan)),
            "areq_kB": np.where(more, sectors.astype(np.float64) / safe, 0.0) / 2,
            "aqu_sz": (c["rq_ticks"] - p["rq_ticks"]).astype(np.float64) / itv * 100 / 1000.0,
            "await_ms": np.where(more, ticks.astype(np.float64) / safe, 0.0),
            "util_pct": util / 10.0,
        }


def _per_cpu_interval(p: list[int], c: list[int]) -> int:
    """get_per_cpu_interval: the jiffies between two samples of one CPU (``p`` corrected
    in place where iowait or idle went back, as sysstat does)."""
    ishift = 0
    if c[_USER] - c[_GUEST] < p[_USER] - p[_GUEST]:
        ishift += (p[_USER] - p[_GUEST]) - (c[_USER] - c[_GUEST])
    if c[_NICE] - c[_GNICE] < p[_NICE] - p[_GNICE]:
        ishift += (p[_NICE] - p[_GNICE]) - (c[_NICE] - c[_GNICE])
    big = int(_U64_MAX) - 0x7FFFF
    if c[_IOWAIT] < p[_IOWAIT] < big:
        p[_IOWAIT] = c[_IOWAIT] if (c[_IDLE] > p[_IDLE] or p[_IDLE] >= big) else 0
    if c[_IDLE] < p[_IDLE] < big:
        p[_IDLE] = 0
    # (unsigned 64-bit in sysstat: a total that went back wraps to a huge one)
    return (sum(c[k] for k in _TOTAL) - sum(p[k] for k in _TOTAL) + ishift) % (1 << 64)


def cpu_percentages(prev: np.ndarray, curr: np.ndarray) -> tuple[float, ...]:
    """sar -u's %user %nice %system %iowait %steal %idle of CPU "all" ((CPUs + 1, 10)
    counters each). With several CPUs, sysstat 12 sums the CPUs that were online in both
    samples instead of using the "all" line (sa_common.c get_global_cpu_statistics)."""
    rows_p = [[int(v) for v in r] for r in prev]
    rows_c = [[int(v) for v in r] for r in curr]
    if min(len(rows_p), len(rows_c)) > 1:
        p, c, total = [0] * 10, [0] * 10, 0
        for rp, rc in zip(rows_p[1:], rows_c[1:], strict=False):
            if not sum(rp[k] for k in _TOTAL):
                continue  # (offline in the first sample)
            total += _per_cpu_interval(rp, rc)
            p = [a + b for a, b in zip(p, rp, strict=True)]
            c = [a + b for a, b in zip(c, rc, strict=True)]
    else:
        p, c = rows_p[0], rows_c[0]
        total = _per_cpu_interval(p, c)
    total = total or 1

    def pct(before: int, now: int) -> float:
        return 0.0 if now < before else (now - before) / total * 100

    return (pct(p[_USER], c[_USER]), pct(p[_NICE], c[_NICE]),
            pct(p[_SYS] + p[_HARDIRQ] + p[_SOFTIRQ], c[_SYS] + c[_HARDIRQ] + c[_SOFTIRQ]),
            pct(p[_IOWAIT], c[_IOWAIT]), pct(p[_STEAL], c[_STEAL]),
            0.0 if c[_IDLE] < p[_IDLE] else pct(p[_IDLE], c[_IDLE]))
