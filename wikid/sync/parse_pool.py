"""Many notes parsed in worker processes: a cold start reads every note of the vault.

Why processes: parsing is Python (the GIL), about a millisecond a note, so a cold
start of 50,000 notes read for 51 s on one core while the other waited (run AL). A
restart reads only what changed: here too when that is thousands of notes (a checkout
of another branch), in the calling thread when it is fewer (``MIN_NOTES``), as an
edit's note or two always is.

Each note is read exactly as ``read_note`` reads it in process, with the same limits
(a worker holds one note's bytes at a time), so the notes are the same ones. Each
worker sends its notes back ``PART`` at a time over a pipe of its own, which the caller
reads as they come: nothing waits on a full pipe. A worker that dies (killed, out of
memory) closes its pipe: what it had not sent is left out of the answer, and the caller
reads those notes itself. (``ProcessPoolExecutor`` was tried first: with a worker
killed while the pool started, its shutdown waited forever on a worker blocked writing
a result nobody read.)

Workers are spawned, not forked: the daemon has threads (the model loading, the stall
sampler), and a fork copies their locks held. A worker imports ``wikid.core`` and
structlog, no more. A spawned worker runs the parent's main module again (under
another name), so only the daemon asks for this (``Index.open``'s
``parse_in_processes``), whose main module is wikid's own.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Sequence
from functools import partial
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

import structlog

from wikid.core._reading import Parse
from wikid.core.note import Note
from wikid.core.vault import VaultFilter, VaultOptions, read_note

# Below this many notes the workers' start (~0.3 s each, importing the parser) costs
# more than it saves: a restart's reads, an edit's, a small vault's first start.
MIN_NOTES = 2_000
PART = 250  # notes a worker sends at once: a pipe write of ~1 MB
MAX_WORKERS = 4
EXIT_S = 5.0  # a worker that has sent everything is given this long to exit

log = structlog.get_logger("wikid.sync.parse_pool")


def workers() -> int:
    """Worker processes for a large read: the cores this process may run on, at most
    ``MAX_WORKERS`` (each holds ~50 MiB while it parses: 53 MiB at 50k notes)."""
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
    missing from the answer itself (all of them below that size, and whatever a dead
    worker had not sent)."""
    rels = list(rels)
    n = workers()
    out: dict[str, Note | None] = {}
    if len(rels) < MIN_NOTES or n < 2:
        return out
    ctx = multiprocessing.get_context("spawn")
    started: list[tuple[BaseProcess, Connection]] = []
    why = None
    try:
        for i in range(n):
            recv, send = ctx.Pipe(duplex=False)
            worker: BaseProcess = ctx.Process(
                target=_work, args=(root, options, rels[i::n], send), daemon=True
            )
            worker.start()
            send.close()  # the worker's end: EOF here once it has exited
            started.append((worker, recv))
        _receive([recv for _, recv in started], out)
    except OSError as exc:  # no process could start (a limit on processes, memory)
        why = str(exc)
    finally:
        for worker, recv in started:
            worker.join(timeout=EXIT_S if why is None else 0)  # its pipe closed: exiting
            if worker.is_alive():  # stopped midway (an error here), or stuck: no wait
                worker.kill()
                worker.join()
            recv.close()
    if len(out) < len(rels):
        log.warning(
            "parsing in processes left notes out; they are read here",
            left=len(rels) - len(out),
            exit_codes=[w.exitcode for w, _ in started],
            error=why,
        )
    return out


def _receive(live: list[Connection], out: dict[str, Note | None]) -> None:
    """Each worker's notes as they come, until every pipe is closed: the worker is done,
    or dead (then a message it was cut off in is lost, and its notes are left out)."""
    while live:
        ready = wait(live)
        for conn in [c for c in live if c in ready]:
            try:
                out.update(conn.recv())
            except (EOFError, OSError, pickle.UnpicklingError):
                live.remove(conn)


def _work(root: Path, options: VaultOptions, rels: Sequence[str], send: Connection) -> None:
    """In a worker: these notes read and parsed, sent ``PART`` at a time."""
    filt = VaultFilter(root, options)
    for i in range(0, len(rels), PART):
        send.send([(rel, read_note(root, rel, options, filt)) for rel in rels[i : i + PART]])
    send.close()
