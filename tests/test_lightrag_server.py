"""LightRAG's own API server and WebUI on wikid's store (``wikid lightrag-server``): the
real server on a free loopback port, on a store a running daemon keeps fresh, asked
over its REST API with httpx. It answers ``/query/data`` in every mode with the store's
own model, sees each edit, refuses every write, and its WebUI shows the vault's graph."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from conftest import shared_vault
from daemontools import DaemonProc, copy_example
from graphtools import write
from llmserver import LLMServer
from servertools import LightRAGServer, chromium, paths_in

from wikid.core.graph import VaultGraph

MODES = ("local", "global", "hybrid", "mix", "naive")
QUESTION = "Who wrote the first program for the Analytical Engine?"
HL, LL = ["history of programming"], ["Ada Lovelace", "Analytical Engine", "first program"]
WRITES = [
    ("POST", "/documents/text", {"text": "an intruder", "file_source": "x.md"}),
    ("POST", "/documents/texts", {"texts": ["an intruder"]}),
    ("POST", "/documents/scan", None),
    ("DELETE", "/documents", None),
    ("DELETE", "/documents/delete_document", {"doc_ids": ["doc-x"]}),
    ("POST", "/documents/clear_cache", {}),
    (
        "POST",
        "/graph/entity/edit",
        {"entity_name": "Ada Lovelace", "updated_data": {"description": "x"}},
    ),
    ("POST", "/graph/entity/create", {"entity_name": "Intruder", "entity_data": {}}),
    ("DELETE", "/graph/entity/delete", {"entity_name": "Ada Lovelace"}),
    (
        "POST",
        "/graph/relation/edit",
        {"source_id": "Ada Lovelace", "target_id": "Welcome", "updated_data": {}},
    ),
]


def _export(workdir: Path, *args: str) -> bytes:
    cmd = [sys.executable, "-m", "wikid", "export", "--workdir", str(workdir), *args]
    return subprocess.run(cmd, capture_output=True, timeout=120, check=True).stdout


def _neighbours(server: LightRAGServer, label: str) -> set[str]:
    sub = server.http.get("/graphs", params={"label": label, "max_depth": 1}).json()
    return {n["id"] for n in sub["nodes"]}


def test_the_server_answers_with_the_store_model_sees_edits_and_refuses_writes(
    tmp_path: Path,
) -> None:
    vault = copy_example(tmp_path / "example")
    d = DaemonProc(vault, tmp_path).start()
    files = sorted(p.relative_to(vault) for p in vault.rglob("*"))
    server = LightRAGServer(  # started from inside the vault, as a user may
        ["--vault", str(vault), "--workdir", str(d.workdir)], tmp_path, env=d.env, cwd=vault
    )
    try:
        server.wait()
        assert sorted(p.relative_to(vault) for p in vault.rglob("*")) == files  # nothing made
        assert (d.workdir / "inputs").is_dir()  # LightRAG's upload folder: wikid's state
        labels = server.http.get("/graph/label/list").json()
        assert {
            "Ada Lovelace",
            "Charles Babbage",
            "Analytical Engine",
            "Welcome",
            "#person",
        } <= set(labels)
        assert {"Analytical Engine", "Charles Babbage"} <= _neighbours(server, "Ada Lovelace")
        sub = server.http.get("/graphs", params={"label": "Ada Lovelace", "max_depth": 1}).json()
        ada = next(n for n in sub["nodes"] if n["id"] == "Ada Lovelace")["properties"]
        assert (ada["file_path"], ada["title"], ada["tags"]) == (
            "People/Ada Lovelace.md",
            "Ada Lovelace",
            "person",
        )

        for mode in MODES:  # questions are embedded by the model the store was built with
            data = server.query_data(QUESTION, mode, HL, LL)
            assert data["chunks"], mode
            if mode != "naive":
                assert data["entities"], mode
            assert "People/Ada Lovelace.md" in paths_in(data), mode

        before = _export(d.workdir)
        for method, path, body in WRITES:
            r = server.http.request(method, path, json=body)
            assert r.status_code == 403, (method, path, r.status_code, r.text)
            assert r.json()["read_only"] and "source of truth" in r.json()["detail"]
        assert _export(d.workdir) == before  # byte for byte: nothing was written
        assert "Intruder" not in server.http.get("/graph/label/list").json()

        saved = time.monotonic()
        write(vault, "Grace Hopper.md", "Grace Hopper admired [[Ada Lovelace]].\n")
        while "Grace Hopper" not in _neighbours(server, "Ada Lovelace"):
            assert time.monotonic() - saved < 5, "the edit did not show in /graphs within 5 s"
            time.sleep(0.2)
        data = server.query_data(
            "Who admired Ada Lovelace?", "local", ["admiration"], ["Grace Hopper"]
        )
        assert "Grace Hopper.md" in paths_in(data)

        browser = chromium()
        if browser is None:
            pytest.fail("chromium is not installed (.ci/setup installs it with apt)")
        import screenshot

        shot = screenshot.webui_graph(browser, server.url + "/webui/", tmp_path / "webui.png")
        png = shot.read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 20_000
        if os.environ.get("WIKID_DOCS_SCREENSHOT"):  # how docs/webui-graph.png was made
            Path(os.environ["WIKID_DOCS_SCREENSHOT"]).write_bytes(png)
    finally:
        server.stop()
        d.stop()


def test_a_graphml_export_leads_back_to_the_notes(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "vault")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "wikid",
            "index",
            "--vault",
            str(vault),
            "--workdir",
            str(tmp_path / "wd"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")},
    )
    assert out.returncode == 0, out.stderr
    _export(tmp_path / "wd", "--format", "graphml", "-o", str(tmp_path / "g.graphml"))
    g = nx.read_graphml(tmp_path / "g.graphml")
    notes = set(VaultGraph.load(vault).notes)  # (Templates/ is in userIgnoreFilters)
    with_note = {
        n: d
        for n, d in g.nodes(data=True)
        if d["entity_type"] not in ("tag", "unresolved", "attachment")
    }
    assert {d["file_path"] for d in with_note.values()} == notes
    assert (
        g.nodes["Ada Lovelace"]["title"] == "Ada Lovelace"
        and g.nodes["Ada Lovelace"]["tags"] == "person"
    )
    assert all(d["source_id"] for d in with_note.values())
    assert all(d["file_path"] and d["source_id"] for *_, d in g.edges(data=True))


def _ask(server: LightRAGServer, question: str, mode: str) -> dict[str, Any]:
    """``/query/data`` as a new user calls it: the question and a mode, no keywords."""
    body = {"query": question, "mode": mode, "enable_rerank": False}
    r = server.http.post("/query/data", json=body)
    assert r.status_code == 200, r.text
    reply: dict[str, Any] = r.json()
    return reply


@pytest.mark.slow
def test_with_no_llm_every_mode_retrieves_the_answer_note(tmp_path: Path) -> None:
    """No LLM configured, a question asked as a new user asks it (no keywords): LightRAG's
    keyword step gets wikid's LLM-free keywords (the daemon's ``keywords`` op), so local,
    global, hybrid and mix retrieve, as well as with an LLM's keywords (the hand-written
    ones of tests/questions.json); any answer is refused with "no LLM configured", never
    invented. (test_store_real_vaults asks both shared vaults with no daemon running.)"""
    vault = shared_vault("tasks-docs")
    d = DaemonProc(vault, tmp_path).start(timeout=600)
    args = ["--vault", str(vault), "--workdir", str(d.workdir), "--socket", str(d.socket)]
    server = LightRAGServer(args, tmp_path, env=d.env)
    questions = json.loads((Path(__file__).parent / "questions.json").read_text())["tasks-docs"]
    try:
        server.wait()
        ours, llms = dict.fromkeys(MODES, 0), dict.fromkeys(MODES, 0)
        for q in questions:
            wikid_keywords = d.call("keywords", text=q["question"])
            for mode in MODES:
                reply = _ask(server, q["question"], mode)
                assert reply["status"] == "success", (mode, reply)
                if mode != "naive":  # keywords are asked for in every mode but naive
                    said = reply["metadata"]["keywords"]
                    assert said["high_level"] == wikid_keywords["high"], (mode, q)
                    assert said["low_level"] == wikid_keywords["low"], (mode, q)
                    assert reply["data"]["entities"], (mode, q)
                ours[mode] += q["expected"] in paths_in(reply["data"])
                if "hl" in q:  # the lookups have none: as an LLM would, take ours
                    reply["data"] = server.query_data(q["question"], mode, q["hl"], q["ll"])
                llms[mode] += q["expected"] in paths_in(reply["data"])
        print(f"\ntasks-docs, of {len(questions)}: wikid's keywords {ours}, an LLM's {llms}")
        for mode in MODES:
            assert ours[mode] >= llms[mode], (mode, ours, llms)
            assert ours[mode] >= ours["naive"], (mode, ours)
        question = questions[0]["question"]
        r = server.http.post("/query", json={"query": question, "mode": "mix"})
        assert r.status_code == 503 and "no LLM configured" in r.json()["detail"], r.text
        context = {"query": question, "mode": "mix", "only_need_context": True}
        r = server.http.post("/query", json=context)  # the context alone needs no LLM
        assert r.status_code == 200 and "Recurring Tasks" in r.json()["response"], r.text
    finally:
        server.stop()
        d.stop()


def test_with_an_llm_configured_lightrag_asks_it_for_keywords(tmp_path: Path) -> None:
    vault = copy_example(tmp_path / "example")
    with LLMServer() as llm:
        env = {"WIKID_LLM_BASE_URL": llm.url + "/v1", "WIKID_LLM_MODEL": "stand-in"}
        d = DaemonProc(vault, tmp_path, env=env).start()
        args = ["--vault", str(vault), "--workdir", str(d.workdir), "--socket", str(d.socket)]
        server = LightRAGServer(args, tmp_path, env=d.env)
        try:
            server.wait()
            before = len(llm.requests)
            for mode in ("local", "mix"):
                server.http.post("/query/data", json={"query": QUESTION, "mode": mode})
            asked = [r for r in llm.requests[before:] if "User Query:" in json.dumps(r["body"])]
            assert len(asked) >= 2, llm.requests[before:]  # one keyword call a mode, at least
        finally:
            server.stop()
            d.stop()
