"""Event-driven simulator of workloads on a disk model, in virtual time.

Deterministic for a seed (numpy ``Generator``; events at equal times run in the order they
were scheduled). The event loop is a heap of plain tuples, random draws are made in numpy
batches, and the models' hot paths are inlined; ``benchmarks/simulator_speed.py`` measures
an hour of a 200-IOPS device per profile (figures in ``benchmarks/README.md``).

What happens to one request::

    thread ready --(workload rate cap)--> issued --(group throttle: io.max riops/wiops)-->
    submitted to the device (counted in flight) --(FIFO until one of the model's
    ``channels`` is free)--> in service for ``model.service_time(...)`` --> completed
    --> the thread is ready again (closed loop: one outstanding I/O per thread)

**Queued models** (``model.queued``: an HDD with command queueing, or a RAID of such
members; :mod:`iogauge.lab.hdd`) reorder what they hold, so a request's completion is not
known when it reaches the device. The simulator binds such a model to its event heap
(``model.bind(at, complete)``): the model schedules its own events (a drive finishing a
command, a RAID phase reaching its members) with ``at``, which run in time order among
the simulator's, and reports each request's completion time with ``complete`` as soon as
it is known; the completion then happens as for any model. ``channels`` is the queue
depth the host may fill (a drive's NCQ tags, a controller's queue); requests beyond it
wait in the same FIFO. Those events roughly double the heap traffic, so queued models
cost more per request.

**Counters exactly as the kernel keeps them** (block/genhd.c ``diskstats_show``, 6.x): a
request is in flight from submission to the device until completion (blk-throttle holds a
bio *before* it is accounted, so throttled requests are not in flight); ``rd_ticks`` /
``wr_ticks`` are the sums of per-request durations in nanoseconds, printed as ms with
``div_u64(nsecs, NSEC_PER_MSEC)``; ``time_in_queue`` is the same division applied to the
sum of all the nsecs; ``io_ticks`` is the time with at least one request in flight, brought
up to the read time when something is in flight (``update_io_ticks`` in
``diskstats_show``); ``in_flight`` is the gauge at the read. No merges, discards or flushes
happen, so those counters are present and stay 0. Sampling the counters every
``interval_s`` and passing them through :func:`iogauge.collector.derive.counter_deltas` and
:func:`~iogauge.collector.derive.derive_metrics` gives the SampleFrame (source
``lab-sim``), exactly as the live collector derives a real device's.

**Groups and throttles.** Every workload belongs to a group ([Oe]'s A and B). Each group
has per-direction IOPS limits, the virtual-time twin of cgroup v2 ``io.max``
``riops=``/``wiops=``: a token bucket of the limit's rate holding at most one throttle slice
of tokens (blk-throttle's ``throtl_slice``, 100 ms on rotational devices), FIFO per group and
direction. A group may instead (or also) have a *user-level* cap on its total issue rate,
``IopsLimit.iops``: [Oe]'s own actuator (§4 (4), §5: B's load threads run at the smaller
of their own target and the controller's ``b``, counted per wall-clock second before the
I/O is issued), which each of the group's workloads applies through its issue limiter.

**The controller hook** drives a guarantee policy in virtual time. At the end of every
sampling interval the simulator calls ``controller(observation)`` with an
:class:`IntervalObservation`: the interval's device metrics (the SampleFrame row, as a
dict), per-group statistics (:class:`GroupInterval`: IOPS, kB/s, latency, throttle wait,
queue) and the limits in force. The controller returns ``None`` (no change) or a mapping
``group -> IopsLimit`` for the groups whose limits change (``IopsLimit()`` removes a
group's throttle). New limits apply from that instant, as writing ``io.max`` would. The
controller sees exactly what the live monitor sees (the device's diskstats and the
groups' io.stat), one interval at a time, and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from iogauge.collector.diskstats import IDX
from iogauge.lab.model import DiskModel
from iogauge.lab.profiles import ModelProfile, build_model
from iogauge.lab.sim.draws import _Bucket, _Draws
from iogauge.lab.sim.engine import _Engine
from iogauge.lab.sim.interval import (
    EPOCH,
    SOURCE,
    Controller,
    IntervalObservation,
    IopsLimit,
    SimResult,
)
from iogauge.lab.workloads import Workload, oe_paper

# The simulator's parts live in iogauge.lab.sim; callers import them from here.
__all__ = ["EPOCH", "SOURCE", "Controller", "IntervalObservation", "IopsLimit", "SimResult",
           "SweepPoint", "_Bucket", "_Draws", "_as_model", "policy_controller", "run_point",
           "simulate", "simulate_max_iops"]


def simulate(model: DiskModel, workloads: Workload | Sequence[Workload], duration_s: float,
             *, interval_s: float = 1.0, seed: int = 0, controller: Controller | None = None,
             limits: Mapping[str, IopsLimit] | None = None, device: str = "sim0",
             host: str = "lab", start: datetime = EPOCH,
             device_kind: str = "disk", batch: int = 8192) -> SimResult:
    """Run ``workloads`` on ``model`` for ``duration_s`` of virtual time.

    Args:
        model: a disk model (it is reset first).
        workloads: the I/O streams; each thread keeps one request outstanding.
        duration_s: virtual seconds to simulate (a whole number of ``interval_s``).
        interval_s: sampling interval of the counters (and the controller).
        seed: seed of every random draw: the same seed gives the same result.
        controller: called at the end of every interval (see the module docstring).
        limits: group limits in force from the start.
        device, host, device_kind, start: identity and time origin of the SampleFrame.
        batch: random draws made per refill (performance only; part of the random stream,
            so keep it fixed to reproduce a run).
    """
    wls = (workloads,) if isinstance(workloads, Workload) else tuple(workloads)
    if not wls:
        raise ValueError("no workload to simulate")
    if interval_s <= 0 or duration_s < interval_s:
        raise ValueError("need interval_s > 0 and duration_s >= interval_s")
    n_samples = round(duration_s / interval_s)
    if abs(n_samples * interval_s - duration_s) > 1e-9 * max(1.0, duration_s):
        raise ValueError("duration_s must be a whole number of intervals")
    eng = _Engine(model, wls, seed=seed, controller=controller, batch=batch)
    for g, lim in (limits or {}).items():
        eng.apply_limit(0.0, g, lim, initial=True)
    eng.run(n_samples, interval_s)
    return eng.result(n_samples, interval_s, device=device, host=host, start=start,
                      device_kind=device_kind)


# ---- guarantee policies ----------------------------------------------------------------

def policy_controller(policy: Any, decisions: list[Any] | None = None) -> Controller:
    """A controller that drives a guarantee policy (:mod:`iogauge.guarantee.policy`).

    Each interval's observation becomes the policy's ``Observation`` (device %util, r/s,
    w/s, await, aqu-sz; per group completed r/s and w/s and the offered load); the
    ``Decision``'s limits (whole IOPS, None = unlimited) become the groups' throttles. Every
    decision is appended to ``decisions`` when given (for plots and assertions).
    """
    # Imported here: the lab does not need the guarantee package unless a policy is driven.
    from iogauge.guarantee.policy import GroupObservation, Observation  # noqa: PLC0415

    def control(obs: IntervalObservation) -> Mapping[str, IopsLimit] | None:
        d = obs.device
        pobs = Observation(
            interval_s=obs.interval_s, util_pct=d["util_pct"], r_iops=d["r_iops"],
            w_iops=d["w_iops"], await_ms=d["await_ms"], aqu_sz=d["aqu_sz"],
            r_await_ms=d["r_await_ms"], w_await_ms=d["w_await_ms"],
            groups={g: GroupObservation(r_iops=gi.r_iops, w_iops=gi.w_iops,
                                        demand_iops=gi.demand_iops)
                    for g, gi in obs.groups.items()})
        decision = policy.step(pobs)
        if decisions is not None:
            decisions.append(decision)
        return {g: IopsLimit(riops=None if lim.riops is None else float(lim.riops),
                             wiops=None if lim.wiops is None else float(lim.wiops))
                for g, lim in decision.limits.items()}

    return control


# ---- convenience ------------------------------------------------------------------------

def _as_model(model_profile: object, capacity_bytes: int | None = None) -> DiskModel:
    if isinstance(model_profile, ModelProfile | str | Path):
        return build_model(model_profile, capacity_bytes=capacity_bytes)
    if capacity_bytes is not None:
        raise ValueError("capacity_bytes applies to a profile, not to a built model")
    return model_profile  # type: ignore[return-value]


def simulate_max_iops(model_profile: object, workload: Workload | Sequence[Workload] | str,
                      duration_s: float = 120.0, seed: int = 0, *,
                      capacity_bytes: int | None = None, warmup_frac: float = 0.1,
                      placement: str = "A", threads: int | None = None) -> float:
    """The most IOPS ``workload`` gets from the model: its rate caps removed, closed loop.

    Args:
        model_profile: a profile name, profile file path, ``ModelProfile`` or a built
            ``DiskModel``.
        workload: a Workload, several, or an [Oe] workload name (``file-share``,
            ``backup``) placed on ``placement`` with ``threads`` threads (default 10).
        duration_s: virtual seconds (whole seconds; sampled every second).
        seed: random seed.
        capacity_bytes: rescale a profile to this device size (the emulated device's).
        warmup_frac: leading share of the run left out (empty caches, queues filling).

    Returns:
        completed I/Os per second over the rest of the run -- what fio's IOPS over the
        same steady window reports for the same workload.
    """
    if isinstance(workload, str):
        wls: list[Workload] = oe_paper(workload, placement, threads=threads or 10)
    elif isinstance(workload, Workload):
        wls = [workload]
    else:
        wls = list(workload)
    wls = [w.with_rate(None) for w in wls]
    model = _as_model(model_profile, capacity_bytes)
    whole = max(1, round(duration_s))
    res = simulate(model, wls, float(whole), interval_s=1.0, seed=seed)
    return res.steady_iops(warmup_s=math.floor(whole * warmup_frac))


@dataclass
class SweepPoint:
    """One rate-capped run: what the cap asked for and what the device did.

    Attributes:
        rate_iops: the cap (None: uncapped).
        iops: completed I/Os per second (steady window).
        util_pct: %util over the steady window.
        await_ms: mean latency over the steady window.
        samples: per-interval (iops, util_pct) pairs of the steady window.
    """

    rate_iops: float | None
    iops: float
    util_pct: float
    await_ms: float
    samples: list[tuple[float, float]] = field(default_factory=list)


def run_point(model: DiskModel, wls: Sequence[Workload], duration_s: float, *,
              interval_s: float, seed: int, warmup_s: float) -> SweepPoint:
    """Simulate once and reduce to a :class:`SweepPoint` (rate = the caps' sum)."""
    res = simulate(model, wls, duration_s, interval_s=interval_s, seed=seed)
    # Frame row k covers (times[k], times[k + 1]]: keep the rows that end after the warm-up.
    steady = res.sample_times_s[1:] > warmup_s + 1e-9
    df = res.frame.df.filter(pl.Series(steady))
    c, tt = res.counters, res.sample_times_s
    k0 = int(np.searchsorted(tt, warmup_s - 1e-9))
    ios = (c[-1, IDX["rd_ios"]] + c[-1, IDX["wr_ios"]] - c[k0, IDX["rd_ios"]]
           - c[k0, IDX["wr_ios"]])
    ticks = (c[-1, IDX["rd_ticks_ms"]] + c[-1, IDX["wr_ticks_ms"]] - c[k0, IDX["rd_ticks_ms"]]
             - c[k0, IDX["wr_ticks_ms"]])
    rates = [w.rate_iops for w in wls]
    rate = None if any(r is None for r in rates) else float(sum(r for r in rates if r))
    return SweepPoint(rate_iops=rate, iops=res.steady_iops(warmup_s),
                      util_pct=res.steady_util_pct(warmup_s),
                      await_ms=float(ticks) / float(ios) if ios else 0.0,
                      samples=list(zip(df["iops"].to_list(), df["util_pct"].to_list(),
                                       strict=True)))
