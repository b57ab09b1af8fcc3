"""The paper's policy: [Oe] §4, step by step."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from iogauge.guarantee.policy.budget import (
    _clamp,
    _iostat_round,
    _read_share,
    _whole,
    grid_targets,
    split_budget,
)
from iogauge.guarantee.policy.params import PaperParams
from iogauge.guarantee.policy.types import (
    UNLIMITED,
    Decision,
    GroupLimit,
    GroupObservation,
    Observation,
    State,
    Targets,
    retargeted,
)


class PaperPolicy:
    """[Oe] §4, step by step (the constants are :class:`PaperParams`).

    Every interval:

    1. ``busy_per_iops = %util / (r/s + w/s)`` (§4, "busy_per_iops = %util / (r/s + w/s)").
    2. Resets (§4, last paragraphs): X returns to ``x_initial_pct`` when %util falls below
       20 % (of X, see :class:`PaperParams`) — the only reset the paper implemented — and,
       the paper's missing piece, when busy_per_iops jumps by ``bpi_jump_ratio`` from the
       previous sample below 100 % (eval 1: 0.8 → 1.3; saturated samples are not compared:
       their busy_per_iops is 100/IOPS by definition, and the cut of step 4 moves it on
       purpose). Not during an update episode. The saturation window is cleared with it.
    3. Saturation (§4): the last ``window`` samples are kept; when %util = 100 in at least
       ``full_count`` of them, an update episode starts at this sample, "point 1":
       ``C`` = total IOPS, ``c`` = busy_per_iops.
    4. During the episode, while %util stays at 100, B gets its computed limit minus
       ``cut_frac · C`` (§4: 20 % of A+B's IOPS at 100 % busy, "IO busy率が100%を下回るまで
       継続する").
    5. The first sample below 100 % is "point 2": ``d`` = its busy_per_iops and
       ``NewX = X - (c - d)·C·y`` (§4), never above X ("X > New X") nor below ``x_min_pct``.
       The window is cleared, so a further update needs ``full_count`` new saturated samples
       (eval 1: updates at 500 s and 700 s, each after three new 100 % points, Fig. 11).
    6. B's limit (§4 (1)-(4)): ``a_busy = a·busy_per_iops``, ``b_busy = X - a_busy``,
       ``b = b_busy / busy_per_iops``, at least ``b_min_iops`` per direction.

    The paper limited B's *total* IOPS in user space (§4 (4)); the kernel limits reads and
    writes separately, so ``b`` is split into riops/wiops by B's read/write mix of the
    interval (each direction at least ``rw_min_share``), and among several B groups by their
    IOPS of the interval.

    States: ``idle`` (no I/O: limits kept), ``compute`` (step 6), ``counting`` (some 100 %
    samples in the window), ``cut`` (step 4), ``update`` (step 5), ``reset`` (step 2).
    """

    name = "paper"

    def __init__(self, targets: Targets, params: PaperParams | None = None) -> None:
        self.targets = targets
        self.params = params or PaperParams()
        self.x_pct = self.params.x_initial_pct
        self.window: deque[bool] = deque(maxlen=self.params.window)
        #: busy_per_iops of the last sample below 100 % (what a jump is measured against).
        self.prev_bpi: float | None = None
        self.bpi: float | None = None
        self.episode: tuple[float, float] | None = None  # (C, c) of point 1
        self.updates = 0
        self.resets = 0
        self.limits: dict[str, GroupLimit] = dict.fromkeys(targets.throttled, UNLIMITED)
        self._warned: str | None = None

    def step(self, obs: Observation) -> Decision:
        p = self.params
        total = obs.iops
        util = None if obs.util_pct is None else _iostat_round(obs.util_pct)
        if util is None or total <= 0 or util <= 0:
            # util 0 with I/O done (a short interval on an almost idle device: the kernel
            # counts busy time in whole ms) gives busy_per_iops 0, no proportion to use.
            return self._decision(State.IDLE, "no I/O completed, or no busy time (or no %util): "
                                  "busy_per_iops is undefined; limits kept")
        bpi = util / total
        self.bpi = bpi
        full = util >= p.full_util_pct
        notes: list[str] = []
        state = State.COMPUTE

        if self.episode is None:
            reset = self._reset_reason(util, bpi, full)
            if reset is not None:
                self.x_pct = p.x_initial_pct
                self.window.clear()
                self.resets += 1
                state = State.RESET
                notes.append(reset)
        if not full:
            self.prev_bpi = bpi
        self.window.append(full)
        n_full = sum(self.window)

        cut = 0.0
        if self.episode is None and full and n_full >= p.full_count:
            self.episode = (total, bpi)  # point 1: C and c
            notes.append(f"%util = 100 in {n_full} of the last {len(self.window)} samples: "
                         f"point 1 C = {total:.1f} IOPS, c = {bpi:.4f} %/IOPS")
        if self.episode is not None:
            big_c, c = self.episode
            if full:
                cut = p.cut_frac * big_c
                state = State.CUT
                notes.append(f"cutting B {cut:.1f} IOPS ({p.cut_frac:.0%} of C) below its "
                             "computed limit until %util < 100")
            else:
                d = bpi  # point 2
                x_old = self.x_pct
                new_x = x_old - (c - d) * big_c * p.y
                self.x_pct = _clamp(new_x, p.x_min_pct, x_old)
                self.episode = None
                self.window.clear()
                self.updates += 1
                state = State.UPDATE
                notes.append(f"point 2 d = {d:.4f} %/IOPS: NewX = X - (c - d)·C·y = "
                             f"{x_old:.2f} - ({c:.4f} - {d:.4f})·{big_c:.1f}·{p.y:g} = "
                             f"{new_x:.2f} %" + ("" if new_x == self.x_pct else
                                                 f" (bounded to {self.x_pct:.2f} %)"))
        elif state == State.COMPUTE and n_full:
            state = State.COUNTING

        a = self.targets.floor_iops
        a_busy = a * bpi
        b_busy = self.x_pct - a_busy
        b = b_busy / bpi - cut
        warnings = self._feasibility(a, bpi, b)
        self._apply(obs, b)
        notes.insert(0, f"busy_per_iops = {util:.2f} / {total:.1f} = {bpi:.4f} %/IOPS; a_busy "
                     f"= {a:g}·bpi = {a_busy:.2f} %; b_busy = X - a_busy = {self.x_pct:.2f} - "
                     f"{a_busy:.2f} = {b_busy:.2f} %; b = {b_busy / bpi:.1f} IOPS"
                     + (f" - {cut:.1f}" if cut else ""))
        return self._decision(state, "; ".join(notes), bpi=bpi, warnings=warnings)

    def set_floors(self, floors: Mapping[str, float]) -> None:
        """New floors for the protected groups (the paper's ``a``) from the next step on."""
        self.targets = retargeted(self.targets, floors)

    # -- internals --
    def _reset_reason(self, util: float, bpi: float, full: bool) -> str | None:
        p = self.params
        low = p.reset_low_pct * self.x_pct / 100 if p.reset_low_relative else p.reset_low_pct
        if util < low and self.x_pct != p.x_initial_pct:
            return (f"%util {util:.2f} < {low:.2f} %: X reset to {p.x_initial_pct:g} %")
        prev = self.prev_bpi
        # Only non-saturated samples are compared: at 100 % busy, busy_per_iops = 100/IOPS is
        # the saturated throughput, not the linear-region cost the proportional arithmetic
        # uses, and the paper's own cut of B moves it on purpose (c vs d, §4).
        if (p.bpi_jump_ratio is not None and not full and prev is not None and prev > 0
                and max(bpi / prev, prev / bpi) >= p.bpi_jump_ratio
                and self.x_pct != p.x_initial_pct):
            return (f"busy_per_iops changed {prev:.4f} → {bpi:.4f} (x{bpi / prev:.2f}): "
                    f"workload changed, X reset to {p.x_initial_pct:g} %")
        return None

    def _feasibility(self, a: float, bpi: float, b: float) -> tuple[str, ...]:
        need = a * bpi
        if b >= self.targets.b_min_iops:
            self._warned = None
            return ()
        key = f"{round(need)}"
        if key == self._warned:
            return ()
        self._warned = key
        return ((f"infeasible floor: A's floors total {a:g} IOPS, which at {bpi:.4f} %/IOPS "
                f"need {need:.1f} % busy, leaving B {b:.1f} IOPS under X = {self.x_pct:.1f} % "
                f"(capacity ≈ {100 / bpi:.0f} IOPS at 100 % busy, {self.x_pct / bpi:.0f} at "
                f"X); B is held at its minimum of {self.targets.b_min_iops} IOPS per "
                "direction"),)

    def _apply(self, obs: Observation, b_iops: float) -> None:
        mn = self.targets.b_min_iops
        groups = self.targets.throttled
        # Each direction gets at least b_min (below), so the split itself needs no minimum.
        shares = split_budget(max(b_iops, 0.0), {g: obs.group(g).iops for g in groups}, 0.0)
        for g in groups:
            go = obs.group(g)
            fr = _read_share(go, default=_read_share(GroupObservation(obs.r_iops, obs.w_iops)))
            fr = _clamp(fr, self.params.rw_min_share, 1 - self.params.rw_min_share)
            t = self.targets
            want_r, want_w = grid_targets(t, shares[g] * fr, shares[g] * (1 - fr))
            self.limits[g] = GroupLimit(t.on_grid(_whole(want_r, mn)),
                                        t.on_grid(_whole(want_w, mn)))

    def _decision(self, state: State, reason: str, *, bpi: float | None = None,
                  warnings: tuple[str, ...] = ()) -> Decision:
        return Decision(limits=dict(self.limits), x_pct=self.x_pct, state=state,
                        reason=reason, busy_per_iops=bpi,
                        capacity_iops=None if not bpi else 100.0 / bpi, warnings=warnings,
                        infeasible=bool(warnings))

