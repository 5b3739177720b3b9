"""The daemon's LLM extraction loop, beside its batches: the structural index never
waits for the LLM. The calls run outside the batch lock; what they bring is written
as one batch under it. Failed chunks are retried when their wait is over."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import structlog

from wikid.sync.index import Index
from wikid.sync.slices import Stopped

log = structlog.get_logger("wikid")
EXTRACT_SLICE = 64  # extraction calls per written batch on a cold start


async def extraction_loop(
    index: Callable[[], Index],
    wake: asyncio.Event,
    lock: asyncio.Lock,
    written: Callable[[], Awaitable[None]],
    failed: Callable[[Exception], None],
) -> None:
    """Run until cancelled. ``index()``: the daemon's index now (a reindex swaps it);
    ``wake``: set when new chunks may need the LLM; ``written()``: after each write
    (status counts); ``failed(exc)``: a write failed (the daemon marks itself behind
    and rescans: the cache keeps every answer, and the full reconcile writes them)."""
    while True:
        retry = index().next_extraction_retry()
        timeout = None if retry is None else max(0.05, retry - time.time())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout)
        wake.clear()
        try:
            await _once(index, wake, lock, written)
        except Stopped:  # the daemon is stopping: no failure to report
            return
        except Exception as exc:
            failed(exc)


async def _once(
    index: Callable[[], Index],
    wake: asyncio.Event,
    lock: asyncio.Lock,
    written: Callable[[], Awaitable[None]],
) -> None:
    current = index()
    jobs, more = current.extraction_jobs(EXTRACT_SLICE)
    if more:  # a cold start: write results as they come, not after hours
        wake.set()
    hashes = await current.run_extraction(jobs)
    if current is not index():
        wake.set()
    elif hashes:
        async with lock:
            report = await current.write_extracted(hashes)
            await written()
        log.info("extraction", chunks=len(hashes), writes=report.writes)
