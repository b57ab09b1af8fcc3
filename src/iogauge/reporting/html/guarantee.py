"""The guarantee view: the controller's decisions as a summary table and charts per run."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from iogauge.guarantee.figures import guarantee_figures
from iogauge.reporting.downsample import minmax_envelope
from iogauge.reporting.html.encode import _int_array, _num_array, _time_array
from iogauge.reporting.html.rows import _breaks
from iogauge.reporting.html.sections import _e, _figure, _span
from iogauge.reporting.metrics import (
    GUARANTEE_FORMATS,
)


def _guarantee(guarantee: pl.DataFrame, base_us: int, n_buckets: int
               ) -> tuple[str, list[dict[str, Any]]]:
    """The guarantee view: a summary table and, per controller run and device, charts of A's
    IOPS against its floor, B's IOPS against its limit, and X with %util."""
    if guarantee.height == 0:
        return "", []
    g = guarantee.with_columns(
        ((pl.col("ts").dt.epoch("us") - base_us) / 1e6).alias("_t"),
        (pl.col("b_riops_limit") + pl.col("b_wiops_limit")).cast(pl.Float64)
        .alias("b_limit_iops"),
        pl.col("a_miss").cast(pl.Float64).alias("_miss"),
    ).sort(["run_id", "device", "_t"])
    groups = g.select("run_id", "device").unique(maintain_order=True)
    g = g.join(groups.with_row_index("_grp").with_columns(pl.col("_grp").cast(pl.Int32)),
               on=["run_id", "device"])
    cols = ["a_iops", "a_floor_iops", "b_iops", "b_limit_iops", "x_pct", "util_pct", "_miss",
            "interval_s"]
    env = minmax_envelope(g, t="_t", columns=cols, n_buckets=n_buckets, by="_grp")
    summary = (g.group_by("_grp", "run_id", "device", "policy", "actuator",
                          maintain_order=True)
               .agg(pl.len().alias("n"), pl.col("a_miss").sum().alias("miss"),
                    pl.col("x_pct").first().alias("x0"), pl.col("x_pct").last().alias("x1"),
                    pl.col("x_pct").min().alias("xmin"), pl.col("ts").min().alias("t0"),
                    pl.col("ts").max().alias("t1"),
                    pl.col("warnings").drop_nulls().len().alias("warned")))
    fm = GUARANTEE_FORMATS["x_pct"]
    rows = "".join(
        f"<tr><td>{_e(r['run_id'])}</td><td>{_e(r['device'])}</td><td>{_e(r['policy'])} / "
        f"{_e(r['actuator'])}</td><td>{_e(_span(r['t0'], r['t1']))}</td>"
        f"<td class='num'>{r['n']:,}</td><td class='num'>{r['miss']:,} "
        f"({100.0 * r['miss'] / max(r['n'], 1):.1f} %)</td>"
        f"<td class='num'>{_e(fm.fmt_unit(r['x0']))} → {_e(fm.fmt_unit(r['x1']))} (min "
        f"{_e(fm.fmt_unit(r['xmin']))})</td><td class='num'>{r['warned']:,}</td></tr>"
        for r in summary.iter_rows(named=True))
    parts = [("<section id='guarantee'><h2>IOPS guarantee</h2><p class='muted'>[Oe]: A "
              "(protected) must get its floor; B (throttled) is limited to what is left "
              "under the target busy rate X.</p><table class='guarantee'><thead><tr>"
              "<th>run</th><th>device</th><th>policy / actuator</th><th>span</th>"
              "<th>decisions</th><th>A below floor</th><th>X first → last</th>"
              f"<th>warnings</th></tr></thead><tbody>{rows}</tbody></table>")]
    for rid in summary["run_id"].unique(maintain_order=True).to_list():
        # What the floor cost B while A was idle, and A's wake-ups (guarantee/figures.py).
        parts.append("<ul class='notes'>" + "".join(
            f"<li>{_e(rid)}: {_e(line)}</li>"
            for line in guarantee_figures(guarantee, rid).lines()) + "</ul>")
    data: list[dict[str, Any]] = []
    for key, e in env.partition_by("_grp", as_dict=True, maintain_order=True).items():
        grp = int(key[0])
        tf, tl = e["t_first"].to_numpy(), e["t_last"].to_numpy()
        iv = e["interval_s_hi"].to_numpy()
        raw = bool((e["n"] == 1).all())
        span = float(tl.max() - tf.min()) if e.height else 0.0
        dt = span / n_buckets if span > 0 else float(iv.max())
        series = {}
        for c in cols[:6]:
            if e[f"{c}_hi"].is_not_null().any():
                s = {"lo": _num_array(e[f"{c}_lo"])}
                if not raw:
                    s["hi"] = _num_array(e[f"{c}_hi"])
                series[c] = s
        misses = [int(i) for i in np.flatnonzero(e["_miss_hi"].fill_null(0).to_numpy() > 0)]
        charts: list[tuple[str, str, list[str]]] = []
        for cid, title, names in (("a", "A: IOPS vs floor", ("a_iops", "a_floor_iops")),
                                  ("b", "B: IOPS vs limit", ("b_iops", "b_limit_iops")),
                                  ("x", "Target busy X and %util", ("x_pct", "util_pct"))):
            names_ok = [n for n in names if n in series]
            if names_ok:
                charts.append((f"g{grp}-{cid}", title, names_ok))
        data.append({"id": f"g{grp}", "mode": "raw" if raw else "minmax",
                     "t": _time_array(tf), "n": None if raw else _int_array(e["n"]),
                     "iv": _time_array(iv) if raw else None,
                     "t0": round(float(tf[0]) - float(e["interval_s_lo"][0]), 3),
                     "dt": None if raw else round(dt, 3),
                     "breaks": _breaks(tf, tl, iv),
                     "series": series, "misses": misses,
                     "charts": [{"el": el, "title": t, "series": n} for el, t, n in charts]})
        parts.append(f"<div class='charts' data-guarantee='{grp}'>" + "".join(
            _figure(el, t, "", "ts") for el, t, _n in charts) + "</div>")
    parts.append("</section>")
    return "".join(parts), data
