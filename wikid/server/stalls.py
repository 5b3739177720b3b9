"""A loop-stall monitor: when the event loop stops answering, log what it was running.

Why: ``status`` must answer within 100 ms, and a stall shows only as a slow reply
from outside. This thread samples the loop thread's stack while the loop is late
and logs the stacks seen most, so a stall names its cause in the daemon's own log
(``loop stall``: how long, and the innermost wikid and library frames; and, as
``others``, what the other threads ran meanwhile: a loop seen waiting in ``select``
or in harmless code is waiting for the GIL, and one of those holds it; and, as
``gc``, the cyclic collections that ran during the stall, in whatever thread: a full
collection walks every object not frozen, holding the GIL, and shows in no stack). It
is off unless ``WIKID_STALL_MS`` is set (a thread waking every few ms costs a laptop's
battery); the benchmarks set it.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import sys
import threading
import time
import traceback
from types import FrameType

import structlog

log = structlog.get_logger("wikid")
DEPTH = 6  # frames kept per sample, innermost first


def threshold_ms() -> float | None:
    """``WIKID_STALL_MS`` as a number, or None when unset or not a positive number."""
    try:
        ms = float(os.environ.get("WIKID_STALL_MS", ""))
    except ValueError:
        return None
    return ms if ms > 0 else None


def _stack(frame: FrameType) -> str:
    """The innermost frames, importlib's left out: an import shows as the line that
    imports."""
    frames = [f for f in traceback.extract_stack(frame) if not f.filename.startswith("<frozen")]
    inner = frames[-DEPTH:][::-1]
    return " < ".join(f"{f.name} ({f.filename.rsplit('/', 2)[-1]}:{f.lineno})" for f in inner)


# Innermost frames of a thread that waits (a pool worker, a queue, a lock): not the
# one holding the GIL.
_IDLE = ("wait", "get", "_worker", "select", "poll", "sleep", "acquire")


def _busy_stacks(frames: dict[int, FrameType], skip: set[int]) -> list[str]:
    return [
        _stack(frame)
        for ident, frame in frames.items()
        if ident not in skip and frame.f_code.co_name not in _IDLE
    ]


class StallMonitor:
    """``start()`` from the loop thread; ``stop()`` at shutdown."""

    def __init__(self, limit_ms: float) -> None:
        self.limit = limit_ms / 1000
        self.beat = time.monotonic()
        self._loop_thread = 0  # set by start(), in the loop thread
        self._done = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._watch, name="wikid-stalls", daemon=True)
        # The collector's recent runs: (start, end, generation, objects collected).
        self._collections: collections.deque[tuple[float, float, int, int]] = collections.deque(
            maxlen=256
        )
        self._collecting = 0.0

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._task = asyncio.get_running_loop().create_task(self._heartbeat())
        gc.callbacks.append(self._collected)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)
        if self._task is not None:
            self._task.cancel()

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        """``gc.callbacks``: run by the collecting thread, which holds the GIL."""
        if phase == "start":
            self._collecting = time.monotonic()
        else:
            item = (self._collecting, time.monotonic(), info["generation"], info["collected"])
            self._collections.append(item)

    def _collections_in(self, start: float, end: float) -> list[dict[str, float]]:
        return [
            {"generation": g, "ms": round((b - a) * 1000, 1), "collected": n}
            for a, b, g, n in list(self._collections)
            if b >= start and a <= end and (b - a) * 1000 >= 1.0  # a young one: noise
        ]

    async def _heartbeat(self) -> None:
        step = self.limit / 4
        while True:
            self.beat = time.monotonic()
            await asyncio.sleep(step)

    def _watch(self) -> None:
        step = self.limit / 4
        samples: collections.Counter[str] = collections.Counter()
        others: collections.Counter[str] = collections.Counter()
        stalled_since: float | None = None
        skip = {self._loop_thread, threading.get_ident()}
        while not self._done.wait(step):
            late = time.monotonic() - self.beat
            if late > self.limit:
                stalled_since = stalled_since or self.beat
                frames = sys._current_frames()
                frame = frames.get(self._loop_thread)
                if frame is not None:
                    samples[_stack(frame)] += 1
                others.update(_busy_stacks(frames, skip))
            elif stalled_since is not None:
                log.info(
                    "loop stall",
                    ms=round((self.beat - stalled_since) * 1000),
                    top=[f"{n}x {s}" for s, n in samples.most_common(3)],
                    others=[f"{n}x {s}" for s, n in others.most_common(3)],
                    gc=self._collections_in(stalled_since, self.beat),
                )
                samples.clear()
                others.clear()
                stalled_since = None


def watch() -> StallMonitor | None:
    """From the loop thread: start a monitor if ``WIKID_STALL_MS`` asks for one. Its
    thread is a daemon thread and its heartbeat a task, so both end with the loop."""
    ms = threshold_ms()
    if ms is None:
        return None
    monitor = StallMonitor(ms)
    monitor.start()
    return monitor
