"""The store on the shared real vaults: LightRAG's own queries find the right notes
with no LLM, and random edits applied incrementally equal a fresh build."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import recall
from conftest import shared_vault
from lightrag import QueryParam
from servertools import LightRAGServer, paths_in
from storetools import (
    assert_same_store,
    fresh_export,
    ledger_path,
    seed_ledger,
    unique_workspace,
)
from test_real_vaults import _random_edits

from wikid.ask import query as wq
from wikid.store.backends import ledger_file
from wikid.store.export import export_store
from wikid.sync.index import Index

pytestmark = pytest.mark.slow
MODES = ("local", "global", "hybrid", "mix", "naive")

# Written from the notes (tests/questions.json); these tests use the ones that also carry
# hand-written LightRAG keywords: (question, expected note, high-level, low-level).
QUESTIONS = {
    vault: [(q["question"], q["expected"], q["hl"], q["ll"]) for q in items if "hl" in q]
    for vault, items in json.loads((Path(__file__).parent / "questions.json").read_text()).items()
    if vault not in ("related", "held-out", "knowledge-garden")  # own sets (tests/recall.py)
}
# The held-out sets (issue 49): the figures reached, in questions found of each kind, per
# evidence budget. A floor is the figure less one question.
HELD_OUT = {
    ("vaultofknowledge", 3000): {"multi-hop": 25, "paraphrase": 14},
    ("vaultofknowledge", 1000): {"multi-hop": 23, "paraphrase": 12},
    ("tasks-docs", 3000): {"multi-hop": 8, "paraphrase": 6},
    ("tasks-docs", 1000): {"multi-hop": 6, "paraphrase": 6},
}


def _writable_copy(name: str, dest: Path) -> Path:
    root = dest / name
    shutil.copytree(shared_vault(name), root)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return root


@pytest.fixture(scope="module", params=["tasks-docs", "vaultofknowledge"])
def indexed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    vault = _writable_copy(name, tmp)
    loop = asyncio.new_event_loop()
    idx = loop.run_until_complete(
        Index.open(vault, tmp / "wd", workspace=unique_workspace(name[:4]))
    )
    report = loop.run_until_complete(idx.sync())
    yield {
        "name": name,
        "vault": vault,
        "idx": idx,
        "loop": loop,
        "report": report,
        "workdir": tmp / "wd",
    }
    loop.run_until_complete(idx.close())
    loop.close()


def test_cold_index_makes_no_llm_calls(indexed: dict[str, Any]) -> None:
    report = indexed["report"]
    assert report["llm_calls"] == 0 and report["notes"] == len(indexed["idx"].vg.notes)
    assert report["entities"] > report["notes"] and report["relations"] > 0


def test_lightrag_queries_find_the_right_notes(indexed: dict[str, Any]) -> None:
    idx, loop = indexed["idx"], indexed["loop"]
    hits: dict[str, int] = dict.fromkeys(MODES, 0)
    missed = []
    questions = QUESTIONS[indexed["name"]]
    for question, expected, hl, ll in questions:
        for mode in MODES:
            param = QueryParam(mode=mode, enable_rerank=False, hl_keywords=hl, ll_keywords=ll)
            result = loop.run_until_complete(idx.store.rag.aquery_data(question, param))
            data = result.get("data", {})
            paths = {c.get("file_path") for c in data.get("chunks", [])}
            for item in data.get("entities", []) + data.get("relationships", []):
                paths |= set((item.get("file_path") or "").split("<SEP>"))
            if expected in paths:
                hits[mode] += 1
            else:
                missed.append((mode, question))
    assert idx.store.llm_calls == 0
    # Every question is answered by the graph-aware modes; all modes together find most.
    for mode in ("local", "hybrid", "mix"):
        assert hits[mode] == len(questions), (mode, missed)
    assert sum(hits.values()) >= 0.8 * len(questions) * len(MODES), missed


def _answer(result: dict[str, Any]) -> dict[str, Any]:
    data = result.get("data", {})
    return {
        "entities": [e["entity_name"] for e in data.get("entities", [])],
        "relationships": [(r["src_id"], r["tgt_id"]) for r in data.get("relationships", [])],
        "chunks": [(c.get("chunk_id"), c.get("file_path")) for c in data.get("chunks", [])],
    }


def test_sqlite_store_answers_like_stock_storages(indexed: dict[str, Any], tmp_path: Path) -> None:
    """LightRAG's own aquery_data, every mode, every question: the same entities,
    relations and chunks, in the same order, from the SQLite store as from stock files.
    (Runs before the random edits: LightRAG breaks ties by storage order, which for
    both backends is insertion order, so an edited store and a fresh one may order
    ties differently.)"""
    idx, loop = indexed["idx"], indexed["loop"]
    assert idx.store.backend == "sqlite"
    stock = loop.run_until_complete(
        _seeded_index(indexed["vault"], tmp_path, _ledger(indexed["workdir"]))
    )
    try:
        compared = 0
        for question, _, hl, ll in QUESTIONS[indexed["name"]]:
            for mode in MODES:
                param = QueryParam(mode=mode, enable_rerank=False, hl_keywords=hl, ll_keywords=ll)
                ours = _answer(loop.run_until_complete(idx.store.rag.aquery_data(question, param)))
                theirs = _answer(
                    loop.run_until_complete(stock.store.rag.aquery_data(question, param))
                )
                assert ours == theirs, (mode, question)
                compared += bool(ours["entities"] or ours["chunks"])
        assert compared >= len(QUESTIONS[indexed["name"]]) * len(MODES) * 0.8
    finally:
        loop.run_until_complete(stock.close())


async def _seeded_index(vault: Path, workdir: Path, seed: Path) -> Index:
    """A stock-files store of the vault, its embedding cache seeded (no re-embedding)."""
    workspace = unique_workspace("stock")
    seed_ledger(workdir / workspace / ledger_file("lightrag-files"), seed)
    idx = await Index.open(vault, workdir, workspace=workspace, backend="lightrag-files")
    report = await idx.sync()
    assert report["embedded"] == 0
    return idx


def test_budgeted_evidence_finds_the_source_note(indexed: dict[str, Any]) -> None:
    """Recall@budget over the questions in tests/questions.json, with no LLM, against
    plain aquery_data cut to the same budget. Printed for the record (pytest -s). Runs
    before the random edits, which may delete an expected note."""
    idx, loop = indexed["idx"], indexed["loop"]
    questions = json.loads((Path(__file__).parent / "questions.json").read_text())[indexed["name"]]
    calls = idx.store.llm_calls
    table = []
    for budget in (3000, 500):
        ours = plain = tokens = 0
        for q in questions:
            ev = loop.run_until_complete(wq.evidence(idx, q["question"], "mix", budget))
            assert ev["tokens"] <= budget
            tokens += ev["tokens"]
            found = {i["path"] for k in ("entities", "relations", "chunks") for i in ev[k]}
            ours += q["expected"] in found
            cut = loop.run_until_complete(wq.baseline(idx, q["question"], "mix", budget))
            plain += q["expected"] in wq.paths_of(cut)
        n = len(questions)
        table.append(
            f"{indexed['name']} budget {budget}: recall {ours}/{n} (mean {tokens // n} tokens) vs aquery_data cut {plain}/{n}"
        )
        if budget == 3000:
            assert ours >= 0.9 * n and ours >= plain, table
    assert idx.store.llm_calls == calls
    print("\n" + "\n".join(table))


def test_graph_aware_recall_per_kind_beats_bm25(indexed: dict[str, Any]) -> None:
    """Relational, paraphrase and multi-hop questions written on this vault
    (tests/questions.json, with their kind): the evidence holds every note each needs at
    least as often as BM25's top 8 notes, with 0 LLM calls. Printed for the record."""
    idx, loop = indexed["idx"], indexed["loop"]
    items = [q for q in recall.questions(indexed["name"]) if q["kind"] != "lookup"]
    assert len(items) >= 10
    tallies = loop.run_until_complete(recall.score(idx, items))
    print("\n" + "\n".join(recall.table(indexed["name"], tallies)))
    ours = sum(t.ours for t in tallies.values())
    assert ours >= 0.85 * len(items), [m for t in tallies.values() for m in t.missed]
    for kind, t in tallies.items():
        assert t.ours >= t.bm25, (kind, t.missed)


def test_held_out_recall_holds_its_floor(indexed: dict[str, Any]) -> None:
    """The held-out sets, written before any tuning and asked of the whole vault: a
    multi-hop question describes a note in other words and asks what a note it links
    to (or that links to it) says. Each kind holds the figure it reached, less one
    question, at two budgets; multi-hop finds more than BM25's top 8 notes."""
    idx, loop = indexed["idx"], indexed["loop"]
    items = recall.questions(indexed["name"], held_out=True)
    for budget in (3000, 1000):
        tallies = loop.run_until_complete(recall.score(idx, items, budget, baselines=False))
        print("\n" + "\n".join(recall.table(f"{indexed['name']} {budget}", tallies)))
        for kind, reached in HELD_OUT[(indexed["name"], budget)].items():
            t = tallies[kind]
            assert t.ours >= reached - 1, (budget, kind, t.ours, t.missed)
        hops = tallies["multi-hop"]
        assert hops.candidates == hops.n, hops.missed  # the linked note is always a candidate
        assert hops.ours > hops.bm25, (budget, hops.ours, hops.bm25)


def test_the_vector_graph_finds_what_an_exact_scan_finds(
    indexed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 50: the HNSW graph's top 10 (``store/_ann.py``, its candidates rescored
    exactly, as every query and related-notes lookup asks) holds >= 0.99 of the exact
    scan's, in each namespace, asked with this vault's questions and with 300 of its
    chunks (what related notes ask with). The vaults are under the size where the graph
    is used by default, so the minimum is lowered here."""
    idx, loop = indexed["idx"], indexed["loop"]
    rag = idx.store.rag
    texts = [q["question"] for q in recall.questions(indexed["name"])]
    texts += [q["question"] for q in recall.questions(indexed["name"], held_out=True)]
    asked = np.asarray(loop.run_until_complete(rag.embedding_func(texts, context="query")))
    chunk_ids = rag.chunks_vdb._index.ids[::7][:300]
    chunks = loop.run_until_complete(rag.chunks_vdb.get_arrays_by_ids(chunk_ids))
    queries = np.concatenate([asked, np.asarray(list(chunks.values()), np.float32)])
    for vdb in (rag.chunks_vdb, rag.entities_vdb, rag.relationships_vdb):
        monkeypatch.setenv("WIKID_ANN_MIN_ROWS", str(10**9))
        exact = vdb._nearest(queries, 10)
        monkeypatch.setenv("WIKID_ANN_MIN_ROWS", "1")
        vdb._index._maybe_build()
        vdb._index.wait_for_graph()
        assert vdb._index.searched_by_graph
        graph = vdb._nearest(queries, 10)
        hits = [
            len({r["id"] for r in e} & {r["id"] for r in g}) / max(len(e), 1)
            for e, g in zip(exact, graph, strict=True)
        ]
        print(f"\n{indexed['name']} {vdb.namespace}: graph recall@10 {np.mean(hits):.4f}")
        assert np.mean(hits) >= 0.99, (vdb.namespace, np.mean(hits))


def test_related_notes_beat_meaning_links_and_title_search(indexed: dict[str, Any]) -> None:
    """The hand-checked related-notes sets of this vault (tests/questions.json): recall@10
    of ``wikid related`` above each of meaning alone, links alone and BM25 of the note's
    title, linked notes left out of all four. Printed for the README's table."""
    idx, loop = indexed["idx"], indexed["loop"]
    sets = recall.related_sets(indexed["name"])
    assert len(sets) >= 20
    got = loop.run_until_complete(recall.related_recall(idx, sets))
    print(f"\n{indexed['name']} related recall@10 {got}")
    assert got["wikid"] > max(got["vectors"], got["links"], got["bm25_title"]), got
    assert got["wikid"] >= got["bm25_opening"] + 0.15, got  # the stronger baseline
    if indexed["name"] == "vaultofknowledge":
        # 20 seeds judged before wikid was asked about them (issue 51), half related by
        # meaning rather than title words: lower figures (0.575 against BM25's 0.401
        # when written), the same margin over the stronger baseline
        later = loop.run_until_complete(
            recall.related_recall(idx, recall.related_sets("vaultofknowledge-round4"))
        )
        print(f"vaultofknowledge round-4 seeds: related recall@10 {later}")
        assert later["wikid"] > max(later["vectors"], later["links"], later["bm25_title"])
        assert later["wikid"] >= later["bm25_opening"] + 0.15, later


def test_lightrag_server_finds_each_question_note_in_every_mode(
    indexed: dict[str, Any], tmp_path: Path
) -> None:
    """LightRAG's own server on this store (``wikid lightrag-server``, read-only, asking
    with the store's model): ``/query/data`` returns entities and chunks in every mode,
    and finds each question's note as LightRAG does in-process."""
    workspace = indexed["idx"].store.workspace
    config = tmp_path / "wikid.toml"
    config.write_text(f'[vaults.{workspace}]\npath = "{indexed["vault"]}"\n', "utf-8")
    args = ["--config", str(config), "--vault", workspace, "--workdir", str(indexed["workdir"])]
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run"), "XDG_DATA_HOME": str(tmp_path)}
    questions = QUESTIONS[indexed["name"]]
    hits: dict[str, int] = dict.fromkeys(MODES, 0)
    plain: dict[str, int] = dict.fromkeys(MODES, 0)  # asked as a new user asks: no keywords
    missed = []
    with LightRAGServer(args, tmp_path, env=env) as server:
        for question, expected, hl, ll in questions:
            for mode in MODES:
                data = server.query_data(question, mode, hl, ll)
                assert data["chunks"] and (mode == "naive" or data["entities"]), (mode, question)
                if expected in paths_in(data):
                    hits[mode] += 1
                else:
                    missed.append((mode, question))
                # No LLM and no daemon: the keywords are the question's content words.
                data = server.query_data(question, mode, [], [])
                assert data["chunks"] and (mode == "naive" or data["entities"]), (mode, question)
                plain[mode] += expected in paths_in(data)
    print(f"\n{indexed['name']}: with an LLM's keywords {hits}, with none {plain}")
    # As in-process (test_lightrag_queries_find_the_right_notes): the graph-aware modes
    # find every question, all modes together most of them; and as well with no keywords
    # given and no LLM to ask for them.
    for mode in ("local", "hybrid", "mix"):
        assert hits[mode] == len(questions), (mode, missed)
    assert sum(hits.values()) >= 0.8 * len(questions) * len(MODES), missed
    for mode in ("hybrid", "mix"):
        assert plain[mode] == len(questions), (mode, plain)
    assert sum(plain.values()) >= sum(hits.values()) - 2, (plain, hits)


def test_random_edits_equal_a_fresh_build(indexed: dict[str, Any]) -> None:
    idx, loop, vault = indexed["idx"], indexed["loop"], indexed["vault"]
    rng = random.Random(7)
    for _ in range(4):
        delta = idx.vg.update(_random_edits(vault, rng, idx.vg))
        loop.run_until_complete(idx.sink.apply(delta))
    incremental = loop.run_until_complete(export_store(idx.store))
    # The fresh build gets a copy of the embedding cache (a pure text -> vector cache),
    # so the comparison does not pay for every embedding twice; its store starts empty.
    fresh = asyncio.run(fresh_export(vault, seed_vectors=_ledger(indexed["workdir"])))
    assert_same_store(incremental, fresh)


def _ledger(workdir: Path) -> Path:
    path = ledger_path(workdir)
    assert sqlite3.connect(path).execute("SELECT count(*) FROM vectors").fetchone()[0] > 0
    return path
