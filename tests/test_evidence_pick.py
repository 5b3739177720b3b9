"""The budgeted pick (``ask.evidence.select``): its lazy greedy makes the choice, in the
order, that the plain greedy loop it replaced made, and stops for the same reason."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wikid.ask.evidence import REPEAT, Item, select


def _plain(candidates: list[Item], aspects: set[str], budget: int) -> tuple[list[str], int, str]:
    """The greedy loop as it was: every item valued every round."""
    for item in candidates:
        item.aspects = {a for a in aspects if a in item.extra["covers"]}
    chosen: list[Item] = []
    times = dict.fromkeys(aspects, 0)
    used = 0
    pool = [it for it in candidates if it.aspects or it.prior > 0]
    too_big = False
    while pool:
        best, best_value = None, 0.0
        too_big = False
        for item in pool:
            if used + item.tokens > budget:
                too_big = True
                continue
            gain = sum(REPEAT[times[a]] for a in item.aspects if times[a] < len(REPEAT))
            value = item.weight * (gain + item.prior) / item.tokens
            if value > best_value:
                best, best_value = item, value
        if best is None:
            break
        chosen.append(best)
        for a in best.aspects:
            times[a] += 1
        used += best.tokens
        pool.remove(best)
    return [it.key for it in chosen], used, "budget" if too_big else "candidates"


ASPECTS = [f"w{i}" for i in range(6)]
items = st.lists(
    st.tuples(
        st.sets(st.sampled_from(ASPECTS)),  # what it covers
        st.integers(1, 60),  # tokens
        st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0, 2.0]),  # prior (ties are common)
        st.sampled_from([1.0, 1.0, 0.25]),  # weight
    ),
    max_size=40,
)


def _items(spec: list[tuple[set[str], int, float, float]]) -> list[Item]:
    return [
        Item("chunk", f"k{i}", "", None, i, prior=p, weight=w, tokens=n, extra={"covers": c})
        for i, (c, n, p, w) in enumerate(spec)
    ]


@settings(max_examples=400, deadline=None)
@given(items, st.sets(st.sampled_from(ASPECTS)), st.integers(1, 400))
def test_the_lazy_pick_is_the_plain_greedy_pick(
    spec: list[tuple[set[str], int, float, float]], aspects: set[str], budget: int
) -> None:
    chosen, used, why = select(_items(spec), aspects, budget, lambda texts: [1] * len(texts))
    assert ([it.key for it in chosen], used, why) == _plain(_items(spec), aspects, budget)
