"""The report's HTML sections: verdicts, finding cards with their evidence, per-device facts
and figures, Oracle wait events, the compare view. Plain HTML, readable without JavaScript.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import polars as pl

from iogauge.analysis.types import (
    AnalysisResult,
    DeviceReport,
    Evidence,
    Finding,
)
from iogauge.model.timeline import RelativeTimeline, is_relative
from iogauge.reporting.metrics import (
    ATTRIBUTE_FORMATS,
    CAPABILITY_FORMATS,
    CAPACITY_FORMATS,
    WAIT_FORMATS,
    MetricFormat,
    metric_format,
)

#: Wait events shown per report interval.
MAX_WAIT_EVENTS = 15


_VERDICT_CLASS: dict[str, str] = {
    "bottleneck": "v-bottleneck", "near limit": "v-near", "slow, not busy": "v-slow",
    "busy, not the bottleneck": "v-busy",
    "healthy": "v-healthy", "idle": "v-idle", "cannot judge": "v-unknown",
}


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ts(dt: datetime | None) -> str:
    if dt is None:
        return "-"
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _span(start: datetime, end: datetime, line: RelativeTimeline | None = None) -> str:
    """``2024-05-01 02:10:00Z - 02:15:00Z (5 min)`` (an en dash); the date repeated only when
    it changes. On the relative time line of reports without time stamps, the reports
    (``report 2 of 5 (interval not in the file)``): no clock time, no duration."""
    if line is not None and is_relative(end):
        return line.describe(start, end)
    s, e = start.astimezone(UTC), end.astimezone(UTC)
    tail = e.strftime("%H:%M:%SZ") if s.date() == e.date() else _ts(e)
    return f"{_ts(s)} \u2013 {tail} ({_duration((e - s).total_seconds())})"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    if seconds < 172800:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def _smart(v: float) -> str:
    """A number with as many decimals as its size deserves (evidence values and thresholds)."""
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1 or a == 0:
        return f"{v:.2f}".rstrip("0").rstrip(".") if a < 10 else f"{v:.1f}"
    return f"{v:.3g}"


def _fmt(f: MetricFormat, v: float | None) -> str:
    return _e(f.fmt_unit(v))


def _verdict_badge(verdict: str) -> str:
    return f"<span class='badge {_VERDICT_CLASS.get(verdict, 'v-unknown')}'>{_e(verdict)}</span>"


def _sev_badge(sev: str) -> str:
    return f"<span class='sev sev-{_e(sev)}'>{_e(sev)}</span>"


def _evidence_row(ev: Evidence) -> str:
    numeric = isinstance(ev.value, (int, float)) and not isinstance(ev.value, bool)
    val = "-" if ev.value is None else str(ev.value)
    if numeric:
        val = _smart(float(ev.value))  # type: ignore[arg-type]
    unit = ev.unit or metric_format(ev.metric).unit
    thr = "" if ev.threshold is None else f"{ev.op or 'vs'} {_smart(ev.threshold)} {unit}"
    return (f"<tr><td>{_e(ev.metric)}</td><td{' class=num' if numeric else ''}>{_e(val)} "
            f"{_e(unit)}</td>"
            f"<td class='num'>{_e(thr)}</td><td>{_e(ev.note)}</td></tr>")


def _finding_card(i: int, f: Finding, dev_idx: Mapping[str, int],
                  line: RelativeTimeline | None = None) -> str:
    d = dev_idx.get(f.device) if f.device is not None else None
    if d is not None:
        where = (f"<a href='#dev-d{d}' class='devlink' data-zoom-dev='{d}' data-zoom-finding"
                 f"='{i}'>{_e(f.device)}</a>")
    else:
        where = _e(f.device or "host-wide")
    ev = ""
    if f.evidence:
        ev = ("<table class='evidence'><thead><tr><th>measured</th><th>value</th>"
              "<th>threshold</th><th>note</th></tr></thead><tbody>"
              + "".join(_evidence_row(e) for e in f.evidence) + "</tbody></table>")
    dev_attr = "" if d is None else f" data-dev='{d}'"
    return (f"<article class='finding sev-{_e(f.severity)}' id='f{i}'{dev_attr}>"
            f"<header><span class='fid'>#{i + 1}</span> {_sev_badge(f.severity)} "
            f"<strong>{_e(f.title)}</strong></header>"
            f"<p class='when'>{where} · {_e(_span(f.window_start, f.window_end, line))} · rule "
            f"<code>{_e(f.rule)}</code></p>{ev}"
            f"<p><b>Why it matters.</b> {_e(f.explanation)}</p>"
            f"<p><b>What to do.</b> {_e(f.suggestion)}</p>"
            f"<p class='source'><b>Source.</b> {_e(f.source)}</p></article>")


def _kv_table(caption: str, rows: Sequence[tuple[str, str]]) -> str:
    """A key/value table; rows keyed ``note`` or ``source`` are set small (context)."""
    if not rows:
        return ""
    body = "".join(f"<tr{' class=small' if k in ('note', 'source') else ''}><th>{_e(k)}</th>"
                   f"<td>{v}</td></tr>" for k, v in rows)
    return f"<table class='kv'><caption>{_e(caption)}</caption><tbody>{body}</tbody></table>"


def _device_facts(rep: DeviceReport) -> str:
    a = rep.attributes
    attrs: list[tuple[str, str]] = []
    for name, f in ATTRIBUTE_FORMATS.items():
        v = getattr(a, name, None)
        if v is not None:
            label = f.title
            if name == "seq_pct" and a.seq_method:
                label += f" ({a.seq_method})"
            if name == "svctm_ms" and a.svctm_estimated:
                label += " (estimated: util / IOPS)"
            attrs.append((label, _fmt(f, v)))
    if a.intervals:
        attrs.insert(0, ("intervals", _e(f"{a.intervals:,} over {_duration(a.span_s)}")))
    parts = [_kv_table("Workload attributes", attrs)]
    svc = rep.service
    if svc is not None:
        # How the device serves requests, decided from its samples, with every signal.
        rows = [("model", _e(f"{svc.model} (decided by {svc.decided_by})")),
                ("why", _e(svc.summary))]
        rows += [(f"{s.name} ({s.strength})", _e(f"{s.points_to}: {s.text}"))
                 for s in svc.signals]
        parts.append(_kv_table("Service model", rows))
    cap = rep.capability
    if cap is not None:
        rows = [("profile", _e(f"{cap.title} ({cap.profile})")),
                ("matched by", _e(cap.matched_by)),
                ("serves requests", _e("in parallel (%util is not a capacity measure)"
                                       if cap.parallel else "one at a time"))]
        rows += [(f.title, _fmt(f, getattr(cap, n))) for n, f in CAPABILITY_FORMATS.items()
                 if getattr(cap, n) is not None]
        rows += [("note", _e(n)) for n in cap.notes]
        rows += [("source", _e(s)) for s in cap.sources]
        parts.append(_kv_table("Capability for this mix", rows))
    c = rep.capacity
    if c is not None:
        rows = [("method", _e(c.method)), ("why", _e(c.reason))]
        rows += [(f.title, _fmt(f, getattr(c, n))) for n, f in CAPACITY_FORMATS.items()
                 if getattr(c, n) is not None]
        if c.points:
            rows.append(("intervals fitted", _e(f"{c.points:,}")))
        rows += [("note", _e(n)) for n in c.notes]
        parts.append(_kv_table("Capacity and headroom", rows))
    notes = "".join(f"<li>{_e(n)}</li>" for n in a.notes)
    if notes:
        parts.append(f"<ul class='notes'>{notes}</ul>")
    return "<div class='facts'>" + "".join(parts) + "</div>"


def _headroom(rep: DeviceReport) -> str:
    c = rep.capacity
    if c is None or c.max_iops is None:
        return "-"
    txt = f"~{c.max_iops:,.0f} IO/s max"
    if c.headroom_iops is not None:
        txt = f"{c.headroom_iops:,.0f} IO/s left of " + txt
        if c.headroom_pct is not None:
            txt += f" ({c.headroom_pct:.0f} %)"
    txt += f" · {c.method}"
    if c.confidence is not None:
        txt += f", confidence {c.confidence:.2f}"
    return _e(txt)


def _verdicts_table(result: AnalysisResult) -> str:
    head = ("<table class='verdicts'><thead><tr><th>device</th><th>kind</th><th>verdict</th>"
            "<th>why</th><th>IOPS mean / peak</th><th>MB/s mean</th><th>await mean</th>"
            "<th>%util peak</th><th>headroom</th><th>capability used</th><th>findings</th>"
            "</tr></thead><tbody>")
    rows = []
    for i, d in enumerate(result.devices):
        a = d.attributes
        used = "-"
        if d.capability is not None:
            used = d.capability.title
            if d.capability.used_pct is not None:
                used = f"{d.capability.used_pct:.0f} % of {d.capability.title}"
        fc = d.finding_count
        counts = " ".join(f"<span class='sev sev-{s}'>{fc[s]}</span>"
                          for s in ("critical", "warning", "info") if fc.get(s))
        iops = ATTRIBUTE_FORMATS["iops_mean"]
        rows.append(
            f"<tr data-dev='{i}' class='{_VERDICT_CLASS.get(d.verdict, 'v-unknown')}'>"
            f"<td><a href='#dev-d{i}'>{_e(d.device)}</a></td><td>{_e(d.kind)}</td>"
            f"<td>{_verdict_badge(d.verdict)}</td><td>{_e(d.verdict_reason)}</td>"
            f"<td class='num'>{_e(iops.fmt(a.iops_mean))} / {_e(iops.fmt(a.iops_peak))}</td>"
            f"<td class='num'>{_e(ATTRIBUTE_FORMATS['MBps_mean'].fmt(a.MBps_mean))}</td>"
            f"<td class='num'>{_fmt(ATTRIBUTE_FORMATS['await_ms'], a.await_ms)}</td>"
            f"<td class='num'>{_fmt(ATTRIBUTE_FORMATS['util_peak_pct'], a.util_peak_pct)}</td>"
            f"<td>{_headroom(d)}</td><td>{_e(used)}</td><td>{counts or '-'}</td></tr>")
    return head + "".join(rows) + "</tbody></table>"


def _figure(fid: str, title: str, caption: str, kind: str) -> str:
    return (f"<figure class='chart chart-{kind}' id='{fid}' data-chart='{kind}'>"
            f"<figcaption><b>{_e(title)}</b> <span class='cap'>{_e(caption)}</span>"
            "</figcaption><div class='plot'><canvas class='base'></canvas></div>"
            "<div class='legend'></div></figure>")


def _device_section(i: int, rep: DeviceReport, charts: list[tuple[str, str, str, str]],
                    findings: Sequence[tuple[int, Finding]], missing_note: str,
                    line: RelativeTimeline | None = None) -> str:
    meta = [rep.kind, f"host {rep.host}", f"source {rep.source}"]
    if rep.parent:
        meta.append(f"part of {rep.parent}")
    worst = ""
    if rep.worst_windows:
        items = "".join(
            f"<li><a href='#dev-d{i}' data-zoom-dev='{i}' data-zoom-start="
            f"'{w.start.timestamp():.3f}' data-zoom-end='{w.end.timestamp():.3f}'>"
            f"{_e(metric_format(w.metric).title)} {_e(_smart(w.value))} {_e(w.unit)}</a> · "
            f"{_e(_span(w.start, w.end, line))}</li>" for w in rep.worst_windows)
        worst = f"<div class='worst'><b>Worst windows</b> (shaded grey)<ul>{items}</ul></div>"
    flist = ""
    if findings:
        flist = "<div class='devfindings'><b>Findings</b><ul>" + "".join(
            f"<li>{_sev_badge(f.severity)} <a href='#f{j}'>#{j + 1} {_e(f.title)}</a></li>"
            for j, f in findings) + "</ul></div>"
    figs = "".join(_figure(fid, t, c, k) for fid, t, c, k in charts)
    if not charts:
        figs = f"<p class='muted'>{_e(missing_note or 'No time-series measure to chart.')}</p>"
    toolbar = ("<p class='hint noprint'>Drag across a time chart to zoom (all this device's "
               "time charts follow), shift-drag to pan, double-click to reset; click a legend "
               "entry to hide it.</p>") if charts else ""
    return (f"<section class='device {_VERDICT_CLASS.get(rep.verdict, 'v-unknown')}' "
            f"id='dev-d{i}' data-dev='{i}' data-key='{_e(rep.device)}' "
            f"data-verdict='{_e(rep.verdict)}'>"
            f"<h2>{_e(rep.device)} {_verdict_badge(rep.verdict)}</h2>"
            f"<p class='meta'>{_e(' · '.join(meta))}</p>"
            f"<p class='reason'>{_e(rep.verdict_reason)}</p>"
            + (f"<p class='meta'>{_e('verdict from ' + rep.verdict_basis)}</p>"
               if rep.verdict_basis else "") +
            f"{_device_facts(rep)}{worst}{flist}{toolbar}<div class='charts'>{figs}</div>"
            "</section>")


def _waits_section(waits: pl.DataFrame) -> str:
    """Oracle wait events per report interval: one row per event (the sections of a report
    repeat events: the largest figures of an event are kept), top events by time waited."""
    if waits.height == 0:
        return ""
    keys = ["host", "db_name", "instance", "ts", "interval_s", "event"]
    ev = (waits.group_by(keys)
          .agg(pl.col("wait_class").drop_nulls().first(), pl.col("waits").max(),
               pl.col("time_waited_s").max(), pl.col("avg_wait_ms").max(),
               pl.col("pct_db_time").max())
          .sort(["host", "ts", "time_waited_s"], descending=[False, False, True],
                nulls_last=True))
    parts = [("<section id='waits'><h2>Oracle wait events</h2><p class='muted'>Per report "
              "interval, the events with the most time waited ([Insight-SSD9] reads the average "
              "wait of <i>db file sequential/scattered read</i> against what the device "
              "should give).</p>")]
    fm = WAIT_FORMATS
    for key, g in ev.partition_by(["host", "db_name", "instance", "ts", "interval_s"],
                                  as_dict=True, maintain_order=True).items():
        host, db, inst, ts, iv = key
        head = f"{host} · {db or '-'}/{inst or '-'} · interval ending {_ts(ts)}"
        head += f" ({_duration(float(iv))})"
        rows = []
        for r in g.head(MAX_WAIT_EVENTS).iter_rows(named=True):
            io = "db file" in r["event"] or (r["wait_class"] or "").endswith("I/O")
            rows.append(
                f"<tr{' class=io' if io else ''}><td>{_e(r['event'])}</td>"
                f"<td>{_e(r['wait_class'] or '-')}</td>"
                f"<td class='num'>{_e(fm['waits'].fmt(r['waits']))}</td>"
                f"<td class='num'>{_fmt(fm['time_waited_s'], r['time_waited_s'])}</td>"
                f"<td class='num'>{_fmt(fm['avg_wait_ms'], r['avg_wait_ms'])}</td>"
                f"<td class='num'>{_fmt(fm['pct_db_time'], r['pct_db_time'])}</td></tr>")
        more = g.height - min(g.height, MAX_WAIT_EVENTS)
        tail = f"<p class='muted'>{more} more event(s) not shown.</p>" if more > 0 else ""
        parts.append(f"<table class='waits'><caption>{_e(head)}</caption><thead><tr>"
                     "<th>event</th><th>class</th><th>waits</th><th>time waited</th>"
                     "<th>avg wait</th><th>DB time</th></tr></thead><tbody>"
                     + "".join(rows) + f"</tbody></table>{tail}")
    parts.append("</section>")
    return "".join(parts)


def _signed_pct(v: object) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return "-"
    return f"{v:+.1f} %"


def _p_value(v: object) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "-"
    return f"{v:.2g}" if v >= 1e-4 else "< 0.0001"


def _change_cells(c: Mapping[str, Any], f: MetricFormat) -> str:
    """before, after, change, ratio, direction, beyond noise, test, p, n of one change."""
    direction = str(c.get("direction") or "-")
    ratio = c.get("ratio")
    ratio_txt = f"\u00d7{ratio:.2f}" if isinstance(ratio, (int, float)) else "-"
    return (f"<td class='num'>{_e(f.fmt(c.get('before')))}</td>"
            f"<td class='num'>{_e(f.fmt(c.get('after')))}</td>"
            f"<td class='num'>{_e(_signed_pct(c.get('change_pct')))}</td>"
            f"<td class='num'>{_e(ratio_txt)}</td>"
            f"<td class='dir dir-{_e(direction)}'>{_e(direction)}</td>"
            f"<td>{'yes' if c.get('significant') else 'no'}</td>"
            f"<td>{_e(c.get('test') or '-')}</td><td class='num'>"
            f"{_e(_p_value(c.get('p_value')))}</td>"
            f"<td class='num'>{_e(c.get('n_before', '-'))} / {_e(c.get('n_after', '-'))}</td>")


_CHANGE_HEAD = ("<th>before</th><th>after</th><th>change</th><th>ratio</th><th>direction</th>"
                "<th>beyond noise</th><th>test</th><th>p</th><th>n before / after</th>")


def _compare_section(comparison: Mapping[str, Any]) -> str:
    """The compare view of ``Comparison.to_dict()`` (analysis/compare/): device pairs,
    metric changes and wait-event changes, the changes beyond noise highlighted."""
    changes = [c for c in comparison.get("changes") or [] if isinstance(c, Mapping)]
    waits = [w for w in comparison.get("wait_changes") or [] if isinstance(w, Mapping)]
    pairs = [p for p in comparison.get("pairs") or [] if isinstance(p, Mapping)]
    n_sig = sum(1 for c in (*changes, *waits) if c.get("significant"))
    alpha, effect = comparison.get("alpha"), comparison.get("min_effect_pct")
    parts = ["<section id='compare'><h2>Compare: before → after</h2>"]
    rule = ""
    if isinstance(alpha, (int, float)) and isinstance(effect, (int, float)):
        rule = (f" A change is beyond noise when its test gives p < {alpha:g} and it is at "
                f"least {effect:g} %.")
    parts.append(f"<p class='muted'>{n_sig} of {len(changes) + len(waits)} change(s) beyond "
                 f"noise (highlighted).{_e(rule)}</p>")
    if pairs:
        parts.append("<table class='pairs'><thead><tr><th>before</th><th>after</th>"
                     "<th>paired by</th></tr></thead><tbody>" + "".join(
                         f"<tr><td>{_e(p.get('device_before'))} ({_e(p.get('kind_before'))})"
                         f"</td><td>{_e(p.get('device_after'))} ({_e(p.get('kind_after'))})"
                         f"</td><td>{_e(p.get('how'))}</td></tr>" for p in pairs)
                     + "</tbody></table>")
    if changes or waits:
        parts.append("<p class='noprint'><label><input type='checkbox' id='cmp-only-sig'> "
                     "only changes beyond noise</label></p>")
    if changes:
        body = []
        for c in changes:
            before, after = str(c.get("device_before")), str(c.get("device_after"))
            dev = before if before == after else f"{before} → {after}"
            metric = str(c.get("metric"))
            f = metric_format(metric)
            unit = f.unit or str(c.get("unit") or "")
            name = f.title if not unit or f.title.endswith(unit) else f"{f.title} ({unit})"
            note = str(c.get("note") or "")
            body.append(f"<tr class='{'sig' if c.get('significant') else 'nosig'}'>"
                        f"<td>{_e(dev)}</td><td>{_e(name)}</td>{_change_cells(c, f)}"
                        f"<td>{_e(note)}</td></tr>")
        parts.append("<table class='compare'><thead><tr><th>device</th><th>metric</th>"
                     f"{_CHANGE_HEAD}<th>note</th></tr></thead><tbody>{''.join(body)}"
                     "</tbody></table>")
    if waits:
        f = WAIT_FORMATS["avg_wait_ms"]
        body = [f"<tr class='{'sig' if w.get('significant') else 'nosig'}'>"
                f"<td>{_e(w.get('event'))}</td><td>{_e(w.get('wait_class') or '-')}</td>"
                f"{_change_cells(w, f)}<td class='num'>"
                f"{_e(WAIT_FORMATS['waits'].fmt(w.get('waits_before')))} / "
                f"{_e(WAIT_FORMATS['waits'].fmt(w.get('waits_after')))}</td>"
                f"<td>{_e(w.get('note') or '')}</td></tr>" for w in waits]
        parts.append("<table class='compare'><caption>Oracle average wait per event (ms)"
                     "</caption><thead><tr><th>event</th><th>class</th>"
                     f"{_CHANGE_HEAD}<th>waits before / after</th><th>note</th></tr></thead>"
                     f"<tbody>{''.join(body)}</tbody></table>")
    if not changes and not waits:
        parts.append("<p class='muted'>Nothing was measured on both sides.</p>")
    notes = [n for n in comparison.get("notes") or [] if isinstance(n, str)]
    if notes:
        parts.append("<ul class='notes'>" + "".join(f"<li>{_e(n)}</li>" for n in notes)
                     + "</ul>")
    parts.append("</section>")
    return "".join(parts)
