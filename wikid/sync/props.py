"""Property filters: ``where`` on search and query (``type=book``, ``author=[[Kevin
Kelly]]``, ``year>=2020``, ``tags=project``, ``folder=Books``, ``modified>=30d``).

Why a table, not a scan: a filter over 13k notes' frontmatter in Python would read every
note's payload from the parse cache; ``props`` holds one row per property value, indexed
by (key, value) and (key, number), and is written with the full-text rows of the same
notes (``SearchIndex.update``), in the same batch transaction. So a filter sees an edit
exactly when search does, and the table is a function of the notes alone: a fresh build
writes the same rows.

A row is ``(path, key, val, num)``: the key folded; the value folded, a link by its
target (``[[People/Kevin Kelly|KK]]`` is ``people/kevin kelly``); ``num`` the value as a
number when it is one, or as seconds since 1970 when it is a date. Besides the
frontmatter, each note has ``type``, a ``tags`` row per tag, and ``modified`` and
``created`` (the frontmatter's when it gives a date, else the file's mtime).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from wikid.core.note import Note
from wikid.core.resolve import fold
from wikid.store._sqlite import Connection, like_prefix

SCHEMA = """
CREATE TABLE IF NOT EXISTS props (
    path TEXT NOT NULL, key TEXT NOT NULL, val TEXT NOT NULL, num REAL);
CREATE INDEX IF NOT EXISTS props_val ON props(key, val);
CREATE INDEX IF NOT EXISTS props_num ON props(key, num);
CREATE INDEX IF NOT EXISTS props_path ON props(path);
"""
OPS = ("!=", ">=", "<=", "=", ">", "<")  # longest first: "<=" before "<"
_FILTER = re.compile(r"^\s*([^=<>!]+?)\s*(!=|>=|<=|=|>|<)\s*(.*?)\s*$", re.S)
_LINK = re.compile(r"^\[\[([^\]|#^]*)[^\]]*\]\]$")
_AGO = re.compile(r"^(\d{1,5})\s*d$", re.I)  # "30d": thirty days ago
DATES = ("modified", "created")
MAX_VALUE = 500  # characters of a value kept in a row (a filter compares values, not text)
MAX_ROWS = 2000  # rows per note: a hostile note's list of 20k values keeps its first


@dataclass(frozen=True)
class Where:
    """One filter: ``key op value`` as given, and the value as a number if it is one."""

    key: str
    op: str
    value: str
    num: float | None
    link: bool  # the value was written as a wikilink


def parse(text: Any) -> Where:
    """A filter from ``key=value`` (or !=, >=, <=, >, <); ValueError says what is wrong,
    in one line."""
    if not isinstance(text, str):
        raise ValueError(f"a filter is a string like 'type=book', not {text!r}")
    m = _FILTER.match(text)
    if m is None or not m.group(3):
        raise ValueError(
            f"bad filter {text!r}: write key=value, with = != >= <= > or < "
            "(e.g. type=book, year>=2020, author=[[Kevin Kelly]], modified>=30d)"
        )
    key, op, raw = fold(m.group(1).strip()), m.group(2), m.group(3).strip()
    if raw[0] in "=<>!":  # year>>2020, type==book: a typo, never a value
        raise ValueError(
            f"bad filter {text!r}: one operator only, = != >= <= > or < (e.g. year>=2020)"
        )
    if key in ("folder", "tag", "tags") and op not in ("=", "!="):
        raise ValueError(f"bad filter {text!r}: {key} takes = or != only")
    link = _LINK.match(raw)
    value = _value(link.group(1) if link else raw)
    num = _when(raw) if key in DATES else _number(raw)
    if key in DATES and num is None:
        raise ValueError(
            f"bad filter {text!r}: {key} compares dates, like 2024-05-01 or 30d (days ago)"
        )
    return Where("tags" if key == "tag" else key, op, value, num, link is not None)


def rows(note: Note, mtime: float | None) -> list[tuple[str, str, float | None]]:
    """The note's property rows: ``(key, val, num)``, each once."""
    out: dict[tuple[str, str], float | None] = {}
    for k, v in note.properties.items():
        key = fold(str(k).strip())
        for item in _scalars(v):
            text = item if isinstance(item, str) else json.dumps(item)
            link = _LINK.match(text.strip())
            val = _value(link.group(1) if link else text)
            num = None if isinstance(item, bool) else _number(text)
            if num is None:
                num = _date(text)
            out.setdefault((key, val), num)
            if link and "/" in val:  # [[Recipes/Dessert]] matches category=Dessert too
                out.setdefault((key, val.rsplit("/", 1)[-1]), None)
    if note.type:
        out.setdefault(("type", _value(note.type)), None)
    for tag in note.tags:
        out.setdefault(("tags", fold(tag)), None)
    for key in DATES:
        if not any(k == key and n is not None for (k, _), n in out.items()) and mtime:
            out[(key, _stamp(mtime))] = mtime
    return [(k, v, n) for (k, v), n in list(out.items())[:MAX_ROWS]]


def write(conn: Connection, path: str, note: Note | None, mtime: float | None) -> None:
    """Replace ``path``'s rows (None: the note is gone). Joins the caller's transaction."""
    conn.execute("DELETE FROM props WHERE path=?", (path,))
    if note is not None:
        conn.executemany(
            "INSERT INTO props VALUES (?, ?, ?, ?)", ((path, *r) for r in rows(note, mtime))
        )


def matching(
    conn: Connection,
    filters: list[Where],
    names: Callable[[Where], Iterable[str]],
) -> set[str]:
    """The notes that pass every filter. ``names``: the values a link filter matches
    besides its own text (the note it resolves to: path, title, aliases)."""
    found: set[str] | None = None
    for w in filters:
        paths = _passing(conn, w, names)
        found = paths if found is None else found & paths
        if not found:
            return set()
    return found if found is not None else set()


def _passing(conn: Connection, w: Where, names: Callable[[Where], Iterable[str]]) -> set[str]:
    def select(sql: str, *args: Any) -> set[str]:
        return {r[0] for r in conn.execute(sql, args)}

    def every() -> set[str]:
        return select("SELECT path FROM fts_ids")

    if w.key == "folder":  # LIKE: ASCII letters in any case, as the vault's folders
        prefix = w.value.strip("/")
        inside = (
            select(
                "SELECT path FROM fts_ids WHERE path LIKE ? ESCAPE '\\'", like_prefix(prefix + "/")
            )
            if prefix
            else every()
        )
        return inside if w.op == "=" else every() - inside
    if w.op in ("=", "!="):
        if w.key == "tags":  # a tag names its nested tags too: project is project/x's
            hit = select(
                "SELECT path FROM props WHERE key='tags' AND (val=? OR substr(val, 1, ?)=?)",
                w.value,
                len(w.value) + 1,
                w.value + "/",
            )
        else:
            values = sorted({w.value, *(_value(n) for n in names(w))} if w.link else {w.value})
            marks = ",".join("?" * len(values))
            hit = select(f"SELECT path FROM props WHERE key=? AND val IN ({marks})", w.key, *values)
            if w.num is not None and not w.link:
                hit |= select("SELECT path FROM props WHERE key=? AND num=?", w.key, w.num)
        return hit if w.op == "=" else every() - hit
    if w.num is not None:
        return select(f"SELECT path FROM props WHERE key=? AND num {w.op} ?", w.key, w.num)
    return select(f"SELECT path FROM props WHERE key=? AND val {w.op} ?", w.key, w.value)


def _scalars(value: Any) -> list[Any]:
    """A property's values: a list's items, one level deep; a mapping says nothing. A
    list of one string is how YAML reads an unquoted ``[[Link]]``: the link."""
    items = value if isinstance(value, list) else [value]
    out = []
    for i in items:
        if isinstance(i, list) and len(i) == 1 and isinstance(i[0], str):
            out.append(f"[[{i[0]}]]")  # [[a]], [[b]] in a list: YAML's list of lists
        elif i is not None and not isinstance(i, dict | list):
            out.append(i)
    return out


def _value(text: str) -> str:
    return fold(text.strip().removesuffix(".md"))[:MAX_VALUE]


def _number(text: str) -> float | None:
    try:
        num = float(text)
    except ValueError:
        return None
    return num if num == num and abs(num) != float("inf") else None  # no NaN, no inf


def _date(text: str) -> float | None:
    """Seconds since 1970 (UTC) of an ISO date or date-time, else None."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _when(text: str) -> float | None:
    """A date filter's value: ``30d`` is thirty days before now, else an ISO date."""
    ago = _AGO.match(text.strip())
    return time.time() - int(ago.group(1)) * 86400 if ago else _date(text)


def _stamp(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")
