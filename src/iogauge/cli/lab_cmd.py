"""`iogauge lab`: disk models on real block devices (the emulated disk: FUSE file + loop).

``lab_app`` is registered in main.py as ``iogauge lab``; ``lab device`` manages emulated
devices (:mod:`iogauge.lab.device`); ``lab reproduce`` re-runs the experiments of [Oe] §3 and §5
(:mod:`iogauge.cli.lab_reproduce_cmd`).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from iogauge.cli.common import err, out, user_errors, warn
from iogauge.cli.defaults import LAB_DEFAULT_BACKING_DIR, LAB_DEFAULT_MODEL
from iogauge.cli.lab_reproduce_cmd import reproduce

lab_app = typer.Typer(
    name="lab",
    help="Disk models you can run real tools against. Example: "
         "`iogauge lab device create --model hdd --size 64G` prints /dev/loopN, a block "
         "device with the service times of a 7,200 rpm disk.",
    no_args_is_help=True,
)

device_app = typer.Typer(
    name="device",
    help="Emulated block devices: a FUSE file that takes a disk model's service time for "
         "every request, attached to a loop device with direct I/O, so diskstats, iostat, "
         "cgroup throttles and fio see that disk. Needs root and fuse3. Example: "
         "`DEV=$(iogauge lab device create --model hdd --size 64G)`, then "
         "`fio --filename=$DEV ...`, then `iogauge lab device destroy $DEV`.",
    no_args_is_help=True,
)
lab_app.add_typer(device_app, name="device")
lab_app.command("reproduce")(reproduce)


def _fmt_bytes(n: int) -> str:
    for unit, div in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f}G"
    return str(n)


@device_app.command("create")
def create(
    model: str = typer.Option(LAB_DEFAULT_MODEL, "--model", "-m",
                              help="Disk model: a profile name (hdd = hdd-7200, a 7,200 rpm "
                                   "single spindle; ssd; raid; any bundled profile or a "
                                   "profile .toml file) or constant:<time>[:<channels>] "
                                   "(every request takes that long, e.g. constant:10ms)."),
    size: str = typer.Option("", "--size", "-s",
                             help="Device size in bytes or with K/M/G/T (binary), a "
                                  "multiple of 512. Default: the model's own capacity "
                                  "(the backing file is sparse: free until written)."),
    backing_dir: Path = typer.Option(LAB_DEFAULT_BACKING_DIR, "--backing-dir",
                                     help="Directory for the sparse backing file (a disk "
                                          "rather than tmpfs: written data stays out of "
                                          "RAM)."),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate",
                                   help="Measure the FUSE path overhead (~0.3 s) and reply "
                                        "that much early, so the latency applications see "
                                        "is the model's service time."),
    realtime: bool = typer.Option(True, "--realtime/--no-realtime",
                                  help="Run the FUSE server with real-time priority "
                                       "(SCHED_RR 1) so CPU contention does not delay "
                                       "its replies, as it would not delay a disk's."),
    label: bool = typer.Option(True, "--label-media/--plain-loop",
                               help="Set the loop device's queue/rotational to the model's "
                                    "media (hdd, raid: 1; ssd: 0), or leave a plain loop "
                                    "device's 0, as over any storage."),
) -> None:
    """Create an emulated disk and print its /dev/loopN path (only that, on stdout).

    Example: `DEV=$(sudo iogauge lab device create --model hdd --size 64G)`. The device
    stays until `iogauge lab device destroy $DEV`; any failure while creating undoes every
    step (no loop device, mount, process or file is left behind).
    """
    from iogauge.lab import device as lab_device

    with user_errors():
        dev = lab_device.create(model, size or None, backing_dir=backing_dir,
                                calibrate_timing=calibrate, realtime=realtime,
                                progress=lambda m: err.print(f"[dim]{m}[/]"),
                                label_media=label)
        for note in dev.notes:
            warn(note)
        out.print(dev.loop)


@device_app.command("destroy")
def destroy(
    dev: str = typer.Argument(..., help="The device: /dev/loopN, loopN or its id from "
                                        "`iogauge lab device list`."),
    force: bool = typer.Option(False, "--force",
                               help="Stop the server even if the loop device is still "
                                    "mounted or open (its I/O then fails; it detaches at "
                                    "its last close)."),
) -> None:
    """Detach the loop device, stop its FUSE server, unmount and delete the backing file.

    Example: `sudo iogauge lab device destroy /dev/loop3`. Works from any process (the
    state lives in /run/iogauge/lab). Refuses while the device is mounted or open, unless
    --force.
    """
    from iogauge.lab import device as lab_device

    with user_errors():
        d = lab_device.destroy(dev, force=force)
        err.print(f"destroyed {d.loop} ({d.model}, {_fmt_bytes(d.size_bytes)})")


@device_app.command("list")
def list_(
    as_json: bool = typer.Option(False, "--json", help="One JSON object per device on "
                                 "stdout (record, state, problems, server statistics)."),
    cleanup: bool = typer.Option(True, "--cleanup/--no-cleanup",
                                 help="Tear down stale devices (server dead, loop device "
                                      "gone) while listing."),
) -> None:
    """List emulated devices: path, model, size, state, requests served; cleans up stale ones.

    Example: `sudo iogauge lab device list` or `iogauge lab device list --json | jq .stats`.
    A device whose server died (or whose loop device was detached by hand) is reported as
    stale and, unless --no-cleanup, its leftovers are removed.
    """
    from iogauge.lab import device as lab_device

    with user_errors():
        lab_device.preflight()
        found = lab_device.list_devices(cleanup=cleanup)
        if as_json:
            for st in found:
                rec = {"device": st.device.loop, "id": st.device.id,
                       "model": st.device.model, "size_bytes": st.device.size_bytes,
                       "state": st.state, "problems": st.problems, "pid": st.device.pid,
                       "mountpoint": st.device.mountpoint,
                       "backing_file": st.device.backing_file,
                       "created_utc": st.device.created_utc, "stats": st.stats}
                out.print(json.dumps(rec), markup=False)
            return
        if not found:
            err.print("no emulated devices")
            return
        header = (f"{'DEVICE':<12} {'MODEL':<16} {'SIZE':>7} {'STATE':<9} {'PID':>7} "
                  f"{'READS':>9} {'WRITES':>9}  ID")
        out.print(header, markup=False)
        for st in found:
            s = st.stats or {}
            out.print(f"{st.device.loop or '-':<12} {st.device.model:<16} "
                      f"{_fmt_bytes(st.device.size_bytes):>7} {st.state:<9} "
                      f"{st.device.pid or '-':>7} {s.get('reads', '-'):>9} "
                      f"{s.get('writes', '-'):>9}  {st.device.id}", markup=False)
            for p in st.problems:
                err.print(f"  {st.device.loop or st.device.id}: {p}", markup=False)
