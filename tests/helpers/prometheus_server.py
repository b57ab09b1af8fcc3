"""A real Prometheus for end-to-end tests: on 127.0.0.1, a free port, 1 s scrapes, data in a
temporary directory, stopped by its PID whatever happens.

Typical use::

    with prometheus({"iogauge": ["127.0.0.1:9595"]}, tmp_path) as prom:
        prom.wait_for('iogauge_device_verdict{device="loop3"}')
        value = prom.query_value('iogauge_device_max_iops{device="loop3"}')
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.system import require_tools


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prometheus:
    """A running Prometheus and its HTTP API."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """``/api/v1/query``: the instant vector's samples (metric labels and value)."""
        q = urllib.parse.urlencode({"query": expr})
        # (S310: the URL is the http:// address this helper built)
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=10) as r:  # noqa: S310
            doc = json.load(r)
        assert doc["status"] == "success", doc
        result = doc["data"]["result"]
        assert isinstance(result, list)
        return result

    def query_value(self, expr: str) -> float | None:
        """The value of a query that selects one series (None: no series)."""
        res = self.query(expr)
        assert len(res) <= 1, f"{expr}: {len(res)} series"
        return float(res[0]["value"][1]) if res else None

    def wait_for(self, expr: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Poll until ``expr`` selects at least one series."""
        deadline = time.monotonic() + timeout_s
        while True:
            res = self.query(expr)
            if res or time.monotonic() > deadline:
                return res
            time.sleep(0.5)

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""


@contextlib.contextmanager
def prometheus(jobs: Mapping[str, Sequence[str]], workdir: Path, *,
               rule_files: Sequence[Path] = ()) -> Iterator[Prometheus]:
    """Prometheus scraping each job's targets (host:port) every second, evaluating
    ``rule_files`` every second."""
    exe = require_tools("prometheus")["prometheus"]
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(targets)}]}
                           for job, targets in jobs.items()],
    }))
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [exe, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    prom = Prometheus(proc, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {proc.returncode}:\n{prom.log_tail()}")
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{prom.url}/-/ready", timeout=2) as r:  # noqa: S310
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready in 30 s:\n{prom.log_tail()}")
            time.sleep(0.2)
        yield prom
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
