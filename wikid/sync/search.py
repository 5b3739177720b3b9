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
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikid.core.cjk import has_cjk, phrase, runs, spaced, split, unspaced
from wikid.core.graph import TAG, VaultGraph
from wikid.core.note import Note
from wikid.core.resolve import alias_key, fold, resolve
from wikid.core.words import STOP
from wikid.store._sqlite import Database, like_prefix
from wikid.sync import props

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS fts_notes USING fts5(
    path UNINDEXED, title, aliases, summary, tags, body, meta UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_names USING fts5(
    name, path UNINDEXED, kind UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS fts_ids (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS fts_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# How the rows' text is made: rows made otherwise are dropped and written again. 2: each
# CJK character a token of its own (``core.cjk``).
TEXT_FORM = "2"
# A note's rows are found by rowid, never by the (unindexed) path column: FTS5 would scan.
# Note n owns fts_notes row n and fts_names rows n*NAMES .. n*NAMES + NAMES - 1.
NAMES = 4096
# Column weights for bm25(): a hit in the title outranks one in the body.
WEIGHTS = "0, 10.0, 6.0, 3.0, 4.0, 1.0, 0"
SNIPPET_TOKENS = 24  # words per snippet; k snippets of this size stay near 500 tokens
_TOKEN = re.compile(r"\w+", re.UNICODE)
# FTS5 ranks every row a word matches (no top-k pruning): a word in 13k notes costs
# ~40 ms a query at 13k notes, measured, whatever the LIMIT. So the question's words are
# counted first (fts5vocab: an index lookup) and the too common ones left out:
# - a query's BM25 leaves out a word in over half the notes (and at least COMMON_NOTES):
#   FTS5 clamps such a word's idf to ~0, so it ranks nothing, like a stop word;
# - ``names_in`` ranks only the words in at most COMMON_NAMES names; a name made of
#   common words alone is then found by its exact text (``Index.names_in``).
COMMON_NOTES = 500
COMMON_NAMES = 256
# Terms whose counts are kept until the next commit: a count reads the term's whole
# doclist (fts5vocab's 'row' counts are not stored), and related notes count the 30
# opening words of a note, most of them seen before (13k notes: 7 of the 22 ms a search
# took, in process). 65,536 counts are ~10 MB at most.
COUNTS_KEPT = 1 << 16


@dataclass(frozen=True)
class Hit:
    path: str
    title: str
    snippet: str
    score: float
    meta: dict[str, Any]


def _words(text: str) -> list[str]:
    """The words to match, lowercased, once each. Stop words are left out unless there
    is nothing else: "what" and "does" would match nearly every note, costing time and
    ranking nothing. A CJK word of one character counts (most words there are two)."""
    words = []
    for w in _TOKEN.findall(text):
        if has_cjk(w):  # a typed word whole; a question's run as its words (core.cjk)
            words += split(w)
        elif len(w) > 1 or w.isdigit():
            words.append(w.lower())
    return list(dict.fromkeys([w for w in words if w not in STOP] or words))


def _match_expr(words: list[str]) -> str | None:
    """Any of the words, each quoted (FTS5 syntax never leaks in from user text); a CJK
    word as the phrase of its characters (``core.cjk``)."""
    return " OR ".join(f'"{phrase(w)}"' for w in words) or None


def _stems(word: str) -> list[str]:
    """What the porter tokenizer may have indexed ``word`` as, longest first: it only
    cuts a suffix (at most ~4 letters) or turns a final y into i."""
    out = [word[:i] for i in range(len(word), max(len(word) - 5, 2), -1)] or [word]
    return [word[:-1] + "i", *out] if word.endswith("y") else out


class SearchIndex:
    """``root``: the vault, whose files' mtimes are the notes' ``modified`` when their
    frontmatter gives none (``props``)."""

    def __init__(self, db: Database, root: Path | None = None) -> None:
        self.db, self.root = db, root
        had_props = db.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='props'"
        ).fetchone()
        db.conn.executescript(SCHEMA + props.SCHEMA)
        c = db.conn
        # The searches' own connection (``Database.search_connection``): they run
        # beside a query's vector searches instead of queueing for the shared one.
        self._reads = db.search_connection()
        try:  # per connection (temp): an index lookup of how many rows hold a term
            for table in ("fts_notes", "fts_names"):
                self._reads.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_rows "
                    f"USING fts5vocab(main, {table}, 'row')"
                )
            self._counted = True
        except sqlite3.Error:  # no fts5vocab in this SQLite: every word is matched
            self._counted = False
        # (table, term) -> (the search connection's data_version when counted, rows):
        # a count is good while nothing else has committed (``rows_with``).
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}
        form = c.execute("SELECT value FROM fts_meta WHERE key='text_form'").fetchone()
        if c.execute("SELECT 1 FROM fts_notes LIMIT 1").fetchone() and (
            not had_props
            or not c.execute("SELECT 1 FROM fts_ids LIMIT 1").fetchone()
            or form != (TEXT_FORM,)
        ):  # rows from before fts_ids, props or this text form: start over (a full
            # reconcile refills them; restart.FORMAT changes with TEXT_FORM)
            with db.transaction() as conn:
                for table in ("fts_notes", "fts_names", "fts_ids"):
                    conn.execute(f"DELETE FROM {table}")
        if form != (TEXT_FORM,) and not db.read_only:
            with db.transaction() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO fts_meta VALUES ('text_form', ?)", (TEXT_FORM,)
                )

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
                props.write(conn, path, note, None if note is None else self._mtime(note))
                if note is None:
                    conn.execute("DELETE FROM fts_ids WHERE path=?", (path,))
                    continue
                if row is None:
                    nid = conn.execute("INSERT INTO fts_ids (path) VALUES (?)", (path,)).lastrowid
                meta = {
                    "title": note.title,  # as written (the indexed column is spaced)
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
                        spaced(note.title),
                        spaced(" ".join(note.aliases)),
                        spaced(note.summary or note.opening or ""),
                        spaced(" ".join(note.tags)),
                        spaced(note.body or ""),
                        json.dumps(meta, ensure_ascii=False),
                    ),
                )
                names = [(note.title, "title"), *((a, "alias") for a in note.aliases)]
                names += [(f"#{t}", "tag") for t in note.tags]
                conn.executemany(
                    "INSERT INTO fts_names (rowid, name, path, kind) VALUES (?, ?, ?, ?)",
                    (
                        (nid * NAMES + j, spaced(n), path, k)
                        for j, (n, k) in enumerate(names[:NAMES])
                    ),
                )

    def _mtime(self, note: Note) -> float | None:
        """The file's mtime now (a touch with the same text moves it: ``restat``)."""
        try:
            return (self.root / note.path).stat().st_mtime_ns / 1e9 if self.root else None
        except OSError:
            return None

    def restat(self, notes: dict[str, Note]) -> None:
        """The property rows of notes read again unchanged but touched: their dates
        default to the file's mtime, which moved."""
        with self.db.transaction() as conn:
            for path, note in notes.items():
                props.write(conn, path, note, self._mtime(note))

    def passing(self, filters: list[props.Where], vg: VaultGraph) -> set[str]:
        """The notes that pass every filter (``props.matching``); a link filter's value
        matches the note it resolves to by that note's path, title and aliases."""

        def names(w: props.Where) -> list[str]:
            r = resolve(vg.index, w.value, "")
            path = r.path or r.alias_of
            if path is None or path not in vg.notes:
                return []
            note = vg.notes[path]
            return [path, path.rsplit("/", 1)[-1], note.title, *note.aliases]

        return props.matching(self.db.conn, filters, names)

    def optimize(self) -> None:
        """Merge the FTS indexes into one segment each, after a bulk write: else later
        one-note updates meet FTS5's merges of the bulk's segments (1.3 s for one edit
        at 13k notes, measured); the merge itself takes ~0.1 s there."""
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO fts_notes(fts_notes) VALUES('optimize')")
            conn.execute("INSERT INTO fts_names(fts_names) VALUES('optimize')")

    def rows_with(self, table: str, words: list[str]) -> dict[str, int]:
        """How many rows of ``table`` hold each word (0 if none; by its longest stem
        the vocabulary knows, so ``notes`` counts the rows of ``note``)."""
        if not self._counted or not words:
            return dict.fromkeys(words, 0)
        stems = {w: _stems(w) for w in words}
        wanted = sorted({t for ts in stems.values() for t in ts})
        # The search connection's data_version moves whenever another connection
        # commits: a count taken at another version is not used.
        (version,) = self._reads.execute("PRAGMA data_version").fetchone()
        kept = {t: self._counts.get((table, t)) for t in wanted}
        found = {t: c[1] for t, c in kept.items() if c is not None and c[0] == version}
        missing = [t for t in wanted if t not in found]
        if missing:
            counted = dict(
                self._reads.execute(
                    f"SELECT term, doc FROM temp.{table}_rows WHERE term IN "
                    f"({','.join('?' * len(missing))})",
                    missing,
                ).fetchall()
            )
            if len(self._counts) + len(missing) > COUNTS_KEPT:
                self._counts.clear()
            for t in missing:
                found[t] = counted.get(t, 0)
                self._counts[(table, t)] = (version, found[t])
        # By its longest stem the vocabulary knows (a term it holds is in a row or more).
        return {w: next((found[t] for t in ts if found[t]), 0) for w, ts in stems.items()}

    def indexed(self) -> set[str]:
        return {r[0] for r in self.db.conn.execute("SELECT path FROM fts_ids")}

    def search(
        self,
        text: str,
        k: int = 8,
        folder: str | None = None,
        tag: str | None = None,
        rare_only: bool = False,
        among: Collection[str] | None = None,
        rarest: int = 0,
    ) -> list[Hit]:
        """BM25's top ``k`` notes. ``rare_only`` (a query's retriever, not a person's
        search): words in over half the notes are left out, and with nothing left, so
        is the search; and the hits have no snippet; ``rarest``: of those, only the
        ``rarest`` in fewest notes (a note's opening as a query: each word more costs
        a scan of its rows, and the rare ones decide the ranking). ``among``: only
        these notes (what filters let through)."""
        words = _words(text)
        if rare_only:
            (notes,) = self._reads.execute("SELECT count(*) FROM fts_ids").fetchone()
            common = max(COMMON_NOTES, notes // 2)
            counts = self.rows_with("fts_notes", words)
            words = [w for w, n in counts.items() if n <= common]
            if rarest:
                words = sorted(words, key=lambda w: (counts[w], w))[:rarest]
        expr = _match_expr(words)
        if expr is None:
            return []
        # A query's retriever reads the notes' paths only: no snippet, which FTS5 makes
        # for every matching row before the LIMIT (24 -> 16 ms a search at 13k notes).
        snippet = "''" if rare_only else f"snippet(fts_notes, 5, '[', ']', ' … ', {SNIPPET_TOKENS})"
        sql = (
            f"SELECT path, title, {snippet}, "
            f"bm25(fts_notes, {WEIGHTS}), meta FROM fts_notes WHERE fts_notes MATCH ?"
        )
        args: list[Any] = [expr]
        if folder:
            sql += " AND (path LIKE ? ESCAPE '\\')"
            args.append(like_prefix(folder.strip("/") + "/"))
        if among is not None:
            sql += " AND path IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(sorted(among)))
        sql += " ORDER BY bm25(fts_notes, " + WEIGHTS + ") LIMIT ?"
        args.append(k * 4 if tag else k)
        hits = [
            Hit(path, m.pop("title", None) or unspaced(title), unspaced(snippet), -score, m)
            for path, title, snippet, score, meta in self._reads.execute(sql, args)
            for m in [json.loads(meta)]
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

    def names_in(self, question: str, limit: int = 12) -> tuple[list[tuple[str, str]], set[str]]:
        """(name, note path) for names whose every word occurs in the question, best
        first: what the question mentions by name; and the question's words too common
        among the names to be looked for here (the caller looks their names up exactly)."""
        latin = [w for w in _words(question) if not has_cjk(w)]
        # A CJK run names what it contains: each character is a term of the names
        # (``core.cjk``), and a name counts below only if its run stands in the question.
        chars = list(dict.fromkeys(c for run in runs(question) for c in run))
        counts = self.rows_with("fts_names", latin + chars)
        common = {w for w, n in counts.items() if n > COMMON_NAMES}
        expr = _match_expr([w for w in counts if w not in common])
        if expr is None:
            return [], common - set(chars)
        asked = {w.lower() for w in _TOKEN.findall(question)}
        said_cjk = "".join(runs(question))

        def said(word: str) -> bool:  # "sort" names "Sorting": a shared stem of 4+ letters
            if has_cjk(word):
                return all(run in question for run in runs(word)) and bool(said_cjk)
            return word in asked or any(
                min(len(a), len(word)) >= 4 and (a.startswith(word) or word.startswith(a))
                for a in asked
            )

        rows = self._reads.execute(
            "SELECT name, path FROM fts_names WHERE fts_names MATCH ? ORDER BY rank LIMIT 200",
            (expr,),
        ).fetchall()
        out: list[tuple[str, str]] = []
        for spaced_name, path in rows:
            name = unspaced(spaced_name)
            words = {w.lower() for w in _TOKEN.findall(name)}
            if words and all(said(w) for w in words) and (name, path) not in out:
                out.append((name, path))
        out.sort(key=lambda np_: -len(_TOKEN.findall(np_[0])))  # longer names first
        return out[:limit], common


def exact_names(vg: VaultGraph, question: str, common: set[str]) -> list[tuple[str, str]]:
    """(name, note path) for each run of up to four of the question's ``common`` words
    that is exactly a note's title or alias or a tag (a final "s" may be a plural):
    the names ``names_in`` leaves out, found without ranking their thousands of rows."""
    if not common:
        return []
    words = [w.lower() for w in _TOKEN.findall(question)]
    out: list[tuple[str, str]] = []
    for i in range(len(words)):
        for j in range(i + 1, min(i + 4, len(words)) + 1):
            if words[j - 1] not in common:  # the run's earlier words were checked already
                break
            text = " ".join(words[i:j])
            for name in dict.fromkeys([text, text[:-1] if text.endswith("s") else text]):
                out += _named(vg, name)
    return list(dict.fromkeys(out))


def _named(vg: VaultGraph, name: str) -> list[tuple[str, str]]:
    idx = vg.index
    notes = sorted(p for p in idx.by_key.get(fold(name)) if p in vg.notes)
    out = [(vg.notes[p].title, p) for p in notes]
    out += [(name, p) for p in sorted(idx.aliases.get(alias_key(name)))]
    tag = TAG + name
    if tag in vg.g:
        tagged = sorted(u for u, _ in vg.g.in_edges(tag) if u in vg.notes)
        out += [(f"#{name}", tagged[0])] if tagged else []
    return out
