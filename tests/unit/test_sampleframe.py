"""SampleFrame: conform, validate, concat, Parquet round trip, timestamps."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from iogauge.errors import SchemaError
from iogauge.model.sampleframe import (
    DEVICE_KINDS,
    KEY,
    MEASURES,
    REQUIRED,
    SAMPLE_COLUMNS,
    SCHEMA,
    TS_DTYPE,
    SampleFrame,
)

T0 = dt.datetime(2024, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def rec(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"source": "test", "host": "h1", "device": "sda",
                            "device_kind": "disk", "ts": T0, "interval_s": 1.0}
    base.update(kw)
    return base


def minimal_df(**cols: list[Any]) -> pl.DataFrame:
    base: dict[str, list[Any]] = {"source": ["test"], "host": ["h1"], "device": ["sda"],
                                  "device_kind": ["disk"], "ts": [T0], "interval_s": [1.0]}
    base.update(cols)
    return pl.DataFrame(base)


def test_schema_shape() -> None:
    assert list(SCHEMA) == [c.name for c in SAMPLE_COLUMNS]
    assert len(SCHEMA) == len(set(SCHEMA))
    assert REQUIRED == ("source", "host", "device", "device_kind", "ts", "interval_s",
                        "since_boot", "reset")
    assert "interval_s" not in MEASURES
    assert "r_iops" in MEASURES
    assert "cpu_idle_pct" in MEASURES
    assert SCHEMA["ts"] == TS_DTYPE
    assert set(KEY) <= set(SCHEMA)
    assert {"disk", "partition", "dm", "md", "rank", "logical_disk"} <= DEVICE_KINDS


# ---------------------------------------------------------------------------------------------
# conform
# ---------------------------------------------------------------------------------------------
def test_conform_fills_missing_columns_with_nulls_and_false_flags() -> None:
    f = SampleFrame(minimal_df(r_iops=[12.5]))
    df = f.df
    assert df.columns == list(SCHEMA)
    assert df.schema == pl.Schema(SCHEMA)
    r = df.row(0, named=True)
    assert r["r_iops"] == 12.5
    assert r["since_boot"] is False
    assert r["reset"] is False
    assert r["parent"] is None
    assert all(r[m] is None for m in MEASURES if m != "r_iops")
    assert len(f) == 1
    assert f.devices() == ["sda"]
    assert repr(f) == "SampleFrame(1 rows, 1 devices)"


def test_conform_casts_compatible_types() -> None:
    f = SampleFrame(minimal_df(r_iops=[3], interval_s=[2]))  # ints -> Float64
    assert f.df["r_iops"].dtype == pl.Float64
    assert f.df["r_iops"][0] == 3.0
    assert f.df["interval_s"][0] == 2.0


def test_conform_refuses_an_unknown_column() -> None:
    with pytest.raises(SchemaError, match=r"unknown SampleFrame column\(s\): r_iosp"):
        SampleFrame(minimal_df(r_iosp=[1.0]))
    with pytest.raises(SchemaError, match=r"unknown SampleFrame column\(s\): bogus"):
        SampleFrame.from_records([rec(bogus=1)])


def test_conform_refuses_an_uncastable_value() -> None:
    with pytest.raises(SchemaError, match="does not fit the SampleFrame schema"):
        SampleFrame(minimal_df(r_iops=["fast"]))


# ---------------------------------------------------------------------------------------------
# validate
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [-0.5, float("nan"), float("inf")])
@pytest.mark.parametrize("column", ["r_iops", "await_ms", "util_pct", "inflight",
                                    "cpu_iowait_pct"])
def test_negative_or_nan_measure_refused_naming_column_and_device(column: str,
                                                                  value: float) -> None:
    rows = [rec(device="sda", **{column: 1.0}), rec(device="nvme0n1", **{column: value})]
    with pytest.raises(SchemaError) as info:
        SampleFrame.from_records(rows)
    msg = str(info.value)
    assert f"column {column!r} must be finite, >= 0 and not NaN" in msg
    assert "device 'nvme0n1'" in msg
    assert "2024-03-01 12:00:00" in msg


def test_zero_measure_is_fine() -> None:
    f = SampleFrame.from_records([rec(r_iops=0.0, r_await_ms=0.0)])
    assert f.df["r_await_ms"][0] == 0.0


@pytest.mark.parametrize("column", ["source", "host", "device", "device_kind", "ts",
                                    "interval_s"])
def test_required_null_refused(column: str) -> None:
    rows = [rec(), rec(**{"device": "sdb", column: None})]
    with pytest.raises(SchemaError, match=rf"column {column!r} is required but null in 1 "
                       r"row\(s\), first at row 1"):
        SampleFrame.from_records(rows)


def test_required_flag_null_refused() -> None:
    df = minimal_df().with_columns(pl.lit(None, dtype=pl.Boolean).alias("reset"))
    with pytest.raises(SchemaError, match="column 'reset' is required"):
        SampleFrame(df)


def test_unknown_device_kind_refused() -> None:
    with pytest.raises(SchemaError, match=r"unknown device_kind 'tape' for device 'st0'"):
        SampleFrame.from_records([rec(device="st0", device_kind="tape")])


@pytest.mark.parametrize("interval", [0.0, -1.0, float("nan"), float("inf")])
def test_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(SchemaError, match=r"interval_s must be > 0; device 'sda'"):
        SampleFrame.from_records([rec(interval_s=interval)])


def test_reset_row_with_a_value_refused() -> None:
    with pytest.raises(SchemaError, match=r"reset=True must have every measure null"):
        SampleFrame.from_records([rec(reset=True, util_pct=5.0)])
    ok = SampleFrame.from_records([rec(reset=True), rec(device="sdb", util_pct=5.0)])
    assert ok.df["reset"].to_list() == [True, False]


def test_from_records_flag_absent_from_some_records_defaults_to_false() -> None:
    f = SampleFrame.from_records([rec(r_iops=1.0), rec(device="sdb", reset=True),
                                  rec(device="sdc", since_boot=True, interval_s=500.0)])
    assert f.df["reset"].to_list() == [False, True, False]
    assert f.df["since_boot"].to_list() == [False, False, True]


def test_from_records_explicit_null_flag_refused() -> None:
    with pytest.raises(SchemaError, match="column 'reset' is required but null"):
        SampleFrame.from_records([rec(reset=None)])


def test_validate_false_skips_then_validate_raises() -> None:
    df = minimal_df(r_iops=[-1.0])
    f = SampleFrame(df, validate=False)
    with pytest.raises(SchemaError, match="'r_iops'"):
        f.validate()


# ---------------------------------------------------------------------------------------------
# construction, concat, parquet, timestamps
# ---------------------------------------------------------------------------------------------
def test_empty_and_from_no_records() -> None:
    e = SampleFrame.empty()
    assert len(e) == 0
    assert e.df.schema == pl.Schema(SCHEMA)
    assert len(SampleFrame.from_records([])) == 0
    assert len(SampleFrame.concat([])) == 0


def test_from_records_with_sparse_columns() -> None:
    f = SampleFrame.from_records([rec(r_iops=1.0), rec(device="sdb", w_iops=2.0)])
    assert f.df["r_iops"].to_list() == [1.0, None]
    assert f.df["w_iops"].to_list() == [None, 2.0]
    assert f.to_dicts(drop_nulls=True)[1] == {
        "source": "test", "host": "h1", "device": "sdb", "device_kind": "disk", "ts": T0,
        "interval_s": 1.0, "since_boot": False, "reset": False, "w_iops": 2.0}


def test_concat() -> None:
    a = SampleFrame.from_records([rec(r_iops=1.0)])
    b = SampleFrame.from_records([rec(device="sdb", ts=T0 + dt.timedelta(seconds=1),
                                      w_await_ms=3.0)])
    c = SampleFrame.concat([a, b])
    assert len(c) == 2
    assert c.df.schema == pl.Schema(SCHEMA)
    assert c.df["device"].to_list() == ["sda", "sdb"]
    assert c.df["r_iops"].to_list() == [1.0, None]
    assert c.df["w_await_ms"].to_list() == [None, 3.0]
    assert c.devices() == ["sda", "sdb"]


def test_parquet_round_trip_is_identical(tmp_path: Path) -> None:
    rows = [
        rec(r_iops=120.0, w_iops=80.0, await_ms=10.980392156862745, util_pct=45.0,
            cpu_user_pct=20.0, parent=None),
        rec(device="sda1", device_kind="partition", parent="sda", r_iops=0.0,
            ts=T0 + dt.timedelta(microseconds=123_456), interval_s=0.1),
        rec(device="dm-0", device_kind="dm", reset=True),
        rec(device="sda", since_boot=True, interval_s=1000.0, r_lat_p99_ms=3.5),
    ]
    f = SampleFrame.from_records(rows)
    path = tmp_path / "frame.parquet"
    f.to_parquet(path)
    back = SampleFrame.read_parquet(path)
    assert back.df.equals(f.df)
    assert back.df.schema == f.df.schema
    assert back.df["ts"][1] == T0 + dt.timedelta(microseconds=123_456)


def test_naive_ts_taken_as_utc() -> None:
    naive = dt.datetime(2024, 3, 1, 12, 0, 0)
    f = SampleFrame(minimal_df(ts=[naive]))
    assert f.df["ts"].dtype == TS_DTYPE
    assert f.df["ts"][0] == T0
    # nanosecond naive input: unit normalised to µs, still UTC
    ns = minimal_df(ts=[naive]).with_columns(pl.col("ts").cast(pl.Datetime("ns")))
    g = SampleFrame(ns)
    assert g.df["ts"].dtype == TS_DTYPE
    assert g.df["ts"][0] == T0
    assert g.df.equals(f.df)


def test_aware_non_utc_ts_converted_to_the_same_instant() -> None:
    paris = dt.timezone(dt.timedelta(hours=1))
    f = SampleFrame.from_records([rec(ts=dt.datetime(2024, 3, 1, 13, 0, 0, tzinfo=paris))])
    assert f.df["ts"][0] == T0


def test_json_records_round_trip_through_from_records() -> None:
    """`iogauge iostat --json` writes ts as ISO text; those records load back unchanged."""
    import numpy as np

    from iogauge.collector.derive import DERIVED_COLUMNS
    from iogauge.collector.linux import IntervalResult, frame_from_results

    metrics = {c: np.array([np.nan]) for c in DERIVED_COLUMNS}
    metrics["r_iops"] = np.array([5.0])
    res = IntervalResult(
        ts_us=1_700_000_000_123_456, devices=["sda"], kinds=["disk"], parents=[None],
        interval_s=np.array([1.0]), metrics=metrics, reset=np.array([False]))
    recs = res.to_records(host="h")
    assert recs[0]["ts"] == "2023-11-14T22:13:20.123456+00:00"
    frame = SampleFrame.from_records(recs)
    assert frame.df["ts"].dt.epoch("us")[0] == 1_700_000_000_123_456
    assert frame.df["r_iops"][0] == 5.0
    assert frame_from_results([res], host="h").df["ts"][0] == frame.df["ts"][0]
