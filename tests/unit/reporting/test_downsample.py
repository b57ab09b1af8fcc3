"""Peak-preserving reduction: every bucket keeps its min and max; output sizes are bounded."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iogauge.reporting.downsample import DownsampleError, grid_thin, minmax_envelope

_values = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e6, allow_nan=False))


@st.composite
def _frames(draw: st.DrawFn) -> tuple[pl.DataFrame, int]:
    """1-3 devices, 1-300 rows each, times unsorted with duplicates, values with nulls."""
    rows: dict[str, list[object]] = {"dev": [], "t": [], "a": [], "b": []}
    for dev in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 300))
        times = draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n))
        rows["dev"] += [dev] * n
        rows["t"] += [float(x) / 4 for x in times]  # quarter seconds: exact in binary
        rows["a"] += draw(st.lists(_values, min_size=n, max_size=n))
        rows["b"] += draw(st.lists(_values, min_size=n, max_size=n))
    df = pl.DataFrame(rows, schema={"dev": pl.Int32, "t": pl.Float64, "a": pl.Float64,
                                    "b": pl.Float64})
    return df, draw(st.integers(1, 64))


def _bucket_of(env: pl.DataFrame, t: float) -> int:
    """Index of the envelope row whose [t_first, t_last] holds ``t`` (exactly one must)."""
    hits = np.flatnonzero((env["t_first"].to_numpy() <= t) & (t <= env["t_last"].to_numpy()))
    assert hits.size == 1, f"time {t} is in {hits.size} buckets"
    return int(hits[0])


@settings(max_examples=80, deadline=None)
@given(_frames())
def test_envelope_keeps_every_buckets_min_and_max(case: tuple[pl.DataFrame, int]) -> None:
    df, n_buckets = case
    env = minmax_envelope(df, t="t", columns=["a", "b"], n_buckets=n_buckets, by="dev")
    for (dev,), g in df.partition_by("dev", as_dict=True).items():
        e = env.filter(pl.col("dev") == dev)
        # size bound: at most one row per bucket, and never more rows than samples
        assert 1 <= e.height <= min(n_buckets, g.height)
        assert e["n"].sum() == g.height
        # buckets are disjoint time ranges in order, each at most one pixel column wide
        tf, tl = e["t_first"].to_numpy(), e["t_last"].to_numpy()
        assert np.all(tf <= tl)
        assert np.all(tl[:-1] < tf[1:])
        width = (g["t"].max() - g["t"].min()) / n_buckets  # type: ignore[operator]
        assert np.all(tl - tf <= width * (1 + 1e-9))
        # every sample falls in exactly one bucket; each bucket's lo/hi/n are its samples'
        idx = np.array([_bucket_of(e, t) for t in g["t"].to_list()])
        for k in range(e.height):
            members = g.filter(pl.Series(idx == k))
            assert e["n"][k] == members.height
            for col in ("a", "b"):
                assert e[f"{col}_lo"][k] == members[col].min()
                assert e[f"{col}_hi"][k] == members[col].max()
        # hence the series' own extremes survive
        for col in ("a", "b"):
            assert e[f"{col}_hi"].max() == g[col].max()
            assert e[f"{col}_lo"].min() == g[col].min()


def test_one_second_spike_in_a_day_survives_at_its_place() -> None:
    # 86,400 samples of 10.0 with one 1 s spike of 987.5 at 13:00:00 (t = 46,800)
    t = np.arange(1, 86_401, dtype=np.float64)
    a = np.full(t.size, 10.0)
    a[46_799] = 987.5
    env = minmax_envelope(pl.DataFrame({"t": t, "a": a}), t="t", columns=["a"],
                          n_buckets=1200)
    assert env.height == 1200
    assert env["n"].sum() == 86_400
    spike = env.filter(pl.col("a_hi") == 987.5)
    assert spike.height == 1
    # bucket width (86,400 - 1) / 1200 = 71.99917 s: 46,800 falls in bucket 649
    assert spike["bucket"][0] == math.floor((46_800 - 1) / (86_399 / 1200))
    assert spike["t_first"][0] <= 46_800 <= spike["t_last"][0]
    assert spike["a_lo"][0] == 10.0
    # a plain per-pixel mean would have shown (71 * 10 + 987.5) / 72 = 23.6 at most
    assert env.filter(pl.col("a_hi") != 987.5)["a_hi"].max() == 10.0


def test_envelope_of_a_column_null_in_a_bucket_is_null_there() -> None:
    df = pl.DataFrame({"t": [0.0, 1.0, 2.0, 3.0], "a": [None, None, 5.0, 7.0]},
                      schema={"t": pl.Float64, "a": pl.Float64})
    env = minmax_envelope(df, t="t", columns=["a"], n_buckets=2)
    assert env["a_lo"].to_list() == [None, 5.0]
    assert env["a_hi"].to_list() == [None, 7.0]
    assert env["n"].to_list() == [2, 2]


def test_envelope_of_samples_at_one_time_is_one_bucket() -> None:
    df = pl.DataFrame({"t": [5.0, 5.0, 5.0], "a": [3.0, 1.0, 2.0]})
    env = minmax_envelope(df, t="t", columns=["a"], n_buckets=100)
    assert env.select("bucket", "n", "a_lo", "a_hi").row(0) == (0, 3, 1.0, 3.0)


def test_bad_sizes_and_columns_are_refused() -> None:
    df = pl.DataFrame({"t": [1.0], "a": [1.0]})
    with pytest.raises(DownsampleError, match="n_buckets must be >= 1"):
        minmax_envelope(df, t="t", columns=["a"], n_buckets=0)
    with pytest.raises(DownsampleError, match="needs column"):
        minmax_envelope(df, t="t", columns=["nope"], n_buckets=5)
    with pytest.raises(DownsampleError, match="at least 1 x 1"):
        grid_thin(df, x="t", y="a", nx=0, ny=3)


@st.composite
def _points(draw: st.DrawFn) -> tuple[pl.DataFrame, int, int]:
    n = draw(st.integers(1, 400))
    coord = st.one_of(st.none(), st.integers(0, 2000).map(lambda v: v / 8))
    xs = draw(st.lists(coord, min_size=n, max_size=n))
    ys = draw(st.lists(coord, min_size=n, max_size=n))
    df = pl.DataFrame({"g": [i % 2 for i in range(n)], "x": xs, "y": ys},
                      schema={"g": pl.Int32, "x": pl.Float64, "y": pl.Float64})
    return df, draw(st.integers(1, 30)), draw(st.integers(1, 30))


@settings(max_examples=80, deadline=None)
@given(_points())
def test_grid_keeps_one_real_point_per_occupied_cell(case: tuple[pl.DataFrame, int, int]
                                                     ) -> None:
    df, nx, ny = case
    out = grid_thin(df, x="x", y="y", nx=nx, ny=ny, by="g")
    full = df.drop_nulls(["x", "y"])
    assert out["n"].sum() == full.height
    for (g,), part in full.partition_by("g", as_dict=True).items():
        o = out.filter(pl.col("g") == g)
        assert o.height <= min(nx * ny, part.height)
        xmax, ymax = part["x"].max(), part["y"].max()

        def cells(frame: pl.DataFrame, xmax: float = xmax, ymax: float = ymax) -> list[tuple]:
            cx = [0 if xmax == 0 else min(nx - 1, math.floor(v / xmax * nx))
                  for v in frame["x"].to_list()]
            cy = [0 if ymax == 0 else min(ny - 1, math.floor(v / ymax * ny))
                  for v in frame["y"].to_list()]
            return list(zip(cx, cy, strict=True))

        occupied = set(cells(part))
        kept = cells(o)
        assert sorted(kept) == sorted(occupied)  # every occupied cell exactly once
        pts = set(zip(part["x"].to_list(), part["y"].to_list(), strict=True))
        for (x, y), cell in zip(o.select("x", "y").iter_rows(), kept, strict=True):
            assert (x, y) in pts  # a real sample, not a mean
            top = max(py for (px, py), c in zip(zip(part["x"].to_list(), part["y"].to_list(),
                                                    strict=True), cells(part), strict=True)
                      if c == cell)
            assert y == top  # the cell's highest point represents it
        assert o["y"].max() == ymax  # the extreme point survives


def test_grid_of_a_diagonal_keeps_one_point_per_column_and_the_top() -> None:
    # 10,000 points on util = 0.5 %/IOPS x IOPS ([Oe]'s linear region) on a 100 x 50 grid
    # of [0, 200] x [0, 100]: cells are 2 IO/s x 2 %, the diagonal crosses one per column
    iops = np.linspace(0, 200, 10_000)  # step 200 / 9,999
    df = pl.DataFrame({"x": iops, "y": iops * 0.5})
    out = grid_thin(df, x="x", y="y", nx=100, ny=50)
    assert out.height == 100
    assert out["n"].sum() == 10_000
    # cell (0, 0) holds x < 2.0: points 0..99; its highest is point 99 = 99 x 200 / 9,999
    x0, y0, n0 = out.row(0)
    assert (x0, y0, n0) == (pytest.approx(1.980198), pytest.approx(0.990099), 100)
    assert out.row(out.height - 1)[:2] == (200.0, 100.0)  # the top end survives exactly
