"""The interface between disk models and the two clocks that drive them.

One model, two clocks (issue: lab): the simulator advances virtual time and asks the model
how long each request takes; the emulated block device (FUSE file + loop device) asks the
same model and sleeps that long in real time. Both therefore agree on what the disk can do.

A model is stateful (a head position, a cache, per-channel queues). It is driven by a
dispatcher that knows the model's ``channels``: at most that many requests are in service at
once (1 for a single spindle, N for an SSD's parallel channels or a RAID's members); the
rest wait in FIFO order. The dispatcher calls :meth:`DiskModel.service_time` when a request
*starts* service, with the time it starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Op = Literal["read", "write"]


@dataclass(frozen=True)
class Request:
    """One block request as the device sees it.

    Attributes:
        op: ``read`` or ``write``.
        offset_bytes: byte offset on the device.
        size_bytes: transfer size in bytes (> 0).
    """

    op: Op
    offset_bytes: int
    size_bytes: int


class DiskModel(Protocol):
    """What a disk model offers to the simulator and to the emulated device.

    Attributes:
        name: profile name (e.g. ``hdd-7200``).
        capacity_bytes: device size.
        channels: requests that can be in service at the same time.
    """

    name: str
    capacity_bytes: int
    channels: int

    def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
        """Seconds the request occupies ``channel`` if its service starts at ``start_s``.

        Updates the model's state (head position, cache contents) as if it were served.
        """
        ...

    def reset(self) -> None:
        """Back to the initial state (head parked at the outer edge, caches empty)."""
        ...
