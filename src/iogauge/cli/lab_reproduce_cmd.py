"""`iogauge lab reproduce`: re-run a seed paper's experiment on the lab's disk models."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from iogauge.cli.common import err, out, user_errors
from iogauge.lab.experiments import EXPERIMENTS, QUICK, Sec3Config, run_experiment, write_outputs

#: Device mode runs in real time: shorter runs and 5-s sampling keep a sweep to hours, not
#: days (the simulator's defaults would take ~6 h per case).
DEVICE_DEFAULTS = {"point_s": 60.0, "warmup_s": 15.0, "max_s": 60.0, "interval_s": 5.0,
                   "refine": 1}


def reproduce(
    name: str = typer.Argument(..., help=f"Experiment to run: {', '.join(EXPERIMENTS)}."),
    sim: bool = typer.Option(True, "--sim/--device",
                             help="--sim: the simulator, virtual time (default, minutes). "
                                  "--device: fio on the emulated block device, real time "
                                  "(root, fuse3; hours)."),
    out_dir: Path = typer.Option(Path("lab-results"), "--out", "-o",
                                 help="Directory for results.md, report.html and "
                                      "results.json (created if missing)."),
    profile: str = typer.Option(Sec3Config.profile, "--profile", "-m",
                                help="Disk model profile (bundled name or TOML file); "
                                     "default: seed 004's RAID-5 of 6 SATA disks."),
    seed: int = typer.Option(Sec3Config.seed, "--seed", help="Random seed (sim mode: the "
                             "same seed gives the same numbers)."),
    quick: bool = typer.Option(False, "--quick", help="Shorter, coarser runs (a first "
                               "look; knees less precise)."),
    point_seconds: float | None = typer.Option(None, "--point-seconds", min=10.0,
                                               help="Length of each sweep run (s)."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Cases run in parallel in "
                             "sim mode (0: one per CPU)."),
    workloads: list[str] = typer.Option(None, "--workload", "-w", help="Only this workload "
                                        "(file-share, backup; repeatable). Default: both."),
    placements: list[str] = typer.Option(None, "--placement", "-p", help="Only this "
                                         "placement (A, B, A+B; repeatable). Default: all."),
) -> None:
    """Reproduce a seed paper's experiment and write its numbers beside the paper's.

    Example: `iogauge lab reproduce paper-sec3 --sim --out results/` runs seed 004 §3
    (%util against IOPS for the file-share and backup workloads on the volume's first
    500 GB, last 500 GB and both) on a RAID-5 of 6 SATA disks in virtual time, then writes
    results/results.md (the table: maximum IOPS, outer vs inner and A+B effects, the
    workload ratio, the knee, each beside the paper's number) and results/report.html
    (self-contained, inline SVG plots). `--device` runs the same sweep with fio against
    the emulated block device instead.
    """
    with user_errors():
        base = QUICK if quick else Sec3Config()
        changes: dict[str, object] = {"profile": profile, "seed": seed, "jobs": jobs}
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
        cfg = dataclasses.replace(base, **changes)  # type: ignore[arg-type]
        res = run_experiment(name, "sim" if sim else "device", cfg,
                             progress=err.print)
        paths = write_outputs(res, out_dir)
        for row in res.comparisons:
            mark = "" if row.holds is None else ("  [holds]" if row.holds else "  [DIFFERS]")
            out.print(f"{row.finding}: ours {row.ours}, paper {row.paper}{mark}")
        err.print(f"wrote {', '.join(str(p) for p in paths)} ({res.wall_s:.0f} s)")
