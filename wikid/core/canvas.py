"""A JSON Canvas 1.0 file (``.canvas``) as a graph source.

Why a canvas is parsed into a ``Note``: it then flows through the same incremental
path as a note (graph, delta, sink, ledger, search, restart cache) with nothing
special downstream. What it states (spec: obsidianmd/jsoncanvas ``spec/1.0.md``):

- a ``file`` node puts a file on the canvas: a link of kind ``canvas`` from the
  canvas to it, with the node's ``subpath`` (``#heading`` or ``#^block``);
- a ``text`` node holds Markdown: its wikilinks are links of the canvas (resolved as
  in a note in the canvas's folder), its text is the canvas's body (chunks, search);
- an edge between two ``file`` nodes joins those two files: a ``join`` that the graph
  turns into a note → note edge of kind ``canvas-edge`` carrying the edge's label;
- ``link`` (a URL) and ``group`` nodes carry no vault link; a group's label is kept
  as text so that search finds it.

A malformed canvas keeps what could be read and says why (``Note.error``).
"""

from __future__ import annotations

import json
from typing import Any

from wikid.core._markdown import RawLink, scan
from wikid.core.note import Note, parse_with

MAX_NODES = 20_000  # nodes and edges read per canvas


def canvas_title(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[: -len(".canvas")] if name.lower().endswith(".canvas") else name


def parse_canvas(path: str, data: bytes) -> Note:
    """Parse a canvas; never raises."""
    return parse_with(path, data, _parse_text)


def _parse_text(path: str, text: str, content_digest: str, warning: str | None) -> Note:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return _note(path, content_digest, [], [], [], [f"not JSON Canvas: {exc}"])
    return _from_doc(path, content_digest, doc, [warning] if warning else [])


def _items(doc: dict[str, Any], key: str, errors: list[str]) -> list[dict[str, Any]]:
    raw = doc.get(key, [])
    if not isinstance(raw, list):
        errors.append(f"'{key}' is not a list")
        return []
    items = [x for x in raw if isinstance(x, dict)]
    if len(items) < len(raw):
        errors.append(f"{len(raw) - len(items)} {key} are not objects")
    if len(items) > MAX_NODES:
        errors.append(f"{len(items)} {key}, only the first {MAX_NODES} read")
    return items[:MAX_NODES]


def _from_doc(path: str, content_digest: str, doc: Any, errors: list[str]) -> Note:
    if not isinstance(doc, dict):
        return _note(path, content_digest, [], [], [], ["not JSON Canvas: not an object"])
    nodes = _items(doc, "nodes", errors)
    files: dict[str, str] = {}  # node id -> file
    texts: list[str] = []
    file_links: list[RawLink] = []
    for node in nodes:
        kind, nid = node.get("type"), node.get("id")
        if kind == "file":
            target = node.get("file")
            if not isinstance(target, str) or not target.strip():
                errors.append(f"file node {nid!r} has no file")
                continue
            if isinstance(nid, str):
                files[nid] = target.strip()
            sub = node.get("subpath")
            subpath = sub.lstrip("#") if isinstance(sub, str) else ""
            if subpath.startswith("^"):
                subpath = "^" + subpath.lstrip("^")
            context = f"On canvas {canvas_title(path)}: {target.strip()}"
            file_links.append(RawLink("canvas", target.strip(), subpath, None, 1, (), context))
        elif kind == "text" and isinstance(node.get("text"), str):
            texts.append(node["text"])
        elif kind == "group" and isinstance(node.get("label"), str):
            texts.append(node["label"])
        elif kind not in ("file", "text", "link", "group"):
            errors.append(f"node {nid!r} has unknown type {kind!r}")
    joins = []
    for edge in _items(doc, "edges", errors):
        a, b = files.get(edge.get("fromNode")), files.get(edge.get("toNode"))  # type: ignore[arg-type]
        label = edge.get("label")
        if a and b:
            joins.append((a, b, label if isinstance(label, str) and label.strip() else None))
    return _note(path, content_digest, texts, file_links, joins, errors)


def _note(
    path: str,
    content_digest: str,
    texts: list[str],
    file_links: list[RawLink],
    joins: list[tuple[str, str, str | None]],
    errors: list[str],
) -> Note:
    body = "\n\n".join(t.strip() for t in texts if t.strip())
    scanned = scan(body, 1)
    return Note(
        path=path,
        title=canvas_title(path),
        digest=content_digest,
        tags=tuple(dict.fromkeys(scanned.tags)),
        type="canvas",
        links=tuple(file_links + list(scanned.links)),
        headings=tuple(scanned.headings),
        blocks=tuple(scanned.blocks),
        body=body,
        opening=scanned.opening,
        ignored_links=scanned.ignored_links,
        joins=tuple(joins),
        error="; ".join(errors) or None,
    )
