"""The socket's read ops as the daemon answers them: which wait for a batch in flight,
which are served from the graph alone while the first sync embeds, and a query's
LLM answer.

Why apart from the daemon: the daemon keeps the store in step with the vault (its
batches, reconciles and lifecycle); this module only reads what those keep. It sees
the daemon through a protocol, as ``status`` does, so it does not import it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from wikid.ask.answer import answer
from wikid.config import NO_LLM, VaultConfig
from wikid.server import api, browse
from wikid.server.log import Progress
from wikid.server.protocol import ProtocolError
from wikid.server.watcher import Watcher
from wikid.store.cost import CostLedger
from wikid.store.llm import LLMError
from wikid.sync.index import Index

QUERY_WAIT_S = 10.0  # how long a query waits for a batch in flight before "busy"
OPS = ("freshness", "query", *api.GRAPH_OPS, *api.INDEX_OPS, *api.STORE_OPS, "cost")


class Daemon(Protocol):
    """What the read ops use of the daemon (``wikid.server.daemon.Daemon``)."""

    cfg: VaultConfig
    ready: bool  # the first sync is done
    serving: bool  # links and search answer, the store may still embed
    meaning_ready: bool  # every chunk and entity is embedded (the links may still be)
    progress: Progress
    costs: CostLedger
    batch_lock: asyncio.Lock  # held by every batch

    @property
    def index(self) -> Index: ...

    @property
    def watcher(self) -> Watcher: ...

    def recount(self) -> Awaitable[None]: ...


async def read(d: Daemon, op: str, req: dict[str, Any], emit: Callable[[str], None]) -> Any:
    """The reply to read op ``op`` (one of ``OPS``)."""
    vg = d.index.graph  # "busy" until the vault is loaded
    if op in api.GRAPH_OPS:
        return api.GRAPH_OPS[op](vg, req)
    if op == "freshness":
        return browse.freshness(vg, req.get("paths"), d.watcher.pending())
    if op == "query":
        return await _query(d, req, emit)
    if op in api.INDEX_OPS:
        async with _consistent(d, search=True):  # in a thread: it may read notes
            return await asyncio.to_thread(api.INDEX_OPS[op], d.index, req)
    if op in api.STORE_OPS:
        if d.serving and not d.meaning_ready:  # still embedding: from the graph alone
            return await api.STORE_OPS[op](d.index, req, vectors=False)
        async with _consistent(d):
            return await api.STORE_OPS[op](d.index, req)
    if op == "cost":
        return d.costs.totals(d.cfg.llm_prices)
    raise ProtocolError("unknown_op", f"unknown op {op!r}")


async def _query(d: Daemon, req: dict[str, Any], emit: Callable[[str], None]) -> dict[str, Any]:
    args = (
        req.get("text"),
        req.get("mode") or d.cfg.query_mode,
        req.get("budget") or d.cfg.query_budget,
        req.get("explain", False),
        req.get("where"),
    )
    if d.serving and not d.meaning_ready:  # still embedding: the graph and BM25 now
        ev = await api.query(d.index, *args, vectors=False)
        ev["partial"] = {"embedded": d.progress.done, "total": d.progress.total}
    else:
        async with _consistent(d):
            ev = await api.query(d.index, *args)
    if req.get("answer"):
        ev["answer"] = await _answer(d, ev, emit)
    else:
        ev["llm"] = "configured" if d.cfg.llm() else NO_LLM
    return ev


@contextlib.asynccontextmanager
async def _consistent(d: Daemon, search: bool = False) -> AsyncIterator[None]:
    """With the sqlite backend a batch's rows are visible on the daemon's own
    connection before it commits, so a store query waits for the batch in flight
    (milliseconds per edit) instead of reading half of it. Stock files batches take
    seconds and their storages are already half-updated in memory mid-batch, so
    there a query is served between the batch's awaits, as before.

    During the first sync (which holds the batch lock throughout) a store read served
    once meaning search is whole waits instead for the slice being written, on any
    backend: a slice is a batch of thousands of rows, half of which must not be read."""
    if search and d.serving and not d.ready:
        # During the first sync the search index is written and committed before the
        # long batches, which no longer touch it: search need not wait for them.
        yield
        return
    if d.serving and not d.ready:
        lock = d.index.between_writes()
    elif d.cfg.store != "sqlite":
        yield
        return
    else:
        lock = d.batch_lock
    try:
        await asyncio.wait_for(lock.acquire(), QUERY_WAIT_S)
    except TimeoutError:
        what = "the initial sync" if not d.ready else "a batch"
        raise ProtocolError("busy", f"{what} is being applied; retry shortly") from None
    try:
        yield
    finally:
        lock.release()


async def _answer(d: Daemon, ev: dict[str, Any], emit: Callable[[str], None]) -> dict[str, Any]:
    llm = d.cfg.llm()
    if llm is None:
        raise ProtocolError("no_llm", NO_LLM)
    try:
        return await answer(llm, d.costs, ev["question"], ev, emit)
    except LLMError as exc:
        raise ProtocolError("llm_failed", str(exc)) from exc
    finally:
        await d.recount()  # the call's tokens are in the cost ledger now
