"""The daemon: initial sync, then watcher batches into the sink, a Unix-socket API.

Why one asyncio loop: the graph is mutated only by the batch task, between awaits, so
every request sees a consistent graph without locks. Store queries wait for the batch
in flight (sqlite: its uncommitted rows are visible on the daemon's connection) or are
answered between its awaits (stock files). A batch that fails is not lost: the store
is marked behind, and the next attempt (with backoff) runs a full reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from wikid.config import VaultConfig, load
from wikid.core.vault import VaultOptions, changed, snapshot, vault_options, vault_present
from wikid.server import disk, protocol, reads, stalls
from wikid.server.extraction import extraction_loop
from wikid.server.log import Progress
from wikid.server.notify import more_descriptors, notify, watchdog_interval
from wikid.server.protocol import ProtocolError
from wikid.server.status import embedding_hint, status_reply
from wikid.server.watcher import Watcher
from wikid.store.backends import warm
from wikid.store.embed import import_runtime
from wikid.store.heap import freeze_long_lived
from wikid.store.lock import StoreBusy
from wikid.sync.index import Index, VaultMissing
from wikid.sync.slices import Live, Stopped

log = structlog.get_logger("wikid")
OPS = ("status", *reads.OPS, "reindex", "stop")


class Daemon:
    def __init__(self, cfg: VaultConfig, config_path: Path | None = None) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.started = time.time()
        self.stopping = asyncio.Event()
        self.batches = 0
        self.last_sync: float | None = None
        self.store_behind = False
        self.last_error: str | None = None
        self.reindexing = False
        self.ready = False  # the initial sync is done
        self.busy = False  # a batch is being applied
        self.batch_lock = asyncio.Lock()
        self._extract_wake = asyncio.Event()  # set after each batch: new chunks may need the LLM
        self._index: Index | None = None  # opened after the socket: status answers at once
        self._watcher: Watcher | None = None
        self.phase = "starting"
        self.in_flight = 0  # paths of the batch being applied
        self.vault_missing = False
        self.embedding_hint: str | None = None  # what to set for a vault not in English
        self.serving = False  # links and search answer (the store may still embed)
        self.meaning_ready = False  # every chunk and entity embedded: query by meaning
        self.counts = {"entities": 0, "relations": 0, "chunks": 0}  # as of the last write
        self.cost_totals: dict[str, Any] | None = None  # likewise (None: not read yet)
        self.progress = Progress("embedding", live=False)  # log events, not a bar
        self._notified = 0.0
        self._started = time.monotonic()  # reset by ``run``: its steps are logged since
        self._snapshot: dict[str, tuple[int, int]] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self._live_failed = False  # an edit let into the first sync failed: no more

    def _options(self) -> VaultOptions:
        return vault_options(self.cfg)

    @property
    def index(self) -> Index:
        if self._index is None:
            raise ProtocolError("busy", f"wikid is starting ({self.phase}); retry shortly")
        return self._index

    @index.setter
    def index(self, value: Index) -> None:
        value.stop_when(self.stopping.is_set)  # a stop cuts any batch (``Sink.stopping``)
        self._index = value

    @property
    def watcher(self) -> Watcher:
        assert self._watcher is not None, "the watcher starts before the initial sync"
        return self._watcher

    def _embedded(
        self, done: int, total: int, kinds: dict[str, tuple[int, int]] | None = None
    ) -> None:
        """The store embedded more texts: progress for status, the log and systemd,
        which must not time out a long first sync (EXTEND_TIMEOUT_USEC)."""
        self.progress.update(done, total, kinds)
        if not self.ready and time.monotonic() - self._notified >= Progress.EVERY_S:
            self._notified = time.monotonic()
            notify(f"STATUS=initial sync: {self.progress.line()}", "EXTEND_TIMEOUT_USEC=60000000")

    def _serving(self) -> None:
        """The graph is loaded and the search index written: links, backlinks, broken and
        search answer now, while the store may still be embedding. Tell systemd."""
        self.serving = True
        log.info("serving", s=round(time.monotonic() - self._started, 2))
        notify("READY=1", "STATUS=initial sync: links and search are ready")

    def _meaning_ready(self) -> None:
        """Every chunk and entity of the first sync is written with its vector: query
        and related notes search by meaning from now on, while the links' texts embed."""
        self.meaning_ready = True
        log.info("meaning search ready", progress=self.progress.line())
        notify("STATUS=initial sync: meaning search is ready; embedding the links")

    def _pause(self, why: str) -> None:
        """The vault is gone or empty: remove nothing, say so once, wait for it."""
        if not self.vault_missing:
            log.warning("vault missing; sync paused", error=why)
        self.vault_missing = True
        self._phase("vault missing: sync paused until it returns")

    def _phase(self, phase: str) -> None:
        self.phase = phase
        notify(f"STATUS={phase}")

    # -- lifecycle --------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig, handler in (
            (signal.SIGTERM, self.stopping.set),
            (signal.SIGINT, self.stopping.set),
            (signal.SIGHUP, lambda: self._spawn(self._reload())),
        ):
            loop.add_signal_handler(sig, handler)
        assert self.cfg.workdir is not None and self.cfg.socket is not None
        self._started = time.monotonic()  # the start's steps are logged since then
        # What would hold the GIL in a worker thread once status must answer: the model
        # runtime's and the storages' imports, tiktoken's table (~0.4 s, before listening).
        import_runtime()
        warm(self.cfg.store, llm=self.cfg.llm() is not None)
        server = await protocol.listen(self.cfg.socket, self._dispatch, self.stopping.set)
        try:
            return await self._serve(loop)
        except (StoreBusy, VaultMissing) as exc:
            protocol.refuse(f"wikid: {exc}")
        finally:
            await server.close()
            with contextlib.suppress(FileNotFoundError):
                self.cfg.socket.unlink()

    async def _serve(self, loop: asyncio.AbstractEventLoop) -> int:
        assert self.cfg.workdir is not None
        stalls.watch()
        self._phase("loading the vault")
        self.index = await Index.open(
            self.cfg.path,
            self.cfg.workdir,
            workspace=self.cfg.workspace,
            adopt_from=self.cfg.legacy_store(),
            options=self._options(),
            backend=self.cfg.store,
            embedding=self.cfg.embedding,
            extraction=self.cfg.extraction(),
            postgres_url=self.cfg.postgres_url,
            parse_in_processes=True,  # a cold start's every note (``parse_pool``)
        )
        freeze_long_lived()  # the graph: out of the collector's way
        log.info(  # once the store is this daemon's (its lock taken)
            "listening",
            vault=str(self.cfg.path),
            socket=str(self.cfg.socket),
            store=str(self.cfg.workdir / self.cfg.workspace),
            backend=self.cfg.store,
            s=round(time.monotonic() - self._started, 2),
        )
        self.costs = self.index.cost_ledger()
        self.index.on_embedded(self._embedded)
        self.index.on_search_ready(self._serving)
        self.index.on_meaning_ready(self._meaning_ready)
        if self.stopping.is_set():  # stopped while loading
            await self.index.close()
            return 0
        self._watcher = Watcher(
            self.cfg.path,
            self.index.graph.filter,
            debounce=self.cfg.debounce_ms / 1000,
            max_queue=self.cfg.max_queue,
        )
        # Before the initial sync, so no change during it is missed; in a thread, since
        # watchdog adds a watch per folder as it starts (a 13k restart's status: 76-88 ms).
        await asyncio.to_thread(self.watcher.start, loop)
        self._phase("initial sync")
        async with self.batch_lock:  # queries wait for it (see reads._consistent)
            self.busy = True
            self.index.let_in(Live(self._live_due, self._live_batch))
            try:
                report = await self.index.sync()
            except Stopped:  # cut by the stop: the next start goes on from there
                report = {}
            finally:
                self.busy = False
                self.index.let_in(None)
        if not report:
            return await self._shut_down()
        self._snapshot = await self.index.stat()  # a restart's, or a walk now
        self.last_sync = time.time()
        freeze_long_lived()
        log.info("initial sync", vault=str(self.cfg.path), **report)
        self.embedding_hint = embedding_hint(self.index.graph, self.cfg.embedding)
        if self.embedding_hint:
            log.warning("embedding model", hint=self.embedding_hint)
        await self.recount()
        self.ready = self.serving = self.meaning_ready = True
        self.phase = f"watching {report['notes']} notes"
        notify("READY=1", f"STATUS={self.phase}")
        self._tasks = [self._spawn(self._batch_loop()), self._spawn(self._reconcile_loop())]
        if self.index.extracting:
            self._extract_wake.set()
            loop_args = (lambda: self.index, self._extract_wake, self.batch_lock)
            self._tasks.append(
                self._spawn(extraction_loop(*loop_args, self.recount, self._extraction_failed))
            )
        interval = watchdog_interval()
        if interval:
            self._tasks.append(self._spawn(self._watchdog(interval)))
        await self.stopping.wait()
        return await self._shut_down()

    async def _shut_down(self) -> int:
        notify("STOPPING=1")
        log.info("stopping")
        async with self.batch_lock:  # let a batch in flight finish: stop cleanly, never mid-write
            pass
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # no CancelledError noise
        self.watcher.stop()
        await self.index.close()
        return 0

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(self._report_crash)
        return task

    def _report_crash(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or isinstance(task.exception(), Stopped | None):
            return  # done, or cut by the stop (a rebuild's reconcile): no failure
        log.error("task failed", error=repr(task.exception()))

    async def _watchdog(self, interval: float) -> None:
        while True:
            notify("WATCHDOG=1")
            await asyncio.sleep(interval)

    async def _reload(self) -> None:
        """SIGHUP: re-read the config; a changed ignore list means a rebuild."""
        try:
            new = load(self.config_path, self.cfg.path)
        except Exception as exc:
            log.error("config reload failed", error=str(exc))
            return
        rebuild = vault_options(new) != vault_options(self.cfg)
        self.cfg = new
        self.watcher.debounce = new.debounce_ms / 1000
        self.watcher.max_queue = new.max_queue
        log.info("config reloaded", rebuild=rebuild)
        if rebuild:
            await self._reindex()

    # -- batches ------------------------------------------------------------------------

    async def _batch_loop(self) -> None:
        backoff = 1.0
        while True:
            paths, rescan = await self.watcher.next_batch()
            while True:
                try:
                    async with self.batch_lock:
                        if self.stopping.is_set():
                            return
                        self.busy, self.in_flight = True, len(paths)
                        try:
                            await self._apply(paths, rescan)
                        finally:
                            self.busy, self.in_flight = False, 0
                    backoff = 1.0
                    self._extract_wake.set()
                    break
                except Stopped:  # cut by the stop: the next start goes on from there
                    return
                except VaultMissing as exc:  # remove nothing; wait for the folder to return
                    self._pause(str(exc))
                    await asyncio.sleep(2.0)
                    rescan = True
                    continue
                except Exception as exc:  # keep the paths; retry, later with a full reconcile
                    self._behind(exc, "batch failed; will retry", retry_in=backoff)
                    await self._wait_to_retry(backoff, disk.is_full(exc))
                    backoff = min(backoff * 2, 60.0)

    async def _wait_to_retry(self, backoff: float, full: bool) -> None:
        """Sleep ``backoff`` seconds before a failed batch runs again; after a full disk,
        retry as soon as space is freed (``server.disk``)."""
        if not full:
            await asyncio.sleep(backoff)
            return
        assert self.cfg.workdir is not None
        await disk.wait_for_room(self.cfg.workdir, backoff, self.stopping.is_set)

    def _live_due(self) -> bool:
        return not self._live_failed and self.watcher.due()

    async def _live_batch(self) -> None:
        """Edits saved during the first sync's long embedding, applied as a batch between
        its slices. One that fails goes back to the queue, and no more are let in."""
        paths = self.watcher.take()
        try:
            await self._apply(paths, rescan=False)
        except Stopped:  # cut by the stop, as the first sync is
            raise
        except Exception as exc:
            self._live_failed = True
            self.watcher.add(sorted(paths))
            log.error("edit during the first sync failed; it waits for the sync", error=repr(exc))

    def _behind(self, exc: Exception, event: str, **fields: Any) -> None:
        """A write failed: the store is behind until a full reconcile succeeds; say so
        in the log, in ``status`` and to systemd."""
        self.store_behind = True
        self.last_error = f"{type(exc).__name__}: {exc}"
        if disk.is_full(exc):  # what to free, and where: the batch retries by itself
            assert self.cfg.workdir is not None
            self.last_error = f"disk full at {self.cfg.workdir} ({self.last_error})"
        log.error(event, error=self.last_error, **fields)
        notify(f"STATUS=store behind: {self.last_error}")

    async def _apply(self, paths: set[str], rescan: bool) -> None:
        started = time.perf_counter()
        assert self.cfg.workdir is not None
        await disk.check(self.cfg.workdir)  # a batch it could not commit: not begun
        if self.index.graph.notes and not await asyncio.to_thread(vault_present, self.cfg.path):
            raise VaultMissing(f"the vault {self.cfg.path} is missing or empty")
        if self.vault_missing:
            log.info("vault is back; sync resumes")
            self.vault_missing, rescan = False, True
            self._phase(f"watching {len(self.index.graph.notes)} notes")
        if rescan:
            fresh = await asyncio.to_thread(snapshot, self.cfg.path, self.index.graph.filter)
            paths = (
                paths | changed(self._snapshot, fresh) | set(self.index.graph.notes) | set(fresh)
            )
        delta, report = await self.index.update(
            paths, reconcile=self.store_behind, confirm_empty=True
        )
        if any(report.writes.values()):
            await self.recount()
        doubted = self.index.graph.take_recheck()
        if doubted:
            log.info("note read empty; reading it again after the quiet window", paths=len(doubted))
            window = max(self.cfg.debounce_ms / 1000, 0.05)
            asyncio.get_running_loop().call_later(window, self.watcher.add, sorted(doubted))
        self.store_behind, self.last_error = False, None
        self.batches += 1
        self.last_sync = time.time()
        if self.phase.startswith("watching "):  # the count it shows, kept current
            self.phase = f"watching {len(self.index.graph.notes)} notes"
        if delta or any(report.writes.values()):
            log.info(
                "batch",
                paths=len(paths),
                **delta.summary(),
                writes=report.writes,
                embedded=report.embedded,
                seconds=round(time.perf_counter() - started, 3),
            )
            notify(
                f"STATUS=watching {len(self.index.graph.notes)} notes; last batch {len(paths)} paths"
            )

    def _extraction_failed(self, exc: Exception) -> None:
        self._behind(exc, "extraction batch failed")
        self.watcher.request_rescan()  # the next batch is that full reconcile

    async def _reconcile_loop(self) -> None:
        """Stat-based scan every interval: catches anything the OS did not report."""
        while True:
            await asyncio.sleep(self.cfg.reconcile_interval_s)
            if not await asyncio.to_thread(vault_present, self.cfg.path):
                if self.index.graph.notes:
                    self._pause(f"the vault {self.cfg.path} is missing or empty")
                continue
            if self.vault_missing:  # back: one full rescan, which also clears the flag
                self.watcher.request_rescan()
                continue
            errors: dict[str, str] = {}
            vg = self.index.graph
            fresh = await asyncio.to_thread(snapshot, self.cfg.path, vg.filter, errors)
            vg.walk_errors = errors  # what the scan could not take in (bad names, links out)
            diff = changed(self._snapshot, fresh)
            self._snapshot = fresh
            if diff:
                log.info("reconciliation found changes", paths=len(diff))
                self.watcher.add(sorted(diff))

    async def _reindex(self) -> None:
        if self.reindexing:
            return
        self.reindexing = True
        try:
            self.watcher.request_rescan()
            fresh = await self.index.reload(self._options())
            # Through the batch lock, as every write: a rebuild must never race a batch.
            async with self.batch_lock:
                self.busy = True
                try:
                    self.index = fresh
                    self.watcher.filter = fresh.graph.filter
                    await fresh.reconcile()
                    await self.recount()
                finally:
                    self.busy = False
            self._extract_wake.set()
            freeze_long_lived()
            log.info("reindex done", notes=len(self.index.graph.notes))
        finally:
            self.reindexing = False

    # -- socket ----------------------------------------------------------------------------

    async def _dispatch(
        self, op: Any, req: dict[str, Any], emit: Callable[[str], None] = lambda _: None
    ) -> tuple[Any, bool]:
        if op == "status":
            return self.status(), False
        if op == "stop":
            return {"stopping": True}, True
        if op == "reindex":
            _ = self.index  # "busy" until the vault is loaded
            self._spawn(self._reindex())
            return {"started": True}, False
        if op in reads.OPS:
            return await reads.read(self, op, req, emit), False
        raise ProtocolError("unknown_op", f"unknown op {op!r}; known: {', '.join(OPS)}")

    def embedding(self) -> bool:
        """A batch is embedding texts right now (status shows its progress)."""
        return self.busy and self.progress.total > 0 and self.progress.done < self.progress.total

    async def recount(self) -> None:
        """The store's counts for ``status``, read in a worker thread after a batch wrote:
        a status call never queries the store (counting 100k rows takes tens of ms, and
        waits for any statement a batch thread is running on the same connection); the
        LLM cost totals likewise."""
        self.counts = await asyncio.to_thread(self.index.counts)
        self.cost_totals = await asyncio.to_thread(self.costs.totals, self.cfg.llm_prices)

    @property
    def loaded(self) -> Index | None:
        """The index once the vault is loaded, else None (for status)."""
        return self._index

    @property
    def watching(self) -> Watcher | None:
        """The watcher once started, else None (for status)."""
        return self._watcher

    def status(self) -> dict[str, Any]:
        return status_reply(self)


def run(cfg: VaultConfig, config_path: Path | None = None) -> int:
    more_descriptors()
    return asyncio.run(Daemon(cfg, config_path).run())
