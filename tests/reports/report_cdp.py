"""A minimal Chrome DevTools Protocol driver for the browser tests: Debian's headless Chromium over a websocket.

Launches `chromium` with a fresh profile and `--remote-debugging-port=0`, reads the port Chromium chose
from DevToolsActivePort, opens a page target with a flat session, records every network request the page
makes (Network.requestWillBeSent), evaluates JavaScript, sends real mouse events and takes full-page
screenshots. Chromium's own background traffic is switched off by flags; the process is always terminated
on close.
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import websocket

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
         "--disable-default-apps", "--disable-extensions", "--metrics-recording-only", "--mute-audio",
         "--hide-scrollbars", "--remote-debugging-port=0", "--remote-allow-origins=*"]


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("Debian package 'chromium' is not installed")


class Browser:
    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="hw-chromium-")
        self.proc = subprocess.Popen([chromium_binary(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        try:
            port, path = self._devtools_address()
            self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=timeout,
                                                  suppress_origin=True)
        except BaseException:
            self.close()
            raise

    def _devtools_address(self) -> tuple[int, str]:
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with code {self.proc.returncode} before DevTools was ready")
            if marker.exists():
                lines = marker.read_text().split("\n")
                if len(lines) >= 2 and lines[0].strip() and lines[1].strip():
                    return int(lines[0]), lines[1].strip()
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port in time")

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)
        raise TimeoutError(f"no reply to {method}")

    def wait_event(self, method: str, session: str, since: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for ev in self.events[since:]:
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return ev
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} event")
            reply = json.loads(self.ws.recv())
            if "method" in reply:
                self.events.append(reply)

    def new_page(self, width: int = 1360, height: int = 900) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session, width, height)
        self.send("Network.enable", {}, session)
        self.send("Page.enable", {}, session)
        self.send("Runtime.enable", {}, session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        return page

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                try:
                    self.ws.send(json.dumps({"id": 10**9, "method": "Browser.close", "params": {}}))
                except OSError:
                    pass
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str, width: int, height: int):
        self.browser, self.session, self.width, self.height = browser, session, width, height

    def navigate(self, url: str) -> None:
        since = len(self.browser.events)
        result = self.browser.send("Page.navigate", {"url": url}, self.session)
        if result.get("errorText"):
            raise RuntimeError(f"navigation to {url} failed: {result['errorText']}")
        self.browser.wait_event("Page.loadEventFired", self.session, since)
        self.evaluate("new Promise(r => setTimeout(r, 150))", await_promise=True)  # late requests, if any

    def requested_urls(self) -> list[str]:
        return [ev["params"]["request"]["url"] for ev in self.browser.events
                if ev.get("sessionId") == self.session and ev.get("method") == "Network.requestWillBeSent"]

    def evaluate(self, expression: str, await_promise: bool = False) -> Any:
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": await_promise}, self.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"javascript error: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def mouse(self, kind: str, x: float, y: float, *, pressed: bool = False) -> None:
        """A real mouse event at viewport coordinates: kind mouseMoved / mousePressed / mouseReleased
        (the left button; `pressed`: it is held down while moving)."""
        params: dict[str, Any] = {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" or pressed
                                  else "none", "buttons": 1 if pressed or kind == "mousePressed" else 0}
        if kind in ("mousePressed", "mouseReleased"):
            params["clickCount"] = 1
        self.browser.send("Input.dispatchMouseEvent", params, self.session)

    def click_at(self, x: float, y: float) -> None:
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y)
        self.mouse("mouseReleased", x, y)

    def screenshot(self, path: Path, *, full_page: bool = True, max_height: int = 16000) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.browser.send("Page.getLayoutMetrics", {}, self.session)
            height = min(int(metrics["cssContentSize"]["height"]) + 1, max_height)
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.browser.send("Page.captureScreenshot", params, self.session)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def screenshot_element(self, selector: str, path: Path, *, pad: int = 8) -> Path:
        """A screenshot of one element (by CSS selector), e.g. a section of the report."""
        box = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                            ".getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; })()")
        x, y, w, h = box
        params = {"format": "png", "captureBeyondViewport": True,
                  "clip": {"x": max(0, x - pad), "y": max(0, y - pad), "width": w + 2 * pad, "height": h + 2 * pad,
                           "scale": 1}}
        data = self.browser.send("Page.captureScreenshot", params, self.session)["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
