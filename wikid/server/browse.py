"""Read-only ops for agents (the MCP server): neighbours, tags, recent changes,
exact note reads, and whether a result is stale.

Why apart from ``api``: these serve browsing rather than retrieval, and
``read`` carries the path rules that keep a reader inside the vault: an exact
vault path of an indexed note, never a fuzzy match, decoded once and refused
when it could climb out (``..``, absolute or drive paths, backslashes, NUL).
"""

from __future__ import annotations

import difflib
import os
import re
import time
import unicodedata
import urllib.parse
from collections import Counter, deque
from typing import Any

from wikid.core.graph import GHOST, TAG, VaultGraph
from wikid.core.vault import read_text
from wikid.server.protocol import ProtocolError, whole_number

MAX_READ = 200_000  # characters one read returns at most
_DRIVE = re.compile(r"^[A-Za-z]:")


def neighbors(vg: VaultGraph, path: str, depth: Any = 1, limit: Any = 50) -> dict[str, Any]:
    """Notes within ``depth`` (1 or 2) links of ``path``, either direction, with the
    edge kinds that lead there; nearest first."""
    if depth not in (1, 2):
        raise ProtocolError("bad_request", "depth must be 1 or 2")
    cap = whole_number(limit, "limit", 1, 500, default=50)
    seen: dict[str, dict[str, Any]] = {}
    queue: deque[tuple[str, int]] = deque([(path, 0)])
    while queue:
        node, hop = queue.popleft()
        if hop == depth:
            continue
        steps = [(v, "out", d["kind"]) for _, v, _, d in vg.g.links_out(node)]
        steps += [(u, "in", d["kind"]) for u, _, _, d in vg.g.links_in(node)]
        for other, way, kind in steps:
            if other == path or other.startswith(TAG):
                continue
            entry = seen.setdefault(
                other,
                {
                    "note": other,
                    "hop": hop + 1,
                    "kinds": set(),
                    "unresolved": other.startswith(GHOST),
                },
            )
            if entry["hop"] == hop + 1:
                entry["kinds"].add(f"{kind} ({way})")
            if entry["hop"] == hop + 1 and other in vg.notes:
                queue.append((other, hop + 1))
    found = sorted(seen.values(), key=lambda e: (e["hop"], e["note"]))
    items = [{**e, "kinds": sorted(e["kinds"])} for e in found]
    return {"note": path, "total": len(items), "neighbors": items[:cap]}


def tags(vg: VaultGraph, limit: Any = 50) -> dict[str, Any]:
    """Tags by how many notes carry them, most first."""
    cap = whole_number(limit, "limit", 1, 1000, default=50)
    counts = Counter({n[len(TAG) :]: vg.g.in_degree(n) for n in vg.g if n.startswith(TAG)})
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "total": len(ranked),
        "tags": [{"tag": t, "notes": c} for t, c in ranked[:cap]],
        "truncated": len(ranked) > cap,
    }


def recent(vg: VaultGraph, limit: Any = 20, days: Any = 7) -> dict[str, Any]:
    """Notes modified in the last ``days`` days, newest first (file mtimes)."""
    cap = whole_number(limit, "limit", 1, 500, default=20)
    if not isinstance(days, int | float) or isinstance(days, bool) or not 0 < days <= 3650:
        raise ProtocolError("bad_request", "days must be a number from 0 to 3650")
    since = time.time() - days * 86400
    rows: list[dict[str, Any]] = []
    for path in vg.notes:
        try:
            mtime = os.stat(vg.root / path).st_mtime
        except OSError:
            continue
        if mtime >= since:
            rows.append({"path": path, "title": vg.notes[path].title, "modified": mtime})
    rows.sort(key=lambda r: (-r["modified"], r["path"]))
    return {"days": days, "total": len(rows), "notes": rows[:cap]}


def resolve_path(vg: VaultGraph, raw: Any) -> str:
    """The indexed note at exactly this vault path (NFC and NFD spellings alike), or
    ``not_found`` with close paths; anything that could leave the vault is refused."""
    if not isinstance(raw, str) or not raw:
        raise ProtocolError("bad_request", "give the note's vault path, e.g. Folder/Note.md")
    text = urllib.parse.unquote(raw)  # a %2e%2e is a ".." too
    parts = text.split("/")
    if (
        "\x00" in text
        or "\\" in text
        or text.startswith("/")
        or _DRIVE.match(text)
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise ProtocolError("bad_request", f"not a vault path: {raw!r}")
    if any(p.startswith(".") for p in parts) or vg.filter.ignored(text):
        raise ProtocolError("not_found", f"{raw!r} is not part of the vault (hidden or ignored)")
    wanted = unicodedata.normalize("NFC", text)
    for path in (text, wanted):
        if path in vg.notes:
            return path
    by_nfc = {unicodedata.normalize("NFC", p): p for p in vg.notes}
    if wanted in by_nfc:
        return by_nfc[wanted]
    close = _close(wanted, list(by_nfc))
    hint = f"; close paths: {', '.join(by_nfc[c] for c in close)}" if close else ""
    raise ProtocolError("not_found", f"no note at {raw!r}{hint}")


def _close(wanted: str, paths: list[str], n: int = 5) -> list[str]:
    """Paths that look like ``wanted``: the same but for case first, then by
    similarity, then by length difference and path (difflib alone breaks ties by
    reverse order: "Note 1" would suggest "Note 21" before "Note 01")."""
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(wanted)
    scored = []
    for path in paths:
        matcher.set_seq1(path)
        if matcher.real_quick_ratio() < 0.5 or matcher.quick_ratio() < 0.5:
            continue
        ratio = matcher.ratio()
        if ratio >= 0.5:
            same = path.casefold() == wanted.casefold()
            scored.append((not same, -ratio, abs(len(path) - len(wanted)), path))
    return [path for *_, path in sorted(scored)[:n]]


def read(
    vg: VaultGraph, raw: Any, heading: Any = None, start_line: Any = None, max_chars: Any = 20_000
) -> dict[str, Any]:
    """A note's text, exactly as on disk, from a heading or a line, at most
    ``max_chars`` characters."""
    path = resolve_path(vg, raw)
    cap = whole_number(max_chars, "max_chars", 1, MAX_READ, default=20_000)
    try:
        text = read_text(vg.root, path, vg.filter, 4 * MAX_READ)
    except FileNotFoundError:
        raise ProtocolError("not_found", f"{path} is gone") from None
    except PermissionError as exc:
        raise ProtocolError("forbidden", f"{path}: {exc}") from None
    lines = text.split("\n")
    first = 1
    if heading is not None:
        if not isinstance(heading, str):
            raise ProtocolError("bad_request", "heading must be a string")
        want = heading.strip().lstrip("#").strip().casefold()
        hits = [
            i
            for i, ln in enumerate(lines, 1)
            if ln.startswith("#") and ln.lstrip("#").strip().casefold() == want
        ]
        if not hits:
            raise ProtocolError("not_found", f"no heading {heading!r} in {path}")
        first = hits[0]
    elif start_line is not None:
        first = whole_number(start_line, "start_line", 1, 10_000_000)
    body = "\n".join(lines[first - 1 :])
    return {
        "path": path,
        "title": vg.notes[path].title,
        "start_line": first,
        "text": body[:cap],
        "truncated": len(body) > cap,
        "total_lines": len(lines),
    }


def freshness(vg: VaultGraph, paths: Any, queued: set[str]) -> dict[str, bool]:
    """For each path: has its file changed since it was indexed (or is it queued)?"""
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths[:1000]):
        raise ProtocolError("bad_request", "paths must be a list of vault paths")
    out: dict[str, bool] = {}
    for path in paths[:1000]:
        note = vg.notes.get(path)
        try:
            st = os.stat(vg.root / path)
            now: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            now = None
        indexed = note.stat if note else None
        out[path] = (
            path in queued
            or (note is None) != (now is None)
            or (indexed is not None and now is not None and indexed != now)
        )
    return out


def line_of(vg: VaultGraph, path: str, snippet: str) -> int | None:
    """The file line of the first term a search snippet marks ([term])."""
    m = re.search(r"\[([^\]]+)\]", snippet)
    if path not in vg.notes or m is None:
        return None
    note = vg.with_body(path)  # a lean note's file is read again: call it off the event loop
    body = note.body or ""
    at = body.casefold().find(m.group(1).casefold())
    return None if at < 0 else note.body_line + body.count("\n", 0, at)
