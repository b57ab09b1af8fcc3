"""The query API of Prometheus and VictoriaMetrics, over the standard library's urllib.

No HTTP package is among iogauge's dependencies and the API needs none: form-encoded POSTs
(a batch's host regex can be long) answered with JSON. Both engines serve the same
``/api/v1/query``, ``/api/v1/query_range`` and ``/api/v1/label/<name>/values`` endpoints.

Credentials come from the environment only, never from the command line (where ``ps`` and
shell history would show them): ``IOGAUGE_PROMETHEUS_BEARER_TOKEN``, or
``IOGAUGE_PROMETHEUS_USERNAME`` with ``IOGAUGE_PROMETHEUS_PASSWORD``.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iogauge.errors import SourceError

TOKEN_ENV = "IOGAUGE_PROMETHEUS_BEARER_TOKEN"  # noqa: S105 - a variable name
USER_ENV = "IOGAUGE_PROMETHEUS_USERNAME"
PASSWORD_ENV = "IOGAUGE_PROMETHEUS_PASSWORD"  # noqa: S105 - a variable name

#: HTTP statuses worth another try: the engine is overloaded or restarting (503), a proxy in
#: front of it timed out or lost it (502, 504), or a rate limit (429).
RETRY_STATUSES = frozenset({429, 502, 503, 504})


def auth_header(env: Mapping[str, str] | None = None) -> str | None:
    """The Authorization header the environment asks for, or None."""
    env = os.environ if env is None else env
    token = env.get(TOKEN_ENV)
    if token:
        return f"Bearer {token.strip()}"
    user = env.get(USER_ENV)
    if user:
        pair = f"{user}:{env.get(PASSWORD_ENV, '')}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")
    return None


def parse_headers(texts: Sequence[str]) -> dict[str, str]:
    """``--header K=V`` options (e.g. Mimir's ``X-Scope-OrgID=tenant1``) to a mapping."""
    out: dict[str, str] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise SourceError(f"--header {text!r}: expected NAME=VALUE, e.g. "
                              "X-Scope-OrgID=tenant1")
        if key.strip().lower() == "authorization":
            raise SourceError(f"--header {key.strip()}: credentials are read from "
                              f"${TOKEN_ENV} or ${USER_ENV}/${PASSWORD_ENV}, never from the "
                              "command line")
        out[key.strip()] = value.strip()
    return out


@dataclass
class PromClient:
    """One query API.

    Attributes:
        url: base URL (``http://prometheus:9090``; a path prefix such as ``/prometheus`` or
            VictoriaMetrics cluster's ``/select/0/prometheus`` is kept).
        headers: extra headers sent with every request (``--header``).
        timeout_s: per request; the engine is also told to stop at this time.
        retries: further tries after a 503-like status or a timeout.
        backoff_s: first wait between tries (doubled each time).
        sleep: how to wait (tests pass a recorder).
    """

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    env: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SourceError(f"--prometheus {self.url!r}: expected an http:// or https:// URL "
                              "such as http://localhost:9090")
        self.url = self.url.rstrip("/")
        auth = auth_header(self.env)
        if auth is not None:
            self.headers = {**self.headers, "Authorization": auth}

    # ---- endpoints ----------------------------------------------------------------------
    def query_range(self, query: str, start: float, end: float, step_s: float
                    ) -> list[dict[str, Any]]:
        """``/api/v1/query_range``: the matrix of series (``metric``, ``values``)."""
        data = self._call("/api/v1/query_range", {"query": query, "start": _ts(start),
                                                  "end": _ts(end), "step": _ts(step_s),
                                                  "timeout": f"{int(self.timeout_s)}s"})
        return _result(data, "matrix", query)

    def query(self, query: str, at: float) -> list[dict[str, Any]]:
        """``/api/v1/query``: the instant vector (``metric``, ``value``) at ``at``."""
        data = self._call("/api/v1/query", {"query": query, "time": _ts(at),
                                            "timeout": f"{int(self.timeout_s)}s"})
        return _result(data, "vector", query)

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        """``/api/v1/label/<label>/values`` of the series ``match`` selects in the span."""
        path = f"/api/v1/label/{urllib.parse.quote(label)}/values"
        data = self._call(path, {"match[]": match, "start": _ts(start), "end": _ts(end)},
                          method="GET")
        if not isinstance(data, list):
            raise SourceError(f"{self.url}{path}: unexpected answer {str(data)[:200]!r}")
        return [str(v) for v in data]

    # ---- transport ----------------------------------------------------------------------
    def _call(self, path: str, params: dict[str, str], method: str = "POST") -> Any:
        body = urllib.parse.urlencode(params).encode()
        url = self.url + path
        tries = self.retries + 1
        wait = self.backoff_s
        for attempt in range(1, tries + 1):
            # (http or https only: checked in __post_init__)
            req = (urllib.request.Request(url, data=body, method="POST")  # noqa: S310
                   if method == "POST"
                   else urllib.request.Request(f"{url}?{body.decode()}", method="GET"))  # noqa: S310
            if method == "POST":
                req.add_header("Content-Type", "application/x-www-form-urlencoded")
            for k, v in self.headers.items():
                req.add_header(k, v)
            retry_why = self._once(req, url)
            if not isinstance(retry_why, _Retry):
                return retry_why
            if attempt == tries:
                raise SourceError(f"{url}: {retry_why.reason}; gave up after {tries} tries "
                                  "(the server is overloaded or restarting: try again later, a "
                                  "shorter --from/--to span, or a narrower --match)")
            self.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, req: urllib.request.Request, url: str) -> Any:
        """The decoded ``data`` of one request, or a :class:`_Retry` saying why to retry."""
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - http(s) only, checked above
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = _api_error(exc.read())
            if exc.code in RETRY_STATUSES:
                return _Retry(f"HTTP {exc.code} {exc.reason}{detail}")
            if exc.code in (401, 403):
                raise SourceError(f"{url}: authentication failed (HTTP {exc.code}{detail}); "
                                  f"credentials are read from ${TOKEN_ENV}, or "
                                  f"${USER_ENV} and ${PASSWORD_ENV}") from None
            if exc.code == 404:
                raise SourceError(f"{url}: not found (HTTP 404): is this the base URL of a "
                                  "Prometheus or VictoriaMetrics query API?") from None
            raise SourceError(f"{url}: HTTP {exc.code} {exc.reason}{detail}") from None
        except TimeoutError:
            return _Retry(f"no answer within {self.timeout_s:g} s")
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                return _Retry(f"no answer within {self.timeout_s:g} s")
            raise SourceError(f"{url}: cannot connect ({exc.reason}); check the "
                              "--prometheus URL") from None
        except (ConnectionError, OSError) as exc:
            return _Retry(f"connection lost ({exc})")
        try:
            doc = json.loads(raw)
        except ValueError:
            raise SourceError(f"{url}: the answer is not JSON (is this a Prometheus query "
                              f"API?): {raw[:120]!r}") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            raise SourceError(f"{url}: the query failed{_api_error(raw)}")
        return doc.get("data")


@dataclass(frozen=True)
class _Retry:
    reason: str


def _ts(x: float) -> str:
    return f"{x:.3f}"


def _api_error(raw: bytes) -> str:
    """The API's own error text, when the body carries one."""
    try:
        doc = json.loads(raw)
    except ValueError:
        text = raw[:200].decode("utf-8", "replace").strip()
        return f": {text}" if text else ""
    if isinstance(doc, dict) and doc.get("error"):
        return f": {doc.get('errorType', 'error')}: {doc['error']}"
    return ""


def _result(data: Any, kind: str, query: str) -> list[dict[str, Any]]:
    if not isinstance(data, dict) or data.get("resultType") != kind:
        raise SourceError(f"query {query[:120]!r}: expected a {kind}, got "
                          f"{str(data)[:120]!r}")
    result = data.get("result")
    return result if isinstance(result, list) else []
