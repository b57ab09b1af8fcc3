"""The emulated disk's server: one FUSE file whose reads and writes take a model's time.

``iogauge lab device create`` (:mod:`iogauge.lab.device`) starts this module as a daemon
process (``python -m iogauge.lab.emulated``). It serves a directory with one file,
``disk.img``, of the device's size; the file is attached to a loop device with direct I/O,
so every block request of ``/dev/loopN`` becomes one FUSE read or write here, and the
kernel's own accounting (/proc/diskstats, iostat, cgroup throttles) sees a disk whose
service times are the model's.

Data path. The bytes live in a sparse backing file (a 1 TB emulated disk costs nothing until
written). The file is opened with FUSE's ``direct_io`` flag, and the loop device uses
direct I/O (``losetup --direct-io=on``), so no page cache sits between the loop device and
this process: a request served from a cache would complete in microseconds and every
timing would be fake. :mod:`iogauge.lab.device` refuses a loop device whose kernel did not
enable direct I/O, and the end-to-end tests count that each fio I/O reaches the handler.

Timing. :class:`Dispatcher` is a FIFO queue in front of ``model.channels`` service
channels (:mod:`iogauge.lab.model`). It keeps each channel's schedule
on the monotonic clock: a request arriving at ``a`` takes the channel that frees first,
starts at ``max(a, free)``, and the model is asked ``service_time(req, start, channel)`` for
that start -- the same calls, in the same order and with the same start times, as a
dispatcher that waited for the channel in real time, because FIFO service starts are
non-decreasing. The handler thread then does the real read/write and sleeps until the
request's completion time. Keeping the schedule (rather than "hold the channel, then sleep
the service time") makes the emulated capacity exact: a channel can never start a request
before the previous one's modelled end, whatever Python or the kernel add, so a saturated
device gives exactly the model's IOPS.

Command queueing. A model that reorders its queue (``model.queued``: an HDD with NCQ, a
RAID of such drives; :mod:`iogauge.lab.hdd`) cannot be scheduled at admission: which
request runs next is decided when the previous one ends, from the requests that have
arrived by then. For such a model the dispatcher is the model's clock (``model.bind``):
:meth:`Dispatcher.admit` submits the request at its arrival, the model's events (a drive
finishing a command, a RAID phase reaching its members) sit in a heap on the monotonic
clock, and a timer thread runs each at its time. Every admission first runs the events due
before its arrival, so the model decides exactly as the simulator would from the same
arrivals, however late the timer thread wakes; the handler thread waits until the model
knows its request's completion (at once when the drive is idle, else when the drive
chooses it) and then replies as for FIFO service. Concurrent requests reach the handlers
when fio runs with ``iodepth`` > 1 (libaio) or ``numjobs`` > 1: the loop device submits
its direct I/O asynchronously (below).

Compensation. What the kernel and the application see is the hold plus the FUSE round trip
(block layer -> loop -> FUSE -> this process and back) plus the wake-ups of idle CPUs on
that path. That overhead grows with the service time, since idle CPUs wake more slowly the
longer they slept (figures in ``benchmarks/README.md``). :mod:`iogauge.lab.device`
measures it after attaching the loop device (:func:`~iogauge.lab.device.calibrate`,
constant probe services of 0.25..16 ms) and hands the table here; each reply is then sent
``lead_s(service)`` before the modelled completion. The lead only moves replies: the
channel schedule, hence the capacity, is untouched.

Multi-threading. libfuse runs its multi-threaded loop; each request occupies one libfuse
worker thread (which calls into Python) for its whole life, so the kernel may have up to
``max_background`` (raised to 128 here, the loop device's queue depth) requests
outstanding and the queue forms in the dispatcher, not in the kernel.

Priority. The server runs with SCHED_RR priority 1 (:func:`raise_priority`): a disk's
timing does not depend on what the CPUs are doing, and under CPU contention an ordinary
process replied milliseconds late. The kernel's part of the path (loop submits its direct
I/O from an ordinary unbound kworker) cannot be raised: on a saturated machine it adds
latency this process never sees.

The parts: :mod:`iogauge.lab.emu.models` (what is served), :mod:`~iogauge.lab.emu.timing`
(compensation, precise sleeping, priority), :mod:`~iogauge.lab.emu.dispatcher`,
:mod:`~iogauge.lab.emu.filesystem` (FUSE); this module is the daemon and its control socket.
Measured costs are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import json
import logging
import os
import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from iogauge.lab.emu.dispatcher import Dispatcher, Ticket
from iogauge.lab.emu.filesystem import IMAGE_NAME, MAX_BACKGROUND, DiskFileSystem
from iogauge.lab.emu.models import (
    MODEL_ALIASES,
    ConstantModel,
    constant_model,
    load_model,
    model_kind,
    parse_duration_s,
    profile_name,
)
from iogauge.lab.emu.timing import Compensation, PreciseSleeper, raise_priority

log = logging.getLogger("iogauge.lab.emulated")

# The server's parts live in iogauge.lab.emu; device.py and the tests use them from here.
__all__ = ["IMAGE_NAME", "MAX_BACKGROUND", "MODEL_ALIASES", "Compensation", "ConstantModel",
           "DiskFileSystem", "Dispatcher", "PreciseSleeper", "Ticket", "constant_model",
           "control", "load_model", "main", "model_kind", "parse_duration_s", "profile_name",
           "raise_priority", "serve"]


def _handle_command(dispatcher: Dispatcher, msg: dict[str, Any]) -> dict[str, Any]:
    cmd = msg.get("cmd")
    if cmd == "stats":
        return {"ok": True, "stats": dispatcher.snapshot()}
    if cmd == "probe":
        service_s = msg.get("service_s")
        if not isinstance(service_s, int | float) or not 0 <= service_s < 10:
            return {"ok": False, "error": "probe needs service_s in [0, 10)"}
        dispatcher.probe(float(service_s))
        return {"ok": True}
    if cmd == "resume":
        try:
            comp = Compensation.from_json(msg.get("compensation", []))
        except (TypeError, ValueError) as exc:
            return {"ok": False, "error": str(exc)}
        dispatcher.resume(comp)
        return {"ok": True}
    if cmd == "reset_stats":
        dispatcher.reset_stats()
        return {"ok": True}
    return {"ok": False, "error": f"unknown command {cmd!r}"}


def _control_server(path: Path, dispatcher: Dispatcher) -> socketserver.UnixStreamServer:
    """A line-JSON server on a root-only Unix socket: one request, one reply."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            line = self.rfile.readline(1 << 16)
            try:
                msg = json.loads(line)
            except ValueError as exc:
                msg = f"bad request: {exc}"
            if isinstance(msg, dict):
                reply = _handle_command(dispatcher, msg)
            else:
                reply = {"ok": False, "error": f"bad request: {msg!r} is not a JSON object"}
            self.wfile.write(json.dumps(reply).encode() + b"\n")

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    old = os.umask(0o077)
    try:
        server = Server(str(path), Handler)
    finally:
        os.umask(old)
    return server


def control(path: str | Path, msg: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
    """Send one command to a server's control socket; return its reply (OSError if down)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(path))
        s.sendall(json.dumps(msg).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    reply = json.loads(buf)
    if not isinstance(reply, dict):
        raise OSError(errno.EPROTO, f"bad reply from {path}: {buf[:200]!r}")
    return reply


# ---- the daemon -------------------------------------------------------------------------


@contextlib.contextmanager
def _backing_file(path: Path, size_bytes: int) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, size_bytes)  # sparse: costs nothing until written
        yield fd
    finally:
        os.close(fd)


def serve(mountpoint: Path, backing: Path, size_bytes: int, model_spec: str,
          control_path: Path, fsname: str, *, realtime: bool = True) -> int:
    """Mount the file system and serve until unmounted or SIGTERM/SIGINT; exit status."""
    # Imported here: importing it loads libfuse3 (ctypes), which only the daemon needs.
    mfusepy = importlib.import_module("mfusepy")

    model = load_model(model_spec, size_bytes)
    # Before any thread exists: libfuse's and the control thread inherit it.
    scheduling = raise_priority(realtime)
    dispatcher = Dispatcher(model)
    dispatcher.scheduling = scheduling
    sleeper = PreciseSleeper()
    dispatcher.sleeper = sleeper
    # A thread waking to reply must get the GIL quickly even while another runs Python
    # (default switch interval: 5 ms, which would show up as latency).
    sys.setswitchinterval(1e-4)
    server = _control_server(control_path, dispatcher)
    # Everything allocated so far lives as long as the server: keep it out of the garbage
    # collector's way (a full collection of the start-up heap takes ~5 ms).
    gc.collect()
    gc.freeze()
    threading.Thread(target=server.serve_forever, name="control", daemon=True).start()
    log.info("serving %s (%d bytes, model %s, %d channels) at %s; scheduling %s", backing,
             size_bytes, model.name, model.channels, mountpoint, scheduling)
    try:
        with _backing_file(backing, size_bytes) as fd:
            ops = DiskFileSystem(dispatcher, fd, size_bytes, sleeper)
            # Foreground, multi-threaded; libfuse installs SIGTERM/SIGINT/SIGHUP handlers
            # that end the loop and unmount. subtype makes /proc/mounts say fuse.iogauge.
            # max_threads: libfuse's default (10 worker threads) would cap the requests in
            # service at 10 and queue the rest in the kernel, out of the model's reach.
            try:
                mfusepy.FUSE(ops, str(mountpoint), raw_fi=True, foreground=True,
                             fsname=fsname, subtype="iogauge",
                             max_threads=MAX_BACKGROUND + 8)
            except RuntimeError as exc:
                # fuse_main returns 8 when its loop ends with an error, and libfuse 3's
                # signal handler records the signal as that error: SIGTERM/SIGINT/SIGHUP
                # end the loop (and unmount) this way. Other codes are real failures
                # (3: setup, 4: mount, 7: init).
                if exc.args != (8,):
                    raise
                log.info("event loop ended by a signal (fuse_main status 8)")
    finally:
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            control_path.unlink()
        final = dispatcher.snapshot()
        final.pop("sizes", None)
        log.info("stopped; final statistics %s, spin %.3f s", json.dumps(final),
                 sleeper.spin_s)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the daemon (started by :func:`iogauge.lab.device.create`)."""
    p = argparse.ArgumentParser(prog="python -m iogauge.lab.emulated",
                                description="Serve an emulated disk image over FUSE.")
    p.add_argument("--mountpoint", type=Path, required=True)
    p.add_argument("--backing", type=Path, required=True)
    p.add_argument("--size", type=int, required=True, help="bytes")
    p.add_argument("--model", required=True)
    p.add_argument("--control", type=Path, required=True)
    p.add_argument("--fsname", default="iogauge-lab")
    p.add_argument("--no-realtime", action="store_true",
                   help="stay an ordinary process (default: SCHED_RR priority 1)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # SIGTERM must reach libfuse's handler (it ends the loop and unmounts): Python leaves
    # SIGTERM at its default, which libfuse only replaces when it finds it at SIG_DFL.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        return serve(args.mountpoint, args.backing, args.size, args.model, args.control,
                     args.fsname, realtime=not args.no_realtime)
    except Exception:
        log.exception("emulated disk server failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
