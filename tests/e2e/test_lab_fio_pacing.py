"""A capped workload's fio job issues the IOPS asked for, with fio itself.

fio paces evenly spaced (linear) caps in bytes and converts ``rate_iops`` with the smallest
size of a ``bssplit``, so [Oe]'s file-share mix (512 B-64 KiB) capped with ``rate_iops``
ran at ~1/20 of the cap (fio 3.33: ``rate_iops=40,10`` gave 2.0 + 0.5 IOPS). The job file
now caps such a workload in bytes at the mix's mean size; Poisson pacing counts I/Os and
keeps ``rate_iops``. Both are run here against a sparse file (direct I/O, no root needed).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.system import require_tools

from iogauge.lab.workloads import fio_job, oe_paper

pytestmark = [pytest.mark.slow]

RUNTIME_S = 12
CAP_IOPS = 100.0


def _fio_iops(job: str, tmp: Path) -> tuple[float, float]:
    path = tmp / "job.fio"
    path.write_text(job)
    res = subprocess.run(["fio", "--output-format=json", str(path)], capture_output=True,
                         text=True, timeout=RUNTIME_S + 60, check=False)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    return (sum(j["read"]["iops"] for j in doc["jobs"]),
            sum(j["write"]["iops"] for j in doc["jobs"]))


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Path]:
    require_tools("fio")
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else tmp_path  # O_DIRECT-capable
    f = base / f"iogauge-fio-pacing-{tmp_path.name}.bin"
    with f.open("wb") as out:
        out.truncate(1 << 30)
    yield f
    f.unlink(missing_ok=True)


@pytest.mark.parametrize("arrival", ["fixed", "poisson"])
def test_capped_file_share_runs_at_its_cap(arrival: str, target: Path, tmp_path: Path) -> None:
    wl = oe_paper("file-share", "A", threads=10, rate_iops=CAP_IOPS, arrival=arrival)
    job = fio_job(wl, str(target), runtime_s=RUNTIME_S)
    rate_lines = [ln for ln in job.splitlines() if ln.startswith(("rate=", "rate_iops="))]
    assert rate_lines == (["rate_iops=8,2"] if arrival == "poisson"
                          else ["rate=90767,22692"])  # 10 IOPS/job x 11,346 B mean size
    r, w = _fio_iops(job, tmp_path)
    # the cap, give or take the sizes drawn (linear) or the arrivals drawn (Poisson) in
    # 10 jobs x 12 s; before the byte cap a linear cap gave ~5 IOPS here
    assert 0.8 * CAP_IOPS <= r + w <= 1.2 * CAP_IOPS, (r, w)
    assert 0.65 <= r / (r + w) <= 0.95  # the file share's 80 % reads
