"""The DuckDB store and the batching recorder: schema from the model, identical round trips,
atomic batches, device upserts, XDG default path, clear errors, and crash safety."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from iogauge.collector.derive import DERIVED_COLUMNS
from iogauge.collector.linux import (
    CPU_COLUMNS,
    IntervalResult,
    LinuxCollector,
    frame_from_results,
)
from iogauge.collector.recorder import MAX_FLUSH_S, Recorder
from iogauge.errors import StoreError
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SAMPLE_COLUMNS, TS_DTYPE, SampleFrame
from iogauge.store import STORE_SCHEMA_VERSION, Store, default_db_path, duckdb_type, parse_time

T0 = datetime(2024, 5, 1, 2, 10, 0, 123456, tzinfo=UTC)


def _frame(n_ts: int = 4, start: datetime = T0, host: str = "db01") -> SampleFrame:
    """Varied rows: disks, a partition with a parent, nulls, a reset row, CPU and RMF columns."""
    recs: list[dict[str, object]] = []
    for k in range(n_ts):
        ts = start + timedelta(seconds=k)
        recs.append({"source": "linux-diskstats", "host": host, "device": "sda",
                     "device_kind": "disk", "ts": ts, "interval_s": 1.0, "since_boot": False,
                     "reset": False, "r_iops": 10.0 + k,
                     "w_iops": 0.0, "await_ms": 1.25, "util_pct": 33.3, "cpu_user_pct": 5.5,
                     "r_lat_p99_ms": None})
        recs.append({"source": "linux-diskstats", "host": host, "device": "sda1",
                     "device_kind": "partition", "parent": "sda", "ts": ts,
                     "interval_s": 1.0, "r_iops": 1.0 * k, "since_boot": k == 0,
                     "reset": False})
        recs.append({"source": "linux-diskstats", "host": host, "device": "nvme0n1",
                     "device_kind": "disk", "ts": ts, "interval_s": 0.999999,
                     "since_boot": False, "reset": k == 2, "r_iops": None if k == 2 else 1e6,
                     "iosq_ms": None if k == 2 else 0.001})
    return SampleFrame.from_records(recs)


def _open(tmp_path: Path, name: str = "s.duckdb", **kw: object) -> Store:
    return Store.open(tmp_path / name, **kw)  # type: ignore[arg-type]


# ---- schema -------------------------------------------------------------------------------
def test_type_mapping_follows_polars_dtypes() -> None:
    assert duckdb_type(pl.String()) == "VARCHAR"
    assert duckdb_type(pl.Float64()) == "DOUBLE"
    assert duckdb_type(pl.Boolean()) == "BOOLEAN"
    assert duckdb_type(TS_DTYPE) == "TIMESTAMP WITH TIME ZONE"


def test_samples_table_is_derived_from_the_model(tmp_path: Path) -> None:
    with _open(tmp_path) as st:
        assert st.schema_version() == STORE_SCHEMA_VERSION
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT column_name, data_type, is_nullable FROM "
                           "information_schema.columns WHERE table_name = 'samples' "
                           "ORDER BY ordinal_position").fetchall()
        tables = {r[0] for r in con.execute("SELECT table_name FROM "
                                            "information_schema.tables").fetchall()}
    finally:
        con.close()
    assert [r[0] for r in rows] == [c.name for c in SAMPLE_COLUMNS]
    assert [r[1] for r in rows] == [duckdb_type(c.dtype) for c in SAMPLE_COLUMNS]
    assert [r[2] == "NO" for r in rows] == [c.required for c in SAMPLE_COLUMNS]
    assert {"samples", "devices", "meta"} <= tables


def test_missing_model_column_is_added_and_read_only_fills_nulls(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with Store.open(path) as st:
        st.append(_frame())
    con = duckdb.connect(str(path))
    con.execute('ALTER TABLE samples DROP COLUMN "r_lat_p99_ms"')
    con.close()
    with Store.open(path, read_only=True) as ro:  # an older store: read, never migrate
        back = ro.read()
    assert back.df["r_lat_p99_ms"].null_count() == len(back)
    assert back.df.schema == _frame().df.schema
    with Store.open(path) as st:  # writable: the column comes back
        st.append(_frame(start=T0 + timedelta(hours=1)))
        assert len(st.read()) == 2 * len(_frame())


def test_wrong_column_type_and_newer_schema_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    Store.open(path).close()
    con = duckdb.connect(str(path))
    con.execute('ALTER TABLE samples ALTER COLUMN "util_pct" TYPE VARCHAR')
    con.close()
    with pytest.raises(StoreError, match=r"samples\.util_pct is VARCHAR .* DOUBLE"):
        Store.open(path)
    path2 = tmp_path / "newer.duckdb"
    Store.open(path2).close()
    con = duckdb.connect(str(path2))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="newer iogauge"):
        Store.open(path2)


# ---- round trip ---------------------------------------------------------------------------
def test_round_trip_gives_back_an_identical_frame(tmp_path: Path) -> None:
    frame = _frame()
    with _open(tmp_path) as st:
        assert st.append(frame) == len(frame)
        back = st.read()
    assert back.df.schema == frame.df.schema
    assert back.df.schema["ts"] == pl.Datetime("us", "UTC")
    assert back.df.equals(frame.df)


def test_round_trip_of_a_live_collector_frame(tmp_path: Path) -> None:
    col = LinuxCollector(include_idle=True)
    col.prime()
    results = []
    for _ in range(3):
        time.sleep(0.02)
        results.append(col.sample())
    frame = frame_from_results(results, host=col.host)
    assert len(frame) > 0
    with _open(tmp_path) as st:
        st.append(frame)
    with _open(tmp_path, read_only=True) as ro:  # reopened, read-only
        assert ro.read().df.equals(frame.df)


def test_read_filters(tmp_path: Path) -> None:
    with _open(tmp_path) as st:
        st.append(_frame(host="db01"))
        st.append(_frame(host="db02"))
        assert len(st.read(device="sda")) == 8
        assert len(st.read(device=["sda", "sda1"], host="db02")) == 8
        # bounds are inclusive, on ts (interval end); text and naive datetimes are UTC
        got = st.read(start=T0 + timedelta(seconds=1), end="2024-05-01T02:10:02.123456Z")
        assert got.df["ts"].unique().len() == 2
        naive = st.read(start=(T0 + timedelta(seconds=3)).replace(tzinfo=None))
        assert len(naive) == 6
        assert len(st.read(device=[])) == 0
        assert len(st.read(end=T0 - timedelta(days=1))) == 0
        assert st.read(device="nope").df.schema == SampleFrame.empty().df.schema


def test_parse_time() -> None:
    assert parse_time("2024-05-01T02:10:00Z") == datetime(2024, 5, 1, 2, 10, tzinfo=UTC)
    assert parse_time("2024-05-01 04:10+02:00") == datetime(2024, 5, 1, 2, 10, tzinfo=UTC)
    assert parse_time(None) is None
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_time("yesterday")


# ---- append batching and atomicity --------------------------------------------------------
def test_appends_accumulate_and_empty_frames_are_no_ops(tmp_path: Path) -> None:
    with _open(tmp_path) as st:
        assert st.append(SampleFrame.empty()) == 0
        for k in range(5):
            st.append(_frame(start=T0 + timedelta(minutes=k)))
        assert st.count() == 5 * len(_frame())
        back = st.read()
    expected = SampleFrame.concat([_frame(start=T0 + timedelta(minutes=k)) for k in range(5)])
    assert back.df.equals(expected.df)  # insertion order kept


def test_a_failing_append_commits_nothing(tmp_path: Path) -> None:
    """A batch is one transaction: a row the database refuses takes the whole batch back."""
    path = tmp_path / "s.duckdb"
    Store.open(path).close()
    con = duckdb.connect(str(path))
    # Recreate samples with a CHECK that refuses one device, keeping the model's columns.
    con.execute("CREATE TABLE s2 AS SELECT * FROM samples")
    con.execute("DROP TABLE samples")
    cols = ", ".join(f'"{c.name}" {duckdb_type(c.dtype)}' for c in SAMPLE_COLUMNS)
    con.execute(f"CREATE TABLE samples ({cols}, CHECK (device <> 'nvme0n1'))")
    con.close()
    with Store.open(path) as st:
        with pytest.raises(StoreError, match=r"cannot append 12 rows"):
            st.append(_frame())
        assert st.count() == 0
        ok = SampleFrame(_frame().df.filter(pl.col("device") != "nvme0n1"))
        assert st.append(ok) == 8  # the connection is usable after the rollback


# ---- devices ------------------------------------------------------------------------------
def test_devices_upsert_on_change(tmp_path: Path) -> None:
    sda = DeviceInfo("sda", "disk", 8, 0, rotational=True, model="ST4000", scheduler="mq-deadline",
                     size_bytes=4 * 10**12)
    dm = DeviceInfo("dm-0", "dm", 253, 0, dm_name="vg0-root", slaves=("sda2", "sdb2"))
    t1 = datetime(2024, 5, 1, tzinfo=UTC)
    t2 = t1 + timedelta(hours=1)
    with _open(tmp_path) as st:
        assert st.append_devices("db01", {"sda": sda, "dm-0": dm}, seen=t1) == 2
        assert st.append_devices("db01", [sda, dm], seen=t2) == 0  # unchanged: untouched
        assert st.append_devices("db02", [sda], seen=t2) == 1  # per host
        changed = DeviceInfo("sda", "disk", 8, 0, rotational=True, model="ST4000",
                             scheduler="bfq", size_bytes=4 * 10**12)
        assert st.append_devices("db01", [changed], seen=t2) == 1
        df = st.read_devices("db01")
    assert df["name"].to_list() == ["dm-0", "sda"]
    row = df.filter(pl.col("name") == "sda").row(0, named=True)
    assert row["scheduler"] == "bfq"
    assert row["first_seen"] == t1
    assert row["changed"] == t2
    assert row["rotational"] is True
    assert row["size_bytes"] == 4 * 10**12
    dmrow = df.filter(pl.col("name") == "dm-0").row(0, named=True)
    assert dmrow["slaves"] == ["sda2", "sdb2"]
    assert dmrow["dm_name"] == "vg0-root"
    assert df.schema["first_seen"] == pl.Datetime("us", "UTC")


# ---- paths --------------------------------------------------------------------------------
def test_default_path_honours_xdg_data_home(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "iogauge" / "iogauge.duckdb"
    with Store.open() as st:  # parent directories are created
        assert st.path == tmp_path / "xdg" / "iogauge" / "iogauge.duckdb"
    assert st.path.is_file()
    # no stray temporary files from the atomic creation
    assert sorted(p.name for p in st.path.parent.iterdir()) == ["iogauge.duckdb"]


def test_default_path_falls_back_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert default_db_path() == tmp_path / ".local" / "share" / "iogauge" / "iogauge.duckdb"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # the spec says: ignore it
    assert default_db_path() == tmp_path / ".local" / "share" / "iogauge" / "iogauge.duckdb"


# ---- errors -------------------------------------------------------------------------------
def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("device r/s w/s\nsda 1 2\n")
    with pytest.raises(StoreError, match=r"notes\.txt: not a DuckDB database"):
        Store.open(bad)
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    with pytest.raises(StoreError, match=r"empty\.duckdb: not a DuckDB database"):
        Store.open(empty)
    assert bad.read_text().startswith("device")  # never overwritten


def test_a_directory_path(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"is a directory; --db takes a file"):
        Store.open(tmp_path)


def test_read_only_open_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such database"):
        Store.open(tmp_path / "missing.duckdb", read_only=True)
    assert not (tmp_path / "missing.duckdb").exists()


def test_a_foreign_duckdb_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE invoices (id INTEGER)")
    con.close()
    with pytest.raises(StoreError, match=r"not an iogauge store \(tables: invoices\)"):
        Store.open(path)


def test_writes_to_a_read_only_or_closed_store_are_refused(tmp_path: Path) -> None:
    _open(tmp_path).close()
    with _open(tmp_path, read_only=True) as ro, pytest.raises(StoreError, match="read-only"):
        ro.append(_frame())
    st = _open(tmp_path)
    st.close()
    st.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        st.read()


def _holder(path: Path) -> subprocess.Popen[str]:
    code = textwrap.dedent(f"""
        import sys, time
        from iogauge.store import Store
        st = Store.open({str(path)!r})
        print("open", flush=True)
        sys.stdin.readline()
        st.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "open"
    return proc


def test_a_database_held_by_another_process(tmp_path: Path) -> None:
    path = tmp_path / "busy.duckdb"
    proc = _holder(path)
    try:
        for read_only in (False, True):
            with pytest.raises(StoreError) as info:
                Store.open(path, read_only=read_only)
            msg = str(info.value)
            assert str(path) in msg
            assert "locked by another process" in msg
            assert f"PID {proc.pid}" in msg
    finally:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=30)
    Store.open(path).close()  # free again once the holder is gone


# ---- crash safety -------------------------------------------------------------------------
def test_a_killed_writer_leaves_a_readable_store(tmp_path: Path) -> None:
    """kill -9 right after a commit and in the middle of the next batch's life."""
    path = tmp_path / "crash.duckdb"
    batch1, batch2 = tmp_path / "b1.parquet", tmp_path / "b2.parquet"
    _frame().to_parquet(batch1)
    _frame(start=T0 + timedelta(minutes=1)).to_parquet(batch2)
    code = textwrap.dedent(f"""
        import os, signal
        from iogauge.model.sampleframe import SampleFrame
        from iogauge.store import Store
        st = Store.open({str(path)!r})
        st.append(SampleFrame.read_parquet({str(batch1)!r}))
        st.append(SampleFrame.read_parquet({str(batch2)!r}))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with Store.open(path, read_only=True) as ro:  # WAL replayed without writing
        assert ro.count() == 2 * len(_frame())
    with Store.open(path) as st:
        st.append(_frame(start=T0 + timedelta(minutes=2)))
        assert st.count() == 3 * len(_frame())


def test_no_duckdb_shutdown_noise_after_reading(tmp_path: Path) -> None:
    """A process that reads through Arrow and exits prints nothing on stderr."""
    path = tmp_path / "s.duckdb"
    with Store.open(path) as st:
        st.append(_frame())
    code = textwrap.dedent(f"""
        from iogauge.store import Store
        st = Store.open({str(path)!r}, read_only=True)
        frame = st.read()
        devices = st.read_devices()
        st.close()
        print(len(frame))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0
    assert proc.stdout.strip() == str(len(_frame()))
    assert proc.stderr == ""


# ---- export -------------------------------------------------------------------------------
def test_export_parquet_reads_back_as_a_sample_frame(tmp_path: Path) -> None:
    frame = _frame()
    out = tmp_path / "out.parquet"
    with _open(tmp_path) as st:
        st.append(frame)
        assert st.export_parquet(out) == len(frame)
        back = SampleFrame.read_parquet(out)
        assert back.df.equals(frame.df)
        assert st.export_parquet(out, device="sda", start=T0 + timedelta(seconds=2)) == 2
        assert len(SampleFrame.read_parquet(out)) == 2
        assert st.export_parquet(out, host="nobody") == 0
        assert SampleFrame.read_parquet(out).df.schema == frame.df.schema
        with pytest.raises(StoreError, match="does not exist"):
            st.export_parquet(tmp_path / "no" / "dir.parquet")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# ---- the recorder's batching (fake collector and clock) ------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, d: float) -> None:
        self.t += max(d, 0.0)


class _FakeCollector:
    """Two devices per sample; a message at sample 3; optional stop request at sample N."""

    def __init__(self, clock: _Clock, stop_at: int | None = None) -> None:
        self.clock = clock
        self.n = 0
        self.stop_at = stop_at
        self.recorder: Recorder | None = None
        self.infos = {"sda": DeviceInfo("sda", "disk", 8, 0),
                      "sdb": DeviceInfo("sdb", "disk", 8, 16)}

    @property
    def host(self) -> str:
        return "fake"

    def prime(self) -> list[str]:
        return ["primed"]

    def device_info(self) -> dict[str, DeviceInfo]:
        return dict(self.infos)

    def sample(self) -> IntervalResult:
        self.n += 1
        if self.stop_at is not None and self.n == self.stop_at and self.recorder:
            self.recorder.request_stop("test")
        if self.n == 3:
            self.infos["sdc"] = DeviceInfo("sdc", "disk", 8, 32)
        ts_us = int(T0.timestamp() * 1e6) + self.n * 1_000_000
        metrics = {m: np.full(2, float(self.n)) for m in DERIVED_COLUMNS}
        return IntervalResult(ts_us=ts_us, devices=["sda", "sdb"], kinds=["disk", "disk"],
                              parents=[None, None], interval_s=np.ones(2), metrics=metrics,
                              reset=np.zeros(2, dtype=np.bool_),
                              cpu=dict.fromkeys(CPU_COLUMNS, 1.0),
                              messages=["device sdc appeared"] if self.n == 3 else [])


def _recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, interval: float = 1.0,
              flush: float = MAX_FLUSH_S, duration: float | None = None,
              stop_at: int | None = None) -> tuple[Recorder, _FakeCollector, list[int],
                                                    list[str]]:
    clock = _Clock()
    monkeypatch.setattr("iogauge.timing.time.sleep", clock.sleep)
    col = _FakeCollector(clock, stop_at)
    store = _open(tmp_path)
    batches: list[int] = []
    real_append = store.append

    def counting_append(frame: SampleFrame) -> int:
        batches.append(len(frame))
        return real_append(frame)

    monkeypatch.setattr(store, "append", counting_append)
    messages: list[str] = []
    rec = Recorder(col, store, interval_s=interval, flush_s=flush, duration_s=duration,
                   on_message=messages.append, monotonic=clock.monotonic)
    col.recorder = rec
    return rec, col, batches, messages


def test_recorder_commits_one_transaction_per_flush_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec, _col, batches, messages = _recorder(tmp_path, monkeypatch, duration=12)
    summary = rec.run(handle_signals=False)
    # 12 samples of 2 devices at 1 s: commits after 5 and 10 samples, the rest at the end
    assert batches == [10, 10, 4]
    assert (summary.rows, summary.samples, summary.flushes) == (24, 12, 3)
    assert summary.stopped_by == "duration"
    assert summary.devices == {"sda", "sdb"}
    assert messages == ["primed", "device sdc appeared"]
    assert "recorded 24 rows for 2 devices (sda, sdb)" in summary.line()
    with _open(tmp_path, read_only=True) as ro:
        assert ro.count() == 24
        assert ro.read_devices("fake")["name"].to_list() == ["sda", "sdb", "sdc"]
        assert ro.read().df["ts"].is_sorted()


def test_recorder_batches_by_data_span_at_sub_second_intervals(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec, _col, batches, _m = _recorder(tmp_path, monkeypatch, interval=0.2, flush=1.0,
                                       duration=3.0)
    rec.run(handle_signals=False)
    assert batches == [10, 10, 10]  # 5 samples (1 s of data) per transaction


def test_recorder_interval_longer_than_flush_commits_every_sample(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec, _col, batches, _m = _recorder(tmp_path, monkeypatch, interval=3.0, flush=5.0,
                                       duration=9.0)
    rec.run(handle_signals=False)
    assert batches == [2, 2, 2]


def test_recorder_stop_request_finishes_the_sample_and_flushes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec, _col, batches, _m = _recorder(tmp_path, monkeypatch, stop_at=7)
    summary = rec.run(handle_signals=False)
    assert batches == [10, 4]
    assert (summary.samples, summary.stopped_by) == (7, "test")
    assert rec.buffered_rows == 0
    with _open(tmp_path, read_only=True) as ro:
        assert ro.count() == 14


def test_recorder_refuses_more_than_five_seconds_at_risk(tmp_path: Path) -> None:
    with _open(tmp_path) as st:
        with pytest.raises(ValueError, match="at most 5 s"):
            Recorder(LinuxCollector(), st, flush_s=10.0)
        with pytest.raises(ValueError, match="interval_s"):
            Recorder(LinuxCollector(), st, interval_s=0)


def test_recorder_keeps_rows_when_a_flush_fails_and_retries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec, _col, _batches, messages = _recorder(tmp_path, monkeypatch, duration=12)
    store = rec._store  # the test plays a failing disk
    real = store.append
    calls = {"n": 0}

    def flaky(frame: SampleFrame) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            raise StoreError("disk full")
        return real(frame)

    monkeypatch.setattr(store, "append", flaky)
    summary = rec.run(handle_signals=False)
    assert summary.rows == 24  # nothing lost: the failed batch went with the next one
    assert any("disk full" in m and "retrying" in m for m in messages)


def test_recorder_with_signal_handlers_restores_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    rec, _col, _b, _m = _recorder(tmp_path, monkeypatch, duration=2)
    rec.run(handle_signals=True)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_replace_makes_a_second_import_idempotent(tmp_path: Path) -> None:
    store = _open(tmp_path)
    frame = _frame()
    store.append(frame, replace=True)
    store.append(frame, replace=True)
    assert store.count() == len(frame)
    # A corrected re-import replaces values; rows of other keys stay.
    changed = SampleFrame(frame.df.head(2).with_columns(pl.col("r_iops") * 0 + 123.0))
    store.append(changed, replace=True)
    back = store.read().df
    assert back.height == len(frame)
    assert back.filter(pl.col("r_iops") == 123.0).height == 2
    # Without replace, rows accumulate (the recorder's fast path).
    store.append(frame)
    assert store.count() == 2 * len(frame)
    store.close()


def test_wait_events_round_trip_and_replace(tmp_path: Path) -> None:
    from iogauge.model.waitevents import WaitEventFrame

    waits = WaitEventFrame(pl.DataFrame({
        "source": ["awr", "awr"], "host": ["db01", "db01"], "db_name": ["ORCL", "ORCL"],
        "instance": [None, None], "ts": [T0, T0], "interval_s": [3600.0, 3600.0],
        "section": ["foreground wait events"] * 2,
        "event": ["db file sequential read", "db file scattered read"],
        "waits": [1000.0, 50.0], "time_waited_s": [11.1, 0.37],
        "avg_wait_ms": [11.1, 7.4]}))
    store = _open(tmp_path)
    assert len(store.read_waits()) == 0
    assert store.append_waits(waits) == 2
    assert store.append_waits(waits) == 2  # same keys (NULL instance too): replaced
    back = store.read_waits().df.sort("event")
    assert back.height == 2
    assert back["ts"].dtype == TS_DTYPE
    assert back.filter(pl.col("event") == "db file sequential read")["avg_wait_ms"][0] == 11.1
    store.close()
