"""The Prometheus source without a Prometheus: selectors, query splitting, host batches, and
every bad input the CLI must answer with a message (a local HTTP server stands in for the
query API; the real engines are in tests/e2e/test_prometheus_*.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from typer.testing import CliRunner

from iogauge.cli.main import app
from iogauge.collector.diskstats import FIELDS
from iogauge.errors import SourceError
from iogauge.sources.prometheus import PromClient, PromSelection, parse_selector, promql
from iogauge.sources.prometheus.reader import MAX_POINTS, host_batches

T0 = datetime(2026, 11, 22, tzinfo=UTC)
SPAN = ["--from", "2026-11-22T00:00", "--to", "2026-11-22T01:00"]

#: What the fake API answers: (path prefix) -> handler(headers, form) -> (status, body).
Route = Callable[[dict[str, str], str], tuple[int, Any]]


class _Api:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.seen: list[tuple[str, dict[str, str]]] = []


@pytest.fixture
def api() -> Iterator[tuple[_Api, str]]:
    state = _Api()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            form = self.rfile.read(size).decode() if size else ""
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.seen.append((self.path, headers))
            route = next((r for p, r in state.routes.items() if self.path.startswith(p)),
                         None)
            status, body = (404, {"status": "error", "error": "no route"}) if route is None \
                else route(headers, form)
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _ok(data: Any) -> Route:
    return lambda _h, _f: (200, {"status": "success", "data": data})


def _cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env)


# ---- the expressions --------------------------------------------------------------------

def test_selector_forms() -> None:
    ms = parse_selector('{job="node", instance=~"db.*",device!~"loop.*"}')
    assert [(m.label, m.op, m.value) for m in ms] == [
        ("job", "=", "node"), ("instance", "=~", "db.*"), ("device", "!~", "loop.*")]
    assert parse_selector('job="node"') == parse_selector('{job="node"}')
    assert parse_selector(None) == ()
    with pytest.raises(ValueError, match="not a label matcher"):
        parse_selector("{job=node}")


def test_every_counter_is_one_complete_expression() -> None:
    """One increase per node_exporter counter, each a whole expression of the selected
    series, and together every /proc/diskstats field but the in-flight gauge."""
    ms = parse_selector('job="node"')
    for c in promql.COUNTERS:
        q = promql.counter_expression(c, ms, 60)
        assert q.count(f'{c.metric}{{job="node"}}') == 2, q
        assert "{" not in q.replace(f'{c.metric}{{job="node"}}', ""), q
        assert "offset 60s" in q and "last_over_time(" in q and "[59999ms]" in q
    fields = {c.field for c in promql.COUNTERS}
    assert fields == set(FIELDS) - {"in_flight"}
    assert len({c.metric for c in promql.COUNTERS}) == len(promql.COUNTERS)


def test_host_regex_is_literal() -> None:
    assert promql.regex_escape("db1.example:9100") == "db1\\\\.example:9100"


def test_queries_stay_under_the_points_limit() -> None:
    sel = PromSelection(start=T0, end=T0 + timedelta(days=1), window_s=1.0)
    chunks = sel.chunks()
    assert len(chunks) == 9
    steps = [round((b - a) / 1.0) + 1 for a, b in chunks]
    assert max(steps) <= MAX_POINTS < 11_000
    assert sum(steps) == 86_400
    assert all(abs(chunks[i + 1][0] - chunks[i][1] - 1.0) < 1e-6
               for i in range(len(chunks) - 1))


def test_batches_never_leave_a_lone_host() -> None:
    hosts = [f"h{i}" for i in range(101)]
    assert [len(b) for b in host_batches(hosts, 50)] == [34, 34, 33]
    assert [len(b) for b in host_batches(hosts[:51], 50)] == [26, 25]
    assert host_batches(["a"], 50) == [["a"]]


# ---- bad input: a message, never a traceback ----------------------------------------------

def test_unreachable_url() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = _cli("analyze", "--prometheus", f"http://127.0.0.1:{port}", *SPAN)
    assert res.exit_code == 2
    assert "cannot connect" in res.output and "Traceback" not in res.output


def test_auth_failure_names_the_variables(api: tuple[_Api, str]) -> None:
    state, url = api
    state.routes["/api/v1/"] = lambda _h, _f: (401, {"status": "error", "error": "denied"})
    res = _cli("analyze", "--prometheus", url, *SPAN)
    assert res.exit_code == 2
    assert "authentication failed (HTTP 401" in res.output
    assert "IOGAUGE_PROMETHEUS_BEARER_TOKEN" in res.output


def test_credentials_and_headers_are_sent(api: tuple[_Api, str]) -> None:
    state, url = api
    state.routes["/api/v1/label/"] = _ok([])
    res = _cli("import", "--prometheus", url, *SPAN, "--header", "X-Scope-OrgID=team-a",
               "--json", env={"IOGAUGE_PROMETHEUS_BEARER_TOKEN": "s3cret"})
    assert res.exit_code == 2
    _, headers = state.seen[0]
    assert headers["authorization"] == "Bearer s3cret"
    assert headers["x-scope-orgid"] == "team-a"
    res = _cli("analyze", "--prometheus", url, *SPAN, "--header", "Authorization=Bearer x")
    assert res.exit_code == 2 and "never from the command line" in res.output


def test_selector_matching_nothing(api: tuple[_Api, str]) -> None:
    state, url = api
    state.routes["/api/v1/label/instance/values"] = _ok([])
    res = _cli("analyze", "--prometheus", url, "--match", 'job="nope"', *SPAN)
    assert res.exit_code == 2
    assert 'no series node_disk_reads_completed_total{job="nope"}' in res.output


def test_range_without_data(api: tuple[_Api, str]) -> None:
    state, url = api
    state.routes["/api/v1/label/instance/values"] = _ok(["web1:9100"])
    state.routes["/api/v1/query_range"] = _ok({"resultType": "matrix", "result": []})
    res = _cli("import", "--prometheus", url, *SPAN, "--json")
    assert res.exit_code == 2
    assert "no window between" in res.output


def test_bad_options() -> None:
    url = "http://127.0.0.1:9"
    assert "needs --from and --to" in _cli("analyze", "--prometheus", url).output
    assert "not several" in _cli("analyze", "x.log", "--prometheus", url, *SPAN).output
    assert "--match goes with --prometheus" in _cli("analyze", "--match", "a=b").output
    res = _cli("analyze", "--prometheus", url, "--match", "{job=}", *SPAN)
    assert res.exit_code == 2 and "--match" in res.output
    res = _cli("report", "--prometheus", "ftp://x", *SPAN)
    assert res.exit_code == 2 and "expected an http:// or https:// URL" in res.output


def test_retries_then_gives_up(api: tuple[_Api, str]) -> None:
    state, url = api
    calls = {"n": 0}
    matrix = {"resultType": "matrix", "result": [
        {"metric": {"instance": "a", "device": "sda"}, "values": [[1.0, "2"]]}]}

    def flaky(_h: dict[str, str], _f: str) -> tuple[int, Any]:
        calls["n"] += 1
        if calls["n"] <= 2:
            return 503, {"status": "error", "error": "overloaded"}
        return 200, {"status": "success", "data": matrix}

    state.routes["/api/v1/query_range"] = flaky
    waits: list[float] = []
    client = PromClient(url, sleep=waits.append, env={})
    assert client.query_range("up", 0, 60, 60) == matrix["result"]
    assert waits == [1.0, 2.0]
    state.routes["/api/v1/query_range"] = lambda _h, _f: (503, {"status": "error",
                                                               "error": "overloaded"})
    with pytest.raises(SourceError, match=r"HTTP 503.*overloaded; gave up after 5 tries"):
        client.query_range("up", 0, 60, 60)


# ---- the engine's increases to iostat's columns -----------------------------------------

#: Increases per 60 s window as the engine returns them, in node_exporter's units.
_INCREASES = {
    "node_disk_reads_completed_total": 600.0,
    "node_disk_reads_merged_total": 200.0,
    "node_disk_read_bytes_total": 600 * 4096.0,
    "node_disk_read_time_seconds_total": 3.0,
    "node_disk_writes_completed_total": 0.0,
    "node_disk_writes_merged_total": 0.0,
    "node_disk_written_bytes_total": 0.0,
    "node_disk_write_time_seconds_total": 0.0,
    "node_disk_io_time_seconds_total": 30.0,
    "node_disk_io_time_weighted_seconds_total": 60.0,
    "node_disk_io_now": 2.0,
}
_CPU_SECONDS = {"user": 30.0, "system": 10.0, "irq": 5.0, "idle": 75.0}
_T0 = T0.timestamp()


def _engine(_h: dict[str, str], form: str) -> tuple[int, Any]:
    """A query API that answers each of iogauge's queries with the matrix its metric would
    give: windows ending at 1-5 min, the 3-min window missing (a scrape gap)."""
    from urllib.parse import parse_qs

    q = parse_qs(form)["query"][0]
    ends = [_T0 + 60 * k for k in (1, 2, 4, 5)]
    if "node_cpu_seconds_total" in q:
        result = [{"metric": {"instance": "web1:9100", "mode": mode},
                   "values": [[t, str(v)] for t in ends]} for mode, v in _CPU_SECONDS.items()]
    else:
        metric = next((m for m in _INCREASES if m + "{" in q), None)
        result = [] if metric is None else [
            {"metric": {"instance": "web1:9100", "device": "sda"},
             "values": [[t, str(_INCREASES[metric])] for t in ends]}]
    return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


def test_increases_become_iostat_columns(api: tuple[_Api, str]) -> None:
    """sysstat's formulas [sysstat] applied to the engine's increases, in the kernel's units:
    r_await = 3 s x 1000 / 600 reads, rareq-sz = 2.4 MiB / 600 / 1024, %util = 30 s / 60 s,
    aqu-sz = 60 / 60; an idle direction gives 0.00 like sysstat, an absent counter (no
    discards before 4.18) null; the gap window is a row of nulls; CPU shares sum modes as
    iostat does (system + irq)."""
    state, url = api
    state.routes["/api/v1/label/instance/values"] = _ok(["web1:9100"])
    state.routes["/api/v1/query_range"] = _engine
    state.routes["/api/v1/query"] = _ok({"resultType": "vector", "result": []})
    res = _cli("import", "--prometheus", url, "--from", "2026-11-22T00:00",
               "--to", "2026-11-22T00:05", "--json")
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert [r["ts"][11:16] for r in rows] == ["00:01", "00:02", "00:03", "00:04", "00:05"]
    row = rows[0]
    assert row["host"] == "web1:9100" and row["device"] == "sda"
    assert row["r_iops"] == pytest.approx(10.0)
    assert row["r_merged_ps"] == pytest.approx(200 / 60)
    assert row["r_rqm_pct"] == pytest.approx(25.0)
    assert row["r_await_ms"] == pytest.approx(5.0)
    assert row["r_areq_kB"] == pytest.approx(4.0)
    assert row["r_kBps"] == pytest.approx(40.0)
    assert row["await_ms"] == pytest.approx(5.0) and row["iops"] == pytest.approx(10.0)
    assert row["w_await_ms"] == 0.0 and row["w_iops"] == 0.0
    # (the JSON rows leave out a column that is null throughout)
    assert row.get("d_iops") is None and row.get("f_await_ms") is None
    assert row["util_pct"] == pytest.approx(50.0) and row["aqu_sz"] == pytest.approx(1.0)
    assert row["inflight"] == 2.0
    assert row["cpu_user_pct"] == pytest.approx(25.0)
    assert row["cpu_system_pct"] == pytest.approx(12.5)
    assert row["cpu_idle_pct"] == pytest.approx(62.5)
    assert row.get("cpu_iowait_pct") is None
    gap = rows[2]
    assert all(gap.get(c) is None for c in ("r_iops", "r_await_ms", "util_pct", "inflight",
                                        "cpu_user_pct"))
