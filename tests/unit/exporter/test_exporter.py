"""The exporter through its public parts: a collector over a procfs tree written step by step
(a disk whose %util follows [Oe] §3's shape: linear in IOPS up to a knee at 80 % busy, then
bending to a plateau at 100 %), the sliding window, the judgement, the metric text a scrape
or the textfile gets, and the guarantee's figures from a real decision store."""

from __future__ import annotations

import socket
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from iogauge.analysis.service_model import ServiceModel
from iogauge.cli.main import app
from iogauge.collector.linux import LinuxCollector, frame_from_results
from iogauge.exporter.guarantee_figures import read_latest
from iogauge.exporter.judgement import VERDICT_LABELS, Judgement
from iogauge.exporter.metrics import ALL_METRICS, SERVICE_MODELS
from iogauge.exporter.service import (
    TEXTFILE_NAME,
    Exporter,
    ExporterOptions,
    ListenError,
    SampleWindow,
    parse_listen,
    serve_http,
)
from iogauge.model.guaranteeframe import GuaranteeFrame
from iogauge.store.duckdb_store import Store

#: [Oe] §3's shape: 5 ms busy per I/O (0.5 %/IOPS) up to the knee at 80 % busy (160 IOPS),
#: then IOPS grow 4x slower per % busy until the plateau at 100 % busy (170 IOPS).
BUSY_PCT_PER_IOPS = 0.5
KNEE_UTIL_PCT = 80.0
PLATEAU_IOPS = 170.0


def _util_pct(iops: float) -> float:
    knee_iops = KNEE_UTIL_PCT / BUSY_PCT_PER_IOPS
    if iops <= knee_iops:
        return iops * BUSY_PCT_PER_IOPS
    return min(100.0, KNEE_UTIL_PCT + (iops - knee_iops) * 2.0)


#: Seconds between samples (the exporter's default interval).
STEP_S = 5.0
#: IOPS of each sample: a ramp through the linear part, past the knee, then saturated for
#: longer than one 60 s analysis window (the headroom is measured from the busiest one).
LOADS = ([10.0 * i for i in range(1, 16)] + [154.0, 158.0, 162.0, 164.0, 166.0, 168.0, 169.0]
         + [PLATEAU_IOPS] * 14)


class Kernel:
    """Writes /proc/diskstats for sda (the loaded disk) and sdb (idle but used since boot),
    and gives the collector its clocks: STEP_S seconds per step."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.t = 1000.0
        self.ios = 0
        self.ticks_ms = 0
        self.write()

    def write(self) -> None:
        sda = (f"   8       0 sda {self.ios} 0 {self.ios * 8} {self.ios * 5} 0 0 0 0 0 "
               f"{self.ticks_ms} {self.ios * 5} 0 0 0 0 0 0")
        sdb = "   8      16 sdb 100 0 800 50 0 0 0 0 0 60 50 0 0 0 0 0 0"
        (self.root / "diskstats").write_text(f"{sda}\n{sdb}\n")

    def advance(self, iops: float) -> None:
        self.t += STEP_S
        self.ios += round(iops * STEP_S)
        self.ticks_ms += round(_util_pct(iops) * 10 * STEP_S)  # % of the step in ms
        self.write()


def _exporter(tmp_path: Path, window_s: float, **kw: object) -> tuple[Exporter, Kernel]:
    proc = tmp_path / "proc"
    proc.mkdir()
    kernel = Kernel(proc)
    col = LinuxCollector(proc, tmp_path / "sys", monotonic=lambda: kernel.t,
                         wall=lambda: kernel.t + 1.7e9)
    opts = ExporterOptions(interval_s=STEP_S, window_s=window_s,
                           media={"sda": ServiceModel.ONE_AT_A_TIME}, **kw)  # type: ignore[arg-type]
    exp = Exporter(SampleWindow(col, window_s), opts, say=lambda _m: None)
    exp.window.prime()
    return exp, kernel


def _run(exp: Exporter, kernel: Kernel, loads: list[float]) -> Judgement:
    j = None
    for x in loads:
        kernel.advance(x)
        j = exp.step()
    assert j is not None
    return j


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            assert s.timestamp is None, f"{s.name} carries a timestamp"
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_knee_plateau_and_headroom_in_base_units(tmp_path: Path) -> None:
    exp, kernel = _exporter(tmp_path, window_s=900.0, textfile_dir=tmp_path)
    j = _run(exp, kernel, LOADS)
    assert j.samples == len(LOADS)
    sda = next(d for d in j.devices if d.device == "sda")
    assert sda.service_model == "one-at-a-time"
    assert sda.busy_seconds_per_io == pytest.approx(BUSY_PCT_PER_IOPS / 100, rel=0.03)
    assert sda.knee_util_ratio == pytest.approx(KNEE_UTIL_PCT / 100, abs=0.05)
    assert sda.max_iops == pytest.approx(PLATEAU_IOPS, rel=0.02)
    assert sda.verdict in ("bottleneck", "near_limit")
    assert sda.headroom_ratio is not None and sda.headroom_ratio < 0.1

    got = _samples((tmp_path / TEXTFILE_NAME).read_text())
    assert {name for name, _l in got} <= set(ALL_METRICS)
    verdict = {dict(lab)["verdict"]: v for (n, lab), v in got.items()
               if n == "iogauge_device_verdict" and dict(lab)["device"] == "sda"}
    assert set(verdict) == set(VERDICT_LABELS) and verdict[sda.verdict] == 1.0
    assert sum(verdict.values()) == 1.0
    models = {dict(lab)["model"]: v for (n, lab), v in got.items()
              if n == "iogauge_device_service_model" and dict(lab)["device"] == "sda"}
    assert models == {m: float(m == "one-at-a-time") for m in SERVICE_MODELS}
    dev = (("device", "sda"),)
    assert got[("iogauge_device_knee_util_ratio", dev)] == sda.knee_util_ratio
    assert got[("iogauge_device_busy_seconds_per_io", dev)] == sda.busy_seconds_per_io
    assert got[("iogauge_device_headroom_iops", dev)] == sda.headroom_iops
    # The idle disk: a verdict, no capacity figure made up.
    idle = {dict(lab)["verdict"]: v for (n, lab), v in got.items()
            if n == "iogauge_device_verdict" and dict(lab)["device"] == "sdb"}
    assert idle["idle"] == 1.0
    assert ("iogauge_device_max_iops", (("device", "sdb"),)) not in got


def test_the_window_slides(tmp_path: Path) -> None:
    """Samples older than the window leave the judgement: after the saturated steps, ten
    light samples in a window of ten leave no plateau and no knee behind."""
    exp, kernel = _exporter(tmp_path, window_s=10 * STEP_S)
    heavy = _run(exp, kernel, LOADS)
    assert heavy.samples == 10
    assert next(d for d in heavy.devices if d.device == "sda").max_iops == pytest.approx(
        PLATEAU_IOPS, rel=0.02)
    light = _run(exp, kernel, [20.0, 30.0, 40.0, 50.0, 60.0] * 2)
    sda = next(d for d in light.devices if d.device == "sda")
    assert light.samples == 10
    assert sda.knee_util_ratio is None
    assert sda.verdict == "healthy"
    assert sda.current_iops is not None and sda.current_iops < 61


def test_judgements_are_spaced_by_judge_every(tmp_path: Path) -> None:
    """Samples go on between judgements; the published judgement stays the last one made."""
    exp, kernel = _exporter(tmp_path, window_s=900.0, judge_every_s=3600.0)
    first = _run(exp, kernel, LOADS[:1])
    again = _run(exp, kernel, LOADS[1:4])
    assert again is first and first.samples == 1
    assert exp.window.samples == 4


def test_http_serves_the_latest_judgement(tmp_path: Path) -> None:
    exp, kernel = _exporter(tmp_path, window_s=900.0)
    # Port 0 is refused by --listen's parser (a scrape config names a fixed port): take a
    # free one.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv, _thread = serve_http(f"127.0.0.1:{port}", lambda: exp.current)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            before = r.read().decode()
        assert "iogauge_device_verdict" not in before  # nothing judged yet: no made-up verdict
        assert "process_cpu_seconds_total" in before
        _run(exp, kernel, LOADS[:5])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            after = _samples(r.read().decode())
        assert after[("iogauge_exporter_window_samples", ())] == 5.0
        assert after[("iogauge_device_verdict", (("device", "sda"), ("verdict", "healthy")))] \
            == 1.0
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("text", ["9595", "localhost", "127.0.0.1:", "127.0.0.1:99999",
                                  "127.0.0.1:x"])
def test_listen_must_be_host_and_port(text: str) -> None:
    with pytest.raises(ListenError, match="HOST:PORT"):
        parse_listen(text)


def test_listen_forms() -> None:
    assert parse_listen("127.0.0.1:9595") == ("127.0.0.1", 9595)
    assert parse_listen("[::1]:9595") == ("::1", 9595)


def _decision(ts: datetime, **kw: object) -> dict[str, object]:
    row: dict[str, object] = {
        "run_id": "h-1-0", "host": "h", "device": "sdb", "ts": ts, "interval_s": 1.0,
        "policy": "paper", "actuator": "dry-run", "util_pct": 90.0, "r_iops": 150.0,
        "w_iops": 50.0, "iops": 200.0, "a_iops": 120.0, "a_floor_iops": 100.0,
        "b_iops": 80.0, "busy_per_iops": 0.45, "x_pct": 95.0, "b_riops_limit": 60,
        "b_wiops_limit": 20, "a_miss": False, "state": "compute", "reason": "r",
        "groups_json": "{}"}
    row.update(kw)
    return row


def test_guarantee_figures_from_its_store(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    db = tmp_path / "g.duckdb"
    with Store.open(db) as store:
        store.append_guarantee(GuaranteeFrame.from_records([
            _decision(now - timedelta(seconds=3), a_iops=90.0),
            _decision(now - timedelta(seconds=1), b_riops_limit=None, x_pct=87.0),
            _decision(now - timedelta(hours=1), device="sdc"),  # a stopped run: left out
        ]))
    (g,) = read_latest(db, now=now)
    assert (g.device, g.floor_iops, g.protected_iops, g.throttled_iops) == (
        "sdb", 100.0, 120.0, 80.0)
    assert g.read_limit_iops is None and g.write_limit_iops == 20.0
    assert g.target_busy_ratio == pytest.approx(0.87)
    assert read_latest(tmp_path / "absent.duckdb") == ()
    # stale after three of the controller's intervals, at least a minute
    assert read_latest(db, now=now + timedelta(seconds=62)) == ()
    with Store.open(db) as store:
        store.append_guarantee(GuaranteeFrame.from_records([
            _decision(now, device="sdd", interval_s=30.0)]))
    assert [g.device for g in read_latest(db, now=now + timedelta(seconds=85))] == ["sdd"]


def test_guarantee_figures_are_published(tmp_path: Path) -> None:
    db = tmp_path / "g.duckdb"
    with Store.open(db) as store:
        store.append_guarantee(GuaranteeFrame.from_records([_decision(datetime.now(UTC))]))
    exp, kernel = _exporter(tmp_path, window_s=900.0, guarantee_db=db, textfile_dir=tmp_path)
    _run(exp, kernel, LOADS[:3])
    got = _samples((tmp_path / TEXTFILE_NAME).read_text())
    dev = (("device", "sdb"),)
    assert got[("iogauge_guarantee_floor_iops", dev)] == 100.0
    assert got[("iogauge_guarantee_protected_iops", dev)] == 120.0
    assert got[("iogauge_guarantee_throttled_read_limit_iops", dev)] == 60.0
    assert got[("iogauge_guarantee_target_busy_ratio", dev)] == pytest.approx(0.95)


FIXTURE_TREE = Path(__file__).resolve().parents[2] / "fixtures" / "proc_trees" / "steady_17"


def test_cli_textfile_only(tmp_path: Path) -> None:
    step = sorted((FIXTURE_TREE / "steps").iterdir())[0]
    res = CliRunner().invoke(app, [
        "exporter", "--no-http", "--textfile", str(tmp_path), "--interval", "0.1",
        "--duration", "2", "--judge-every", "0", "--guarantee-db", str(tmp_path / "none.duckdb"),
        "--procfs-root", str(step), "--sysfs-root", str(FIXTURE_TREE / "sys")])
    assert res.exit_code == 0, res.output
    got = _samples((tmp_path / TEXTFILE_NAME).read_text())
    assert got[("iogauge_exporter_window_samples", ())] >= 2
    assert not list(tmp_path.glob(f"{TEXTFILE_NAME}.*"))  # no temporary file left


@pytest.mark.parametrize(("args", "message"), [
    (["--no-http"], "give --textfile"),
    (["--textfile", "/nonexistent/dir"], "not a directory"),
    (["--listen", "9595"], "HOST:PORT"),
])
def test_cli_refuses_bad_options(args: list[str], message: str) -> None:
    res = CliRunner().invoke(app, ["exporter", *args, "--duration", "0.2"],
                             terminal_width=200)
    assert res.exit_code == 2
    assert message in res.output


def test_cli_judges_what_record_wrote_to_a_store(tmp_path: Path) -> None:
    """`--db`: the samples of this host in the store over the window, no sampling here."""
    proc = tmp_path / "proc"
    proc.mkdir()
    kernel = Kernel(proc)
    now = time.time()
    start = kernel.t
    # the last sample ends now: the whole ramp lies inside the 15-minute window
    col = LinuxCollector(proc, tmp_path / "sys", monotonic=lambda: kernel.t,
                         wall=lambda: now - (len(LOADS) * STEP_S) + (kernel.t - start))
    col.prime()
    results = []
    for x in LOADS:
        kernel.advance(x)
        results.append(col.sample())
    db = tmp_path / "rec.duckdb"
    with Store.open(db) as store:
        store.append(frame_from_results(results, host=socket.gethostname()))
        store.append(frame_from_results(results, host="another-host"))  # not ours: left out
    out = tmp_path / "tf"
    out.mkdir()
    res = CliRunner().invoke(app, [
        "exporter", "--db", str(db), "--no-http", "--textfile", str(out), "--interval", "0.1",
        "--duration", "0.2", "--judge-every", "0", "--media", "sda=one-at-a-time",
        "--guarantee-db", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 0, res.output
    got = _samples((out / TEXTFILE_NAME).read_text())
    assert got[("iogauge_exporter_window_samples", ())] == len(LOADS)
    assert got[("iogauge_device_max_iops", (("device", "sda"),))] == pytest.approx(
        PLATEAU_IOPS, rel=0.02)
    assert got[("iogauge_device_knee_util_ratio", (("device", "sda"),))] == pytest.approx(
        KNEE_UTIL_PCT / 100, abs=0.05)


def test_cli_db_must_exist(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["exporter", "--db", str(tmp_path / "absent.duckdb"),
                                   "--no-http", "--textfile", str(tmp_path), "--duration",
                                   "0.2"], terminal_width=200)
    assert res.exit_code == 2
    assert "no such store" in res.output
