"""``wikid mcp``: the vault's fresh index for agents, over MCP (stdio).

Why a thin layer: the daemon already holds the freshest graph and store; this
server indexes nothing, holds no state and writes nothing. Every tool is one
or two socket requests (``wikid.client``), so what an agent sees is what the
daemon sees, and with no daemon each tool says how to start one. Built on the
official SDK (``mcp``, 2.x: ``MCPServer``); imported only by ``wikid mcp``.

Every tool is read-only (``readOnlyHint``, no open world), returns structured
content plus a one-line summary, caps its lists (``limit``, ``cursor`` ->
``next_cursor``, ``total``), and flags results whose note changed after it was
indexed (``stale``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from wikid import __version__
from wikid._where import Where
from wikid.cli._client import not_running
from wikid.client import DaemonNotRunning, RemoteError, request

READ_ONLY = ToolAnnotations.model_validate(
    {"readOnlyHint": True, "openWorldHint": False, "destructiveHint": False, "idempotentHint": True}
)
MAX_LIMIT = 100
NOTES_RESOURCE_CAP = 200


class Daemon:
    """The vault's daemon, reached over its socket; errors become tool errors."""

    def __init__(self, cfg: Where) -> None:
        self.cfg, self.socket, self.vault = cfg, cfg.socket, cfg.path

    async def call(self, op: str, **args: Any) -> Any:
        try:
            return await asyncio.to_thread(
                request, self.socket, op, vault=self.vault, timeout=120, **args
            )
        except DaemonNotRunning:
            raise ToolError(not_running(self.cfg, op)) from None
        except RemoteError as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:
            raise ToolError(f"cannot reach the wikid daemon at {self.socket}: {exc}") from None

    async def stale(self, items: list[dict[str, Any]], key: str = "path") -> None:
        """Mark each item whose note changed on disk after it was indexed."""
        paths = sorted({str(i[key]) for i in items if i.get(key)})
        fresh = await self.call("freshness", paths=paths) if paths else {}
        for item in items:
            item["stale"] = bool(fresh.get(item.get(key)))


def _result(summary: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=data)


def _page(items: list[Any], limit: int, cursor: str | None) -> tuple[list[Any], dict[str, Any]]:
    """One page of ``items`` and the paging fields (cursor = offset, opaque to agents)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f"limit must be from 1 to {MAX_LIMIT}")
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        raise ToolError("cursor must be a next_cursor this server returned") from None
    page = items[start : start + limit]
    more = start + limit < len(items)
    return page, {"total": len(items), "next_cursor": str(start + limit) if more else None}


def instructions(status: dict[str, Any] | None) -> str:
    """What an agent should know, from the index as it is when the server starts."""
    if status is None:
        state = "No wikid daemon answers yet: tools will say how to start one (wikid run)."
    else:
        ready = "ready" if status.get("ready") else f"still indexing ({status.get('phase')})"
        state = f"The vault {status['vault']} has {status['notes']} notes; the index is {ready}."
    return (
        f"wikid serves a fresh, read-only index of one Obsidian vault. {state}\n"
        "- search(text, limit, folder, tag, where, cursor): words or phrases (BM25), with "
        "snippets and line numbers.\n"
        "- query(text, budget, mode, where): a question; returns the smallest evidence that "
        "covers it within a token budget, each item with its note path, heading and line.\n"
        '- where: property filters, all of which must hold, e.g. ["type=book", '
        '"year>=2020", "author=[[Kevin Kelly]]", "tags=project", "folder=Books", '
        '"modified>=30d"].\n'
        "- related_notes(note, limit, cursor, include_linked, where): the notes closest to "
        "one by meaning and by shared links, tags and properties, not yet linked, with why.\n"
        "- links(note), backlinks(note, limit, cursor), neighbors(note, depth, limit): "
        "navigate the wikilink graph (notes by path or title).\n"
        "- broken_links(folder, limit, cursor), list_tags(limit), recent_changes(limit, days).\n"
        "- read_note(path, heading, start_line, max_chars): the exact text of one note, by "
        "its exact vault path.\n"
        "- status(): whether the index is ready and fresh. A result flagged stale changed "
        "on disk after it was indexed."
    )


def build(cfg: Where) -> MCPServer:
    """The MCP server for one vault's daemon."""
    daemon = Daemon(cfg)
    try:
        first = request(daemon.socket, "status", vault=daemon.vault, timeout=5)
    except (OSError, RemoteError):
        first = None
    server: MCPServer = MCPServer(
        name="wikid", instructions=instructions(first), version=__version__
    )

    @server.tool(annotations=READ_ONLY)
    async def search(
        text: str,
        limit: int = 10,
        folder: str | None = None,
        tag: str | None = None,
        where: list[str] | None = None,
        cursor: str | None = None,
    ) -> CallToolResult:
        """Full-text search (BM25 over title, aliases, tags, summary and body): path,
        title, score and a snippet with its line number per note. where: property
        filters that must all hold (type=book, year>=2020, author=[[Kevin Kelly]])."""
        start = int(cursor) if cursor and cursor.isdigit() else 0
        k = min(MAX_LIMIT, start + max(1, limit))
        res = await daemon.call("search", text=text, k=k, folder=folder, tag=tag, where=where)
        hits = [
            {k_: h.get(k_) for k_ in ("path", "title", "score", "snippet", "line", "tags")}
            for h in res["hits"]
        ]
        page, paging = _page(hits, limit, cursor)
        await daemon.stale(page)
        return _result(
            f"{len(page)} of {paging['total']} notes match {text!r}", {"hits": page, **paging}
        )

    @server.tool(annotations=READ_ONLY)
    async def query(
        text: str,
        budget: int = 3000,
        mode: str | None = None,
        explain: bool = False,
        where: list[str] | None = None,
    ) -> CallToolResult:
        """Ask a question: the smallest evidence (entities, relations along the links,
        note text) that covers it within a token budget, with paths, headings and lines.
        explain=true says why each item was chosen; where: property filters that must all
        hold (type=book, year>=2020). No LLM is called unless one is configured; then an
        answer comes with the evidence."""
        args: dict[str, Any] = {"text": text, "budget": budget, "mode": mode, "explain": explain}
        args["where"] = where
        status = await daemon.call("status")
        if status["llm"]["configured"]:
            args["answer"] = True
        res = await daemon.call("query", **args)
        for kind in ("entities", "relations", "chunks"):
            await daemon.stale(res[kind])
        n = sum(len(res[k]) for k in ("entities", "relations", "chunks"))
        summary = (
            f"{n} evidence items from {len(res['notes'])} notes, {res['tokens']} of {budget} tokens"
        )
        if res.get("partial"):
            summary += " (partial: the store is still embedding; graph and full text only)"
        if "answer" in res:
            summary += f"; answer: {res['answer']['text'][:200]}"
        return _result(summary, res)

    @server.tool(annotations=READ_ONLY)
    async def related_notes(
        note: str,
        limit: int = 10,
        cursor: str | None = None,
        include_linked: bool = False,
        where: list[str] | None = None,
    ) -> CallToolResult:
        """Notes related to a note (path or title) by meaning and by shared links, tags and
        properties, best first, leaving out the notes it already links (include_linked to
        keep them). Each says why: the closest passages with their lines, the neighbours
        shared, each signal's rank. where: property filters that must all hold."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolError(f"limit must be from 1 to {MAX_LIMIT}")
        args = {"note": note, "limit": limit, "cursor": cursor, "where": where}
        res = await daemon.call("related", **args, include_linked=include_linked)
        await daemon.stale(res["related"])
        summary = f"{len(res['related'])} of {res['total']} notes related to {res['note']}"
        return _result(summary, res)

    @server.tool(annotations=READ_ONLY)
    async def links(note: str) -> CallToolResult:
        """Links going out of a note (path or title), each with its kind and line."""
        res = await daemon.call("links", note=note)
        return _result(f"{len(res['links'])} links out of {res['note']}", res)

    @server.tool(annotations=READ_ONLY)
    async def backlinks(note: str, limit: int = 20, cursor: str | None = None) -> CallToolResult:
        """Notes that link to a note (path or title), with edge kinds and lines."""
        res = await daemon.call("backlinks", note=note)
        page, paging = _page(res["backlinks"], limit, cursor)
        await daemon.stale(page, key="source")
        data = {"note": res["note"], "backlinks": page, **paging}
        return _result(f"{len(page)} of {paging['total']} backlinks to {res['note']}", data)

    @server.tool(annotations=READ_ONLY)
    async def neighbors(note: str, depth: int = 1, limit: int = 30) -> CallToolResult:
        """Notes within 1 or 2 links of a note, either direction, with the edge kinds."""
        if depth not in (1, 2):
            raise ToolError("depth must be 1 or 2")
        res = await daemon.call("neighbors", note=note, depth=depth, limit=min(limit, 500))
        await daemon.stale(res["neighbors"], key="note")
        return _result(
            f"{len(res['neighbors'])} of {res['total']} neighbours of {res['note']}", res
        )

    @server.tool(annotations=READ_ONLY)
    async def broken_links(
        folder: str | None = None, limit: int = 20, cursor: str | None = None
    ) -> CallToolResult:
        """Link targets that resolve to no note, with the notes that hold them."""
        res = await daemon.call("broken", folder=folder)
        page, paging = _page(res["broken"], limit, cursor)
        return _result(
            f"{len(page)} of {paging['total']} unresolved targets", {"broken": page, **paging}
        )

    @server.tool(annotations=READ_ONLY)
    async def list_tags(limit: int = 50) -> CallToolResult:
        """Tags by how many notes carry them, most first (the cut is stated)."""
        res = await daemon.call("tags", limit=max(1, min(limit, 1000)))
        cut = " (truncated)" if res["truncated"] else ""
        return _result(f"{len(res['tags'])} of {res['total']} tags{cut}", res)

    @server.tool(annotations=READ_ONLY)
    async def recent_changes(limit: int = 20, days: int = 7) -> CallToolResult:
        """Notes modified in the last ``days`` days, newest first."""
        res = await daemon.call("recent", limit=max(1, min(limit, 500)), days=days)
        await daemon.stale(res["notes"])
        return _result(f"{len(res['notes'])} of {res['total']} notes changed in {days} days", res)

    @server.tool(annotations=READ_ONLY)
    async def status() -> CallToolResult:
        """Is the index ready and fresh: queue, lag, last sync, the watcher's heartbeat."""
        s = await daemon.call("status")
        keys = ("vault", "ready", "phase", "notes", "queue", "lag_seconds", "last_sync")
        data = {k: s.get(k) for k in keys} | {
            "watcher": s.get("watcher"),
            "rejected": len(s["rejected"]),
        }
        state = "ready" if s["ready"] else s.get("phase")
        return _result(f"{s['notes']} notes, {state}, {s['queue']} queued", data)

    @server.tool(annotations=READ_ONLY)
    async def read_note(
        path: str,
        heading: str | None = None,
        start_line: int | None = None,
        max_chars: int = 20_000,
    ) -> CallToolResult:
        """The exact text of one note by its exact vault path (no fuzzy match: when it is
        not found, close paths are suggested), from a heading or a line."""
        res = await daemon.call(
            "read", path=path, heading=heading, start_line=start_line, max_chars=max_chars
        )
        await daemon.stale([res])
        cut = ", truncated" if res["truncated"] else ""
        return _result(f"{res['path']} from line {res['start_line']}{cut}", res)

    @server.resource("wikid://status", mime_type="application/json")
    async def status_resource() -> str:
        """The daemon's status."""
        return json.dumps(await daemon.call("status"))

    @server.resource("wikid://notes", mime_type="application/json")
    async def notes_resource() -> str:
        """The vault's notes (at most 200, by path) with titles and tags."""
        nodes = [n for n in (await daemon.call("graph"))["nodes"] if n["kind"] == "note"]
        listed = [
            {"uri": f"wikid://note/{n['id']}", "title": n["title"], "tags": n["tags"]}
            for n in nodes[:NOTES_RESOURCE_CAP]
        ]
        return json.dumps(
            {"total": len(nodes), "notes": listed, "truncated": len(nodes) > len(listed)}
        )

    @server.resource("wikid://note/{+path}", mime_type="text/markdown")
    async def note_resource(path: str) -> str:
        """One note's text, by its vault path."""
        return str((await daemon.call("read", path=path))["text"])

    return server


def client_config(cfg: Where, command: str) -> dict[str, Any]:
    """What registers this server in Claude Desktop or Claude Code."""
    args = ["mcp", "--vault", cfg.path, "--socket", cfg.socket]
    return {"mcpServers": {f"wikid-{Path(cfg.path).name}": {"command": command, "args": args}}}
