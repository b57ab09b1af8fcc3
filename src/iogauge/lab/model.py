"""The interface between disk models and the two clocks that drive them.

One model, two clocks (issue: lab): the simulator advances virtual time and asks the model
how long each request takes; the emulated block device (FUSE file + loop device) asks the
same model and sleeps that long in real time. Both therefore agree on what the disk can do.

A model is stateful (a head position, a cache, per-channel queues). It is driven by a
dispatcher that knows the model's ``channels``: at most that many requests are in service at
once (1 for a single spindle, N for an SSD's parallel channels or a RAID's members); the
rest wait in FIFO order. The dispatcher calls :meth:`DiskModel.service_time` when a request
*starts* service, with the time it starts.

A model that reorders the requests it holds (an HDD with command queueing, NCQ; a RAID of
such drives) cannot say how long a request takes when it arrives: that depends on what
arrives later. Such a model is a :class:`QueuedDiskModel` (``queued`` true): the driver
binds it to its clock, submits requests as they arrive, and is told each request's
completion time as soon as the model knows it (:mod:`iogauge.lab.hdd`, command
queueing). ``channels`` is then the number of requests the host may have in the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

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


class QueuedDiskModel(DiskModel, Protocol):
    """A disk model that orders its own queue (``queued`` is true), driven by events.

    Attributes:
        queued: true when requests must go through :meth:`bind` / :meth:`submit`
            (``service_time`` then serves in call order, without reordering).
    """

    queued: bool

    def bind(self, at: Callable[[float, Callable[[float, Any], None], Any], None],
             complete: Callable[[Any, float], None]) -> None:
        """Attach the driver's clock: ``at(t, fn, arg)`` must call ``fn(t, arg)`` at time
        ``t`` after every event scheduled for earlier (and, at equal times, in the order
        scheduled); ``complete(token, done_s)`` is called once per submitted request, as
        soon as its completion time is known (``done_s`` >= the time of the call)."""
        ...

    def submit(self, token: Any, is_write: bool, offset: int, size: int, t: float) -> None:
        """A request reaches the device at ``t``, the driver's current time."""
        ...
