"""The second hop: from the notes retrieval ranks first, along their links, to the note
a question asks about.

Why: a question often describes one note in other words, then asks what a note it
links to says ("the method note, and the adage it links"). Retrieval finds the first
note (A). The second (B) shares few of the question's words, so no retriever ranks it,
and the graph walk (``ask.walk``) starts only from notes the question *names*. Over a
whole 13k-note vault, B was then not even among the candidates. So the links and
backlinks of the best fused notes are followed, and each neighbour is scored by the
question's meaning against its own stored chunks (its best chunk), plus the words it
shares with the sentence its link stands in (the writer's own reason the notes meet).

Bounded: the first ``BASES`` notes of the fused ranking (hubs are not walked through),
at most ``FANOUT`` neighbours each, its own links before its backlinks, and at most
``CHUNKS`` chunks a neighbour: a few hundred int8 rows read by id, no scan. Reads the
graph only; the caller fetches the scores (``Index.similarity``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wikid.ask.walk import HUB, Step, edges
from wikid.core.graph import VaultGraph
from wikid.core.words import terms

BASES = 3  # best fused notes whose links are followed
FANOUT = 48  # neighbours scored per base note
CHUNKS = 12  # chunks scored per neighbour (its first ones)
TAKE = 8  # best second-hop notes that become candidates (3 and 5 found fewer)
CONTEXT_WEIGHT = 0.1  # all of the question's words in the link's sentence


@dataclass(frozen=True)
class Plan:
    """What to score: each neighbour's base (by its rank among the bases), its first
    step from it, and its chunk ids."""

    steps: dict[str, tuple[int, Step]]  # neighbour -> (its base's rank, the edge)
    chunks: dict[str, tuple[str, ...]]  # neighbour -> its chunk ids, first ones

    def ids(self) -> list[str]:
        return [c for ids in self.chunks.values() for c in ids]


@dataclass(frozen=True)
class Hop:
    note: str  # B, the note reached
    base: str  # A, the fused note it was reached from
    base_rank: int  # A's fused rank
    step: Step  # the edge between them, as written
    chunk: str  # B's chunk closest to the question
    score: float


def plan(
    vg: VaultGraph,
    bases: Sequence[str],
    spans: Callable[[str], tuple[tuple[str, ...], tuple[int, ...]]],
) -> Plan:
    """The neighbours of ``bases`` (best first) worth scoring. ``spans``: a note's chunk
    ids and start lines as stored (``Index.spans``)."""
    steps: dict[str, tuple[int, Step]] = {}
    taken = set(bases)
    for rank, base in enumerate(bases):
        if base not in vg.notes or vg.g.degree(base) > HUB:
            continue
        seen = 0
        for n, step in edges(vg, base):  # its own links first, then its backlinks
            if seen >= FANOUT:
                break
            if n in taken or n not in vg.notes:
                continue
            taken.add(n)
            steps[n] = (rank, step)
            seen += 1
    chunks = {n: tuple(spans(n)[0][:CHUNKS]) for n in steps}
    return Plan(steps, {n: ids for n, ids in chunks.items() if ids})


def pick(p: Plan, question: str, similarity: dict[str, float]) -> list[Hop]:
    """The ``TAKE`` best neighbours: the best cosine of the question with one of their
    chunks, plus the share of the question's words in the link's sentence."""
    wanted = terms(question)
    hops = []
    for n, ids in p.chunks.items():
        scored = [(similarity[c], c) for c in ids if c in similarity]
        if not scored:
            continue
        best, chunk = max(scored)
        rank, step = p.steps[n]
        said = terms(step.context) & wanted if step.context else frozenset()
        prior = CONTEXT_WEIGHT * len(said) / max(1, len(wanted))
        base = step.src if step.tgt == n else step.tgt
        hops.append(Hop(n, base, rank, step, chunk, best + prior))
    hops.sort(key=lambda h: (-h.score, h.note))
    return hops[:TAKE]
