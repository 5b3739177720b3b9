"""Choose the evidence for a question under a token budget, by coverage.

Why not LightRAG's own context: ``aquery_data`` returns everything it found
(dozens of records and chunks), and truncating that to a budget keeps what
came first, not what answers the question. Here every candidate (entity,
relation, chunk) is scored by the *aspects* of the question it covers (its
content words and the names it mentions) that the evidence chosen so far
does not, per token it costs, plus a prior from the fused retrieval rank of its
note (``ask.fuse``); the best is taken until the budget is spent or no candidate
is left.

Pure functions of their inputs: no store, no LLM, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wikid.core.words import terms
from wikid.store.ids import split_sources

POOLS = {"entity": 16, "relation": 16, "chunk": 8, "support": 4}
REPEAT = (1.0, 0.5, 0.25)  # what covering an aspect a first, second, third time is worth


@dataclass
class Item:
    kind: str  # entity, relation, chunk
    key: str
    text: str  # what the evidence shows (and what an LLM would be given)
    path: str | None
    rank: int  # position in its retriever's own ordering (0 = first)
    prior: float = 0.0  # what retrieval believes of it, besides the aspects it covers
    weight: float = 1.0  # a template's item: a quarter (skeletons rank below content)
    tokens: int = 0  # 0: not counted yet (``select`` counts it)
    aspects: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)


def aspects_of(question: str, names: Iterable[str], notes: Iterable[str] = ()) -> set[str]:
    """The question's content words, each name it mentions, and each note it names (an
    item from that note covers it): the things an answer has to speak to."""
    out = set(terms(question))
    out |= {"name:" + n.lower() for n in names}
    out |= {"note:" + p for p in notes}
    return out


def _covered(item: Item, aspects: set[str]) -> set[str]:
    words = terms(item.text) | set(item.extra.get("covers", ()))
    low = item.text.lower()
    paths = set(item.extra.get("paths", ())) | {item.path}

    def covers(a: str) -> bool:
        if a.startswith("name:"):
            return a[5:] in low
        if a.startswith("note:"):
            return a[5:] in paths
        return a in words

    return {a for a in aspects if covers(a)}


def select(
    candidates: list[Item], aspects: set[str], budget: int, count: Callable[[list[str]], list[int]]
) -> tuple[list[Item], int, str]:
    """Greedy weighted set cover by tokens: the chosen items (in choice order), the tokens
    they cost, and why the choice stopped (``STOP_RULES``).

    An item's value is its gain per token: the aspects it covers that the evidence does
    not yet cover well (each aspect may be covered up to ``len(REPEAT)`` times, each
    time worth less, since one sentence that happens to contain a word rarely answers
    the question) plus its ``prior``, the retrieval's belief in its note (the fused
    rank). The best value is taken until nothing more fits or nothing is worth taking,
    so a question with many relevant candidates gets the budget it was given. ``count``
    counts many texts in one call, those of the items whose ``tokens`` are not known
    already (a chunk's are the store's: counting them again was 11 ms of a 13k query,
    its " › " prefix sending each to the tokenizer)."""
    unknown = [it for it in candidates if not it.tokens]
    for item, n in zip(unknown, count([it.text for it in unknown]), strict=True):
        item.tokens = max(1, n)
    for item in candidates:
        item.aspects = _covered(item, aspects)
    chosen: list[Item] = []
    times: dict[str, int] = dict.fromkeys(aspects, 0)
    used = 0
    pool = [it for it in candidates if it.aspects or it.prior > 0]

    def value(item: Item) -> float:
        gain = sum(REPEAT[times[a]] for a in item.aspects if times[a] < len(REPEAT))
        return item.weight * (gain + item.prior) / item.tokens

    # Lazy greedy: an item's value only falls as the aspects it covers get covered, so
    # a value computed earlier bounds it, and the best of the pool is found by
    # re-valuing only the items that reach the top of a heap (the plain loop valued
    # every item every round: 8 ms of a 13k query). The same choice, the same order:
    # ties go to the earlier candidate (the heap's key holds its index), an item that
    # does not fit never will (``used`` only grows), one worth nothing never will be.
    heap = [(-value(it), i) for i, it in enumerate(pool)]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        item = pool[i]
        if used + item.tokens > budget:
            continue
        fresh = value(item)
        if fresh <= 0:
            continue
        if heap and (-fresh, i) > heap[0]:  # another may be worth more now
            heapq.heappush(heap, (-fresh, i))
            continue
        chosen.append(item)
        for a in item.aspects:
            times[a] += 1
        used += item.tokens
    taken = {id(it) for it in chosen}
    too_big = any(used + it.tokens > budget for it in pool if id(it) not in taken)
    return chosen, used, "budget" if too_big else "candidates"


STOP_RULES = {
    "budget": "the next best item did not fit in the budget",
    "candidates": "every candidate that covers an aspect or has a retrieval rank was taken",
}


def first_path(file_path: str | None) -> str | None:
    paths = split_sources(file_path)
    return paths[0] if paths else None


def truncate(items: list[Item], budget: int, count: Callable[[list[str]], list[int]]) -> list[Item]:
    """The baseline: items in LightRAG's order, cut at the budget."""
    out, used = [], 0
    for item, n in zip(items, count([it.text for it in items]), strict=True):
        cost = max(1, n)
        if used + cost > budget:
            break
        out.append(item)
        used += cost
    return out
