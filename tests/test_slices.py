"""The full reconcile's pipeline (``wikid.sync.slices``): what overlaps, what never does.

The steps here are plain functions that record what ran when: the pipeline is
scheduling, and these tests pin its order. The store-level result (a sliced,
pipelined reconcile equals one batch) is held by ``test_sink``'s slice test and the
invariant tests, with the real store.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from wikid.sync.slices import Live, Steps, Stopped, Tally, run


class Recorder:
    """Steps that log each start and end, and count what is running at once."""

    def __init__(self, stale: Callable[[int, int], bool] = lambda a, b: False) -> None:
        self.events: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.planning = 0
        self.embedding = 0
        self.stale = stale
        self.stop_seen: list[int] = []

    def log(self, what: str, i: int) -> None:
        with self.lock:
            self.events.append((what, i))

    def at(self, what: str, i: int, nth: int = 0) -> int:
        return [k for k, e in enumerate(self.events) if e == (what, i)][nth]

    def plan(self, i: int) -> int:
        with self.lock:
            self.planning += 1
        self.log("plan", i)
        threading.Event().wait(0.02)
        self.log("planned", i)
        with self.lock:
            self.planning -= 1
        return i

    async def embed(
        self, i: int, stop: Callable[[], bool], report: Callable[[int, int], None]
    ) -> int | None:
        self.embedding += 1
        self.log("embed", i)
        try:
            for k in range(4):
                if k and stop():
                    self.stop_seen.append(i)
                    return None
                await asyncio.sleep(0.01)
                report(k + 1, 4)
            self.log("embedded", i)
            return 4
        finally:
            self.embedding -= 1

    async def write(self, i: int) -> dict[str, int]:
        self.log("write", i)
        await asyncio.sleep(0.03)
        self.log("written", i)
        return {"entity": 1}

    def steps(self) -> Steps[int]:
        return Steps(self.plan, self.embed, self.write, self.stale)


def test_the_next_slice_is_planned_while_this_one_embeds_and_embeds_while_it_is_written() -> None:
    r = Recorder()
    out = asyncio.run(run(4, r.steps(), Tally(4, None), None))
    assert out.writes == {"entity": 4} and out.embedded == 16
    assert [i for what, i in r.events if what == "write"] == [0, 1, 2, 3]
    for i in range(3):
        assert r.at("plan", i + 1) < r.at("embedded", i)  # planned during the embedding
        assert r.at("embed", i + 1) < r.at("written", i)  # embedding during the write
        assert r.at("written", i) < r.at("write", i + 1)  # writes one at a time, in order
        assert r.at("embedded", i + 1) < r.at("write", i + 1)  # never written unembedded


def test_a_slice_planned_before_a_write_it_depends_on_is_planned_again_after_it() -> None:
    """Slice 2 shares a key with slice 1 (a name handed across slices): its plan made
    while slice 1 embedded is thrown away, and it is planned again once 1 is written."""
    r = Recorder(stale=lambda a, b: (a, b) == (1, 2))
    out = asyncio.run(run(4, r.steps(), Tally(4, None), None))
    assert out.writes == {"entity": 4}
    assert r.at("plan", 2, 1) > r.at("written", 1)
    assert r.at("embed", 2, 1) > r.at("written", 1)  # embedded again (a cache, really)
    assert [i for what, i in r.events if what == "write"] == [0, 1, 2, 3]


def test_an_edit_goes_in_while_a_slice_embeds_and_stale_plans_are_made_again() -> None:
    """An edit waits for no embedding, only for a plan to end; every slice is written
    from a plan made after the last edit, and the edits cost one plan of the slice
    they came during, however many came."""
    r = Recorder()
    seen: list[tuple[int, int]] = []
    due = [0]

    async def edit() -> None:
        seen.append((r.planning, r.embedding))
        r.log("edit", -1)
        due[0] -= 1

    async def main() -> None:
        task = asyncio.create_task(
            run(5, r.steps(), Tally(5, None), Live(lambda: due[0] > 0, edit))
        )
        while ("embed", 2) not in r.events:
            await asyncio.sleep(0.001)
        due[0] = 3  # three edits in a row, while slice 2 embeds
        await task

    asyncio.run(main())
    assert len(seen) == 3 and all(planning == 0 for planning, _ in seen)
    assert any(embedding for _, embedding in seen)  # it did not wait for the embedding
    assert not r.stop_seen  # nor cut it
    assert [i for what, i in r.events if what == "write"] == [0, 1, 2, 3, 4]
    last_edit = max(k for k, e in enumerate(r.events) if e == ("edit", -1))
    for i in range(5):
        written = r.at("write", i)
        planned = max(k for k, e in enumerate(r.events[:written]) if e == ("planned", i))
        if written > last_edit:
            assert planned > last_edit  # written from a plan made after the edits
    assert len([e for e in r.events if e == ("plan", 2)]) == 2  # once more, for 3 edits


def test_stopping_raises_and_leaves_nothing_running() -> None:
    r = Recorder()

    async def no_edit() -> None:
        raise AssertionError("no edit was waiting")

    async def main() -> None:
        live = Live(lambda: False, no_edit)
        with pytest.raises(Stopped):
            await run(6, r.steps(), Tally(6, None), live, lambda: ("written", 1) in r.events)
        assert r.planning == 0 and r.embedding == 0

    asyncio.run(main())
    assert [i for what, i in r.events if what == "write"] == [0, 1]


def test_progress_never_goes_back_when_a_slice_is_embedded_again() -> None:
    shown: list[tuple[int, int]] = []
    tally = Tally(3, lambda d, t: shown.append((d, t)))
    first = tally.of(0)
    first(0, 10)
    first(4, 10)
    again = tally.of(0)  # after an edit cut it: 6 texts left, the 4 done are cached
    again(0, 6)
    again(6, 6)
    tally.of(1)(10, 10)
    tally.of(2)(10, 10)
    assert shown[0] == (0, 30)  # the slices not yet seen are guessed like the first
    done = [d for d, _ in shown]
    assert done == sorted(done) and shown[-1] == (30, 30)


def test_progress_by_kind_guesses_each_kind_from_its_own_slices() -> None:
    """Chunks-and-notes slices come first, links' slices after, and they are unlike:
    each kind's total is guessed from its own slices once one has reported."""
    shown: list[tuple[int, int, dict[str, tuple[int, int]]]] = []
    tally = Tally(
        5,
        lambda d, t, kinds: shown.append((d, t, kinds)),
        kinds=(("chunks and notes", 2), ("links", 3)),
    )
    first = tally.of(0)
    first(10, 100)
    assert shown[-1][2] == {"chunks and notes": (10, 200), "links": (0, 300)}  # a guess
    tally.of(1)(100, 100)
    first(100, 100)
    tally.of(2)(5, 30)
    assert shown[-1][2] == {"chunks and notes": (200, 200), "links": (5, 90)}
    assert shown[-1][:2] == (205, 290)


def test_a_kind_with_a_guess_shows_it_until_its_slices_report() -> None:
    """The links' texts are guessed from the pairs (one relation text a pair) until a
    links slice reports, not from the chunks' slices, which are unlike them."""
    shown: list[dict[str, tuple[int, int]]] = []
    tally = Tally(
        5,
        lambda d, t, kinds: shown.append(kinds),
        kinds=(("chunks and notes", 2), ("links", 3)),
        guesses={"links": 60},
    )
    tally.of(0)(10, 100)
    assert shown[-1] == {"chunks and notes": (10, 200), "links": (0, 60)}
    tally.of(2)(5, 30)  # a links slice reported: its kind's mean from now on
    assert shown[-1] == {"chunks and notes": (10, 200), "links": (5, 90)}


def test_a_written_slice_is_let_go() -> None:
    """A slice's plan holds its records (every chunk's text): once written, nothing of
    the pipeline may keep it. Run with every plan a weakly referenced object, and at
    each write no plan older than the previous slice's may still be alive (the
    pipeline once kept every finished task, and so every plan, to the end)."""
    import gc
    import weakref

    class Plan:
        def __init__(self, i: int) -> None:
            self.i = i

    alive: dict[int, weakref.ref[Plan]] = {}
    held: list[list[int]] = []

    def plan(i: int) -> Plan:
        p = Plan(i)
        alive[i] = weakref.ref(p)
        return p

    async def embed(p: Plan, stop: Callable[[], bool], report: Callable[[int, int], None]) -> int:
        await asyncio.sleep(0)
        return 1

    async def write(p: Plan) -> dict[str, int]:
        gc.collect()
        held.append([i for i, ref in alive.items() if ref() is not None and i < p.i - 1])
        return {"entity": 1}

    steps = Steps(plan, embed, write, lambda a, b: False)
    out = asyncio.run(run(8, steps, Tally(8, None), None))
    assert out.writes == {"entity": 8}
    assert held == [[]] * 8
