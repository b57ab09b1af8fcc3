"""`kill -9` of `iogauge record` at 20 moments: random ones, mid-flush and mid-compaction.

Mid-flush and mid-compaction are caught by watching the live directory for the writer's
temporary files (a flush writes ``.samples.N-N.parquet.<pid>.tmp``, a merge
``.samples.A-B.parquet.<pid>.tmp`` with A < B) and killing the moment one appears. After
every kill the store opens, holds every row it held before, misses at most the last flush
(the newest row is at most flush + interval + slack older than the kill), and the next
writer, started on the same store, appends. About two minutes.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from iogauge.store import Store

pytestmark = pytest.mark.slow

INTERVAL_S = 0.1
FLUSH_S = 0.5
SLACK_S = 1.5
_TMP = re.compile(r"^\.samples\.(\d+)-(\d+)\.parquet\.\d+\.tmp$")
_SEGMENT = re.compile(r"^samples\.(\d+)-(\d+)\.parquet$")

if not Path("/proc/diskstats").exists():  # pragma: no cover - containers without it
    pytest.skip("no /proc/diskstats on this machine", allow_module_level=True)


def _iogauge() -> list[str]:
    exe = Path(sys.executable).with_name("iogauge")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "iogauge"]


def _look(live: Path) -> tuple[set[str], int]:
    """Kinds of temporary files in ``live`` now ("flush", "merge") and the last flush number."""
    try:
        names = [p.name for p in live.iterdir()]
    except FileNotFoundError:
        return set(), 0
    kinds = {("merge" if m[1] != m[2] else "flush") for m in map(_TMP.match, names) if m}
    last = max((int(m[2]) for m in map(_SEGMENT.match, names) if m), default=0)
    return kinds, last


def _state(db: Path) -> tuple[int, float | None]:
    with Store.open(db, read_only=True) as st:
        frame = st.read()
    newest = frame.df["ts"].max() if len(frame) else None
    return len(frame), newest.timestamp() if isinstance(newest, datetime) else None


def test_kill_9_at_20_moments_loses_at_most_the_last_flush(tmp_path: Path) -> None:
    db = tmp_path / "crash.duckdb"
    live = tmp_path / "crash.duckdb.live"
    rng = random.Random(40)  # noqa: S311 - kill moments, not secrets
    moments = ["random"] * 8 + ["flush"] * 6 + ["merge"] * 6
    rng.shuffle(moments)
    rows_before = 0
    caught = {"random": 0, "flush": 0, "merge": 0}
    for moment in moments:
        rec = subprocess.Popen([*_iogauge(), "record", "--db", str(db), "--all", "--interval",
                                str(INTERVAL_S), "--flush", str(FLUSH_S)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        first_flush: float | None = None  # when this writer's first segment appeared
        last_before = _look(live)[1]
        # Moments count from when the store exists: on a loaded machine the first writer's
        # start-up alone can take longer than a random moment (there is no store to open yet).
        while not db.exists():
            assert rec.poll() is None, rec.communicate()[1]
            time.sleep(0.01)
        until = time.monotonic() + (rng.uniform(0.5, 6.0) if moment == "random" else 60)
        try:
            while True:
                kinds, last = _look(live)
                if first_flush is None and last > last_before:
                    first_flush = time.time()
                if moment in kinds:
                    caught[moment] += 1
                    break
                if time.monotonic() >= until:
                    assert moment == "random", f"no {moment} seen in 60 s"
                    break
                assert rec.poll() is None, rec.communicate()[1]
                time.sleep(0.001)
            killed = time.time()
            rec.send_signal(signal.SIGKILL)
        finally:
            rec.kill()
            rec.communicate(timeout=30)
        rows, newest = _state(db)  # opens: the store is readable after every kill
        assert rows >= rows_before, f"{moment}: {rows} rows after the kill, {rows_before} before"
        if first_flush is not None:
            assert rows > rows_before, f"{moment}: the killed writer's flushes are missing"
        if first_flush is not None and killed - first_flush > FLUSH_S + INTERVAL_S + SLACK_S:
            # a writer that ran a while flushed regularly: only the batch in progress is gone
            assert newest is not None
            assert newest >= killed - (FLUSH_S + INTERVAL_S + SLACK_S), (
                f"{moment}: newest row {killed - newest:.2f} s before the kill")
        rows_before = rows
    # a last writer appends to what the 20 kills left, and stops cleanly
    rec = subprocess.run([*_iogauge(), "record", "--db", str(db), "--all", "--interval",
                          str(INTERVAL_S), "--flush", str(FLUSH_S), "--duration", "2"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert rec.returncode == 0, rec.stderr
    rows, _newest = _state(db)
    assert rows > rows_before
    assert caught == {"random": 0, "flush": 6, "merge": 6}
    print(f"20 kills ({caught['flush']} mid-flush, {caught['merge']} mid-merge), "
          f"{rows_before} rows kept, {rows} after the last writer")
