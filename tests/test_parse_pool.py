"""A cold start's read in worker processes (``sync.parse_pool``) gives the graph a read
in process gives, on a real vault; a worker that dies costs time, never a note; a
restart that finds many notes changed parses them there too."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_vault
from graphtools import delete, write
from storetools import assert_same_store, fresh_export, unique_workspace
from structlog.testing import capture_logs
from test_restart import age, graph_state

from wikid.core.graph import VaultGraph
from wikid.core.note import Note
from wikid.core.vault import VaultOptions
from wikid.store.export import export_store
from wikid.sync import parse_pool
from wikid.sync.index import Index
from wikid.testing import assert_same, snapshot


def _same(a: VaultGraph, b: VaultGraph) -> None:
    assert_same(snapshot(a), snapshot(b))
    assert a.notes == b.notes and a.attachments == b.attachments
    assert a.problems == b.problems


def test_a_vault_parsed_in_processes_is_the_vault_parsed_here() -> None:
    vault = shared_vault("vaultofknowledge")
    options = VaultOptions()
    here = VaultGraph.load(vault, options)
    assert len(here.notes) >= parse_pool.MIN_NOTES  # else the pool is not used
    calls: list[int] = []

    def counted(rels: Sequence[str]) -> dict[str, Note | None]:
        got = parse_pool.parse(vault, options, rels)
        calls.append(len(got))
        return got

    pooled = VaultGraph.load(vault, options, parse=counted)
    assert calls == [len(here.notes)]  # every note parsed by the workers
    _same(pooled, here)
    assert parse_pool.parse(vault, options, sorted(here.notes)[:10]) == {}  # too few: here


def test_a_worker_killed_mid_read_costs_no_note() -> None:
    """SIGKILL to a worker as soon as it starts: a warning says how many notes it left,
    and the graph reads those itself: the same graph, and no wait on the dead worker."""
    vault = shared_vault("vaultofknowledge")
    options = VaultOptions()
    here = VaultGraph.load(vault, options)
    killed: list[int] = []

    def kill_a_worker() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for child in multiprocessing.active_children():
                if child.pid:
                    os.kill(child.pid, signal.SIGKILL)
                    killed.append(child.pid)
                    return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    with capture_logs() as logs:
        pooled = VaultGraph.load(vault, options, parse=parse_pool.parser(vault, options))
    killer.join()
    assert killed
    failed = [e for e in logs if e["event"].startswith("parsing in processes left notes")]
    assert len(failed) == 1 and failed[0]["left"] > 0 and -9 in failed[0]["exit_codes"], logs
    _same(pooled, here)


async def _open_sync(vault: Path, wd: Path, ws: str) -> tuple[dict[str, Any], Any, Any]:
    idx = await Index.open(vault, wd, workspace=ws, parse_in_processes=True)
    try:
        report = await idx.sync()
        return report, await export_store(idx.store), graph_state(idx.graph)
    finally:
        await idx.close()


def test_a_restart_parses_its_many_changed_notes_in_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart that finds many notes changed while it was away (a checkout of another
    branch) has the workers parse them, and ends with the store and the graph a fresh
    build gives. ``MIN_NOTES`` is lowered so that a small vault counts as many."""
    vault, wd, ws = tmp_path / "vault", tmp_path / "wd", unique_workspace("pool")
    for i in range(24):
        write(vault, f"n{i:02d}.md", f"# Note {i}\nSee [[n{(i + 1) % 24:02d}]].\n")
    age(vault)
    monkeypatch.setattr(parse_pool, "MIN_NOTES", 10)
    asyncio.run(_open_sync(vault, wd, ws))
    since = time.time() - 1
    for i in range(0, 24, 2):  # half the notes rewritten, as a checkout rewrites them
        text = f"# Note {i}, the branch's\nNow [[n{(i + 5) % 24:02d}]] and [[Branch]].\n"
        write(vault, f"n{i:02d}.md", text)
    write(vault, "Branch.md", "# Branch\nOnly on this branch.\n")
    delete(vault, "n01.md")
    age(vault, since)
    real, calls = parse_pool.parse, []

    def counted(root: Path, options: VaultOptions, rels: Sequence[str]) -> dict[str, Note | None]:
        got = real(root, options, rels)
        calls.append((len(rels), len(got)))
        return got

    monkeypatch.setattr(parse_pool, "parse", counted)
    report, store, state = asyncio.run(_open_sync(vault, wd, ws))
    assert report["start"] == "parse cache" and report["read"] == 14
    assert calls == [(14, 14)]  # every changed note (n01 gone: None) came from the workers
    assert_same_store(store, asyncio.run(fresh_export(vault)))
    assert state == graph_state(VaultGraph.load(vault))
