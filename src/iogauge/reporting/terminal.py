"""Terminal rendering of summaries (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from iogauge.analysis.summary import DeviceSummary
from iogauge.model.device import DeviceInfo
from iogauge.reporting.metrics import SUMMARY_FORMATS


def summary_table(summaries: list[DeviceSummary], infos: dict[str, DeviceInfo],
                  title: str) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("device")
    table.add_column("kind")
    for fmt in SUMMARY_FORMATS.values():
        unit = f" ({fmt.unit})" if fmt.unit else ""
        table.add_column(f"{fmt.title}{unit}", justify="right")
    for s in summaries:
        info = infos.get(s.device)
        # How it serves requests, as decided from the samples (labels only as a prior).
        kind = f"{s.kind} ({s.service_model})" if s.service_model else s.kind
        name = s.device if info is None or not info.dm_name else f"{s.device} ({info.dm_name})"
        table.add_row(Text(name), Text(kind),
                      *(f.fmt(getattr(s, k)) for k, f in SUMMARY_FORMATS.items()))
    return table


def print_summary(console: Console, summaries: list[DeviceSummary],
                  infos: dict[str, DeviceInfo], title: str) -> None:
    console.print(summary_table(summaries, infos, title))
    for s in summaries:
        for note in s.notes:
            console.print(f"  [bold]{escape(s.device)}[/]: {escape(note)}")
