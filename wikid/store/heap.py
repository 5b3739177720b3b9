"""Heap hygiene for a long-lived daemon: freed memory back to the OS (glibc), so RSS
follows the live data; and long-lived objects out of the cyclic collector's way.

Why: the ONNX runs allocate activations per run, in whichever malloc arena the
worker thread uses, and glibc keeps what they free. Measured on the MiniLM session
after 1,024 texts: +368 MB over the imports with default arenas, +219 MB with one
arena, and +122 MB after ``malloc_trim(0)`` (at the same speed). Elsewhere (musl,
macOS) these are no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

M_ARENA_MAX = -8  # glibc's mallopt parameter


@functools.cache
def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 (glibc only: AttributeError elsewhere)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def few_arenas(n: int = 2) -> None:
    """Cap malloc's per-thread arenas (before the threads that would make them)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, n)


def trim() -> None:
    """Return the heap's free pages to the OS (milliseconds)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


_paused = 0
_pause_lock = threading.Lock()


@contextmanager
def building() -> Iterator[None]:
    """No cyclic collection while a big structure that lives on is built (a graph of
    the whole vault; a cold start's slice, alive until it is written). Why: every
    object made then survives, so each collection the allocations trigger walks a
    growing heap for nothing: 0.5 s of a restart's 1.6 s graph build at 10k notes.
    Nests, and holds across threads: the collector is back on once the last builder is
    done, with what was built frozen (``gc.freeze``, as ``freeze_long_lived`` does), or
    the first collection after would walk all of it, holding the GIL (a 0.5 s stall of
    the event loop measured)."""
    global _paused
    with _pause_lock:
        _paused += 1
        gc.disable()
    try:
        yield
    finally:
        with _pause_lock:
            _paused -= 1
            if _paused == 0:
                gc.freeze()
                gc.enable()


def freeze_long_lived() -> None:
    """After a big load (the graph, the first sync): collect the young generations,
    then move every object left to the collector's permanent generation. Why: a
    13k-note graph is ~500k tracked objects, and each full collection walked them all
    (0.29 s measured), in the event loop, at moments set by allocation counts: the
    stalls of ``status`` and the slow queries. Not a full collection first: that is
    the same walk (a 353 ms stall measured at 13k). Frozen objects are still freed by
    reference counting (the graph's notes and edge dicts hold no cycles); only cyclic
    garbage among them would stay."""
    gc.collect(1)
    gc.freeze()
    trim()
