"""GuaranteeFrame: schema, validation, and the store's guarantee_decisions table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from iogauge.errors import SchemaError
from iogauge.model.guaranteeframe import GUARANTEE_COLUMNS, GUARANTEE_SCHEMA, GuaranteeFrame
from iogauge.model.sampleframe import TS_DTYPE
from iogauge.store.duckdb_store import GUARANTEE_TABLE, Store

T0 = datetime(2024, 5, 1, 2, 10, tzinfo=UTC)


def _row(k: int, run: str = "h-1-x", **kw: object) -> dict[str, object]:
    r: dict[str, object] = {
        "run_id": run, "host": "h", "device": "sdb", "ts": T0 + timedelta(seconds=k),
        "interval_s": 1.0, "policy": "paper", "actuator": "cgroup-v1", "util_pct": 87.5,
        "r_iops": 150.0, "w_iops": 40.0, "iops": 190.0, "await_ms": 9.5, "aqu_sz": 1.8,
        "a_iops": 98.0, "a_floor_iops": 100.0, "b_iops": 92.0, "busy_per_iops": 0.4605,
        "x_pct": 95.0, "capacity_iops": 217.1, "b_riops_limit": 55, "b_wiops_limit": 41,
        "a_miss": False, "state": "compute", "reason": "b = 96.3 IOPS", "warnings": None,
        "groups_json": "{}"}
    r.update(kw)
    return r


def test_schema_has_the_issue_columns() -> None:
    names = [c.name for c in GUARANTEE_COLUMNS]
    for need in ("ts", "util_pct", "iops", "a_iops", "b_iops", "busy_per_iops", "x_pct",
                 "b_riops_limit", "b_wiops_limit", "state", "reason"):
        assert need in names
    assert GUARANTEE_SCHEMA["ts"] == TS_DTYPE
    assert GUARANTEE_SCHEMA["b_riops_limit"] == pl.Int64()


def test_round_trip_through_the_store(tmp_path: Path) -> None:
    f = GuaranteeFrame.from_records([_row(k) for k in range(3)]
                                    + [_row(k, run="h-2-y", b_riops_limit=None) for k in
                                       range(10, 12)])
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        assert store.read_guarantee().df.height == 0  # no table yet: empty, no error
        assert store.append_guarantee(f) == 5
        assert store.append_guarantee(GuaranteeFrame.empty()) == 0
    with Store.open(db, read_only=True) as store:
        back = store.read_guarantee()
        one = store.read_guarantee("h-2-y")
    assert back.df.equals(f.df)
    assert one.df.height == 2 and one.df["b_riops_limit"].null_count() == 2
    assert one.df["ts"].dtype == TS_DTYPE


def test_iso_text_timestamps_are_utc() -> None:
    f = GuaranteeFrame.from_records([_row(0, ts="2024-05-01T02:10:00Z")])
    assert f.df["ts"][0] == T0


@pytest.mark.parametrize(("bad", "message"), [
    ({"state": None}, "'state' is required"),
    ({"util_pct": -1.0}, "'util_pct' must be >= 0"),
    ({"b_riops_limit": -5}, "'b_riops_limit' must be >= 0"),
    ({"x_pct": float("nan")}, "'x_pct' must be >= 0 and not NaN"),
])
def test_validation(bad: dict[str, object], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        GuaranteeFrame.from_records([_row(0, **bad)])
    with pytest.raises(SchemaError, match="unknown GuaranteeFrame column"):
        GuaranteeFrame(pl.DataFrame({"nope": [1]}))


def test_table_name() -> None:
    assert GUARANTEE_TABLE == "guarantee_decisions"
