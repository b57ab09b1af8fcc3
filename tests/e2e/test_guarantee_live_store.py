"""`iogauge guarantee --dry-run` writing decisions while `iogauge guarantee show --json` reads
them every second, then `kill -9` of the controller at 20 moments (random ones, mid-flush and
mid-merge) with a restart after each.

Every show succeeds, sees decisions no older than the flush interval (plus one decision
interval and slack) and never fewer than before; after every kill the store opens, keeps
every decision it had, misses at most the last flush (the newest decision is at most flush +
interval + slack older than the kill), and the restarted controller appends. The kills run
at 0.1 s decisions and 0.2 s flushes, so that a merge (every 16 flushes) comes within
seconds. The controller reads a steady
stand-in kernel (the guarantee unit tests' FakeKernel: /proc/diskstats and cgroup v1 counter
files in a temporary directory, via the hidden --procfs-root/--sysfs-root/--mounts-file),
because on an idle real disk both policies stop on a zero busy-per-IOPS (a division by zero
in policy.py, left to the guarantee's owners). About two minutes.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from tests.unit.guarantee.cgroup_fixtures import (
    SYSFS,
    V1_LIMIT_FILES,
    FakeKernel,
    make_v1_group,
)

pytestmark = pytest.mark.slow

INTERVAL_S = 0.5
FLUSH_S = 1.0
SLACK_S = 2.0
#: The kill phase: decisions and flushes often enough for a merge every ~3 s.
KILL_INTERVAL_S = 0.1
KILL_FLUSH_S = 0.2
_TMP = re.compile(r"^\.guarantee_decisions\.(\d+)-(\d+)\.parquet\.\d+\.tmp$")
_RAW = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print(con.execute("SELECT count(*) FROM guarantee_decisions_live").fetchone()[0])
"""


def _iogauge() -> list[str]:
    exe = Path(sys.executable).with_name("iogauge")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "iogauge"]


def _tree(tmp: Path) -> tuple[Path, Path, Path]:
    """A cgroup v1 blkio tree with groups a and b, and a mounts file naming it."""
    root = tmp / "cgroup" / "blkio"
    root.mkdir(parents=True)
    for f in V1_LIMIT_FILES:
        (root / f).write_text("")
    (root / "cgroup.procs").write_text("")
    mounts = tmp / "mounts"
    mounts.write_text(f"cgroup {root} cgroup rw,nosuid,nodev,noexec,relatime,blkio 0 0\n")
    return make_v1_group(root, "a"), make_v1_group(root, "b"), mounts


def _start(tmp: Path, a: Path, b: Path, *extra: str, interval_s: float = INTERVAL_S,
           flush_s: float = FLUSH_S) -> subprocess.Popen[str]:
    cfg = tmp / "g.toml"
    cfg.write_text(f"flush_s = {flush_s}\n")
    return subprocess.Popen([*_iogauge(), "guarantee", "--device", "sda", "--protect",
                             f"{a}:10", "--throttle", str(b), "--dry-run", "--interval",
                             str(interval_s), "--policy", "paper", "--config", str(cfg), "--db",
                             str(tmp / "g.duckdb"), "--state", str(tmp / "state.json"),
                             "--procfs-root", str(tmp / "proc"), "--sysfs-root", str(SYSFS),
                             "--mounts-file", str(tmp / "mounts"), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _show(db: Path) -> list[dict[str, object]]:
    proc = subprocess.run([*_iogauge(), "guarantee", "show", "--db", str(db), "--json",
                           "--last", "1000000"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _count(db: Path) -> int:
    out = subprocess.run([sys.executable, "-c", _RAW, str(db)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return int(out)


def test_guarantee_show_reads_while_the_controller_writes_and_after_kill_9(
        tmp_path: Path) -> None:
    a, b, _mounts = _tree(tmp_path)
    with FakeKernel(tmp_path / "proc", r_iops=300, w_iops=0, util_pct=80, await_ms=3,
                    groups={a: (60, 0), b: (240, 0)}):
        _check(tmp_path, a, b)


def _check(tmp_path: Path, a: Path, b: Path) -> None:
    db = tmp_path / "g.duckdb"
    ctl = _start(tmp_path, a, b, "--duration", "40")
    begun, last, shows = time.time(), 0, 0
    bound = FLUSH_S + INTERVAL_S + SLACK_S
    while ctl.poll() is None:
        t0 = time.time()
        rows = _show(db) if db.exists() else []
        shows += 1
        assert len(rows) >= last, f"show went from {last} to {len(rows)} decisions"
        last = len(rows)
        if t0 - begun > 3 * bound and ctl.poll() is None:
            newest = datetime.fromisoformat(str(rows[-1]["ts"])).timestamp()
            assert newest >= t0 - bound, f"show saw decisions {t0 - newest:.1f} s old"
        time.sleep(max(0.0, 1.0 - (time.time() - t0)))
    assert ctl.wait() == 0, ctl.communicate()[1]
    assert shows >= 10 and last > 0
    print(f"{shows} shows while running ({last} decisions)")
    _kill_20_times(tmp_path, a, b)


def _newest(db: Path) -> float:
    rows = _show(db)  # the controller's own reader opens the store too
    return datetime.fromisoformat(str(rows[-1]["ts"])).timestamp() if rows else 0.0


def _kill_20_times(tmp_path: Path, a: Path, b: Path) -> None:
    db, live = tmp_path / "g.duckdb", tmp_path / "g.duckdb.live"
    rng = random.Random(40)  # noqa: S311 - kill moments, not secrets
    moments = ["random"] * 8 + ["flush"] * 6 + ["merge"] * 6
    rng.shuffle(moments)
    bound = KILL_FLUSH_S + KILL_INTERVAL_S + SLACK_S
    before = _count(db)
    caught = {"random": 0, "flush": 0, "merge": 0}
    for i, moment in enumerate(moments):
        ctl = _start(tmp_path, a, b, interval_s=KILL_INTERVAL_S, flush_s=KILL_FLUSH_S)
        started = time.time()
        until = time.monotonic() + (rng.uniform(1.0, 6.0) if moment == "random" else 60)
        try:
            while time.monotonic() < until:
                found = {"merge" if m[1] != m[2] else "flush"
                         for m in map(_TMP.match, (p.name for p in live.glob(".*.tmp"))) if m}
                if moment in found:
                    caught[moment] += 1
                    break
                assert ctl.poll() is None, ctl.communicate()[1]
                time.sleep(0.001)
            killed = time.time()
            ctl.send_signal(signal.SIGKILL)
        finally:
            ctl.kill()
            ctl.communicate(timeout=30)
        after = _count(db)
        assert after >= before, f"kill {i} ({moment}): {after} decisions, {before} before"
        newest = _newest(db)
        if killed - started > 3 * bound:  # it ran a while: only the batch in progress is gone
            assert newest >= killed - bound, (
                f"kill {i} ({moment}): newest decision {killed - newest:.2f} s before it")
        before = after
    ctl = _start(tmp_path, a, b, "--duration", "3")
    assert ctl.wait(timeout=120) == 0, ctl.communicate()[1]
    assert _count(db) > before
    assert caught == {"random": 0, "flush": 6, "merge": 6}
    print(f"20 kills ({caught['flush']} mid-flush, {caught['merge']} mid-merge); "
          f"{_count(db)} decisions after the restart")
