"""One writer per store: an advisory lock file beside the store.

Why: two daemons (or a daemon and ``wikid index``) writing one store would each
diff against a mirror the other is changing, and the store would stop equalling
a fresh build. The lock is ``flock`` on a file wikid creates in the store's own
folder; the kernel drops it when the process dies, so a crash never leaves a
stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_FILE = "wikid.lock"
_HELD: set[str] = set()  # the folders whose lock this process holds


def held(folder: Path) -> bool:
    """Does this process hold the writer lock of the store in ``folder``?"""
    return str(folder.resolve()) in _HELD


class StoreBusy(RuntimeError):
    """Another process holds the store's writer lock."""


class StoreLock:
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / LOCK_FILE
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "?"
            self.release()
            raise StoreBusy(
                f"another wikid process (pid {holder}) is writing the store in {folder}; "
                "stop it first (wikid status tells which daemon)"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)
        self._folder = str(folder.resolve())
        _HELD.add(self._folder)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
            _HELD.discard(getattr(self, "_folder", ""))
