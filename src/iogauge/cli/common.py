"""Shared CLI plumbing: consoles and error reporting."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from iogauge.errors import IogaugeError
from iogauge.timing import paced

__all__ = ["err", "out", "paced", "user_errors", "warn"]

#: Results go to stdout; progress, warnings and errors to stderr, so `--json | jq` works.
#: Piped output gets a wide virtual terminal so tables are not squeezed to 80 columns.
out = Console(highlight=False, soft_wrap=True)
if not out.is_terminal:
    out = Console(highlight=False, soft_wrap=True, width=200)
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
    # (escaped: citation keys such as [sysstat] in a note are text, not rich markup)
    err.print(f"[yellow]warning:[/] {escape(message)}")


#: Help of ``--media`` (analyze, report, diagnose).
MEDIA_HELP = ("How a device serves requests, DEVICE=hdd|ssd|nvme|raid|one-at-a-time|parallel "
              "(repeatable), e.g. loop0=hdd: beats what the samples show (by default they "
              "decide, with the sysfs labels as a prior); see docs/analysis.md.")
