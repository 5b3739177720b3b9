"""Answer a question with evidence, no LLM: keywords, LightRAG retrieval, a budgeted pick.

Three steps, each replaceable:
1. ``keywords``: LightRAG wants high- and low-level keywords, which it would
   otherwise ask an LLM for. The question's words are matched against every
   name an entity answers to (titles, aliases, tags) in the FTS5 name index,
   so a mention of a note becomes that note's entity name; its content words
   and their pairs (a stand-in for noun phrases) complete the list.
2. the store's vector retrieval with those keywords (``Index.retrieve``: what
   LightRAG's ``aquery_data`` would rank first, at a third of its cost): candidate
   pools of 16 entities, 16 relations and 8 chunks, plus 4 supporting chunks cited by
   the candidates.
3. ``evidence.select``: coverage per token under the budget.

Every item comes back with the note path, heading and line to open.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lightrag import QueryParam

from wikid.ask import hop
from wikid.ask.evidence import (
    POOLS,
    STOP_RULES,
    Item,
    aspects_of,
    first_path,
    select,
    truncate,
)
from wikid.ask.fuse import (
    Ranked,
    best_chunk,
    card,
    fuse,
    home,
    hop_items,
    path_items,
    vector_order,
)
from wikid.ask.shelf import Shelf, stored_tokens
from wikid.ask.walk import Meaning, Reached, meaning_of, reach, rest_words
from wikid.core.chunk import is_boilerplate
from wikid.core.vault import template_folders
from wikid.core.words import question_keywords, terms
from wikid.store.ids import split_sources
from wikid.sync.search import Hit

if TYPE_CHECKING:
    from wikid.sync.index import Index

GRAPH_POOL = 24  # notes the graph walk proposes
BM25_POOL = 20  # notes full-text search proposes
CARD_POOL = 16  # best fused notes that get a card (title, type, properties, summary)
WALK_CARDS = 8  # and the graph walk's best notes, ranked by the walk
CHUNK_POOL = 10  # best fused notes whose best-matching chunk is a candidate
PRIOR = 2.0  # prior of the top fused note's items, as gain; it falls as 1 / (1 + rank)
EXPLAIN_TOP = 12
TEMPLATE_WEIGHT = 0.25  # a template note's items: skeletons, chosen only when nothing else is


def keywords(
    index: Index, question: str, mentioned: list[tuple[str, str]] | None = None
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """(high-level, low-level, (name, note) mentioned) for a question, with no LLM;
    ``mentioned``: ``index.names_in(question)``, if the caller has it."""
    mentioned = index.names_in(question) if mentioned is None else mentioned
    names: list[str] = []
    for name, path in mentioned:
        entity = name if name.startswith("#") else index.entity_name(path)
        for n in (entity, name):
            if n not in names:
                names.append(n)
    high, low = question_keywords(question, names)
    return high, low, mentioned


def _record_item(kind: str, key: str, text: str, rec: dict[str, Any], rank: int) -> Item:
    """An entity or relation item: located by its first file, citing its chunks."""
    return Item(
        kind,
        key,
        text,
        first_path(rec.get("file_path")),
        rank,
        extra={
            "sources": split_sources(rec.get("source_id")),
            "paths": split_sources(rec.get("file_path")),
        },
    )


def _items(data: dict[str, Any], pools: dict[str, int] | None) -> list[Item]:
    """LightRAG's records and chunks as evidence items, in its order (cut to the pools)."""

    def cut(key: str, pool: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = data.get(key, [])
        return rows[: pools[pool]] if pools else rows

    items = [
        _record_item(
            "entity",
            e["entity_name"],
            f"{e['entity_name']} ({e.get('entity_type', '')}): {e.get('description', '')}",
            e,
            rank,
        )
        for rank, e in enumerate(cut("entities", "entity"))
    ]
    items += [
        _record_item(
            "relation",
            f"{r['src_id']}\x1f{r['tgt_id']}",
            f"{r['src_id']} — {r['tgt_id']}: {r.get('description', '')}",
            r,
            rank,
        )
        for rank, r in enumerate(cut("relationships", "relation"))
    ]
    items += [
        _chunk_item(c.get("chunk_id") or "", c, rank)
        for rank, c in enumerate(cut("chunks", "chunk"))
    ]
    return items


def _chunk_item(chunk_id: str, row: dict[str, Any], rank: int) -> Item:
    """A chunk as an item: from ``aquery_data``'s chunks or a ``text_chunks`` row (its
    ``tokens``, the store's count of its content, when the row has it)."""
    path = row.get("file_path")
    return Item(
        "chunk",
        chunk_id,
        row.get("content", ""),
        path,
        rank,
        tokens=stored_tokens(row),
        extra={"paths": [path]},
    )


async def candidates(index: Index, result: dict[str, Any]) -> list[Item]:
    """The retrieved records and chunks (``aquery_data``'s shape) as evidence items, in
    their own order, plus supporting chunks."""
    items = _items(result.get("data") or {}, POOLS)
    chunk_ids = {it.key for it in items if it.kind == "chunk"}
    cited = Counter(s for it in items if it.kind != "chunk" for s in it.extra["sources"])
    support = [cid for cid, _ in cited.most_common() if cid not in chunk_ids][: POOLS["support"]]
    rows = await index.chunk_rows(support) if support else []
    for rank, (cid, row) in enumerate(zip(support, rows, strict=True)):
        if row:
            items.append(_chunk_item(cid, row, POOLS["chunk"] + rank))
    return items


def _source(item: Item) -> str | None:
    """The chunk a record is shown at: its first source (a chunk item is its own)."""
    return next(iter(item.extra.get("sources", [])), None)


def _render(shelf: Shelf, item: Item, explain: bool) -> dict[str, Any]:
    where = (
        shelf.locate(item.path, item.key, item.text)
        if item.kind == "chunk"
        else shelf.locate(item.path, _source(item))
    )
    out: dict[str, Any] = {"path": item.path, **where}
    if item.extra.get("line"):
        out["line"] = item.extra["line"]
    if item.kind == "entity":
        out["name"] = item.key
    elif item.kind == "relation":
        if "src" in item.extra:
            out["src"], out["tgt"] = item.extra["src"], item.extra["tgt"]
        else:
            out["src"], out["tgt"] = item.key.split("\x1f")
    else:
        out["chunk_id"] = item.key
    out = {**out, "text": item.text, "tokens": item.tokens, "covers": sorted(item.aspects)}
    if explain:
        out["why"] = {**item.extra.get("why", {}), "prior": round(item.prior, 3)}
    return out


@dataclass
class Ranking:
    """What the retrievers found before the pick: the seeds the question names, the
    walk's finds, the fused ranking of notes, and the second hop's plan."""

    seeded: dict[str, str]
    reached: list[Reached]
    lists: dict[str, list[str]]  # retriever -> its notes, best first
    fused: dict[str, Ranked]
    hop_plan: hop.Plan | None = None


def _rank(
    index: Index,
    question: str,
    names: list[tuple[str, str]],
    vector_items: list[Item],
    hits: list[Hit],
    meaning: Meaning,
) -> Ranking:
    """The walk and the fused ranking; with the store's vectors, the links of the best
    fused notes to follow (``ask.hop``). ``meaning``: the walk's, holding the question
    words the retrieval embedded already."""
    vg = index.graph
    seeded, reached = reach(vg, question, names, meaning, GRAPH_POOL)
    lists = {
        "graph": [home(vg, r) for r in reached],
        "named": [p for p in seeded if p in vg.notes],
        "bm25": [h.path for h in hits],
        "vector": vector_order(vector_items),
    }
    fused = fuse(lists)
    ranking = Ranking(seeded, reached, lists, fused)
    if vector_items:
        top = sorted(fused.values(), key=lambda r: r.rank)
        bases = [r.path for r in top if r.path in vg.notes][: hop.BASES]
        ranking.hop_plan = hop.plan(vg, bases, index.spans)
    return ranking


def _pool(
    index: Index,
    shelf: Shelf,
    question: str,
    ranked: Ranking,
    vector_items: list[Item],
    hops: list[hop.Hop],
    among: frozenset[str] | None = None,
) -> list[Item]:
    """Every candidate item, each with the prior of its best-ranked note (the fused
    ranking, with the second hop's notes as a retriever of their own).
    ``among``: only items of these notes (what the query's filters let through)."""
    vg = index.graph
    reached = ranked.reached
    hops = [h for h in hops if _kept(h.note, among)]
    if hops:  # the ranking the pick and ``explain`` see includes the second hop's
        ranked.lists["hop"] = [h.note for h in hops]
        ranked.fused = fuse(ranked.lists)
    ranking = ranked.fused
    top = [r for r in sorted(ranking.values(), key=lambda r: r.rank) if _kept(r.path, among)]
    asked = terms(question)
    # The graph's best finds are candidates by their own rank too: a note two hops away
    # that only the walk found would otherwise sink below notes every list half-knows.
    walked: dict[str, int] = {}
    for i, r in enumerate(reached[:WALK_CARDS]):
        if _kept(home(vg, r), among):
            walked.setdefault(home(vg, r), i)
    carded_paths = dict.fromkeys([r.path for r in top[:CARD_POOL]] + list(walked))
    cards = [card(vg, p, ranking[p].rank) for p in carded_paths if p in vg.notes]
    for c in cards:
        if c.path in walked:
            c.extra["walk_rank"] = walked[c.path]
    carded = {index.entity_name(c.path) for c in cards if c.path}
    chunks = [best_chunk(shelf.chunks(r.path), asked, r.rank) for r in top[:CHUNK_POOL]]
    pool: list[Item] = []
    seen: set[tuple[str, str]] = set()
    stored = {id(it) for it in vector_items}
    templates = tuple(f + "/" for f in template_folders(vg.root))
    hopped = hop_items(vg, hops, shelf.chunks)
    for item in [*path_items(vg, reached), *hopped, *cards, *vector_items, *filter(None, chunks)]:
        if (
            (item.kind, item.key) in seen
            or (id(item) in stored and item.kind == "entity" and item.key in carded)
            or (among is not None and item.path not in among)
        ):  # a card says what the note's entity record says, and more; filtered out
            continue
        seen.add((item.kind, item.key))
        notes = [item.extra["ranked_as"]] if "ranked_as" in item.extra else item.extra["paths"]
        fused = min((ranking[p].rank for p in notes if p in ranking), default=None)
        own = [item.extra.get(k) for k in ("walk_rank", "hop_rank")]
        ranks = [r for r in (fused, *own) if r is not None]
        item.prior = PRIOR / (1 + min(ranks)) if ranks else 0.0  # walked: its walk rank too
        if (item.path and item.path.startswith(templates)) or (
            item.kind == "chunk" and is_boilerplate(item.text)
        ):  # a template's skeleton, a table of contents: below any content
            item.prior, item.weight = 0.0, TEMPLATE_WEIGHT
        item.extra.setdefault("why", {})["fused_rank"] = fused
        pool.append(item)
    return pool


def _kept(path: str, among: frozenset[str] | None) -> bool:
    return among is None or path in among


async def evidence(
    index: Index,
    question: str,
    mode: str = "mix",
    budget: int = 3000,
    explain: bool = False,
    vectors: bool = True,
    among: frozenset[str] | None = None,
) -> dict[str, Any]:
    """The evidence for a question: at most ``budget`` tokens, 0 LLM calls. Without
    ``vectors`` (the store is still embedding) only the graph and BM25 are asked.
    ``among``: evidence from these notes only (what property filters let through)."""
    # The full-text queries in worker threads (tens of ms at 13k notes, off the loop);
    # BM25's runs while the store retrieves, which waits on the model and numpy. (On
    # connections of their own they would not take turns with LightRAG's reads, but
    # read-only connections beside the writer met SQLITE_BUSY waits of up to 10 s.)
    searching = asyncio.ensure_future(
        asyncio.to_thread(index.search, question, BM25_POOL, None, None, True, among)
    )
    calls = index.llm_calls
    meaning = meaning_of(index.embed, index.model_id, index.embeds_per_text)
    vector_items: list[Item] = []
    data: dict[str, Any] = {}
    try:
        mentioned = await asyncio.to_thread(index.names_in, question)
        high, low, names = keywords(index, question, mentioned)
        if vectors:
            # A question that names notes is walked from them, by the meaning of its
            # other words: those not kept yet are embedded with the question, in one
            # call over the cores, and kept for the walk.
            words = meaning.unknown(rest_words(question, [n for n, _ in names])) if names else []
            data = await index.retrieve(question, high, low, mode, POOLS, words)
            meaning.keep(data["word_vectors"])
            vector_items = await candidates(index, {"data": data})
    finally:
        hits = await searching
    # The walk, the pick and the rendering: CPU work over the graph (~100 ms at 13k
    # notes) and model calls for the question's words, in a worker thread so that the
    # loop keeps answering; the graph does not change meanwhile (``graph_still``).
    asked = Asked(
        question, mode, budget, explain, vectors, {"high": high, "low": low}, calls, among
    )
    async with index.graph_still:
        ranked = await asyncio.to_thread(_rank, index, question, names, vector_items, hits, meaning)
        hops: list[hop.Hop] = []
        if ranked.hop_plan is not None and ranked.hop_plan.chunks:
            scores = await index.similarity(data["question_vector"], ranked.hop_plan.ids())
            hops = hop.pick(ranked.hop_plan, question, scores)
        shelf = Shelf(index)  # the best notes' and the second hop's chunks, in one read
        await shelf.read(_shelved(ranked, hops, asked.among))
        pick = await asyncio.to_thread(
            _pick, index, shelf, asked, ranked, hops, vector_items, names
        )
        # The chosen records' source chunks (a chosen chunk item has its text already).
        await shelf.read(ids=[s for it in pick.chosen if it.kind != "chunk" and (s := _source(it))])
        return await asyncio.to_thread(_output, shelf, asked, ranked, pick)


def _shelved(ranked: Ranking, hops: list[hop.Hop], among: frozenset[str] | None) -> list[str]:
    """The notes whose chunks ``_pool`` reads: the best fused notes (``CHUNK_POOL``) and
    the second hop's. The second hop's ranking can only lift its own notes above the
    others, so these hold every note ``_pool`` will take a best chunk from."""
    top = [r.path for r in sorted(ranked.fused.values(), key=lambda r: r.rank)]
    kept = [p for p in top if _kept(p, among)][:CHUNK_POOL]
    return list(dict.fromkeys(kept + [h.note for h in hops if _kept(h.note, among)]))


@dataclass(frozen=True)
class Asked:
    """A question as ``evidence`` was asked it, and what it found out before the pick."""

    question: str
    mode: str
    budget: int
    explain: bool
    vectors: bool  # False: the store is still embedding, only the graph and BM25 asked
    keywords: dict[str, list[str]]
    calls_before: int  # the index's LLM call count when the question came in
    among: frozenset[str] | None = None  # the notes property filters let through


@dataclass
class Pick:
    """The candidates and what the budget took of them."""

    pool: list[Item]
    aspects: set[str]
    chosen: list[Item]
    used: int
    stopped: str


def _pick(
    index: Index,
    shelf: Shelf,
    asked: Asked,
    ranked: Ranking,
    hops: list[hop.Hop],
    vector_items: list[Item],
    names: list[tuple[str, str]],
) -> Pick:
    pool = _pool(index, shelf, asked.question, ranked, vector_items, hops, asked.among)
    aspects = aspects_of(asked.question, [n for n, _ in names], [p for _, p in names])
    chosen, used, stopped = select(pool, aspects, asked.budget, index.count_all)
    return Pick(pool, aspects, chosen, used, stopped)


def _output(shelf: Shelf, asked: Asked, ranked: Ranking, pick: Pick) -> dict[str, Any]:
    explain, chosen = asked.explain, pick.chosen
    by_kind: dict[str, list[dict[str, Any]]] = {"entities": [], "relations": [], "chunks": []}
    for order, item in enumerate(chosen):  # ``pick``: the order of choice, best first
        kind = {"entity": "entities", "relation": "relations", "chunk": "chunks"}[item.kind]
        by_kind[kind].append({**_render(shelf, item, explain), "pick": order})
    uncovered = pick.aspects - {a for it in chosen for a in it.aspects}
    out = {
        "question": asked.question,
        "mode": asked.mode,
        "keywords": asked.keywords,
        "budget": asked.budget,
        "tokens": pick.used,
        **by_kind,
        "notes": list(dict.fromkeys(it.path for it in chosen if it.path)),
        "uncovered": sorted(uncovered),
        "candidates": len(pick.pool),
        "stopped": {"rule": pick.stopped, "why": STOP_RULES[pick.stopped]},
        "llm_calls": shelf.index.llm_calls - asked.calls_before,
    }
    if explain:
        fused = sorted(ranked.fused.values(), key=lambda r: r.rank)[:EXPLAIN_TOP]
        out["explain"] = {
            "named": ranked.seeded,
            "fused": [{"path": r.path, "rank": r.rank, "by": r.sources} for r in fused],
            "retrievers": ["graph", "named", "bm25"]
            + (["vector"] if asked.vectors else [])
            + (["hop"] if "hop" in ranked.lists else []),
            # Every note an item of the pool stands for: what the pick could have taken
            # (a note missing here is a retrieval miss, not a selection miss).
            "candidates": list(dict.fromkeys(it.path for it in pick.pool if it.path)),
        }
    return out


def paths_of(items: list[Item]) -> set[str]:
    """The note each item is shown as coming from (as ``evidence`` reports it)."""
    return {it.path for it in items if it.path}


async def baseline(index: Index, question: str, mode: str, budget: int) -> list[Item]:
    """Plain ``aquery_data`` (same keywords) cut at the budget in its own order: what the
    coverage pick is measured against."""
    high, low, _ = keywords(index, question)
    param = QueryParam(mode=mode, enable_rerank=False, hl_keywords=high, ll_keywords=low)  # type: ignore[arg-type]
    result = await index.aquery_data(question, param)
    return truncate(_items(result.get("data") or {}, None), budget, index.count_all)
