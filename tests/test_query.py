"""Queries: budgeted evidence with no LLM, full-text search in step with the store, and
answers from a (stand-in) LLM whose every token lands in the cost ledger."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from daemontools import DaemonProc, copy_example
from graphtools import delete, write
from llmserver import LLMServer
from storetools import unique_workspace

from wikid.ask import walk
from wikid.ask.answer import messages
from wikid.ask.shelf import Shelf
from wikid.client import RemoteError, request
from wikid.core.chunk import Chunk
from wikid.server.api import query, search
from wikid.sync.index import Index

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "example-vault"
QUESTION = "Who wrote the first program for the Analytical Engine?"


async def _open(vault: Path, wd: Path) -> Index:
    idx = await Index.open(vault, wd, workspace=unique_workspace())
    await idx.sync()
    return idx


def _paths(ev: dict[str, Any]) -> set[str]:
    return {i["path"] for k in ("entities", "relations", "chunks") for i in ev[k]}


def test_evidence_fits_the_budget_names_its_sources_and_calls_no_llm(tmp_path: Path) -> None:
    async def run() -> list[dict[str, Any]]:
        idx = await _open(EXAMPLE, tmp_path)
        try:
            return [await query(idx, QUESTION, "mix", b) for b in (3000, 120)]
        finally:
            await idx.close()

    big, small = asyncio.run(run())
    for ev, budget in ((big, 3000), (small, 120)):
        assert 0 < ev["tokens"] <= budget and ev["llm_calls"] == 0
        items = ev["entities"] + ev["relations"] + ev["chunks"]
        assert sum(i["tokens"] for i in items) == ev["tokens"]
        assert all(i["path"] and i["line"] for i in items), items
    assert "People/Ada Lovelace.md" in _paths(big)
    # Even 120 tokens hold the answer: some item names who wrote it.
    assert any(
        "Ada Lovelace" in i["text"] for k in ("entities", "relations", "chunks") for i in small[k]
    )
    assert small["tokens"] < big["tokens"]
    # The chunk items point at real lines and headings of their notes.
    for c in big["chunks"]:
        lines = (EXAMPLE / c["path"]).read_text().splitlines()
        assert 1 <= c["line"] <= len(lines)


def test_the_pick_reads_the_chunks_the_store_holds_as_the_chunker_makes_them(
    tmp_path: Path,
) -> None:
    """``ask.shelf``: a note's chunks read from the store's rows (one read for the whole
    pick) are its chunks as made, in text, order, start line and tokens; each chunk's
    heading and line are where it sits; with no row read, the note is chunked again."""

    async def run() -> None:
        idx = await _open(EXAMPLE, tmp_path)
        try:
            notes = sorted(idx.graph.notes)
            shelf = Shelf(idx)
            await shelf.read(notes)
            headed = 0
            for p in notes:
                made = idx.chunks(p)
                got = shelf.chunks(p)

                def fields(cs: list[Chunk]) -> list[tuple[Any, ...]]:
                    return [(c.id, c.order, c.content, c.start_line, c.tokens) for c in cs]

                assert fields(got) == fields(made) and all(c.heading == () for c in got), p
                assert Shelf(idx).chunks(p) == made  # nothing read: chunked again
                title = idx.graph.notes[p].title
                for c in made:
                    under = c.heading
                    if under and under[0].casefold() == title.casefold():
                        under = under[1:]
                    want = {"heading": " › ".join(under) or None, "line": c.start_line}
                    assert shelf.locate(p, c.id) == want, (p, c.id)
                    assert Shelf(idx).locate(p, c.id, c.content) == want  # its text at hand
                    headed += want["heading"] is not None
            assert headed >= 3  # the example vault's three sections under a heading
            assert shelf.locate(notes[0], "chunk-not-one-of-its") == {"heading": None, "line": 1}
        finally:
            await idx.close()

    asyncio.run(run())


def test_the_walk_keeps_the_words_the_retrieval_embedded_and_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question that names notes has its other words embedded in the retrieval's
    call (``store.retrieve``'s ``words``) and kept by the walk (``Meaning.keep``): the
    evidence is the one the walk gives embedding them itself, as it does for a model
    whose vectors may depend on their batch (an HTTP one), which keeps no words."""
    question = "Which person did Ada Lovelace work with on the Analytical Engine he designed?"

    async def ask(idx: Index) -> dict[str, Any]:
        walk._WORD_MEMOS.clear()
        return await query(idx, question, "mix", 3000, explain=True)

    async def run() -> None:
        idx = await _open(EXAMPLE, tmp_path)
        try:
            asked: list[str] = []
            embed = Index.embed
            monkeypatch.setattr(Index, "embed", lambda i, ts: asked.extend(ts) or embed(i, ts))
            kept = await ask(idx)
            named = [n for n, _ in idx.names_in(question)]
            words = walk.rest_words(question, named)
            assert set(walk._WORD_MEMOS[idx.model_id]) == set(words) == {"work", "he", "designed"}
            assert not set(words) & set(asked)  # the walk embedded none of them again
            passed: list[Any] = []
            retrieve = Index.retrieve

            async def spy(i: Index, *a: Any) -> dict[str, Any]:
                passed.append(a[-1])
                return await retrieve(i, *a)

            monkeypatch.setattr(Index, "retrieve", spy)
            again = await query(idx, question, "mix", 3000, explain=True)
            assert passed == [[]] and again["chunks"] == kept["chunks"]  # kept: not asked again
            monkeypatch.setattr(Index, "embeds_per_text", property(lambda _: False))
            plain = await ask(idx)
            assert not walk._WORD_MEMOS.get(idx.model_id)  # nothing kept
            for k in ("entities", "relations", "chunks"):
                assert plain[k] == kept[k] and kept[k], k
            assert any(i["path"] == "People/Ada Lovelace.md" for i in kept["entities"])
        finally:
            await idx.close()

    asyncio.run(run())


def test_bad_query_arguments_get_clear_reasons(tmp_path: Path) -> None:
    async def run() -> list[str]:
        idx = await _open(EXAMPLE, tmp_path)
        out = []
        try:
            for args in (
                ("", "mix", 100),
                ("x", "nope", 100),
                ("x", "mix", "lots"),
                ("x", "mix", 10),
            ):
                try:
                    await query(idx, *args)
                except Exception as exc:
                    out.append(f"{getattr(exc, 'code', '')}: {exc}")
        finally:
            await idx.close()
        return out

    errors = asyncio.run(run())
    assert len(errors) == 4 and all(e.startswith("bad_request") for e in errors), errors


def test_search_follows_each_batch(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE, vault)

    async def run() -> None:
        idx = await _open(vault, tmp_path / "wd")
        try:
            assert search(idx, "Somerville")["hits"] == []
            hit = search(idx, "analytical engine")["hits"][0]
            assert hit["path"] and hit["snippet"] and "tags" in hit
            write(
                vault,
                "People/Mary Somerville.md",
                "---\ntags: [person, science]\n---\nMary Somerville tutored Ada.\n",
            )
            await idx.sink.apply(idx.vg.update(["People/Mary Somerville.md"]))
            (hit,) = search(idx, "Somerville")["hits"]
            assert hit["path"] == "People/Mary Somerville.md" and "science" in hit["tags"]
            assert search(idx, "Somerville", folder="People")["hits"]
            assert search(idx, "Somerville", folder="Ideas")["hits"] == []
            assert search(idx, "Somerville", tag="science")["hits"]
            assert search(idx, "Somerville", tag="#person")["hits"]
            assert search(idx, "Somerville", tag="ai")["hits"] == []
            assert search(idx, 'tutored" OR "')["hits"]  # FTS syntax in user text is inert
            delete(vault, "People/Mary Somerville.md")
            await idx.sink.apply(idx.vg.update(["People/Mary Somerville.md"]))
            assert search(idx, "Somerville")["hits"] == []
        finally:
            await idx.close()

    asyncio.run(run())


def _llm_env(llm: LLMServer, kind: str) -> dict[str, str]:
    return {
        "WIKID_LLM_BASE_URL": llm.url + ("/v1" if kind == "openai" else ""),
        "WIKID_LLM_MODEL": "stand-in-1",
        "WIKID_LLM_KIND": kind,
        "WIKID_LLM_API_KEY": "sk-test-secret",
        "WIKID_LLM_PRICES": '{"stand-in-1": [1.0, 2.0]}',
    }


@pytest.mark.parametrize(("kind", "usage"), [("openai", True), ("ollama", True), ("openai", False)])
def test_answer_streams_from_the_evidence_only_and_every_token_is_ledgered(
    tmp_path: Path, kind: str, usage: bool
) -> None:
    vault = copy_example(tmp_path / "vault")
    with LLMServer(report_usage=usage) as llm:
        d = DaemonProc(vault, tmp_path, env=_llm_env(llm, kind)).start()
        try:
            pieces: list[str] = []
            res = d.call("query", text=QUESTION, answer=True, budget=400)
            res = request(
                d.socket, "query", text=QUESTION, answer=True, budget=400, on_partial=pieces.append
            )
            assert res["llm_calls"] == 0  # retrieval itself never calls the LLM
            answer = res["answer"]
            assert "".join(pieces) == answer["text"] and len(pieces) > 3  # it streamed
            assert answer["cited"] and set(answer["cited"]) <= _paths(res)
            # The prompt is exactly the selected evidence and the question: nothing else
            # of the vault (a note the evidence did not pick never reaches the LLM).
            received = llm.requests[-1]["body"]["messages"]
            assert received == messages(QUESTION, res)
            evidence_texts = [
                i["text"] for k in ("entities", "relations", "chunks") for i in res[k]
            ]
            prompt = "\n".join(m["content"] for m in received)
            assert all(t in prompt for t in evidence_texts)
            # (Other notes mention Zettelkasten; only its own note says "web of small".)
            assert "web of small" not in prompt or "Ideas/Zettelkasten.md" in _paths(res)
            assert llm.requests[-1]["auth"] == "Bearer sk-test-secret"
            # The ledger holds what the server counted, for both calls.
            cost = d.call("cost")
            assert cost["calls"] == 2 and cost["by_phase"][0]["phase"] == "query"
            assert cost["input_tokens"] == llm.prompt_tokens
            assert cost["output_tokens"] == llm.completion_tokens
            assert cost["cost"] == pytest.approx(
                (llm.prompt_tokens * 1.0 + llm.completion_tokens * 2.0) / 1e6
            )
            assert d.call("status")["cost"]["calls"] == 2
            assert "sk-test-secret" not in d.log.read_text()
            # The CLI streams the answer to the terminal.
            out = d.cli("query", QUESTION, "--answer")
            assert out.startswith("From your notes") and "tokens in" in out
        finally:
            d.stop()


def test_without_an_llm_the_evidence_says_how_to_configure_one(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "vault")
    d = DaemonProc(vault, tmp_path).start()
    try:
        res = d.call("query", text=QUESTION)
        assert "WIKID_LLM_BASE_URL" in res["llm"] and res["chunks"]
        with pytest.raises(RemoteError) as err:
            request(d.socket, "query", text=QUESTION, answer=True)
        assert err.value.code == "no_llm" and "WIKID_LLM_MODEL" in str(err.value)
        out = d.cli("query", QUESTION)
        assert "People/Ada Lovelace.md" in out and "WIKID_LLM_BASE_URL" in out
        assert d.call("cost")["calls"] == 0
    finally:
        d.stop()


def test_an_llm_failure_is_reported_and_costs_nothing(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "vault")
    with LLMServer(fail=True) as llm:
        d = DaemonProc(vault, tmp_path, env=_llm_env(llm, "openai")).start()
        try:
            with pytest.raises(RemoteError) as err:
                request(d.socket, "query", text=QUESTION, answer=True)
            assert err.value.code == "llm_failed" and "500" in str(err.value)
            assert d.call("status")["ready"] and d.call("cost")["calls"] == 0
        finally:
            d.stop()


def test_a_person_reads_one_screen_best_first_with_templates_below_content(
    tmp_path: Path,
) -> None:
    """``wikid query`` printed for a person (issue 48): about one screen unless --budget
    asks for more, in the order the evidence was chosen, each relation once, a template
    (Templates folder) below the notes with content, the no-LLM notice in one line."""
    import subprocess
    import sys

    vault = tmp_path / "v"
    write(
        vault,
        "Books/Out of Control.md",
        '---\nauthor: "[[Kevin Kelly]]"\ntype: book\n---\n'
        "Kevin Kelly wrote Out of Control about swarms, networks and machines that evolve.\n",
    )
    write(
        vault,
        "Kevin Kelly.md",
        "# Kevin Kelly\n\nFounding editor of Wired; he wrote Out of Control.\n",
    )
    write(
        vault,
        "Templates/Book Template.md",
        '---\nauthor: "{{author}}"\ncreated: {{date}}\n'
        "---\n# {{title}}\n\nWho wrote it: {{author}}. Written {{date}}. Out of Control? {{notes}}\n",
    )
    for i in range(30):
        write(
            vault, f"Misc/Note {i}.md", f"# Note {i}\n\nA note about swarms of bees, number {i}.\n"
        )
    d = DaemonProc(vault, tmp_path).start()
    where = ["--vault", str(vault), "--socket", str(d.socket)]
    try:

        def wikid(*args: str) -> str:
            argv = [sys.executable, "-m", "wikid", *args, *where]
            out = subprocess.run(argv, capture_output=True, text=True, env=d.env, timeout=120)
            assert out.returncode == 0, out.stderr
            return out.stdout

        screen = wikid("query", "Who wrote Out of Control?")
        lines = screen.splitlines()
        assert len(lines) <= 45, screen
        assert lines[-1].startswith("(no LLM configured") and "\n(no LLM" not in screen[:-200]
        items = [ln for ln in lines if ln.startswith(("entity", "relation", "chunk"))]
        first = next(i for i, ln in enumerate(items) if "Out of Control" in ln or "Kevin" in ln)
        templated = [i for i, ln in enumerate(items) if "Templates/" in ln]
        assert all(t > first for t in templated), screen
        pairs = [ln.split("  ")[1] for ln in items if ln.startswith("relation")]
        assert len(pairs) == len(set(pairs)), screen
        assert lines[0].endswith("of 1000 tokens, mode mix")  # one screen, by default
        more = wikid("query", "Who wrote Out of Control?", "--budget", "3000")
        assert more.splitlines()[0].endswith("of 3000 tokens, mode mix")
    finally:
        d.stop()
