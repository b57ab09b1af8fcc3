"""LiveStore (what `record` and `guarantee` write through) and Store's reads of its segments."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from iogauge.errors import StoreBusyError, StoreError
from iogauge.model.device import DeviceInfo
from iogauge.model.guaranteeframe import GuaranteeFrame
from iogauge.model.sampleframe import SAMPLE_COLUMNS, SampleFrame
from iogauge.store import Store
from iogauge.store.live import Family, LiveStore
from iogauge.store.segments import FANOUT, live_dir

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _frame(start_s: int, n: int, device: str = "sda") -> SampleFrame:
    cols: dict[str, pl.Series] = {}
    for c in SAMPLE_COLUMNS:
        values: list[object]
        if c.name == "ts":
            values = [T0 + timedelta(seconds=start_s + i) for i in range(n)]
        elif c.name in ("source", "host", "device", "device_kind"):
            values = [{"source": "linux-diskstats", "host": "h", "device": device,
                       "device_kind": "disk"}[c.name]] * n
        elif c.name == "interval_s":
            values = [1.0] * n
        elif c.dtype == pl.Boolean:
            values = [False] * n
        elif c.name == "r_iops":
            values = [float(start_s + i) for i in range(n)]
        else:
            values = [None] * n
        cols[c.name] = pl.Series(values, dtype=c.dtype)
    return SampleFrame(pl.DataFrame(cols))


def test_appends_are_read_at_once_by_a_reader_beside_the_writer(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with LiveStore.open(db) as live:
        live.append(_frame(0, 5))
        with Store.open(db, read_only=True) as st:
            assert st.count() == 5
        live.append(_frame(5, 5))
        with Store.open(db, read_only=True) as st:
            frame = st.read()
            assert len(frame) == 10
            assert frame.df["r_iops"].to_list() == [float(i) for i in range(10)]
            assert len(st.read(start=T0 + timedelta(seconds=7))) == 3


def test_a_store_written_before_keeps_its_rows_and_gains_the_live_ones(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with Store.open(db) as st:  # what `record` and `import` wrote before issue 40
        st.append(_frame(0, 4))
        st.append_devices("h", [DeviceInfo(name="sda", kind="disk", model="OLD")])
    with LiveStore.open(db) as live:
        assert live.note is not None and "segments" in live.note  # said once
        live.append(_frame(4, 3))
        assert live.append_devices("h", [DeviceInfo(name="sda", kind="disk", model="OLD")]) == 0
        assert live.append_devices("h", [DeviceInfo(name="sda", kind="disk", model="NEW")]) == 1
    with Store.open(db, read_only=True) as st:
        assert st.read().df["r_iops"].to_list() == [float(i) for i in range(7)]
        devices = st.read_devices()
    assert devices["model"].to_list() == ["NEW"]  # the later row wins, first_seen kept
    assert devices["first_seen"][0] < devices["changed"][0]


def test_merges_keep_every_row_in_order(tmp_path: Path) -> None:
    db = tmp_path / "m.duckdb"
    with LiveStore.open(db) as live:
        for i in range(FANOUT + 3):
            live.append(_frame(2 * i, 2))
    names = sorted(p.name for p in live_dir(db).glob("samples.*.parquet"))
    assert f"samples.{1:012d}-{FANOUT:012d}.parquet" in names  # the merge
    assert f"samples.{1:012d}-{1:012d}.parquet" in names  # its input, within the grace time
    with Store.open(db, read_only=True) as st:
        assert st.read().df["r_iops"].to_list() == [float(i) for i in range(2 * (FANOUT + 3))]
        out = tmp_path / "x.parquet"
        assert st.export_parquet(out) == 2 * (FANOUT + 3)
    assert len(SampleFrame.read_parquet(out)) == 2 * (FANOUT + 3)
    # a user's own DuckDB session: the view skips the merged inputs too
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM samples_live").fetchone() == (2 * (FANOUT + 3),)
    finally:
        con.close()


def test_a_restarted_writer_continues_the_numbering(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    for start in (0, 3, 6):
        with LiveStore.open(db) as live:
            assert live.note is None  # a store made by a live writer needs no note
            live.append(_frame(start, 3))
    with Store.open(db, read_only=True) as st:
        assert st.read().df["r_iops"].to_list() == [float(i) for i in range(9)]


def test_guarantee_decisions_go_to_their_own_segments(tmp_path: Path) -> None:
    db = tmp_path / "g.duckdb"
    row = {c.name: None for c in GuaranteeFrame.empty().df.iter_columns()}
    df = GuaranteeFrame.empty().df
    rows = []
    for i in range(3):
        r = dict(row)
        r.update(run_id="r1", host="h", device="sda", ts=T0 + timedelta(seconds=i),
                 interval_s=1.0, policy="paper", actuator="dry-run", a_floor_iops=10.0,
                 a_miss=False, state="hold", reason="test", groups_json="{}")
        rows.append(r)
    frame = GuaranteeFrame(pl.DataFrame(rows, schema=df.schema))
    with LiveStore.open(db, family=Family.GUARANTEE) as live, LiveStore.open(db) as rec:
        assert live.append_guarantee(frame) == 3
        rec.append(_frame(0, 2))  # record beside it: another family, another lock
        with pytest.raises(StoreError, match="does not write"):
            live.append(_frame(0, 1))
    with Store.open(db, read_only=True) as st:
        assert len(st.read_guarantee()) == 3
        assert st.count() == 2


def test_a_second_writer_is_refused_by_name_and_pid(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    code = textwrap.dedent(f"""
        import sys
        from iogauge.store.live import LiveStore
        st = LiveStore.open({str(db)!r})
        print("open", flush=True)
        sys.stdin.readline()
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreBusyError) as info:
            LiveStore.open(db)
        assert f"PID {holder.pid}" in str(info.value)
        assert "already writing samples" in str(info.value)
        with Store.open(db, read_only=True) as st:  # readers are not refused
            assert st.count() == 0
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    LiveStore.open(db).close()  # the lock went with the process
    assert (live_dir(db) / "samples.lock").exists()


def test_merged_inputs_go_after_the_grace_time_only(tmp_path: Path) -> None:
    from iogauge.store.segments import GRACE_S, SegmentLog, all_segments, live_segments

    now = [1000.0]
    log = SegmentLog(tmp_path, "samples", SampleFrame.empty().df, clock=lambda: now[0])
    for i in range(FANOUT):
        log.write(_frame(i, 1).df)
    assert len(all_segments(tmp_path, "samples")) == 1 + FANOUT + 1  # empty, inputs, merge
    now[0] += GRACE_S - 1
    log.write(_frame(FANOUT, 1).df)
    assert len(all_segments(tmp_path, "samples")) == 1 + FANOUT + 2  # a reader may read them
    now[0] += 2
    log.write(_frame(FANOUT + 1, 1).df)
    names = [(s.first, s.last) for s in all_segments(tmp_path, "samples")]
    assert names == [(0, 0), (1, FANOUT), (FANOUT + 1, FANOUT + 1), (FANOUT + 2, FANOUT + 2)]
    assert [(s.first, s.last) for s in live_segments(tmp_path, "samples")] == names[1:]
