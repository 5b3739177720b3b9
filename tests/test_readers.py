"""Other processes read the SQLite store while the daemon writes: ``wikid export`` gets
one consistent snapshot, and a snapshot sees no commit made during it. (LightRAG's own
server on the store: tests/test_lightrag_server.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from daemontools import DaemonProc, copy_example
from graphtools import write


def _export(workdir: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "wikid", "export", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def _assert_consistent(data: dict[str, Any]) -> None:
    """Every reference resolves: a torn read (half a batch) would leave one dangling."""
    chunks = {c["id"] for c in data["chunks"]}
    names = {e["name"] for e in data["entities"]}
    for e in data["entities"]:
        assert set(e["source_ids"]) <= chunks, e["name"]
    for r in data["relations"]:
        assert {r["src"], r["tgt"]} <= names and set(r["source_ids"]) <= chunks, r
    for d in data["documents"]:
        assert set(d["chunks"]) <= chunks, d["file_path"]
    assert sorted(data["vectors"]["chunks"]) == sorted(chunks)
    assert len(data["vectors"]["entities"]) == len(names)


def test_export_reads_a_consistent_snapshot_while_the_daemon_writes(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "vault")
    d = DaemonProc(vault, tmp_path).start()
    try:
        seen = set()
        for i in range(6):
            for j in range(10):
                write(
                    vault,
                    f"burst/n{i}_{j}.md",
                    f"Note {i}.{j} cites [[Welcome]] and [[n{i}_{j + 1}]].\n",
                )
            time.sleep(0.2)
            data = _export(d.workdir)
            _assert_consistent(data)
            seen.add(len(data["documents"]))
        d.settle()
        final = _export(d.workdir)
        _assert_consistent(final)
        assert len(final["documents"]) == 6 + 60
        assert len(seen) > 1  # the exports really ran while batches were landing
    finally:
        d.stop()


def test_a_snapshot_does_not_see_commits_made_during_it(tmp_path: Path) -> None:
    """What makes an export consistent: inside ``Store.snapshot()`` every storage reads
    the state as of its start, whatever another connection commits meanwhile."""
    import asyncio
    import sqlite3

    from wikid.store.rag import Store
    from wikid.store.sqlite_backend import DB_FILE
    from wikid.sync.index import Index

    vault = copy_example(tmp_path / "vault")
    wd = tmp_path / "wd"

    async def build() -> str:
        idx = await Index.open(vault, wd, workspace="snap")
        await idx.sync()
        await idx.close()
        return "snap"

    async def read() -> tuple[int, int, int]:
        store = Store(wd, await build(), None, read_only=True)
        await store.open()
        graph = store.rag.chunk_entity_relation_graph
        try:
            with store.snapshot():
                before = len(await graph.get_all_nodes())
                other = sqlite3.connect(wd / "snap" / DB_FILE)  # as another process would
                with other:
                    other.execute(
                        "INSERT INTO lr_nodes VALUES ('chunk_entity_relation', 'Intruder', '{}')"
                    )
                other.close()
                during = len(await graph.get_all_nodes())
            after = len(await graph.get_all_nodes())
            return before, during, after
        finally:
            await store.close()

    before, during, after = asyncio.run(read())
    assert before == during and after == before + 1
