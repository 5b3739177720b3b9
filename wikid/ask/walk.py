"""The graph stage of retrieval: from what a question names, along the links, to the notes
that answer it.

Why: the links are the most precise knowledge in a vault. The writer stated them on
purpose (``author: [[Kevin Kelly]]``), and wikid holds them exactly, so "which book did
Kevin Kelly write?" is answered by following Kevin Kelly's backlinks, not by hoping the
book's text repeats his name. Three steps:

1. **Seeds**: the notes, tags and unwritten targets (ghosts) the question names.
2. **Walk** each seed's edges in both directions (links, backlinks, property links by
   key, tags), one hop, and a second hop from the best first-hop notes.
3. **Score** each reached note by how the rest of the question matches it: the edge's
   kind (``author`` for "wrote"), the note's classes (its type, its tags and the notes its
   properties point at, such as ``categories: [[Books]]``) and its title. Kinds and
   classes are matched to the question's words *by meaning*: ``Meaning`` embeds each
   distinct label once with the loaded model and keeps it, so no synonym list is written
   by hand. A note reached from two seeds (the book *and* the category) adds both.

Reads the graph only: no store, no I/O, no LLM.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wikid.core.graph import BODY_KINDS, CANVAS_KINDS, TAG, VaultGraph
from wikid.core.words import content_words, terms, words
from wikid.store.embed import normalized

LINK_KINDS = BODY_KINDS | CANVAS_KINDS  # edges that state no typed relation
BASE = 0.3  # what any edge to a seed is worth; a typed edge that matches adds to it
CLASS_WEIGHT = 0.8  # the note is of the kind asked for ("book", "podcast")
TITLE_WEIGHT = 0.5  # the note's own title holds the question's other words
CONTEXT_WEIGHT = 0.6  # a body link whose sentence holds the question's other words
HOP2 = 0.5  # a second hop counts half
EXPAND = 10  # first-hop notes a second hop starts from
HUB = 300  # a first-hop note with more edges than this is not walked through
FLOOR = 0.3  # cosines below this are noise for MiniLM
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


@dataclass(frozen=True)
class Step:
    """One edge as written: ``src``'s note holds it, at ``line``."""

    src: str
    kind: str
    tgt: str
    line: int | None
    context: str


@dataclass
class Reached:
    node: str
    score: float
    hop: int
    seed: str  # the named node of its best path
    steps: tuple[Step, ...]  # that path, from the seed
    why: dict[str, Any] = field(default_factory=dict)


class Meaning:
    """Cosine similarity between question words and labels (edge kinds, classes), with
    each label embedded once and kept (labels repeat across queries).

    With a model whose vector of a text never depends on the texts embedded beside it
    (``per_text``: wikid's ONNX models run one text a run), new labels are embedded in
    one call, spread over the cores, and a question's words are kept too (``WORDS`` of
    them: a user's questions reuse their words). An HTTP model's vector may depend on
    its batch, so with one each label is embedded alone and words are never kept."""

    KEEP = 20_000  # labels kept (1.5 KB each with MiniLM); past that the memo starts over
    WORDS = 4_096  # words kept (~6 MB with MiniLM); past that they start over

    def __init__(
        self,
        embed: Callable[[list[str]], np.ndarray],
        memo: dict[str, Any] | None = None,
        words: dict[str, Any] | None = None,
        per_text: bool = False,
    ) -> None:
        self._embed = embed
        self._memo: dict[str, Any] = {} if memo is None else memo
        self._words: dict[str, Any] = {} if words is None else words
        self._per_text = per_text

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (a question's words)."""
        if not texts:
            return np.zeros((0, 1), np.float32)
        if not self._per_text:
            return normalized(self._embed(list(texts)))
        # Read once: another query may start the memo over meanwhile.
        unique = list(dict.fromkeys(texts))
        found = {t: v for t in unique if (v := self._words.get(t)) is not None}
        new = [t for t in unique if t not in found]
        if new:
            fresh = dict(zip(new, normalized(self._embed(new)), strict=True))
            self._store(fresh)
            found |= fresh
        return np.stack([found[t] for t in texts])

    def unknown(self, texts: Iterable[str]) -> list[str]:
        """The words of ``texts`` a caller may embed for ``keep``: those not kept yet
        (none for a model that is not ``per_text``, which keeps nothing)."""
        if not self._per_text:
            return []
        return [t for t in dict.fromkeys(texts) if t not in self._words]

    def keep(self, vectors: dict[str, np.ndarray]) -> None:
        """Keep words' vectors embedded elsewhere by the same model (a query embeds its
        words with its question, in one call over the cores): a ``per_text`` model only,
        whose vector of a word is the same in any call."""
        if self._per_text and vectors:
            unit = normalized(np.stack(list(vectors.values())))
            self._store(dict(zip(vectors, unit, strict=True)))

    def _store(self, unit: dict[str, np.ndarray]) -> None:
        """Keep these words' unit vectors, the memo started over when it would pass
        ``WORDS``."""
        if len(self._words) + len(unit) > self.WORDS:
            self._words.clear()
        self._words.update(unit)

    def nearest(self, words: np.ndarray, label: str) -> int | None:
        """The row of ``words`` closest to ``label`` (embedded by ``best`` already)."""
        vec = self._memo.get(label)
        return int(np.argmax(words @ vec)) if vec is not None and len(words) else None

    def best(self, words: np.ndarray, labels: Iterable[str]) -> dict[str, float]:
        """label -> its best cosine with any row of ``words`` (0 with no words)."""
        wanted = list(dict.fromkeys(labels))
        if not len(words) or not wanted:
            return dict.fromkeys(wanted, 0.0)
        new = [x for x in wanted if x not in self._memo]
        if len(self._memo) + len(new) > self.KEEP:
            self._memo.clear()
        if self._per_text and new:  # all at once, over the cores
            self._memo.update(
                zip(new, normalized(self._embed([humane(x) for x in new])), strict=True)
            )
        else:
            for x in new:  # one at a time: see the class
                self._memo[x] = normalized(self._embed([humane(x)]))[0]
        sims = words @ np.stack([self._memo[x] for x in wanted]).T
        return {x: float(s) for x, s in zip(wanted, sims.max(axis=0), strict=True)}


# model id -> label -> unit vector; and model id -> word -> unit vector
_MEMOS: dict[str, dict[str, Any]] = {}
_WORD_MEMOS: dict[str, dict[str, Any]] = {}


def meaning_of(
    embed: Callable[[list[str]], np.ndarray], model_id: str, per_text: bool = False
) -> Meaning:
    """A ``Meaning`` whose vectors are kept across queries: they depend on the model
    only, so one memo per model serves the walk's labels and related notes' titles
    alike."""
    words = _WORD_MEMOS.setdefault(model_id, {})
    return Meaning(embed, _MEMOS.setdefault(model_id, {}), words, per_text)


def humane(label: str) -> str:
    """A property key as words: ``based_on`` / ``basedOn`` -> ``based on``."""
    return _CAMEL.sub(" ", label).replace("_", " ").replace("-", " ").strip().lower() or label


def _match(cos: float) -> float:
    return max(0.0, cos - FLOOR) / (1 - FLOOR)


def seeds(vg: VaultGraph, question: str, named: Iterable[tuple[str, str]]) -> dict[str, str]:
    """node -> the name the question calls it by: notes and tags from the name index
    (``named``), plus unwritten link targets whose title the question contains."""
    out: dict[str, str] = {}
    for name, path in named:
        node = TAG + name[1:].lower() if name.startswith("#") else path
        if node in vg.g:
            out.setdefault(node, name)
    spoken = _spoken(question)
    low = f" {spoken} "
    ghosts = vg.ghosts()
    by_word = _by_first_word(ghosts)
    found = sorted(  # in the graph's order, as a scan of every ghost would find them
        i
        for w in set(spoken.split(" "))
        for i in by_word.get(w, ())
        if f" {_spoken(ghosts[i][1])} " in low
    )
    for i in found:
        node, written = ghosts[i]
        out.setdefault(node, written)
    return out


_FIRST_WORDS: dict[int, tuple[list[tuple[str, str]], dict[str, list[int]]]] = {}


def _by_first_word(ghosts: list[tuple[str, str]]) -> dict[str, list[int]]:
    """The ghosts' positions by the first word of their spoken title, for the list
    ``VaultGraph.ghosts()`` keeps until the graph changes. Why: a title is in the
    question only if its first word is, so a question looks up its own ~10 words
    instead of testing every ghost (4,925 at 50k notes: 0.81 -> 0.007 ms a question)."""
    kept = _FIRST_WORDS.get(id(ghosts))
    if kept is not None and kept[0] is ghosts:
        return kept[1]
    index: dict[str, list[int]] = {}
    for i, (_, written) in enumerate(ghosts):
        title = _spoken(written)
        if title:
            index.setdefault(title.split(" ", 1)[0], []).append(i)
    if len(_FIRST_WORDS) >= 4:  # a few graphs a process (tests open several)
        _FIRST_WORDS.clear()
    _FIRST_WORDS[id(ghosts)] = (ghosts, index)  # the list held: its id stays its own
    return index


@functools.lru_cache(maxsize=1 << 16)
def _spoken(text: str) -> str:
    """A title's words, casefolded, one space apart: remembered, since every question
    looks for every unwritten link target's title in it (~1,200 targets at 13k notes:
    splitting each again was 6 ms of a query)."""
    return " ".join(words(text.casefold()))


def edges(vg: VaultGraph, node: str) -> Iterable[tuple[str, Step]]:
    """(neighbour, the edge) for every edge at ``node``, both directions."""
    g = vg.g
    for _, v, _, d in g.links_out(node):
        yield v, Step(node, d["kind"], v, d.get("line"), d.get("context") or "")
    for u, _, _, d in g.links_in(node):
        yield u, Step(u, d["kind"], node, d.get("line"), d.get("context") or "")


def _classes(vg: VaultGraph, node: str, exclude: set[str]) -> list[str]:
    """What kind of thing a note is: its type, tags, and the titles its property links
    point at (``categories: [[Books]]``, ``genre: [[Jazz]]``)."""
    attrs = vg.g.nodes[node]
    out = [attrs.get("type") or "", *attrs.get("tags", ())]
    for _, v, _, d in vg.g.links_out(node):
        if d["kind"] not in LINK_KINDS and v not in exclude:
            out.append(vg.g.nodes[v]["title"])
    return [c.rsplit("/", 1)[-1] for c in out if c]


def rest_words(question: str, names: Iterable[str]) -> list[str]:
    """The question's content words that are not in the names of its seeds: what the
    walk matches edges, classes and titles by (all of them if each is in a name)."""
    said = {w.lower() for name in names for w in words(name)}
    asked = content_words(question)
    return [w for w in dict.fromkeys(asked) if w.lower() not in said] or asked


def reach(
    vg: VaultGraph, question: str, named: Iterable[tuple[str, str]], meaning: Meaning, top: int = 24
) -> tuple[dict[str, str], list[Reached]]:
    """The seeds the question names, and the notes reached from them, best first."""
    seeded = seeds(vg, question, named)
    if not seeded:
        return seeded, []
    rest = rest_words(question, seeded.values())
    wanted = terms(" ".join(rest))
    vectors = meaning.vectors(rest)

    first: dict[str, dict[str, list[Step]]] = {}  # node -> seed -> its edges to it
    for seed in seeded:
        for n, step in edges(vg, seed):
            if n not in seeded and not n.startswith(TAG):
                first.setdefault(n, {}).setdefault(seed, []).append(step)
    kinds = {s.kind for per in first.values() for steps in per.values() for s in steps}
    rel = meaning.best(vectors, [k for k in kinds if k not in LINK_KINDS])

    def value(step: Step) -> float:
        if step.kind in LINK_KINDS:  # a body link: the sentence around it may say how
            said = terms(step.context) & wanted if step.context else set()
            return BASE + CONTEXT_WEIGHT * len(said) / max(1, len(wanted))
        return BASE + 0.2 + _match(rel[step.kind])

    found: dict[str, Reached] = {}
    for n, per in first.items():
        best = sorted(
            ((max(steps, key=value), seed) for seed, steps in per.items()),
            key=lambda e: -value(e[0]),
        )
        step, seed = best[0]
        total = sum(value(s) for s, _ in best)
        found[n] = Reached(n, total, 1, seed, (step,), {"edge": step.kind, "seeds": len(best)})

    _judge(vg, list(found.values()), set(seeded), vectors, wanted, rel, meaning)
    hubs = sorted(found.values(), key=lambda r: -r.score)[:EXPAND]
    second: dict[str, Reached] = {}
    for mid in hubs:
        if mid.node not in vg.notes or vg.g.degree(mid.node) > HUB:
            continue
        hop2 = [(n, s) for n, s in edges(vg, mid.node) if n not in seeded and n not in found]
        new = [s.kind for _, s in hop2 if s.kind not in rel and s.kind not in LINK_KINDS]
        rel.update(meaning.best(vectors, new))
        for n, step in hop2:
            score = HOP2 * (mid.score + value(step))
            if not n.startswith(TAG) and (n not in second or second[n].score < score):
                why = {"edge": step.kind, "via": mid.node}
                second[n] = Reached(n, score, 2, mid.seed, (*mid.steps, step), why)
    _judge(vg, list(second.values()), set(seeded), vectors, wanted, rel, meaning)
    found.update(second)
    for r in found.values():  # the question's word a typed edge answers ("wrote": author)
        kind = r.steps[-1].kind
        if kind not in LINK_KINDS and _match(rel.get(kind, 0.0)) > 0:
            at = meaning.nearest(vectors, kind)
            if at is not None:
                r.why["says"] = rest[at]
    out = sorted(found.values(), key=lambda r: (-r.score, r.hop, r.node))
    return seeded, out[:top]


def _judge(
    vg: VaultGraph,
    reached: list[Reached],
    seeded: set[str],
    vectors: np.ndarray,
    wanted: frozenset[str],
    rel: dict[str, float],
    meaning: Meaning,
) -> None:
    """Add to each reached note's score how well it is of the kind asked for (its
    classes, by meaning; a shared word counts in full) and how well its title matches."""
    labels = {r.node: _classes(vg, r.node, seeded) for r in reached if r.node in vg.notes}
    cls = meaning.best(vectors, [c for cs in labels.values() for c in cs])
    for r in reached:
        c = max((1.0 if terms(x) & wanted else cls[x] for x in labels.get(r.node, ())), default=0.0)
        attrs = vg.g.nodes[r.node]
        named = terms(" ".join([attrs["title"], *attrs.get("aliases", ())]))
        t = len(named & wanted) / max(1, len(wanted))
        r.score += CLASS_WEIGHT * _match(c) + TITLE_WEIGHT * t
        r.why.update({"relation": round(rel.get(r.why["edge"], 0.0), 3), "class": round(c, 3)})
