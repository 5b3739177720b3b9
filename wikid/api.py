"""The read side of the socket API: status, links, backlinks, broken, graph, query.

Why separate from the daemon: these are plain functions of the in-memory graph
and the store, so they are testable without a socket, and they never write.
"""

from __future__ import annotations

import re
from typing import Any

from lightrag import QueryParam

from wikid.graph import GHOST, VaultGraph, to_json
from wikid.index import Index
from wikid.resolve import fold


class ApiError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def find_note(vg: VaultGraph, ref: str) -> str:
    """A note by vault path (with or without .md) or by title/alias, case-insensitively."""
    if not isinstance(ref, str) or not ref.strip():
        raise ApiError("bad_request", "give a note as a path or a title")
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
    raise ApiError("not_found", f"no note with path or title {ref!r}")


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
    edges = sorted(vg.g.out_edges(path, data=True), key=lambda e: (e[2]["line"] or 0, e[1]))
    return {"note": path, "links": [_edge(u, v, d) for u, v, d in edges if d["kind"] != "tag"]}


def backlinks(vg: VaultGraph, note: str) -> dict[str, Any]:
    path = find_note(vg, note)
    edges = sorted(vg.g.in_edges(path, data=True), key=lambda e: (e[0], e[2]["line"] or 0))
    return {"note": path, "backlinks": [_edge(u, v, d) for u, v, d in edges]}


def broken(vg: VaultGraph) -> dict[str, Any]:
    out = []
    for node in sorted(n for n in vg.g if n.startswith(GHOST)):
        sources = sorted({u for u, _ in vg.g.in_edges(node)})
        out.append({"target": node[len(GHOST) :], "sources": sources})
    return {"broken": out}


def graph(vg: VaultGraph) -> dict[str, Any]:
    return to_json(vg.g)


_WORD = re.compile(r"[\w][\w'’-]*", re.UNICODE)
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "about",
        "there",
        "such",
        "thing",
        "this",
        "that",
        "these",
        "those",
        "my",
        "me",
        "you",
        "your",
    ]
)


def keywords(vg: VaultGraph, question: str) -> tuple[list[str], list[str]]:
    """LLM-free keywords: known names (titles, aliases, tags) found in the question are
    low-level keywords; its content words and phrases are high-level ones."""
    q = fold(question)
    low: list[str] = []
    for note in vg.notes.values():
        for name in (note.title, *note.aliases):
            if len(name) > 2 and fold(name) in q and name not in low:
                low.append(name)
    words = [w for w in _WORD.findall(question) if fold(w) not in _STOP]
    phrases = [" ".join(words[i : i + 2]) for i in range(len(words) - 1)]
    high = [" ".join(words)] if words else [question]
    return high, (low + phrases + words)[:20] or [question]


async def query(
    index: Index, text: str, mode: str = "mix", top_k: int | None = None
) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ApiError("bad_request", "query needs a non-empty 'text'")
    if mode not in ("local", "global", "hybrid", "mix", "naive"):
        raise ApiError("bad_request", f"unknown query mode {mode!r}")
    high, low = keywords(index.vg, text)
    param = QueryParam(mode=mode, enable_rerank=False, hl_keywords=high, ll_keywords=low)  # type: ignore[arg-type]
    if top_k:
        param.top_k = int(top_k)
    result = await index.store.rag.aquery_data(text, param)
    return {"mode": mode, "keywords": {"high": high, "low": low}, **result}
