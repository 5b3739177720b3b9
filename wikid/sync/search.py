"""Lexical search over the notes (BM25, SQLite FTS5), kept in step with the store.

Why FTS5 beside the graph store: a user often knows a word, not a concept, and
an agent wants a cheap first look before a graph query. The index lives in
the ledger's database and is updated in the same batch as the store (the same
transaction with the sqlite backend), so search shows an edit exactly when a
query does.

Two tables:
- ``fts_notes``: one row per note (title, aliases, summary, tags, body), for
  ``search``;
- ``fts_names``: one row per name an entity answers to (title, alias, tag),
  which ``keywords`` matches a question against to find the entities it names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from wikid.core.note import Note
from wikid.core.words import STOP
from wikid.store._sqlite import Database

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS fts_notes USING fts5(
    path UNINDEXED, title, aliases, summary, tags, body, meta UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_names USING fts5(
    name, path UNINDEXED, kind UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS fts_ids (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
"""
# A note's rows are found by rowid, never by the (unindexed) path column: FTS5 would scan.
# Note n owns fts_notes row n and fts_names rows n*NAMES .. n*NAMES + NAMES - 1.
NAMES = 4096
# Column weights for bm25(): a hit in the title outranks one in the body.
WEIGHTS = "0, 10.0, 6.0, 3.0, 4.0, 1.0, 0"
SNIPPET_TOKENS = 24  # words per snippet; k snippets of this size stay near 500 tokens
_TOKEN = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Hit:
    path: str
    title: str
    snippet: str
    score: float
    meta: dict[str, Any]


def _match_expr(text: str) -> str | None:
    """Any of the words, each quoted (FTS5 syntax never leaks in from user text). Stop
    words are left out unless there is nothing else: "what" and "does" would match
    nearly every note, costing time and ranking nothing."""
    words = [w.lower() for w in _TOKEN.findall(text) if len(w) > 1 or w.isdigit()]
    content = [w for w in words if w not in STOP] or words
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(content)) or None


class SearchIndex:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.conn.executescript(SCHEMA)
        c = db.conn
        if (
            c.execute("SELECT 1 FROM fts_notes LIMIT 1").fetchone()
            and not c.execute("SELECT 1 FROM fts_ids LIMIT 1").fetchone()
        ):  # rows from before fts_ids existed: start over (the next sync refills)
            with db.transaction() as conn:
                conn.execute("DELETE FROM fts_notes")
                conn.execute("DELETE FROM fts_names")

    def update(self, notes: dict[str, Note | None]) -> None:
        """Rewrite the rows of these notes (None: the note is gone). Joins the caller's
        transaction, if one is open."""
        with self.db.transaction() as conn:
            for path, note in notes.items():
                row = conn.execute("SELECT id FROM fts_ids WHERE path=?", (path,)).fetchone()
                if row is not None:
                    (nid,) = row
                    conn.execute("DELETE FROM fts_notes WHERE rowid=?", (nid,))
                    conn.execute(
                        "DELETE FROM fts_names WHERE rowid BETWEEN ? AND ?",
                        (nid * NAMES, nid * NAMES + NAMES - 1),
                    )
                if note is None:
                    conn.execute("DELETE FROM fts_ids WHERE path=?", (path,))
                    continue
                if row is None:
                    nid = conn.execute("INSERT INTO fts_ids (path) VALUES (?)", (path,)).lastrowid
                meta = {
                    "type": note.type,
                    "aliases": list(note.aliases),
                    "tags": list(note.tags),
                    "summary": note.summary,
                }
                conn.execute(
                    "INSERT INTO fts_notes (rowid, path, title, aliases, summary, tags, body, meta) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        nid,
                        path,
                        note.title,
                        " ".join(note.aliases),
                        note.summary or note.opening,
                        " ".join(note.tags),
                        note.body,
                        json.dumps(meta, ensure_ascii=False),
                    ),
                )
                names = [(note.title, "title"), *((a, "alias") for a in note.aliases)]
                names += [(f"#{t}", "tag") for t in note.tags]
                conn.executemany(
                    "INSERT INTO fts_names (rowid, name, path, kind) VALUES (?, ?, ?, ?)",
                    ((nid * NAMES + j, n, path, k) for j, (n, k) in enumerate(names[:NAMES])),
                )

    def optimize(self) -> None:
        """Merge the FTS indexes into one segment each, after a bulk write: else later
        one-note updates meet FTS5's merges of the bulk's segments (1.3 s for one edit
        at 13k notes, measured); the merge itself takes ~0.1 s there."""
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO fts_notes(fts_notes) VALUES('optimize')")
            conn.execute("INSERT INTO fts_names(fts_names) VALUES('optimize')")

    def indexed(self) -> set[str]:
        return {r[0] for r in self.db.conn.execute("SELECT path FROM fts_ids")}

    def search(
        self, text: str, k: int = 8, folder: str | None = None, tag: str | None = None
    ) -> list[Hit]:
        expr = _match_expr(text)
        if expr is None:
            return []
        sql = (
            f"SELECT path, title, snippet(fts_notes, 5, '[', ']', ' … ', {SNIPPET_TOKENS}), "
            f"bm25(fts_notes, {WEIGHTS}), meta FROM fts_notes WHERE fts_notes MATCH ?"
        )
        args: list[Any] = [expr]
        if folder:
            sql += " AND (path LIKE ? ESCAPE '\\')"
            args.append(_like_prefix(folder.strip("/") + "/"))
        sql += " ORDER BY bm25(fts_notes, " + WEIGHTS + ") LIMIT ?"
        args.append(k * 4 if tag else k)
        hits = [
            Hit(path, title, snippet, -score, json.loads(meta))
            for path, title, snippet, score, meta in self.db.conn.execute(sql, args)
        ]
        if tag:
            want = tag.lstrip("#").lower()
            hits = [
                h
                for h in hits
                if any(
                    t.lower() == want or t.lower().startswith(want + "/") for t in h.meta["tags"]
                )
            ]
        return hits[:k]

    def names_in(self, question: str, limit: int = 12) -> list[tuple[str, str]]:
        """(name, note path) for names whose every word occurs in the question, best
        first: what the question mentions by name."""
        expr = _match_expr(question)
        if expr is None:
            return []
        asked = {w.lower() for w in _TOKEN.findall(question)}

        def said(word: str) -> bool:  # "sort" names "Sorting": a shared stem of 4+ letters
            return word in asked or any(
                min(len(a), len(word)) >= 4 and (a.startswith(word) or word.startswith(a))
                for a in asked
            )

        rows = self.db.conn.execute(
            "SELECT name, path FROM fts_names WHERE fts_names MATCH ? ORDER BY rank LIMIT 200",
            (expr,),
        ).fetchall()
        out: list[tuple[str, str]] = []
        for name, path in rows:
            words = {w.lower() for w in _TOKEN.findall(name)}
            if words and all(said(w) for w in words) and (name, path) not in out:
                out.append((name, path))
        out.sort(key=lambda np_: -len(_TOKEN.findall(np_[0])))  # longer names first
        return out[:limit]


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
