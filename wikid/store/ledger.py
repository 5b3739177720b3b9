"""The sync ledger: what the store holds, kept in SQLite beside it.

Why a mirror of the store's records and not only per-note hashes: the sink
decides what to write by comparing the records a fresh build would give
against what was last written, key by key. With the mirror here, that diff
needs no store reads, unchanged records cost nothing, and an offline edit,
delete or rename shows up as a difference on the next start.

Crash safety: before a batch touches the store, its store keys are committed
to ``pending``. The mirror is committed only after the store flush succeeded,
in the same transaction that clears ``pending``. A crash anywhere leaves
either the old mirror (and ``pending`` naming every key that may be torn,
which the next start rewrites from scratch) or the new one.

The ledger also caches embedding vectors by content hash, so a rename, an
undo or a rebuild never pays for the same embedding twice.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from wikid.store._sqlite import Connection, Database, in_batches, set_aside_if_damaged

log = structlog.get_logger("wikid.store")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    path TEXT PRIMARY KEY, digest TEXT NOT NULL, entity TEXT NOT NULL,
    chunks TEXT NOT NULL, synced_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS entities (name TEXT PRIMARY KEY, node TEXT NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS entities_node ON entities(node);
CREATE TABLE IF NOT EXISTS relations (
    key TEXT PRIMARY KEY, a TEXT NOT NULL, b TEXT NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS relations_pair ON relations(a, b);
CREATE TABLE IF NOT EXISTS chunks (id TEXT PRIMARY KEY, note TEXT NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_note ON chunks(note);
CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, path TEXT NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS docs_path ON docs(path);
CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pending (kind TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (kind, key));
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, kind TEXT NOT NULL, note BLOB);
CREATE INDEX IF NOT EXISTS files_kind ON files(kind, path);
"""
# The parse cache: what the graph the store was built from held for each file, so a
# restart can rebuild that graph without reading unchanged files (``wikid.sync.restart``).
# A row is ("note", encoded note) or ("attachment", None); None in a batch deletes it.
FileRow = tuple[str, bytes | None] | None

KINDS = ("entity", "relation", "chunk", "doc")
# The meta key holding the parse cache's fingerprint (``sync.restart``): "" while a full
# reconcile runs, absent when there is no cache to trust.
PARSE_CACHE = "parse_cache"


@dataclass
class Ops:
    """One batch of store writes, by kind: key -> record to upsert, or None to delete.

    ``owner`` holds what the mirror indexes each key by (node, node pair, note path)."""

    entity: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    relation: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    chunk: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    doc: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    owner: dict[tuple[str, str], Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any((self.entity, self.relation, self.chunk, self.doc))

    def by_kind(self) -> dict[str, dict[str, dict[str, Any] | None]]:
        return {
            "entity": self.entity,
            "relation": self.relation,
            "chunk": self.chunk,
            "doc": self.doc,
        }

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.by_kind().items()}

    def meets(self, other: Ops) -> bool:
        """Do the two batches write a key in common?"""
        theirs = other.by_kind()
        return any(not mine.keys().isdisjoint(theirs[k]) for k, mine in self.by_kind().items())


def mirror_form(record: dict[str, Any]) -> dict[str, Any]:
    """What the ledger keeps of a record: long text only as its hash."""
    if "content" not in record:
        return record
    out = dict(record)
    out["content"] = hashlib.md5(str(record["content"]).encode()).hexdigest()
    return out


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(mirror_form(record), sort_keys=True, ensure_ascii=False)


class Ledger:
    """The ledger's tables, in their own file (stock file storages) or in the SQLite
    store's file, on the same connection, so a batch commits store and ledger at once."""

    def __init__(self, path: Path, writer: bool = True) -> None:
        self.path = path
        # A file SQLite cannot read (a garbled header) is moved aside, never deleted;
        # the store then starts over, rebuilt from the vault, which is the truth. Only
        # by the writer: a reader (export, lightrag-server) never moves the store.
        self.set_aside = set_aside_if_damaged(path) if writer else None
        if self.set_aside is not None:
            log.warning(
                "the store could not be read; moved aside, rebuilding it from the vault",
                moved_to=str(self.set_aside[0]),
                error=self.set_aside[1],
            )
        self.database = Database.open(path)
        self.db = self.database.conn
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.database.release()

    # meta

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, values: dict[str, str]) -> None:
        with self._tx():
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())

    # mirror reads

    def entity_of(self, node: str) -> list[tuple[str, dict[str, Any]]]:
        rows = self.db.execute("SELECT name, record FROM entities WHERE node=?", (node,))
        return [(n, json.loads(r)) for n, r in rows]

    def relation_of(self, a: str, b: str) -> list[tuple[str, dict[str, Any]]]:
        rows = self.db.execute("SELECT key, record FROM relations WHERE a=? AND b=?", (a, b))
        return [(k, json.loads(r)) for k, r in rows]

    def chunks_of(self, note: str) -> dict[str, dict[str, Any]]:
        rows = self.db.execute("SELECT id, record FROM chunks WHERE note=?", (note,))
        return {i: json.loads(r) for i, r in rows}

    def docs_of(self, path: str) -> dict[str, dict[str, Any]]:
        rows = self.db.execute("SELECT id, record FROM docs WHERE path=?", (path,))
        return {i: json.loads(r) for i, r in rows}

    def digests(self) -> dict[str, str]:
        """Each synced note's content digest."""
        return dict(self.db.execute("SELECT path, digest FROM notes").fetchall())

    def all_nodes(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT node FROM entities")}

    def all_pairs(self) -> set[tuple[str, str]]:
        return {(a, b) for a, b in self.db.execute("SELECT a, b FROM relations")}

    def all_notes(self) -> set[str]:
        notes = {r[0] for r in self.db.execute("SELECT note FROM chunks")}
        return notes | {r[0] for r in self.db.execute("SELECT path FROM docs")}

    def counts(self) -> dict[str, int]:
        return {
            "notes": self.db.execute("SELECT count(*) FROM notes").fetchone()[0],
            "entities": self.db.execute("SELECT count(*) FROM entities").fetchone()[0],
            "relations": self.db.execute("SELECT count(*) FROM relations").fetchone()[0],
            "chunks": self.db.execute("SELECT count(*) FROM chunks").fetchone()[0],
        }

    # pending

    def pending(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {k: set() for k in KINDS}
        for kind, key in self.db.execute("SELECT kind, key FROM pending"):
            out[kind].add(key)
        return out

    def set_pending(self, ops: Ops) -> None:
        with self._tx():
            for kind, items in ops.by_kind().items():
                self.db.executemany(
                    "INSERT OR IGNORE INTO pending VALUES (?, ?)", ((kind, k) for k in items)
                )

    # commit

    def commit(
        self,
        ops: Ops,
        notes: dict[str, tuple[str, str, list[str]] | None],
        files: dict[str, FileRow] | None = None,
        all_files: bool = False,
    ) -> None:
        """Make the mirror match a batch the store has durably applied; clear pending.
        ``files`` updates the parse cache in the same transaction (``all_files``: they
        are every file, and replace the whole cache)."""
        now = time.time()
        with self._tx():
            if all_files:
                self.db.execute("DELETE FROM files")
            self.put_files(files or {})
            for name, rec in ops.entity.items():
                if rec is None:
                    self.db.execute("DELETE FROM entities WHERE name=?", (name,))
                else:
                    self.db.execute(
                        "INSERT OR REPLACE INTO entities VALUES (?, ?, ?)",
                        (name, ops.owner[("entity", name)], _dumps(rec)),
                    )
            for key, rec in ops.relation.items():
                if rec is None:
                    self.db.execute("DELETE FROM relations WHERE key=?", (key,))
                else:
                    a, b = ops.owner[("relation", key)]
                    self.db.execute(
                        "INSERT OR REPLACE INTO relations VALUES (?, ?, ?, ?)",
                        (key, a, b, _dumps(rec)),
                    )
            for table, kind in (("chunks", "chunk"), ("docs", "doc")):
                for key, rec in ops.by_kind()[kind].items():
                    if rec is None:
                        self.db.execute(f"DELETE FROM {table} WHERE id=?", (key,))
                    else:
                        self.db.execute(
                            f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?)",
                            (key, ops.owner[(kind, key)], _dumps(rec)),
                        )
            for path, row in notes.items():
                if row is None:
                    self.db.execute("DELETE FROM notes WHERE path=?", (path,))
                else:
                    digest, entity, chunk_ids = row
                    self.db.execute(
                        "INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?, ?)",
                        (path, digest, entity, json.dumps(chunk_ids), now),
                    )
            self.db.execute("DELETE FROM pending")

    def put_files(self, files: dict[str, FileRow]) -> None:
        """Parse-cache rows (None: the path is no file of the vault any more)."""
        with self._tx():
            for path, frow in files.items():
                if frow is None:
                    self.db.execute("DELETE FROM files WHERE path=?", (path,))
                else:
                    self.db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", (path, *frow))

    def files(self) -> dict[str, tuple[str, bytes | None]]:
        """The parse cache: path -> (kind, encoded note or None)."""
        return {p: (k, n) for p, k, n in self.db.execute("SELECT path, kind, note FROM files")}

    def file_note(self, path: str) -> bytes | None:
        """One note's parse-cache row (a head's payload, read back on demand)."""
        row = self.db.execute("SELECT note FROM files WHERE path=?", (path,)).fetchone()
        return row[0] if row else None

    def attachments(self) -> set[str]:
        """The parse cache's attachments, read from an index (the notes' rows hold ~30 MB
        at 13k notes: a restart from a cold disk would read them all)."""
        return {r[0] for r in self.db.execute("SELECT path FROM files WHERE kind != 'note'")}

    def wipe(self, keep_vectors: bool = False) -> None:
        """Forget everything about the store (after a change of embedding model); with
        ``keep_vectors``, all but the cache of vectors by text (the model is the same)."""
        tables = ["notes", "entities", "relations", "chunks", "docs", "pending", "files"]
        with self._tx():
            # The parse cache's stamp goes with its rows: an emptied cache is not an
            # empty vault's, and a restart must not trust it.
            self.db.execute("DELETE FROM meta WHERE key=?", (PARSE_CACHE,))
            for table in tables if keep_vectors else [*tables, "vectors"]:
                self.db.execute(f"DELETE FROM {table}")

    # vectors

    def cached(self, hashes: Iterable[str]) -> set[str]:
        """Which of these text hashes have a cached vector (reads no vector)."""
        found: set[str] = set()
        for part in in_batches(list(hashes)):
            marks = ",".join("?" * len(part))
            rows = self.db.execute(f"SELECT hash FROM vectors WHERE hash IN ({marks})", part)
            found.update(r[0] for r in rows)
        return found

    def vectors(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for h in hashes:
            row = self.db.execute("SELECT vec FROM vectors WHERE hash=?", (h,)).fetchone()
            if row is not None:
                out[h] = np.frombuffer(row[0], dtype=np.float32)
        return out

    def add_vectors(self, items: dict[str, np.ndarray]) -> None:
        """Cache vectors at once, outside any batch: a cache entry is never wrong, and a
        sync killed halfway must not pay for the same embeddings again."""
        with self._tx():
            self.db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                ((h, v.astype(np.float32).tobytes()) for h, v in items.items()),
            )

    def _tx(self) -> AbstractContextManager[Connection]:
        return self.database.transaction()
