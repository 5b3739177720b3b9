"""structlog set-up: JSON lines for journald, a readable console on a terminal.

Why stderr and JSON when not on a TTY: under systemd stderr goes to the journal,
and one JSON object per line keeps every batch's fields (what changed, how long)
machine-readable with ``journalctl -o cat | jq``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any

import structlog

REPEAT_WINDOW_S = 60.0
REPEAT_MAX = 5  # the same event at the same level at most this often per window


class RateLimit:
    """A structlog processor that lets the same warning or error through at most
    ``REPEAT_MAX`` times a minute, then once more with how many were dropped: a
    hostile vault or client must not fill the journal."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def __call__(
        self, _: Any, method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        if method not in ("warning", "error"):
            return event
        key, now = (method, str(event.get("event"))), time.monotonic()
        start, count = self._seen.get(key, (now, 0))
        if now - start > REPEAT_WINDOW_S:
            if count > REPEAT_MAX:
                event["dropped_before"] = count - REPEAT_MAX
            start, count = now, 0
        self._seen[key] = (start, count + 1)
        if count >= REPEAT_MAX:
            raise structlog.DropEvent
        return event


def configure(level: str = "info", *, json_lines: bool | None = None) -> None:
    # watchdog warns once per unreadable folder and event-queue hiccup: errors only.
    logging.getLogger("watchdog").setLevel(logging.ERROR)
    use_json = not sys.stderr.isatty() if json_lines is None else json_lines
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            RateLimit(),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


class Progress:
    """Long work, shown with a total, a rate and an ETA: a tqdm bar on a terminal,
    else a structlog ``progress`` event every ``EVERY_S`` seconds (the journal).
    ``update(done, total)`` is the store's embedding callback; a full reconcile also
    gives ``kinds={name: (done, total)}`` in the order they are embedded, and each
    kind then has its own ETA: when meaning search is whole, not only when all is."""

    EVERY_S = 5.0

    def __init__(self, phase: str, *, live: bool) -> None:
        self.phase, self.live = phase, live
        self.done = self.total = 0
        self.started = self._logged = time.monotonic()
        self._bar: Any = None
        self.kinds: dict[str, tuple[int, int]] = {}

    def update(
        self, done: int, total: int, kinds: dict[str, tuple[int, int]] | None = None
    ) -> None:
        if done < self.done:  # a new batch: start over
            self.started = time.monotonic()
        self.done, self.total = done, total
        self.kinds = kinds or {}
        if self.live:
            if self._bar is None:
                from tqdm import tqdm

                self._bar = tqdm(total=total, desc=self.phase, unit="text", file=sys.stderr)
            self._bar.total = total
            self._bar.n = done
            self._bar.refresh()
        elif time.monotonic() - self._logged >= self.EVERY_S or done == total:
            self._logged = time.monotonic()
            structlog.get_logger("wikid").info("progress", **self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else None
        out: dict[str, Any] = {
            "phase": self.phase,
            "done": self.done,
            "total": self.total,
            "rate_per_s": round(rate, 1),
            "eta_s": None if eta is None else round(eta),
        }
        if self.kinds:
            out["kinds"] = kinds = {}
            left = 0  # a kind is done once it and every kind before it are
            for name, (done, total) in self.kinds.items():
                left += total - done
                kinds[name] = {
                    "done": done,
                    "total": total,
                    "eta_s": round(left / rate) if rate > 0 else None,
                }
        return out

    def line(self) -> str:
        """ "embedding 4,210/13,415, ETA 6 min (chunks and notes: ETA 2 min)" """
        d = self.as_dict()
        eta = "" if d["eta_s"] is None else f", ETA {_duration(d['eta_s'])}"
        kinds: dict[str, dict[str, Any]] = d.get("kinds", {})
        name, kind = next(iter(kinds.items()), ("", {}))
        if kind and kind["done"] < kind["total"] and kind["eta_s"] is not None:
            eta += f" ({name}: ETA {_duration(kind['eta_s'])})"
        return f"{self.phase} {self.done:,}/{self.total:,}{eta}"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
