"""structlog set-up: JSON lines for journald, a readable console on a terminal.

Why stderr and JSON when not on a TTY: under systemd stderr goes to the journal,
and one JSON object per line keeps every batch's fields (what changed, how long)
machine-readable with ``journalctl -o cat | jq``.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "info", *, json_lines: bool | None = None) -> None:
    use_json = not sys.stderr.isatty() if json_lines is None else json_lines
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
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
