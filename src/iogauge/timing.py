"""Drift-free pacing on the monotonic clock, shared by the CLI, the recorder and the controller."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator


def paced(interval_s: float, count: int | None,
          monotonic: Callable[[], float] = time.monotonic) -> Iterator[int]:
    """Yield 0, 1, ... at ``interval_s`` spacing on the monotonic clock, without drift.

    Each deadline is ``start + k * interval_s``; a late iteration does not push the next.
    ``count`` None means forever.
    """
    start = monotonic()
    k = 0
    while count is None or k < count:
        deadline = start + (k + 1) * interval_s
        delay = deadline - monotonic()
        if delay > 0:
            time.sleep(delay)
        yield k
        k += 1
