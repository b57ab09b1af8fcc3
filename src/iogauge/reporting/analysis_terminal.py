"""Terminal rendering of an AnalysisResult: verdict table, then the top findings with evidence."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from iogauge.analysis.types import AnalysisResult, Evidence, Finding
from iogauge.model.timeline import RelativeTimeline, when
from iogauge.reporting.metrics import ATTRIBUTE_FORMATS, CAPABILITY_FORMATS, CAPACITY_FORMATS

VERDICT_STYLE: dict[str, str] = {
    "bottleneck": "bold red", "near limit": "yellow", "slow, not busy": "bright_magenta",
    "busy, not the bottleneck": "cyan",
    "healthy": "green", "idle": "dim", "cannot judge": "magenta",
}
SEVERITY_STYLE: dict[str, str] = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


A = ATTRIBUTE_FORMATS  # titles, units and decimals shared with the HTML report


def evidence_text(e: Evidence) -> str:
    """``svc_t_ms 137.8 ms >= 50 ms (worst 1-min window)``."""
    unit = f" {e.unit}" if e.unit and e.unit != "%" else e.unit
    if isinstance(e.value, float):
        val = f"{e.value:,.4g}" if abs(e.value) < 1e6 else f"{e.value:,.0f}"
    else:
        val = "-" if e.value is None else str(e.value)
    s = f"{e.metric} {val}{unit}"
    if e.threshold is not None:
        s += f" {e.op or 'vs'} {e.threshold:,.4g}{unit}"
    if e.note:
        s += f" ({e.note})"
    return s


def _finding(console: Console, f: Finding, line: RelativeTimeline | None) -> None:
    head = Text()
    head.append(f"{f.severity.upper():8}", style=SEVERITY_STYLE[f.severity])
    head.append(f" {f.device or 'host'}", style="bold")
    head.append(f"  {when(f.window_start, f.window_end, line)}  ", style="dim")
    head.append(f.title)
    console.print(head)
    for e in f.evidence:
        console.print(f"          · {evidence_text(e)}", markup=False, highlight=False)
    console.print(f"          why: {f.explanation}", markup=False, highlight=False)
    console.print(f"          do:  {f.suggestion}", markup=False, highlight=False)
    console.print(f"          source: {f.source} [{f.rule}]", style="dim", markup=False,
                  highlight=False)


def print_analysis(console: Console, result: AnalysisResult, title: str,
                   max_findings: int | None = 12) -> None:
    """Verdict per device, then findings (most severe first; info only when room is left)."""
    table = Table(title=title, title_justify="left", header_style="bold")
    cols = (("device", "left"), ("verdict", "left"), ("why", "left"),
            (f"{A['iops_mean'].title} / peak ({A['iops_mean'].unit})", "right"),
            (f"{A['MBps_mean'].title} ({A['MBps_mean'].unit})", "right"),
            (f"{A['await_ms'].title} ({A['await_ms'].unit})", "right"),
            (f"{A['util_peak_pct'].title} ({A['util_peak_pct'].unit})", "right"),
            (CAPACITY_FORMATS["headroom_iops"].title, "right"), ("capability", "left"))
    for col, just in cols:
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for d in result.devices:
        a = d.attributes
        cap = d.capacity
        head = "-"
        if cap is not None and cap.max_iops is not None and cap.headroom_iops is not None:
            h = CAPACITY_FORMATS["headroom_iops"]
            head = f"{h.fmt(cap.headroom_iops)} {h.unit} ({cap.method})"
        capab = "-"
        if d.capability is not None:
            capab = d.capability.profile
            if d.capability.used_pct is not None:
                u = CAPABILITY_FORMATS["used_pct"]
                capab += f" {u.fmt(d.capability.used_pct)} {u.unit} used"
        table.add_row(Text(d.device), Text(d.verdict, style=VERDICT_STYLE.get(d.verdict, "")),
                      Text(d.verdict_reason),
                      f"{A['iops_mean'].fmt(a.iops_mean)} / {A['iops_peak'].fmt(a.iops_peak)}",
                      A["MBps_mean"].fmt(a.MBps_mean), A["await_ms"].fmt(a.await_ms),
                      A["util_peak_pct"].fmt(a.util_peak_pct), head, capab)
    if result.devices:
        console.print(table)
    else:  # (an AWR RAC global report: wait events of each instance, no device rows)
        console.print(f"{title}: no device rows, wait events only")
    for d in result.devices:
        if d.service is None or d.verdict in ("idle", "cannot judge"):
            continue
        # What decided the verdict, and how the device serves requests (and why we think so).
        console.print(f"  {d.device}: verdict from {d.verdict_basis}; {d.service.summary}",
                      markup=False, highlight=False)
    findings = result.findings
    shown = findings if max_findings is None else findings[:max_findings]
    if shown:
        console.print()
        console.print(Text("findings", style="bold"))
        for f in shown:
            _finding(console, f, result.timeline)
    if len(shown) < len(findings):
        console.print(f"... {len(findings) - len(shown)} more finding(s): use --all or --json",
                      style="dim")
    for n in result.notes:
        console.print(f"note: {n}", style="dim", markup=False, highlight=False)
