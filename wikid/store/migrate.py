"""Move a store from LightRAG's stock files to the SQLite backend, without re-embedding.

Why read the files directly: they are LightRAG's own formats (KV JSON,
NanoVectorDB JSON with its float32 matrix, GraphML), loaded here with
LightRAG's and nano-vectordb's own loaders, and everything in them, including
the vectors, is copied as it is. The sync ledger is copied too, so the next
sync finds nothing to do. The old files are left where they were: deleting
is the user's call.

The copy is one transaction: interrupted, it leaves no SQLite store, and the
next start simply migrates again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from lightrag.kg.networkx_impl import NetworkXStorage
from nano_vectordb import NanoVectorDB

from wikid.store._sqlite import Database
from wikid.store.backends import LEDGER_FILE
from wikid.store.ledger import SCHEMA as LEDGER_SCHEMA
from wikid.store.sqlite_backend import DB_FILE, SCHEMA

LEDGER_TABLES = ("meta", "notes", "entities", "relations", "chunks", "docs", "vectors", "pending")
_VECTOR_SKIP = {"__id__", "__created_at__", "__vector__", "vector", "_write_seq"}


def needs_migration(workspace_dir: Path) -> bool:
    """A stock-files store and no SQLite one yet."""
    return (workspace_dir / LEDGER_FILE).exists() and not (workspace_dir / DB_FILE).exists()


def migrate(workspace_dir: Path) -> dict[str, Any]:
    """Copy the stock-files store in ``workspace_dir`` into a new SQLite store beside it."""
    started = time.perf_counter()
    if not (workspace_dir / LEDGER_FILE).exists():
        raise ValueError(f"{workspace_dir} holds no stock-files wikid store ({LEDGER_FILE})")
    target = workspace_dir / DB_FILE
    if target.exists():
        raise ValueError(f"{target} exists already: this store was migrated")
    partial = workspace_dir / (DB_FILE + ".migrating")
    for leftover in workspace_dir.glob(DB_FILE + ".migrating*"):
        leftover.unlink()
    db = Database.open(partial)
    counts: dict[str, int] = {}
    try:
        db.conn.executescript(SCHEMA + LEDGER_SCHEMA)
        db.conn.execute("ATTACH DATABASE ? AS old", (str(workspace_dir / LEDGER_FILE),))
        with db.transaction() as conn:
            counts["kv"] = _copy_kv(conn, workspace_dir)
            counts["vectors"] = _copy_vectors(conn, workspace_dir)
            counts["nodes"], counts["edges"] = _copy_graph(conn, workspace_dir)
            for table in LEDGER_TABLES:
                conn.execute(f"INSERT OR REPLACE INTO main.{table} SELECT * FROM old.{table}")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('backend', 'sqlite')")
        db.conn.execute("DETACH DATABASE old")
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.release()
    partial.rename(target)
    for suffix in ("-wal", "-shm"):
        Path(str(partial) + suffix).unlink(missing_ok=True)
    counts["seconds"] = round(time.perf_counter() - started, 3)  # type: ignore[assignment]
    return counts


def _copy_kv(conn: Any, wd: Path) -> int:
    n = 0
    for path in sorted(wd.glob("kv_store_*.json")):
        ns = path.stem.removeprefix("kv_store_")
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
        conn.executemany(
            "INSERT OR REPLACE INTO lr_kv VALUES (?, ?, ?)",
            ((ns, k, json.dumps(v, ensure_ascii=False)) for k, v in data.items()),
        )
        n += len(data)
    return n


def _copy_vectors(conn: Any, wd: Path) -> int:
    n = 0
    for path in sorted(wd.glob("vdb_*.json")):
        ns = path.stem.removeprefix("vdb_")
        dim = int(json.loads(path.read_text(encoding="utf-8")).get("embedding_dim", 0))
        storage = NanoVectorDB(dim, storage_file=str(path))._NanoVectorDB__storage
        matrix = np.asarray(storage["matrix"], np.float32)
        rows = [
            (
                ns,
                row["__id__"],
                matrix[i].tobytes(),
                json.dumps(
                    {k: v for k, v in row.items() if k not in _VECTOR_SKIP}, ensure_ascii=False
                ),
                int(row.get("__created_at__") or 0),
            )
            for i, row in enumerate(storage["data"])
        ]
        conn.executemany("INSERT OR REPLACE INTO lr_vectors VALUES (?, ?, ?, ?, ?)", rows)
        n += len(rows)
    return n


def _copy_graph(conn: Any, wd: Path) -> tuple[int, int]:
    nodes = edges = 0
    for path in sorted(wd.glob("graph_*.graphml")):
        ns = path.stem.removeprefix("graph_")
        g = NetworkXStorage.load_nx_graph(str(path))
        if g is None:
            continue
        conn.executemany(
            "INSERT OR REPLACE INTO lr_nodes VALUES (?, ?, ?)",
            ((ns, k, json.dumps(d, ensure_ascii=False)) for k, d in g.nodes(data=True)),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO lr_edges VALUES (?, ?, ?, ?, ?)",
            (
                (ns, *sorted((u, v)), json.dumps(d, ensure_ascii=False), i)
                for i, (u, v, d) in enumerate(g.edges(data=True), start=1)
            ),
        )
        nodes, edges = nodes + g.number_of_nodes(), edges + g.number_of_edges()
    return nodes, edges
