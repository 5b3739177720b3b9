"""The SQLite storage family for LightRAG: where its file lives and how LightRAG finds it.

Why a storage family of our own: LightRAG's stock file storages rewrite whole
JSON/GraphML files on every flush, so an edit costs time proportional to the
vault. These storages write rows, so an edit costs what it touches.

Registration uses LightRAG's own registry (``lightrag.kg.STORAGES`` and the
implementation lists); nothing in LightRAG is patched. Any process that calls
``register()`` before constructing ``LightRAG`` can open a wikid store with
stock LightRAG code: ``wikid lightrag-server`` does exactly that.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, ClassVar

from wikid.store._sqlite import Database

DB_FILE = "wikid-store.sqlite"

CLASSES = {
    # LightRAG storage kind -> (class name, module)
    "KV_STORAGE": ("SQLiteKVStorage", "wikid.store.sqlite_kv"),
    "DOC_STATUS_STORAGE": ("SQLiteDocStatusStorage", "wikid.store.sqlite_kv"),
    "VECTOR_STORAGE": ("SQLiteVectorStorage", "wikid.store.sqlite_vector"),
    "GRAPH_STORAGE": ("SQLiteGraphStorage", "wikid.store.sqlite_graph"),
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS lr_kv (
    ns TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (ns, id));
CREATE TABLE IF NOT EXISTS lr_vectors (
    ns TEXT NOT NULL, id TEXT NOT NULL, vec BLOB NOT NULL, data TEXT NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (ns, id));
CREATE TABLE IF NOT EXISTS lr_vector_gen (ns TEXT PRIMARY KEY, gen INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lr_nodes (
    ns TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (ns, id));
CREATE TABLE IF NOT EXISTS lr_edges (
    ns TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, data TEXT NOT NULL,
    seq INTEGER NOT NULL, PRIMARY KEY (ns, a, b));
CREATE INDEX IF NOT EXISTS lr_edges_b ON lr_edges(ns, b);
CREATE INDEX IF NOT EXISTS lr_edges_seq ON lr_edges(ns, seq);
"""


def database_file(working_dir: str | Path, workspace: str) -> Path:
    return Path(working_dir) / workspace / DB_FILE if workspace else Path(working_dir) / DB_FILE


READ_ONLY_ENV = "WIKID_STORE_READ_ONLY"  # "1": this process only reads (lightrag-server)


def read_only() -> bool:
    return os.environ.get(READ_ONLY_ENV) == "1"


def open_database(global_config: dict[str, Any], workspace: str) -> Database:
    """The shared connection for a LightRAG instance's store, schema ensured (or, in a
    read-only process, a connection SQLite opens read-only)."""
    path = database_file(global_config["working_dir"], workspace)
    if read_only():
        if not path.is_file():
            raise FileNotFoundError(f"no wikid store at {path}: run wikid on the vault first")
        return Database.open(path, read_only=True)
    db = Database.open(path)
    db.conn.executescript(SCHEMA)
    return db


def register() -> None:
    """Make LightRAG accept the SQLite storages by name (idempotent)."""
    from lightrag import kg

    for kind, (name, module) in CLASSES.items():
        impls = kg.STORAGE_IMPLEMENTATIONS[kind]["implementations"]
        if name not in impls:
            impls.append(name)
        kg.STORAGES[name] = module
        kg.STORAGE_ENV_REQUIREMENTS.setdefault(name, [])


def class_names() -> tuple[str, str, str, str]:
    """(kv, vector, graph, doc_status), as ``Store``'s backend table wants them."""
    return (
        CLASSES["KV_STORAGE"][0],
        CLASSES["VECTOR_STORAGE"][0],
        CLASSES["GRAPH_STORAGE"][0],
        CLASSES["DOC_STATUS_STORAGE"][0],
    )


class Connected:
    """The lifecycle every SQLite storage shares: the process-wide connection is taken
    on ``initialize()`` and let go on ``finalize()``; rows are written as they come,
    so ``index_done_callback`` has nothing to flush and answers as the stock storage
    of that kind does (``done``)."""

    namespace: str
    workspace: str
    global_config: dict[str, Any]
    done: ClassVar[bool | None] = True
    _db: Database | None = None

    def _opened(self) -> None:
        """Hook: the connection is ready (load an in-memory index, bind row mappings)."""

    async def initialize(self) -> None:
        if self._db is None:
            # In a thread: the connection is shared, and on a restart the parse cache is
            # read on it meanwhile, so the schema check waited for that read on the event
            # loop (a 2.0 s stall at a 2.7k-note restart, measured).
            self._db = await asyncio.to_thread(open_database, self.global_config, self.workspace)
            await asyncio.to_thread(self._opened)  # e.g. a vector matrix: seconds at 13k

    async def finalize(self) -> None:
        if self._db is not None:
            self._db.release()
            self._db = None

    async def index_done_callback(self) -> bool | None:
        return self.done

    @property
    def db(self) -> Database:
        if self._db is None:
            raise RuntimeError(f"{self.namespace}: storage used before initialize()")
        return self._db
