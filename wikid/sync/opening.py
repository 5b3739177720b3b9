"""The composition root: what opening a vault's index builds, and in which order.

Why apart from ``Index``: opening is the one place that knows every part (the
store's lock, a migration, the embedding model, the backend, the parse cache,
the graph, the extractor) and how their start-up overlaps so the event loop
keeps answering; ``Index`` then only uses them. It never writes to the store
beyond what opening a store does, and never reads a note the parse cache holds.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from wikid.config import (
    DEFAULT_BACKEND,
    DEFAULT_EMBEDDING,
    ExtractSettings,
    default_workdir,
    workspace_name,
)
from wikid.core.graph import VaultGraph
from wikid.core.vault import VaultOptions
from wikid.store.backends import warm
from wikid.store.cost import CostLedger
from wikid.store.embed import Embedder, LoadingMiniLM, LocalOnnx
from wikid.store.heap import building
from wikid.store.lock import StoreLock
from wikid.store.migrate import migrate, needs_migration
from wikid.store.rag import Store
from wikid.store.relocate import adopt
from wikid.sync import restart
from wikid.sync.extract import ExtractionCache, Extractor
from wikid.sync.parse_pool import parser

log = structlog.get_logger("wikid.sync.opening")


@dataclass
class Opened:
    """The parts of an opened index; ``plan`` is a restart's parse cache (None: the
    graph was read from the files), ``reason`` why the start is what it is."""

    vg: VaultGraph
    store: Store
    extractor: Extractor | None
    lock: StoreLock
    plan: restart.Restart | None
    reason: str


async def _model(embedding: str) -> Embedder:
    """The configured model: MiniLM loading in a thread while the store opens (its id
    and dimension are known at once), or the user's ONNX model, whose dimension is
    known once it is loaded."""
    if embedding == DEFAULT_EMBEDDING:
        return LoadingMiniLM()
    model = await asyncio.to_thread(LocalOnnx, embedding)
    log.info("embedding model", model=model.model_id, dim=model.dim, path=embedding)
    return model


def load_graph(vault: Path, options: VaultOptions | None, in_processes: bool = False) -> VaultGraph:
    """Every note read and parsed: a cold start's longest step before it listens, so
    its time is logged (a 50k cold start took 53-94 s to serve, and the log said no
    more than when it listened); ``in_processes``: parsed by ``parse_pool``'s workers."""
    started = time.perf_counter()
    options = options or VaultOptions()
    parse = parser(vault, options) if in_processes else None
    with building():
        vg = VaultGraph.load(vault, options, parse=parse)
    log.info("vault read", notes=len(vg.notes), s=round(time.perf_counter() - started, 2))
    return vg


async def open_parts(
    vault: Path,
    workdir: Path | None = None,
    *,
    options: VaultOptions | None = None,
    embedder: Embedder | None = None,
    embedding: str = DEFAULT_EMBEDDING,
    backend: str = DEFAULT_BACKEND,
    llm_func: Any = None,
    workspace: str | None = None,
    extraction: ExtractSettings | None = None,
    postgres_url: str | None = None,
    adopt_from: Path | None = None,
    parse_in_processes: bool = False,
) -> Opened:
    """Open (creating if needed) the store of ``vault`` and load its graph (see
    ``Index.open``); the lock is released if anything fails."""
    workdir = Path(workdir) if workdir else default_workdir(vault)
    workspace = workspace or workspace_name(vault)

    def prepare() -> tuple[StoreLock, bool]:
        """Files only, in a worker thread: after a reboot one stat of the old store's
        folder held the event loop 570 ms at 13k notes."""
        if adopt_from is not None:
            adopt(adopt_from, workdir / workspace, vault.resolve())
        lock = StoreLock(workdir / workspace)  # StoreBusy when another writer has it
        return lock, backend == "sqlite" and needs_migration(workdir / workspace)

    lock, migrating = await asyncio.to_thread(prepare)
    try:
        if migrating:
            counts = await asyncio.to_thread(migrate, workdir / workspace)
            log.info("store migrated from stock files to sqlite", **counts)
        # The model loads in a thread while the store opens and the parse cache is
        # read (status answers meanwhile); the open ends once it is loaded.
        model = embedder or await _model(embedding)
        await asyncio.to_thread(warm, backend)  # tiktoken, storage modules: 0.4 s
        # In a thread too: creating the store's file (WAL, schema) held the event
        # loop 560 ms in a first start, and LightRAG's construction takes more.
        store = await asyncio.to_thread(
            functools.partial(
                Store,
                workdir,
                workspace,
                model,
                backend=backend,
                llm_func=llm_func,
                postgres_url=postgres_url,
            )
        )
        # The parse cache is read while the storages open (the vector matrix loads:
        # seconds at 13k); a store started over voids what it read.
        read_cache = functools.partial(
            restart.plan, store.ledger, vault, options, extraction is not None
        )
        over, (plan, reason) = await asyncio.gather(store.open(), asyncio.to_thread(read_cache))
        if over:  # the ledger was wiped: its parse cache is empty, not an empty vault's
            plan, reason = None, "the store was started over"
        if store.ledger.set_aside is not None:
            reason = f"the store could not be read; moved aside to {store.ledger.set_aside[0]}"
        store.ledger.set_meta({"vault": str(vault.resolve())})
        if isinstance(model, LoadingMiniLM):
            await asyncio.wrap_future(model.ready)
        if plan:
            vg = plan.graph
        else:
            vg = await asyncio.to_thread(load_graph, vault, options, parse_in_processes)
        extractor = None
        if extraction is not None:
            db = store.ledger.database
            extractor = Extractor(ExtractionCache(db), CostLedger(db), extraction)
        return Opened(vg, store, extractor, lock, plan, reason)
    except BaseException:
        lock.release()
        raise
