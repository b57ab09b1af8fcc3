"""A flash SSD: parallel channels with a fixed media time, one controller, one host link.

A command takes, in order: the controller (``controller_us``, one command at a time -- the
per-command firmware cost that caps IOPS at high queue depth), its channel for the media
time (``read_us`` / ``write_us``, fixed: flash latency does not depend on the address), and
the host link for its data (``size / link_MBps``; shared, serial). Reads use the link after
the media, writes before. The dispatcher gives each in-service command its own channel, so
IOPS grows with the queue depth up to ``channels`` and then flattens; QD1 latency is
``controller + media + transfer``. Time spent waiting for the shared controller or link is
part of the channel's occupation, as in the device's own queue.

Garbage collection, SLC caching and write amplification are not modelled: the profile
describes the drive in its steady, fresh state.
"""

from __future__ import annotations

from dataclasses import dataclass

from iogauge.lab.model import Request


@dataclass(frozen=True)
class SsdParams:
    """Parameters of an SSD (a profile's ``[ssd]`` table).

    Attributes:
        capacity_bytes: user capacity.
        channels: commands served in parallel.
        read_us: media time of a read.
        write_us: media time of a write (into the drive's buffer / SLC).
        controller_us: serial controller time per command.
        link_MBps: host link rate, 1 MB = 10**6 bytes (SATA 6 Gb/s: ~550 usable).
    """

    capacity_bytes: int
    channels: int
    read_us: float
    write_us: float
    controller_us: float
    link_MBps: float

    def __post_init__(self) -> None:
        if self.capacity_bytes <= 0 or self.channels <= 0 or self.link_MBps <= 0:
            raise ValueError("capacity_bytes, channels and link_MBps must be > 0")
        if min(self.read_us, self.write_us, self.controller_us) < 0:
            raise ValueError("read_us, write_us and controller_us must be >= 0")


class SsdModel:
    """A :class:`~iogauge.lab.model.DiskModel` of an SSD."""

    def __init__(self, params: SsdParams, name: str = "ssd") -> None:
        self.name = name
        self.params = params
        self.capacity_bytes = params.capacity_bytes
        self.channels = params.channels
        self._read_s = params.read_us / 1e6
        self._write_s = params.write_us / 1e6
        self._ctrl_s = params.controller_us / 1e6
        self._link_Bps = params.link_MBps * 1e6
        self.reset()

    def reset(self) -> None:
        self._ctrl_free = 0.0
        self._link_free = 0.0

    def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
        """Seconds ``channel`` is occupied by ``req`` started at ``start_s``."""
        return self.serve(req.op == "write", req.offset_bytes, req.size_bytes,
                          start_s) - start_s

    def serve(self, is_write: bool, offset: int, size: int, t: float) -> float:
        """Serve one command started at ``t``; return its completion time."""
        c = (t if t > self._ctrl_free else self._ctrl_free) + self._ctrl_s
        self._ctrl_free = c
        xfer = size / self._link_Bps
        if is_write:
            link_start = c if c > self._link_free else self._link_free
            self._link_free = link_start + xfer
            return self._link_free + self._write_s
        media_done = c + self._read_s
        link_start = media_done if media_done > self._link_free else self._link_free
        self._link_free = link_start + xfer
        return self._link_free
