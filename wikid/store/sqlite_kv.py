"""LightRAG KV and doc-status storages on SQLite rows.

Why subclass the stock JSON storages: their logic (timestamps, the
``llm_cache_list`` default, status pagination with cursors, source-conflict
repair) is LightRAG's contract, and copying it would drift from upstream.
They keep every record in ``self._data``, a dict. Here ``self._data`` is a
``_Rows`` mapping over one namespace of the ``lr_kv`` table: every read and
write is a row operation, nothing is held in memory, and another process
always reads what was last committed. ``index_done_callback`` has nothing
left to flush.

Writes outside a wikid batch (LightRAG's own pipeline, its query cache) each
commit at once; inside a batch they join its transaction.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from lightrag.kg.json_doc_status_impl import JsonDocStatusStorage
from lightrag.kg.json_kv_impl import JsonKVStorage
from lightrag.kg.shared_storage import get_namespace_lock, get_update_flag, set_all_update_flags
from lightrag.utils import validate_workspace

from wikid.store._sqlite import Database, in_batches
from wikid.store.sqlite_backend import Connected


class _Rows(MutableMapping[str, dict[str, Any]]):
    """A dict of JSON records backed by ``lr_kv`` rows of one namespace."""

    def __init__(self, db: Database, ns: str) -> None:
        self.db, self.ns = db, ns

    def __getitem__(self, key: str) -> dict[str, Any]:
        row = self.db.conn.execute(
            "SELECT data FROM lr_kv WHERE ns=? AND id=?", (self.ns, key)
        ).fetchone()
        if row is None:
            raise KeyError(key)
        value: dict[str, Any] = json.loads(row[0])
        return value

    def __setitem__(self, key: str, value: dict[str, Any]) -> None:
        self.update({key: value})

    def update(self, other: Any = (), /, **kw: Any) -> None:  # one transaction for many rows
        items = dict(other, **kw)
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO lr_kv VALUES (?, ?, ?)",
                ((self.ns, k, json.dumps(v, ensure_ascii=False)) for k, v in items.items()),
            )

    def __delitem__(self, key: str) -> None:
        with self.db.transaction() as conn:
            cur = conn.execute("DELETE FROM lr_kv WHERE ns=? AND id=?", (self.ns, key))
        if cur.rowcount == 0:
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        rows = self.db.conn.execute("SELECT id FROM lr_kv WHERE ns=?", (self.ns,)).fetchall()
        return iter([r[0] for r in rows])

    def __len__(self) -> int:
        return int(
            self.db.conn.execute("SELECT count(*) FROM lr_kv WHERE ns=?", (self.ns,)).fetchone()[0]
        )

    def __contains__(self, key: object) -> bool:
        return (
            self.db.conn.execute(
                "SELECT 1 FROM lr_kv WHERE ns=? AND id=?", (self.ns, key)
            ).fetchone()
            is not None
        )

    def items(self) -> Any:  # one query, not one per key
        rows = self.db.conn.execute("SELECT id, data FROM lr_kv WHERE ns=?", (self.ns,))
        return [(k, json.loads(v)) for k, v in rows.fetchall()]

    def values(self) -> Any:
        return [v for _, v in self.items()]

    def clear(self) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM lr_kv WHERE ns=?", (self.ns,))

    def copy(self) -> dict[str, dict[str, Any]]:
        return dict(self.items())

    def _where_in(self, columns: str, keys: list[str]) -> Iterator[Any]:
        """Rows of these keys (those that have one): one query per 400 keys."""
        for part in in_batches(keys):
            marks = ",".join("?" * len(part))
            yield from self.db.conn.execute(
                f"SELECT {columns} FROM lr_kv WHERE ns=? AND id IN ({marks})", (self.ns, *part)
            )

    def raw(self, keys: list[str]) -> dict[str, str]:
        """key -> its JSON text, for the keys that have a row."""
        return dict(self._where_in("id, data", keys))

    def remove(self, keys: list[str]) -> int:
        """Delete the rows of these keys (those that have one); how many there were."""
        removed = 0
        with self.db.transaction() as conn:
            for part in in_batches(keys):
                marks = ",".join("?" * len(part))
                cur = conn.execute(
                    f"DELETE FROM lr_kv WHERE ns=? AND id IN ({marks})", (self.ns, *part)
                )
                removed += cur.rowcount
        return removed

    def missing(self, keys: set[str]) -> set[str]:
        return set(keys) - {r[0] for r in self._where_in("id", list(keys))}


SCRATCH = (
    "llm_response_cache",
    "entity_chunks",
    "relation_chunks",
    "full_entities",
    "full_relations",
)


class _SQLiteRows(Connected):
    """What both storages share: ``_data`` bound to the rows of their namespace."""

    done = None  # the stock JSON storages' index_done_callback returns nothing
    _data: Any
    _storage_lock: Any
    storage_updated: Any

    def __post_init__(self) -> None:
        validate_workspace(self.workspace)
        self.workspace = self.workspace or ""
        self._data = None
        self._storage_lock = None
        self.storage_updated = None
        self._db = None

    def _opened(self) -> None:
        if self.db.read_only and self.namespace.endswith(SCRATCH):
            # A read-only LightRAG server still writes these at startup (its chunk
            # tracking) and while asking (its LLM cache); wikid writes none of them, and
            # nothing that reads the store needs them, so they live in memory there.
            self._data = {}
        else:
            self._data = _Rows(self.db, self.namespace)

    async def initialize(self) -> None:
        # The stock methods take this lock and flip these flags: keep them working.
        self._storage_lock = get_namespace_lock(self.namespace, workspace=self.workspace)
        self.storage_updated = await get_update_flag(self.namespace, workspace=self.workspace)
        await super().initialize()

    async def filter_keys(self, keys: set[str]) -> set[str]:
        if isinstance(self._data, dict):  # the in-memory cache of a read-only process
            return set(keys) - set(self._data)
        rows: _Rows = self._data
        return rows.missing(set(keys))

    async def delete(self, ids: list[str]) -> None:
        """The stock ``delete``, which pops id by id on the event loop (two queries an
        id: a 630 ms stall in one batch at 13k notes), as one statement per 400 ids in
        a worker thread; the update flags flip, as there, only if a row went."""
        if not isinstance(self._data, _Rows):
            await super().delete(ids)  # type: ignore[misc]  # the stock JSON storage's
            return
        async with self._storage_lock:
            if await asyncio.to_thread(self._data.remove, list(ids)):
                await set_all_update_flags(self.namespace, workspace=self.workspace)

    async def all_keys(self) -> list[str]:
        """Every key (wikid's export and migration list them; the base class cannot)."""
        return list(self._data)


@dataclass
class SQLiteKVStorage(_SQLiteRows, JsonKVStorage):  # type: ignore[misc]
    """LightRAG's KV storage (full_docs, text_chunks, llm_response_cache, ...) on SQLite."""

    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        """``JsonKVStorage.upsert`` (the ``llm_cache_list`` default, create and update
        times, ``_id``) with the existence checks and the rows in a worker thread: one
        query per key on the event loop took up to 0.55 s a part at 13k notes."""
        if not data or not isinstance(self._data, _Rows):
            await super().upsert(data)
            return
        async with self._storage_lock:
            await asyncio.to_thread(self._stamp_and_write, self._data, data)
            await set_all_update_flags(self.namespace, workspace=self.workspace)

    async def get_by_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        """``JsonKVStorage.get_by_ids`` with one query per 400 ids, in a worker thread
        (it read row by row: ~300 queries per LightRAG query at 13k notes). Each result
        is decoded on its own, so none aliases another (the stock deep copy's job)."""
        if not isinstance(self._data, _Rows):
            return await super().get_by_ids(ids)  # type: ignore[no-any-return]
        found = await asyncio.to_thread(self._data.raw, list(ids))
        out: list[Any] = []
        for k in ids:
            value = json.loads(found[k]) if k in found else None
            if value:
                value.setdefault("create_time", 0)
                value.setdefault("update_time", 0)
                value["_id"] = k
            out.append(value or None)
        return out

    def _stamp_and_write(self, rows: _Rows, data: dict[str, dict[str, Any]]) -> None:
        now = int(time.time())
        new = rows.missing(set(data))
        for k, v in data.items():
            if self.namespace.endswith("text_chunks"):
                v.setdefault("llm_cache_list", [])
            if k in new:
                v["create_time"] = now
            v["update_time"], v["_id"] = now, k
        rows.update(data)


@dataclass
class SQLiteDocStatusStorage(_SQLiteRows, JsonDocStatusStorage):  # type: ignore[misc]
    """LightRAG's document-status storage on SQLite."""

    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        """``JsonDocStatusStorage.upsert`` (the ``chunks_list`` default, the update
        flags, the flush) with the rows written in a worker thread: on the event loop
        they stalled it up to 1.3 s a batch at 13k notes."""
        if not data or not isinstance(self._data, _Rows):
            await super().upsert(data)
            return
        for value in data.values():
            value.setdefault("chunks_list", [])
        async with self._storage_lock:
            await asyncio.to_thread(self._data.update, data)
            await set_all_update_flags(self.namespace, workspace=self.workspace)
        await self.index_done_callback()
