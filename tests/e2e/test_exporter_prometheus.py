"""`iogauge exporter` scraped by a real Prometheus while fio loads a real (emulated) disk.

The lab's emulated 7,200 rpm spindle (a FUSE file behind a direct-I/O loop device, left as a
plain loop device: nothing about it is told to iogauge) is loaded by fio in three steps --
two rate-limited ones and an unthrottled one at queue depth 1 that keeps it busy -- while
`iogauge exporter --interval 1 --textfile DIR` samples it. A real node_exporter publishes
that textfile and the device's diskstats, and a real Prometheus (127.0.0.1, free ports, 1 s
scrapes and rule evaluation, data in a temporary directory, everything stopped by PID)
scrapes both and evaluates deploy/prometheus/iogauge-rules.yml. Read back through
Prometheus' query API: the verdict and service-model state sets, the maximum and headroom,
[Oe]'s busy seconds per I/O and (where the samples show one) the knee, checked against each
other and against what a spindle can do; the same judgement through the textfile route; the
iostat recording rules on node_exporter's counters of the same device.

Run with ``-s`` to see the numbers.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.prometheus_server import Prometheus, free_port, prometheus
from tests.helpers.system import iogauge_exe, require_lab_device, require_root, require_tools

from iogauge.exporter.judgement import VERDICT_LABELS
from iogauge.lab import device as lab

pytestmark = [pytest.mark.slow, pytest.mark.root]

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "iogauge-rules.yml"

#: fio's steps: random 4 kB reads, one at a time, at these rates (IOPS; None = as fast as
#: the spindle goes), STEP_S seconds each. The emulated spindle does ~75-150 IOPS at queue
#: depth 1, so the rated steps sit well below its maximum and the last one at it.
RATES = (15, 35, None)
STEP_S = 8
RANDREAD_QD1 = ["--rw=randread", "--bs=4k", "--ioengine=libaio", "--direct=1", "--iodepth=1",
                "--norandommap", "--randrepeat=0"]


def _fio_steps(loop: str) -> subprocess.Popen[bytes]:
    args = ["fio", f"--filename={loop}", "--time_based", f"--runtime={STEP_S}", *RANDREAD_QD1]
    for i, rate in enumerate(RATES):
        args += [f"--name=step{i}", "--stonewall"]
        if rate is not None:
            args.append(f"--rate_iops={rate}")
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
    return proc.returncode


@contextlib.contextmanager
def _started(cmd: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """A program in the background (its own session), stopped by PID on exit."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield proc
    finally:
        _stop(proc)


def _state(prom: Prometheus, metric: str, label: str, sel: str) -> dict[str, float]:
    return {r["metric"][label]: float(r["value"][1]) for r in prom.query(f"{metric}{sel}")}


def test_prometheus_scrapes_the_judgement_of_a_loaded_spindle(tmp_path: Path) -> None:
    """Both routes: /metrics scraped as job iogauge, and the textfile published by a real
    node_exporter (job node), whose diskstats also feed deploy/'s recording rules."""
    require_root()
    require_lab_device()
    tools = require_tools("fio", "prometheus", "prometheus-node-exporter")
    port, node_port = free_port(), free_port()
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    with lab.create_device("hdd", label_media=False) as loop, contextlib.ExitStack() as stack:
        dev = Path(loop).name
        exporter = stack.enter_context(_started([
            str(iogauge_exe()), "exporter", "--listen", f"127.0.0.1:{port}", "--interval", "1",
            "--judge-every", "1", "--window", "120", "--textfile", str(textfiles),
            "--guarantee-db", str(tmp_path / "no-guarantee.duckdb"), dev]))
        stack.enter_context(_started([
            tools["prometheus-node-exporter"], f"--web.listen-address=127.0.0.1:{node_port}",
            "--collector.disable-defaults", "--collector.diskstats", "--collector.textfile",
            f"--collector.textfile.directory={textfiles}",
            # the default also leaves out loop devices
            r"--collector.diskstats.device-exclude=^(ram|fd)\d+$"]))
        prom = stack.enter_context(prometheus(
            {"iogauge": [f"127.0.0.1:{port}"], "node": [f"127.0.0.1:{node_port}"]}, tmp_path,
            rule_files=[RULES]))
        fio = _fio_steps(loop)
        try:
            assert fio.wait(timeout=STEP_S * len(RATES) + 60) == 0, \
                fio.stderr.read().decode(errors="replace") if fio.stderr else ""
        finally:
            _stop(fio)
        time.sleep(3)  # the last judgement made and scraped
        assert prom.query_value('up{job="iogauge"}') == 1.0, prom.log_tail()
        assert prom.query_value('up{job="node"}') == 1.0, prom.log_tail()
        sel = f'{{job="iogauge",device="{dev}"}}'
        verdicts = _state(prom, "iogauge_device_verdict", "verdict", sel)
        models = _state(prom, "iogauge_device_service_model", "model", sel)
        fig = {name: prom.query_value(f"iogauge_device_{name}{sel}") for name in (
            "max_iops", "current_iops", "headroom_iops", "headroom_ratio",
            "busy_seconds_per_io", "knee_util_ratio")}
        node_sel = f'{{job="node",device="{dev}"}}'
        via_textfile = _state(prom, "iogauge_device_verdict", "verdict", node_sel)
        textfile_max = prom.query_value(f"iogauge_device_max_iops{node_sel}")
        reads_ps = prom.query_value(
            f"instance_device:node_disk_reads_completed:rate1m{node_sel}")
        util = prom.query_value(f"instance_device:node_disk_util:ratio_rate1m{node_sel}")
        code = _stop(exporter)
        err = exporter.stderr.read().decode(errors="replace") if exporter.stderr else ""
    print(f"\n  via textfile: {via_textfile}, max {textfile_max}; recorded r/s {reads_ps}, "
          f"util {util}")
    print(f"\n  verdicts {verdicts}\n  models {models}\n  figures {fig}")
    assert code == 0, err[-3000:]
    # The state sets: every state has a series, exactly one is 1.
    assert set(verdicts) == set(VERDICT_LABELS)
    assert sorted(verdicts.values()) == [0.0] * (len(VERDICT_LABELS) - 1) + [1.0]
    assert set(models) == {"one-at-a-time", "parallel", "undetermined"}
    assert models["one-at-a-time"] == 1.0, f"an emulated spindle judged {models}: {err}"
    # The capacity figures, consistent with each other and with a spindle.
    max_iops, head, ratio, busy = (fig["max_iops"], fig["headroom_iops"],
                                   fig["headroom_ratio"], fig["busy_seconds_per_io"])
    assert max_iops is not None and 40 <= max_iops <= 300, fig
    assert head is not None and ratio is not None and busy is not None, fig
    assert 0 <= head <= max_iops
    assert ratio == pytest.approx(head / max_iops, rel=1e-6)
    # [Oe] §3: at 100 % busy IOPS = 1 / (busy seconds per I/O) on a one-at-a-time device;
    # below the knee the maximum is at most that.
    assert 0.5 <= busy * max_iops <= 1.05, fig
    # Headroom is measured from the busiest analysis window's load.
    assert fig["current_iops"] is not None and 10 <= fig["current_iops"] <= max_iops, fig
    assert head == pytest.approx(max_iops - fig["current_iops"], rel=1e-6)
    if fig["knee_util_ratio"] is not None:  # only where the samples bend off the line
        assert 0.5 <= fig["knee_util_ratio"] <= 1.0, fig
    # The textfile route: the same judgement through node_exporter's textfile collector
    # (a judgement or two apart from the scrape of /metrics).
    assert set(via_textfile) == set(VERDICT_LABELS) and sum(via_textfile.values()) == 1.0
    assert textfile_max == pytest.approx(max_iops, rel=0.1)
    # deploy/'s recording rules on the real node_exporter's counters of the same device:
    # over the last minute fio's steps ran (15, 35 IOPS, then the spindle's pace).
    assert reads_ps is not None and 5 <= reads_ps <= max_iops * 1.1, reads_ps
    assert util is not None and 0.05 <= util <= 1.0, util
