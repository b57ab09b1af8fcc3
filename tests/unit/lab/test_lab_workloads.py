"""[Oe]'s workloads, their fio job files, and the draws the simulator makes from them."""

from __future__ import annotations

import shutil
import subprocess
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iogauge.lab.simulator import _Draws
from iogauge.lab.workloads import (
    IoSize,
    Region,
    Workload,
    backup,
    bundled_job_files,
    file_share,
    fio_job,
    oe_paper,
)

KIB = 1024


def test_file_share_is_the_iometer_file_server_pattern() -> None:
    w = file_share("A")
    assert [(s.size_bytes, s.share) for s in w.sizes] == [
        (512, 0.10), (1024, 0.05), (2048, 0.05), (4096, 0.60), (8192, 0.02),
        (16384, 0.04), (32768, 0.04), (65536, 0.10)]
    assert w.read_share == 0.80
    # 51.2 + 51.2 + 102.4 + 2457.6 + 163.84 + 655.36 + 1310.72 + 6553.6 bytes
    assert w.mean_size_bytes == pytest.approx(11345.92)
    assert w.regions == (Region(0.0, 0.25, 1.0),)
    assert w.threads == 10 and w.arrival == "per_second" and w.group == "A"


def test_backup_is_table_2_scaled_to_the_partition() -> None:
    w = backup("B")
    assert w.sizes == (IoSize(128 * KIB, 1.0),)
    assert w.read_share == 0.5
    # 0-30 GB and 300-330 GB of a 500 GB partition = 0-6 % and 60-66 % of it.
    got = [x for r in w.regions for x in (r.start, r.end, r.weight)]
    assert got == pytest.approx([0.75, 0.765, 0.5, 0.90, 0.915, 0.5])
    assert w.extent == (0.75, 1.0)


def test_a_plus_b_splits_threads_and_cap_into_two_groups() -> None:
    a, b = oe_paper("backup", "A+B", threads=10, rate_iops=60.0)
    assert (a.group, b.group) == ("A", "B")
    assert (a.threads, b.threads) == (5, 5)
    assert (a.rate_iops, b.rate_iops) == (30.0, 30.0)
    with pytest.raises(ValueError, match=r"unknown \[Oe\] workload"):
        oe_paper("oltp")
    with pytest.raises(ValueError, match="placement"):
        file_share("C")


def test_workload_validation() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        Workload("x", (IoSize(4096, 0.5),), 1.0)
    with pytest.raises(ValueError, match="start < end"):
        Workload("x", (IoSize(4096, 1.0),), 1.0, regions=(Region(0.5, 0.4),))
    with pytest.raises(ValueError, match="rate_schedule"):
        Workload("x", (IoSize(4096, 1.0),), 1.0, rate_schedule=((5.0, 1.0), (1.0, 2.0)))


def test_fio_job_golden_backup_a() -> None:
    text = fio_job(backup("A", rate_iops=60.0), "/dev/loop7", runtime_s=30)
    body = text.split("[backup@A]")[1]
    lines = [ln for ln in body.splitlines() if ln and not ln.startswith(";")]
    assert lines == ["rw=randrw", "rwmixread=50", "offset=0%", "size=25%", "blockalign=128k",
                     "numjobs=10", "bs=128k",
                     "random_distribution=zoned:50/6:0/54:50/6:0/34", "rate_iops=3,3"]
    assert "filename=/dev/loop7" in text and "runtime=30" in text


def test_fio_job_absolute_positions_for_a_given_device() -> None:
    text = fio_job(backup("B"), device_bytes=2 * 10**12)
    a = 128 * KIB
    off = 1_500_000_000_000 // a * a  # 0.75 x 2 TB, down to the alignment
    size = 2_000_000_000_000 // a * a - off  # the partition: to the end of the device
    assert f"offset={off}\nsize={size}\n" in text
    zones = [f"{acc}/{int(frac * size)}" for acc, frac in
             ((50, 0.06), (0, 0.54), (50, 0.06), (0, 0.34))]
    assert f"random_distribution=zoned_abs:{':'.join(zones)}" in text
    w = Workload("odd", (IoSize(4096, 1.0),), 1.0, regions=(Region(0.001, 0.2),))
    with pytest.raises(ValueError, match="whole percentages"):
        fio_job(w)


def test_bundled_job_files_are_the_generator_output() -> None:
    jobs = Path(str(resources.files("iogauge.lab") / "jobs"))
    files = {p.name: p.read_text() for p in jobs.glob("*.fio")}
    assert files == bundled_job_files()
    assert sorted(files) == ["backup-A.fio", "backup-AB.fio", "backup-B.fio",
                             "file-share-A.fio", "file-share-AB.fio", "file-share-B.fio"]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_accepts_every_bundled_job(tmp_path: Path) -> None:
    img = tmp_path / "dev.img"
    with img.open("wb") as f:
        f.truncate(1 << 30)
    jobs = Path(str(resources.files("iogauge.lab") / "jobs"))
    for job in sorted(jobs.glob("*.fio")):
        r = subprocess.run(["fio", "--parse-only", str(job)], env={"DEVICE": str(img)},
                           capture_output=True, text=True, check=False)
        assert r.returncode == 0, (job.name, r.stderr)


def test_draws_follow_sizes_mix_and_regions() -> None:
    w = file_share("B")
    cap = 2 * 10**12
    d = _Draws(w, np.random.default_rng(1), cap, 50_000)
    d.refill()
    sizes = np.array(d.sizes)
    offs = np.array(d.offs)
    for s in w.sizes:
        assert (sizes == s.size_bytes).mean() == pytest.approx(s.share, abs=0.01)
    assert 1.0 - np.mean(d.writes) == pytest.approx(0.8, abs=0.01)
    assert (offs % 4096 == 0).all()
    assert (offs >= 0.75 * cap).all() and (offs + sizes <= cap).all()
    # Uniform over the partition: each quarter of it gets a quarter of the I/Os.
    q = ((offs - 0.75 * cap) // (0.0625 * cap)).astype(int)
    assert np.bincount(q, minlength=4) / len(q) == pytest.approx([0.25] * 4, abs=0.01)


@settings(max_examples=40, deadline=None)
@given(starts=st.lists(st.floats(0.0, 0.9), min_size=1, max_size=3),
       size_kib=st.sampled_from([4, 8, 64, 128]), seed=st.integers(0, 2**16))
def test_draws_stay_inside_their_regions(starts: list[float], size_kib: int,
                                         seed: int) -> None:
    regions = tuple(Region(s, s + 0.05, 1.0 / len(starts)) for s in starts)
    w = Workload("h", (IoSize(size_kib * KIB, 1.0),), 0.5, regions=regions,
                 align_bytes=size_kib * KIB)
    cap = 10**10
    d = _Draws(w, np.random.default_rng(seed), cap, 2000)
    d.refill()
    for off in d.offs:
        assert off % (size_kib * KIB) == 0
        assert any(r.start * cap <= off and off + size_kib * KIB <= r.end * cap
                   for r in regions)
