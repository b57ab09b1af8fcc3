"""Terminal rendering of a fleet ranking: the devices to look at first, one line each."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from iogauge.analysis.fleet import FleetResult, FleetRow
from iogauge.reporting.analysis_terminal import VERDICT_STYLE


def worst_text(row: FleetRow) -> str:
    """``2026-11-22 08:01-08:02 await_ms 41.3 ms``; ``-`` when there is none."""
    w = row.worst
    if w is None:
        return "-"
    return (f"{w.start:%Y-%m-%d %H:%M}-{w.end:%H:%M} {w.metric} {w.value:,.4g} {w.unit}")


def headroom_text(row: FleetRow) -> str:
    return "-" if row.headroom_pct is None else f"{row.headroom_pct:.0f} %"


def print_fleet(console: Console, fleet: FleetResult, title: str, limit: int | None = 25
                ) -> None:
    """The ranking (worst verdict, then headroom, then time over target), ``limit`` rows."""
    table = Table(title=f"{title}: {fleet.hosts} host(s), {len(fleet.rows)} device(s)",
                  title_justify="left", header_style="bold")
    for col, just in (("#", "right"), ("host", "left"), ("device", "left"),
                      ("verdict", "left"), ("headroom", "right"), ("over target", "right"),
                      ("worst window", "left"), ("why", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    rows = fleet.rows if limit is None else fleet.rows[:limit]
    for r in rows:
        table.add_row(str(r.rank), Text(r.host), Text(r.device),
                      Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "")),
                      headroom_text(r), f"{r.over_target_s:,.0f} s", Text(worst_text(r)),
                      Text(r.reason))
    console.print(table)
    if limit is not None and len(fleet.rows) > limit:
        console.print(f"... {len(fleet.rows) - limit} more device(s) (--all or --json for "
                      "every one)", style="dim")
