"""`iogauge lab reproduce`: re-run [Oe]'s experiments on the lab's disk models."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from iogauge.cli.common import err, out, user_errors
from iogauge.cli.defaults import LAB_EXPERIMENTS, LAB_VARIANT_NAMES

if TYPE_CHECKING:
    # imported when the command runs: the experiments pull in the simulator, polars and numpy
    from iogauge.lab import paper_eval, paper_eval_device
    from iogauge.lab.experiments import Sec3Config

#: Device mode runs in real time: shorter runs and 5-s sampling keep a sweep to hours, not
#: days (the simulator's defaults would take ~6 h per case).
DEVICE_DEFAULTS = {"point_s": 60.0, "warmup_s": 15.0, "max_s": 60.0, "interval_s": 5.0,
                   "refine": 1}


def _sec3_config(sim: bool, profile: str | None, seed: int | None, quick: bool,
                 point_seconds: float | None, jobs: int, workloads: list[str],
                 placements: list[str]) -> Sec3Config:
    from iogauge.lab.experiments import QUICK, Sec3Config

    base = QUICK if quick else Sec3Config()
    changes: dict[str, object] = {"jobs": jobs}
    if profile:
        changes["profile"] = profile
    if seed is not None:
        changes["seed"] = seed
    warmup_s = base.warmup_s
    if workloads:
        changes["workloads"] = tuple(workloads)
    if placements:
        changes["placements"] = tuple(placements)
    if not sim:
        changes.update(DEVICE_DEFAULTS)
        warmup_s = DEVICE_DEFAULTS["warmup_s"]
    if point_seconds is not None:
        changes["point_s"] = point_seconds
        changes["max_s"] = point_seconds
        changes["warmup_s"] = min(warmup_s, point_seconds / 3.0)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _eval_config(name: str, sim: bool, profile: str | None, seed: int | None, quick: bool,
                 jobs: int, variants: list[str], scale: bool, sec3_only: list[str],
                 ) -> paper_eval.PaperEvalConfig | paper_eval_device.DeviceEvalConfig:
    from iogauge.lab import paper_eval, paper_eval_device
    from iogauge.lab.experiments import ExperimentError

    if sec3_only:
        raise ExperimentError(f"{', '.join(sec3_only)}: for paper-sec3 only, not {name}")
    if not sim:
        if variants or seed is not None or not scale:
            raise ExperimentError(f"{name} --device runs the device harness's controllers "
                                  "(paper, adaptive) with its own scaling; --variant, --seed "
                                  "and --no-scale are for --sim")
        return paper_eval_device.DeviceEvalConfig(model=profile, quick=quick)
    base = paper_eval.QUICK if quick else paper_eval.PaperEvalConfig()
    changes: dict[str, object] = {"jobs": jobs, "scale": scale}
    if profile:
        changes["profile"] = profile
    if seed is not None:
        changes["seed"] = seed
    if variants:
        changes["variants"] = tuple(variants)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def reproduce(
    name: str = typer.Argument(..., help=f"Experiment to run: {', '.join(LAB_EXPERIMENTS)}."),
    sim: bool = typer.Option(True, "--sim/--device",
                             help="--sim: the simulator, virtual time (default, minutes). "
                                  "--device: the emulated block device in real time (root, "
                                  "fuse3; paper-sec3 with fio, hours; paper-eval with real "
                                  "cgroups through the guarantee evaluation harness)."),
    out_dir: Path = typer.Option(Path("lab-results"), "--out", "-o",
                                 help="Directory for results.md, report.html and "
                                      "results.json (created if missing)."),
    profile: str | None = typer.Option(None, "--profile", "-m",
                                       help="Disk model profile (bundled name or TOML file). "
                                            "Default: [Oe]'s RAID-5 of 6 SATA disks "
                                            "(paper-eval --device: the harness's emulated "
                                            "7,200 rpm disk)."),
    seed: int | None = typer.Option(None, "--seed", help="Random seed (sim mode: the same "
                                    "seed gives the same numbers; default 4)."),
    quick: bool = typer.Option(False, "--quick", help="Shorter, coarser runs (a first "
                               "look; paper-eval: the schedule compressed 2.5x)."),
    point_seconds: float | None = typer.Option(None, "--point-seconds", min=10.0,
                                               help="paper-sec3: length of each sweep run "
                                                    "(s)."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Runs in parallel in sim mode "
                             "(0: one per CPU)."),
    workloads: list[str] = typer.Option(None, "--workload", "-w", help="paper-sec3: only "
                                        "this workload (file-share, backup; repeatable). "
                                        "Default: both."),
    placements: list[str] = typer.Option(None, "--placement", "-p", help="paper-sec3: only "
                                         "this placement (A, B, A+B; repeatable). Default: "
                                         "all."),
    variants: list[str] = typer.Option(None, "--variant", help="paper-eval: only this row "
                                       f"({', '.join(LAB_VARIANT_NAMES)}; "
                                       "repeatable). Default: all."),
    scale: bool = typer.Option(True, "--scale/--no-scale", help="paper-eval: rescale the "
                               "paper's target IOPS by the model's capacity per workload "
                               "(default) or use them as the paper gives them."),
) -> None:
    """Reproduce one of [Oe]'s experiments and write its numbers beside the paper's.

    Example: `iogauge lab reproduce paper-sec3 --sim --out results/` runs [Oe] §3
    (%util against IOPS for the file-share and backup workloads on the volume's first
    500 GB, last 500 GB and both) on a RAID-5 of 6 SATA disks in virtual time, then writes
    results/results.md (the table: maximum IOPS, outer vs inner and A+B effects, the
    workload ratio, the knee, each beside the paper's number) and results/report.html
    (self-contained, inline SVG plots). `iogauge lab reproduce paper-eval1` replays [Oe]
    §5's first evaluation (file share A vs backup B, A's target 5 -> 50 -> 5 IOPS) with
    the guarantee policy deciding B's limit every 20 s: target busy rate (X) updates, A's
    floor met, B's throughput and the svctm drift beside the paper's. `--device` runs on
    the emulated block device instead.
    """
    from iogauge.lab.experiments import run_experiment, write_outputs

    with user_errors():
        cfg = _config(name, sim, profile, seed, quick, point_seconds, jobs, workloads,
                      placements, variants, scale)
        res = run_experiment(name, "sim" if sim else "device", cfg, progress=err.print)
        paths = write_outputs(res, out_dir)
        for row in res.comparisons:
            mark = "" if row.holds is None else ("  [holds]" if row.holds else "  [DIFFERS]")
            out.print(f"{row.finding}: ours {row.ours}, paper {row.paper}{mark}",
                      markup=False)
        err.print(f"wrote {', '.join(str(p) for p in paths)} ({res.wall_s:.0f} s)")


def _config(name: str, sim: bool, profile: str | None, seed: int | None, quick: bool,
            point_seconds: float | None, jobs: int, workloads: list[str],
            placements: list[str], variants: list[str], scale: bool
            ) -> Sec3Config | paper_eval.PaperEvalConfig | paper_eval_device.DeviceEvalConfig:
    """The experiment's configuration from the options; options of the other experiment
    are refused by name."""
    from iogauge.lab import paper_eval
    from iogauge.lab.experiments import EXPERIMENTS, ExperimentError

    if name == "paper-sec3":
        if variants or not scale:
            raise ExperimentError("--variant and --no-scale apply to paper-eval1..3")
        return _sec3_config(sim, profile, seed, quick, point_seconds, jobs, workloads,
                            placements)
    if name in paper_eval.EVAL_EXPERIMENTS:
        sec3_only = [opt for opt, given in (("--point-seconds", point_seconds is not None),
                                            ("--workload", bool(workloads)),
                                            ("--placement", bool(placements))) if given]
        return _eval_config(name, sim, profile, seed, quick, jobs, variants, scale, sec3_only)
    raise ExperimentError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
