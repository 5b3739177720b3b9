"""Merge what three retrievers found into one ranking of notes, and turn the graph's
finds into evidence items.

Why rank fusion: the graph walk, BM25 and LightRAG's vectors each see a different
aspect of a question (the relation it asks about, its exact words, its meaning), and
their scores are not comparable. Reciprocal rank fusion needs only their orders: a note
ranked high by any of them, or fairly high by several, comes first.

Why the graph items look as they do: a relational answer is the relation itself,
"Tidewater Almanac —author→ Mara Quill", at the line of the property that states it,
plus a card of the note it leads to (title, type, properties, summary) and the part of
its text that best matches the question.

Pure functions of their inputs: no store, no LLM, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wikid.ask.evidence import Item
from wikid.ask.hop import Hop
from wikid.ask.walk import Reached, Step
from wikid.core.chunk import Chunk, is_boilerplate
from wikid.core.graph import VaultGraph
from wikid.core.words import terms

RRF_K = 10  # small: the first few places of each list should dominate
# "hop": the second hop's notes (``ask.hop``) count half: at full weight its finds pushed
# the note a paraphrase describes out of a 3,000-token evidence (measured: 14 -> 13 of 15).
WEIGHTS = {"graph": 1.0, "named": 0.5, "bm25": 1.0, "vector": 1.0, "hop": 0.5}
CARD_WORDS = 40  # words of a note's summary on its card
PROPS_CHARS = 240  # characters of a note's properties on its card


@dataclass
class Ranked:
    path: str
    score: float
    rank: int = 0
    sources: dict[str, int] = field(default_factory=dict)  # retriever -> its rank there


def fuse(
    lists: dict[str, list[str]], k: int = RRF_K, weights: dict[str, float] | None = None
) -> dict[str, Ranked]:
    """path -> its fused rank: sum over retrievers of weight / (k + 1 + rank)."""
    weights = WEIGHTS if weights is None else weights
    out: dict[str, Ranked] = {}
    for name, paths in lists.items():
        for rank, path in enumerate(dict.fromkeys(paths)):
            r = out.setdefault(path, Ranked(path, 0.0))
            r.score += weights[name] / (k + 1 + rank)
            r.sources[name] = rank
    for i, r in enumerate(sorted(out.values(), key=lambda r: (-r.score, r.path))):
        r.rank = i
    return out


def home(vg: VaultGraph, r: Reached) -> str:
    """The note that shows a reached node: itself, or for an unwritten target the note
    whose link names it."""
    return r.node if r.node in vg.notes else r.steps[-1].src


def _title(vg: VaultGraph, node: str) -> str:
    return str(vg.g.nodes[node]["title"]) if node in vg.g else node


def render_path(vg: VaultGraph, steps: tuple[Step, ...]) -> str:
    """``A —kind→ B`` for each edge as written (a backlink reads from its holder), with
    the sentence of a body link."""
    parts = []
    for s in steps:
        text = f"{_title(vg, s.src)} —{s.kind}→ {_title(vg, s.tgt)}"
        if s.kind in ("link", "embed") and s.context:
            words = s.context.split()
            text += ": " + " ".join(words[:40]) + (" …" if len(words) > 40 else "")
        parts.append(text)
    return "; ".join(parts)


def path_items(vg: VaultGraph, reached: list[Reached]) -> list[Item]:
    """One relation item per reached node: the path from the named note to it."""
    out = []
    for rank, r in enumerate(reached):
        last = r.steps[-1]
        extra = {
            "paths": sorted({s.src for s in r.steps} | {home(vg, r)}),
            "ranked_as": home(vg, r),  # its prior: the note it leads to, or its walk rank
            "walk_rank": rank,
            "src": _title(vg, r.seed),
            "tgt": _title(vg, r.node),
            "line": last.line,
            "sources": [],
            "why": {"named": _title(vg, r.seed), "hop": r.hop, **r.why, "score": round(r.score, 3)},
            # the question's word its edge answers by meaning covers that aspect
            "covers": sorted(terms(r.why["says"])) if "says" in r.why else [],
        }
        key = "path\x1f" + "\x1f".join(f"{s.src}>{s.kind}>{s.tgt}" for s in r.steps)
        out.append(Item("relation", key, render_path(vg, r.steps), last.src, rank, extra=extra))
    return out


def hop_items(vg: VaultGraph, hops: list[Hop], chunks: Callable[[str], list[Chunk]]) -> list[Item]:
    """For each second-hop note: the link that leads to it (``A —link→ B`` with its
    sentence) and its chunk closest to the question. Each keeps a slot just below the
    note it was reached from (``hop_rank``): the answer of a two-note question is the
    pair."""
    out = []
    for i, h in enumerate(hops):
        rank = h.base_rank + 1 + i
        src = h.step.src
        extra = {
            "paths": sorted({src, h.step.tgt}),
            "ranked_as": h.note,
            "hop_rank": rank,
            "src": _title(vg, src),
            "tgt": _title(vg, h.step.tgt),
            "line": h.step.line,
            "sources": [],
            "why": {"hop": 2, "via": h.base, "score": round(h.score, 3)},
        }
        key = f"hop\x1f{src}>{h.step.kind}>{h.step.tgt}"
        out.append(Item("relation", key, render_path(vg, (h.step,)), src, i, extra=extra))
        chunk = next((c for c in chunks(h.note) if c.id == h.chunk), None)
        if chunk is not None:
            extra = {"paths": [h.note], "hop_rank": rank, "why": {"hop": 2, "via": h.base}}
            item = Item("chunk", chunk.id, chunk.content, h.note, i, tokens=chunk.tokens)
            item.extra = extra
            out.append(item)
    return out


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    text = str(value)
    return text.replace("[[", "").replace("]]", "") if "[[" in text else text


def card(vg: VaultGraph, path: str, rank: int) -> Item:
    """A note in a few dozen tokens: title, type, properties and the start of its summary."""
    note = vg.payload(path)  # a head's properties and opening: the parse cache's
    props = "; ".join(f"{k}: {_plain(v)}" for k, v in note.properties.items() if k != "aliases")
    if len(props) > PROPS_CHARS:
        props = props[:PROPS_CHARS].rsplit(" ", 1)[0] + " …"
    words = (note.summary or note.opening or "").split()
    summary = " ".join(words[:CARD_WORDS]) + (" …" if len(words) > CARD_WORDS else "")
    text = f"{note.title} ({note.type or 'note'})" + (f" [{props}]" if props else "")
    text += f": {summary}" if summary else ""
    return Item("entity", note.title, text, path, rank, extra={"paths": [path], "line": 1})


def best_chunk(chunks: list[Chunk], question_terms: frozenset[str], rank: int) -> Item | None:
    """The chunk of a note sharing most of the question's words (the first on a tie)."""
    if not chunks:
        return None
    c = max(
        chunks,
        key=lambda c: (
            not is_boilerplate(c.content),  # a table of contents only when nothing else
            len(terms(c.content) & question_terms),
            -c.order,
        ),
    )
    return Item("chunk", c.id, c.content, c.note, rank, tokens=c.tokens, extra={"paths": [c.note]})


def vector_order(items: Iterable[Item]) -> list[str]:
    """The notes of LightRAG's items, interleaving its entities, relations and chunks
    by their own rank (each list is ranked separately)."""
    return [it.path for it in sorted(items, key=lambda it: it.rank) if it.path]
