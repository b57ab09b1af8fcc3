"""Shared arithmetic of the policies: budgets split among groups, limits the kernel takes."""

from __future__ import annotations

import math
from collections.abc import Mapping

from iogauge.guarantee.policy.types import MAX_LIMIT_IOPS, GroupObservation, Targets


def _ewma(old: float | None, new: float, alpha: float) -> float:
    return new if old is None else old + alpha * (new - old)


def _clamp(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


def _whole(x: float, lo: int) -> int:
    """A limit the kernel accepts: a whole number of IOPS in [lo, MAX_LIMIT_IOPS]."""
    if not math.isfinite(x):
        return MAX_LIMIT_IOPS if x > 0 else lo
    # The epsilon keeps 180 x 0.1 = 17.999999999999996 from becoming 17.
    return int(_clamp(math.floor(x + 1e-9), lo, MAX_LIMIT_IOPS))


def _iostat_round(util_pct: float) -> float:
    """%util as iostat prints it (two decimals), so "100 %" means what an operator reads."""
    return round(util_pct, 2)


def split_budget(total: float, weights: Mapping[str, float], minimum: float,
                 min_share: float = 0.0) -> dict[str, float]:
    """Share ``total`` among groups proportionally to ``weights``, each getting >= ``minimum``.

    A group's weight is raised to ``min_share · total / n`` first, so an idle group keeps a
    small slice and can ramp up. When the minimums alone exceed ``total`` every group gets
    ``minimum`` (the caller reports the infeasibility).
    """
    names = list(weights)
    if not names:
        return {}
    n = len(names)
    if total <= minimum * n:
        return dict.fromkeys(names, minimum)
    floor_w = min_share * total / n
    w = {g: max(weights[g], floor_w, 0.0) for g in names}
    s = sum(w.values())
    if s <= 0:
        w = dict.fromkeys(names, 1.0)
        s = float(n)
    share = {g: total * w[g] / s for g in names}
    # Lift groups under the minimum and take the difference from the others, proportionally.
    fixed: dict[str, float] = {}
    while True:
        low = [g for g in names if g not in fixed and share[g] < minimum]
        if not low:
            break
        for g in low:
            fixed[g] = minimum
        rest = [g for g in names if g not in fixed]
        left = total - sum(fixed.values())
        ws = sum(w[g] for g in rest)
        for g in rest:
            share[g] = left * w[g] / ws if ws > 0 else left / len(rest)
    share.update(fixed)
    return share


def grid_targets(t: Targets, want_r: float, want_w: float, *,
                 bind: str | None = None) -> tuple[float, float]:
    """Per-direction targets for a group allowed ``want_r`` reads and ``want_w`` writes/s,
    on the throttle's grid (:attr:`Targets.limit_grid_iops`).

    Flooring both directions would cut the group twice: its reads and writes keep its mix,
    so it gets ``min(R/m, W/(1-m))`` and the direction that lost more binds. Instead the
    larger direction is floored (it binds: the group stays within its allowance) and the
    smaller one is raised to its next grid point, so it does not bind -- at the price of
    at most one grid step more in that direction if the group shifts its mix toward it.
    A smaller direction under half a grid step stays as it is (a group held near its
    minimum stays there). Example (grid 10): 72 + 18 -> 70 + 20, i.e. ~87 IOPS at 80 %
    reads instead of 50 (70 + 10 binds the writes at 10 = 20 % of 50); 45 + 6 -> 40 + 10.

    ``bind`` ("r" or "w"): the direction that bound last time keeps binding while the other
    is not larger by half a grid step or more -- for an even mix (a 50:50 backup) the larger
    direction changes with every interval's noise, and 30 + 40 / 40 + 30 would be rewritten
    every second for the same 60 IOPS.
    """
    g = t.limit_grid_iops
    if g <= 1:
        return want_r, want_w

    def down(x: float) -> float:
        return x if x < g else g * math.floor(x / g + 1e-9)

    def up(x: float) -> float:
        return x if x < g / 2 else g * math.ceil(x / g - 1e-9)

    margin = g / 2
    if bind == "r":
        reads_bind = want_r >= want_w - margin
    elif bind == "w":
        reads_bind = want_r > want_w + margin
    else:
        reads_bind = want_r >= want_w
    if reads_bind:
        return down(want_r), up(want_w)
    return up(want_r), down(want_w)


def _held(used: float, limit: int | None) -> bool:
    """A direction used (nearly) all of its limit: the limit, not demand, held it."""
    return limit is not None and used >= 0.9 * limit


def _read_share(obs: GroupObservation, default: float = 0.5) -> float:
    return obs.r_iops / obs.iops if obs.iops > 0 else default


