"""`iogauge guarantee`: keep a protected cgroup above an IOPS floor by throttling others.

``guarantee_app`` is a Typer group whose callback *is* the run command (so
``iogauge guarantee --device sdb --protect ...`` runs the controller) with subcommands
``release`` (restore limits by hand) and ``show`` (recorded decisions). Register with
``app.add_typer(guarantee_cmd.guarantee_app, name="guarantee")``.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from iogauge.cli.common import err, out, user_errors
from iogauge.cli.defaults import GUARANTEE_STATE_PATH as DEFAULT_STATE_PATH
from iogauge.cli.options import ProcfsRootOption, SysfsRootOption
from iogauge.guarantee import GuaranteeError

if TYPE_CHECKING:
    from iogauge.guarantee.config import GuaranteeConfig

guarantee_app = typer.Typer(
    name="guarantee",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_STATE_HELP = ("State file recording every limit written and the value it replaced "
               f"(default {DEFAULT_STATE_PATH}).")
_DB_HELP = ("DuckDB store for the decisions (default: $XDG_DATA_HOME/iogauge/iogauge.duckdb, "
            "~/.local/share/iogauge/iogauge.duckdb without XDG_DATA_HOME).")


def _say(line: str) -> None:
    """Decisions to stdout (results); warnings, restores and progress to stderr."""
    if line.startswith("warning: "):
        err.print(line, markup=False, style="yellow")
    elif line.startswith(("restored ", "stale state", "FAILED", "left as is", "cgroup gone",
                          "already at", "dry run", "guaranteeing", "no state file", "/")):
        err.print(line, markup=False)
    else:
        out.print(line, markup=False)


@contextmanager
def _stop_on_signals(on_hup: Callable[[], None] | None = None) -> Iterator[threading.Event]:
    """An event set by SIGTERM, SIGINT or SIGHUP (or ``on_hup`` called for SIGHUP when
    given); the previous handlers come back after.

    The handlers only set events — no exception is raised mid-write — so a second Ctrl-C
    during the restore cannot interrupt it.
    """
    stop = threading.Event()

    def handler(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGHUP and on_hup is not None:
            on_hup()
        else:
            stop.set()

    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield stop
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


_DeviceOption = Annotated[str | None, typer.Option(
    "--device", help="Device to guarantee on: /dev/sdb, sdb, or 8:16. A partition means its "
    "disk.")]
_ProtectOption = Annotated[list[str] | None, typer.Option(
    "--protect", help="CGROUP_DIR:IOPS — an absolute cgroup directory (v1 blkio or v2) and "
    "the IOPS floor guaranteed to it; repeat for several.")]
_ThrottleOption = Annotated[list[Path] | None, typer.Option(
    "--throttle", help="Absolute cgroup directory that may be throttled; repeat for several "
    "(they share B's budget by their recent I/O).")]
_IntervalOption = Annotated[float | None, typer.Option(
    "--interval", "-i", min=0.1, help="Seconds between decisions (default 1; [Oe] used "
    "20).")]
_PolicyOption = Annotated[str | None, typer.Option(
    "--policy", help="adaptive (default: closed loop on A's IOPS) or paper ([Oe] §4 "
    "exactly).")]
_StateOption = Annotated[Path | None, typer.Option("--state", help=_STATE_HELP,
                                                   show_default=False)]
_DbOption = Annotated[Path | None, typer.Option("--db", help=_DB_HELP, show_default=False)]
_DryRunOption = Annotated[bool, typer.Option(
    "--dry-run", help="Print the limits that would be written; write nothing (no root needed "
    "to read most cgroup files).")]
_ConfigOption = Annotated[Path | None, typer.Option(
    "--config", help="TOML file with the same settings (docs/guarantee.md); options override "
    "it.")]
_DurationOption = Annotated[float | None, typer.Option(
    "--duration", "-d", min=0.1, help="Stop after this many seconds (default: until SIGTERM "
    "or Ctrl-C).")]
_BMinOption = Annotated[int | None, typer.Option(
    "--b-min", min=1, help="Every throttled group keeps at least this many reads and writes "
    "per second (default 1).")]
_CapacityModelOption = Annotated[str | None, typer.Option(
    "--capacity-model", help="auto (default: the service model `iogauge analyze` gives the "
    "device's labels), util (one request at a time: %util is capacity) or latency (served "
    "in parallel: latency knee); `iogauge analyze --media` terms.")]
_CapacityIopsOption = Annotated[float | None, typer.Option(
    "--capacity-iops", min=0.001, help="The device's capacity in IOPS if known: starting "
    "estimate and up-front floor check.")]
_OnInfeasibleOption = Annotated[str | None, typer.Option(
    "--on-infeasible", help="warn (default: keep running, B at its minimum) or refuse (stop "
    "and restore) when the floors exceed the device.")]
_NoRecordOption = Annotated[bool, typer.Option(
    "--no-record", help="Do not write decisions to the store.")]
_ReserveIdleOption = Annotated[bool, typer.Option(
    "--reserve-idle", help="Keep A's floor reserved while A does no I/O ([Oe] §4's "
    "reservation). Default: while A is idle B may use the device, and A's floor is reserved "
    "again as soon as A's I/O returns.")]
_SampleIntervalOption = Annotated[float | None, typer.Option(
    "--sample-interval", min=0.05, help="Seconds between looks at A's I/O while A is idle "
    "and B open (default 0.2): A's wake-up is acted on this fast.")]
_MountsFileOption = Annotated[Path, typer.Option(hidden=True)]


@guarantee_app.callback()
def guarantee(
    ctx: typer.Context,
    device: _DeviceOption = None,
    protect: _ProtectOption = None,
    throttle: _ThrottleOption = None,
    interval: _IntervalOption = None,
    policy: _PolicyOption = None,
    state: _StateOption = None,
    db: _DbOption = None,
    dry_run: _DryRunOption = False,
    config: _ConfigOption = None,
    duration: _DurationOption = None,
    b_min: _BMinOption = None,
    capacity_model: _CapacityModelOption = None,
    capacity_iops: _CapacityIopsOption = None,
    on_infeasible: _OnInfeasibleOption = None,
    no_record: _NoRecordOption = False,
    reserve_idle: _ReserveIdleOption = False,
    sample_interval: _SampleIntervalOption = None,
    procfs_root: ProcfsRootOption = Path("/proc"),
    sysfs_root: SysfsRootOption = Path("/sys"),
    mounts_file: _MountsFileOption = Path("/proc/self/mounts"),
) -> None:
    """Keep protected cgroups above an IOPS floor by throttling the others.

    Example: `sudo iogauge guarantee --device /dev/sdb --protect
    /sys/fs/cgroup/fileserver.slice:100 --throttle /sys/fs/cgroup/backup.slice`

    Every interval it reads the disk's counters and each cgroup's I/O, lets the
    policy decide B's read and write IOPS limits (cgroup v2 io.max or v1
    blkio.throttle.*), writes only what changed, prints one line and records
    the decision in the store (`iogauge guarantee show`). Every limit is first
    recorded with the value it replaces in the state file: SIGTERM or Ctrl-C
    restores them, a restart after a crash restores them before anything else,
    and `iogauge guarantee release` restores them by hand. The protected groups
    are never throttled. With --config, SIGHUP re-reads the [[protect]] floors
    from the file (without it, SIGHUP stops like SIGTERM). Subcommands:
    release, show.
    """
    if ctx.invoked_subcommand is not None:
        return
    # imported here, not at start-up: the configuration and the controller pull in polars
    # and numpy, which `release` and every other command do without
    from iogauge.guarantee.config import build_config, load_toml, parse_protect

    with user_errors():
        file_settings = load_toml(config) if config is not None else None
        protect_specs = tuple(parse_protect(p) for p in protect) if protect else None
        cfg = build_config(file_settings, {
            "device": device, "protect": protect_specs,
            "throttle": tuple(throttle) if throttle else None, "interval_s": interval,
            "policy": policy, "state": state, "db": db, "dry_run": dry_run or None,
            "duration_s": duration, "b_min_iops": b_min, "capacity_model": capacity_model,
            "capacity_iops": capacity_iops, "on_infeasible": on_infeasible,
            "record": False if no_record else None,
            "reserve_idle": reserve_idle or None, "sample_s": sample_interval,
        })
        _run(cfg, config, procfs_root=procfs_root, sysfs_root=sysfs_root,
             mounts_file=mounts_file)


def _run(cfg: GuaranteeConfig, config: Path | None, *, procfs_root: Path, sysfs_root: Path,
         mounts_file: Path) -> None:
    """Run the controller until a signal or --duration (with --config, SIGHUP re-reads the
    floors); exit status 1 when the limits could not all be restored."""
    from iogauge.guarantee.controller import Controller

    reload = None if config is None else _floors_of(config)
    controller = Controller(cfg, say=_say, procfs_root=procfs_root, sysfs_root=sysfs_root,
                            mounts_file=mounts_file, reload_floors=reload)
    with _stop_on_signals(None if reload is None else controller.request_reload) as stop:
        summary = controller.run(stop)
    err.print(summary.line(), markup=False)
    if summary.restored is not None and not summary.restored.ok:
        raise typer.Exit(1)


def _floors_of(config: Path) -> Callable[[], Mapping[str, float]]:
    """Reads the [[protect]] floors of the --config file again (on SIGHUP)."""
    from iogauge.guarantee.config import load_toml

    def reload() -> Mapping[str, float]:
        specs = load_toml(config).get("protect", ())
        return {str(s.cgroup): s.iops for s in specs}

    return reload


@guarantee_app.command("release")
def release(
    state: Path = typer.Option(DEFAULT_STATE_PATH, "--state", help=_STATE_HELP),
    procfs_root: Path = typer.Option(Path("/proc"), hidden=True),
) -> None:
    """Restore, by hand, every limit a guarantee controller wrote.

    Example: `sudo iogauge guarantee release` or
    `sudo iogauge guarantee release --state /run/iogauge/backup.state.json`

    Reads the state file and puts back, for each limit still equal to what the
    controller wrote, the value it replaced; a limit changed by someone else
    since is left alone and reported. Refuses while a controller is running
    with that state file (stop it with SIGTERM: it restores by itself).
    """
    from iogauge.guarantee.safety import StateFile, restore_state

    with user_errors():
        sf = StateFile(state)
        if not sf.path.exists():
            err.print(f"no state file at {sf.path}: nothing to restore", markup=False)
            return
        sf.lock()
        try:
            rep = restore_state(sf, procfs_root=procfs_root)
        finally:
            sf.unlock()
        for line in rep.lines():
            err.print(line, markup=False)
        if not rep.ok:
            raise GuaranteeError(f"{len(rep.failed)} limit(s) could not be restored; they "
                                 f"stay in {sf.path} for another try")
        err.print(f"released: {rep.count} limit(s) restored", markup=False)


@guarantee_app.command("show")
def show(
    db: _DbOption = None,
    run: str | None = typer.Option(None, "--run", help="run_id to show (default: the "
                                   "latest run in the store)."),
    last: int = typer.Option(50, "--last", min=1, help="Show the last N decisions."),
    as_json: bool = typer.Option(False, "--json", help="Print the decisions as JSON lines."),
) -> None:
    """Show the decisions a guarantee run recorded (one row per interval).

    Example: `iogauge guarantee show --db /var/lib/iogauge/guarantee.duckdb --last 20`

    Columns: time, %util, device IOPS, A's IOPS against its floor, B's IOPS,
    busy_per_iops, X, B's read/write limits, state, and whether A missed. Then
    what the floor cost: B's IOPS while A was idle against B alone, the IOPS
    A's floor held back but A did not use, and each A wake-up with its time to
    floor (with --json: {"figures": ...} on stderr).
    """
    from rich.table import Table

    from iogauge.guarantee.figures import guarantee_figures
    from iogauge.store.duckdb_store import Store, default_db_path

    with user_errors():
        path = default_db_path() if db is None else db
        with Store.open(path, read_only=True) as store:
            frame = store.read_guarantee()
        df = frame.df
        if df.height == 0:
            err.print(f"no guarantee decisions in {path}", markup=False)
            return
        run_id = run or df.sort("ts")["run_id"][-1]
        df = df.filter(df["run_id"] == run_id).sort("ts").tail(last)
        if df.height == 0:
            raise GuaranteeError(f"no decisions of run {run_id!r} in {path}; runs: "
                                 f"{', '.join(frame.df['run_id'].unique().sort().to_list())}")
        figures = guarantee_figures(frame.df, run_id)
        if as_json:
            for rec in df.drop("groups_json").to_dicts():
                rec["ts"] = rec["ts"].isoformat()
                out.print(json.dumps(rec), markup=False, highlight=False)
            # The figures go to stderr: stdout stays one decision per line.
            err.print(json.dumps({"figures": dataclasses.asdict(figures)}, default=str),
                      markup=False, highlight=False)
            return
        table = Table(title=f"run {run_id} on {df['device'][0]} ({df['policy'][0]}, "
                      f"{df['actuator'][0]})")
        for col in ("time", "util%", "IOPS", "A", "floor", "B", "bpi", "X%", "B riops",
                    "B wiops", "state", "miss"):
            table.add_column(col, justify="left" if col in ("time", "state") else "right")
        for r in df.iter_rows(named=True):
            def num(v: object, fmt: str) -> str:
                return "-" if v is None else format(v, fmt)
            table.add_row(r["ts"].strftime("%H:%M:%S"), num(r["util_pct"], ".1f"),
                          num(r["iops"], ".1f"), num(r["a_iops"], ".1f"),
                          num(r["a_floor_iops"], "g"), num(r["b_iops"], ".1f"),
                          num(r["busy_per_iops"], ".4f"), num(r["x_pct"], ".1f"),
                          num(r["b_riops_limit"], "d"), num(r["b_wiops_limit"], "d"),
                          r["state"], "yes" if r["a_miss"] else "")
        out.print(table)
        for line in figures.lines():
            out.print(line, markup=False, highlight=False)


__all__ = ["guarantee_app"]
