"""Start ``wikid lightrag-server`` (LightRAG's real API server and WebUI on a wikid
store) on a free loopback port, and talk to it with httpx."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LightRAGServer:
    def __init__(
        self, args: list[str], tmp: Path, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.port = free_port()
        self.log = tmp / f"lightrag-server-{self.port}.log"
        cmd = [sys.executable, "-m", "wikid", "lightrag-server", *args]
        cmd += ["--port", str(self.port), "--host", "127.0.0.1"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=log, cwd=cwd or tmp, env=env or dict(os.environ)
            )
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.url, timeout=60)

    def wait(self, timeout: float = 120) -> LightRAGServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                if self.http.get("/health").status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"server never answered: {self.log.read_text()[-3000:]}")

    def query_data(self, question: str, mode: str, hl: list[str], ll: list[str]) -> dict[str, Any]:
        body = {
            "query": question,
            "mode": mode,
            "hl_keywords": hl,
            "ll_keywords": ll,
            "enable_rerank": False,
        }
        r = self.http.post("/query/data", json=body)
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()["data"]
        return data

    def stop(self) -> None:
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> LightRAGServer:
        return self.wait()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def paths_in(data: dict[str, Any]) -> set[str]:
    """The vault paths that ``/query/data``'s entities, relations and chunks cite."""
    out: set[str] = set()
    for key in ("entities", "relationships", "chunks"):
        for item in data.get(key, []):
            out.update(p for p in str(item.get("file_path") or "").split("<SEP>") if p)
    return out


def chromium() -> str | None:
    return (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
