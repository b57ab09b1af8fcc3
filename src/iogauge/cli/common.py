"""Shared CLI plumbing: consoles, error reporting, interval pacing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from iogauge.errors import IogaugeError

#: Results go to stdout; progress, warnings and errors to stderr, so `--json | jq` works.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn an :class:`IogaugeError` into a one-line message and exit status 2."""
    try:
        yield
    except IogaugeError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from None


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}")


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
