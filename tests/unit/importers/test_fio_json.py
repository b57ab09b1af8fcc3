"""fio: the real fio 2.1.4, 2.17 and 3.1 JSON samples (tests/fixtures/NOTICE), golden values
taken from the files, plus the document-level cases (status-interval reports, leading fio
errors, clones, client/server output) and refusals."""

from __future__ import annotations

import io
import json
import math
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from iogauge.errors import InputFormatError
from iogauge.importers import fio_json
from iogauge.importers.base import Source
from iogauge.importers.io import HEAD_BYTES
from iogauge.importers.registry import detect, import_file
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "fio"
V214 = FIX / "pkb-fio-2.1.4.json"
V217 = FIX / "pkb-fio-2.17-gce-pd.json"
V31_QD1 = FIX / "fio-plot-HPDL380G8-H420i-Crucial-MX200_randread-1-1.json"
V31_QD16 = FIX / "fio-plot-HPDL380G8-H420i-Crucial-MX200_randread-16-1.json"
V31_RAID0 = FIX / "fio-plot-HPDL380G8-H420i-Crucial-MX200x3_RAID0_randread-1-1.json"
REL = 1e-12


def parse(path: Path, data: bytes | None = None, **kw: Any) -> tuple[pl.DataFrame, Source]:
    src = Source(path=str(path), **kw)
    frame = fio_json.parse(path.read_bytes() if data is None else data, src)
    return frame.df, src


def row(df: pl.DataFrame, device: str) -> dict[str, Any]:
    hit = df.filter(pl.col("device") == device)
    assert hit.height == 1, (device, df["device"].to_list())
    return hit.to_dicts()[0]


def close(got: object, want: float) -> bool:
    return isinstance(got, float) and math.isclose(got, want, rel_tol=REL, abs_tol=1e-15)


# ---------------------------------------------------------------------------------------------
# sniffing
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(FIX.iterdir()), ids=lambda p: p.name)
def test_every_sample_is_detected_as_fio(path: Path) -> None:
    assert detect(path.read_bytes()[:HEAD_BYTES], str(path)) == "fio"


def test_sniff() -> None:
    assert fio_json.sniff('t2: you need to specify size=\n{\n  "fio version" : "fio-3.33",')
    assert not fio_json.sniff('{"sysstat": {"hosts": []}}')
    assert not fio_json.sniff('"fio version" without an object')
    assert not fio_json.sniff('"(PDH-CSV 4.0) (UTC)(0)","x"')


# ---------------------------------------------------------------------------------------------
# fio 3.1: clat_ns / lat_ns, percentiles, disk_util
# ---------------------------------------------------------------------------------------------
def test_fio31_job_row_golden() -> None:
    df, src = parse(V31_QD1)
    SampleFrame(df).validate()
    r = row(df, "fio:random-read")
    assert r["device_kind"] == "other"
    assert r["parent"] == "sdb"  # filename /dev/sdb, a disk fio measured
    assert r["ts"] == datetime.fromtimestamp(1564907970.022, tz=UTC)  # timestamp_ms
    assert r["interval_s"] == 60.001  # runtime 60001 ms
    assert close(r["r_iops"], 6614.073099)
    assert close(r["r_kBps"], 26456.0)  # bw (KiB/s); fio 3.1 has no bw_bytes
    assert close(r["r_await_ms"], 147792.395919 / 1e6)  # lat_ns mean (slat + clat)
    assert close(r["r_areq_kB"], 1625501696 / 1024 / 396851)  # 4.0 KiB
    assert close(r["r_lat_p50_ms"], 134144 / 1e6)
    assert close(r["r_lat_p95_ms"], 142336 / 1e6)
    assert close(r["r_lat_p99_ms"], 142336 / 1e6)
    assert close(r["r_lat_p999_ms"], 464896 / 1e6)
    # nothing written: zero rate and sysstat's 0.0 latency, no percentiles (no distribution)
    assert r["w_iops"] == 0.0 and r["w_await_ms"] == 0.0 and r["w_areq_kB"] == 0.0
    assert r["w_lat_p50_ms"] is None
    assert close(r["iops"], 6614.073099) and close(r["await_ms"], 147792.395919 / 1e6)
    assert any("disk_util rows cover the whole run" in n for n in src.notes)


def test_fio31_disk_util_row_golden() -> None:
    df, _ = parse(V31_QD1)
    d = row(df, "sdb")
    assert d["device_kind"] == "disk" and d["interval_s"] == 60.001
    assert close(d["r_iops"], 396018 / 60.001)
    assert close(d["r_await_ms"], 51744 / 396018)  # read_ticks / read_ios
    assert close(d["aqu_sz"], 51620 / 60001)  # in_queue ms / interval ms
    assert close(d["util_pct"], 86.082113)
    assert d["r_rqm_pct"] == 0.0 and d["w_await_ms"] == 0.0
    assert d["r_kBps"] is None  # fio 3.1 prints no sectors


def test_fio31_queue_depth_16() -> None:
    df, _ = parse(V31_QD16)
    r = row(df, "fio:random-read")
    assert close(r["r_iops"], 47422.542958)
    assert close(r["r_await_ms"], 336110.420137 / 1e6)
    d = row(df, "sdb")
    assert close(d["util_pct"], 99.873257)
    assert close(d["aqu_sz"], 833824 / 60001)  # ~13.9 requests in queue


def test_fio31_md_raid0_members() -> None:
    df, src = parse(V31_RAID0)
    assert sorted(df["device"].to_list()) == ["fio:random-read", "md0", "sdb", "sdc", "sdd"]
    assert row(df, "fio:random-read")["parent"] == "md0"
    md = row(df, "md0")
    assert md["device_kind"] == "md"
    assert close(md["r_iops"], 393586 / 60.001)
    # md does not account time: fio shows 0 ticks / in_queue / util -> not measured
    for col in ("r_await_ms", "await_ms", "aqu_sz", "util_pct"):
        assert md[col] is None
    sdc = row(df, "sdc")
    assert close(sdc["r_await_ms"], 17012 / 131980) and close(sdc["util_pct"], 28.142608)
    assert any("md0 is an md array" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# fio 2.17: microsecond clat, two stonewalled groups, global filename
# ---------------------------------------------------------------------------------------------
def test_fio217_groups_golden() -> None:
    df, src = parse(V217)
    SampleFrame(df).validate()
    read = row(df, "fio:rand_16k_read_100%-io-depth-1-num-jobs-2")
    write = row(df, "fio:rand_16k_write_100%-io-depth-1-num-jobs-2")
    end = datetime.fromtimestamp(1506559552.257, tz=UTC)
    assert read["ts"] == end and write["ts"] == end
    assert read["parent"] == write["parent"] == "/dev/disk/by-id/google-pkb-7fb0c9d8-0-data-0-0"
    assert read["interval_s"] == 10.003 and write["interval_s"] == 10.004
    assert close(read["r_iops"], 8086.673998) and close(read["r_kBps"], 129386.0)
    assert close(read["r_await_ms"], 245.531122 / 1e3)  # lat mean, microseconds in 2.x
    assert close(read["r_areq_kB"], 1294256 / 80891)  # io_bytes is KiB in fio 2.x: 16 KiB
    assert [read[f"r_lat_{p}_ms"] for p in ("p50", "p95", "p99", "p999")] == pytest.approx(
        [0.096, 1.288, 1.352, 1.896], rel=REL)
    assert close(write["w_iops"], 2457.017193) and close(write["w_kBps"], 39312.0)
    assert close(write["w_await_ms"], 810.977136 / 1e3)
    assert [write[f"w_lat_{p}_ms"] for p in ("p50", "p95", "p99", "p999")] == pytest.approx(
        [0.548, 2.192, 2.384, 5.728], rel=REL)
    assert close(write["await_ms"], 810.977136 / 1e3)  # weighted by total_ios (0 reads)
    assert df.filter(pl.col("device_kind") != "other").height == 0  # no disk_util in file
    assert any("2 job groups" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# fio 2.1.4: no timestamp, no total_ios
# ---------------------------------------------------------------------------------------------
def test_fio214_with_start() -> None:
    start = datetime(2014, 3, 1, 12, 0, 0, tzinfo=UTC)
    df, src = parse(V214, start=start)
    run_s = (5314 + 2788 + 5625 + 28540 + 28045) / 1000  # five groups, one after another
    assert set(df["ts"]) == {start + timedelta(seconds=run_s)}
    assert any("--start" in n for n in src.notes)
    w = row(df, "fio:sequential_write")
    assert w["interval_s"] == 5.314
    assert w["w_iops"] == 133.0 and w["w_kBps"] == 68118.0
    assert close(w["w_await_ms"], 478737.47 / 1e3)
    assert w["w_lat_p50_ms"] == pytest.approx(444.416, rel=REL)
    assert w["w_lat_p999_ms"] == pytest.approx(872.448, rel=REL)
    assert w["w_areq_kB"] is None  # fio 2.1 prints no total_ios
    assert close(w["await_ms"], 478737.47 / 1e3)  # only writes: exact without counts
    assert w["r_iops"] == 0.0 and w["r_lat_p50_ms"] is None
    par = row(df, "fio:random_read_test_parallel")
    assert close(par["r_await_ms"], 198058.86 / 1e3)
    disk = row(df, "sdb")
    assert disk["interval_s"] == pytest.approx(run_s, rel=REL)
    assert close(disk["r_iops"], 19464 / run_s) and close(disk["w_iops"], 10508 / run_s)
    assert close(disk["r_await_ms"], 2142508 / 19464)
    assert close(disk["w_await_ms"], 664704 / 10508)
    assert close(disk["await_ms"], (2142508 + 664704) / (19464 + 10508))
    assert close(disk["r_rqm_pct"], 1402 / (1402 + 19464) * 100)
    assert close(disk["aqu_sz"], 2813788 / (run_s * 1000))
    assert disk["util_pct"] == 97.54


def test_fio214_without_start_uses_file_time(tmp_path: Path) -> None:
    copy = tmp_path / "old.json"
    copy.write_bytes(V214.read_bytes())
    mtime = datetime(2015, 6, 1, 8, 30, 0, tzinfo=UTC).timestamp()
    os.utime(copy, (mtime, mtime))
    df, src = parse(copy)
    assert set(df["ts"]) == {datetime(2015, 6, 1, 8, 30, 0, tzinfo=UTC)}
    assert any("modification time" in n for n in src.notes)


# ---------------------------------------------------------------------------------------------
# document-level cases
# ---------------------------------------------------------------------------------------------
def _doc(jobs: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"fio version": "fio-3.33", "timestamp": 1700000000,
            "timestamp_ms": 1700000000500, "jobs": jobs, **top}


def _job(name: str, *, riops: float = 100.0, runtime: int = 2000, **extra: Any) -> dict[str, Any]:
    def direction(iops: float, rt: int) -> dict[str, Any]:
        n = int(iops * rt / 1000)
        return {"io_bytes": n * 8192, "io_kbytes": n * 8, "bw_bytes": int(iops * 8192),
                "bw": int(iops * 8), "iops": iops, "runtime": rt, "total_ios": n,
                "lat_ns": {"min": 1, "max": 9, "mean": 2_500_000.0 if n else 0.0},
                "clat_ns": {"mean": 2_000_000.0,
                            "percentile": {"50.000000": 1_900_000, "99.900000": 7_000_000}}
                if n else {"mean": 0.0}}
    return {"jobname": name, "groupid": 0, "error": 0, "read": direction(riops, runtime),
            "write": direction(0.0, 0), "trim": direction(0.0, 0), **extra}


def test_status_interval_reports_keep_the_last() -> None:
    first = _doc([_job("j", riops=50.0, runtime=1000)])
    last = _doc([_job("j", riops=100.0, runtime=3000)], timestamp_ms=1700000002500)
    data = (json.dumps(first, indent=1) + "\n" + json.dumps(last, indent=1) + "\n").encode()
    df, src = parse(Path("s.json"), data)
    r = row(df, "fio:j")
    assert r["r_iops"] == 100.0 and r["interval_s"] == 3.0
    assert r["ts"] == datetime.fromtimestamp(1700000002.5, tz=UTC)
    assert close(r["r_kBps"], 819200 / 1024) and close(r["r_areq_kB"], 8.0)
    assert r["r_lat_p95_ms"] is None  # not in this job's percentile_list
    assert close(r["r_lat_p999_ms"], 7.0)
    assert any("--status-interval" in n for n in src.notes)


def test_leading_fio_errors_and_clones() -> None:
    doc = _doc([_job("w"), _job("w", riops=200.0), _job("solo", error=5)])
    text = ("w: you need to specify size=\nfio: pid=0, err=22/file:filesetup.c:1155\n"
            + json.dumps(doc, indent=2))
    df, src = parse(Path("e.json"), text.encode())
    assert sorted(df["device"].to_list()) == ["fio:solo", "fio:w.0", "fio:w.1"]
    assert row(df, "fio:w.1")["r_iops"] == 200.0
    notes = " | ".join(src.notes)
    assert "text outside the JSON" in notes and "error 5" in notes


def test_client_server_hosts_and_aggregate_skipped() -> None:
    doc = {"fio version": "fio-3.33", "timestamp_ms": 1700000000000,
           "client_stats": [_job("a", hostname="node1"), _job("a", hostname="node2"),
                            _job("All clients")]}
    df, _ = parse(Path("c.json"), json.dumps(doc).encode())
    assert sorted(df["host"].to_list()) == ["node1", "node2"]


def test_job_without_runtime_and_refusals() -> None:
    doc = _doc([_job("idle", riops=0.0, runtime=0), _job("busy")])
    df, src = parse(Path("r.json"), json.dumps(doc).encode())
    assert df["device"].to_list() == ["fio:busy"]
    assert any("idle has no runtime" in n for n in src.notes)
    with pytest.raises(InputFormatError, match="no job with a runtime"):
        parse(Path("r.json"), json.dumps(_doc([_job("idle", riops=0.0, runtime=0)])).encode())
    with pytest.raises(InputFormatError, match="not valid JSON") as err:
        parse(Path("b.json"), b'{\n  "fio version": "fio-3.33",\n  "jobs": [,]\n}')
    assert err.value.line_no == 3
    with pytest.raises(InputFormatError, match='no "jobs"'):
        parse(Path("n.json"), b'{"fio version": "fio-3.33"}')
    with pytest.raises(InputFormatError, match="no JSON object"):
        parse(Path("t.json"), b"fio: engine libaio not loadable\n")


def test_import_file_detects_and_reads_all_samples() -> None:
    for path in sorted(FIX.iterdir()):
        res = import_file(path)
        assert res.format == "fio" and len(res.frame) > 0
        res.frame.validate()


# ---- read a piece at a time -----------------------------------------------------------------


def _status_reports(n: int) -> bytes:
    """``fio --status-interval`` output: ``n`` cumulative reports, a warning line between."""
    docs = [json.dumps(_doc([_job("j", riops=10.0 * (k + 1), runtime=1000 * (k + 1))],
                            timestamp_ms=1700000000000 + 1000 * k), indent=2)
            for k in range(n)]
    return ("fio: a warning\n" + "\njobs: 1 (f=1)\n".join(docs) + "\n").encode()


def _in_pieces(data: bytes, chunk: int) -> tuple[pl.DataFrame, Source]:
    src = Source(path="p.json")
    frames = list(fio_json.iter_parse(io.BytesIO(data), src, chunk_bytes=chunk))
    return SampleFrame.concat(frames).df, src


def test_pieces_keep_the_last_report() -> None:
    data = _status_reports(12)
    want, want_src = parse(Path("p.json"), data)
    assert row(want, "fio:j")["r_iops"] == 120.0
    for chunk in (1, 64, 1000, 1 << 20):
        got, src = _in_pieces(data, chunk)
        assert got.equals(want), chunk
        assert src.notes == want_src.notes, chunk
    assert any("12 reports in the file" in n for n in want_src.notes)
    assert any("text outside the JSON" in n for n in want_src.notes)


def test_a_malformed_report_in_the_middle_names_its_line_in_any_piece() -> None:
    data = _status_reports(5)
    text = data.decode()
    at = text.index('"jobname"', text.index("fio-3.33", len(text) // 2))
    bad = (text[:at] + '"jobname" "j",' + text[text.index(",", at) + 1:]).encode()
    line = text[:at].count("\n") + 1
    for chunk in (1, 300, 1 << 20):
        with pytest.raises(InputFormatError, match="not valid JSON") as err:
            _in_pieces(bad, chunk)
        assert err.value.line_no == line, chunk
    # the last report cut short: an error too (fio's final report is the one imported)
    with pytest.raises(InputFormatError, match="not valid JSON"):
        _in_pieces(data[:-40], 100)
