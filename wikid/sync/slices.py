"""A full reconcile's slices, run as a pipeline around the embedding model.

Why a pipeline: on a cold start the model is the bottleneck, and the rest of a
slice's work (planning its records from the graph, writing them, committing the
ledger's mirror) used to run while the model waited. So slice ``i + 1`` is
planned while slice ``i`` embeds, and it embeds while slice ``i`` is written.

Why the result is the same as one slice after another: a plan reads the graph
and the ledger's mirror rows of its own slice's owners, and slices have disjoint
owners. So a plan made before the previous slice was written is the plan made
after, unless

- the graph changed in between: an edit is let in only when nothing is planned
  or embedding ahead, and the slice planned ahead is then thrown away;
- the previous slice wrote a key this one plans too (a name handed from a node
  of one slice to a node of the other), or forced keys a crash may have torn,
  whoever owns them: ``stale`` says so, and the slice is planned again.

Either way what was embedded ahead is cached, so little is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

P = TypeVar("P")
Report = Callable[[int, int], None]  # (texts embedded, texts to embed)


@dataclass
class Outcome:
    """What the slices wrote, in all: counts per kind, texts embedded, wall seconds."""

    writes: dict[str, int] = field(default_factory=dict)
    embedded: int = 0
    seconds: float = 0.0


class Tally:
    """The whole reconcile's embedding progress from its slices' own: a slice that has
    not reported yet is guessed to embed as much as the mean of those that have (the
    slices are alike: every ``parts``-th key). A slice embedded again after an edit cut
    it goes on from what it had done, since those texts are cached."""

    def __init__(self, parts: int, shown: Report | None) -> None:
        self.parts = parts
        self.shown = shown
        self.done: dict[int, int] = {}
        self.total: dict[int, int] = {}

    def of(self, i: int) -> Report:
        base = self.done.get(i, 0)

        def report(done: int, total: int) -> None:
            self.done[i], self.total[i] = base + done, base + total
            if self.shown is not None:
                known = sum(self.total.values())
                guess = known / len(self.total) * (self.parts - len(self.total))
                self.shown(sum(self.done.values()), known + round(guess))

        return report


@dataclass
class Steps(Generic[P]):
    """A slice's three steps. ``plan`` is CPU work over the graph (it runs in a worker
    thread); ``embed`` caches the planned texts' vectors and returns how many it
    embedded, or None when its ``stop`` said so first; ``write`` makes the store and
    the mirror match the plan, as one batch. ``stale(a, b)``: must ``b``, planned
    while ``a`` was not yet written, be planned again now that it is?"""

    plan: Callable[[int], P]
    embed: Callable[[P, Callable[[], bool], Report], Coroutine[Any, Any, int | None]]
    write: Callable[[P], Coroutine[Any, Any, dict[str, int]]]
    stale: Callable[[P, P], bool]


@dataclass
class _Ahead(Generic[P]):
    index: int
    planned: P
    embedding: asyncio.Task[int | None]


class Stopped(Exception):
    """A full reconcile ended early, the daemon stopping. Its slices are whole batches, its
    texts cached, and the parse cache untrusted (``restart.META_KEY``): the next start
    reconciles again and goes on from there."""


@dataclass
class Live:
    """Edits saved during a full reconcile: ``waiting()`` says a batch of them is due,
    ``run()`` applies it as an ordinary batch. The reconcile lets them in between its
    slices and while a slice embeds, so a fresh edit never waits behind a cold backlog.
    ``stopping()`` ends the reconcile at the same points (``Stopped``): a cold 13k store
    embeds for 20 minutes, longer than anyone (or systemd) waits for a stop."""

    waiting: Callable[[], bool]
    run: Callable[[], Awaitable[None]]
    stopping: Callable[[], bool] = lambda: False

    def due(self) -> bool:
        return self.waiting() or self.stopping()


async def run(parts: int, steps: Steps[P], tally: Tally, live: Live | None) -> Outcome:
    """Run slices ``0 .. parts - 1``. Between slices, and as soon as an embedding step
    notices, ``live`` edits are let in, the graph quiet: no plan runs then and nothing
    embeds ahead. Its ``stopping()`` ends the run (``Stopped``)."""
    started = time.perf_counter()
    out = Outcome()
    halt = [False]  # set on the way out: an embedding ahead stops at its next call

    def stop() -> bool:
        return halt[0] or (live is not None and live.due())

    async def plan(i: int) -> P:
        return await asyncio.to_thread(steps.plan, i)

    def embed(i: int, planned: P) -> asyncio.Task[int | None]:
        return asyncio.create_task(steps.embed(planned, stop, tally.of(i)))

    ahead: _Ahead[P] | None = None
    following: asyncio.Task[P] | None = None
    i = 0
    try:
        while i < parts:
            if ahead is not None and ahead.index == i:
                planned, embedding = ahead.planned, ahead.embedding
            else:
                planned = await plan(i)
                embedding = embed(i, planned)
            ahead = None
            if i + 1 < parts:
                following = asyncio.create_task(plan(i + 1))
            embedded = await embedding
            nxt, following = (await following if following else None), None
            if embedded is not None:
                if nxt is not None:
                    ahead = _Ahead(i + 1, nxt, embed(i + 1, nxt))
                for kind, n in (await steps.write(planned)).items():
                    out.writes[kind] = out.writes.get(kind, 0) + n
                out.embedded += embedded
                i += 1
                if ahead is not None and steps.stale(planned, ahead.planned):
                    out.embedded += await _settle(ahead)
                    ahead = None
            if live is not None and live.stopping():
                raise Stopped
            if live is not None and live.waiting():
                out.embedded += await _settle(ahead)  # it stops at its next call
                ahead = None
                await live.run()
    finally:
        halt[0] = True
        if following is not None:
            await asyncio.gather(following, return_exceptions=True)
        await _settle(ahead)
    out.seconds = time.perf_counter() - started
    return out


async def _settle(ahead: _Ahead[P] | None) -> int:
    """Wait for an embedding ahead to stop (its texts are cached, never lost): how many
    it embedded."""
    if ahead is None:
        return 0
    done = await asyncio.gather(ahead.embedding, return_exceptions=True)
    return done[0] if isinstance(done[0], int) else 0
