"""Counter deltas and iostat -x derivation: hand goldens, an independent scalar oracle of the
sysstat 12.x formulas ([sysstat]), and hypothesis properties."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iogauge.collector.derive import (
    COUNT_FIELDS,
    DERIVED_COLUMNS,
    MS_FIELDS,
    WRAP_32,
    counter_deltas,
    derive_metrics,
)
from iogauge.collector.diskstats import IDX, N_FIELDS, OLD_PARTITION_MAP
from iogauge.model.sampleframe import SCHEMA

REL = 1e-12
U32 = 2**32

# kernel field positions (0-based), written out rather than taken from the code under test
RD_IOS, RD_MERGES, RD_SECT, RD_TICKS = 0, 1, 2, 3
WR_IOS, WR_MERGES, WR_SECT, WR_TICKS = 4, 5, 6, 7
IN_FLIGHT, IO_TICKS, TIME_IN_QUEUE = 8, 9, 10
DC_IOS, DC_MERGES, DC_SECT, DC_TICKS = 11, 12, 13, 14
FL_IOS, FL_TICKS = 15, 16
MS = (RD_TICKS, WR_TICKS, IO_TICKS, TIME_IN_QUEUE, DC_TICKS, FL_TICKS)
COUNTS = (RD_IOS, RD_MERGES, RD_SECT, WR_IOS, WR_MERGES, WR_SECT, DC_IOS, DC_MERGES, DC_SECT,
          FL_IOS)
OLD4 = (RD_IOS, RD_SECT, WR_IOS, WR_SECT)


def test_field_classes() -> None:
    assert MS_FIELDS == MS
    assert tuple(sorted(COUNT_FIELDS)) == tuple(sorted(COUNTS))
    assert IDX["in_flight"] == IN_FLIGHT
    assert OLD_PARTITION_MAP == OLD4
    assert WRAP_32 == U32


def test_derived_columns_are_sampleframe_columns() -> None:
    d = counter_deltas(np.zeros((1, 17), np.int64), np.ones((1, 17), np.int64),
                       np.ones((1, 17), bool), np.ones((1, 17), bool))
    metrics = derive_metrics(d.delta, np.array([1.0]))
    assert tuple(metrics) == DERIVED_COLUMNS
    assert set(DERIVED_COLUMNS) <= set(SCHEMA)


def _present(layout: int) -> np.ndarray:
    p = np.zeros(17, dtype=bool)
    if layout == 4:
        p[list(OLD4)] = True
    else:
        p[: min(layout, 17)] = True
    return p


def _one(prev: list[int], cur: list[int], layout: int = 17, dt: float = 1.0
         ) -> tuple[Any, dict[str, float]]:
    pres = _present(layout)[None, :]
    d = counter_deltas(np.array([prev], np.int64), np.array([cur], np.int64), pres, pres,
                       np.array([layout == 4]))
    m = derive_metrics(d.delta, np.array([dt]))
    return d, {k: float(v[0]) for k, v in m.items()}


# ---------------------------------------------------------------------------------------------
# counter_deltas goldens
# ---------------------------------------------------------------------------------------------
def test_deltas_plain() -> None:
    prev = [10, 1, 80, 20, 5, 0, 40, 30, 9, 100, 200, 1, 0, 8, 2, 3, 4]
    cur = [20, 3, 160, 50, 7, 1, 56, 38, 2, 150, 290, 2, 1, 16, 5, 6, 7]
    d, _ = _one(prev, cur)
    assert d.delta[0].tolist() == [10, 2, 80, 30, 2, 1, 16, 8,
                                   2,  # in_flight: the current gauge value, not 2 - 9
                                   50, 90, 1, 1, 8, 3, 3, 3]
    assert d.reset.tolist() == [False]
    assert d.wrapped.tolist() == [False]


def test_deltas_ms_wrap_and_64_bit_counts() -> None:
    prev = [U32 - 10, 0, 0, U32 - 1, 0, 0, 0, U32 - 100, 0, U32 - 5, U32 - 7, 0, 0, 0,
            U32 - 2, 0, U32 - 3]
    cur = [U32 + 10,  # a 64-bit count passing 2**32: just +20
           0, 0, 4,  # rd_ticks wrapped: 1 + 4 = 5
           0, 0, 0, U32 - 50,  # wr_ticks plain +50
           0, 15, 3,  # io_ticks 5 + 15 = 20, time_in_queue 7 + 3 = 10
           0, 0, 0, 8,  # dc_ticks 2 + 8 = 10
           0, 0]  # fl_ticks 3 + 0 = 3
    d, _ = _one(prev, cur)
    assert d.delta[0].tolist() == [20, 0, 0, 5, 0, 0, 0, 50, 0, 20, 10, 0, 0, 0, 10, 0, 3]
    assert d.reset.tolist() == [False]
    assert d.wrapped.tolist() == [True]


def test_deltas_any_count_backwards_is_a_reset() -> None:
    for field in COUNTS:
        prev = [100] * 17
        cur = [200] * 17
        cur[field] = 99
        d, m = _one(prev, cur)
        assert d.reset.tolist() == [True], field
        assert d.wrapped.tolist() == [False]
        assert np.isnan(d.delta).all()
        assert all(math.isnan(v) for v in m.values())


def test_deltas_in_flight_going_down_is_not_a_reset() -> None:
    prev = [100] * 17
    cur = [200] * 17
    cur[IN_FLIGHT] = 0
    d, m = _one(prev, cur)
    assert not d.reset[0]
    assert m["inflight"] == 0.0


def test_deltas_old_layout_counts_wrap_at_32_bits() -> None:
    prev = [0] * 17
    cur = [0] * 17
    prev[RD_IOS], cur[RD_IOS] = U32 - 6, 10  # 6 + 10 = 16
    prev[RD_SECT], cur[RD_SECT] = 200000, 201280
    prev[WR_IOS], cur[WR_IOS] = 400, 400
    prev[WR_SECT], cur[WR_SECT] = U32 - 1, 7  # 1 + 7 = 8
    d, m = _one(prev, cur, layout=4)
    assert not d.reset[0]
    assert d.wrapped[0]
    got = d.delta[0]
    assert (got[RD_IOS], got[RD_SECT], got[WR_IOS], got[WR_SECT]) == (16, 1280, 0, 8)
    absent = [i for i in range(17) if i not in OLD4]
    assert np.isnan(got[absent]).all()
    assert m["r_iops"] == 16.0
    assert m["w_kBps"] == 4.0  # 8/2/1
    assert m["iops"] == 16.0
    assert m["areq_kB"] == 40.25  # (1280+8)/2/16 = 644/16
    for name in ("r_await_ms", "w_await_ms", "await_ms", "util_pct", "aqu_sz", "inflight",
                 "r_merged_ps", "r_rqm_pct", "d_iops", "f_iops"):
        assert math.isnan(m[name]), name


def test_deltas_field_absent_in_either_snapshot_is_nan() -> None:
    prev_p = np.ones((1, 17), bool)
    cur_p = np.ones((1, 17), bool)
    cur_p[0, 15:] = False  # flushes not printed now
    prev_p[0, 11] = False  # discards not printed before
    d = counter_deltas(np.zeros((1, 17), np.int64), np.ones((1, 17), np.int64), prev_p, cur_p)
    assert np.isnan(d.delta[0, [11, 15, 16]]).all()
    assert d.delta[0, 0] == 1.0


def test_deltas_no_rows() -> None:
    z = np.zeros((0, 17), np.int64)
    b = np.zeros((0, 17), bool)
    d = counter_deltas(z, z, b, b)
    assert d.delta.shape == (0, 17)
    m = derive_metrics(d.delta, np.zeros(0))
    assert all(v.shape == (0,) for v in m.values())


# ---------------------------------------------------------------------------------------------
# derive_metrics goldens
# ---------------------------------------------------------------------------------------------
def test_derive_golden_17_fields_over_4_seconds() -> None:
    # Δ = 300 100 24000 1500 | 200 50 6400 3000 | 5 | 3000 9000 | 8 2 16384 80 | 40 60, Δt 4 s
    delta = np.array([[300, 100, 24000, 1500, 200, 50, 6400, 3000, 5, 3000, 9000, 8, 2, 16384,
                       80, 40, 60]], dtype=np.float64)
    m = {k: float(v[0]) for k, v in derive_metrics(delta, np.array([4.0])).items()}
    assert m == pytest.approx({
        "r_iops": 75.0,  # 300/4
        "w_iops": 50.0,  # 200/4
        "d_iops": 2.0,  # 8/4
        "f_iops": 10.0,  # 40/4
        "iops": 127.0,  # (300+200+8)/4 = 508/4
        "r_kBps": 3000.0,  # 24000/2/4
        "w_kBps": 800.0,  # 6400/2/4
        "d_kBps": 2048.0,  # 16384/2/4
        "kBps": 5848.0,  # (24000+6400+16384)/2/4 = 46784/8
        "r_merged_ps": 25.0,  # 100/4
        "w_merged_ps": 12.5,  # 50/4
        "d_merged_ps": 0.5,  # 2/4
        "r_rqm_pct": 25.0,  # 100/(300+100)*100
        "w_rqm_pct": 20.0,  # 50/(200+50)*100
        "d_rqm_pct": 20.0,  # 2/(8+2)*100
        "r_await_ms": 5.0,  # 1500/300
        "w_await_ms": 15.0,  # 3000/200
        "d_await_ms": 10.0,  # 80/8
        "f_await_ms": 1.5,  # 60/40
        "await_ms": 9.015748031496063,  # (1500+3000+80)/508 = 4580/508
        "r_areq_kB": 40.0,  # 24000/2/300
        "w_areq_kB": 16.0,  # 6400/2/200
        "d_areq_kB": 1024.0,  # 16384/2/8
        "areq_kB": 46.04724409448819,  # 46784/2/508 = 23392/508
        "aqu_sz": 2.25,  # 9000/(4*1000)
        "util_pct": 75.0,  # 3000/(4*1000)*100
        "inflight": 5.0,
    }, rel=REL)


def test_derive_zero_requests_gives_zero_latency_and_size() -> None:
    _, m = _one([5] * 17, [5] * 17)
    assert m.pop("inflight") == 5.0  # the gauge
    assert all(v == 0.0 for v in m.values()), m


def test_derive_11_fields_discards_null_but_totals_defined() -> None:
    prev = [0] * 17
    cur = [10, 0, 80, 20, 10, 0, 80, 40, 0, 30, 60, 0, 0, 0, 0, 0, 0]
    _, m = _one(prev, cur, layout=11, dt=2.0)
    for name in ("d_iops", "d_kBps", "d_merged_ps", "d_rqm_pct", "d_await_ms", "d_areq_kB",
                 "f_iops", "f_await_ms"):
        assert math.isnan(m[name]), name
    assert m["iops"] == 10.0  # (10+10)/2
    assert m["await_ms"] == 3.0  # (20+40)/20
    assert m["kBps"] == 40.0  # 160/2/2
    assert m["areq_kB"] == 4.0  # 160/2/20


def test_derive_15_fields_flushes_null() -> None:
    _, m = _one([0] * 17, [1] * 15 + [0, 0], layout=15)
    assert math.isnan(m["f_iops"])
    assert math.isnan(m["f_await_ms"])
    assert m["d_iops"] == 1.0


# ---------------------------------------------------------------------------------------------
# an independent scalar oracle of sysstat 12.x
# ---------------------------------------------------------------------------------------------
def oracle(prev: list[int], cur: list[int], layout: int, dt: float) -> dict[str, float | None]:
    """iostat -x for one device-interval, written from [sysstat] with plain Python."""
    present = [(i in OLD4) if layout == 4 else i < layout for i in range(17)]
    d: list[int | None] = [None] * 17
    for i in range(17):
        if not present[i]:
            continue
        if i == IN_FLIGHT:
            d[i] = cur[i]
            continue
        x = cur[i] - prev[i]
        if x < 0:
            if layout != 4 and i in COUNTS:
                return dict.fromkeys(DERIVED_COLUMNS)  # statistics reset
            x += 2**32  # a 32-bit value wrapped
        d[i] = x
    rd, rm, rs, rt, wr, wm, ws, wt, inflight, io, tiq, dc, dm, ds, dtk, fl, ft = d

    def rate(x: int | None, div: float = 1.0) -> float | None:
        return None if x is None else x / div / dt

    def per(num: int | None, den: int | None, scale: float = 1.0) -> float | None:
        if num is None or den is None:
            return None
        return num / den * scale if den else 0.0

    def add(*xs: int | None) -> int | None:
        return None if any(x is None for x in xs) else sum(x for x in xs if x is not None)

    def zero(x: int | None) -> int:
        return 0 if x is None else x

    ios = add(rd, wr, zero(dc))  # sysstat counts missing discards as 0 in nr_ios
    sectors = add(rs, ws, zero(ds))
    ticks = add(rt, wt, zero(dtk))
    return {
        "r_iops": rate(rd), "w_iops": rate(wr), "d_iops": rate(dc), "f_iops": rate(fl),
        "iops": rate(ios),
        "r_kBps": rate(rs, 2), "w_kBps": rate(ws, 2), "d_kBps": rate(ds, 2),
        "kBps": rate(sectors, 2),
        "r_merged_ps": rate(rm), "w_merged_ps": rate(wm), "d_merged_ps": rate(dm),
        "r_rqm_pct": per(rm, add(rm, rd), 100), "w_rqm_pct": per(wm, add(wm, wr), 100),
        "d_rqm_pct": per(dm, add(dm, dc), 100),
        "r_await_ms": per(rt, rd), "w_await_ms": per(wt, wr), "d_await_ms": per(dtk, dc),
        "f_await_ms": per(ft, fl),
        "await_ms": per(ticks, ios),  # flushes excluded
        "r_areq_kB": per(rs, rd, 0.5), "w_areq_kB": per(ws, wr, 0.5),
        "d_areq_kB": per(ds, dc, 0.5), "areq_kB": per(sectors, ios, 0.5),
        "aqu_sz": None if tiq is None else tiq / (dt * 1000),
        "util_pct": None if io is None else io / (dt * 1000) * 100,
        "inflight": None if inflight is None else float(inflight),
    }


def test_oracle_agrees_with_a_hand_golden() -> None:
    # same row as test_derive_golden_17_fields_over_4_seconds, from counters
    prev = [1000] * 17
    delta = [300, 100, 24000, 1500, 200, 50, 6400, 3000, 0, 3000, 9000, 8, 2, 16384, 80, 40, 60]
    cur = [p + x for p, x in zip(prev, delta, strict=True)]
    cur[IN_FLIGHT] = 5
    got = oracle(prev, cur, 17, 4.0)
    assert got["await_ms"] == pytest.approx(9.015748031496063, rel=REL)
    assert got["inflight"] == 5.0
    assert got["kBps"] == 5848.0


MODES = ("forward", "forward", "forward", "same", "random", "wrap")


@st.composite
def device_interval(draw: st.DrawFn) -> tuple[list[int], list[int], int, float]:
    """prev/cur counters of one device in any state: normal, wrapped, reset, idle, random."""
    layout = draw(st.sampled_from([4, 11, 15, 17]))
    count_max = U32 - 1 if layout == 4 else 2**48
    tops = [10_000 if i == IN_FLIGHT else U32 - 1 if (i in MS or layout == 4) else count_max
            for i in range(17)]
    # One binary draw (fast to generate, shrinks towards zeros), 10 bytes per field:
    # 4 bytes where prev lies in [0, top], 1 byte the mode, 2 bytes a step, 3 bytes a random
    # value for "random" mode.
    raw = np.frombuffer(draw(st.binary(min_size=170, max_size=170)), dtype=np.uint8)
    b = raw.reshape(17, 10).astype(np.int64)
    fracs = (b[:, 0] << 24 | b[:, 1] << 16 | b[:, 2] << 8 | b[:, 3]) / (2**32 - 1)
    modes = [MODES[int(x) % len(MODES)] for x in b[:, 4]]
    steps = ((b[:, 5] << 8 | b[:, 6]) << 4).tolist()  # 0 .. 2**20
    randoms = (b[:, 7] << 16 | b[:, 8] << 8 | b[:, 9]) / (2**24 - 1)
    edge = draw(st.sampled_from([None, "near_wrap", "zero"]))
    prev: list[int] = []
    cur: list[int] = []
    for i in range(17):
        top = tops[i]
        p = int(fracs[i] * top)
        if edge == "near_wrap" and top == U32 - 1:
            p = top - (steps[i] % 1000)
        elif edge == "zero":
            p = 0
        mode = modes[i]
        if mode == "forward":
            c = min(p + steps[i], top)
        elif mode == "same":
            c = p
        elif mode == "wrap" and top == U32 - 1:
            c = (p + steps[i]) % U32
        else:
            c = int(randoms[i] * top)
        prev.append(p)
        cur.append(c)
    if layout == 4:  # values the kernel did not print are 0 in the snapshot
        prev = [v if i in OLD4 else 0 for i, v in enumerate(prev)]
        cur = [v if i in OLD4 else 0 for i, v in enumerate(cur)]
    elif layout < 17:
        prev = prev[:layout] + [0] * (17 - layout)
        cur = cur[:layout] + [0] * (17 - layout)
    dt = draw(st.floats(min_value=0.001, max_value=1e5, allow_nan=False))
    return prev, cur, layout, dt


def _batch(rows: list[tuple[list[int], list[int], int, float]]) -> tuple[Any, dict[str, Any]]:
    prev = np.array([r[0] for r in rows], dtype=np.int64)
    cur = np.array([r[1] for r in rows], dtype=np.int64)
    pres = np.array([_present(r[2]) for r in rows])
    old = np.array([r[2] == 4 for r in rows])
    dt = np.array([r[3] for r in rows])
    d = counter_deltas(prev, cur, pres, pres, old)
    return d, derive_metrics(d.delta, dt)


@settings(max_examples=200, deadline=None)
@given(st.lists(device_interval(), min_size=1, max_size=5))
def test_matches_scalar_oracle(rows: list[tuple[list[int], list[int], int, float]]) -> None:
    d, m = _batch(rows)
    for j, (prev, cur, layout, dt) in enumerate(rows):
        want = oracle(prev, cur, layout, dt)
        for name in DERIVED_COLUMNS:
            got = float(m[name][j])
            if want[name] is None:
                assert math.isnan(got), (j, name, got)
            else:
                assert got == pytest.approx(want[name], rel=REL, abs=0.0), (j, name)
        assert bool(d.reset[j]) == all(want[n] is None for n in ("r_iops", "w_iops"))


@settings(max_examples=200, deadline=None)
@given(st.lists(device_interval(), min_size=1, max_size=5))
def test_rates_never_negative(rows: list[tuple[list[int], list[int], int, float]]) -> None:
    d, m = _batch(rows)
    for name in DERIVED_COLUMNS:
        v = m[name]
        assert not (v < 0).any(), (name, v)
        assert not np.isinf(v).any(), (name, v)
    assert not (d.delta < 0).any()


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(MS), p=st.integers(0, U32 - 1), step=st.integers(0, U32 - 1),
       base=st.integers(0, 2**40), ios=st.integers(0, 2**20),
       dt=st.floats(min_value=0.01, max_value=1e4))
def test_unwrapping_matches_the_unwrapped_delta(field: int, p: int, step: int, base: int,
                                                ios: int, dt: float) -> None:
    """A ms field read as (p + step) mod 2**32 gives the metrics of the true delta ``step``."""
    prev = [base] * 17
    prev[field] = p
    prev[IN_FLIGHT] = 3
    cur = [base + ios] * 17
    cur[IN_FLIGHT] = 3
    wrapped_cur = list(cur)
    wrapped_cur[field] = (p + step) % U32  # what the kernel prints with %u
    true_cur = list(cur)
    true_cur[field] = p + step  # the value had the field been 64-bit
    d_w, m_w = _one(prev, wrapped_cur, dt=dt)
    d_t, m_t = _one(prev, true_cur, dt=dt)
    assert d_w.delta[0, field] == step
    assert not d_w.reset[0]
    assert bool(d_w.wrapped[0]) == (p + step >= U32)
    assert d_w.delta.tolist() == d_t.delta.tolist()
    for name in DERIVED_COLUMNS:
        assert m_w[name] == m_t[name] or (math.isnan(m_w[name]) and math.isnan(m_t[name]))


PER_REQUEST = ("r_await_ms", "w_await_ms", "d_await_ms", "f_await_ms", "await_ms", "r_areq_kB",
               "w_areq_kB", "d_areq_kB", "areq_kB", "r_rqm_pct", "w_rqm_pct", "d_rqm_pct")


@settings(max_examples=200, deadline=None)
@given(deltas=st.lists(st.integers(0, 2**24), min_size=17, max_size=17),
       k=st.integers(1, 10_000), dt=st.floats(min_value=0.01, max_value=1e4),
       layout=st.sampled_from([11, 15, 17]))
def test_scaling_deltas_and_interval_by_k(deltas: list[int], k: int, dt: float,
                                          layout: int) -> None:
    """k times the requests in k times the time: same rates, latencies, sizes, util, queue."""
    base = np.array([deltas], dtype=np.float64)
    base[0, layout:] = np.nan
    scaled = base * k
    scaled[0, IN_FLIGHT] = base[0, IN_FLIGHT]  # a gauge, not a delta
    m1 = derive_metrics(base, np.array([dt]))
    mk = derive_metrics(scaled, np.array([dt * k]))
    for name in DERIVED_COLUMNS:
        a, b = float(m1[name][0]), float(mk[name][0])
        if math.isnan(a):
            assert math.isnan(b), name
        else:
            assert b == pytest.approx(a, rel=REL, abs=1e-300), name
    # and the per-request metrics did not depend on dt at all
    m_other = derive_metrics(base, np.array([dt * 3.0]))
    for name in PER_REQUEST:
        a, b = float(m1[name][0]), float(m_other[name][0])
        assert (math.isnan(a) and math.isnan(b)) or a == b, name


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(device_interval(), min_size=1, max_size=6), data=st.data())
def test_reset_rows_are_all_nan(rows: list[tuple[list[int], list[int], int, float]],
                                data: st.DataObject) -> None:
    # force a count backwards on one modern-layout row
    modern = [j for j, r in enumerate(rows) if r[2] != 4]
    assume(modern)
    j = data.draw(st.sampled_from(modern))
    prev, cur, layout, dt = rows[j]
    field = data.draw(st.sampled_from([f for f in COUNTS if f < layout]))
    prev = list(prev)
    cur = list(cur)
    prev[field] = cur[field] + data.draw(st.integers(1, 2**20))
    rows[j] = (prev, cur, layout, dt)
    d, m = _batch(rows)
    assert d.reset[j]
    assert not d.wrapped[j]
    assert np.isnan(d.delta[j]).all()
    assert all(math.isnan(float(m[name][j])) for name in DERIVED_COLUMNS)


def test_counter_deltas_does_not_modify_its_inputs() -> None:
    prev = np.full((2, N_FIELDS), 5, dtype=np.int64)
    cur = np.full((2, N_FIELDS), 3, dtype=np.int64)
    pres = np.ones((2, N_FIELDS), bool)
    before = (prev.copy(), cur.copy(), pres.copy())
    counter_deltas(prev, cur, pres, pres)
    assert (prev == before[0]).all()
    assert (cur == before[1]).all()
    assert (pres == before[2]).all()
