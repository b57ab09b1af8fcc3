"""[Oe] §5's evaluations on the emulated block device: :func:`device_paper_eval` runs one
through the real-cgroup harness (:mod:`iogauge.lab.guarantee_eval`) and presents its result
like the simulator's (:mod:`iogauge.lab.paper_eval`)."""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from iogauge import __version__
from iogauge.lab.paper_eval import VariantRun, _svg_series
from iogauge.lab.paper_eval_setup import (
    FULL_UTIL_PCT,
    PAPER_EVALUATIONS,
    PaperEvalError,
    ScaledPhase,
)
from iogauge.lab.paper_report import REPORT_CSS, Comparison, holds_text

if TYPE_CHECKING:
    from iogauge.lab.guarantee_eval import EvalConfig, EvalResult

# ---- device mode ------------------------------------------------------------------------------

#: What to do when the device harness is not there (or not what this module expects).
NO_HARNESS = ("paper-eval --device runs the evaluation on the emulated block device through "
              "iogauge.lab.guarantee_eval.run_evaluations, which is not available here; run "
              "`sudo .venv/bin/python benchmarks/guarantee_eval.py --evals {n}` (the same "
              "harness) or the simulator: `iogauge lab reproduce paper-eval{n} --sim`")


@dataclass(frozen=True)
class DeviceEvalConfig:
    """How a paper evaluation runs on the emulated device (the harness's own defaults
    otherwise: see :class:`iogauge.lab.guarantee_eval.EvalConfig`).

    Attributes:
        model: the emulated device's model (None: the harness's default, the lab's
            7,200 rpm spindle).
        quick: the harness's quick configuration (shorter phases and calibrations).
        controllers: which controllers run (the harness's names: paper, adaptive, static,
            no-control).
    """

    model: str | None = None
    quick: bool = False
    controllers: tuple[str, ...] = ("paper", "adaptive")


@dataclass
class DeviceEvalResult:
    """A paper evaluation run on the emulated device by the harness.

    Attributes:
        number: the evaluation (1-3).
        harness_config: the harness's configuration as run.
        harness_result: its result (``iogauge.lab.guarantee_eval.EvalResult``).
        runs: each controller's run as a :class:`VariantRun` (per-interval series; X is
            not recorded by the harness).
        phases: the schedule as the harness scaled it.
        comparisons: the results table.
    """

    number: int
    harness_config: EvalConfig
    harness_result: EvalResult
    runs: list[VariantRun]
    phases: list[ScaledPhase]
    comparisons: list[Comparison] = field(default_factory=list)
    started_utc: str = ""
    wall_s: float = 0.0
    mode: str = "device"

    @property
    def name(self) -> str:
        return f"paper-eval{self.number}"

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": self.name, "mode": self.mode, "started_utc": self.started_utc,
                "wall_s": self.wall_s, "harness": "iogauge.lab.guarantee_eval",
                "comparisons": [asdict(c) for c in self.comparisons],
                "result": self.harness_result.to_dict()}

    def markdown(self) -> str:
        from iogauge.lab import guarantee_eval as harness  # noqa: PLC0415 - device side

        ev = PAPER_EVALUATIONS[self.number]
        out = [f"# {self.name}: [Oe] §5, {ev.title} (device)", "",
               ("On the emulated block device with fio in two cgroup v1 blkio groups and "
                "iogauge's controller in real time (harness `iogauge.lab.guarantee_eval`; "
                "its docstring defines the scaling, the oracle and every column)."), "",
               "## Our numbers beside the paper's", "",
               "| finding | ours | paper | holds | criterion |", "|---|---|---|:---:|---|"]
        for c in self.comparisons:
            out.append(f"| {c.finding} | {c.ours} | {c.paper} | {holds_text(c.holds)} | "
                       f"{c.criterion} |")
        out += ["", "## The harness's table", "", harness.results_markdown(
            self.harness_result), "",
            f"_iogauge {__version__}, started {self.started_utc}, took {self.wall_s:.0f} s._",
            ""]
        return "\n".join(out)

    def html(self) -> str:
        e = html.escape
        ev = PAPER_EVALUATIONS[self.number]
        rows = "".join(
            f"<tr><td>{e(c.finding)}</td><td>{e(c.ours)}</td><td>{e(c.paper)}</td>"
            f"<td class=\"{'yes' if c.holds else ('no' if c.holds is False else '')}\">"
            f"{holds_text(c.holds)}</td><td>{e(c.criterion)}</td></tr>"
            for c in self.comparisons)
        sections = []
        for r in self.runs:
            a_svg, u_svg = _svg_series(r, self.phases)
            sections.append(
                f"<h2>{e(r.variant)}</h2><div class=\"charts\"><figure>{a_svg}<figcaption>"
                "Blue: A's IOPS; orange: B's; green dashes: A's floor; red dots: B's "
                "limits (riops + wiops, read back from the cgroup).</figcaption></figure>"
                f"<figure>{u_svg}<figcaption>Grey: %util; red dots: samples at %util = 100 "
                f"({r.full_intervals} in all).</figcaption></figure></div>")
        return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{e(self.name)} (device)</title><style>{REPORT_CSS}</style></head>"
                f"<body><h1>[Oe] §5 on the emulated device: {e(ev.title)}</h1>"
                f"<div class=\"meta\">iogauge {e(__version__)}, {e(self.started_utc)}."
                "</div><h2>Our numbers beside the paper's</h2><table><tr><th>finding</th>"
                "<th>ours</th><th>paper</th><th>holds</th><th>criterion</th></tr>"
                f"{rows}</table>{''.join(sections)}</body></html>\n")


def _device_runs(res: Any, number: int) -> tuple[list[ScaledPhase], list[VariantRun]]:
    """The harness's runs of evaluation ``number`` as :class:`VariantRun` series."""
    phases = [ScaledPhase(int(p.a_floor_iops), int(p.b_demand_iops), float(p.start_s),
                          float(p.duration_s)) for p in res.schedules.get(number, [])]
    runs: list[VariantRun] = []
    for r in res.runs:
        if r.evaluation != number:
            continue
        x = r.samples
        dt = [d if d > 0 else math.nan for d in x.dt_s]
        util = [float(u) for u in x.util_pct]
        limits: list[float | None] = [None if math.isnan(br) or math.isnan(bw) else br + bw
                                      for br, bw in zip(x.b_riops, x.b_wiops, strict=True)]
        m = r.metrics
        runs.append(VariantRun(
            variant=str(r.controller), t_end_s=[float(t) for t in x.t_end_s],
            a_iops=[a / d for a, d in zip(x.a_ios, dt, strict=True)],
            b_iops=[b / d for b, d in zip(x.b_ios, dt, strict=True)], util_pct=util,
            x_pct=[None] * len(util), state=[""] * len(util), b_limit_iops=limits,
            x_changes=[], phases=[],
            a_met_share=math.nan if m is None else float(m.a_met_share),
            a_met_late_share=math.nan if m is None else float(m.a_met_after_share),
            full_intervals=sum(u >= FULL_UTIL_PCT for u in util),
            max_util_pct=max(util) if util else math.nan, wall_s=float(r.wall_s)))
    return phases, runs


def _device_comparisons(res: Any, number: int, met_goal: float = 0.9) -> list[Comparison]:
    rows: list[Comparison] = []
    ev = PAPER_EVALUATIONS[number]
    for r in res.runs:
        m = r.metrics
        if r.evaluation != number or m is None:
            continue
        rows.append(Comparison(
            f"{r.controller}: A got ≥ 95 % of its floor",
            f"{m.a_met_after_share:.0%} of the samples after convergence "
            f"({m.a_met_share:.0%} of all)",
            "held at its target after the update(s); temporary misses accepted (§4, "
            "Figs. 10, 12, 14)", m.a_met_after_share >= met_goal,
            f"A meets its floor in ≥ {met_goal:.0%} of the samples after convergence"))
        rows.append(Comparison(
            f"{r.controller}: B's IOPS by phase",
            " / ".join(f"{p.b_iops:.1f}" for p in m.phases) + f" ({m.b_vs_oracle:.0%} of "
            "the oracle's)", "- (Figs. 10, 12, 14 only)", None,
            "reported (the oracle: what the device can do beyond A's floor)"))
    rows.append(Comparison(
        "target X updates", "not recorded by the device harness (see the sim mode)",
        f"{ev.paper_updates}", None, "reported"))
    return rows


def device_paper_eval(number: int, cfg: DeviceEvalConfig = DeviceEvalConfig(), *,
                      progress: Callable[[str], None] | None = None) -> DeviceEvalResult:
    """Evaluation ``number`` on the emulated device, through the harness (module docstring);
    a clear :class:`PaperEvalError` when the harness is not available."""
    if number not in PAPER_EVALUATIONS:
        raise PaperEvalError(f"[Oe] has evaluations 1, 2 and 3, not {number}")
    try:
        # Imported only here: the harness needs root, fio and the emulated device.
        from iogauge.lab import guarantee_eval as harness  # noqa: PLC0415
    except ImportError as exc:
        raise PaperEvalError(NO_HARNESS.format(n=number) + f" ({exc})") from exc
    changes: dict[str, Any] = {"evaluations": (number,), "controllers": cfg.controllers}
    if cfg.model:
        changes["model"] = cfg.model
    try:
        hcfg = replace(harness.QUICK if cfg.quick else harness.EvalConfig(), **changes)
    except (TypeError, ValueError) as exc:
        raise PaperEvalError(f"the device harness refused the configuration: {exc}") from exc
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    res = harness.run_evaluations(hcfg, say=progress or (lambda _m: None))
    phases, runs = _device_runs(res, number)
    return DeviceEvalResult(number=number, harness_config=hcfg, harness_result=res,
                            runs=runs, phases=phases,
                            comparisons=_device_comparisons(res, number),
                            started_utc=started, wall_s=time.monotonic() - t0)



__all__ = ["NO_HARNESS", "DeviceEvalConfig", "DeviceEvalResult", "device_paper_eval"]
