"""MCP overhead benchmark: one tool call over MCP next to the same op over the
daemon's raw socket.

Run by hand: ``.venv/bin/python bench/bench_mcp.py [--runs 100]``. Starts a daemon
on a copy of the example vault and ``wikid mcp`` under the official SDK client
(stdio), then times ``links``, ``search`` and ``read_note`` both ways.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from daemontools import EXAMPLE, DaemonProc

CASES: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
    ("links", {"note": "Ada Lovelace"}, "links", {"note": "Ada Lovelace"}),
    ("search", {"text": "analytical engine"}, "search", {"text": "analytical engine", "k": 10}),
    ("read_note", {"path": "Welcome.md"}, "read", {"path": "Welcome.md"}),
]


async def _mcp_times(d: DaemonProc, runs: int) -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "wikid", "mcp", "--vault", str(d.vault), "--socket", str(d.socket)],
        env=dict(d.env),
    )
    out: dict[str, list[float]] = {}
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        for tool, args, _, _ in CASES:
            out[tool] = []
            for _ in range(runs):
                t = time.perf_counter()
                await s.call_tool(tool, args)
                out[tool].append((time.perf_counter() - t) * 1000)
    return out


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "benchvault"
        shutil.copytree(EXAMPLE, vault)
        d = DaemonProc(vault, Path(tmp)).start()
        try:
            socket_ms: dict[str, list[float]] = {}
            for tool, _, op, args in CASES:
                socket_ms[tool] = []
                for _ in range(runs):
                    t = time.perf_counter()
                    d.call(op, **args)
                    socket_ms[tool].append((time.perf_counter() - t) * 1000)
            mcp_ms = asyncio.run(_mcp_times(d, runs))
        finally:
            d.stop()
    print(f"{runs} calls each; daemon on the example vault")
    print(f"| {'tool':<10} | {'raw socket p50':>14} | {'MCP p50':>8} | {'MCP p99':>8} |")
    print(f"|{'-' * 12}|{'-' * 16}|{'-' * 10}|{'-' * 10}|")
    for tool in socket_ms:
        raw, over = socket_ms[tool], mcp_ms[tool]
        p99 = statistics.quantiles(over, n=100)[-1]
        print(
            f"| {tool:<10} | {statistics.median(raw):>11.2f} ms | "
            f"{statistics.median(over):>5.2f} ms | {p99:>5.2f} ms |"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    main(ap.parse_args().runs)
