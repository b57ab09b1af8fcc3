"""`iogauge compare`: two datasets side by side, per device and metric, with a noise test."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import typer

from iogauge.cli.common import err, out, user_errors, warn
from iogauge.cli.defaults import COMPARE_ALPHA as ALPHA
from iogauge.cli.defaults import COMPARE_MIN_EFFECT_PCT as MIN_EFFECT_PCT
from iogauge.cli.defaults import FORMAT_IDS as FORMATS
from iogauge.cli.inputs import parse_start, parse_zone
from iogauge.errors import IogaugeError

if TYPE_CHECKING:
    # The comparison, the importers and rich's tables are imported where they are used, so
    # that start-up (every command builds this one's options) does not load polars/numpy.
    from rich.console import Console
    from rich.table import Table

    from iogauge.analysis.compare import Comparison, MetricChange, WaitChange
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.model.waitevents import WaitEventFrame

#: Decimals shown per unit.
_DECIMALS = {"1/s": 1, "MB/s": 2, "ms": 2, "%": 1, "requests": 2, "kB": 1}


def _parse_map(items: list[str] | None) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items or []:
        b, sep, a = item.partition("=")
        if not sep or not b.strip() or not a.strip():
            raise IogaugeError(f"--map {item!r}: use BEFORE=AFTER, e.g. --map sdb=sdc")
        if b.strip() in pairs:
            raise IogaugeError(f"--map: {b.strip()!r} is mapped twice")
        pairs[b.strip()] = a.strip()
    return pairs


def _load(side: str, pattern: str, *, fmt: str | None, tz: ZoneInfo | None,
          start: datetime | None,
          interval_s: float | None) -> tuple[SampleFrame, WaitEventFrame]:
    """Import every file ``pattern`` names (a file or a quoted glob) into one side."""
    from iogauge.importers.registry import expand, import_file
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.model.waitevents import WaitEventFrame

    frames: list[SampleFrame] = []
    waits: list[WaitEventFrame] = []
    for path in expand([pattern]):
        res = import_file(path, fmt=fmt, tz=tz, start=start, interval_s=interval_s)
        for n in res.notes:
            warn(f"{side} {res.path}: {n}")
        frames.append(res.frame)
        if len(res.waits):
            waits.append(res.waits)
    return SampleFrame.concat(frames), WaitEventFrame.concat(waits)


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.{_DECIMALS.get(unit, 2)}f}"


def _change(c: MetricChange | WaitChange) -> str:
    if c.change_pct is None:
        return "from 0"
    ratio = f" (x{c.ratio:.2f})" if c.ratio is not None and abs(c.change_pct) >= 50 else ""
    return f"{c.change_pct:+.1f} %{ratio}"


def _verdict(c: MetricChange | WaitChange) -> tuple[str, str]:
    """(text, rich style). Significant changes are bold; untested ones are not."""
    word = c.direction
    if c.test in ("single value", "effect size only"):
        text = word if word == "same" else f"{word} (untested)"
    else:
        text = f"{word} (p={c.p_value:.2g})" if c.p_value is not None else word
    colour = {"better": "green", "worse": "red", "changed": "yellow"}.get(word, "")
    if c.significant and colour:
        return text, f"bold {colour}"
    if word == "same":
        return text, "dim"
    return text, colour


def _row_note(note: str) -> str:
    """A change's note without the single-value sentence, which the header says once."""
    from iogauge.analysis.compare import SINGLE_VALUE_NOTE

    parts = [p for p in note.split("; ") if p != SINGLE_VALUE_NOTE]
    return "; ".join(parts)


def _pair_table(comp: Comparison, idx: int) -> tuple[Table, list[str]]:
    from rich.table import Table

    from iogauge.analysis.compare import METRICS_BY_NAME

    pair = comp.pairs[idx]
    title = (pair.device_before if pair.device_before == pair.device_after
             else f"{pair.device_before} -> {pair.device_after}")
    if pair.how == "auto":
        title += " (paired automatically)"
    table = Table(title=title, title_justify="left", header_style="bold")
    for col, just in (("metric", "left"), ("unit", "left"), ("before", "right"),
                      ("after", "right"), ("change", "right"), ("verdict", "left"),
                      ("test", "left"), ("n", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    notes: list[str] = []
    for c in comp.for_pair(pair):
        if c.before == 0.0 and c.after == 0.0:
            continue  # e.g. r/s of a write-only run: nothing to show (kept in --json)
        spec = METRICS_BY_NAME[c.metric]
        text, style = _verdict(c)
        table.add_row(spec.title, c.unit, _num(c.before, c.unit), _num(c.after, c.unit),
                      _change(c), text, c.test, f"{c.n_before}/{c.n_after}", style=style)
        if note := _row_note(c.note):
            notes.append(f"{spec.title}: {note}")
    return table, notes


def _waits_table(comp: Comparison) -> tuple[Table, list[str]]:
    from rich.table import Table

    table = Table(title="Oracle wait events (average wait per wait)", title_justify="left",
                  header_style="bold")
    for col, just in (("event", "left"), ("waits before", "right"), ("waits after", "right"),
                      ("avg before ms", "right"), ("avg after ms", "right"),
                      ("change", "right"), ("verdict", "left"), ("test", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    notes: list[str] = []
    for w in comp.wait_changes:
        text, style = _verdict(w)
        table.add_row(w.event, f"{w.waits_before:,.0f}", f"{w.waits_after:,.0f}",
                      f"{w.before:,.3f}", f"{w.after:,.3f}", _change(w), text, w.test,
                      style=style)
        if note := _row_note(w.note):
            notes.append(f"{w.event}: {note}")
    return table, notes


def print_comparison(console: Console, comp: Comparison) -> None:
    """The terminal rendering: one table per device pair, the wait events, the notes."""
    console.print(f"compared at alpha={comp.alpha:g} with a minimum effect of "
                  f"{comp.min_effect_pct:g} %; bold = beyond noise; (untested) = one value on "
                  "a side, so noise cannot be tested: judged by the size of the change")
    for i in range(len(comp.pairs)):
        table, notes = _pair_table(comp, i)
        console.print(table)
        for n in notes:
            console.print(f"  [dim]{n}[/]", markup=True, highlight=False)
    if comp.wait_changes:
        table, notes = _waits_table(comp)
        console.print(table)
        for n in notes:
            console.print(f"  [dim]{n}[/]", markup=True, highlight=False)
    if comp.notes:
        console.print("[bold]notes[/]")
        for n in comp.notes:
            console.print(f"  - {n}", markup=False, highlight=False)


def compare(
    before: str = typer.Argument(..., help="The BEFORE data: a file in any importable "
                                 "format, or a quoted glob ('before/*.log') read as one "
                                 "dataset."),
    after: str = typer.Argument(..., help="The AFTER data, as BEFORE."),
    device_map: list[str] = typer.Option(None, "--map", help="Pair differently named "
                                         "devices, BEFORE=AFTER (repeatable), e.g. --map "
                                         "sdb=sdc. Devices are otherwise paired by name, and "
                                         "the one busy device left on each side is paired "
                                         "automatically."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    html_out: Path | None = typer.Option(None, "--html", help="Also write the interactive "
                                         "HTML report of the AFTER data with the compare "
                                         "view (as `iogauge report`)."),
    alpha: float = typer.Option(ALPHA, "--alpha", min=1e-12, max=0.5, help="Significance "
                                "level of the noise test."),
    min_effect: float = typer.Option(MIN_EFFECT_PCT, "--min-effect", min=0.0, help="Smallest "
                                     "relative change (%) that counts as a finding."),
    fmt: str | None = typer.Option(None, "--format", "-f", help="Force a format for both "
                                   f"sides instead of sniffing: {', '.join(FORMATS)}."),
    tz: str | None = typer.Option(None, "--tz", help="Time zone of timestamps without an "
                                  "offset (default: the file's own, else UTC)."),
    start: str | None = typer.Option(None, "--start", help="Collection start (ISO-8601) for "
                                     "outputs without time stamps (Solaris/AIX iostat "
                                     "without -T); used for both sides."),
    interval: float | None = typer.Option(None, "--interval", min=0.001, help="Sampling "
                                          "interval in seconds for outputs that do not "
                                          "print it; used for both sides."),
) -> None:
    """Compare two datasets (before/after a change, HDD vs SSD) per device and metric, and
    say which changes are beyond noise.

    Each interval is a sample; many intervals per side are tested (Mann-Whitney U, or Welch's
    t for a few) at --alpha and must also change by at least --min-effect %. One interval per
    side (a Statspack report, a quoted iostat line) cannot be tested: it is judged by the
    size of the change and marked untested. Oracle wait events (Statspack/AWR) are compared
    by average wait per event.

    Example: `iogauge compare cp-maxcontig6.txt cp-maxcontig128.txt --start 2008-02-21T10:00
    --interval 5`, or `iogauge compare sp_hdd.txt sp_ssd.txt --json | jq .wait_changes`.
    """
    from iogauge.analysis.compare import compare as compare_frames

    with user_errors():
        zone = parse_zone(tz)
        start_dt = parse_start(start)
        mapping = _parse_map(device_map)
        fb, wb = _load("before", before, fmt=fmt, tz=zone, start=start_dt,
                       interval_s=interval)
        fa, wa = _load("after", after, fmt=fmt, tz=zone, start=start_dt,
                       interval_s=interval)
        comp = compare_frames(fb, fa, wb, wa, mapping or None, alpha=alpha,
                              min_effect_pct=min_effect)
        if html_out is not None:
            # The compare view sits in the AFTER data's report: the state the change led to,
            # with what moved beside it.
            from iogauge.analysis.engine import analyze
            from iogauge.reporting.html_report import render_report, write_report

            result = analyze(fa, wa)
            html = render_report(fa, result, title=f"iogauge: {before} vs {after}",
                                 waits=wa.df if len(wa) else None,
                                 comparison=comp.to_dict())
            err.print(f"HTML report written to {write_report(html_out, html)}")
        if as_json:
            sys.stdout.write(json.dumps(comp.to_dict(), indent=2) + "\n")
            return
        print_comparison(out, comp)
        if not comp.changes and not comp.wait_changes:
            err.print("nothing was measured on both sides")
