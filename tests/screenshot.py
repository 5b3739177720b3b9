"""A screenshot of LightRAG's WebUI on its Knowledge Graph tab, by headless Chromium
(Debian's package) driven over the DevTools protocol: the tab is WebUI state kept in
localStorage, so it is set there before the page loads its graph."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websockets
from servertools import free_port

SETTINGS = {"state": {"currentTab": "knowledge-graph", "queryLabel": "*"}, "version": 22}


async def _cdp(ws_url: str, page: str, out: Path, settle_s: float) -> None:
    async with websockets.connect(ws_url, max_size=64 * 2**20) as ws:
        ids = iter(range(1, 10_000))

        async def call(method: str, **params: Any) -> dict[str, Any]:
            n = next(ids)
            await ws.send(json.dumps({"id": n, "method": method, "params": params}))
            while True:
                msg = json.loads(await ws.recv())
                if msg.get("id") == n:
                    return msg.get("result", {})  # type: ignore[no-any-return]

        await call("Page.enable")
        await call("Page.navigate", url=page)
        await asyncio.sleep(2)
        js = f"localStorage.setItem('settings-storage', {json.dumps(json.dumps(SETTINGS))})"
        await call("Runtime.evaluate", expression=js)
        await call("Page.reload")
        await asyncio.sleep(settle_s)
        shot = await call("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))


def webui_graph(browser: str, page: str, out: Path, settle_s: float = 8.0) -> Path:
    """Write a PNG of the WebUI's graph view at ``page`` to ``out``."""
    port = free_port()
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.Popen(
            [
                browser,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1400,900",
                f"--remote-debugging-port={port}",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its helpers too, so that all of them can be ended
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2) as r:
                        targets = json.loads(r.read())
                    ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
                    break
                except (OSError, StopIteration):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            asyncio.run(_cdp(ws_url, page, out, settle_s))
        finally:
            _end_group(proc)
    return out


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """End the browser and every helper it started before its profile is removed: a
    helper still writing there made the removal fail ("Directory not empty")."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline + 2:  # (a helper left a zombie counts as there)
        try:
            os.killpg(proc.pid, signal.SIGKILL if time.monotonic() > deadline else 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
