"""Store.bulk_append and StoreImport: batches in one transaction, exactly one append's rows.

The rows of a bulk append must not depend on how they were cut into batches (or into the
slices one batch is handed to DuckDB in): a store built batch by batch equals, row for row
and in the same order, a store given everything in one ``Store.append`` -- including the
``replace`` rule (stored rows with an imported key go; imported rows that repeat a key are
all kept, as within one append -- unless they come from different files: a later file's
rows replace an earlier one's, as importing the files one after the other would). A
failure leaves the store as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from iogauge.errors import StoreError
from iogauge.model.sampleframe import SampleFrame
from iogauge.store import Store
from iogauge.store import bulk as bulk_module
from iogauge.store.importing import StoreImport

T0 = datetime(2024, 5, 1, 2, 10, 0, tzinfo=UTC)


def _frame(start_s: int, n_ts: int, *, host: str = "db01", r_iops: float = 10.0) -> SampleFrame:
    """Disks sda and sdb each second from T0 + start_s; ``r_iops`` = r_iops + the second."""
    secs = pl.int_range(start_s, start_s + n_ts, eager=True).repeat_by(2).explode()
    df = pl.DataFrame({"k": secs}).with_columns(
        source=pl.lit("iostat"), host=pl.lit(host),
        device=pl.Series(["sda", "sdb"] * n_ts, dtype=pl.String),
        device_kind=pl.lit("disk"),
        ts=pl.lit(T0) + pl.duration(seconds=pl.col("k")),
        interval_s=pl.lit(1.0), since_boot=pl.lit(False), reset=pl.lit(False),
        r_iops=pl.col("k").cast(pl.Float64) + r_iops,
    ).drop("k")
    return SampleFrame(df)


def _batches() -> list[SampleFrame]:
    """An import cut into uneven batches, one of them empty, two sharing keys: seconds 40-44
    come twice (a file imported with a copy of itself has such rows)."""
    return [_frame(0, 7), _frame(7, 0), _frame(7, 30, r_iops=500.0), _frame(37, 8),
            _frame(40, 5, r_iops=900.0), _frame(45, 25)]


def _stored_before() -> SampleFrame:
    """Rows already in the store: seconds 30-49 share keys with the import (replaced), the
    rest do not (kept), one host is another."""
    return SampleFrame.concat([_frame(-10, 10, r_iops=1000.0), _frame(30, 20, r_iops=2000.0),
                               _frame(0, 70, host="other", r_iops=3000.0)])


def _seeded(path: Path) -> Store:
    store = Store.open(path)
    store.append(_stored_before())
    return store


def test_batch_by_batch_gives_exactly_the_rows_of_one_append(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches = _batches()
    with _seeded(tmp_path / "one.duckdb") as one:
        one.append(SampleFrame.concat(batches), replace=True)
        expected = one.read().df
    # Batches are also cut into slices of 7 rows inside add(): 24 statements, not 6.
    monkeypatch.setattr(bulk_module, "BULK_SLICE_ROWS", 7)
    with _seeded(tmp_path / "many.duckdb") as many:
        with many.bulk_append(replace=True) as bulk:
            added = [bulk.add(b) for b in batches]
            assert bulk.commit() == sum(added) == sum(len(b) for b in batches)
        assert bulk.batches == 5  # the empty one is not a batch
        got = many.read().df
    assert got.equals(expected)
    # What the rule means, on the numbers: 10 + 70*2 kept from before, 70 imported seconds
    # plus the 5 repeated ones, two disks each; seconds 30-49 of db01 hold imported values.
    assert got.height == (10 + 70) * 2 + (70 + 5) * 2
    db01 = got.filter(pl.col("host") == "db01")
    assert db01.filter(pl.col("r_iops") >= 2000.0).is_empty()  # seconds 30-49 replaced
    assert db01.filter(pl.col("r_iops").is_between(990.0, 999.0)).height == 20  # -10..-1 kept
    sec40 = db01.filter((pl.col("ts") == T0 + timedelta(seconds=40)) & (pl.col("device") == "sda"))
    assert sorted(sec40["r_iops"].to_list()) == [50.0, 940.0]  # both copies kept


def test_without_replace_rows_accumulate(tmp_path: Path) -> None:
    with _seeded(tmp_path / "s.duckdb") as st:
        with st.bulk_append() as bulk:
            for b in _batches():
                bulk.add(b)
            bulk.commit()
        assert st.count() == len(_stored_before()) + sum(len(b) for b in _batches())


def test_an_error_in_a_later_batch_rolls_every_batch_back(tmp_path: Path) -> None:
    with _seeded(tmp_path / "s.duckdb") as st:
        before = st.read().df
        added: list[int] = []

        def import_then_fail() -> None:
            with st.bulk_append(replace=True) as bulk:
                for b in _batches()[:4]:
                    added.append(bulk.add(b))
                raise RuntimeError("the parser failed")

        with pytest.raises(RuntimeError, match="the parser failed"):
            import_then_fail()
        assert sum(added) == 14 + 60 + 16  # three batches had gone in
        assert st.read().df.equals(before)
        # ... and the store takes the next import normally
        with st.bulk_append(replace=True) as again:
            again.add(_frame(0, 3))
            again.commit()
        assert st.count() == before.height + 6


def test_a_batch_duckdb_refuses_rolls_the_earlier_batches_back(tmp_path: Path) -> None:
    with _seeded(tmp_path / "s.duckdb") as st:
        before = st.read().df
        bad = SampleFrame(_frame(100, 2).df.with_columns(host=pl.lit(None, pl.String)),
                          validate=False)
        with st.bulk_append(replace=True) as bulk:
            bulk.add(_frame(0, 7))
            bulk.add(_frame(7, 30))
            # host is NOT NULL in the table: DuckDB itself refuses the third batch.
            with pytest.raises(StoreError, match=r"cannot append 4 rows \(batch 3; the 74 rows"):
                bulk.add(bad)
            assert not bulk.active
            with pytest.raises(StoreError, match="already ended"):
                bulk.add(_frame(0, 1))
        assert st.read().df.equals(before)


def test_settings_are_put_back_after_the_transaction(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.duckdb", threads=2) as st:
        con = st._connection()

        def settings() -> tuple[object, ...]:
            return tuple(con.execute(
                "SELECT current_setting('memory_limit'), current_setting('threads'), "
                "current_setting('write_buffer_row_group_count')").fetchall()[0])

        before = settings()
        with st.bulk_append() as bulk:
            bulk.add(_frame(0, 3))
            inside = settings()
            bulk.commit()
        assert inside[1:] == (1, 1)
        assert inside[0] != before[0]
        assert settings() == before
        with st.bulk_append() as bulk:
            bulk.add(_frame(3, 3))
        # rolled back by leaving the block: settings back as well
        assert settings() == before
        assert st.count() == 6


def test_no_other_write_while_a_bulk_append_is_open(tmp_path: Path) -> None:
    """Another write's BEGIN would fail inside the bulk transaction, and its ROLLBACK would
    take the bulk's rows with it: it is refused instead, and the bulk goes on."""
    with Store.open(tmp_path / "s.duckdb") as st:
        first = st.bulk_append()
        first.add(_frame(0, 2))
        with pytest.raises(StoreError, match="already in progress"):
            st.bulk_append()
        with pytest.raises(StoreError, match="already in progress"):
            st.append(_frame(10, 1))
        first.add(_frame(2, 2))
        assert first.commit() == 8
        assert st.count() == 8
        st.append(_frame(10, 1))  # writes are allowed again
        st.bulk_append().rollback()
    with Store.open(tmp_path / "s.duckdb", read_only=True) as ro, \
            pytest.raises(StoreError, match="read-only"):
        ro.bulk_append()


def test_a_large_batch_with_replace_stays_within_the_memory_limit(tmp_path: Path) -> None:
    """One frame of 3 million rows (as from a file read whole) into a store that holds rows:
    in one statement, the DELETE of replace runs out of memory under the bulk memory limit
    (DuckDB 2.0: at 3 million rows, not at 2 million); cut into slices it does not."""
    big = _frame(0, 1_500_000)
    with Store.open(tmp_path / "s.duckdb") as st:
        st.append(SampleFrame(big.df.head(2)))
        with st.bulk_append(replace=True) as bulk:
            bulk.add(SampleFrame(big.df.with_columns(pl.col("r_iops") + 1.0)))
            bulk.commit()
        assert st.count() == len(big)
        assert st.read(device="sda", start=T0, end=T0).df["r_iops"].to_list() == [11.0]


# ---- StoreImport: a new store appears only when the import commits -------------------------


def test_a_new_store_appears_only_at_the_commit(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "s.duckdb"
    with StoreImport(path) as imp:
        imp.add(_frame(0, 5))
        assert not path.exists()
        assert imp.commit() == 10
    with Store.open(path, read_only=True) as st:
        assert st.count() == 10
    assert sorted(p.name for p in path.parent.iterdir()) == ["s.duckdb"]


def test_a_failed_import_leaves_no_new_store_and_no_directories(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "s.duckdb"

    def import_then_fail() -> None:
        with StoreImport(path) as imp:
            imp.add(_frame(0, 5))
            assert imp.rows == 10
            raise RuntimeError("a bad file")

    with pytest.raises(RuntimeError, match="a bad file"):
        import_then_fail()
    assert list(tmp_path.iterdir()) == []


def test_a_store_created_meanwhile_receives_the_rows(tmp_path: Path) -> None:
    """Another process created the store during the import: the rows are copied into it,
    with the replace rule, instead of being linked in place."""
    path = tmp_path / "s.duckdb"
    with StoreImport(path) as imp:
        imp.add(_frame(0, 10, r_iops=100.0))
        with Store.open(path) as other:  # the other process
            other.append(SampleFrame.concat([_frame(5, 10, r_iops=1.0),
                                             _frame(0, 3, host="h2")]))
        imp.commit()
    with Store.open(path, read_only=True) as st:
        got = st.read().df
    assert got.height == 10 * 2 + 5 * 2 + 3 * 2  # seconds 5-9 of db01 replaced
    kept = got.filter((pl.col("host") == "db01") & (pl.col("r_iops") < 100.0))
    assert kept["ts"].min() == T0 + timedelta(seconds=10)  # the other's rows from second 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.duckdb"]


def test_an_existing_store_gets_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with _seeded(path):
        pass
    with StoreImport(path) as imp:
        for b in _batches():
            imp.add(b)
        imp.commit()
    with Store.open(path, read_only=True) as st:
        assert st.count() == (10 + 70) * 2 + (70 + 5) * 2


def test_copying_a_store_replaces_wait_events_by_key(tmp_path: Path) -> None:
    """append_store copies the other store's wait events with the same NULL-safe key rule as
    append_waits: a copied event replaces the stored one, it is not added twice."""
    from iogauge.model.waitevents import WaitEventFrame

    def waits(avg_ms: float) -> WaitEventFrame:
        return WaitEventFrame(pl.DataFrame({
            "source": ["awr"], "host": ["db01"], "db_name": ["ORCL"], "instance": [None],
            "ts": [T0], "interval_s": [3600.0], "section": ["foreground wait events"],
            "event": ["db file sequential read"], "waits": [1000.0],
            "time_waited_s": [avg_ms], "avg_wait_ms": [avg_ms]}))

    src, dst = tmp_path / "src.duckdb", tmp_path / "dst.duckdb"
    with Store.open(src) as st:
        st.append(_frame(0, 3))
        st.append_waits(waits(7.5))
    with Store.open(dst) as st:
        st.append_waits(waits(11.1))
        assert st.append_store(src, replace=True) == 3 * 2
        back = st.read_waits().df
    assert back["avg_wait_ms"].to_list() == [7.5]


def test_a_later_file_replaces_an_earlier_files_rows_with_the_same_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """next_source(): the rows of an import of several files are those of importing the
    files one after the other -- a later file's row replaces an earlier file's (and a stored
    one) with the same key; rows repeating a key within one file are all kept."""
    files = [[_frame(0, 7), _frame(7, 30, r_iops=500.0)],  # seconds 0-36
             [_frame(30, 15, r_iops=900.0), _frame(40, 5, r_iops=700.0)],  # 30-44, 40-44 twice
             [_frame(60, 5)]]  # no key in common
    with _seeded(tmp_path / "seq.duckdb") as seq:
        for f in files:
            seq.append(SampleFrame.concat(f), replace=True)
        expected = seq.read().df.sort(["host", "device", "ts", "r_iops"])
    monkeypatch.setattr(bulk_module, "BULK_SLICE_ROWS", 7)
    with _seeded(tmp_path / "one.duckdb") as one:
        with one.bulk_append(replace=True) as bulk:
            for f in files:
                bulk.next_source()
                for b in f:
                    bulk.add(b)
            assert bulk.commit() == (37 + 20 + 5) * 2
            # seconds 30-36 of file 1 (7 seconds, two disks) gave way to file 2's
            assert bulk.replaced_earlier == 7 * 2
        got = one.read().df.sort(["host", "device", "ts", "r_iops"])
    assert got.equals(expected)
    db01 = got.filter(pl.col("host") == "db01")
    assert db01.filter(pl.col("r_iops").is_between(530.0, 536.0)).is_empty()  # replaced
    assert db01.filter(pl.col("ts") == T0 + timedelta(seconds=42)).height == 4  # kept twice


def test_an_import_of_a_file_and_its_copy_stores_the_rows_once(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    with StoreImport(path) as imp:
        for _copy in range(2):
            imp.next_source()
            imp.add(_frame(0, 10))
        assert imp.replaced_earlier == 10 * 2
        assert imp.commit() == 10 * 2
    with Store.open(path, read_only=True) as st:
        assert st.count() == 10 * 2


def test_latest_waits_keeps_a_key_from_the_last_file_that_has_it() -> None:
    from iogauge.model.waitevents import WaitEventFrame
    from iogauge.store.duckdb_store import latest_waits

    def waits(events: list[str], avg_ms: float) -> WaitEventFrame:
        n = len(events)
        return WaitEventFrame(pl.DataFrame({
            "source": ["awr"] * n, "host": ["db01"] * n, "db_name": ["ORCL"] * n,
            "instance": [None] * n, "ts": [T0] * n, "interval_s": [3600.0] * n,
            "section": ["foreground wait events"] * n, "event": events,
            "waits": [1000.0] * n, "time_waited_s": [avg_ms] * n,
            "avg_wait_ms": [avg_ms] * n}))

    first = waits(["db file sequential read", "log file sync", "log file sync"], 1.0)
    second = waits(["log file sync"], 2.0)  # instance NULL in both: the same key
    frame, dropped = latest_waits([first, WaitEventFrame.empty(), second])
    assert dropped == [0, 0, 2]  # the third file's row replaced the first file's two
    got = sorted(zip(frame.df["event"].to_list(), frame.df["avg_wait_ms"].to_list(),
                     strict=True))
    assert got == [("db file sequential read", 1.0), ("log file sync", 2.0)]
    # One file: every row kept, duplicates within it too.
    frame, dropped = latest_waits([first])
    assert len(frame) == 3
    assert dropped == [0]
