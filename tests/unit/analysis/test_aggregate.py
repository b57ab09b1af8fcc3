"""analysis.aggregate: parents synthesized from their parts, and dm/md members.

Golden values come from the fixtures (RMF [Yuge], AWR 19c, perfmon) or are computed by
hand in the comments from the rows written here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from iogauge.analysis.aggregate import add_aggregates, members
from iogauge.analysis.context import AnalysisContext
from iogauge.importers.registry import import_file
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

# DASD report of seed000_before_1rank.txt: (DEVICE ACTIVITY RATE, AVG RESP TIME, % DEV UTIL)
# of the ten volumes on RANK:0000@ABCD1 (DB2D01-08, DB2L01, DB2W01), both intervals.
VOLS_1001 = [(1294.064, 1.49, 21.76), (1273.945, 1.50, 21.58), (1254.012, 1.51, 21.40),
             (1244.061, 1.49, 20.92), (1234.110, 1.50, 20.90), (1224.159, 1.51, 20.89),
             (1214.208, 1.49, 20.41), (1214.208, 1.50, 20.57), (33.333, 0.42, 0.25),
             (0.500, 0.38, 0.00)]
VOLS_1002 = [(1283.121, 1.51, 21.81), (1263.188, 1.52, 21.63), (1243.441, 1.53, 21.45),
             (1233.583, 1.51, 20.97), (1223.710, 1.52, 20.96), (1213.836, 1.53, 20.94),
             (1203.978, 1.51, 20.47), (1203.978, 1.52, 20.62), (33.333, 0.42, 0.25),
             (0.500, 0.38, 0.00)]


def _rows(**cols: Any) -> list[dict[str, Any]]:
    n = max(len(v) for v in cols.values() if isinstance(v, list))
    return [{k: (v[i] if isinstance(v, list) else v) for k, v in cols.items()}
            for i in range(n)]


def _frame(records: list[dict[str, Any]]) -> pl.DataFrame:
    base = {"source": "iostat", "host": "h1", "interval_s": 60.0}
    return SampleFrame.from_records([{**base, **r} for r in records]).df


def _rmf_without_rank() -> pl.DataFrame:
    df = import_file(FIX / "rmf" / "seed000_before_1rank.txt").frame.df
    return df.filter(pl.col("device_kind") != "rank")


def test_rank_synthesized_from_rmf_volumes_golden_sums() -> None:
    df = _rmf_without_rank()
    out, notes = add_aggregates(df)
    rank = out.filter(pl.col("device") == "RANK:0000@ABCD1").sort("ts")
    assert rank.height == 2
    assert rank["device_kind"].to_list() == ["rank", "rank"]
    assert rank["source"].to_list() == ["rmf", "rmf"]
    assert rank["parent"].null_count() == 2
    assert rank["interval_s"].to_list() == [60.0, 60.0]
    for row, vols in zip(rank.iter_rows(named=True), (VOLS_1001, VOLS_1002), strict=True):
        rate = sum(v[0] for v in vols)
        # sums of the DASD activity rates: 9986.600 and 9902.668 -- exactly the LCU 0040
        # summary lines of the report, whose volumes are the same ten
        assert row["iops"] == pytest.approx(rate, abs=1e-9)
        # response: I/O-weighted mean of the volumes' AVG RESP TIME
        assert row["await_ms"] == pytest.approx(sum(v[0] * v[1] for v in vols) / rate)
        # busy: the busiest volume, not the sum (DB2D01 both times)
        assert row["util_pct"] == max(v[2] for v in vols)
    assert rank["iops"].to_list() == pytest.approx([9986.6, 9902.668])
    # 1.49506... and 1.51496...: the LCU line rounds them to 1.50 and 1.51
    assert rank["await_ms"].to_list() == pytest.approx([1.4950633, 1.5149639], abs=1e-6)
    assert rank["util_pct"].to_list() == [21.76, 21.81]
    # DISC: the volumes' AVG DISC TIME weighted by their rates, over 9986.6 I/O per s
    disc = (sum(v[0] * d for v, d in zip(VOLS_1001, (.600, .610, .620, .600, .610, .620,
                                                       .600, .610, .000, .020), strict=True))
            / 9986.6)
    assert rank["disc_ms"][0] == pytest.approx(disc)
    assert rank["disc_ms"][0] == pytest.approx(0.6066585, abs=1e-6)
    # cache hit: eight volumes at 99.8 %, DB2L01 and DB2W01 at 100 % (I/O-weighted)
    hit = (sum(v[0] for v in VOLS_1001[:8]) * 99.8 + 33.833 * 100.0) / 9986.6
    assert rank["cache_hit_pct"][0] == pytest.approx(hit)
    # only DB2D01 has the cache device page (r_iops/w_iops): a partial sum would present
    # one volume's reads as the rank's, so the rank's split is null (not measured)
    assert rank["r_iops"].null_count() == 2
    assert rank["w_iops"].null_count() == 2
    assert notes == [
        ("rank RANK:0000@ABCD1 aggregated from 10 volumes (the source did not report the "
        "rank itself)"),
        ("a rank or pool built from its volumes carries their front-end I/O (cache hits "
        "included), not the back-end operations of the ESS rank report"),
    ]
    # the input rows are kept unchanged, synthesized rows appended
    assert out.height == df.height + 2
    assert out.head(df.height).equals(df)


def test_parent_present_is_kept_as_is() -> None:
    df = import_file(FIX / "rmf" / "seed000_before_1rank.txt").frame.df
    out, notes = add_aggregates(df)
    assert notes == []
    assert out.equals(df)
    # the reported rank keeps its own ESS figures (203.8M + 238.3M bytes/s)
    rank = out.filter(pl.col("device") == "RANK:0000@ABCD1").sort("ts")
    assert rank["r_kBps"][0] == pytest.approx(203.8 * 1024)
    assert rank["w_kBps"][0] == pytest.approx(238.3 * 1024)


def test_partitions_to_disk_hand_computed() -> None:
    t1, t2 = T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)
    recs = [
        # sda1 and sda2 at t1
        {"device": "sda1", "device_kind": "partition", "parent": "sda", "ts": t1,
         "r_iops": 100.0, "w_iops": 50.0, "r_kBps": 400.0, "w_kBps": 800.0,
         "r_await_ms": 2.0, "w_await_ms": 10.0, "await_ms": 14.0 / 3, "util_pct": 60.0,
         "aqu_sz": 1.0, "r_merged_ps": 10.0, "w_merged_ps": 0.0, "areq_kB": 8.0,
         "cpu_user_pct": 12.5, "cpu_iowait_pct": 30.0},
        {"device": "sda2", "device_kind": "partition", "parent": "sda", "ts": t1,
         "r_iops": 300.0, "w_iops": 0.0, "r_kBps": 2400.0, "w_kBps": 0.0,
         "r_await_ms": 4.0, "w_await_ms": 0.0, "await_ms": 4.0, "util_pct": 70.0,
         "aqu_sz": 1.5, "r_merged_ps": 30.0, "w_merged_ps": 0.0, "areq_kB": 8.0,
         "cpu_user_pct": 12.5, "cpu_iowait_pct": 30.0},
        # t2: both idle (sysstat prints 0.00 await), sda2 without a write rate
        {"device": "sda1", "device_kind": "partition", "parent": "sda", "ts": t2,
         "r_iops": 0.0, "w_iops": 0.0, "r_kBps": 0.0, "w_kBps": 0.0, "r_await_ms": 0.0,
         "w_await_ms": 0.0, "util_pct": 0.0, "aqu_sz": 0.0, "r_merged_ps": 0.0},
        {"device": "sda2", "device_kind": "partition", "parent": "sda", "ts": t2,
         "r_iops": 0.0, "w_iops": 0.0, "r_kBps": 0.0, "r_await_ms": 0.0,
         "w_await_ms": 0.0, "util_pct": 0.0, "aqu_sz": 0.0, "r_merged_ps": 0.0},
        # a since-boot row is never a child
        {"device": "sda1", "device_kind": "partition", "parent": "sda", "ts": T0,
         "r_iops": 5.0, "w_iops": 5.0, "since_boot": True},
    ]
    out, notes = add_aggregates(_frame(recs))
    disk = out.filter(pl.col("device") == "sda").sort("ts")
    assert disk["ts"].to_list() == [t1, t2]
    a, b = disk.row(0, named=True), disk.row(1, named=True)
    assert a["device_kind"] == "disk"
    assert (a["r_iops"], a["w_iops"], a["r_kBps"], a["w_kBps"]) == (400.0, 50.0, 2800.0, 800.0)
    assert a["r_await_ms"] == pytest.approx(3.5)  # (100*2 + 300*4) / 400
    assert a["w_await_ms"] == pytest.approx(10.0)  # (50*10 + 0*0) / 50
    assert a["await_ms"] == pytest.approx(1900 / 450)  # (150*14/3 + 300*4) / 450 = 4.22
    assert a["areq_kB"] == pytest.approx(8.0)
    assert a["util_pct"] == 70.0  # max, not 130
    assert a["aqu_sz"] == pytest.approx(2.5)  # requests in flight add up
    assert a["r_merged_ps"] == 40.0
    assert a["r_rqm_pct"] == pytest.approx(100.0 * 40 / 440)  # merged / (done + merged)
    assert a["w_rqm_pct"] == 0.0  # 0 / 0: sysstat prints 0.00
    assert (a["cpu_user_pct"], a["cpu_iowait_pct"]) == (12.5, 30.0)
    # idle interval: 0.00 await as sysstat prints it, not null, not NaN
    assert (b["r_await_ms"], b["r_iops"], b["util_pct"]) == (0.0, 0.0, 0.0)
    # sda2 did not report its write rate at t2: the disk's is unknown, not sda1's 0
    assert b["w_kBps"] is None
    assert b["r_kBps"] == 0.0
    assert notes == [("disk sda aggregated from 2 partitions (the source did not report the "
                     "disk itself)"),
                     ("%util of a disk built from its partitions is its busiest partition's: "
                     "a lower bound")]
    # the result is a valid SampleFrame and the context links children to the new parent
    SampleFrame(out)
    ctx = AnalysisContext.build(out)
    assert sorted(d.key for d in ctx.children("sda")) == ["sda1", "sda2"]


def test_logical_disks_to_physical_disk_perfmon() -> None:
    df = import_file(FIX / "perfmon" / "typeperf-utf8-standard-ssd-hdd.csv").frame.df
    logical = df.filter(pl.col("device_kind") == "logical_disk")
    out, notes = add_aggregates(df.filter(pl.col("device_kind") != "physical_disk"))
    phys = out.filter(pl.col("device_kind") == "physical_disk")
    assert sorted(phys["device"].unique().to_list()) == ["1 S:", "2 H:"]
    # one LogicalDisk per PhysicalDisk here: the PhysicalDisk carries exactly its figures
    s = logical.filter(pl.col("device") == "S:").sort("ts")
    p = phys.filter(pl.col("device") == "1 S:").sort("ts")
    for col in ("iops", "r_iops", "w_iops", "r_kBps", "await_ms", "r_await_ms", "util_pct",
                "aqu_sz", "split_iops"):
        assert p[col].to_list() == pytest.approx(s[col].to_list(), nan_ok=False), col
    assert notes[:2] == [
        ("PhysicalDisk 1 S: aggregated from 1 LogicalDisk (the source did not report the "
        "PhysicalDisk itself)"),
        ("PhysicalDisk 2 H: aggregated from 1 LogicalDisk (the source did not report the "
        "PhysicalDisk itself)"),
    ]


def test_datafiles_to_tablespaces_awr19c() -> None:
    df = import_file(FIX / "awr" / "awr_19c_config5-2-1_ssd_cache1024m.txt").frame.df
    out, notes = add_aggregates(df)
    ts = out.filter(pl.col("device_kind") == "tablespace")
    assert sorted(ts["device"].to_list()) == ["SYSAUX", "SYSTEM", "UNDOTBS1", "USER_DATA"]
    user = ts.filter(pl.col("device") == "USER_DATA").row(0, named=True)
    # File IO Stats line of /ssd/oradata/ORCL/user_data01.dbf
    assert (user["r_iops"], user["r_await_ms"], user["r_areq_kB"]) == (335.0, 4.9, 121.6)
    assert user["source"] == "awr"
    assert len(notes) == 4


def test_datafiles_weighted_by_reads() -> None:
    recs = [
        {"source": "statspack", "device": "/u01/a.dbf", "device_kind": "datafile",
         "parent": "DATA", "ts": T0, "r_iops": 30.0, "w_iops": 10.0, "r_await_ms": 10.0,
         "r_areq_kB": 8.0},
        {"source": "statspack", "device": "/u02/b.dbf", "device_kind": "datafile",
         "parent": "DATA", "ts": T0, "r_iops": 10.0, "w_iops": 30.0, "r_await_ms": 2.0,
         "r_areq_kB": 64.0},
    ]
    out, _ = add_aggregates(_frame(recs))
    tsp = out.filter(pl.col("device") == "DATA").row(0, named=True)
    assert tsp["device_kind"] == "tablespace"
    assert (tsp["r_iops"], tsp["w_iops"]) == (40.0, 40.0)
    assert tsp["r_await_ms"] == pytest.approx(8.0)  # (30*10 + 10*2) / 40
    assert tsp["r_areq_kB"] == pytest.approx(22.0)  # (30*8 + 10*64) / 40
    assert tsp["source"] == "statspack"


def test_dm_md_not_synthesized_and_empty_frame() -> None:
    recs = [{"device": "dm-0", "device_kind": "dm", "ts": T0, "r_iops": 5.0, "w_iops": 1.0}]
    df = _frame(recs)
    out, notes = add_aggregates(df)
    assert out.equals(df)
    assert notes == []
    empty = SampleFrame.empty().df
    assert add_aggregates(empty) == (empty, [])


def test_many_parents_summarised_in_one_note() -> None:
    recs = [{"device": f"sd{c}1", "device_kind": "partition", "parent": f"sd{c}", "ts": T0,
             "r_iops": 1.0, "w_iops": 0.0} for c in "abcdefghijkl"]  # 12 disks
    out, notes = add_aggregates(_frame(recs))
    assert out.filter(pl.col("device_kind") == "disk").height == 12
    assert notes[0].startswith("12 disks aggregated from 12 partitions (the source did not "
                               "report them): sda, sdb, sdc,")


def test_members_follow_dm_md_chains() -> None:
    infos = {
        "sda": DeviceInfo("sda", "disk"), "sda2": DeviceInfo("sda2", "partition", parent="sda"),
        "sdb": DeviceInfo("sdb", "disk"), "sdb1": DeviceInfo("sdb1", "partition", parent="sdb"),
        "sdc": DeviceInfo("sdc", "disk"), "sdd": DeviceInfo("sdd", "disk"),
        # LVM volume over two partitions
        "dm-0": DeviceInfo("dm-0", "dm", slaves=("sda2", "sdb1"), dm_name="vg0-root"),
        # RAID1 of two whole disks, an LVM volume on it, dm-crypt on that
        "md0": DeviceInfo("md0", "md", slaves=("sdc", "sdd"), md_level="raid1"),
        "dm-1": DeviceInfo("dm-1", "dm", slaves=("md0",)),
        "dm-2": DeviceInfo("dm-2", "dm", slaves=("dm-1",)),
        # a slave without metadata is kept by name; a cycle is cut
        "dm-3": DeviceInfo("dm-3", "dm", slaves=("nvme9n1", "dm-4")),
        "dm-4": DeviceInfo("dm-4", "dm", slaves=("dm-3", "sdc")),
    }
    assert members(infos) == {
        "dm-0": ["sda", "sdb"], "md0": ["sdc", "sdd"], "dm-1": ["sdc", "sdd"],
        "dm-2": ["sdc", "sdd"], "dm-3": ["nvme9n1", "sdc"], "dm-4": ["nvme9n1", "sdc"],
    }


def test_weighted_mean_null_when_a_child_lacks_value_or_weight() -> None:
    recs = [
        {"device": "sdx1", "device_kind": "partition", "parent": "sdx", "ts": T0,
         "r_iops": 10.0, "w_iops": 0.0, "r_await_ms": 4.0, "await_ms": 4.0},
        # no read latency reported for sdx2: the disk's read latency is unknown
        {"device": "sdx2", "device_kind": "partition", "parent": "sdx", "ts": T0,
         "r_iops": 30.0, "w_iops": 10.0, "await_ms": 2.0},
    ]
    out, _ = add_aggregates(_frame(recs))
    disk = out.filter(pl.col("device") == "sdx").row(0, named=True)
    assert disk["r_await_ms"] is None
    # await is known for both, weighted by reads + writes: (10*4 + 40*2) / 50
    assert disk["await_ms"] == pytest.approx(2.4)
    assert disk["r_iops"] == 40.0
