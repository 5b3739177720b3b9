"""The loop-stall monitor names what blocked the event loop."""

from __future__ import annotations

import asyncio
import threading
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


def _holds_the_gil(until: float) -> None:
    n = 0
    while time.monotonic() < until:  # pure Python: it runs whenever the loop waits
        n += 1


def test_a_stall_names_the_other_thread_that_ran_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop waiting in harmless code is waiting for the GIL: the report names the
    busy threads beside it (an import, a model load), not only the loop's stack."""
    monkeypatch.setenv("WIKID_STALL_MS", "100")

    async def main() -> None:
        monitor = stalls.watch()
        assert monitor is not None
        await asyncio.sleep(0.1)
        busy = threading.Thread(target=_holds_the_gil, args=(time.monotonic() + 0.6,))
        busy.start()
        _blocks_the_loop()
        busy.join()
        await asyncio.sleep(0.2)
        monitor.stop()

    with capture_logs() as logs:
        asyncio.run(main())
    found = [e for e in logs if e["event"] == "loop stall"]
    assert found and any("_holds_the_gil" in s for e in found for s in e["others"]), found


def test_a_stall_names_the_collections_that_ran_during_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full collection walks every object not frozen, holding the GIL, and shows in no
    thread's stack: the report lists the collections that overlapped the stall."""
    import gc

    monkeypatch.setenv("WIKID_STALL_MS", "100")
    garbage = [[] for _ in range(200_000)]  # a heap for the collection to walk
    for i in range(len(garbage) - 1):
        garbage[i].append(garbage[i + 1])

    async def main() -> None:
        monitor = stalls.watch()
        assert monitor is not None
        await asyncio.sleep(0.1)
        gc.collect()  # the loop's own, during the stall below
        _blocks_the_loop()
        await asyncio.sleep(0.2)
        monitor.stop()

    with capture_logs() as logs:
        asyncio.run(main())
    found = [e for e in logs if e["event"] == "loop stall"]
    assert len(found) == 1, logs
    assert 2 in [c["generation"] for c in found[0]["gc"]], found
    del garbage
