"""A full reconcile's slices, run as a pipeline around the embedding model.

Why a pipeline: on a cold start the model is the bottleneck, and the rest of a
slice's work (planning its records from the graph, writing them, committing the
ledger's mirror) used to run while the model waited. So slice ``i + 1`` is
planned while slice ``i`` embeds, and it embeds while slice ``i`` is written.

Why the result is the same as one slice after another: a plan reads the graph
and the ledger's mirror rows of its own slice's owners, and slices have disjoint
owners. So a plan made before the previous slice was written is the plan made
after, unless

- the graph changed in between: an edit is let in only when no plan runs and
  nothing is being written, and a slice planned before it is planned again before
  it is written (once its texts are embedded: the edit left most of them as they
  were, and those are cached by then);
- the previous slice wrote a key this one plans too (a name handed from a node
  of one slice to a node of the other), or forced keys a crash may have torn,
  whoever owns them: ``stale`` says so, and the slice is planned again.

Either way what was embedded before is cached, so little is lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

P = TypeVar("P")
T = TypeVar("T")
Report = Callable[[int, int], None]  # (texts embedded, texts to embed)


@dataclass
class Outcome:
    """What the slices wrote, in all: counts per kind, texts embedded, wall seconds."""

    writes: dict[str, int] = field(default_factory=dict)
    embedded: int = 0
    seconds: float = 0.0


MEANING = "chunks and notes"  # the kinds of text a full reconcile embeds, in order
LINKS = "links"


class Tally:
    """The whole reconcile's embedding progress from its slices' own: a slice that has
    not reported yet is guessed to embed as much as the mean of those of its kind that
    have (the slices of a kind are alike: every n-th key). A slice embedded again after
    an edit cut it goes on from what it had done, since those texts are cached.

    ``kinds``: (name, slices) in slice order, the first kind's slices first. With more
    than one, ``shown`` also gets ``kinds={name: (done, total)}``, so a reader can say
    when each kind will be done, not only the whole. ``guesses``: a kind's texts, known
    before any of its slices reports (a link's relation text is one a pair: guessed as
    the chunks' mean slice instead, the links' ETA was twice too long at 13k)."""

    def __init__(
        self,
        parts: int,
        shown: Callable[..., None] | None,
        kinds: tuple[tuple[str, int], ...] = (),
        guesses: dict[str, int] | None = None,
    ) -> None:
        self.parts = parts
        self.shown = shown
        self.kinds = tuple((n, k) for n, k in kinds if k) or (("texts", parts),)
        self.guesses = guesses or {}
        self.done: dict[int, int] = {}
        self.total: dict[int, int] = {}

    def of(self, i: int) -> Report:
        base = self.done.get(i, 0)

        def report(done: int, total: int) -> None:
            self.done[i], self.total[i] = base + done, base + total
            if self.shown is None:
                return
            by_kind = self.by_kind()
            done_all = sum(d for d, _ in by_kind.values())
            total_all = sum(t for _, t in by_kind.values())
            if len(by_kind) > 1:
                self.shown(done_all, total_all, kinds=by_kind)
            else:
                self.shown(done_all, total_all)

        return report

    def by_kind(self) -> dict[str, tuple[int, int]]:
        """(done, total) of each kind, a total guessed from its slices that reported
        (a kind none of whose slices has reported yet is its guess, else guessed as the
        first kind's mean slice: better than 0, and corrected at its first report)."""
        out: dict[str, tuple[int, int]] = {}
        first = 0
        mean_of_first: float | None = None
        for name, k in self.kinds:
            mine = range(first, first + k)
            totals = [self.total[i] for i in mine if i in self.total]
            guess = self.guesses.get(name)
            if totals:
                mean = sum(totals) / len(totals)
            else:
                mean = guess / k if guess is not None else mean_of_first or 0.0
            if mean_of_first is None:
                mean_of_first = mean
            done = sum(self.done.get(i, 0) for i in mine)
            out[name] = (done, sum(totals) + round(mean * (k - len(totals))))
            first += k
        return out


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
class _Plan(Generic[P]):
    index: int
    planned: P
    edits: int  # edits let in before it was made: it is stale once there are more


class Stopped(Exception):
    """A batch or a full reconcile ended early, the daemon stopping. What was written is
    whole batches and the texts embedded are cached. After a cut full reconcile the
    parse cache is untrusted (``restart.META_KEY``), so the next start reconciles again;
    after a cut batch it goes on from the parse cache, as after a crash."""


@dataclass
class Live:
    """Edits saved during a full reconcile: ``waiting()`` says a batch of them is due,
    ``run()`` applies it as an ordinary batch. The reconcile lets them in whenever no
    plan runs and no slice is being written, even while a slice embeds, so a fresh edit
    never waits behind a cold backlog."""

    waiting: Callable[[], bool]
    run: Callable[[], Awaitable[None]]


def never() -> bool:
    """The stop signal of a run that nothing stops (``wikid index``, the tests)."""
    return False


POLL_S = 0.05  # how often a wait for an embedding looks for a waiting edit


async def run(
    parts: int,
    steps: Steps[P],
    tally: Tally,
    live: Live | None,
    stopping: Callable[[], bool] = never,
) -> Outcome:
    """Run slices ``0 .. parts - 1``: slice ``i + 1`` is planned while slice ``i``
    embeds, and embeds while slice ``i`` is written. ``live`` edits go in whenever no
    plan runs and nothing is being written; a slice's embedding goes on meanwhile, and
    a slice planned before an edit is planned again once its texts are embedded (those
    the edit did not change are cached by then), so each slice is planned again at most
    once however many edits came: an edit does not cost a plan. ``stopping()`` ends
    the run (``Stopped``): a cold 13k store embeds for 10 minutes, longer than anyone
    (or systemd) waits for a stop."""
    started = time.perf_counter()
    out = Outcome()
    halt = [False]  # set on the way out: an embedding stops at its next call
    edits = [0]

    def stop() -> bool:
        return halt[0] or stopping()

    async def plan(i: int) -> _Plan[P]:
        made_after = edits[0]
        return _Plan(i, await asyncio.to_thread(steps.plan, i), made_after)

    # The tasks still running, for the way out. A finished one leaves at once: a plan
    # task holds its slice's records (every chunk's text among them), and keeping all
    # of them until the end held the whole vault's records by the last slice (heap
    # grown linearly over a cold start, and left fragmented once they were freed).
    tasks: set[asyncio.Task[Any]] = set()

    def finished(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved, as the gather below did: whoever awaits it still sees it

    def start(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.create_task(coro)
        tasks.add(task)
        task.add_done_callback(finished)
        return task

    def embed(p: _Plan[P]) -> asyncio.Task[int | None]:
        return start(steps.embed(p.planned, stop, tally.of(p.index)))

    async def admit() -> bool:
        """Let a waiting edit in (the caller knows no plan runs); True if one went in."""
        if live is None or not live.waiting() or stopping():
            return False
        await live.run()
        edits[0] += 1
        return True

    async def let_edits_in(task: asyncio.Task[Any], planning: asyncio.Task[Any] | None) -> None:
        """Wait for ``task``, letting edits in meanwhile whenever no plan runs."""
        while not task.done():
            if (planning is None or planning.done()) and await admit():
                continue
            await asyncio.wait({task}, timeout=POLL_S)

    async def embedded(task: asyncio.Task[int | None]) -> int:
        n = await task
        if n is None:  # it stopped: the daemon is stopping
            raise Stopped
        return n

    following: asyncio.Task[_Plan[P]] | None = None
    try:
        cur = await plan(0)
        embedding = embed(cur)
        for i in range(parts):
            await admit()  # between slices: no plan runs yet
            if i + 1 < parts:
                following = start(plan(i + 1))
            await let_edits_in(embedding, following)
            out.embedded += await embedded(embedding)
            if cur.edits != edits[0]:  # planned before an edit: again, this time to write
                if following is not None:
                    await asyncio.wait({following})  # never two plans at once
                cur = await plan(i)
                embedding = embed(cur)
                out.embedded += await embedded(embedding)  # no edit meanwhile: it ends
            nxt = await following if following is not None else None
            following = None
            if nxt is not None:
                embedding = embed(nxt)
            for kind, n in (await steps.write(cur.planned)).items():
                out.writes[kind] = out.writes.get(kind, 0) + n
            if stopping():
                raise Stopped
            if nxt is not None:
                if steps.stale(cur.planned, nxt.planned):
                    nxt.edits = -1  # planned again once embedded, now that ``cur`` is written
                cur = nxt
    finally:
        halt[0] = True
        await asyncio.gather(*tasks, return_exceptions=True)
    out.seconds = time.perf_counter() - started
    return out
