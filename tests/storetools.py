"""Helpers for store tests: fresh builds, exports, unique workspaces."""

from __future__ import annotations

import itertools
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from wikid.config import DEFAULT_BACKEND
from wikid.store.backends import find_workspaces, ledger_file
from wikid.store.export import export_store
from wikid.store.ledger import Ledger
from wikid.sync.index import Index

_counter = itertools.count()


def unique_workspace(prefix: str = "t") -> str:
    """LightRAG shares a workspace's data process-wide: every test store gets its own."""
    return f"{prefix}{os.getpid()}_{next(_counter)}"


def ledger_path(workdir: Path) -> Path:
    """The one ledger under a working dir (whichever backend built it)."""
    ((workspace, backend),) = find_workspaces(workdir).items()
    return workdir / workspace / ledger_file(backend)


def seed_ledger(target: Path, seed: Path) -> None:
    """Copy the embedding cache (text hash -> vector) of ledger ``seed`` into a new
    ledger at ``target``, so a second build of the same texts embeds nothing."""
    ledger = Ledger(target)
    rows = sqlite3.connect(seed).execute("SELECT hash, vec FROM vectors").fetchall()
    ledger.db.executemany("INSERT INTO vectors VALUES (?, ?)", rows)
    ledger.close()


async def fresh_export(
    vault: Path, seed_vectors: Path | None = None, with_props: bool = False, **kwargs: Any
) -> dict[str, Any]:
    """Export of a store built from scratch from the vault as it is now.

    ``seed_vectors``: a ledger whose embedding cache (text hash -> vector) is copied
    in first; the store itself still starts empty. ``with_props``: the property
    filters' rows too, as ``"props"``."""
    with tempfile.TemporaryDirectory() as wd:
        workspace = unique_workspace("fresh")
        if seed_vectors is not None:
            backend = kwargs.get("backend", DEFAULT_BACKEND)
            seed_ledger(Path(wd) / workspace / ledger_file(backend), seed_vectors)
        idx = await Index.open(vault, Path(wd), workspace=workspace, **kwargs)
        try:
            await idx.sync()
            out = await export_store(idx.store)
            return {**out, "props": props_rows(idx)} if with_props else out
        finally:
            await idx.close()


def props_rows(idx: Index) -> list[tuple[Any, ...]]:
    """The property filters' rows (``sync/props.py``), sorted."""
    conn = idx.sink.search.db.conn
    return sorted(conn.execute("SELECT path, key, val, num FROM props").fetchall())


def assert_same_store(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Field by field, with the first difference named."""
    for section in ("entities", "relations", "chunks", "documents"):
        key = {
            "entities": lambda e: e["name"],
            "relations": lambda r: (r["src"], r["tgt"]),
            "chunks": lambda c: c["id"],
            "documents": lambda d: d["id"],
        }[section]
        left = {key(x): x for x in a[section]}
        right = {key(x): x for x in b[section]}
        for k in sorted(set(left) | set(right), key=str):
            assert left.get(k) == right.get(k), f"{section} {k!r}: {left.get(k)} != {right.get(k)}"
    assert a["vectors"] == b["vectors"]
