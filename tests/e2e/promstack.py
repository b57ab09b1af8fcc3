"""Real Prometheus, VictoriaMetrics and node_exporter for the end-to-end tests.

Each program runs on 127.0.0.1 on a port chosen free, scrapes every second, keeps its data
in a temporary directory, and is stopped by its PID (SIGTERM, then SIGKILL). Missing
programs skip the test with the reason; scripts/ensure-system-tools.sh installs them
(Debian packages prometheus, prometheus-node-exporter, victoria-metrics).

    with node_exporter(tmp) as ne, prometheus(tmp, [ne.target]) as prom:
        ...  # prom.url is http://127.0.0.1:PORT
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.system import _kill_group, require_tools

PROMETHEUS = "prometheus"
PROMTOOL = "promtool"
NODE_EXPORTER = "prometheus-node-exporter"
VICTORIA = "victoria-metrics"
SCRAPE_S = 1


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Service:
    """A started program: its process, port and log."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


def stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the PID (the leader of its own session), SIGKILL it after ``grace_s``."""
    _kill_group(proc, grace_s)


def _wait_http(svc: Service, path: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if svc.proc.poll() is not None:
            raise RuntimeError(f"{svc.name} exited {svc.proc.returncode}:\n{svc.log_tail()}")
        try:
            with urllib.request.urlopen(svc.url + path, timeout=2) as r:  # noqa: S310
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{svc.name} not ready within {timeout_s} s:\n{svc.log_tail()}")


@contextlib.contextmanager
def _run(name: str, cmd: Sequence[str], port: int, workdir: Path, ready: str
         ) -> Iterator[Service]:
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=workdir, start_new_session=True)
    svc = Service(name, proc, port, log)
    try:
        _wait_http(svc, ready)
        yield svc
    finally:
        stop(proc)


@contextlib.contextmanager
def node_exporter(workdir: Path) -> Iterator[Service]:
    """node_exporter with only the diskstats and cpu collectors, every device included
    (its default excludes loop devices, which the tests load)."""
    require_tools(NODE_EXPORTER)
    port = free_port()
    cmd = [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}",
           "--collector.disable-defaults", "--collector.diskstats", "--collector.cpu",
           "--collector.diskstats.device-exclude=^$"]
    with _run("node_exporter", cmd, port, workdir, "/metrics") as svc:
        yield svc


def scrape_config(targets: Sequence[str]) -> str:
    """A Prometheus scrape configuration (JSON is YAML) for ``targets`` every second."""
    return json.dumps({
        "global": {"scrape_interval": f"{SCRAPE_S}s"},
        "scrape_configs": [{"job_name": "node", "scrape_interval": f"{SCRAPE_S}s",
                            "scrape_timeout": f"{SCRAPE_S}s",
                            "static_configs": [{"targets": list(targets)}]}]})


@contextlib.contextmanager
def prometheus(workdir: Path, targets: Sequence[str] = (), *, data: Path | None = None,
               extra: Sequence[str] = ()) -> Iterator[Service]:
    """Prometheus scraping ``targets`` every second, its TSDB in ``data`` (default a new
    directory under ``workdir``: backfilled blocks can be placed there first)."""
    require_tools(PROMETHEUS)
    port = free_port()
    tsdb = data or workdir / "prometheus-data"
    tsdb.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(scrape_config(targets))
    cmd = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
           f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=10y",
           *extra]
    with _run("prometheus", cmd, port, workdir, "/-/ready") as svc:
        yield svc


@contextlib.contextmanager
def victoria_metrics(workdir: Path, targets: Sequence[str] = ()) -> Iterator[Service]:
    """VictoriaMetrics (single node) scraping ``targets`` every second; samples are
    searchable at once (``-search.latencyOffset=0s``; the default hides the last 30 s)."""
    require_tools(VICTORIA)
    port = free_port()
    data = workdir / "victoria-data"
    data.mkdir(parents=True, exist_ok=True)
    config = workdir / "victoria-scrape.yml"
    config.write_text(scrape_config(targets))
    cmd = [VICTORIA, f"-storageDataPath={data}", f"-httpListenAddr=127.0.0.1:{port}",
           f"-promscrape.config={config}", "-search.latencyOffset=0s",
           "-retentionPeriod=100y"]
    with _run("victoria-metrics", cmd, port, workdir, "/health") as svc:
        yield svc
