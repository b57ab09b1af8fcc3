"""Headless Chromium driven over the DevTools protocol, for tests and benchmarks of the report.

No Python dependency: Chromium speaks the protocol on two pipes when started with
``--remote-debugging-pipe`` — it reads commands from file descriptor 3 and writes replies
and events to file descriptor 4, each message a JSON text followed by a NUL byte
(chrome/browser/devtools/devtools_pipe_handler.cc). Commands for a page go to the session
``Target.attachToTarget(flatten=True)`` returns.

The browser is also started so that it cannot reach the network even if a page tried:
every host name resolves to nothing (``--host-resolver-rules``) and any proxy use goes to
port 9 of the loopback (discard, nothing listens). Tests still record every request the page
makes (``Network.requestWillBeSent``) and assert there is none but the report file itself.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

#: Executable names of Chromium builds, Debian's first.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class CDPError(RuntimeError):
    """A DevTools command failed or the browser went away."""


def find_chromium() -> str | None:
    """The first Chromium on PATH (``IOGAUGE_CHROMIUM`` overrides), or None."""
    env = os.environ.get("IOGAUGE_CHROMIUM")
    if env:
        return env if Path(env).exists() or shutil.which(env) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Chromium:
    """One headless browser process; use as a context manager.

    Attributes:
        events: every protocol event received so far (dicts with ``method``, ``params`` and,
            for page events, ``sessionId``), in arrival order.
    """

    def __init__(self, exe: str, *, width: int = 1400, height: int = 1000) -> None:
        self.exe = exe
        self.size = (width, height)
        self.events: list[dict[str, Any]] = []
        self._next = 0
        self._buf = b""
        self._proc: subprocess.Popen[bytes] | None = None
        self._profile = ""
        self._w = self._r = -1
        self.stderr_path = ""

    # ---- process ---------------------------------------------------------------------------
    def __enter__(self) -> Chromium:
        self._profile = tempfile.mkdtemp(prefix="iogauge-chromium-")
        cmd_r, cmd_w = os.pipe()  # we write commands, Chromium reads fd 3
        ev_r, ev_w = os.pipe()  # Chromium writes fd 4, we read

        def child_fds() -> None:
            # Chromium insists on exactly fds 3 and 4; dup first so that a pipe end already
            # numbered 3 or 4 is not closed by the other dup2, and clear close-on-exec.
            a, b = os.dup(cmd_r), os.dup(ev_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        args = [self.exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps",
                "--metrics-recording-only", "--mute-audio", "--hide-scrollbars",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
                f"--user-data-dir={self._profile}",
                f"--window-size={self.size[0]},{self.size[1]}", "about:blank"]
        self.stderr_path = str(Path(self._profile) / "stderr.log")
        with Path(self.stderr_path).open("wb") as err:
            # preexec_fn is unsafe only with threads; the tests and benchmark have none
            self._proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                close_fds=False, preexec_fn=child_fds,  # noqa: PLW1509
                start_new_session=True)
        os.close(cmd_r)
        os.close(ev_w)
        self._w, self._r = cmd_w, ev_r
        self.send("Target.setDiscoverTargets", {"discover": True})
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        try:
            if proc.poll() is None:
                self.send("Browser.close", timeout=10, proc=proc)
        except (CDPError, OSError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            # the browser and its renderers share the session we started it in
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for fd in (self._w, self._r):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    # ---- protocol --------------------------------------------------------------------------
    def send(self, method: str, params: dict[str, Any] | None = None, *,
             session: str | None = None, timeout: float = 30.0,
             proc: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
        """Send one command and wait for its reply; returns the ``result`` object."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        try:
            os.write(self._w, json.dumps(msg).encode() + b"\0")
        except OSError as exc:
            raise CDPError(f"{method}: browser pipe closed ({exc})") from exc
        reply = self._wait(lambda m: m.get("id") == self._next, timeout, method,
                           proc or self._proc)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})  # type: ignore[no-any-return]

    def _read(self, timeout: float, what: str, proc: subprocess.Popen[bytes] | None) -> None:
        ready, _w, _x = select.select([self._r], [], [], max(0.0, timeout))
        if not ready:
            raise CDPError(f"{what}: no reply from the browser in time")
        chunk = os.read(self._r, 1 << 20)
        if not chunk:
            code = None if proc is None else proc.poll()
            raise CDPError(f"{what}: the browser exited (status {code}); see "
                           f"{self.stderr_path}")
        self._buf += chunk

    def _wait(self, match: Any, timeout: float, what: str,
              proc: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                m = json.loads(raw)
                if "id" not in m:
                    self.events.append(m)
                if match(m):
                    return m  # type: ignore[no-any-return]
            self._read(end - time.monotonic(), what, proc)

    def wait_event(self, method: str, session: str | None = None,
                   timeout: float = 30.0) -> dict[str, Any]:
        """The first event ``method`` (of ``session``) received from now on or already."""
        for e in self.events:
            if e.get("method") == method and (session is None or e.get("sessionId") == session):
                return e
        return self._wait(lambda m: m.get("method") == method
                          and (session is None or m.get("sessionId") == session),
                          timeout, f"waiting for {method}")

    # ---- pages -----------------------------------------------------------------------------
    def open(self, url: str, *, timeout: float = 60.0) -> str:
        """A new tab with Runtime, Log, Network and Page events on, navigated to ``url`` and
        loaded; returns its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = str(self.send("Target.attachToTarget", {"targetId": target,
                                                            "flatten": True})["sessionId"])
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.size[0], "height": self.size[1], "deviceScaleFactor": 1,
                   "mobile": False}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session, timeout)
        return session

    def evaluate(self, session: str, expression: str, *, timeout: float = 30.0) -> Any:
        """Evaluate a JavaScript expression in the page; returns its value (JSON-able)."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True}, session=session,
                      timeout=timeout)
        if "exceptionDetails" in r:
            raise CDPError(f"evaluate {expression!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, session: str, expression: str, *, timeout: float = 60.0) -> Any:
        """Poll ``expression`` until it is truthy; returns its value."""
        end = time.monotonic() + timeout
        while True:
            v = self.evaluate(session, expression)
            if v:
                return v
            if time.monotonic() > end:
                raise CDPError(f"{expression!r} still false after {timeout:g} s")
            time.sleep(0.05)

    def screenshot(self, session: str, path: Path, *, full_page: bool = True) -> Path:
        """A PNG of the page (the whole document when ``full_page``)."""
        # a tab that is not in front produces no frames: the capture would wait forever
        self.send("Page.bringToFront", session=session)
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics", session=session)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"],
                                "height": min(size["height"], 16000), "scale": 1})
        data = self.send("Page.captureScreenshot", params, session=session, timeout=60)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def pdf(self, session: str, path: Path) -> Path:
        """The page printed to PDF (print media, backgrounds on)."""
        self.send("Page.bringToFront", session=session)
        data = self.send("Page.printToPDF", {"printBackground": True, "preferCSSPageSize": True},
                         session=session, timeout=120)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def page_events(self, session: str, *methods: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("sessionId") == session
                and e.get("method") in methods]
