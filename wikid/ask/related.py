"""The notes related to a note: near it in meaning, close to it in the graph, sharing
its words, and why.

Why three signals, fused: meaning alone (Smart Connections' view) misses a short note
whose kin share its links and tags but not its words, and ranks a passing mention as
high as a note on the subject; the graph alone ranks a tag's hundred members alike;
the words a note opens with name its subject in the vault's own terms, where an
English-trained model reads other languages and jargon poorly. Each signal ranks the
candidates and reciprocal-rank fusion adds the ranks (``ask.fuse``), so no scale needs
calibrating against another's.

- meaning: each of the note's chunks (the first ``MAX_CHUNKS``) asks the store's chunk
  vectors for its ``PER_CHUNK`` nearest, in one scan; a note's score is its best chunk
  pair's cosine, and that pair is the reason shown. (Measured by meaning alone over
  every chunk, recall@10 vaultofknowledge / its round-4 seeds: the best pair .775 /
  .577, the mean of the best two .793 / .582, of three .808 / .552, the notes' mean
  vectors .747 / .572: no way of scoring pairs lifts the round-4 seeds, whose kin
  MiniLM does not place near them.)
- graph: Adamic-Adar over the neighbours either way (links, backlinks, tags, property
  targets, unwritten targets): each shared neighbour ``z`` adds ``1 / log(degree z)``,
  so a rare tag counts for more than a common one. A neighbour of more than
  ``MAX_DEGREE`` nodes (a tag on half the vault) says little and costs much: skipped.
  Ties (a tag's members) are broken by meaning.
- words: BM25 of the note's title and its opening ``WORDS`` words (what a user would
  type into search to find its kin), its best ``WORDS_POOL``, at half a signal's weight.

Notes already linked either way are left out unless asked for: the user knows them.
Fresh by construction: the graph and the vectors are the ones every edit updates.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from wikid.ask.fuse import Ranked, fuse
from wikid.ask.walk import meaning_of
from wikid.core import cjk
from wikid.core.chunk import is_boilerplate, is_placeholder
from wikid.core.graph import GHOST, TAG, VaultGraph
from wikid.store.embed import MINILM_ID, normalized

if TYPE_CHECKING:
    from wikid.sync.index import Index

MAX_CHUNKS = 32  # a long note asks with its first chunks only: one scan costs per column
PER_CHUNK = 24  # nearest chunks asked for per chunk of the note
MAX_DEGREE = 1000
HUB_TAG = 50  # a tag on more notes than this (and a 20th of the vault) relates none alone
LINK = 1 / math.log(2)  # a linked note's graph score: a neighbour shared with it alone
GRAPH_POOL = 50  # the graph's best candidates, scored by meaning too
# Smaller than a query's 10: each signal's first few places decide. Measured on the
# hand-checked sets (tests/questions.json), recall@10 typed / vaultofknowledge: k=5
# .967 / .841, k=10 .904 / .826, k=60 .842 / .811; a note only one signal finds at its
# top (a film and the book it echoes, no link between) then stays on the first page.
RRF_K = 5
# Measured on the hand-checked sets, recall@10 typed / tasks-docs / vaultofknowledge /
# knowledge-garden: without words .967 / 1.000 / .856 / .403; at weight 1 .917 / 1.000 /
# .866 / .444; at 0.5 .942 / 1.000 / .881 / .444; at 0.25 .942 / 1.000 / .851 / .444.
WEIGHTS = {"vector": 1.0, "graph": 1.0, "bm25": 0.5}
# The shipped model was trained on English: for a note written mostly in Chinese,
# Japanese or Korean its meaning score says little (knowledge-garden: meaning alone
# .403), and the words then weigh as much as the meaning. knowledge-garden .444 -> .528,
# the English sets unchanged (the same weight everywhere cost vaultofknowledge .881 ->
# .866). A model the user set (``embedding``) is taken to read the vault's language.
UNREAD = {**WEIGHTS, "bm25": WEIGHTS["vector"]}
UNREAD_SHARE = 0.5  # of the title and opening's letters in CJK script
# Why the title and opening, not "more like this" (the note's top tf-idf terms from its
# whole body): measured, recall@10 vaultofknowledge / its round-4 seeds, with 5 terms
# .881 / .562, 12 terms .836 / .588, 25 terms .821 / .588, against .881 / .575 here.
WORDS = 30
WORDS_POOL = 20
# Of those words, the 10 in fewest notes are asked for: the same recall on every set as
# all of them, and at 13k notes a search of 30 words took 21 ms, of 10 words 11 ms.
# Fewer cost recall: 7 words .866 / .550, 5 words .851 / .546.
RAREST = 10
SHOWN = 5  # shared neighbours shown per result
SNIPPET = 200  # characters of the matching chunk shown


@dataclass
class _Near:
    """A candidate note's best chunk pair with the note asked about."""

    score: float
    line: int  # where the pair's chunk starts in the note asked about
    chunk: str  # the candidate's chunk
    text: str


@dataclass
class _Graph:
    score: float = 0.0
    shared: list[tuple[float, str]] = field(default_factory=list)  # (weight, node)
    linked: bool = False  # a link either way (kept only when asked for)
    specific: bool = False  # shares something besides tags on a 20th of the vault


SIGNALS = ("vector", "graph", "bm25")  # meaning, the graph's Adamic-Adar, the words


async def related(
    index: Index,
    path: str,
    limit: int = 10,
    offset: int = 0,
    include_linked: bool = False,
    among: Collection[str] | None = None,
    vectors: bool = True,
) -> dict[str, Any]:
    """One page of the notes related to ``path`` (a note of the graph), best first,
    each with why; ``among``: only these notes; ``vectors`` False: the graph and the
    words alone (the store is still being embedded)."""
    signals = SIGNALS if vectors else ("graph", "bm25")
    found = await _found(index, path, include_linked, among, signals)
    ranked, near, graph, linked = found
    page = ranked[offset : offset + limit]
    await _texts(index, [near[r.path] for r in page if r.path in near])
    out = [
        _result(index, r.path, r.score, r.sources, near.get(r.path), graph.get(r.path))
        for r in page
    ]
    return {
        "note": path,
        "related": out,
        "total": len(ranked),
        "next_cursor": str(offset + limit) if offset + limit < len(ranked) else None,
        "linked_left_out": 0 if include_linked else len(linked),
        **({} if vectors else {"meaning": "not yet: the store is being embedded"}),
    }


async def ranked(
    index: Index, path: str, signals: Collection[str] = SIGNALS, include_linked: bool = False
) -> list[str]:
    """The related notes' paths, best first, by these of ``SIGNALS`` only (one alone
    is a baseline the fusion is measured against)."""
    return [r.path for r in (await _found(index, path, include_linked, None, signals))[0]]


async def _found(
    index: Index,
    path: str,
    include_linked: bool,
    among: Collection[str] | None,
    signals: Collection[str],
) -> tuple[list[Ranked], dict[str, _Near], dict[str, _Graph], set[str]]:
    # The words' BM25 (a worker thread, ~15 ms at 13k notes) runs beside the meaning's
    # vector search and the graph's walk: it needs neither (in process at 13k notes,
    # related p50 37 -> 28 ms).
    words = asyncio.ensure_future(_words(index, path)) if "bm25" in signals else None
    try:
        return await _fused(index, path, include_linked, among, signals, words)
    finally:
        if words is not None and not words.done():
            words.cancel()


async def _fused(
    index: Index,
    path: str,
    include_linked: bool,
    among: Collection[str] | None,
    signals: Collection[str],
    words: asyncio.Future[tuple[list[str], str]] | None,
) -> tuple[list[Ranked], dict[str, _Near], dict[str, _Graph], set[str]]:
    ids, lines = index.spans(path)
    mine = index.chunks(path)
    dull = {c.id for c in mine if is_boilerplate(c.content) and not is_placeholder(c.content)}
    if dull:  # boilerplate (a table of contents, a live query) asks for nothing
        kept = [(c, n) for c, n in zip(ids, lines, strict=True) if c not in dull]
        ids, lines = tuple(c for c, _ in kept), tuple(n for _, n in kept)

    async def meaning_near() -> dict[str, _Near]:
        if "vector" not in signals:
            return {}
        return await _by_meaning(index, path, dict(zip(ids, lines, strict=True)))

    async def walked() -> tuple[dict[str, _Graph], set[str]]:
        async with index.graph_still:  # the walk of the graph, off the event loop
            return await asyncio.to_thread(_by_graph, index.graph, path)

    # The vector search beside the walk of the graph (Python): each needs only the note.
    # (They overlap where numpy and SQLite let go of the GIL; usearch's search holds it.)
    near, (graph, linked) = await asyncio.gather(meaning_near(), walked())
    if "graph" not in signals:
        graph = {}
    elif include_linked:  # a link counts as a neighbour shared with no other note
        for p in linked:
            graph.setdefault(p, _Graph()).score += LINK
            graph[p].linked = True
    if graph and ids and "vector" in signals:  # the graph's best, scored by meaning too
        best = sorted(graph, key=lambda p: (-graph[p].score, p))[:GRAPH_POOL]
        await _fill(index, path, lines[:MAX_CHUNKS], ids[:MAX_CHUNKS], near, best)
    if near and len(mine) == 1 and is_placeholder(mine[0].content):  # an empty note: its
        await _by_title(index, path, near, list(near))  # title is all it means
    notes = index.graph.notes

    def wanted(p: str) -> bool:
        return p != path and p in notes and (include_linked or p not in linked)

    keep = {p for p in near.keys() | graph.keys() if wanted(p)}
    meaning = sorted((p for p in keep if p in near), key=lambda p: (-near[p].score, p))
    tie = {p: near[p].score if p in near else -1.0 for p in keep}
    # A note that shares only a hub tag (#physics on most of a folder) is no graph
    # neighbour: fusion counts ranks, so any weight would rank the tag's every member.
    by_graph = sorted(
        (p for p in keep if p in graph and (graph[p].specific or graph[p].linked)),
        key=lambda p: (-graph[p].score, -tie[p], p),
    )
    lists = {"vector": meaning, "graph": by_graph}
    weights = WEIGHTS
    if words is not None:
        found, text = await words
        lists["bm25"] = [p for p in found if wanted(p)][:WORDS_POOL]
        weights = weights_for(index.model_id, text)
    fused = fuse(lists, RRF_K, weights).values()
    ranked = sorted(fused, key=lambda r: r.rank)
    if among is not None:  # the filters select from the one ranking, its order kept
        ranked = [r for r in ranked if r.path in among]
    return ranked, near, graph, linked


async def _by_meaning(index: Index, path: str, lines: dict[str, int]) -> dict[str, _Near]:
    """Each note with a chunk near one of ``path``'s chunks -> its best pair."""
    asked = list(lines)[:MAX_CHUNKS]
    found = await index.nearest_chunks(asked, PER_CHUNK) if asked else {}
    best: dict[str, _Near] = {}
    empty: set[str] = set()
    for cid, hits in found.items():
        for hit in hits:
            other, score = hit.get("file_path"), float(hit.get("distance", 0.0))
            content = hit.get("content", "")
            if not other or other == path:
                continue
            if is_placeholder(content):  # an empty note: scored by its title below
                empty.add(other)
            elif is_boilerplate(content):  # a table of contents relates no notes
                continue
            if other not in best or score > best[other].score:
                best[other] = _Near(score, lines[cid], hit["id"], content)
    await _by_title(index, path, best, sorted(empty))
    return best


async def _by_title(index: Index, path: str, near: dict[str, _Near], notes: list[str]) -> None:
    """Score the pairs an empty note is in by the two notes' titles: its one chunk is
    its title and "(empty note)", and that shared text made every empty note look like
    every other (a book's list topped by three empty notes at 0.43-0.49), while its
    title is all the meaning it has ("M-Theory" and "Superstring Theory")."""
    titled = [p for p in notes if p in near and p in index.graph.notes]
    if not titled:
        return
    title = {p: index.graph.notes[p].title for p in [path, *titled]}
    meaning = meaning_of(index.embed, index.model_id, index.embeds_per_text)

    def cosines() -> dict[str, float]:
        return meaning.best(meaning.vectors([title[path]]), [title[p] for p in titled])

    by = await asyncio.to_thread(cosines)
    for p in titled:
        n = near[p]
        near[p] = _Near(by.get(title[p], 0.0), n.line, n.chunk, n.text)


async def _fill(
    index: Index,
    path: str,
    lines: Sequence[int],
    ids: Sequence[str],
    near: dict[str, _Near],
    notes: list[str],
) -> None:
    """The best chunk pair of each of ``notes`` that the nearest-chunk search missed,
    so that a note close in the graph has a meaning rank too (a short note's kin are
    often outside its chunks' nearest few dozen)."""
    theirs = {p: index.spans(p)[0][:MAX_CHUNKS] for p in notes if p not in near}
    if not theirs:  # all found by the search already: no vectors to read
        return
    vectors = await index.chunk_vectors(list(ids) + [c for cs in theirs.values() for c in cs])
    mine = [(c, line) for c, line in zip(ids, lines, strict=True) if c in vectors]
    if not mine:
        return
    m = normalized(np.stack([vectors[c] for c, _ in mine]))
    sims = {}
    for p, cs in theirs.items():
        have = [c for c in cs if c in vectors]
        if have:
            sims[p] = (
                have,
                normalized(np.stack([vectors[c] for c in have])) @ m.T,
            )  # theirs x mine
    for _ in range(3):  # a best pair on boilerplate gives way to the next best
        best = {p: np.unravel_index(int(np.argmax(s)), s.shape) for p, (_, s) in sims.items()}
        chunk = {p: sims[p][0][i] for p, (i, _) in best.items() if sims[p][1][i].max() > -2}
        rows = await index.chunk_rows(list(chunk.values())) if chunk else []
        texts = {p: (row or {}).get("content", "") for p, row in zip(chunk, rows, strict=True)}
        empty = [p for p, t in texts.items() if is_placeholder(t)]
        dull = {p for p, t in texts.items() if is_boilerplate(t)} - set(empty)
        for p, (i, j) in best.items():
            if p not in dull and sims[p][1][i, j] > -2:
                near[p] = _Near(float(sims[p][1][i, j]), mine[j][1], sims[p][0][i], "")
        await _by_title(index, path, near, empty)
        if not dull:
            break
        for p in dull:  # the boilerplate chunk scores nothing from here on
            sims[p][1][best[p][0], :] = -3.0
        sims = {p: sims[p] for p in dull}


async def _texts(index: Index, pairs: list[_Near]) -> None:
    """The matching chunk's text, for the pairs ``_fill`` found (the shown page only)."""
    blank = [n for n in pairs if not n.text]
    rows = await index.chunk_rows([n.chunk for n in blank]) if blank else []
    for n, row in zip(blank, rows, strict=True):
        n.text = (row or {}).get("content", "")


def weights_for(model_id: str, text: str) -> dict[str, float]:
    """The signals' weights for a note whose title and opening words are ``text``: the
    words weigh as much as the meaning where the shipped model cannot read them."""
    return UNREAD if model_id == MINILM_ID and cjk.share(text) >= UNREAD_SHARE else WEIGHTS


async def _words(index: Index, path: str) -> tuple[list[str], str]:
    """BM25's notes for the note's title and opening words, best first, and those words.
    Words in over half the notes are left out, as a query's BM25 leaves them: they rank
    every note and cost most. Only the opening is read under ``graph_still`` (a head's
    comes from the parse cache); the search reads the full-text index alone."""
    async with index.graph_still:
        text = await asyncio.to_thread(_opening, index, path)
    hits = await asyncio.to_thread(
        index.search, text, 2 * WORDS_POOL, None, None, rare_only=True, rarest=RAREST
    )
    return [h.path for h in hits], text


def _opening(index: Index, path: str) -> str:
    note = index.graph.payload(path)
    return f"{note.title} {' '.join((note.opening or '').split()[:WORDS])}"


def _by_graph(vg: VaultGraph, path: str) -> tuple[dict[str, _Graph], set[str]]:
    """Adamic-Adar of every note sharing a neighbour with ``path``, and the notes
    ``path`` links or is linked by."""
    g = vg.g
    if path not in g:
        return {}, set()
    around = set(g.succ[path]) | set(g.pred[path])
    out: dict[str, _Graph] = defaultdict(_Graph)
    hub = max(HUB_TAG, len(vg.notes) // 20)
    for z in around:
        members = set(g.succ[z]) | set(g.pred[z])
        if not 1 < len(members) <= MAX_DEGREE:
            continue
        weight = 1.0 / math.log(len(members))
        specific = not (z.startswith(TAG) and len(members) > hub)
        for m in members:
            if m != path and m in vg.notes:
                out[m].score += weight
                out[m].shared.append((weight, z))
                out[m].specific |= specific
    return dict(out), {z for z in around if z in vg.notes}


def _shown(vg: VaultGraph, node: str) -> str:
    if node.startswith(TAG):
        return "#" + node[len(TAG) :]
    if node.startswith(GHOST):
        return node[len(GHOST) :] + " (no note yet)"
    return node


def _result(
    index: Index,
    path: str,
    score: float,
    ranks: dict[str, int],
    near: _Near | None,
    graph: _Graph | None,
) -> dict[str, Any]:
    vg = index.graph
    why: dict[str, Any] = {
        "ranks": {
            "meaning": ranks.get("vector"),
            "graph": ranks.get("graph"),
            "words": ranks.get("bm25"),
        },
    }
    if near is not None:
        ids, starts = index.spans(path)
        text = " ".join(near.text.split())
        why["meaning"] = {
            "score": round(near.score, 3),
            "line": near.line,
            "their_line": starts[ids.index(near.chunk)] if near.chunk in ids else None,
            "text": text[:SNIPPET] + ("…" if len(text) > SNIPPET else ""),
        }
    if graph is not None:
        shared = sorted(graph.shared, key=lambda w: (-w[0], w[1]))[:SHOWN]
        why["graph"] = {
            "score": round(graph.score, 3),
            "shared": [_shown(vg, z) for _, z in shared],
            **({"linked": True} if graph.linked else {}),
        }
    return {"path": path, "title": vg.notes[path].title, "score": round(score, 4), "why": why}
