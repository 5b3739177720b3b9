"""The postgres backend: LightRAG's own PG storages on a real PostgreSQL + pgvector
(tests/pgserver.py), with the sink's guarantees, vault isolation and outages."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from daemontools import DaemonProc
from graphtools import delete, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storetools import assert_same_store, fresh_export, unique_workspace
from test_graph_invariant import bodies, ops, paths
from test_sink import check_incremental_equals_fresh

from wikid.server import api
from wikid.store.export import export_store
from wikid.store.postgres import PostgresConfigError, configure
from wikid.sync.index import Index


async def _build(vault: Path, wd: Path, url: str, steps: list[Any] = ()) -> dict[str, Any]:
    idx = await Index.open(
        vault, wd, workspace=unique_workspace("pg"), backend="postgres", postgres_url=url
    )
    try:
        await idx.sync()
        for step in steps:
            await idx.sink.apply(idx.vg.update(step(vault)))
        return await export_store(idx.store)
    finally:
        await idx.close()


@pytest.fixture(scope="module")
def pg_url(pg_server: Any) -> str:
    return str(pg_server.url)


def test_incremental_store_equals_a_fresh_build_on_postgres(pg_url: str) -> None:
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.lists(st.tuples(paths, bodies), min_size=1, max_size=5),
        st.lists(ops, min_size=1, max_size=5),
    )
    def check(initial: list[Any], steps: list[Any]) -> None:
        check_incremental_equals_fresh(initial, steps, backend="postgres", postgres_url=pg_url)

    check()


def test_two_vaults_in_one_database_do_not_mix(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LightRAG's POSTGRES_WORKSPACE would put both vaults in one workspace: wikid
    # clears it (with a warning) and keeps one workspace per vault.
    monkeypatch.setenv("POSTGRES_WORKSPACE", "shared")
    one, two = tmp_path / "one", tmp_path / "two"
    write(one, "Alpha.md", "Alpha links [[Beta]].\n")
    write(one, "Beta.md", "Beta text.\n")
    write(two, "Gamma.md", "Gamma links [[Delta]] and #tag.\n")

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        a = await _build(one, tmp_path / "wd", pg_url)
        b = await _build(two, tmp_path / "wd", pg_url)
        return a, b

    a, b = asyncio.run(run())
    assert "POSTGRES_WORKSPACE" not in os.environ
    names_a = {e["name"] for e in a["entities"]}
    names_b = {e["name"] for e in b["entities"]}
    assert names_a == {"Alpha", "Beta"} and names_b == {"Gamma", "Delta", "#tag"}
    assert not {c["id"] for c in a["chunks"]} & {c["id"] for c in b["chunks"]}
    assert_same_store(a, asyncio.run(fresh_export(one, backend="postgres", postgres_url=pg_url)))


def test_related_notes_are_the_same_on_postgres(pg_url: str, tmp_path: Path) -> None:
    """``related`` asks another backend once per chunk (no one-scan ``nearest``), and
    PostgreSQL's rows carry no cosine: the answers, scores included, are SQLite's."""
    vault = tmp_path / "v"
    write(
        vault,
        "Sea.md",
        "Storms, nets and a lighthouse keeper. #coast\n\n## Boats\nFishing boats.\n",
    )
    write(vault, "Harbour.md", "Fishing boats come home before the gale. #coast\n")
    write(vault, "Keeper.md", "A lamp kept lit on a rock through winter storms.\n")
    write(vault, "Ledger.md", "Quarterly invoices and payroll. See [[Sea]].\n")
    write(vault, "Bread.md", "A sourdough starter fed twice a day.\n")

    async def answers(**kw: Any) -> list[Any]:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace("rel"), **kw)
        try:
            await idx.sync()
            got = []
            for note in ("Sea", "Bread", "Ledger"):
                res = await api.related(idx, {"note": note})
                got.append(
                    [(r["path"], r["why"].get("meaning", {}).get("score")) for r in res["related"]]
                )
            return got
        finally:
            await idx.close()

    sqlite = asyncio.run(answers())
    assert sqlite[0][0][0] == "Harbour.md" and all(s for _, s in sqlite[0])
    pg = asyncio.run(answers(backend="postgres", postgres_url=pg_url))
    assert [[p for p, _ in a] for a in pg] == [[p for p, _ in a] for a in sqlite]
    for a, b in zip(pg, sqlite, strict=True):  # SQLite's query vectors pass through float16
        for (_, x), (_, y) in zip(a, b, strict=True):
            assert (x is None) == (y is None) and (x is None or abs(x - y) < 0.005), (a, b)


def test_a_password_in_the_url_is_refused() -> None:
    with pytest.raises(PostgresConfigError, match="WIKID_POSTGRES_PASSWORD"):
        configure("postgresql://me:secret@db:5432/notes")
    with pytest.raises(PostgresConfigError, match="needs WIKID_POSTGRES_URL"):
        configure(None)


def test_a_postgres_outage_is_survived_and_nothing_is_lost(pg_server: Any, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "Hub.md", "The hub links [[Spoke 0]].\n")
    env = {"WIKID_STORE": "postgres", "WIKID_POSTGRES_URL": pg_server.url}
    d = DaemonProc(vault, tmp_path, env=env).start()
    try:
        pg_server.stop_server()
        outage = time.monotonic()
        for i in range(1, 4):  # edits while the database is down
            write(vault, f"Spoke {i}.md", f"Spoke {i} links [[Hub]].\n")
            time.sleep(1)
        delete(vault, "Hub.md")
        status = d.wait_for(lambda s: s["store"]["behind"], timeout=60)
        assert status["store"]["last_error"]  # the outage is shown, with its cause
        assert d.call("links", note="Spoke 1.md")["links"]  # the daemon still answers
        time.sleep(max(0.0, 60 - (time.monotonic() - outage)))
        assert d.proc is not None and d.proc.poll() is None
        pg_server.start()
        d.wait_for(lambda s: not s["store"]["behind"] and s["queue"] == 0, timeout=180)
        ev = d.call("query", text="What does Spoke 2 link to?")  # answered from PostgreSQL
        assert "Spoke 2.md" in {i["path"] for k in ("entities", "chunks") for i in ev[k]}
        assert d.stop() == 0
    finally:
        d.stop()
    fresh = asyncio.run(fresh_export(vault, backend="postgres", postgres_url=pg_server.url))

    async def now() -> dict[str, Any]:
        idx = await Index.open(vault, d.workdir, backend="postgres", postgres_url=pg_server.url)
        try:
            assert (await idx.sync())["embedded"] == 0
            return await export_store(idx.store)
        finally:
            await idx.close()

    after = asyncio.run(now())
    assert {e["name"] for e in after["entities"]} >= {"Spoke 1", "Spoke 2", "Spoke 3"}
    assert "Hub" not in {e["name"] for e in after["entities"] if e["type"] == "note"}
    assert_same_store(after, fresh)
