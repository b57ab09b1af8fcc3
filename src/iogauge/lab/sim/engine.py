"""The simulator's event loop (see :mod:`iogauge.lab.simulator` for what happens to a
request and how the counters are kept).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
import polars as pl

from iogauge.collector.derive import DERIVED_COLUMNS, counter_deltas, derive_metrics
from iogauge.collector.diskstats import IDX, N_FIELDS
from iogauge.lab.model import DiskModel, QueuedDiskModel, Request
from iogauge.lab.sim.draws import _Bucket, _Draws, _Limiter, _SeqCursor
from iogauge.lab.sim.interval import (
    SOURCE,
    Controller,
    GroupInterval,
    IntervalObservation,
    IopsLimit,
    SimResult,
)
from iogauge.lab.workloads import Workload
from iogauge.model.sampleframe import TS_DTYPE, SampleFrame

_COMPLETE, _ISSUE, _RELEASE, _SAMPLE, _MODEL = 0, 1, 2, 3, 4
# Per-group accumulator slots.
_G_RIOS, _G_WIOS, _G_RBYTES, _G_WBYTES, _G_RNS, _G_WNS, _G_THRNS, _G_ISSUED = range(8)
_G_SLOTS = 8


class _Engine:
    """The event loop and its state (one simulation)."""

    def __init__(self, model: DiskModel, wls: tuple[Workload, ...], *, seed: int,
                 controller: Controller | None, batch: int) -> None:
        self.model = model
        model.reset()
        self.wls = wls
        self.seed = seed
        self.controller = controller
        root = np.random.default_rng(seed)
        # One independent stream per workload (and its limiter), so adding a workload
        # does not change the draws of the others.
        streams = root.spawn(2 * len(wls))
        cap = model.capacity_bytes
        self.draws = [_Draws(w, streams[2 * i], cap, batch) for i, w in enumerate(wls)]
        self.limiters: list[_Limiter | None] = [
            _Limiter(w, streams[2 * i + 1]) if w.capped else None
            for i, w in enumerate(wls)]
        # An uncapped workload gets its limiter (and this stream) only if a user-level
        # group cap is set on it, so its draws do not change the other streams.
        self._limiter_rngs = [streams[2 * i + 1] for i in range(len(wls))]
        self._user_capped: set[str] = set()
        self.group_names: list[str] = []
        for w in wls:
            if w.group not in self.group_names:
                self.group_names.append(w.group)
        self.group_index = {g: i for i, g in enumerate(self.group_names)}
        self.buckets = [[_Bucket(), _Bucket()] for _ in self.group_names]
        self.limits: dict[str, IopsLimit] = {g: IopsLimit() for g in self.group_names}
        self.limit_changes: list[tuple[float, str, IopsLimit]] = []
        # Threads: workload index, group index, sequential cursor.
        self.thread_w: list[int] = []
        self.thread_g: list[int] = []
        self.cursors: list[_SeqCursor | None] = []
        seq_rng = streams[0]
        for i, w in enumerate(wls):
            for _ in range(w.threads):
                self.thread_w.append(i)
                self.thread_g.append(self.group_index[w.group])
                if w.pattern == "sequential":
                    r = w.regions[int(seq_rng.choice(len(w.regions),
                                                     p=[x.weight for x in w.regions]))]
                    lo, hi = self.draws[i]._bounds(r.start, r.end)
                    a = w.align_bytes
                    pos = lo + int(seq_rng.random() * ((hi - lo) // a)) * a
                    self.cursors.append(_SeqCursor(lo, hi, pos))
                else:
                    self.cursors.append(None)
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.free_ch = list(range(model.channels - 1, -1, -1))
        self.devq: deque[list[Any]] = deque()
        # Device state (its counters are the sums of the groups': see _snapshot).
        self.inflight = 0
        self.busy_start = 0.0
        self.busy_acc = 0.0
        self.gacc = [[0] * _G_SLOTS for _ in self.group_names]
        self.snapshots: list[list[int]] = []
        self.gsnaps: list[list[list[int]]] = []
        self.queued_snaps: list[list[int]] = []
        self.limit_snaps: list[dict[str, IopsLimit]] = []
        self.sample_times: list[float] = []
        self._queued = bool(getattr(model, "queued", False))
        self._fast = None if self._queued else getattr(model, "serve", None)
        # The same object, typed as what it is when queued (submit/bind).
        self._qmodel = cast("QueuedDiskModel", model)
        if self._queued:
            self._qmodel.bind(self._model_at, self._model_done)

    # ---- limits -------------------------------------------------------------------------
    def apply_limit(self, t: float, group: str, lim: IopsLimit, *, initial: bool = False
                    ) -> None:
        if group not in self.group_index:
            raise ValueError(f"no workload is in group {group!r}; groups: "
                             f"{', '.join(self.group_names)}")
        gi = self.group_index[group]
        self.limits[group] = lim
        self.limit_changes.append((t, group, lim))
        if lim.iops is not None or group in self._user_capped:
            self._user_cap(t, group, lim.iops)
        for d, rate in ((0, lim.riops), (1, lim.wiops)):
            b = self.buckets[gi][d]
            b.set_rate(t, rate)
            if initial:
                b.tokens = b.cap
            if b.queue:
                self._push(b.ready_at(t), _RELEASE, (gi, d, b.gen))

    def _user_cap(self, t: float, group: str, iops: float | None) -> None:
        """Share a group's user-level cap among its workloads' issue limiters."""
        idx = [i for i, w in enumerate(self.wls) if w.group == group]
        rates = [self.wls[i].rate_at(t) for i in idx]
        known = [r for r in rates if r is not None]
        total = sum(known)
        for i, r in zip(idx, rates, strict=True):
            share = (r / total if r is not None and len(known) == len(rates) and total > 0
                     else 1.0 / len(idx))
            lim = self.limiters[i]
            if lim is None:
                if iops is None:
                    continue
                lim = _Limiter(self.wls[i], self._limiter_rngs[i])
                self.limiters[i] = lim
            lim.set_override(None if iops is None else iops * share)
        if iops is None:
            self._user_capped.discard(group)
        else:
            self._user_capped.add(group)

    # ---- event plumbing -----------------------------------------------------------------
    def _push(self, t: float, kind: int, x: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, x))

    def _model_at(self, t: float, fn: Callable[[float, Any], None], arg: Any) -> None:
        """A queued model's clock: run ``fn(t, arg)`` at ``t`` among the other events."""
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, _MODEL, (fn, arg)))

    def _model_done(self, req: Any, done: float) -> None:
        """A queued model knows when ``req`` completes."""
        self.seq += 1
        heapq.heappush(self.heap, (done, self.seq, _COMPLETE, req))

    def _dispatch(self, req: list[Any], ch: int, t: float) -> None:
        is_write = req[0]
        if self._queued:
            req[7] = ch
            self._qmodel.submit(req, is_write, req[1], req[2], t)
            return
        if self._fast is not None:
            done = self._fast(is_write, req[1], req[2], t)
        else:
            done = t + self.model.service_time(
                Request("write" if is_write else "read", req[1], req[2]),
                t, ch)
        req[7] = ch
        self.seq += 1
        heapq.heappush(self.heap, (done, self.seq, _COMPLETE, req))

    def _submit(self, req: list[Any], t: float) -> None:
        if self.inflight == 0:
            self.busy_start = t
        self.inflight += 1
        req[6] = t
        if self.free_ch:
            self._dispatch(req, self.free_ch.pop(), t)
        else:
            self.devq.append(req)

    def _issue(self, th: int, t: float) -> None:
        wi = self.thread_w[th]
        d = self.draws[wi]
        i = d.i
        if i >= d.n:
            d.refill()
            i = 0
        d.i = i + 1
        is_write = d.writes[i]
        size = d.sizes[i]
        cur = self.cursors[th]
        if cur is None:
            off = d.offs[i]
        else:
            if cur.pos + size > cur.hi:
                cur.pos = cur.lo
            off = cur.pos
            cur.pos += size
        gi = self.thread_g[th]
        self.gacc[gi][_G_ISSUED] += 1
        b = self.buckets[gi][1 if is_write else 0]
        if b.rate is None and not b.queue:
            # Unthrottled: straight to the device (the _submit/_dispatch path, inlined:
            # this is the simulator's hot path).
            if self.inflight == 0:
                self.busy_start = t
            self.inflight += 1
            if self.free_ch:
                ch = self.free_ch.pop()
                if self._queued:
                    self._qmodel.submit([is_write, off, size, gi, th, t, t, ch], is_write,
                                        off, size, t)
                    return
                if self._fast is not None:
                    done = self._fast(is_write, off, size, t)
                else:
                    done = t + self.model.service_time(
                        Request("write" if is_write else "read", off, size), t, ch)
                self.seq += 1
                heapq.heappush(self.heap, (done, self.seq, _COMPLETE,
                                           [is_write, off, size, gi, th, t, t, ch]))
            else:
                self.devq.append([is_write, off, size, gi, th, t, t, -1])
            return
        req: list[Any] = [is_write, off, size, gi, th, t, 0.0, -1]
        if not b.queue and b.take(t):
            self._submit(req, t)
        else:
            b.queue.append(req)
            if len(b.queue) == 1:
                self._push(b.ready_at(t), _RELEASE, (gi, 1 if is_write else 0, b.gen))

    def _thread_ready(self, th: int, t: float) -> None:
        lim = self.limiters[self.thread_w[th]]
        if lim is None:
            self._issue(th, t)
            return
        p = lim.next_permit(t)
        if p <= t:
            self._issue(th, t)
        else:
            self._push(p, _ISSUE, th)

    # ---- main loop ----------------------------------------------------------------------
    def run(self, n_samples: int, interval_s: float) -> None:
        self._snapshot(0.0)
        for th in range(len(self.thread_w)):
            self._thread_ready(th, 0.0)
        k = 1
        self._push(k * interval_s, _SAMPLE, k)
        heap = self.heap
        pop = heapq.heappop
        push = heapq.heappush
        gacc = self.gacc
        free_ch = self.free_ch
        devq = self.devq
        limiters = self.limiters
        thread_w = self.thread_w
        issue = self._issue
        # Device counters are the sums of the groups' (every request belongs to a group),
        # so a completion updates its group only (see _snapshot).
        while heap:
            t, _s, kind, x = pop(heap)
            if kind == _COMPLETE:
                req: list[Any] = x
                self.inflight -= 1
                if self.inflight == 0:
                    self.busy_acc += t - self.busy_start
                t_dev: float = req[6]
                g = gacc[req[3]]
                if req[0]:
                    g[_G_WIOS] += 1
                    g[_G_WBYTES] += req[2]
                    g[_G_WNS] += int((t - t_dev) * 1e9 + 0.5)
                else:
                    g[_G_RIOS] += 1
                    g[_G_RBYTES] += req[2]
                    g[_G_RNS] += int((t - t_dev) * 1e9 + 0.5)
                if t_dev != req[5]:
                    g[_G_THRNS] += int((t_dev - req[5]) * 1e9 + 0.5)
                if devq:
                    self._dispatch(devq.popleft(), req[7], t)
                else:
                    free_ch.append(req[7])
                th = req[4]
                lim = limiters[thread_w[th]]
                if lim is None:
                    issue(th, t)
                else:
                    p = lim.next_permit(t)
                    if p <= t:
                        issue(th, t)
                    else:
                        self.seq += 1
                        push(heap, (p, self.seq, _ISSUE, th))
            elif kind == _ISSUE:
                self._issue(x, t)
            elif kind == _MODEL:
                x[0](t, x[1])
            elif kind == _RELEASE:
                gi, d, gen = x
                b = self.buckets[gi][d]
                if gen != b.gen:
                    continue  # superseded by a limit change
                while b.queue and b.take(t):
                    self._submit(b.queue.popleft(), t)
                if b.queue:
                    self._push(b.ready_at(t), _RELEASE, (gi, d, b.gen))
            else:  # _SAMPLE
                self._snapshot(t)
                if self.controller is not None:
                    self._control(t, interval_s)
                if k >= n_samples:
                    break
                k += 1
                self._push(k * interval_s, _SAMPLE, k)

    def _snapshot(self, t: float) -> None:
        busy = self.busy_acc + (t - self.busy_start if self.inflight else 0.0)
        ga = self.gacc
        rd_ns = sum(g[_G_RNS] for g in ga)
        wr_ns = sum(g[_G_WNS] for g in ga)
        row = [0] * N_FIELDS
        row[IDX["rd_ios"]] = sum(g[_G_RIOS] for g in ga)
        row[IDX["rd_sectors"]] = sum(g[_G_RBYTES] for g in ga) >> 9
        row[IDX["rd_ticks_ms"]] = rd_ns // 1_000_000
        row[IDX["wr_ios"]] = sum(g[_G_WIOS] for g in ga)
        row[IDX["wr_sectors"]] = sum(g[_G_WBYTES] for g in ga) >> 9
        row[IDX["wr_ticks_ms"]] = wr_ns // 1_000_000
        row[IDX["in_flight"]] = self.inflight
        row[IDX["io_ticks_ms"]] = int(busy * 1000.0 + 1e-9)
        row[IDX["time_in_queue_ms"]] = (rd_ns + wr_ns) // 1_000_000
        self.snapshots.append(row)
        self.gsnaps.append([list(g) for g in self.gacc])
        self.queued_snaps.append([len(b[0].queue) + len(b[1].queue) for b in self.buckets])
        self.limit_snaps.append(dict(self.limits))
        self.sample_times.append(t)

    def _demand(self, name: str, t: float) -> float | None:
        total = 0.0
        for w in self.wls:
            if w.group == name:
                r = w.rate_at(t)
                if r is None:
                    return None
                total += r
        return total

    def _group_intervals(self, k: int, dt: float) -> dict[str, GroupInterval]:
        out: dict[str, GroupInterval] = {}
        t_end = self.sample_times[k]
        for gi, name in enumerate(self.group_names):
            a, b = self.gsnaps[k - 1][gi], self.gsnaps[k][gi]
            d = [y - x for x, y in zip(a, b, strict=True)]
            r, w = d[_G_RIOS], d[_G_WIOS]
            out[name] = GroupInterval(
                group=name, r_ios=r, w_ios=w, r_iops=r / dt, w_iops=w / dt,
                iops=(r + w) / dt, r_kBps=d[_G_RBYTES] / 1024.0 / dt,
                w_kBps=d[_G_WBYTES] / 1024.0 / dt,
                r_await_ms=d[_G_RNS] / 1e6 / r if r else 0.0,
                w_await_ms=d[_G_WNS] / 1e6 / w if w else 0.0,
                throttle_wait_ms=d[_G_THRNS] / 1e6 / (r + w) if r + w else 0.0,
                queued=self.queued_snaps[k][gi], issued=d[_G_ISSUED],
                demand_iops=self._demand(name, t_end - 1e-9))
        return out

    def _control(self, t: float, interval_s: float) -> None:
        k = len(self.snapshots) - 1
        prev = np.array([self.snapshots[k - 1]], dtype=np.int64)
        cur = np.array([self.snapshots[k]], dtype=np.int64)
        ones = np.ones_like(prev, dtype=np.bool_)
        deltas = counter_deltas(prev, cur, ones, ones)
        m = derive_metrics(deltas.delta, np.array([interval_s]))
        obs = IntervalObservation(
            t_end_s=t, interval_s=interval_s,
            device={name: float(v[0]) for name, v in m.items()},
            groups=self._group_intervals(k, interval_s), limits=dict(self.limit_snaps[k]))
        assert self.controller is not None  # noqa: S101 - checked by the caller
        change = self.controller(obs)
        if change:
            for g, lim in change.items():
                self.apply_limit(t, g, lim)

    # ---- output -------------------------------------------------------------------------
    def result(self, n_samples: int, interval_s: float, *, device: str, host: str,
               start: datetime, device_kind: str) -> SimResult:
        snaps = np.array(self.snapshots, dtype=np.int64)
        k = snaps.shape[0] - 1
        present = np.ones_like(snaps[1:], dtype=np.bool_)
        deltas = counter_deltas(snaps[:-1], snaps[1:], present, present)
        dt = np.full(k, interval_s, dtype=np.float64)
        metrics = derive_metrics(deltas.delta, dt)
        times = np.array(self.sample_times, dtype=np.float64)
        start_us = int(start.timestamp() * 1_000_000)
        ts_us = start_us + np.round(times[1:] * 1_000_000).astype(np.int64)
        cols: dict[str, object] = {
            "source": [SOURCE] * k, "host": [host] * k, "device": [device] * k,
            "device_kind": [device_kind] * k, "parent": [None] * k, "ts": ts_us,
            "interval_s": dt, "since_boot": np.zeros(k, dtype=np.bool_),
            "reset": deltas.reset,
        }
        for name in DERIVED_COLUMNS:
            cols[name] = metrics[name]
        df = pl.DataFrame(cols, nan_to_null=True, strict=False).with_columns(
            pl.col("ts").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").cast(TS_DTYPE),
            pl.col("parent").cast(pl.String))
        frame = SampleFrame(df)
        rows: list[dict[str, object]] = []
        for kk in range(1, k + 1):
            gis = self._group_intervals(kk, interval_s)
            for name, gi in gis.items():
                lim = self.limit_snaps[kk][name]  # in force during interval kk
                rows.append({
                    "ts": start + timedelta(seconds=float(times[kk])),
                    "t_end_s": float(times[kk]), **{
                        f: getattr(gi, f) for f in GroupInterval.__dataclass_fields__},
                    "limit_riops": lim.riops, "limit_wiops": lim.wiops,
                    "limit_iops": lim.iops})
        groups = pl.DataFrame(rows, schema_overrides={
            "limit_riops": pl.Float64, "limit_wiops": pl.Float64, "limit_iops": pl.Float64,
            "demand_iops": pl.Float64})
        return SimResult(frame=frame, groups=groups, counters=snaps,
                         sample_times_s=times, limit_changes=self.limit_changes,
                         completed=int(snaps[-1, IDX["rd_ios"]] + snaps[-1, IDX["wr_ios"]]),
                         model=self.model.name, workloads=self.wls,
                         seed=self.seed)
