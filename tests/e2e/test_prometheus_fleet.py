"""A small synthetic fleet backfilled into a real Prometheus (promtool), read back by
`iogauge analyze/import/report --prometheus`: the planted devices rank on top, a scrape gap
gives null rows, a counter reset and a 32-bit millisecond wrap give no spike.

6 hosts x 4 devices x 3 h at 60 s (tests/helpers/synthetic_fleet.py); the same generator
at 1,000 hosts x 24 h is benchmarks/fleet_scale.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.promstack import PROMTOOL, Service, prometheus
from tests.helpers.synthetic_fleet import GAP_STEPS, Plant, host_name, write_fleet
from tests.helpers.system import iogauge_exe, require_tools

pytestmark = [pytest.mark.slow]

HOSTS = 6
STEPS = 180
PLANTS = (Plant(1, "sda", "saturation"), Plant(4, "sda", "knee"),
          Plant(2, "nvme0n1", "gap"), Plant(3, "sdb", "reset"), Plant(5, "sda", "wrap"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str, str]]:
    """Prometheus serving the backfilled fleet; (service, --from, --to)."""
    require_tools(PROMTOOL)
    work = tmp_path_factory.mktemp("fleet")
    # two hours back at least, on a block boundary: promtool writes 2-hour blocks
    start = (int(time.time()) // 7200 - 3) * 7200
    data = work / "tsdb"
    data.mkdir()
    for f in write_fleet(work / "om", HOSTS, start, STEPS, 60, PLANTS):
        subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(f),
                        str(data)], check=True, capture_output=True, timeout=120)
    with prometheus(work, data=data) as prom:
        yield (prom, datetime.fromtimestamp(start, UTC).isoformat(),
               datetime.fromtimestamp(start + STEPS * 60, UTC).isoformat())


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(iogauge_exe()), *args], capture_output=True, text=True,
                          timeout=300, check=False)


def _rows(fleet: tuple[Service, str, str], host: int, device: str) -> list[dict[str, Any]]:
    prom, a, b = fleet
    res = _run("import", "--prometheus", prom.url, "--match",
               f'instance="{host_name(host)}",device="{device}"', "--from", a, "--to", b,
               "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines()]


def test_planted_devices_rank_on_top(fleet: tuple[Service, str, str]) -> None:
    prom, a, b = fleet
    res = _run("analyze", "--prometheus", prom.url, "--from", a, "--to", b,
               "--target", "*=30", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    ranking = json.loads(res.stdout)["fleet"]["ranking"]
    assert len(ranking) == HOSTS * 4
    top = [(r["host"], r["device"]) for r in ranking[:2]]
    assert top == [(host_name(1), "sda"), (host_name(4), "sda")], ranking[:3]
    assert ranking[0]["verdict"] == "bottleneck"
    assert ranking[0]["over_target_s"] > 0
    assert all(r["verdict"] not in ("bottleneck", "near limit") for r in ranking[2:]), \
        [(r["host"], r["device"], r["verdict"]) for r in ranking[2:]]


def test_gap_gives_null_rows_not_invented_ones(fleet: tuple[Service, str, str]) -> None:
    rows = _rows(fleet, 2, "nvme0n1")
    nulls = [r for r in rows if "r_iops" not in r]
    # the missing samples' windows and the first window after them (no sample before it)
    assert len(nulls) == GAP_STEPS + 1
    assert all("await_ms" not in r and "inflight" not in r for r in nulls)
    assert max(r["r_iops"] for r in rows if "r_iops" in r) < 900 * 1.15


def test_reset_and_wrap_give_no_spike(fleet: tuple[Service, str, str]) -> None:
    reset = _rows(fleet, 3, "sdb")
    assert sum(1 for r in reset if "r_iops" not in r) == 1  # the window of the reset
    assert max(r["iops"] for r in reset if "iops" in r) < 8 * 1.2
    wrap = _rows(fleet, 5, "sda")
    assert all("r_iops" in r for r in wrap)
    assert sum(1 for r in wrap if "util_pct" not in r) == 1  # the window of the wrap
    assert max(r["util_pct"] for r in wrap if "util_pct" in r) <= 100.0
    assert max(r["await_ms"] for r in wrap if "await_ms" in r) < 20.0


def test_fleet_page(fleet: tuple[Service, str, str], tmp_path: Path) -> None:
    prom, a, b = fleet
    out = tmp_path / "fleet.html"
    res = _run("report", "--prometheus", prom.url, "--from", a, "--to", b, "-o", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    page = out.read_text()
    assert page.count('<tr id="r-d') == HOSTS * 4
    data = page.split('<script type="application/json" id="fleet-data">')[1]
    doc = json.loads(data.split("</script>")[0].replace("<\\/", "</"))
    assert doc["devices"]["d1"]["title"].startswith(f"{host_name(1)} sda: bottleneck")
    assert len(doc["devices"]["d1"]["series"]["iops"]) == 96
    assert 'href="#d1"' in page


def test_import_into_store_and_parquet(fleet: tuple[Service, str, str], tmp_path: Path) -> None:
    prom, a, b = fleet
    db = tmp_path / "fleet.duckdb"
    res = _run("import", "--prometheus", prom.url, "--from", a, "--to", b, "--db", str(db))
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"of {HOSTS} host(s)" in res.stderr
    pq = tmp_path / "fleet.parquet"
    res = _run("import", "--prometheus", prom.url, "--match", 'device="sda"', "--from", a,
               "--to", b, "--parquet", str(pq))
    assert res.returncode == 0, res.stderr[-3000:]
    import polars as pl

    df = pl.read_parquet(pq)
    assert df["host"].n_unique() == HOSTS and df["device"].unique().to_list() == ["sda"]
    assert df.height == HOSTS * (STEPS - 1)  # windows 1..179: each needs the sample before
    res = _run("analyze", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    # the same rows from the store: several hosts, so ranked as the fleet view ranks them
    devices = json.loads(res.stdout)["devices"]
    assert [(d["host"], d["verdict"]) for d in devices[:2]] == [
        (host_name(1), "bottleneck"), (host_name(4), "bottleneck")]
