"""Options several commands declare alike, as ``Annotated`` aliases (one declaration, one
help text): ``media: MediaOption = None``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from iogauge.cli.common import MEDIA_HELP

#: ``--media DEVICE=MEDIA`` (analyze, exporter).
MediaOption = Annotated[list[str] | None, typer.Option("--media", help=MEDIA_HELP)]

#: ``--lenient`` of the commands that analyse files (analyze).
LenientOption = Annotated[bool, typer.Option("--lenient", help="Skip unreadable input lines "
                                             "(and report how many) instead of failing.")]

#: Hidden roots of /proc and /sys (tests point them at captured trees); defaults
#: ``Path("/proc")`` and ``Path("/sys")`` go with the parameter.
ProcfsRootOption = Annotated[Path, typer.Option(hidden=True)]
SysfsRootOption = Annotated[Path, typer.Option(hidden=True)]
