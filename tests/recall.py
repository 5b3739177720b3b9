"""Recall of the question sets in tests/questions.json: ours, BM25's top 8 notes and
LightRAG's own ``aquery_data`` (mix) cut to the same budget, per kind of question.

A question is found when every note it needs is in the evidence: its ``expected``
note (or each of them, for a list) and, for a multi-hop question, the notes it goes
``via``. Shared by tests/test_recall.py and bench/bench_query.py.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wikid.ask import query as wq
from wikid.ask import related
from wikid.sync.index import Index

QUESTIONS = Path(__file__).parent / "questions.json"
KINDS = ("relational", "paraphrase", "multi-hop", "lookup")


def questions(vault: str, held_out: bool = False) -> list[dict[str, Any]]:
    """A vault's question set; ``held_out``: the harder one (issue 49), written before
    any tuning and asked of the whole vault, kept fixed since."""
    sets = json.loads(QUESTIONS.read_text("utf-8"))
    found = (sets["held-out"] if held_out else sets)[vault]
    # knowledge-garden keeps its questions beside its search words (issue 53)
    items: list[dict[str, Any]] = found["questions"] if isinstance(found, dict) else found
    return items


def needed(q: dict[str, Any]) -> set[str]:
    exp = q["expected"]
    return set(exp if isinstance(exp, list) else [exp]) | set(q.get("via", ()))


@dataclass
class Tally:
    n: int = 0
    ours: int = 0
    candidates: int = 0  # every needed note was among the candidates the pick chose from
    bm25: int = 0
    lightrag: int = 0
    tokens: int = 0
    ms: list[float] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)


async def score(
    idx: Index, items: list[dict[str, Any]], budget: int = 3000, baselines: bool = True
) -> dict[str, Tally]:
    """kind -> its tally, over ``items``."""
    out: dict[str, Tally] = defaultdict(Tally)
    for q in items:
        t = out[q["kind"]]
        want = needed(q)
        start = time.perf_counter()
        ev = await wq.evidence(idx, q["question"], "mix", budget, explain=True)
        t.ms.append((time.perf_counter() - start) * 1000)
        assert ev["llm_calls"] == 0 and ev["tokens"] <= budget
        t.n += 1
        t.tokens += ev["tokens"]
        t.candidates += want <= set(ev["explain"]["candidates"])
        if want <= set(ev["notes"]):
            t.ours += 1
        else:
            t.missed.append(f"{q['question']} (missing {sorted(want - set(ev['notes']))})")
        t.bm25 += want <= {h.path for h in idx.search(q["question"], 8, None, None)}
        if baselines:
            cut = await wq.baseline(idx, q["question"], "mix", budget)
            t.lightrag += want <= wq.paths_of(cut)
    return dict(out)


def table(name: str, tallies: dict[str, Tally]) -> list[str]:
    rows = []
    for kind in KINDS:
        t = tallies.get(kind)
        if t is None:
            continue
        ms = sorted(t.ms)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        rows.append(
            f"{name:<17} {kind:<10} {t.n:>3}  ours {t.ours / t.n:5.2f}"
            f"  candidates {t.candidates / t.n:5.2f}  bm25@8 {t.bm25 / t.n:5.2f}"
            f"  lightrag {t.lightrag / t.n:5.2f}  tokens {t.tokens / t.n:6.0f}"
            f"  p50 {ms[len(ms) // 2]:5.0f} ms  p99 {p99:5.0f} ms"
        )
    return rows


# -- related notes ---------------------------------------------------------------------

RELATED_AT = 10  # recall@10: the first page of ``wikid related``


def related_sets(vault: str) -> list[dict[str, Any]]:
    """The hand-checked related-notes sets of a vault: a note and the notes a reader
    would call related to it that it does not link, nor is linked by."""
    sets: list[dict[str, Any]] = json.loads(QUESTIONS.read_text("utf-8"))["related"][vault]
    return sets


def _bm25(idx: Index, text: str, note: str, linked: set[str]) -> list[str]:
    """BM25's notes for ``text``, the note itself and its linked notes left out."""
    hits = idx.search(text, RELATED_AT + len(linked) + 1, None, None)
    return [h.path for h in hits if h.path != note and h.path not in linked]


async def related_recall(idx: Index, sets: list[dict[str, Any]]) -> dict[str, float]:
    """Mean recall@10 over ``sets`` of wikid's related notes and of four baselines:
    meaning alone (its chunks' nearest chunks), links alone (Adamic-Adar over shared
    neighbours), BM25 with the note's title as the query, and with its title and
    opening 30 words. Linked notes are left out
    of every list alike; a set naming a linked note fails (the set is wrong)."""
    names = ("wikid", "vectors", "links", "bm25_title", "bm25_opening")
    found: dict[str, float] = dict.fromkeys(names, 0.0)
    for case in sets:
        note, want = case["note"], case["related"]
        g = idx.graph.g
        linked = (set(g.succ[note]) | set(g.pred[note])) & set(idx.graph.notes)
        assert not linked & set(want), (note, linked & set(want))
        title = idx.graph.notes[note].title
        # the stronger baseline (issue 51): the title and the opening 30 words, as a
        # user would type them into search
        opening = " ".join((idx.graph.payload(note).opening or "").split()[:30])

        lists = {
            "wikid": await related.ranked(idx, note),
            "vectors": await related.ranked(idx, note, {"vector"}),
            "links": await related.ranked(idx, note, {"graph"}),
            "bm25_title": _bm25(idx, title, note, linked),
            "bm25_opening": _bm25(idx, f"{title} {opening}", note, linked),
        }
        for name, paths in lists.items():
            found[name] += len(set(want) & set(paths[:RELATED_AT])) / len(want)
    return {name: n / len(sets) for name, n in found.items()}
