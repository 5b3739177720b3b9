"""LLM extraction of implicit relations: new or changed chunks only, each once; items
that go exactly when their chunk goes; failures that cost nothing and are retried.

The LLM is the stand-in server (tests/llmserver.py): its extraction rows are a
deterministic function of the chunk text, so a fresh build with the same cache
must equal the incremental store, field by field.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from daemontools import DaemonProc
from graphtools import delete, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llmserver import LLMServer, is_extraction
from storetools import assert_same_store, ledger_path, seed_ledger, unique_workspace
from test_graph_invariant import _apply, bodies, ops, paths

from wikid.config import ExtractSettings, LLMConfig
from wikid.server.api import query
from wikid.store.export import export_store
from wikid.sync.index import Index
from wikid.sync.salience import score

NOTES = {
    "Acme.md": (
        "# Acme\n\nAcme Labs was founded by Dana Reyes in 2019. It later merged with Zeta Corp "
        "after a long negotiation about pricing and staff.\n\n"
        "## Products\n\nThe Rocket Sled replaced the Old Cart after Jane Smith complained about "
        "the wheels, the brakes and the noise. See [[Zeta]].\n\n"
        "## Links\n\n- [[Zeta]]\n- [[Widgets]]\n"
    ),
    "Zeta.md": (
        "Zeta Corp makes Blue Widgets together with Acme Labs. Dana Reyes consults for Zeta Corp "
        "on manufacturing questions every spring.\n"
    ),
    "Widgets.md": "- [[Acme]]\n- [[Zeta]]\n",
}


def _make(vault: Path) -> None:
    for rel, text in NOTES.items():
        write(vault, rel, text)


async def _open(vault: Path, wd: Path, llm: LLMServer | None, **kw: Any) -> Index:
    cfg = LLMConfig(llm.url, "stand-in") if llm else None
    idx = await Index.open(
        vault, wd, workspace=unique_workspace(), extraction=ExtractSettings(cfg, **kw)
    )
    await idx.sync()
    await idx.extract()
    return idx


async def _step(idx: Index, paths: set[str]) -> dict[str, Any]:
    await idx.sink.apply(idx.vg.update(paths))
    return await idx.extract()


async def _fresh(vault: Path, seed: Path) -> dict[str, Any]:
    """A store built from scratch with the same embedding and extraction caches and no
    LLM at all: what the incremental store must equal."""
    with tempfile.TemporaryDirectory() as wd:
        workspace = unique_workspace("fresh")
        target = Path(wd) / workspace / "wikid-store.sqlite"
        seed_ledger(target, seed)
        rows = sqlite3.connect(seed).execute("SELECT * FROM extractions").fetchall()
        con = sqlite3.connect(target)
        con.execute(
            "CREATE TABLE extractions (hash TEXT PRIMARY KEY, model TEXT NOT NULL, "
            "version TEXT NOT NULL, result TEXT NOT NULL, ts REAL NOT NULL)"
        )
        con.executemany("INSERT INTO extractions VALUES (?, ?, ?, ?, ?)", rows)
        con.commit()
        con.close()
        idx = await Index.open(
            vault, Path(wd), workspace=workspace, extraction=ExtractSettings(None)
        )
        try:
            await idx.sync()
            return await export_store(idx.store)
        finally:
            await idx.close()


async def _same_as_fresh(idx: Index, vault: Path, wd: Path) -> dict[str, Any]:
    """The store equals a fresh build from the same caches; returns its export."""
    export = await export_store(idx.store)
    assert_same_store(export, await _fresh(vault, ledger_path(wd)))
    return export


def _llm_items(export: dict[str, Any]) -> tuple[dict[str, Any], dict[tuple[str, str], Any]]:
    ents = {e["name"]: e for e in export["entities"] if e.get("origin") == "llm"}
    rels = {(r["src"], r["tgt"]): r for r in export["relations"] if r.get("origin") == "llm"}
    return ents, rels


def test_salience_skips_link_lists_and_restatements() -> None:
    assert score("Widgets\n\n- [[Acme]]\n- [[Zeta]]\n") == 0.0
    prose = "Acme › History\n\nAcme Labs was founded by Dana Reyes in 2019 in Lisbon."
    assert score(prose) >= 0.5
    v = np.ones(4, np.float32)
    assert score(prose, v, [v]) < score(prose, v, [np.array([1, -1, 1, -1], np.float32)])
    assert score("Notes\n\nthis is about it and so on") < 0.3


def test_extracted_relations_reach_the_store_the_evidence_and_the_cost_ledger(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "v"
    _make(vault)

    async def run() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        with LLMServer() as llm:
            idx = await _open(vault, tmp_path / "wd", llm)
            try:
                export = await export_store(idx.store)
                ev = await query(idx, "Who founded Acme Labs?", "mix", 3000)
                status = idx.extraction_status()
                assert idx.extractor is not None
                costs = idx.extractor.costs.totals()
                sent = [r for r in llm.requests if is_extraction(r)]
                assert len(sent) == status["calls"] == status["extracted_chunks"]
                # Every token the server counted is in the ledger, under "extract".
                (row,) = [r for r in costs["by_phase"] if r["phase"] == "extract"]
                assert (row["input_tokens"], row["output_tokens"]) == (
                    llm.prompt_tokens,
                    llm.completion_tokens,
                )
                fresh = await _fresh(vault, ledger_path(tmp_path / "wd"))
                return export, ev, status, fresh
            finally:
                await idx.close()

    export, ev, status, fresh = asyncio.run(run())
    ents, rels = _llm_items(export)
    assert {"Dana Reyes", "Jane Smith", "Blue Widgets", "Rocket Sled"} <= set(ents), set(ents)
    # A name the graph already has is the graph's entity, never a second one.
    assert not {"Acme", "Zeta", "Widgets"} & {n.casefold() for n in ents}
    assert ("Acme Labs", "Dana Reyes") in rels
    assert all(r["origin"] == "llm" for r in rels.values())
    # The link-only note never reached the LLM; the filter counted it.
    assert status["skipped_chunks"] >= 2 and status["failed_chunks"] == 0
    # The query evidence carries the extracted relation.
    texts = " ".join(i["text"] for k in ("entities", "relations", "chunks") for i in ev[k])
    assert "Dana Reyes" in texts
    assert_same_store(export, fresh)


def test_an_edit_resends_only_its_chunk_and_a_delete_removes_exactly_its_items(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "v"
    _make(vault)

    async def run() -> None:
        with LLMServer() as llm:
            idx = await _open(vault, tmp_path / "wd", llm)
            try:
                before = len(llm.requests)
                text = NOTES["Acme.md"].replace("Jane Smith complained", "Omar Haddad complained")
                write(vault, "Acme.md", text)
                await _step(idx, {"Acme.md"})
                new = llm.requests[before:]
                assert len(new) == 1, [r["body"]["messages"][-1]["content"] for r in new]
                prompt = new[0]["body"]["messages"][-1]["content"]
                assert "Omar Haddad" in prompt and "Dana Reyes" not in prompt
                ents, rels = _llm_items(await export_store(idx.store))
                assert "Omar Haddad" in ents and "Jane Smith" not in ents
                await _same_as_fresh(idx, vault, tmp_path / "wd")
                # Undo: the old text is cached, so nothing is sent.
                write(vault, "Acme.md", NOTES["Acme.md"])
                await _step(idx, {"Acme.md"})
                assert len(llm.requests) == before + 1

                zeta = _llm_items(await export_store(idx.store))[0]
                zeta_chunks = set(idx.store.ledger.chunks_of("Zeta.md"))
                assert zeta_chunks & set(zeta["Dana Reyes"]["source_ids"])
                delete(vault, "Zeta.md")
                await _step(idx, {"Zeta.md"})
                assert len(llm.requests) == before + 1
                ents, rels = _llm_items(await export_store(idx.store))
                assert "Blue Widgets" not in ents  # only Zeta.md named it
                assert "Dana Reyes" in ents  # Acme.md still does
                assert not zeta_chunks & set(ents["Dana Reyes"]["source_ids"])
                for item in [*ents.values(), *rels.values()]:
                    assert not zeta_chunks & set(item["source_ids"]), item
                await _same_as_fresh(idx, vault, tmp_path / "wd")
            finally:
                await idx.close()

    asyncio.run(run())


def test_a_failing_llm_leaves_the_structure_alone_and_is_retried(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    _make(vault)
    with LLMServer() as llm:
        llm.fail = True
        env = {
            "WIKID_EXTRACT": "1",
            "WIKID_LLM_BASE_URL": llm.url,
            "WIKID_LLM_MODEL": "stand-in",
            "WIKID_EXTRACT_RETRY_S": "2",
        }
        d = DaemonProc(vault, tmp_path, env=env).start()
        try:
            status = d.wait_for(lambda s: s["extraction"]["failed_chunks"] > 0)
            assert "HTTP 500" in status["extraction"]["last_error"]
            assert re.search(r"[1-9]\d* failed; last error: .*HTTP 500", d.cli("status"))
            assert status["entities"] >= 3 and not status["store"]["behind"]
            assert d.call("links", note="Acme.md")["links"]
            assert status["cost"]["calls"] == 0  # a failed call costs nothing
            llm.fail = False
            status = d.wait_for(  # cost totals are recounted after each write: wait
                lambda s: (
                    s["extraction"]["failed_chunks"] == 0
                    and s["extraction"]["extracted_chunks"] > 0
                    and s["cost"]["calls"] == s["extraction"]["calls"]
                )
            )
            ev = d.call("query", text="Who founded Acme Labs?")
            texts = " ".join(i["text"] for k in ("entities", "relations") for i in ev[k])
            assert "Dana Reyes" in texts
            assert status["cost"]["calls"] == status["extraction"]["calls"] > 0
            # status counts what extraction wrote too (they are read after every write)
            d.settle()
            exported = subprocess.run(
                [sys.executable, "-m", "wikid", "export", "--workdir", str(d.workdir)],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            )
            entities = json.loads(exported.stdout)["entities"]
            assert any(e.get("origin") == "llm" for e in entities)
            assert d.call("status")["entities"] == len(entities)
        finally:
            d.stop()


def test_extraction_off_removes_the_extracted_items_and_on_brings_them_back_free(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "v"
    _make(vault)
    wd = tmp_path / "wd"
    shutil.rmtree(wd, ignore_errors=True)

    async def run() -> None:
        with LLMServer() as llm:
            workspace = unique_workspace()
            settings = ExtractSettings(LLMConfig(llm.url, "stand-in"))
            idx = await Index.open(vault, wd, workspace=workspace, extraction=settings)
            await idx.sync()
            await idx.extract()
            on = await export_store(idx.store)
            await idx.close()
            sent = len(llm.requests)
            idx = await Index.open(vault, wd, workspace=workspace)
            await idx.sync()
            off = await export_store(idx.store)
            await idx.close()
            assert _llm_items(on)[0] and not _llm_items(off)[0] and not _llm_items(off)[1]
            idx = await Index.open(vault, wd, workspace=workspace, extraction=settings)
            await idx.sync()
            assert await idx.extract() == {
                "sent": 0,
                "calls": 0,
                "skipped": idx.skipped,
                "failed": 0,
                "writes": {},
                "more": False,
            }
            assert_same_store(await export_store(idx.store), on)
            await idx.close()
            assert len(llm.requests) == sent

    asyncio.run(run())


SENTENCES = [
    "Delta Note was written by Ada Byron.",
    "Ada Byron met Charles Babbage in London Town.",
    "Charles Babbage built the Difference Engine with Zeta Corp.",
    "The Difference Engine inspired Delta Note.",
    "Zeta Corp hired Ada Byron one spring.",
]
prose_ops = st.one_of(ops, st.tuples(st.just("append"), paths, st.sampled_from(SENTENCES)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(paths, bodies, st.sampled_from(SENTENCES)), min_size=1, max_size=5),
    st.lists(prose_ops, min_size=1, max_size=6),
)
def test_incremental_extraction_equals_a_fresh_build(initial: list[Any], steps: list[Any]) -> None:
    """Random create/edit/rename/move/delete sequences with extraction on (threshold 0:
    every chunk is sent). Names in the prose meet note names ("Delta Note") that come
    and go, so implicit entities turn into graph entities and back."""
    with tempfile.TemporaryDirectory() as tmp:
        vault, wd = Path(tmp) / "vault", Path(tmp) / "wd"
        for path, body, sentence in initial:
            write(vault, path, f"{body}\n{sentence}\n")

        async def run() -> tuple[dict[str, Any], dict[str, Any]]:
            with LLMServer() as llm:
                idx = await _open(vault, wd, llm, threshold=0.0)
                try:
                    for op in steps:
                        await _step(idx, set(_apply(vault, op)))
                    assert not idx.sink.implicit.missing
                    export = await export_store(idx.store)
                finally:
                    await idx.close()
            return export, await _fresh(vault, ledger_path(wd))

        incremental, fresh = asyncio.run(run())
        assert_same_store(incremental, fresh)


def test_extracted_names_follow_the_notes_they_name(tmp_path: Path) -> None:
    """An extracted name is a graph entity while a note of that name exists (and an
    implicit one otherwise); an extracted relation gives way to a link that states it."""
    vault, wd = tmp_path / "v", tmp_path / "wd"
    write(vault, "Ada Byron.md", "Ada Byron met Charles Babbage in London Town.\n")

    async def run() -> None:
        with LLMServer() as llm:
            idx = await _open(vault, wd, llm, threshold=0.0)

            async def check() -> tuple[dict[str, Any], dict[tuple[str, str], Any]]:
                return _llm_items(await _same_as_fresh(idx, vault, wd))

            try:
                ents, rels = await check()
                assert "Charles Babbage" in ents and "Ada Byron" not in ents  # a note has it
                assert ("Ada Byron", "Charles Babbage") in rels
                steps: list[tuple[str, str | None, Any]] = [
                    ("Charles Babbage.md", "Engines.\n", lambda e, r: "Charles Babbage" not in e),
                    (
                        "B/Charles Babbage.md",
                        "More engines.\n",
                        lambda e, r: "Charles Babbage" in e,
                    ),
                    ("B/Charles Babbage.md", None, lambda e, r: "Charles Babbage" not in e),
                    (
                        "Ada Byron.md",
                        "Ada Byron met Charles Babbage in London Town.\n\n# See\n\n[[Charles Babbage]]\n",
                        lambda e, r: ("Ada Byron", "Charles Babbage") not in r,
                    ),
                    (
                        "Ada Byron.md",
                        "Ada Byron met Charles Babbage in London Town.\n",
                        lambda e, r: ("Ada Byron", "Charles Babbage") in r,
                    ),
                    # A link in *another* note states the relation: it gives way.
                    (
                        "Charles Babbage.md",
                        "Engines. [[Ada Byron]]\n",
                        lambda e, r: ("Ada Byron", "Charles Babbage") not in r,
                    ),
                    (
                        "Charles Babbage.md",
                        "Engines.\n",
                        lambda e, r: ("Ada Byron", "Charles Babbage") in r,
                    ),
                    # A note whose title differs in case takes the name over, relations too.
                    (
                        "London town.md",
                        "A place.\n",
                        lambda e, r: (
                            "London Town" not in e and ("Charles Babbage", "London town") in r
                        ),
                    ),
                    ("Charles Babbage.md", None, lambda e, r: "Charles Babbage" in e),
                    ("London town.md", None, lambda e, r: ("Charles Babbage", "London Town") in r),
                ]
                for path, text, expect in steps:
                    if text is None:
                        delete(vault, path)
                    else:
                        write(vault, path, text)
                    await _step(idx, {path})
                    ents, rels = await check()
                    assert expect(ents, rels), (path, sorted(ents), sorted(rels))
            finally:
                await idx.close()

    asyncio.run(run())


def test_a_cold_start_is_extracted_and_written_in_slices(tmp_path: Path) -> None:
    """The daemon sends a big backlog a slice at a time and writes each slice, so results
    show up as they come; the slices add up to the same store."""
    vault = tmp_path / "v"
    _make(vault)

    async def run() -> None:
        with LLMServer() as llm:
            settings = ExtractSettings(LLMConfig(llm.url, "stand-in"), threshold=0.0)
            idx = await Index.open(
                vault, tmp_path / "wd", workspace=unique_workspace(), extraction=settings
            )
            try:
                await idx.sync()
                rounds = []
                while True:
                    report = await idx.extract(limit=2)
                    rounds.append(report["sent"])
                    if not report["more"]:
                        break
                assert len(rounds) >= 3 and max(rounds) == 2, rounds
                assert not idx.sink.implicit.missing and len(llm.requests) == sum(rounds)
                await _same_as_fresh(idx, vault, tmp_path / "wd")
            finally:
                await idx.close()

    asyncio.run(run())


def test_extraction_calls_stay_within_the_concurrency_limit(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    _make(vault)

    async def run() -> int:
        with LLMServer(delay=0.3) as llm:
            idx = await _open(vault, tmp_path / "wd", llm, threshold=0.0, concurrency=2)
            await idx.close()
            assert len(llm.requests) >= 5
            return llm.max_in_flight

    assert asyncio.run(run()) == 2  # in parallel, but never more than asked
