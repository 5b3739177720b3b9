"""File-system events in, debounced batches of vault paths out.

Why paths and not events: the graph's ``update(paths)`` looks at the disk
itself, so an event only has to say *where* to look. That makes every editor
trick (atomic save through a temp file and a rename, swap files, case-only
renames, a whole folder moved) the same simple case, and a lost or
misordered event is harmless as long as the path is named once.

The quiet window adapts: a lone save (its events, an atomic save's temp file
and rename included, all within ``QUICK_S``) is taken after ``QUICK_S`` of
quiet, so it shows in tens of milliseconds; a burst that goes on longer (a git
checkout, a sync tool) waits for the full ``debounce`` window and coalesces
into one batch.

Nothing is ever missed: a stat-based reconciliation scan runs every
``reconcile_interval`` seconds, and if the pending set outgrows its bound
(an event storm, or the OS queue overflowing) it is dropped and replaced by
one full rescan.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import structlog
from watchdog.events import (
    EVENT_TYPE_EVENTS_LOST,
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    EventsLostEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from wikid.core.vault import VaultFilter

QUICK_S = 0.04  # quiet that ends a lone save's burst
log = structlog.get_logger("wikid")


def quiet_needed(first: float, last: float, window: float) -> float:
    """How long the queue must stay quiet before it is taken: a burst that spans
    less than ``QUICK_S`` is one save; a longer one waits for the whole window."""
    quick = min(QUICK_S, window)
    return quick if last - first < quick else window


# What watchdog passes on: changes (attributes too: a note or folder made readable
# again), never
# - a file opened or closed unwritten: two events for each file wikid itself reads (a
#   rescan reads every changed note), which the kernel's queue held, and overflowed:
#   with a 16-event queue a rescan's own reads set off the next rescan, for five
#   minutes;
# - a folder modified: watchdog adds one for the parent folder to every file's save,
#   create, delete and move, beside the event naming that file. Queued, the folder was
#   walked and every note in it read again: 1.3 s a save in a real vault's 1,000-note
#   folder. A folder created, moved, deleted or whose attributes changed is still named.
EVENTS = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirAttribEvent,
    DirDeletedEvent,
    DirMovedEvent,
    EventsLostEvent,
]


class Watcher(FileSystemEventHandler):
    def __init__(
        self, root: Path, filt: VaultFilter, *, debounce: float = 0.3, max_queue: int = 100_000
    ) -> None:
        self.root = root.resolve()
        self.filter = filt
        self.debounce = debounce
        self.max_queue = max_queue
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._first_event: float | None = None
        self._last_event = 0.0
        self._rescan = False
        self.overflows = 0  # times the OS dropped events (each one led to a full rescan)
        self.last_overflow: float | None = None
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._observer = Observer()

    # -- lifecycle ----------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._observer.schedule(self, str(self.root), recursive=True, event_filter=EVENTS)
        self._observer.start()

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)

    # -- watchdog thread ----------------------------------------------------------

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type == EVENT_TYPE_EVENTS_LOST:
            # The kernel's queue overflowed (a git checkout, a sync tool: past
            # fs.inotify.max_queued_events): which files changed is lost, so the next
            # batch is one full rescan, and status and the log say so.
            with self._lock:
                self.overflows += 1
                self.last_overflow = time.time()
            log.warning("the file-system event queue overflowed; rescanning the vault")
            self.request_rescan()
            return
        paths = [event.src_path, getattr(event, "dest_path", "")]
        rels = [r for r in (self._relative(p) for p in paths if p) if r is not None]
        if rels:
            self.add(rels)

    def _relative(self, path: str | bytes) -> str | None:
        text = os.fsdecode(path)
        try:
            rel = Path(text).relative_to(self.root).as_posix()
        except ValueError:
            return None
        if rel in ("", ".") or self.filter.ignored(rel):
            return None
        return rel

    def add(self, rels: list[str]) -> None:
        """Queue paths (thread-safe); wakes the batch loop."""
        now = time.monotonic()
        with self._lock:
            if not self._rescan:
                self._pending.update(rels)
                if len(self._pending) > self.max_queue:
                    self._pending.clear()
                    self._rescan = True
            if self._first_event is None:
                self._first_event = now
            self._last_event = now
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    def request_rescan(self) -> None:
        with self._lock:
            self._pending.clear()
            self._rescan = True
            self._first_event = self._first_event or time.monotonic()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    # -- asyncio side ---------------------------------------------------------------

    def pending(self) -> set[str]:
        """The paths waiting for a batch (a copy)."""
        with self._lock:
            return set(self._pending)

    @property
    def alive(self) -> bool:
        """The observer thread still runs (the heartbeat status reports)."""
        return self._observer.is_alive()

    @property
    def last_event(self) -> float | None:
        """Wall-clock time of the last file-system event seen, if any."""
        with self._lock:
            if not self._last_event:
                return None
            return time.time() - (time.monotonic() - self._last_event)

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._pending)

    @property
    def lag(self) -> float:
        """Seconds since the oldest change not yet taken into a batch."""
        with self._lock:
            return time.monotonic() - self._first_event if self._first_event else 0.0

    def _quiet_for(self) -> float:
        """Seconds the queue must still stay quiet before it may be taken (<= 0: now)."""
        with self._lock:
            first = self._first_event or self._last_event
            needed = quiet_needed(first, self._last_event, self.debounce)
            return needed - (time.monotonic() - self._last_event)

    def _take(self, edits_only: bool = False) -> tuple[set[str], bool]:
        """Empty the queue; ``edits_only``: unless a full rescan is asked for (then
        nothing is taken)."""
        with self._lock:
            if edits_only and self._rescan:
                return set(), False
            paths, rescan = self._pending, self._rescan
            self._pending, self._rescan, self._first_event = set(), False, None
            self._wake.clear()
        return paths, rescan

    def due(self) -> bool:
        """Edits (not a full rescan) wait and their quiet window has passed: a batch
        that ``take`` would return now."""
        with self._lock:
            waiting = bool(self._pending) and not self._rescan
        return waiting and self._quiet_for() <= 0

    def take(self) -> set[str]:
        """The waiting paths, now (after ``due``): for edits let in during a long sync.
        A full rescan asked for meanwhile is left to ``next_batch``, with its paths."""
        return self._take(edits_only=True)[0]

    async def next_batch(self) -> tuple[set[str], bool]:
        """Wait for a quiet window after some events; return (paths, full_rescan)."""
        while True:
            await self._wake.wait()
            while (wait := self._quiet_for()) > 0:
                await asyncio.sleep(wait)
            paths, rescan = self._take()
            if paths or rescan:
                return paths, rescan
