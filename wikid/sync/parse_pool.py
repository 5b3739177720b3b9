"""Many notes parsed in worker processes: a cold start reads every note of the vault.

Why processes: parsing is Python (the GIL), about a millisecond a note, so a cold
start of 50,000 notes read for 51 s on one core while the other waited (run AL). A
restart reads only what changed, and an edit a note or two: they stay in the calling
thread (``MIN_NOTES``).

Each note is read exactly as ``read_note`` reads it in process, with the same limits
(a worker holds one note's bytes at a time), so the notes are the same ones; a worker
that dies (killed, out of memory) costs speed, never notes: what it had not returned is
read in process. Workers are spawned, not forked: the daemon has threads (the model
loading, the stall sampler), and a fork copies their locks held. A worker imports
``wikid.core`` and structlog, no more. A spawned worker runs the parent's main module
again (under another name), so only the daemon asks for this (``Index.open``'s
``parse_in_processes``), whose main module is wikid's own.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from pathlib import Path

import structlog

from wikid.core._reading import Parse
from wikid.core.note import Note
from wikid.core.vault import VaultFilter, VaultOptions, read_note

# Below this many notes the workers' start (~0.3 s each, importing the parser) costs
# more than it saves: a restart's reads, an edit's, a small vault's first start.
MIN_NOTES = 2_000
PART = 250  # notes per task: small enough to spread evenly, large enough to batch
MAX_WORKERS = 4

log = structlog.get_logger("wikid.sync.parse_pool")

_filters: dict[tuple[Path, str], VaultFilter] = {}  # a worker's, made once


def workers() -> int:
    """Worker processes for a large read: the cores this process may run on, at most
    ``MAX_WORKERS`` (the embedding model starts on the same cores meanwhile)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def parser(root: Path, options: VaultOptions) -> Parse:
    """``parse(rels)`` for this vault (``VaultGraph.read``'s ``parse``)."""
    return partial(parse, root, options)


def parse(root: Path, options: VaultOptions, rels: Sequence[str]) -> dict[str, Note | None]:
    """The notes at ``rels`` as ``read_note`` reads them, parsed in worker processes when
    they are at least ``MIN_NOTES`` and there are two cores; the caller reads the ones
    missing from the answer itself (all of them below that size, the rest of a part a
    dead worker had)."""
    rels = list(rels)
    n = workers()
    out: dict[str, Note | None] = {}
    if len(rels) < MIN_NOTES or n < 2:
        return out
    parts = [rels[i : i + PART] for i in range(0, len(rels), PART)]
    try:
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = pool.map(_part, itertools.repeat(root), itertools.repeat(options), parts)
            for part, notes in zip(parts, results, strict=True):
                out.update(zip(part, notes, strict=True))
    except (BrokenProcessPool, OSError) as exc:  # a worker died, or none could start
        log.warning(
            "parsing in processes failed; the rest are read here",
            parsed=len(out),
            left=len(rels) - len(out),
            error=str(exc) or type(exc).__name__,
        )
    return out


def _part(root: Path, options: VaultOptions, rels: Sequence[str]) -> list[Note | None]:
    """In a worker: these notes read and parsed, with the vault's filter made once."""
    key = (root, repr(options))
    if key not in _filters:
        _filters.clear()
        _filters[key] = VaultFilter(root, options)
    return [read_note(root, rel, options, _filters[key]) for rel in rels]
