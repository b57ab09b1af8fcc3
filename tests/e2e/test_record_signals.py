"""`iogauge record` as a real process on the real /proc: SIGTERM and SIGINT flush and exit 0,
`kill -9` loses at most one batch and never leaves an unreadable store, a new recording
appends after a kill, and `iogauge export` writes Parquet that reads back as a SampleFrame."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iogauge.model.sampleframe import SampleFrame
from iogauge.store import Store

pytestmark = pytest.mark.slow

INTERVAL = 0.2
FLUSH = 1.0
#: Scheduling jitter allowed on top of the flush + interval bound (a loaded CI machine).
SLACK = 0.5


def _iogauge() -> list[str]:
    exe = Path(sys.executable).with_name("iogauge")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "from iogauge.cli.main import main; main()"]


def _has_block_devices() -> bool:
    try:
        return bool(Path("/proc/diskstats").read_text().strip())
    except OSError:
        return False


if not _has_block_devices():  # pragma: no cover - containers without /proc/diskstats
    pytest.skip("no /proc/diskstats on this machine", allow_module_level=True)


class _Recording:
    """A running `iogauge record`, its stderr collected line by line."""

    def __init__(self, db: Path, *extra: str) -> None:
        cmd = [*_iogauge(), "record", "--db", str(db), "--interval", str(INTERVAL),
               "--flush", str(FLUSH), "--all", *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, "COLUMNS": "300"})
        self.lines: list[str] = []
        self.started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("recording "):
                self.started.set()

    def wait_started(self, timeout: float = 60.0) -> None:
        if not self.started.wait(timeout):
            self.proc.kill()
            raise AssertionError("record did not start:\n" + "\n".join(self.lines))

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        rc = self.proc.wait(timeout)
        self._reader.join(10)
        return rc, "\n".join(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _newest_ts(db: Path) -> tuple[int, datetime]:
    with Store.open(db, read_only=True) as st:
        frame = st.read()
    assert len(frame) > 0
    newest = frame.df["ts"].max()
    assert isinstance(newest, datetime)
    return len(frame), newest


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_flushes_and_exits_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "rec.duckdb"
    rec = _Recording(db)
    try:
        rec.wait_started()
        time.sleep(3.0)
        sent = datetime.now(UTC)
        rec.proc.send_signal(sig)
        rc, err = rec.finish()
    finally:
        rec.kill()
    assert rc == 0, err
    assert "Traceback" not in err, err
    assert "nanobind" not in err, err
    summary = [ln for ln in err.splitlines() if ln.startswith("recorded ")]
    assert len(summary) == 1, err
    assert f"stopped by {sig.name}" in summary[0]
    assert str(db) in summary[0]
    m = re.search(r"recorded (\d+) rows for (\d+) device", summary[0])
    assert m, summary[0]
    rows, newest = _newest_ts(db)
    assert rows == int(m.group(1)) > 0  # every sampled row made it to the file
    # the last sample before the signal is stored (nothing buffered was dropped)
    lag = (sent - newest).total_seconds()
    assert lag <= INTERVAL + SLACK, f"newest row {lag:.3f} s before the signal"
    print(f"\n{sig.name}: {rows} rows, newest row {lag:.3f} s before the signal; {summary[0]}")


def test_kill_9_loses_at_most_one_batch_then_recording_resumes(tmp_path: Path) -> None:
    db = tmp_path / "crash.duckdb"
    rec = _Recording(db)
    try:
        rec.wait_started()
        time.sleep(7.0)
        killed = datetime.now(UTC)
        rec.proc.send_signal(signal.SIGKILL)
        rc, err = rec.finish()
    finally:
        rec.kill()
    assert rc == -signal.SIGKILL
    assert not any(ln.startswith("recorded ") for ln in err.splitlines())
    # (c) the file opens (WAL replayed), has rows, and the loss is at most one batch
    rows, newest = _newest_ts(db)
    loss = (killed - newest).total_seconds()
    assert rows > 0
    assert loss <= FLUSH + INTERVAL + SLACK, f"lost {loss:.3f} s of samples"
    print(f"\nkill -9: {rows} rows survived, newest {loss:.3f} s before the kill "
          f"(bound {FLUSH + INTERVAL:.1f} s)")

    # (d) a new recording appends to the same file
    again = subprocess.run([*_iogauge(), "record", "--db", str(db), "--interval", str(INTERVAL),
                            "--flush", str(FLUSH), "--duration", "1", "--all"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert "stopped by duration" in again.stderr
    m = re.search(r"recorded (\d+) rows", again.stderr)
    assert m, again.stderr
    assert int(m.group(1)) > 0, again.stderr
    rows2, newest2 = _newest_ts(db)
    assert rows2 == rows + int(m.group(1))
    assert newest2 > newest

    # export: Parquet that reads back as the same SampleFrame
    out = tmp_path / "out.parquet"
    exp = subprocess.run([*_iogauge(), "export", "--db", str(db), "--parquet", str(out)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert exp.returncode == 0, exp.stderr
    assert f"exported {rows2} rows" in exp.stderr
    back = SampleFrame.read_parquet(out)
    with Store.open(db, read_only=True) as st:
        assert back.df.equals(st.read().df)
        some = st.read_devices()
    assert len(some) > 0


def test_export_reads_while_record_runs_and_a_second_record_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "busy.duckdb"
    rec = _Recording(db)
    try:
        rec.wait_started()
        time.sleep(2 * FLUSH + SLACK)
        exp = subprocess.run([*_iogauge(), "export", "--db", str(db), "--parquet",
                              str(tmp_path / "x.parquet")],
                             capture_output=True, text=True, timeout=120, check=False)
        assert exp.returncode == 0, exp.stderr
        assert len(SampleFrame.read_parquet(tmp_path / "x.parquet")) > 0
        second = subprocess.run([*_iogauge(), "record", "--db", str(db), "--duration", "1"],
                                capture_output=True, text=True, timeout=120, check=False,
                                env={**os.environ, "COLUMNS": "300"})
        assert second.returncode == 2
        assert "already writing samples to this store" in second.stderr
        assert f"PID {rec.proc.pid}" in second.stderr
        rec.proc.send_signal(signal.SIGTERM)
        rc, err = rec.finish()
    finally:
        rec.kill()
    assert rc == 0, err
