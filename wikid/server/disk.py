"""Room on the disk that holds the store: what a full disk means for the daemon.

Why its own module: a batch on a full disk embeds its texts, fails at COMMIT and loses
the vectors with the rollback, at every retry (a 1,000-note burst took 258 s to catch
up once space was freed). So a batch first checks that there is room (``check``), a
failure says "disk full" with the folder, and a retry wakes as soon as space is freed
(``wait_for_room``) instead of sleeping out its backoff.
"""

from __future__ import annotations

import asyncio
import errno
import shutil
import time
from collections.abc import Callable
from pathlib import Path

ROOM = 1 << 20  # bytes free below which a batch waits, and freed that end a retry's wait


def free(folder: Path) -> int:
    """Bytes free for an unprivileged writer on ``folder``'s file system (0: unknown)."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0


def is_full(exc: BaseException) -> bool:
    """Did a write fail for want of space (SQLite's "database or disk is full", ENOSPC)?"""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return "disk is full" in str(exc) or "No space left" in str(exc)


async def check(folder: Path) -> None:
    """Raise ENOSPC before a batch starts work it could not commit."""
    if await asyncio.to_thread(free, folder) < ROOM:
        raise OSError(errno.ENOSPC, "less than 1 MiB free for the store")


async def wait_for_room(folder: Path, seconds: float, stopping: Callable[[], bool]) -> None:
    """Wait up to ``seconds``, or until ``folder``'s file system has more room than now."""
    room = await asyncio.to_thread(free, folder)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stopping():
        await asyncio.sleep(min(0.5, seconds))
        if await asyncio.to_thread(free, folder) > room + ROOM:
            return
