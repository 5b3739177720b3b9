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
