"""The loop-stall monitor names what blocked the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest
from structlog.testing import capture_logs

from wikid.server import stalls


def _blocks_the_loop() -> None:
    time.sleep(0.4)


def test_a_stall_is_logged_with_the_function_that_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WIKID_STALL_MS", "100")

    async def main() -> None:
        monitor = stalls.watch()
        assert monitor is not None
        await asyncio.sleep(0.1)
        _blocks_the_loop()
        await asyncio.sleep(0.2)  # the loop is back: the monitor reports the stall
        monitor.stop()

    with capture_logs() as logs:
        asyncio.run(main())
    found = [e for e in logs if e["event"] == "loop stall"]
    assert len(found) == 1, logs
    assert found[0]["ms"] >= 300
    assert "_blocks_the_loop" in found[0]["top"][0]


def test_no_monitor_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WIKID_STALL_MS", raising=False)
    assert stalls.threshold_ms() is None
    monkeypatch.setenv("WIKID_STALL_MS", "soon")
    assert stalls.threshold_ms() is None
