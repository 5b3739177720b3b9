"""The read side of the socket API: links, backlinks, broken, graph, query, search,
keywords.

Why separate from the daemon: these are plain functions of the in-memory graph
and the store, so they are testable without a socket, and they never write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from wikid.ask.query import evidence, keywords
from wikid.ask.related import related as related_notes
from wikid.ask.when import when
from wikid.config import QUERY_MODES as MODES
from wikid.core.edges import to_json
from wikid.core.graph import GHOST, VaultGraph
from wikid.core.resolve import fold
from wikid.server import browse
from wikid.server.browse import line_of
from wikid.server.protocol import ProtocolError, whole_number
from wikid.sync import props
from wikid.sync.index import Index


def find_note(vg: VaultGraph, ref: str) -> str:
    """A note by vault path (with or without .md) or by title/alias, case-insensitively."""
    if not isinstance(ref, str) or not ref.strip():
        raise ProtocolError("bad_request", "give a note as a path or a title")
    ref = ref.strip()
    for candidate in (ref, ref + ".md"):
        if candidate in vg.notes:
            return candidate
    key = fold(ref.removesuffix(".md"))
    by_path = sorted(p for p in vg.notes if fold(p.removesuffix(".md")) == key)
    by_title = sorted(p for p, n in vg.notes.items() if fold(n.title) == key)
    by_alias = sorted(p for p, n in vg.notes.items() if any(fold(a) == key for a in n.aliases))
    for found in (by_path, by_title, by_alias):
        if found:
            return found[0]
    raise ProtocolError("not_found", f"no note with path or title {ref!r}{_close(vg, ref)}")


def _close(vg: VaultGraph, ref: str) -> str:
    """``; did you mean ...?`` with up to three titles close to a mistyped one."""
    import difflib

    titles = {str(vg.g.nodes[p]["title"]): p for p in vg.notes}
    near = difflib.get_close_matches(ref, list(titles), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(repr(t) for t in near)}?" if near else ""


def _ghost(vg: VaultGraph, ref: str) -> str | None:
    """The unwritten link target ``ref`` names (case-insensitively), if one is linked."""
    key = fold(ref.strip())
    return next((n for n in vg.g if n.startswith(GHOST) and fold(n[len(GHOST) :]) == key), None)


def _edge(u: str, v: str, d: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": u,
        "target": v,
        "kind": d["kind"],
        "line": d["line"],
        "heading": d["heading"],
        "block": d["block"],
        "display": d["display"],
        "context": d["context"],
        "ambiguous": d["ambiguous"],
        "unresolved": v.startswith(GHOST),
    }


def links(vg: VaultGraph, note: str) -> dict[str, Any]:
    path = find_note(vg, note)
    edges = sorted(vg.g.links_out(path), key=lambda e: (e[3]["line"] or 0, e[1]))
    return {"note": path, "links": [_edge(u, v, d) for u, v, _, d in edges if d["kind"] != "tag"]}


def backlinks(vg: VaultGraph, note: str) -> dict[str, Any]:
    """The links into a note, or into a target no note has yet (Obsidian lists those
    too: the notes that link an unwritten "Emergence")."""
    try:
        path = find_note(vg, note)
    except ProtocolError as exc:
        ghost = _ghost(vg, note) if exc.code == "not_found" and isinstance(note, str) else None
        if ghost is None:
            raise
        path = ghost
    edges = sorted(vg.g.links_in(path), key=lambda e: (e[0], e[3]["line"] or 0))
    return {"note": path, "backlinks": [_edge(u, v, d) for u, v, _, d in edges]}


def broken(vg: VaultGraph, folder: Any = None) -> dict[str, Any]:
    """Unresolved link targets with the notes that hold them (from ``folder`` only)."""
    if folder is not None and not isinstance(folder, str):
        raise ProtocolError("bad_request", "folder must be a string")
    prefix = (folder or "").strip("/")
    out = []
    for node in sorted(n for n in vg.g if n.startswith(GHOST)):
        sources = sorted(
            {u for u, _ in vg.g.in_edges(node) if not prefix or u.startswith(prefix + "/")}
        )
        if sources:
            out.append({"target": node[len(GHOST) :], "sources": sources})
    return {"broken": out}


def graph(vg: VaultGraph) -> dict[str, Any]:
    return to_json(vg.g)


async def query(
    index: Index,
    text: Any,
    mode: Any = "mix",
    budget: Any = 3000,
    explain: Any = False,
    where: Any = None,
    vectors: bool = True,
) -> dict[str, Any]:
    """Budgeted evidence for a question, 0 LLM calls (``query.evidence``); with
    ``explain``, why each item was chosen; ``where``, from the notes that pass these
    property filters only; a question that dates itself ("last month") is asked of
    the notes modified then (``ask.when``), and the answer says so."""
    if not isinstance(text, str) or not text.strip():
        raise ProtocolError("bad_request", "query needs a non-empty 'text'")
    if mode not in MODES:
        raise ProtocolError("bad_request", f"unknown query mode {mode!r}; choose from {MODES}")
    budget = whole_number(budget, "budget (tokens)", 50, 100_000)
    if not isinstance(explain, bool):
        raise ProtocolError("bad_request", f"explain must be true or false, not {explain!r}")
    filters, dated = _filters(where), when(text)  # "... last month": a date filter too
    every = filters + (dated.filters() if dated else [])
    among = frozenset(await asyncio.to_thread(index.passing, every)) if every else None
    out = await evidence(index, text, mode, budget, explain, vectors, among)
    if filters:
        out["where"] = {"filters": [f"{f.key}{f.op}{f.value}" for f in filters]}
        out["where"]["notes"] = len(among or ())
    if dated:
        out["when"] = dated.said(len(among or ()))
        if explain:
            out["explain"]["when"] = out["when"]
    return out


def _filters(where: Any) -> list[props.Where]:
    """``where`` as filters: one ``key=value`` string or a list of them (all must hold)."""
    if where is None or where == [] or where == "":
        return []
    items = [where] if isinstance(where, str) else where
    if not isinstance(items, list):
        raise ProtocolError("bad_request", f"where must be a filter or a list of them: {where!r}")
    try:
        return [props.parse(w) for w in items]
    except ValueError as e:
        raise ProtocolError("bad_request", str(e)) from None


def search(
    index: Index, text: Any, k: Any = 8, folder: Any = None, tag: Any = None, where: Any = None
) -> dict[str, Any]:
    """BM25 over the notes: top-k snippets with their frontmatter, ~500 tokens in all;
    ``where``: among the notes that pass these property filters only."""
    filters = _filters(where)
    if text is None or (isinstance(text, str) and not text.strip()):
        text = ""  # no words: with filters, the notes that pass them
    if not isinstance(text, str) or not (text or filters):
        raise ProtocolError("bad_request", "search needs a non-empty 'text' or a 'where' filter")
    k = whole_number(k, "k", 1, 100, default=8)
    for name, value in (("folder", folder), ("tag", tag)):
        if value is not None and not isinstance(value, str):
            raise ProtocolError("bad_request", f"{name} must be a string, not {value!r}")
    among = index.passing(filters) if filters else None
    if not text:  # folder and tag select as the where filters of the same names do
        asked = (("folder", folder), ("tags", (tag or "").lstrip("#")))
        extra = [props.parse(f"{key}={v}") for key, v in asked if v]
        listed = index.passing([*filters, *extra])
        return {"text": "", "hits": _listed(index, listed, k)}
    hits = index.search(text, k, folder or None, tag or None, among=among)
    return {
        "text": text,
        "hits": [
            {
                "path": h.path,
                "title": h.title,
                "snippet": h.snippet,
                "line": line_of(index.graph, h.path, h.snippet),
                "score": round(h.score, 3),
                **h.meta,
            }
            for h in hits
        ],
    }


def _listed(index: Index, paths: set[str], k: int) -> list[dict[str, Any]]:
    """The first ``k`` of ``paths`` by title (a search with filters and no words), each
    as a hit: its title and opening words, at line 1."""
    vg = index.graph
    nodes = vg.g.nodes
    notes = sorted(
        (p for p in paths if p in vg.notes), key=lambda p: (str(nodes[p]["title"]).casefold(), p)
    )
    return [
        {
            "path": p,
            "title": nodes[p]["title"],
            "snippet": " ".join((vg.payload(p).opening or "").split()[:30]),
            "line": 1,
            "score": 0.0,
        }
        for p in notes[:k]
    ]


async def related(index: Index, req: dict[str, Any], vectors: bool = True) -> dict[str, Any]:
    """The notes related to ``note`` by meaning and by the graph, not linked to it
    (unless ``include_linked``), each with why; ``where``: among the notes that pass
    these filters only; ``limit`` and ``cursor`` page them (``ask.related``)."""
    path = find_note(index.graph, req.get("note", ""))
    limit = whole_number(req.get("limit"), "limit", 1, 100, default=10)
    cursor = req.get("cursor")
    if cursor is not None and not (isinstance(cursor, str) and cursor.isdigit()):
        raise ProtocolError("bad_request", "cursor must be a next_cursor a reply gave")
    linked = req.get("include_linked", False)
    if not isinstance(linked, bool):
        raise ProtocolError("bad_request", f"include_linked must be true or false, not {linked!r}")
    filters = _filters(req.get("where"))
    among = await asyncio.to_thread(index.passing, filters) if filters else None
    offset = int(cursor or 0)
    return await related_notes(index, path, limit, offset, linked, among, vectors)


def question_keywords(index: Index, text: Any) -> dict[str, Any]:
    """A question's LLM-free keywords, as ``query`` computes them: what ``wikid
    lightrag-server`` answers LightRAG's keyword-extraction prompt with when no LLM is
    configured, so that every query mode retrieves (``cli.lightrag_app``)."""
    if not isinstance(text, str) or not text.strip():
        raise ProtocolError("bad_request", "keywords needs a non-empty 'text'")
    high, low, mentioned = keywords(index, text)
    return {"text": text, "high": high, "low": low, "mentioned": [p for _, p in mentioned]}


def _neighbors(vg: VaultGraph, req: dict[str, Any]) -> Any:
    note = find_note(vg, req.get("note", ""))
    return browse.neighbors(vg, note, req.get("depth", 1), req.get("limit"))


def _read(vg: VaultGraph, req: dict[str, Any]) -> Any:
    extra = (req.get("heading"), req.get("start_line"), req.get("max_chars"))
    return browse.read(vg, req.get("path"), *extra)


# The ops that read only the in-memory graph: op -> f(graph, request).
GRAPH_OPS: dict[str, Callable[[VaultGraph, dict[str, Any]], Any]] = {
    "links": lambda vg, req: links(vg, req.get("note", "")),
    "backlinks": lambda vg, req: backlinks(vg, req.get("note", "")),
    "broken": lambda vg, req: broken(vg, req.get("folder")),
    "graph": lambda vg, req: graph(vg),
    "neighbors": _neighbors,
    "tags": lambda vg, req: browse.tags(vg, req.get("limit")),
    "recent": lambda vg, req: browse.recent(vg, req.get("limit"), req.get("days", 7)),
    "read": _read,
}

# The ops that read the index's SQLite (and may read notes): op -> f(index, request),
# run in a worker thread.
INDEX_OPS: dict[str, Callable[[Index, dict[str, Any]], Any]] = {
    "search": lambda index, req: search(
        index, req.get("text"), req.get("k"), req.get("folder"), req.get("tag"), req.get("where")
    ),
    "keywords": lambda index, req: question_keywords(index, req.get("text")),
}

# The ops that read the store's vectors: op -> f(index, request, vectors), awaited; with
# ``vectors`` False (the store still being embedded), from the graph alone.
STORE_OPS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {"related": related}
